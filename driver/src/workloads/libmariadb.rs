//! MariaDB through its own C client library (libmariadb, the one sysbench links), for the
//! native OLTP tests: statements prepared once on the server, parameters bound from reused
//! buffers, results read whole into the library's memory and freed (`mysql_stmt_store_result`,
//! as sysbench does), nothing decoded that the test does not use. The pure-Rust client decodes
//! every row into owned values, which costs the client 1.3-1.5x sysbench's CPU on 2 cores.

use std::ffi::{CStr, CString};
use std::path::Path;
use std::ptr;

use anyhow::{bail, Result};
use mysqlclient_sys as ffi;

use super::tpcc::sql::{is_conflict, Dialect, Prepared, V};
use crate::engines::{DbError, DbResult};

/// A prepared statement and its parameters' buffers, bound once and refilled in place for
/// each execution (rebound only when a text outgrows its buffer), as sysbench does.
struct Stmt {
    ptr: *mut ffi::MYSQL_STMT,
    binds: Vec<ffi::MYSQL_BIND>,
    ints: Vec<i64>,
    texts: Vec<Vec<u8>>,
    lengths: Vec<std::os::raw::c_ulong>,
    bound: bool,
}

/// One connection over the server's unix socket, and the statements prepared on it.
pub struct Conn {
    mysql: *mut ffi::MYSQL,
    stmts: Vec<Stmt>,
}

// The handles belong to this connection alone and are used by one thread at a time.
unsafe impl Send for Conn {}

fn c_text(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn error(code: u32, message: String) -> DbError {
    if is_conflict(code as u16, &message) {
        DbError::Conflict(format!("ERROR {code}: {message}"))
    } else {
        DbError::Other(anyhow::anyhow!("ERROR {code}: {message}"))
    }
}

impl Conn {
    pub fn connect(socket: &Path, user: &str, database: &str) -> Result<Self> {
        // the library's global state is made once, before any thread connects
        static INIT: std::sync::Once = std::sync::Once::new();
        INIT.call_once(|| unsafe {
            ffi::mysql_server_init(0, ptr::null_mut(), ptr::null_mut());
        });
        let sock = CString::new(socket.as_os_str().as_encoded_bytes())?;
        let (user_c, db_c) = (CString::new(user)?, CString::new(database)?);
        unsafe {
            let m = ffi::mysql_init(ptr::null_mut());
            if m.is_null() {
                bail!("libmariadb: mysql_init failed (out of memory)");
            }
            let ok = ffi::mysql_real_connect(
                m,
                ptr::null(),
                user_c.as_ptr(),
                ptr::null(),
                db_c.as_ptr(),
                0,
                sock.as_ptr(),
                0,
            );
            if ok.is_null() {
                let why = c_text(ffi::mysql_error(m));
                ffi::mysql_close(m);
                bail!("cannot connect to MariaDB at {}: {why}", socket.display());
            }
            Ok(Conn {
                mysql: m,
                stmts: Vec::new(),
            })
        }
    }

    pub fn dialect(&self) -> Dialect {
        Dialect::MariaDb
    }

    fn conn_error(&self) -> DbError {
        unsafe {
            error(
                ffi::mysql_errno(self.mysql),
                c_text(ffi::mysql_error(self.mysql)),
            )
        }
    }

    fn stmt_error(st: *mut ffi::MYSQL_STMT) -> DbError {
        unsafe { error(ffi::mysql_stmt_errno(st), c_text(ffi::mysql_stmt_error(st))) }
    }

    /// A statement without parameters, its results (if any) read and dropped.
    pub fn batch(&mut self, sql: &str) -> DbResult<()> {
        unsafe {
            if ffi::mysql_real_query(self.mysql, sql.as_ptr().cast(), sql.len() as _) != 0 {
                return Err(self.conn_error());
            }
            loop {
                let res = ffi::mysql_store_result(self.mysql);
                if !res.is_null() {
                    ffi::mysql_free_result(res);
                } else if ffi::mysql_field_count(self.mysql) != 0 {
                    return Err(self.conn_error());
                }
                match ffi::mysql_next_result(self.mysql) {
                    0 => continue,
                    -1 => return Ok(()),
                    _ => return Err(self.conn_error()),
                }
            }
        }
    }

    pub fn prepare(&mut self, sql: &str) -> DbResult<Prepared> {
        unsafe {
            let st = ffi::mysql_stmt_init(self.mysql);
            if st.is_null() {
                return Err(self.conn_error());
            }
            if ffi::mysql_stmt_prepare(st, sql.as_ptr().cast(), sql.len() as _) != 0 {
                let e = Self::stmt_error(st);
                ffi::mysql_stmt_close(st);
                return Err(e);
            }
            let n = ffi::mysql_stmt_param_count(st) as usize;
            self.stmts.push(Stmt {
                ptr: st,
                // SAFETY: MYSQL_BIND is a plain C struct for which all zeroes is an empty binding
                binds: (0..n).map(|_| std::mem::zeroed()).collect(),
                ints: vec![0; n],
                texts: (0..n).map(|_| Vec::with_capacity(256)).collect(),
                lengths: vec![0; n],
                bound: false,
            });
        }
        Ok(Prepared::new(self.stmts.len() - 1))
    }

    /// Execute a prepared statement; its rows are read into the library's memory and freed.
    /// Returns the rows it returned or changed.
    pub fn run(&mut self, p: Prepared, params: &[V]) -> DbResult<u64> {
        let s = &mut self.stmts[p.index()];
        if params.len() != s.binds.len() {
            return Err(DbError::Other(anyhow::anyhow!(
                "a statement with {} parameters was given {}",
                s.binds.len(),
                params.len()
            )));
        }
        for (i, v) in params.iter().enumerate() {
            let b = &mut s.binds[i];
            match v {
                V::I(x) => {
                    s.ints[i] = *x;
                    if b.buffer_type != ffi::enum_field_types::MYSQL_TYPE_LONGLONG {
                        b.buffer_type = ffi::enum_field_types::MYSQL_TYPE_LONGLONG;
                        b.buffer = (&mut s.ints[i] as *mut i64).cast();
                        s.bound = false;
                    }
                }
                V::T(t) => {
                    let buf = &mut s.texts[i];
                    let before = buf.as_ptr();
                    buf.clear();
                    buf.extend_from_slice(t.as_bytes());
                    s.lengths[i] = t.len() as _;
                    if b.buffer_type != ffi::enum_field_types::MYSQL_TYPE_STRING
                        || before != buf.as_ptr()
                        || b.buffer.is_null()
                    {
                        b.buffer_type = ffi::enum_field_types::MYSQL_TYPE_STRING;
                        b.buffer = buf.as_mut_ptr().cast();
                        b.buffer_length = buf.capacity() as _;
                        b.length = &mut s.lengths[i];
                        s.bound = false;
                    }
                }
                V::Null => {
                    if b.buffer_type != ffi::enum_field_types::MYSQL_TYPE_NULL {
                        b.buffer_type = ffi::enum_field_types::MYSQL_TYPE_NULL;
                        s.bound = false;
                    }
                }
            }
        }
        let st = s.ptr;
        unsafe {
            // the bindings point into this statement's own buffers, which live as long as it
            if !s.bound && !s.binds.is_empty() {
                if ffi::mysql_stmt_bind_param(st, s.binds.as_mut_ptr()) != 0 {
                    return Err(Self::stmt_error(st));
                }
                s.bound = true;
            }
            if ffi::mysql_stmt_execute(st) != 0 {
                return Err(Self::stmt_error(st));
            }
            if ffi::mysql_stmt_field_count(st) == 0 {
                return Ok(ffi::mysql_stmt_affected_rows(st));
            }
            if ffi::mysql_stmt_store_result(st) != 0 {
                return Err(Self::stmt_error(st));
            }
            let rows = ffi::mysql_stmt_num_rows(st);
            ffi::mysql_stmt_free_result(st);
            Ok(rows)
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        unsafe {
            for st in self.stmts.drain(..) {
                ffi::mysql_stmt_close(st.ptr);
            }
            ffi::mysql_close(self.mysql);
        }
    }
}
