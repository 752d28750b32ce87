//! MariaDB through its own C client library (libmariadb, the one sysbench links), for the
//! native OLTP tests and TPC-C's statements mode: statements prepared once on the server,
//! parameters bound once to buffers refilled in place, results that nobody reads skipped on
//! the connection as they come (`mysql_stmt_free_result` on an unread result; sysbench stores
//! them first with `mysql_stmt_store_result`, a copy per row), results that are read fetched
//! into buffers bound once per statement. The pure-Rust client decodes every row into owned values,
//! which cost the client 1.3-1.5x sysbench's CPU on 2 cores.

use std::collections::HashMap;
use std::ffi::CString;
use std::path::Path;
use std::ptr;

use anyhow::{bail, Result};
use mysqlclient_sys as ffi;

use super::mariadb::is_conflict;
use super::{c_text, prepared_by_text, Dialect, Prepared, SqlConn, V};
use crate::engines::{DbError, DbResult};

// an integer parameter bound as INT reads the first 4 bytes of its i64 slot
#[cfg(not(target_endian = "little"))]
compile_error!("the libmariadb bindings assume a little-endian machine");

/// A prepared statement and its parameters' buffers, bound once and refilled in place for
/// each execution (rebound only when a text outgrows its buffer), as sysbench does.
struct Stmt {
    ptr: *mut ffi::MYSQL_STMT,
    binds: Vec<ffi::MYSQL_BIND>,
    ints: Vec<i64>,
    texts: Vec<Vec<u8>>,
    lengths: Vec<std::os::raw::c_ulong>,
    bound: bool,
    /// the result columns' buffers, bound on the first read of the rows
    out: Option<Columns>,
}

/// Where `mysql_stmt_fetch` writes each column of a row: integers as i64, the rest as text.
struct Columns {
    binds: Vec<ffi::MYSQL_BIND>,
    ints: Vec<i64>,
    texts: Vec<Vec<u8>>,
    lengths: Vec<std::os::raw::c_ulong>,
    nulls: Vec<ffi::my_bool>,
    is_int: Vec<bool>,
}

impl Columns {
    /// The columns of `st`'s result, from its metadata (None if it returns no rows).
    unsafe fn of(st: *mut ffi::MYSQL_STMT) -> Option<Columns> {
        use ffi::enum_field_types::*;
        let meta = ffi::mysql_stmt_result_metadata(st);
        if meta.is_null() {
            return None;
        }
        let n = ffi::mysql_num_fields(meta) as usize;
        let fields = std::slice::from_raw_parts(ffi::mysql_fetch_fields(meta), n);
        let is_int: Vec<bool> = fields
            .iter()
            .map(|f| {
                matches!(
                    f.type_,
                    MYSQL_TYPE_TINY
                        | MYSQL_TYPE_SHORT
                        | MYSQL_TYPE_LONG
                        | MYSQL_TYPE_INT24
                        | MYSQL_TYPE_LONGLONG
                )
            })
            .collect();
        // a column's display length bounds its bytes (at most 64 KiB here: TPC-C's are short)
        let texts = fields
            .iter()
            .map(|f| vec![0u8; (f.length as usize).clamp(1, 1 << 16)])
            .collect();
        ffi::mysql_free_result(meta);
        let mut c = Columns {
            binds: (0..n).map(|_| std::mem::zeroed()).collect(),
            ints: vec![0; n],
            texts,
            lengths: vec![0; n],
            nulls: vec![0; n],
            is_int,
        };
        for i in 0..n {
            let b = &mut c.binds[i];
            if c.is_int[i] {
                b.buffer_type = MYSQL_TYPE_LONGLONG;
                b.buffer = (&mut c.ints[i] as *mut i64).cast();
            } else {
                b.buffer_type = MYSQL_TYPE_STRING;
                b.buffer = c.texts[i].as_mut_ptr().cast();
                b.buffer_length = c.texts[i].len() as _;
            }
            b.length = &mut c.lengths[i];
            b.is_null = &mut c.nulls[i];
        }
        Some(c)
    }

    fn row(&self) -> Vec<V> {
        (0..self.binds.len())
            .map(|i| {
                if self.nulls[i] != 0 {
                    V::Null
                } else if self.is_int[i] {
                    V::I(self.ints[i])
                } else {
                    let n = (self.lengths[i] as usize).min(self.texts[i].len());
                    V::T(String::from_utf8_lossy(&self.texts[i][..n]).into_owned())
                }
            })
            .collect()
    }
}

/// One connection over the server's unix socket, and the statements prepared on it.
pub struct Conn {
    mysql: *mut ffi::MYSQL,
    /// autocommit is off: a transaction opens with its first statement (no BEGIN round trip)
    implicit: bool,
    stmts: Vec<Stmt>,
    /// statements run by their text (`query`, `exec`), prepared on first use
    by_text: HashMap<String, Prepared>,
}

// The handles belong to this connection alone and are used by one thread at a time.
unsafe impl Send for Conn {}

fn error(code: u32, message: String) -> DbError {
    if is_conflict(code as u16, &message) {
        DbError::Conflict(format!("ERROR {code}: {message}"))
    } else {
        DbError::Other(anyhow::anyhow!("ERROR {code}: {message}"))
    }
}

/// The statement's error; the connection's where the statement has none (the library sets
/// some errors, e.g. a lost connection, on the connection only).
fn stmt_error(mysql: *mut ffi::MYSQL, st: *mut ffi::MYSQL_STMT) -> DbError {
    unsafe {
        match ffi::mysql_stmt_errno(st) {
            0 if ffi::mysql_errno(mysql) != 0 => {
                error(ffi::mysql_errno(mysql), c_text(ffi::mysql_error(mysql)))
            }
            0 => DbError::Other(anyhow::anyhow!(
                "libmariadb reported a failure without an error code"
            )),
            code => error(code, c_text(ffi::mysql_stmt_error(st))),
        }
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
                implicit: false,
                stmts: Vec::new(),
                by_text: HashMap::new(),
            })
        }
    }

    fn conn_error(&self) -> DbError {
        unsafe {
            error(
                ffi::mysql_errno(self.mysql),
                c_text(ffi::mysql_error(self.mysql)),
            )
        }
    }

    /// This connection with autocommit off, for sessions whose every statement runs inside a
    /// transaction ended by COMMIT or ROLLBACK: the transaction then opens with its first
    /// statement, which saves BEGIN's round trip.
    pub fn transactional(mut self) -> Result<Self> {
        if unsafe { ffi::mysql_autocommit(self.mysql, 0) } != 0 {
            bail!("cannot turn autocommit off: {}", self.conn_error());
        }
        self.implicit = true;
        Ok(self)
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
                let e = stmt_error(self.mysql, st);
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
                out: None,
            });
        }
        Ok(Prepared::new(self.stmts.len() - 1))
    }

    /// Bind `params` (into the statement's own buffers) and execute it.
    fn execute(&mut self, p: Prepared, params: &[V]) -> DbResult<*mut ffi::MYSQL_STMT> {
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
                    // an INT where it fits, as sysbench binds its ids (4 bytes on the wire), a
                    // BIGINT beyond; the slot is an i64 whose first 4 bytes (little-endian) are
                    // the INT
                    s.ints[i] = *x;
                    let ty = if i32::try_from(*x).is_ok() {
                        ffi::enum_field_types::MYSQL_TYPE_LONG
                    } else {
                        ffi::enum_field_types::MYSQL_TYPE_LONGLONG
                    };
                    if b.buffer_type != ty {
                        b.buffer_type = ty;
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
                    return Err(stmt_error(self.mysql, st));
                }
                s.bound = true;
            }
            if ffi::mysql_stmt_execute(st) != 0 {
                return Err(stmt_error(self.mysql, st));
            }
        }
        Ok(st)
    }

    /// Execute a prepared statement; the rows it returns are read off the connection and
    /// dropped as they come (`mysql_stmt_free_result` on an unread result skips its packets),
    /// never copied. Returns the rows it changed (0 for a query).
    pub fn run(&mut self, p: Prepared, params: &[V]) -> DbResult<u64> {
        let st = self.execute(p, params)?;
        unsafe {
            if ffi::mysql_stmt_field_count(st) == 0 {
                return Ok(ffi::mysql_stmt_affected_rows(st));
            }
            if ffi::mysql_stmt_free_result(st) != 0 {
                return Err(stmt_error(self.mysql, st));
            }
            Ok(0)
        }
    }

    /// Execute a prepared statement and read its rows.
    fn rows(&mut self, p: Prepared, params: &[V]) -> DbResult<Vec<Vec<V>>> {
        let st = self.execute(p, params)?;
        let s = &mut self.stmts[p.index()];
        unsafe {
            if ffi::mysql_stmt_field_count(st) == 0 {
                return Ok(Vec::new());
            }
            if s.out.is_none() {
                s.out = Columns::of(st);
                if let Some(c) = s.out.as_mut() {
                    if ffi::mysql_stmt_bind_result(st, c.binds.as_mut_ptr()) != 0 {
                        s.out = None;
                        return Err(stmt_error(self.mysql, st));
                    }
                }
            }
            let Some(cols) = s.out.as_ref() else {
                return Ok(Vec::new());
            };
            let mut out = Vec::new();
            loop {
                match ffi::mysql_stmt_fetch(st) as u32 {
                    0 => out.push(cols.row()),
                    ffi::MYSQL_NO_DATA => break,
                    ffi::MYSQL_DATA_TRUNCATED => {
                        ffi::mysql_stmt_free_result(st);
                        return Err(DbError::Other(anyhow::anyhow!(
                            "a column of a row was longer than its declared length"
                        )));
                    }
                    _ => {
                        let e = stmt_error(self.mysql, st);
                        ffi::mysql_stmt_free_result(st);
                        return Err(e);
                    }
                }
            }
            ffi::mysql_stmt_free_result(st);
            Ok(out)
        }
    }

    fn by_text(&mut self, sql: &str) -> DbResult<Prepared> {
        prepared_by_text(self, sql, |c| &mut c.by_text)
    }
}

impl SqlConn for Conn {
    fn dialect(&self) -> Dialect {
        Dialect::MariaDb
    }
    fn batch(&mut self, sql: &str) -> DbResult<()> {
        Conn::batch(self, sql)
    }
    fn begin(&mut self, write: bool) -> DbResult<()> {
        if self.implicit {
            return Ok(()); // the next statement opens it
        }
        Conn::batch(self, self.dialect().begin(write))
    }
    fn query(&mut self, sql: &str, params: &[V]) -> DbResult<Vec<Vec<V>>> {
        let p = self.by_text(sql)?;
        self.rows(p, params)
    }
    fn exec(&mut self, sql: &str, params: &[V]) -> DbResult<()> {
        let p = self.by_text(sql)?;
        self.run(p, params).map(|_| ())
    }
    fn prepare(&mut self, sql: &str) -> DbResult<Prepared> {
        Conn::prepare(self, sql)
    }
    fn run(&mut self, st: Prepared, params: &[V]) -> DbResult<u64> {
        Conn::run(self, st, params)
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
