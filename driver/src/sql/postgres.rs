//! PostgreSQL through the `postgres` crate: every statement prepared on the server once per
//! connection, values written in the width of the parameter the server asks for.

use std::collections::HashMap;

use anyhow::{Context, Result};

use super::{prepared_by_text, Dialect, Prepared, Server, SqlConn, V};
use crate::engines::{DbError, DbResult};

/// Serialization failures (40001) and deadlocks (40P01) are conflicts, retried; anything else
/// is an error. For every PostgreSQL connection (this one and `libpq`).
pub fn is_conflict(sqlstate: &str) -> bool {
    use postgres::error::SqlState;
    sqlstate == SqlState::T_R_SERIALIZATION_FAILURE.code()
        || sqlstate == SqlState::T_R_DEADLOCK_DETECTED.code()
}

/// This connection's error, a conflict where `is_conflict` says so.
pub fn pg_err(e: postgres::Error) -> DbError {
    if e.code().is_some_and(|c| is_conflict(c.code())) {
        DbError::Conflict(e.to_string())
    } else {
        DbError::Other(anyhow::Error::new(e))
    }
}

/// A PostgreSQL connection and the statements prepared on it: by `prepare` (run by handle), and
/// by the text `query` and `exec` run (prepared on first use, found again by that text).
pub struct PgConn {
    pub c: postgres::Client,
    stmts: Vec<postgres::Statement>,
    by_text: HashMap<String, Prepared>,
}

impl PgConn {
    /// As root, over the unix socket in the directory of `server.socket`, into its database.
    pub fn connect(server: &Server) -> Result<Self> {
        let dir = server.socket.parent().unwrap_or(&server.socket);
        let c = postgres::Config::new()
            .host_path(dir)
            .user("root")
            .dbname(&server.database)
            .connect(postgres::NoTls)
            .with_context(|| format!("cannot connect to PostgreSQL in {}", dir.display()))?;
        Ok(PgConn {
            c,
            stmts: Vec::new(),
            by_text: HashMap::new(),
        })
    }

    /// The statement of this text, prepared on its first use.
    fn by_text(&mut self, sql: &str) -> DbResult<Prepared> {
        prepared_by_text(self, sql, |c| &mut c.by_text)
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
        let st = self.by_text(sql)?;
        let rows = self
            .c
            .query(&self.stmts[st.index()], &Self::bind(params))
            .map_err(pg_err)?;
        rows.iter()
            .map(|r| (0..r.len()).map(|i| pg_value(r, i)).collect())
            .collect()
    }
    fn exec(&mut self, sql: &str, params: &[V]) -> DbResult<()> {
        let st = self.by_text(sql)?;
        self.c
            .execute(&self.stmts[st.index()], &Self::bind(params))
            .map_err(pg_err)?;
        Ok(())
    }
    fn prepare(&mut self, sql: &str) -> DbResult<Prepared> {
        let st = self.c.prepare(sql).map_err(pg_err)?;
        self.stmts.push(st);
        Ok(Prepared::new(self.stmts.len() - 1))
    }
    fn run(&mut self, st: Prepared, params: &[V]) -> DbResult<u64> {
        // execute reads the rows and counts them without decoding a column
        self.c
            .execute(&self.stmts[st.index()], &Self::bind(params))
            .map_err(pg_err)
    }
}

/// Functions called over one connection, each call prepared once: one statement per call.
pub type Calls = super::Calls<postgres::Client, postgres::Statement>;

impl Calls {
    /// Prepare `calls` (SELECTs of functions with `$n` parameters) on `conn`; `what` says what
    /// they call, for the error when one cannot be prepared.
    pub fn prepare(conn: postgres::Client, calls: &[&str], what: &str) -> Result<Self> {
        let failed = format!("cannot prepare the calls of {what} (were they created?)");
        Self::prepared(conn, calls, failed, |c, s| c.prepare(s))
    }

    /// Call number `k`, its rows as the server returned them.
    pub fn query(
        &mut self,
        k: usize,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> std::result::Result<Vec<postgres::Row>, postgres::Error> {
        self.conn.query(&self.calls[k], params)
    }
}
