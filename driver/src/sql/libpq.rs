//! PostgreSQL through its own C client library (libpq, the one sysbench's pgsql driver links),
//! for the native OLTP tests: statements prepared once per connection (`PQprepare`), run by
//! `PQexecPrepared` with their parameters as text in buffers reused from call to call, rows
//! counted and never decoded, as sysbench does. The `postgres` crate drives every call through
//! an async runtime, which cost the client 1.4-1.6x sysbench's CPU per transaction on 2 cores.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::raw::{c_char, c_int};
use std::ptr;

use anyhow::{bail, Result};
use pq_sys as ffi;

use super::postgres::is_conflict;
use super::{c_text, prepared_by_text, Dialect, Prepared, Server, SqlConn, V};
use crate::engines::{DbError, DbResult};

/// A statement's error as the server gave it: its SQLSTATE and message.
#[derive(Debug)]
pub struct PgError {
    pub sqlstate: String,
    pub message: String,
}

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (SQLSTATE {})",
            self.message.trim_end(),
            self.sqlstate
        )
    }
}

impl std::error::Error for PgError {}

/// A conflict (retried) where `postgres::is_conflict` says so; anything else is an error.
fn error(e: PgError) -> DbError {
    if is_conflict(&e.sqlstate) {
        DbError::Conflict(e.to_string())
    } else {
        DbError::Other(anyhow::Error::new(e))
    }
}

/// A result of one call, cleared when dropped.
struct Res(*mut ffi::PGresult);

impl Drop for Res {
    fn drop(&mut self) {
        unsafe { ffi::PQclear(self.0) }
    }
}

/// One connection over the server's unix socket, and the statements prepared on it.
pub struct Conn {
    conn: *mut ffi::PGconn,
    /// each prepared statement's name on the server
    names: Vec<CString>,
    by_text: HashMap<String, Prepared>,
    /// parameters as NUL-terminated text, and the pointers handed to libpq (reused)
    texts: Vec<Vec<u8>>,
    ptrs: Vec<*const c_char>,
}

// The connection belongs to one thread at a time.
unsafe impl Send for Conn {}

impl Conn {
    /// As root, over the unix socket in the directory of `server.socket`, into its database.
    pub fn connect(server: &Server) -> Result<Self> {
        let dir = server.socket.parent().unwrap_or(&server.socket);
        let port = server
            .socket
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix(".s.PGSQL."))
            .unwrap_or("5432");
        let quote = |s: &str| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"));
        let info = CString::new(format!(
            "host={} port={} user=root dbname={}",
            quote(&dir.to_string_lossy()),
            quote(port),
            quote(&server.database)
        ))?;
        unsafe {
            let conn = ffi::PQconnectdb(info.as_ptr());
            if conn.is_null() {
                bail!("libpq: PQconnectdb failed (out of memory)");
            }
            if ffi::PQstatus(conn) != ffi::ConnStatusType::CONNECTION_OK {
                let why = c_text(ffi::PQerrorMessage(conn));
                ffi::PQfinish(conn);
                bail!(
                    "cannot connect to PostgreSQL in {}: {}",
                    dir.display(),
                    why.trim_end()
                );
            }
            Ok(Conn {
                conn,
                names: Vec::new(),
                by_text: HashMap::new(),
                texts: Vec::new(),
                ptrs: Vec::new(),
            })
        }
    }

    /// The result of a call, or the statement's (or else the connection's) error.
    fn check(&self, res: *mut ffi::PGresult) -> DbResult<Res> {
        use ffi::ExecStatusType::*;
        let res = Res(res);
        let status = if res.0.is_null() {
            PGRES_FATAL_ERROR
        } else {
            unsafe { ffi::PQresultStatus(res.0) }
        };
        if matches!(
            status,
            PGRES_COMMAND_OK | PGRES_TUPLES_OK | PGRES_EMPTY_QUERY
        ) {
            return Ok(res);
        }
        let (sqlstate, message) = unsafe {
            if res.0.is_null() {
                (String::new(), c_text(ffi::PQerrorMessage(self.conn)))
            } else {
                (
                    c_text(ffi::PQresultErrorField(
                        res.0,
                        ffi::PG_DIAG_SQLSTATE as c_int,
                    )),
                    c_text(ffi::PQresultErrorMessage(res.0)),
                )
            }
        };
        Err(error(PgError { sqlstate, message }))
    }

    /// Run prepared statement `p` with `params` written as text into the reused buffers.
    fn execute(&mut self, p: Prepared, params: &[V]) -> DbResult<Res> {
        if self.texts.len() < params.len() {
            self.texts
                .resize_with(params.len(), || Vec::with_capacity(64));
        }
        self.ptrs.clear();
        for (buf, v) in self.texts.iter_mut().zip(params) {
            buf.clear();
            match v {
                V::Null => {
                    self.ptrs.push(ptr::null());
                    continue;
                }
                V::I(x) => buf.extend_from_slice(itoa::Buffer::new().format(*x).as_bytes()),
                V::T(t) => buf.extend_from_slice(t.as_bytes()),
            }
            buf.push(0);
            self.ptrs.push(buf.as_ptr().cast());
        }
        let res = unsafe {
            ffi::PQexecPrepared(
                self.conn,
                self.names[p.index()].as_ptr(),
                params.len() as c_int,
                self.ptrs.as_ptr(),
                ptr::null(),
                ptr::null(),
                0,
            )
        };
        self.check(res)
    }

    fn by_text(&mut self, sql: &str) -> DbResult<Prepared> {
        prepared_by_text(self, sql, |c| &mut c.by_text)
    }
}

impl SqlConn for Conn {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }
    fn batch(&mut self, sql: &str) -> DbResult<()> {
        let text = CString::new(sql).map_err(|e| DbError::Other(e.into()))?;
        let res = unsafe { ffi::PQexec(self.conn, text.as_ptr()) };
        self.check(res).map(|_| ())
    }
    fn query(&mut self, sql: &str, params: &[V]) -> DbResult<Vec<Vec<V>>> {
        let st = self.by_text(sql)?;
        let res = self.execute(st, params)?;
        unsafe {
            let (rows, cols) = (ffi::PQntuples(res.0), ffi::PQnfields(res.0));
            Ok((0..rows)
                .map(|r| {
                    (0..cols)
                        .map(|c| {
                            if ffi::PQgetisnull(res.0, r, c) != 0 {
                                V::Null
                            } else {
                                V::T(c_text(ffi::PQgetvalue(res.0, r, c)))
                            }
                        })
                        .collect()
                })
                .collect())
        }
    }
    fn exec(&mut self, sql: &str, params: &[V]) -> DbResult<()> {
        let st = self.by_text(sql)?;
        self.execute(st, params).map(|_| ())
    }
    fn prepare(&mut self, sql: &str) -> DbResult<Prepared> {
        let name = CString::new(format!("s{}", self.names.len())).expect("no NUL in a name");
        let text = CString::new(sql).map_err(|e| DbError::Other(e.into()))?;
        let res =
            unsafe { ffi::PQprepare(self.conn, name.as_ptr(), text.as_ptr(), 0, ptr::null()) };
        self.check(res)?;
        self.names.push(name);
        Ok(Prepared::new(self.names.len() - 1))
    }
    fn run(&mut self, st: Prepared, params: &[V]) -> DbResult<u64> {
        let res = self.execute(st, params)?;
        unsafe {
            if ffi::PQresultStatus(res.0) == ffi::ExecStatusType::PGRES_TUPLES_OK {
                return Ok(ffi::PQntuples(res.0) as u64);
            }
            Ok(c_text(ffi::PQcmdTuples(res.0)).parse().unwrap_or(0))
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        unsafe { ffi::PQfinish(self.conn) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(sqlstate: &str) -> DbError {
        error(PgError {
            sqlstate: sqlstate.into(),
            message: "ERROR:  it failed\n".into(),
        })
    }

    #[test]
    fn serialization_failures_and_deadlocks_are_conflicts_the_rest_errors() {
        assert!(matches!(failed("40001"), DbError::Conflict(_)));
        assert!(matches!(failed("40P01"), DbError::Conflict(_)));
        let DbError::Other(e) = failed("23505") else {
            panic!("a unique violation is no conflict for every workload");
        };
        assert_eq!(e.to_string(), "ERROR:  it failed (SQLSTATE 23505)");
        assert_eq!(
            e.downcast_ref::<PgError>().map(|p| p.sqlstate.as_str()),
            Some("23505")
        );
    }

    #[test]
    fn a_server_that_is_not_there_is_named() {
        let server = Server {
            socket: "/nonexistent/alloclab/.s.PGSQL.5432".into(),
            database: "db".into(),
            table_engine: String::new(),
        };
        let e = Conn::connect(&server).err().expect("no server there");
        assert!(
            e.to_string()
                .starts_with("cannot connect to PostgreSQL in /nonexistent/alloclab:"),
            "{e}"
        );
    }
}
