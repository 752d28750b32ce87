//! MariaDB through the pure-Rust client (the `mysql` crate): TPC-C's rows mode and loads (LOAD
//! DATA LOCAL INFILE from memory), its procedures, and the server's counters. MariaDB's errors
//! that mean "run the transaction again" are told apart here for both MariaDB clients.

use anyhow::{Context, Result};

use super::{Dialect, Prepared, Server, SqlConn, V};
use crate::engines::{DbError, DbResult};

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

/// A MariaDB connection and the statements prepared on it by `prepare`.
pub struct MariaConn(pub mysql::Conn, Vec<mysql::Statement>);

impl MariaConn {
    /// As root, over the server's unix socket, into its database.
    pub fn connect(server: &Server) -> Result<Self> {
        let opts = mysql::OptsBuilder::new()
            .socket(Some(server.socket.to_string_lossy().into_owned()))
            .user(Some("root"))
            .db_name(Some(server.database.clone()))
            .stmt_cache_size(Some(512));
        let c = mysql::Conn::new(opts)
            .with_context(|| format!("cannot connect to MariaDB at {}", server.socket.display()))?;
        Ok(MariaConn(c, Vec::new()))
    }
}

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

/// Stored procedures called over one connection, each CALL prepared once: one round trip per
/// call, every result set read.
pub type Calls = super::Calls<mysql::Conn, mysql::Statement>;

impl Calls {
    /// Prepare `calls` (CALL statements with `?` parameters) on `conn`; `what` says what they
    /// call, for the error when one cannot be prepared.
    pub fn prepare(conn: mysql::Conn, calls: &[&str], what: &str) -> Result<Self> {
        use mysql::prelude::Queryable;
        let failed = format!("cannot prepare the CALLs of {what} (were they created?)");
        Self::prepared(conn, calls, failed, |c, s| c.prep(s))
    }

    /// Call number `k`; every result set read; the first column of the first row of the first set.
    pub fn call(&mut self, k: usize, params: Vec<mysql::Value>) -> DbResult<Option<i64>> {
        use mysql::prelude::Queryable;
        let mut res = self
            .conn
            .exec_iter(&self.calls[k], mysql::Params::Positional(params))
            .map_err(mysql_err)?;
        let mut first = None;
        while let Some(set) = res.iter() {
            for row in set {
                let row = row.map_err(mysql_err)?;
                if first.is_none() {
                    first = Some(row.get::<Option<i64>, _>(0).flatten().unwrap_or(0));
                }
            }
        }
        Ok(first)
    }
}
