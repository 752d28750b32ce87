//! TPC-C over SQL, written once for SQLite, MariaDB and PostgreSQL: the same statements with
//! each dialect's placeholders and row locks (`FOR UPDATE`), through one small connection
//! trait. Money is BIGINT cents and rates BIGINT ten-thousandths in every dialect, so that the
//! consistency conditions compare exact integers.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{Context, Result};

use super::rows::*;
use super::{procs, stmts, Mode, TpccDb, TpccTx, TxnSession};
use crate::engines::sqlite::{map_err as sqlite_map_err, SqliteFile};
use crate::engines::{DbError, DbResult, EngineOptions};
use crate::workloads::libmariadb;

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
    /// duplicates: a second load is refused before it starts).
    pub fn bulk_session(self, on: bool) -> Option<&'static str> {
        match (self, on) {
            (Dialect::MariaDb, true) => {
                Some("SET SESSION unique_checks = 0, foreign_key_checks = 0")
            }
            (Dialect::MariaDb, false) => {
                Some("SET SESSION unique_checks = 1, foreign_key_checks = 1")
            }
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

/// The schema, HammerDB's table and column names; `{engine}` is MariaDB's ENGINE clause.
pub const SCHEMA: &[&str] = &[
    "CREATE TABLE warehouse (w_id INT PRIMARY KEY, w_name VARCHAR(10), w_street_1 VARCHAR(20), w_street_2 VARCHAR(20), w_city VARCHAR(20), w_state CHAR(2), w_zip CHAR(9), w_tax BIGINT, w_ytd BIGINT){engine}",
    "CREATE TABLE district (d_w_id INT, d_id INT, d_name VARCHAR(10), d_street_1 VARCHAR(20), d_street_2 VARCHAR(20), d_city VARCHAR(20), d_state CHAR(2), d_zip CHAR(9), d_tax BIGINT, d_ytd BIGINT, d_next_o_id INT, PRIMARY KEY (d_w_id, d_id)){engine}",
    "CREATE TABLE customer (c_w_id INT, c_d_id INT, c_id INT, c_first VARCHAR(16), c_middle CHAR(2), c_last VARCHAR(16), c_street_1 VARCHAR(20), c_street_2 VARCHAR(20), c_city VARCHAR(20), c_state CHAR(2), c_zip CHAR(9), c_phone CHAR(16), c_since BIGINT, c_credit CHAR(2), c_credit_lim BIGINT, c_discount BIGINT, c_balance BIGINT, c_ytd_payment BIGINT, c_payment_cnt INT, c_delivery_cnt INT, c_data VARCHAR(500), PRIMARY KEY (c_w_id, c_d_id, c_id)){engine}",
    "CREATE INDEX customer_by_name ON customer (c_w_id, c_d_id, c_last, c_first)",
    "CREATE TABLE history (h_c_id INT, h_c_d_id INT, h_c_w_id INT, h_d_id INT, h_w_id INT, h_date BIGINT, h_amount BIGINT, h_data VARCHAR(24)){engine}",
    "CREATE TABLE item (i_id INT PRIMARY KEY, i_im_id INT, i_name VARCHAR(24), i_price BIGINT, i_data VARCHAR(50)){engine}",
    "CREATE TABLE stock (s_w_id INT, s_i_id INT, s_quantity INT, s_dist_01 CHAR(24), s_dist_02 CHAR(24), s_dist_03 CHAR(24), s_dist_04 CHAR(24), s_dist_05 CHAR(24), s_dist_06 CHAR(24), s_dist_07 CHAR(24), s_dist_08 CHAR(24), s_dist_09 CHAR(24), s_dist_10 CHAR(24), s_ytd BIGINT, s_order_cnt INT, s_remote_cnt INT, s_data VARCHAR(50), PRIMARY KEY (s_w_id, s_i_id)){engine}",
    "CREATE TABLE orders (o_w_id INT, o_d_id INT, o_id INT, o_c_id INT, o_entry_d BIGINT, o_carrier_id INT, o_ol_cnt INT, o_all_local INT, PRIMARY KEY (o_w_id, o_d_id, o_id)){engine}",
    "CREATE INDEX orders_by_customer ON orders (o_w_id, o_d_id, o_c_id, o_id)",
    "CREATE TABLE new_order (no_w_id INT, no_d_id INT, no_o_id INT, PRIMARY KEY (no_w_id, no_d_id, no_o_id)){engine}",
    "CREATE TABLE order_line (ol_w_id INT, ol_d_id INT, ol_o_id INT, ol_number INT, ol_i_id INT, ol_supply_w_id INT, ol_delivery_d BIGINT, ol_quantity INT, ol_amount BIGINT, ol_dist_info CHAR(24), PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)){engine}",
    "CREATE TABLE tpcc_meta (k VARCHAR(16) PRIMARY KEY, v TEXT){engine}",
];

// Statements, written once with `?` placeholders; `{lock}` becomes the dialect's row lock.
const WAREHOUSE_GET: &str = "SELECT w_id, w_name, w_street_1, w_street_2, w_city, w_state, w_zip, w_tax, w_ytd FROM warehouse WHERE w_id = ?{lock}";
const WAREHOUSE_INSERT: &str = "INSERT INTO warehouse VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";
const WAREHOUSE_UPDATE: &str = "UPDATE warehouse SET w_ytd = ? WHERE w_id = ?";
const DISTRICT_GET: &str = "SELECT d_w_id, d_id, d_name, d_street_1, d_street_2, d_city, d_state, d_zip, d_tax, d_ytd, d_next_o_id FROM district WHERE d_w_id = ? AND d_id = ?{lock}";
const DISTRICT_INSERT: &str = "INSERT INTO district VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
const DISTRICT_UPDATE: &str =
    "UPDATE district SET d_ytd = ?, d_next_o_id = ? WHERE d_w_id = ? AND d_id = ?";
const CUSTOMER_COLS: &str = "c_w_id, c_d_id, c_id, c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, c_phone, c_since, c_credit, c_credit_lim, c_discount, c_balance, c_ytd_payment, c_payment_cnt, c_delivery_cnt, c_data";
const CUSTOMER_INSERT: &str =
    "INSERT INTO customer VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
const CUSTOMER_UPDATE: &str = "UPDATE customer SET c_balance = ?, c_ytd_payment = ?, c_payment_cnt = ?, c_delivery_cnt = ?, c_data = ? WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?";
const CUSTOMER_BY_LAST: &str =
    "SELECT c_id FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_last = ? ORDER BY c_first";
const ITEM_GET: &str = "SELECT i_id, i_im_id, i_name, i_price, i_data FROM item WHERE i_id = ?";
const ITEM_INSERT: &str = "INSERT INTO item VALUES (?, ?, ?, ?, ?)";
const STOCK_GET: &str = "SELECT s_w_id, s_i_id, s_quantity, s_dist_01, s_dist_02, s_dist_03, s_dist_04, s_dist_05, s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10, s_ytd, s_order_cnt, s_remote_cnt, s_data FROM stock WHERE s_w_id = ? AND s_i_id = ?{lock}";
const STOCK_INSERT: &str =
    "INSERT INTO stock VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
const STOCK_UPDATE: &str = "UPDATE stock SET s_quantity = ?, s_ytd = ?, s_order_cnt = ?, s_remote_cnt = ? WHERE s_w_id = ? AND s_i_id = ?";
const ORDER_COLS: &str =
    "o_w_id, o_d_id, o_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local";
const ORDER_INSERT: &str = "INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
const ORDER_UPDATE: &str =
    "UPDATE orders SET o_carrier_id = ? WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?";
const NEW_ORDER_INSERT: &str = "INSERT INTO new_order VALUES (?, ?, ?)";
const NEW_ORDER_OLDEST: &str =
    "SELECT MIN(no_o_id) FROM new_order WHERE no_w_id = ? AND no_d_id = ?";
const NEW_ORDER_DELETE: &str =
    "DELETE FROM new_order WHERE no_w_id = ? AND no_d_id = ? AND no_o_id = ?";
const LINE_COLS: &str = "ol_w_id, ol_d_id, ol_o_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d, ol_quantity, ol_amount, ol_dist_info";
const LINE_INSERT: &str = "INSERT INTO order_line VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
const LINE_UPDATE: &str = "UPDATE order_line SET ol_delivery_d = ? WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ? AND ol_number = ?";
const RECENT_ITEMS: &str = "SELECT ol_i_id FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id >= ? AND ol_o_id < ?";
const HISTORY_INSERT: &str = "INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
const CHECK_ORDERS: &str = "SELECT COALESCE(MAX(o_id), 0), COALESCE(SUM(o_ol_cnt), 0) FROM orders WHERE o_w_id = ? AND o_d_id = ?";
const CHECK_NEW_ORDERS: &str = "SELECT COALESCE(MIN(no_o_id), 0), COALESCE(MAX(no_o_id), 0), COUNT(*) FROM new_order WHERE no_w_id = ? AND no_d_id = ?";
const CHECK_LINES: &str = "SELECT COUNT(*) FROM order_line WHERE ol_w_id = ? AND ol_d_id = ?";

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
    fn opt_u(&self) -> Option<u32> {
        (*self != V::Null).then(|| self.u())
    }
    fn opt_i(&self) -> Option<i64> {
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

macro_rules! vals {
    ($($x:expr),* $(,)?) => { [$(V::from($x)),*] };
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

/// A connection to a server alloclab started (`mariadb` or `postgres`): MariaDB through
/// libmariadb, the client library sysbench uses.
pub fn connection(engine: &str, server: &Server) -> Result<Box<dyn SqlConn + Send>> {
    Ok(match engine {
        "mariadb" => Box::new(libmariadb::Conn::connect(
            &server.socket,
            "root",
            &server.database,
        )?),
        "postgres" => Box::new(
            TpccPostgres {
                server: server.clone(),
            }
            .connect()?,
        ),
        other => anyhow::bail!("no SQL server engine '{other}': use mariadb or postgres"),
    })
}

/// The engine clause of CREATE TABLE for MariaDB (e.g. InnoDB, ROCKSDB).
pub fn schema(dialect: Dialect, table_engine: &str) -> Vec<String> {
    let clause = if dialect == Dialect::MariaDb {
        format!(" ENGINE={table_engine}")
    } else {
        String::new()
    };
    SCHEMA
        .iter()
        .map(|s| {
            s.replace(
                "{engine}",
                if s.starts_with("CREATE TABLE") {
                    &clause
                } else {
                    ""
                },
            )
        })
        .collect()
}

// --- SQLite ------------------------------------------------------------------------------------

pub struct TpccSqlite {
    db: SqliteFile,
}

impl TpccSqlite {
    pub fn open(o: &EngineOptions) -> Result<Self> {
        std::fs::create_dir_all(&o.path)?;
        let db = SqliteFile::new(o.path.join("tpcc.sqlite"), o);
        let c = db.connect()?;
        let exists: bool = c
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'warehouse'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n > 0)?;
        if !exists {
            c.execute_batch(&format!(
                "BEGIN; {}; COMMIT;",
                schema(Dialect::Sqlite, "").join("; ")
            ))?;
        }
        Ok(TpccSqlite { db })
    }
}

impl TpccDb for TpccSqlite {
    fn session(&self) -> Result<Box<dyn TpccTx + '_>> {
        Ok(Box::new(SqlTx::new(SqliteConn(
            self.db.connect()?,
            Vec::new(),
        ))))
    }
    fn prepare_mode(&self, mode: Mode) -> Result<()> {
        match mode {
            Mode::Procedures => {
                anyhow::bail!("SQLite has no stored procedures: use --tpcc-mode statements or rows")
            }
            _ => Ok(()),
        }
    }
    fn terminal(&self, mode: Mode) -> Result<Box<dyn TxnSession + '_>> {
        let c = self.db.connect()?;
        c.set_prepared_statement_cache_capacity(256);
        match mode {
            Mode::Statements => Ok(Box::new(stmts::StmtSession::new(SqliteConn(c, Vec::new())))),
            Mode::Rows => Ok(Box::new(super::RowSession(Box::new(SqlTx::new(
                SqliteConn(c, Vec::new()),
            ))))),
            Mode::Procedures => anyhow::bail!("SQLite has no stored procedures"),
        }
    }
}

/// A SQLite connection and the texts of its prepared statements (rusqlite keeps their
/// preparations in its own cache).
struct SqliteConn(rusqlite::Connection, Vec<String>);

impl SqlConn for SqliteConn {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }
    fn batch(&mut self, sql: &str) -> DbResult<()> {
        self.0.execute_batch(sql).map_err(sqlite_map_err)
    }
    fn query(&mut self, sql: &str, params: &[V]) -> DbResult<Vec<Vec<V>>> {
        let mut st = self.0.prepare_cached(sql).map_err(sqlite_map_err)?;
        let n = st.column_count();
        let p = rusqlite::params_from_iter(params.iter().map(sqlite_value));
        let mut rows = st.query(p).map_err(sqlite_map_err)?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(sqlite_map_err)? {
            let mut row = Vec::with_capacity(n);
            for i in 0..n {
                row.push(match r.get_ref(i).map_err(sqlite_map_err)? {
                    rusqlite::types::ValueRef::Null => V::Null,
                    rusqlite::types::ValueRef::Integer(x) => V::I(x),
                    rusqlite::types::ValueRef::Real(x) => V::I(x as i64),
                    rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => {
                        V::T(String::from_utf8_lossy(t).into_owned())
                    }
                });
            }
            out.push(row);
        }
        Ok(out)
    }
    fn exec(&mut self, sql: &str, params: &[V]) -> DbResult<()> {
        let mut st = self.0.prepare_cached(sql).map_err(sqlite_map_err)?;
        st.execute(rusqlite::params_from_iter(params.iter().map(sqlite_value)))
            .map_err(sqlite_map_err)?;
        Ok(())
    }
    fn prepare(&mut self, sql: &str) -> DbResult<Prepared> {
        self.0.prepare_cached(sql).map_err(sqlite_map_err)?;
        self.1.push(sql.to_string());
        Ok(Prepared(self.1.len() - 1))
    }
    fn run(&mut self, st: Prepared, params: &[V]) -> DbResult<u64> {
        let mut st = self
            .0
            .prepare_cached(&self.1[st.0])
            .map_err(sqlite_map_err)?;
        let mut rows = st
            .query(rusqlite::params_from_iter(params.iter().map(sqlite_value)))
            .map_err(sqlite_map_err)?;
        let mut n = 0;
        while rows.next().map_err(sqlite_map_err)?.is_some() {
            n += 1;
        }
        Ok(n)
    }
}

fn sqlite_value(v: &V) -> rusqlite::types::Value {
    match v {
        V::Null => rusqlite::types::Value::Null,
        V::I(x) => rusqlite::types::Value::Integer(*x),
        V::T(t) => rusqlite::types::Value::Text(t.clone()),
    }
}

// --- MariaDB ---------------------------------------------------------------------------------

/// A MariaDB server alloclab started: its unix socket, the database, the tables' engine.
#[derive(Debug, Clone)]
pub struct Server {
    pub socket: PathBuf,
    pub database: String,
    pub table_engine: String,
}

pub struct TpccMariaDb {
    server: Server,
}

/// A MariaDB error that means "run the transaction again": deadlock, lock wait timeout,
/// MariaDB 11.8's snapshot isolation ("record has changed since last read"), and an engine's
/// conflict found at COMMIT (TideSQL's optimistic transactions: handler error 149,
/// HA_ERR_LOCK_DEADLOCK, or 146, HA_ERR_LOCK_WAIT_TIMEOUT).
pub fn is_conflict(code: u16, message: &str) -> bool {
    matches!(code, 1213 | 1205 | 1020)
        || (code == 1180 && (message.contains("error 149") || message.contains("error 146")))
}

pub fn mysql_err(e: mysql::Error) -> DbError {
    match &e {
        mysql::Error::MySqlError(m) if is_conflict(m.code, &m.message) => {
            DbError::Conflict(e.to_string())
        }
        _ => DbError::Other(anyhow::Error::new(e)),
    }
}

impl TpccMariaDb {
    pub fn open(server: Server) -> Result<Self> {
        let db = TpccMariaDb { server };
        let mut c = db.connect()?;
        let tables = c
            .query("SHOW TABLES LIKE 'warehouse'", &[])
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if tables.is_empty() {
            for stmt in schema(Dialect::MariaDb, &db.server.table_engine) {
                c.batch(&stmt).map_err(|e| anyhow::anyhow!("{e}"))?;
            }
        }
        Ok(db)
    }

    fn connect(&self) -> Result<MariaConn> {
        let opts = mysql::OptsBuilder::new()
            .socket(Some(self.server.socket.to_string_lossy().into_owned()))
            .user(Some("root"))
            .db_name(Some(self.server.database.clone()))
            .stmt_cache_size(Some(512));
        let c = mysql::Conn::new(opts).with_context(|| {
            format!(
                "cannot connect to MariaDB at {}",
                self.server.socket.display()
            )
        })?;
        Ok(MariaConn(c, Vec::new()))
    }
}

impl TpccDb for TpccMariaDb {
    fn session(&self) -> Result<Box<dyn TpccTx + '_>> {
        Ok(Box::new(SqlTx::new(self.connect()?)))
    }
    fn prepare_mode(&self, mode: Mode) -> Result<()> {
        if mode == Mode::Procedures {
            procs::create_mariadb(&mut self.connect()?.0, &self.server)?;
        }
        Ok(())
    }
    fn terminal(&self, mode: Mode) -> Result<Box<dyn TxnSession + '_>> {
        match mode {
            Mode::Procedures => Ok(Box::new(procs::MariaProcs::new(self.connect()?.0)?)),
            Mode::Statements => Ok(Box::new(stmts::StmtSession::new(
                libmariadb::Conn::connect(&self.server.socket, "root", &self.server.database)?
                    .transactional()?,
            ))),
            Mode::Rows => Ok(Box::new(super::RowSession(self.session()?))),
        }
    }
    fn transaction_counter(&self) -> Result<Option<u64>> {
        let mut c = self.connect()?;
        let rows = c
            .query(
                "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_commit', 'Com_rollback')",
                &[],
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(Some(rows.iter().map(|r| r[1].i() as u64).sum()))
    }
}

/// A MariaDB connection and the statements prepared on it by `prepare`.
struct MariaConn(mysql::Conn, Vec<mysql::Statement>);

fn mysql_value(v: &V) -> mysql::Value {
    match v {
        V::Null => mysql::Value::NULL,
        V::I(x) => mysql::Value::Int(*x),
        V::T(t) => mysql::Value::Bytes(t.as_bytes().to_vec()),
    }
}

impl SqlConn for MariaConn {
    fn dialect(&self) -> Dialect {
        Dialect::MariaDb
    }
    fn batch(&mut self, sql: &str) -> DbResult<()> {
        use mysql::prelude::Queryable;
        self.0.query_drop(sql).map_err(mysql_err)
    }
    fn query(&mut self, sql: &str, params: &[V]) -> DbResult<Vec<Vec<V>>> {
        use mysql::prelude::Queryable;
        let p = mysql::Params::Positional(params.iter().map(mysql_value).collect());
        let rows: Vec<mysql::Row> = if params.is_empty() {
            self.0.query(sql)
        } else {
            self.0.exec(sql, p)
        }
        .map_err(mysql_err)?;
        Ok(rows
            .into_iter()
            .map(|r| {
                r.unwrap()
                    .into_iter()
                    .map(|v| match v {
                        mysql::Value::NULL => V::Null,
                        mysql::Value::Int(x) => V::I(x),
                        mysql::Value::UInt(x) => V::I(x as i64),
                        mysql::Value::Bytes(b) => V::T(String::from_utf8_lossy(&b).into_owned()),
                        other => V::T(other.as_sql(true)),
                    })
                    .collect()
            })
            .collect())
    }
    fn exec(&mut self, sql: &str, params: &[V]) -> DbResult<()> {
        use mysql::prelude::Queryable;
        let p = mysql::Params::Positional(params.iter().map(mysql_value).collect());
        self.0.exec_drop(sql, p).map_err(mysql_err)
    }
    fn prepare(&mut self, sql: &str) -> DbResult<Prepared> {
        use mysql::prelude::Queryable;
        let st = self.0.prep(sql).map_err(mysql_err)?;
        self.1.push(st);
        Ok(Prepared(self.1.len() - 1))
    }
    fn loads_text(&self) -> bool {
        true
    }
    /// LOAD DATA LOCAL INFILE from memory: the server reads the rows as text, without a
    /// parameter object per value (those cost multi-row INSERTs most of the server's time).
    fn load_text(&mut self, insert: &str, text: &[u8], rows: u64) -> DbResult<()> {
        use mysql::prelude::Queryable;
        let table = insert
            .strip_prefix("INSERT INTO ")
            .and_then(|t| t.split(' ').next())
            .ok_or_else(|| DbError::Other(anyhow::anyhow!("not a plain INSERT: {insert}")))?;
        let feed = std::sync::Arc::new(text.to_vec());
        self.0
            .set_local_infile_handler(Some(mysql::LocalInfileHandler::new(move |_, out| {
                std::io::Write::write_all(out, &feed)
            })));
        // ASCII (all that TPC-C generates) is the same bytes in every column's character set:
        // read as binary, the server converts nothing (a sixth of its load CPU otherwise)
        let charset = if text.is_ascii() { "binary" } else { "utf8mb4" };
        let r = self.0.query_drop(format!(
            "LOAD DATA LOCAL INFILE 'alloclab-rows' INTO TABLE {table} CHARACTER SET {charset}"
        ));
        self.0.set_local_infile_handler(None);
        r.map_err(mysql_err)?;
        // LOAD DATA turns a value it cannot store into a warning: a load must have none
        let (loaded, warnings) = (self.0.affected_rows(), self.0.warnings());
        if loaded != rows || warnings > 0 {
            // the load has failed either way: the first warning only says why, when it can
            let first: Vec<(String, u32, String)> =
                self.0.query("SHOW WARNINGS LIMIT 1").unwrap_or_default();
            return Err(DbError::Other(anyhow::anyhow!(
                "LOAD DATA into {table} stored {loaded} of {rows} rows with {warnings} warning(s): {:?}",
                first.first()
            )));
        }
        Ok(())
    }
    fn run(&mut self, st: Prepared, params: &[V]) -> DbResult<u64> {
        use mysql::prelude::Queryable;
        let p = if params.is_empty() {
            mysql::Params::Empty
        } else {
            mysql::Params::Positional(params.iter().map(mysql_value).collect())
        };
        let mut result = self.0.exec_iter(&self.1[st.0], p).map_err(mysql_err)?;
        let mut n = 0;
        for row in result.by_ref() {
            row.map_err(mysql_err)?;
            n += 1;
        }
        Ok(n.max(result.affected_rows()))
    }
}

// --- PostgreSQL ------------------------------------------------------------------------------

pub struct TpccPostgres {
    server: Server,
}

pub fn pg_err(e: postgres::Error) -> DbError {
    use postgres::error::SqlState;
    match e.code() {
        Some(c)
            if *c == SqlState::T_R_SERIALIZATION_FAILURE
                || *c == SqlState::T_R_DEADLOCK_DETECTED =>
        {
            DbError::Conflict(e.to_string())
        }
        _ => DbError::Other(anyhow::Error::new(e)),
    }
}

impl TpccPostgres {
    pub fn open(server: Server) -> Result<Self> {
        let db = TpccPostgres { server };
        let mut c = db.connect()?;
        let tables = c
            .query("SELECT 1 FROM pg_tables WHERE tablename = 'warehouse'", &[])
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if tables.is_empty() {
            for stmt in schema(Dialect::Postgres, "") {
                c.batch(&stmt).map_err(|e| anyhow::anyhow!("{e}"))?;
            }
        }
        Ok(db)
    }

    fn connect(&self) -> Result<PgConn> {
        let dir = self.server.socket.parent().unwrap_or(&self.server.socket);
        let c = postgres::Config::new()
            .host_path(dir)
            .user("root")
            .dbname(&self.server.database)
            .connect(postgres::NoTls)
            .with_context(|| format!("cannot connect to PostgreSQL in {}", dir.display()))?;
        Ok(PgConn {
            c,
            stmts: HashMap::new(),
            prepared: Vec::new(),
        })
    }
}

impl TpccDb for TpccPostgres {
    fn session(&self) -> Result<Box<dyn TpccTx + '_>> {
        Ok(Box::new(SqlTx::new(self.connect()?)))
    }
    fn prepare_mode(&self, mode: Mode) -> Result<()> {
        if mode == Mode::Procedures {
            procs::create_postgres(&mut self.connect()?.c, &self.server)?;
        }
        Ok(())
    }
    fn terminal(&self, mode: Mode) -> Result<Box<dyn TxnSession + '_>> {
        match mode {
            Mode::Procedures => Ok(Box::new(procs::PgProcs::new(self.connect()?.c)?)),
            Mode::Statements => Ok(Box::new(stmts::StmtSession::new(self.connect()?))),
            Mode::Rows => Ok(Box::new(super::RowSession(self.session()?))),
        }
    }
    fn transaction_counter(&self) -> Result<Option<u64>> {
        let mut c = self.connect()?;
        let rows = c
            .query("SELECT COALESCE(SUM(xact_commit + xact_rollback), 0)::bigint FROM pg_stat_database", &[])
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(rows.first().map(|r| r[0].i() as u64))
    }
}

struct PgConn {
    c: postgres::Client,
    /// statements run by their text (prepared on first use)
    stmts: HashMap<String, postgres::Statement>,
    /// statements prepared by `prepare`, run by handle
    prepared: Vec<postgres::Statement>,
}

impl PgConn {
    fn prepared(&mut self, sql: &str) -> DbResult<postgres::Statement> {
        if let Some(s) = self.stmts.get(sql) {
            return Ok(s.clone());
        }
        let s = self.c.prepare(sql).map_err(pg_err)?;
        self.stmts.insert(sql.to_string(), s.clone());
        Ok(s)
    }

    fn bind(params: &[V]) -> Vec<&(dyn postgres::types::ToSql + Sync)> {
        params
            .iter()
            .map(|v| v as &(dyn postgres::types::ToSql + Sync))
            .collect()
    }
}

/// A value is written in the width of the parameter the server asks for (no copy, no box).
impl postgres::types::ToSql for V {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>>
    {
        use postgres::types::Type;
        match self {
            V::Null => Ok(postgres::types::IsNull::Yes),
            V::I(x) if *ty == Type::INT4 => (*x as i32).to_sql(ty, out),
            V::I(x) if *ty == Type::INT2 => (*x as i16).to_sql(ty, out),
            V::I(x) => x.to_sql(ty, out),
            V::T(t) => t.as_str().to_sql(ty, out),
        }
    }
    fn accepts(_ty: &postgres::types::Type) -> bool {
        true
    }
    postgres::types::to_sql_checked!();
}

fn pg_value(row: &postgres::Row, i: usize) -> DbResult<V> {
    use postgres::types::Type;
    let ty = row.columns()[i].type_();
    let r = if *ty == Type::INT4 {
        row.try_get::<_, Option<i32>>(i)
            .map(|x| x.map_or(V::Null, |x| V::I(x as i64)))
    } else if *ty == Type::INT8 {
        row.try_get::<_, Option<i64>>(i)
            .map(|x| x.map_or(V::Null, V::I))
    } else if *ty == Type::INT2 {
        row.try_get::<_, Option<i16>>(i)
            .map(|x| x.map_or(V::Null, |x| V::I(x as i64)))
    } else {
        row.try_get::<_, Option<String>>(i)
            .map(|x| x.map_or(V::Null, V::T))
    };
    r.map_err(pg_err)
}

impl SqlConn for PgConn {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }
    fn batch(&mut self, sql: &str) -> DbResult<()> {
        self.c.batch_execute(sql).map_err(pg_err)
    }
    fn query(&mut self, sql: &str, params: &[V]) -> DbResult<Vec<Vec<V>>> {
        let st = self.prepared(sql)?;
        let rows = self.c.query(&st, &Self::bind(params)).map_err(pg_err)?;
        rows.iter()
            .map(|r| (0..r.len()).map(|i| pg_value(r, i)).collect())
            .collect()
    }
    fn exec(&mut self, sql: &str, params: &[V]) -> DbResult<()> {
        let st = self.prepared(sql)?;
        self.c.execute(&st, &Self::bind(params)).map_err(pg_err)?;
        Ok(())
    }
    fn prepare(&mut self, sql: &str) -> DbResult<Prepared> {
        let st = self.c.prepare(sql).map_err(pg_err)?;
        self.prepared.push(st);
        Ok(Prepared(self.prepared.len() - 1))
    }
    fn run(&mut self, st: Prepared, params: &[V]) -> DbResult<u64> {
        // execute reads the rows and counts them without decoding a column
        self.c
            .execute(&self.prepared[st.0], &Self::bind(params))
            .map_err(pg_err)
    }
}

// --- the transactions, once for every SQL engine ------------------------------------------------

struct SqlTx<C: SqlConn> {
    c: C,
    open: bool,
    /// loading: INSERTs wait here, per statement, and go at COMMIT as multi-row INSERTs
    bulk: bool,
    pending: Vec<(&'static str, Vec<V>)>,
    /// loading into a connection that takes text: each statement's rows, written once, and
    /// their count
    pending_text: Vec<(&'static str, Vec<u8>, u64)>,
}

/// Parameters of one multi-row INSERT at most (servers allow 65,535).
const BULK_PARAMS: usize = 16_000;

impl<C: SqlConn> SqlTx<C> {
    fn new(c: C) -> Self {
        SqlTx {
            c,
            open: false,
            bulk: false,
            pending: Vec::new(),
            pending_text: Vec::new(),
        }
    }

    /// Send the waiting INSERTs, each statement's rows as few multi-row INSERTs.
    fn flush(&mut self) -> DbResult<()> {
        for (text, rows, n) in std::mem::take(&mut self.pending_text) {
            self.c.load_text(text, &rows, n)?;
        }
        for (text, values) in std::mem::take(&mut self.pending) {
            let cols = text.matches('?').count();
            let (head, group) = text.split_at(text.find('(').expect("INSERT ... VALUES (...)"));
            let per = (BULK_PARAMS / cols).max(1);
            for chunk in values.chunks(per * cols) {
                let rows = chunk.len() / cols;
                let mut sql = String::with_capacity(head.len() + rows * (group.len() + 2));
                sql.push_str(head);
                for k in 0..rows {
                    if k > 0 {
                        sql.push_str(", ");
                    }
                    sql.push_str(group);
                }
                let sql = self.c.dialect().sql(&sql);
                self.c.exec(&sql, chunk)?;
            }
        }
        Ok(())
    }

    fn q(&self, text: &str) -> String {
        self.c.dialect().statement(text)
    }

    fn rows(&mut self, text: &str, params: &[V]) -> DbResult<Vec<Vec<V>>> {
        self.flush()?; // a read sees the transaction's own writes
        let sql = self.q(text);
        self.c.query(&sql, params)
    }

    fn one(&mut self, text: &str, params: &[V], what: &str) -> DbResult<Vec<V>> {
        self.rows(text, params)?.into_iter().next().ok_or_else(|| {
            DbError::Other(anyhow::anyhow!(
                "TPC-C row missing: {what} (is the database loaded?)"
            ))
        })
    }

    fn exec(&mut self, text: &str, params: &[V]) -> DbResult<()> {
        if self.bulk {
            // the statements are constants: their text is the key
            if let Some(key) = STATEMENTS.iter().copied().find(|s| *s == text) {
                if self.c.loads_text() {
                    match self.pending_text.iter_mut().find(|(t, _, _)| *t == key) {
                        Some(slot) => {
                            write_row(&mut slot.1, params);
                            slot.2 += 1;
                        }
                        None => {
                            let mut rows = Vec::with_capacity(1 << 16);
                            write_row(&mut rows, params);
                            self.pending_text.push((key, rows, 1));
                        }
                    }
                    return Ok(());
                }
                match self.pending.iter_mut().find(|(t, _)| *t == key) {
                    Some(slot) => slot.1.extend_from_slice(params),
                    None => self.pending.push((key, params.to_vec())),
                }
                return Ok(());
            }
        }
        self.flush()?;
        let sql = self.q(text);
        self.c.exec(&sql, params)
    }
}

/// The INSERTs a load sends, whose rows can wait for one multi-row INSERT.
const STATEMENTS: &[&str] = &[
    WAREHOUSE_INSERT,
    DISTRICT_INSERT,
    CUSTOMER_INSERT,
    ITEM_INSERT,
    STOCK_INSERT,
    ORDER_INSERT,
    NEW_ORDER_INSERT,
    LINE_INSERT,
    HISTORY_INSERT,
];

fn customer_from(r: &[V]) -> Customer {
    Customer {
        w_id: r[0].u(),
        d_id: r[1].u(),
        c_id: r[2].u(),
        first: r[3].s(),
        middle: r[4].s(),
        last: r[5].s(),
        street_1: r[6].s(),
        street_2: r[7].s(),
        city: r[8].s(),
        state: r[9].s(),
        zip: r[10].s(),
        phone: r[11].s(),
        since: r[12].i(),
        credit: r[13].s(),
        credit_lim: r[14].i(),
        discount: r[15].i() as i32,
        balance: r[16].i(),
        ytd_payment: r[17].i(),
        payment_cnt: r[18].u(),
        delivery_cnt: r[19].u(),
        data: r[20].s(),
    }
}

fn order_from(r: &[V]) -> Order {
    Order {
        w_id: r[0].u(),
        d_id: r[1].u(),
        o_id: r[2].u(),
        c_id: r[3].u(),
        entry_d: r[4].i(),
        carrier_id: r[5].opt_u(),
        ol_cnt: r[6].u(),
        all_local: r[7].i() != 0,
    }
}

fn line_from(r: &[V]) -> OrderLine {
    OrderLine {
        w_id: r[0].u(),
        d_id: r[1].u(),
        o_id: r[2].u(),
        number: r[3].u(),
        i_id: r[4].u(),
        supply_w_id: r[5].u(),
        delivery_d: r[6].opt_i(),
        quantity: r[7].u(),
        amount: r[8].i(),
        dist_info: r[9].s(),
    }
}

impl<C: SqlConn> TpccTx for SqlTx<C> {
    fn begin(&mut self, write: bool) -> DbResult<()> {
        let stmt = self.c.dialect().begin(write);
        self.c.batch(stmt)?;
        self.open = true;
        Ok(())
    }
    fn set_bulk(&mut self, on: bool) -> DbResult<()> {
        self.bulk = on;
        match self.c.dialect().bulk_session(on) {
            Some(sql) => self.c.batch(sql),
            None => Ok(()),
        }
    }
    fn load_batch(&self) -> usize {
        if self.bulk {
            20_000
        } else {
            500
        }
    }
    fn commit(&mut self) -> DbResult<()> {
        self.flush()?; // on error the caller rolls back
        self.open = false;
        self.c.batch("COMMIT").inspect_err(|_| {
            // the COMMIT's own error is what the caller needs; a failed ROLLBACK after it only
            // means the server already ended the transaction
            let _ = self.c.batch("ROLLBACK");
        })
    }
    fn rollback(&mut self) -> DbResult<()> {
        self.pending.clear();
        self.pending_text.clear();
        if std::mem::take(&mut self.open) {
            self.c.batch("ROLLBACK")?;
        }
        Ok(())
    }
    fn meta(&mut self) -> DbResult<Option<String>> {
        Ok(self
            .rows("SELECT v FROM tpcc_meta WHERE k = 'tpcc'", &[])?
            .first()
            .map(|r| r[0].s()))
    }
    fn put_meta(&mut self, text: &str) -> DbResult<()> {
        self.exec("DELETE FROM tpcc_meta WHERE k = 'tpcc'", &[])?;
        self.exec("INSERT INTO tpcc_meta VALUES ('tpcc', ?)", &vals![text])
    }
    fn warehouse(&mut self, w: u32) -> DbResult<Warehouse> {
        let r = self.one(WAREHOUSE_GET, &vals![w], "warehouse")?;
        Ok(Warehouse {
            w_id: r[0].u(),
            name: r[1].s(),
            street_1: r[2].s(),
            street_2: r[3].s(),
            city: r[4].s(),
            state: r[5].s(),
            zip: r[6].s(),
            tax: r[7].i() as i32,
            ytd: r[8].i(),
        })
    }
    fn put_warehouse(&mut self, r: &Warehouse, insert: bool) -> DbResult<()> {
        if insert {
            self.exec(
                WAREHOUSE_INSERT,
                &vals![
                    r.w_id,
                    &r.name,
                    &r.street_1,
                    &r.street_2,
                    &r.city,
                    &r.state,
                    &r.zip,
                    r.tax,
                    r.ytd
                ],
            )
        } else {
            self.exec(WAREHOUSE_UPDATE, &vals![r.ytd, r.w_id])
        }
    }
    fn district(&mut self, w: u32, d: u32) -> DbResult<District> {
        let r = self.one(DISTRICT_GET, &vals![w, d], "district")?;
        Ok(District {
            w_id: r[0].u(),
            d_id: r[1].u(),
            name: r[2].s(),
            street_1: r[3].s(),
            street_2: r[4].s(),
            city: r[5].s(),
            state: r[6].s(),
            zip: r[7].s(),
            tax: r[8].i() as i32,
            ytd: r[9].i(),
            next_o_id: r[10].u(),
        })
    }
    fn put_district(&mut self, r: &District, insert: bool) -> DbResult<()> {
        if insert {
            self.exec(
                DISTRICT_INSERT,
                &vals![
                    r.w_id,
                    r.d_id,
                    &r.name,
                    &r.street_1,
                    &r.street_2,
                    &r.city,
                    &r.state,
                    &r.zip,
                    r.tax,
                    r.ytd,
                    r.next_o_id
                ],
            )
        } else {
            self.exec(DISTRICT_UPDATE, &vals![r.ytd, r.next_o_id, r.w_id, r.d_id])
        }
    }
    fn customer(&mut self, w: u32, d: u32, c: u32) -> DbResult<Customer> {
        let text = format!("SELECT {CUSTOMER_COLS} FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?{{lock}}");
        Ok(customer_from(&self.one(
            &text,
            &vals![w, d, c],
            "customer",
        )?))
    }
    fn put_customer(&mut self, r: &Customer, insert: bool) -> DbResult<()> {
        if insert {
            self.exec(
                CUSTOMER_INSERT,
                &vals![
                    r.w_id,
                    r.d_id,
                    r.c_id,
                    &r.first,
                    &r.middle,
                    &r.last,
                    &r.street_1,
                    &r.street_2,
                    &r.city,
                    &r.state,
                    &r.zip,
                    &r.phone,
                    r.since,
                    &r.credit,
                    r.credit_lim,
                    r.discount,
                    r.balance,
                    r.ytd_payment,
                    r.payment_cnt,
                    r.delivery_cnt,
                    &r.data
                ],
            )
        } else {
            self.exec(
                CUSTOMER_UPDATE,
                &vals![
                    r.balance,
                    r.ytd_payment,
                    r.payment_cnt,
                    r.delivery_cnt,
                    &r.data,
                    r.w_id,
                    r.d_id,
                    r.c_id
                ],
            )
        }
    }
    fn customer_ids_by_last(&mut self, w: u32, d: u32, last: &str) -> DbResult<Vec<u32>> {
        Ok(self
            .rows(CUSTOMER_BY_LAST, &vals![w, d, last])?
            .iter()
            .map(|r| r[0].u())
            .collect())
    }
    fn item(&mut self, i: u32) -> DbResult<Option<Item>> {
        Ok(self.rows(ITEM_GET, &vals![i])?.first().map(|r| Item {
            i_id: r[0].u(),
            im_id: r[1].u(),
            name: r[2].s(),
            price: r[3].i(),
            data: r[4].s(),
        }))
    }
    fn put_item(&mut self, r: &Item) -> DbResult<()> {
        self.exec(
            ITEM_INSERT,
            &vals![r.i_id, r.im_id, &r.name, r.price, &r.data],
        )
    }
    fn stock(&mut self, w: u32, i: u32) -> DbResult<Stock> {
        let r = self.one(STOCK_GET, &vals![w, i], "stock")?;
        Ok(Stock {
            w_id: r[0].u(),
            i_id: r[1].u(),
            quantity: r[2].i() as i32,
            dist: (3..13).map(|k| r[k].s()).collect(),
            ytd: r[13].i(),
            order_cnt: r[14].u(),
            remote_cnt: r[15].u(),
            data: r[16].s(),
        })
    }
    fn put_stock(&mut self, r: &Stock, insert: bool) -> DbResult<()> {
        if insert {
            let dd = &r.dist;
            self.exec(
                STOCK_INSERT,
                &vals![
                    r.w_id,
                    r.i_id,
                    r.quantity,
                    &dd[0],
                    &dd[1],
                    &dd[2],
                    &dd[3],
                    &dd[4],
                    &dd[5],
                    &dd[6],
                    &dd[7],
                    &dd[8],
                    &dd[9],
                    r.ytd,
                    r.order_cnt,
                    r.remote_cnt,
                    &r.data
                ],
            )
        } else {
            self.exec(
                STOCK_UPDATE,
                &vals![r.quantity, r.ytd, r.order_cnt, r.remote_cnt, r.w_id, r.i_id],
            )
        }
    }
    fn order(&mut self, w: u32, d: u32, o: u32) -> DbResult<Order> {
        let text = format!(
            "SELECT {ORDER_COLS} FROM orders WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?{{lock}}"
        );
        Ok(order_from(&self.one(&text, &vals![w, d, o], "order")?))
    }
    fn put_order(&mut self, r: &Order, insert: bool) -> DbResult<()> {
        if insert {
            self.exec(
                ORDER_INSERT,
                &vals![
                    r.w_id,
                    r.d_id,
                    r.o_id,
                    r.c_id,
                    r.entry_d,
                    r.carrier_id,
                    r.ol_cnt,
                    r.all_local
                ],
            )
        } else {
            self.exec(ORDER_UPDATE, &vals![r.carrier_id, r.w_id, r.d_id, r.o_id])
        }
    }
    fn last_order_of(&mut self, w: u32, d: u32, c: u32) -> DbResult<Option<Order>> {
        let text = format!(
            "SELECT {ORDER_COLS} FROM orders WHERE o_w_id = ? AND o_d_id = ? AND o_c_id = ? ORDER BY o_id DESC LIMIT 1"
        );
        Ok(self
            .rows(&text, &vals![w, d, c])?
            .first()
            .map(|r| order_from(r)))
    }
    fn insert_new_order(&mut self, w: u32, d: u32, o: u32) -> DbResult<()> {
        self.exec(NEW_ORDER_INSERT, &vals![w, d, o])
    }
    fn oldest_new_order(&mut self, w: u32, d: u32) -> DbResult<Option<u32>> {
        Ok(self
            .rows(NEW_ORDER_OLDEST, &vals![w, d])?
            .first()
            .and_then(|r| r[0].opt_u()))
    }
    fn delete_new_order(&mut self, w: u32, d: u32, o: u32) -> DbResult<()> {
        self.exec(NEW_ORDER_DELETE, &vals![w, d, o])
    }
    fn order_lines(&mut self, w: u32, d: u32, o: u32) -> DbResult<Vec<OrderLine>> {
        let text = format!(
            "SELECT {LINE_COLS} FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ? ORDER BY ol_number"
        );
        Ok(self
            .rows(&text, &vals![w, d, o])?
            .iter()
            .map(|r| line_from(r))
            .collect())
    }
    fn put_order_line(&mut self, r: &OrderLine, insert: bool) -> DbResult<()> {
        if insert {
            self.exec(
                LINE_INSERT,
                &vals![
                    r.w_id,
                    r.d_id,
                    r.o_id,
                    r.number,
                    r.i_id,
                    r.supply_w_id,
                    r.delivery_d,
                    r.quantity,
                    r.amount,
                    &r.dist_info
                ],
            )
        } else {
            self.exec(
                LINE_UPDATE,
                &vals![r.delivery_d, r.w_id, r.d_id, r.o_id, r.number],
            )
        }
    }
    fn recent_line_items(&mut self, w: u32, d: u32, o_lo: u32, o_hi: u32) -> DbResult<Vec<u32>> {
        Ok(self
            .rows(RECENT_ITEMS, &vals![w, d, o_lo, o_hi])?
            .iter()
            .map(|r| r[0].u())
            .collect())
    }
    fn insert_history(&mut self, r: &History) -> DbResult<()> {
        self.exec(
            HISTORY_INSERT,
            &vals![r.c_id, r.c_d_id, r.c_w_id, r.d_id, r.w_id, r.date, r.amount, &r.data],
        )
    }
    fn district_order_stats(&mut self, w: u32, d: u32) -> DbResult<(u32, u64)> {
        let r = self.one(CHECK_ORDERS, &vals![w, d], "orders")?;
        Ok((r[0].u(), r[1].i() as u64))
    }
    fn district_new_order_stats(&mut self, w: u32, d: u32) -> DbResult<(u32, u32, u64)> {
        let r = self.one(CHECK_NEW_ORDERS, &vals![w, d], "new orders")?;
        Ok((r[0].u(), r[1].u(), r[2].i() as u64))
    }
    fn district_order_line_count(&mut self, w: u32, d: u32) -> DbResult<u64> {
        Ok(self.one(CHECK_LINES, &vals![w, d], "order lines")?[0].i() as u64)
    }
    fn next_order_sum(&mut self, warehouses: u32) -> DbResult<u64> {
        let q = "SELECT COALESCE(SUM(d_next_o_id), 0) FROM district WHERE d_w_id <= ?";
        Ok(self.one(q, &vals![warehouses], "districts")?[0].i() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialects_differ_only_in_placeholders_and_locks() {
        let text = DISTRICT_GET.replace("{lock}", Dialect::Postgres.for_update());
        let pg = Dialect::Postgres.sql(&text);
        assert!(
            pg.ends_with("WHERE d_w_id = $1 AND d_id = $2 FOR UPDATE"),
            "{pg}"
        );
        assert_eq!(
            Dialect::MariaDb.sql(CUSTOMER_INSERT).matches('?').count(),
            21
        );
        assert_eq!(
            Dialect::Postgres.sql(CUSTOMER_INSERT).matches('$').count(),
            21
        );
        let my = schema(Dialect::MariaDb, "ROCKSDB");
        assert!(my[0].ends_with(" ENGINE=ROCKSDB") && !my[3].contains("ENGINE"));
        assert_eq!(my.len(), 12);
    }

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
