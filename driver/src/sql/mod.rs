//! SQL connections, one small trait (`SqlConn`) over three dialects: SQLite (`sqlite`, through
//! rusqlite), MariaDB (`mariadb`, the pure-Rust client; `libmariadb`, its own C client library)
//! and PostgreSQL (`postgres`). What crosses a connection is a `V`: an integer, text or NULL.
//! TPC-C (`workloads::tpcc`) and the native OLTP tests (`workloads::oltp`) run over it.

pub mod libmariadb;
pub mod libpq;
pub mod mariadb;
pub mod postgres;
pub mod sqlite;

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::engines::{DbError, DbResult};

/// A connection's dialect: its placeholders, row locks and transaction statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    MariaDb,
    Postgres,
}

impl Dialect {
    /// A statement written with `?` placeholders, in this dialect.
    pub fn sql(self, text: &str) -> String {
        match self {
            Dialect::Sqlite | Dialect::MariaDb => text.to_string(),
            Dialect::Postgres => {
                let mut out = String::with_capacity(text.len() + 8);
                let mut n = 0;
                for ch in text.chars() {
                    if ch == '?' {
                        n += 1;
                        out.push_str(&format!("${n}"));
                    } else {
                        out.push(ch);
                    }
                }
                out
            }
        }
    }

    /// Row lock for reads that will be written in the same transaction.
    pub fn for_update(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            Dialect::MariaDb | Dialect::Postgres => " FOR UPDATE",
        }
    }

    /// A statement written with `?`, `{lock}` (the row lock) and `{bigint}` (PostgreSQL's SUM
    /// of a BIGINT is NUMERIC: read back as the integer it is), in this dialect.
    pub fn statement(self, text: &str) -> String {
        let bigint = if self == Dialect::Postgres {
            "::bigint"
        } else {
            ""
        };
        self.sql(
            &text
                .replace("{lock}", self.for_update())
                .replace("{bigint}", bigint),
        )
    }

    /// The session settings of a bulk load into fresh tables (and back): MariaDB checks no
    /// foreign keys and leaves unique secondary indexes unchecked (a fresh load has no
    /// duplicates: a second load is refused before it starts), and loads in READ COMMITTED,
    /// where loaders of disjoint keys need no write-write check: TidesDB (TideSQL) checks one
    /// at commit in REPEATABLE READ by a table of hash slots, and a commit turned back by the
    /// engine's back-pressure after it claimed its slots never frees them, so every later write
    /// of a key in those slots conflicts until the server restarts, the retry of that very
    /// commit too (the load's metadata, one row written right after the load, met it).
    pub fn bulk_session(self, on: bool) -> Option<&'static str> {
        match (self, on) {
            (Dialect::MariaDb, true) => Some(
                "SET SESSION unique_checks = 0, foreign_key_checks = 0, \
                 tx_isolation = 'READ-COMMITTED'",
            ),
            (Dialect::MariaDb, false) => Some(
                "SET SESSION unique_checks = 1, foreign_key_checks = 1, \
                 tx_isolation = 'REPEATABLE-READ'",
            ),
            _ => None,
        }
    }

    /// The statement that opens a transaction (SQLite: taking the write lock at once for one
    /// that writes).
    pub fn begin(self, write: bool) -> &'static str {
        match (self, write) {
            (Dialect::Sqlite, true) => "BEGIN IMMEDIATE",
            (Dialect::Sqlite, false) | (Dialect::Postgres, _) => "BEGIN",
            (Dialect::MariaDb, _) => "START TRANSACTION",
        }
    }
}

/// A server alloclab started (MariaDB or PostgreSQL): its unix socket, the database, the
/// tables' engine (MariaDB).
#[derive(Debug, Clone)]
pub struct Server {
    pub socket: PathBuf,
    pub database: String,
    pub table_engine: String,
}

/// A value crossing the connection: everything TPC-C stores is an integer or text.
#[derive(Debug, Clone, PartialEq)]
pub enum V {
    Null,
    I(i64),
    T(String),
}

impl From<u32> for V {
    fn from(x: u32) -> Self {
        V::I(x as i64)
    }
}
impl From<i32> for V {
    fn from(x: i32) -> Self {
        V::I(x as i64)
    }
}
impl From<i64> for V {
    fn from(x: i64) -> Self {
        V::I(x)
    }
}
impl From<bool> for V {
    fn from(x: bool) -> Self {
        V::I(x as i64)
    }
}
impl From<&String> for V {
    fn from(x: &String) -> Self {
        V::T(x.clone())
    }
}
impl From<String> for V {
    fn from(x: String) -> Self {
        V::T(x)
    }
}
impl From<&str> for V {
    fn from(x: &str) -> Self {
        V::T(x.to_string())
    }
}
impl<T: Into<V>> From<Option<T>> for V {
    fn from(x: Option<T>) -> Self {
        x.map_or(V::Null, Into::into)
    }
}

/// A statement's parameters, each made a `V`: `vals![w, d, &name]` is
/// `[V::from(w), V::from(d), V::from(&name)]`.
macro_rules! vals {
    ($($x:expr),* $(,)?) => { [$($crate::sql::V::from($x)),*] };
}
pub(crate) use vals;

impl V {
    pub(crate) fn i(&self) -> i64 {
        match self {
            V::I(x) => *x,
            // every TPC-C column read as a number is an integer here (money in cents): text that
            // is not one means a broken schema or driver, which must stop the run, not read as 0
            V::T(t) => t.trim().parse().unwrap_or_else(|_| {
                panic!("a TPC-C column held {t:?} where an integer was expected")
            }),
            V::Null => 0,
        }
    }
    pub(crate) fn u(&self) -> u32 {
        self.i() as u32
    }
    pub(crate) fn opt_u(&self) -> Option<u32> {
        (*self != V::Null).then(|| self.u())
    }
    pub(crate) fn opt_i(&self) -> Option<i64> {
        (*self != V::Null).then(|| self.i())
    }
    pub(crate) fn s(&self) -> String {
        match self {
            V::T(t) => t.clone(),
            V::I(x) => x.to_string(),
            V::Null => String::new(),
        }
    }
}

/// A server's stored procedures called over one connection `C`, each call prepared once (`S`,
/// the client library's prepared statement): `mariadb::Calls`, `postgres::Calls`.
pub struct Calls<C, S> {
    pub conn: C,
    calls: Vec<S>,
}

impl<C, S> Calls<C, S> {
    /// Prepare `calls` on `conn` by `prepare`, in order; `failed` is the error where one cannot
    /// be prepared.
    fn prepared<E>(
        mut conn: C,
        calls: &[&str],
        failed: String,
        mut prepare: impl FnMut(&mut C, &str) -> std::result::Result<S, E>,
    ) -> Result<Self>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let calls = calls
            .iter()
            .map(|s| prepare(&mut conn, s))
            .collect::<std::result::Result<Vec<_>, _>>()
            .context(failed)?;
        Ok(Calls { conn, calls })
    }
}

/// A statement prepared once on its connection (`SqlConn::prepare`), then run by this handle
/// without looking its text up again.
#[derive(Debug, Clone, Copy)]
pub struct Prepared(usize);

impl Prepared {
    pub(crate) fn new(index: usize) -> Self {
        Prepared(index)
    }
    pub(crate) fn index(self) -> usize {
        self.0
    }
}

/// One database connection, as narrow as TPC-C and the OLTP tests need.
pub trait SqlConn {
    fn dialect(&self) -> Dialect;
    /// Statements without parameters or results (BEGIN, COMMIT, DDL).
    fn batch(&mut self, sql: &str) -> DbResult<()>;
    /// Open a transaction (ended by COMMIT or ROLLBACK through `batch`).
    fn begin(&mut self, write: bool) -> DbResult<()> {
        let stmt = self.dialect().begin(write);
        self.batch(stmt)
    }
    fn query(&mut self, sql: &str, params: &[V]) -> DbResult<Vec<Vec<V>>>;
    fn exec(&mut self, sql: &str, params: &[V]) -> DbResult<()>;
    /// Prepare `sql` (in this dialect) on the server once, for `run`.
    fn prepare(&mut self, sql: &str) -> DbResult<Prepared>;
    /// Run a prepared statement, reading every row it returns and keeping none (as sysbench
    /// does); returns how many rows it returned or changed.
    fn run(&mut self, st: Prepared, params: &[V]) -> DbResult<u64>;
    /// Whether a load gives this connection its rows as text (`load_text`) rather than as
    /// multi-row INSERTs.
    fn loads_text(&self) -> bool {
        false
    }
    /// Store `rows` rows of `insert` (`INSERT INTO t VALUES (?, ...)`) written as text by
    /// `write_row`, the fastest way the server has.
    fn load_text(&mut self, insert: &str, _text: &[u8], _rows: u64) -> DbResult<()> {
        Err(DbError::Other(anyhow::anyhow!(
            "this connection loads rows as INSERTs, not as text: {insert}"
        )))
    }
}

/// The rows of `insert` as LOAD DATA's default text format (see `write_row`).
#[cfg(test)]
fn tab_separated(insert: &str, values: &[V]) -> Vec<u8> {
    let cols = insert.matches('?').count().max(1);
    let mut out = Vec::with_capacity(values.len() * 16);
    for row in values.chunks(cols) {
        write_row(&mut out, row);
    }
    out
}

/// One row in LOAD DATA's default text format: tab-separated fields ending in a newline, `\N`
/// for NULL, tabs, newlines and backslashes escaped by a backslash.
pub(crate) fn write_row(out: &mut Vec<u8>, row: &[V]) {
    for (i, v) in row.iter().enumerate() {
        if i > 0 {
            out.push(b'\t');
        }
        match v {
            V::Null => out.extend_from_slice(b"\\N"),
            V::I(x) => out.extend_from_slice(itoa::Buffer::new().format(*x).as_bytes()),
            V::T(t) if !t.bytes().any(|b| matches!(b, b'\t' | b'\n' | b'\\')) => {
                out.extend_from_slice(t.as_bytes())
            }
            V::T(t) => {
                for &b in t.as_bytes() {
                    match b {
                        b'\t' => out.extend_from_slice(b"\\t"),
                        b'\n' => out.extend_from_slice(b"\\n"),
                        b'\\' => out.extend_from_slice(b"\\\\"),
                        _ => out.push(b),
                    }
                }
            }
        }
    }
    out.push(b'\n');
}

/// A C string a client library returned, as text ("" for none).
pub(crate) fn c_text(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

/// The statement of this text on connection `c`, prepared on its first use and found again by
/// its text in `c`'s cache (`query` and `exec` run statements by their text).
pub(crate) fn prepared_by_text<C: SqlConn>(
    c: &mut C,
    sql: &str,
    cache: fn(&mut C) -> &mut std::collections::HashMap<String, Prepared>,
) -> DbResult<Prepared> {
    if let Some(p) = cache(c).get(sql) {
        return Ok(*p);
    }
    let p = c.prepare(sql)?;
    cache(c).insert(sql.to_string(), p);
    Ok(p)
}

// --- which client library a way of driving a server goes through -----------------------------
//
// A measured variable (the client's CPU per transaction depends on it), so it is chosen here and
// nowhere else:
// - sysbench's tests natively, and TPC-C's statements: the server's own C client library, the
//   one sysbench links (libmariadb, libpq);
// - TPC-C's rows, and its loads: the pure-Rust clients (`mysql`, `postgres`), statement by
//   statement (mariadb::MariaConn, postgres::PgConn);
// - TPC-C's procedures: the same clients, one call per transaction (mariadb::Calls,
//   postgres::Calls).

/// A connection through the server's own C client library (`mariadb` or `postgres`), as
/// sysbench connects: for the native OLTP client, whose cost is compared with sysbench's.
pub fn c_library_connection(engine: &str, server: &Server) -> Result<Box<dyn SqlConn + Send>> {
    Ok(match engine {
        "mariadb" => Box::new(libmariadb::Conn::connect(
            &server.socket,
            "root",
            &server.database,
        )?),
        "postgres" => Box::new(libpq::Conn::connect(server)?),
        other => anyhow::bail!("no SQL server engine '{other}': use mariadb or postgres"),
    })
}

/// MariaDB for TPC-C's statements: libmariadb, autocommit off (a transaction opens with its
/// first statement: no BEGIN round trip).
pub fn mariadb_statements(server: &Server) -> Result<libmariadb::Conn> {
    libmariadb::Conn::connect(&server.socket, "root", &server.database)?.transactional()
}

/// PostgreSQL for TPC-C's statements: libpq, as the native OLTP client and sysbench's pgsql
/// driver (the `postgres` crate's async runtime cost the client 4x the CPU per New-Order).
pub fn postgres_statements(server: &Server) -> Result<libpq::Conn> {
    libpq::Conn::connect(server)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_read_as_text_parse_and_anything_else_stops_the_run() {
        assert_eq!(V::T(" 42 ".into()).i(), 42);
        assert_eq!(V::Null.i(), 0);
        let bad = std::panic::catch_unwind(|| V::T("12.50".into()).i());
        assert!(bad.is_err(), "a non-integer must not read as 0");
    }

    #[test]
    fn rows_for_load_data_escape_what_its_text_format_reserves() {
        let rows = [
            V::I(1),
            V::T("a\tb\\c\nd".into()),
            V::Null,
            V::I(-2),
            V::T(String::new()),
            V::I(3),
        ];
        let text = tab_separated("INSERT INTO t VALUES (?, ?, ?)", &rows);
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "1\ta\\tb\\\\c\\nd\t\\N\n-2\t\t3\n"
        );
    }
}
