//! SQLite's connection (rusqlite, bundled): statements prepared through rusqlite's own cache.

use super::{Dialect, Prepared, SqlConn, V};
use crate::engines::sqlite::map_err as sqlite_map_err;
use crate::engines::DbResult;

/// A SQLite connection and the texts of its prepared statements (rusqlite keeps their
/// preparations in its own cache).
pub struct SqliteConn(rusqlite::Connection, Vec<String>);

impl SqliteConn {
    pub fn new(c: rusqlite::Connection) -> Self {
        SqliteConn(c, Vec::new())
    }
}

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
