//! SQLite (bundled by rusqlite): one connection per session, WAL journal, a single
//! `kv(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID` table.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use rusqlite::{params, Connection, ErrorCode, OptionalExtension};

use super::{DbError, DbResult, Engine, EngineOptions, Session, SyncMode, Visit};

pub fn version() -> String {
    rusqlite::version().to_string()
}

/// A SQLite database file and the pragmas every connection to it gets (WAL journal, the run's
/// sync mode and cache size). Shared by the key-value engine and TPC-C's SQL.
pub struct SqliteFile {
    file: PathBuf,
    pragmas: String,
}

impl SqliteFile {
    pub fn new(file: PathBuf, o: &EngineOptions) -> Self {
        let sync = match o.sync {
            SyncMode::None => "OFF",
            SyncMode::Full => "FULL",
        };
        let mut pragmas = format!("PRAGMA synchronous={sync};");
        if let Some(b) = o.block_cache_bytes {
            pragmas += &format!("PRAGMA cache_size=-{};", (b / 1024).max(1));
        }
        if let Some(b) = o.memtable_bytes {
            // the WAL plays the memtable's part: checkpoint once it holds this much
            pragmas += &format!("PRAGMA wal_autocheckpoint={};", (b / 4096).max(1));
        }
        SqliteFile { file, pragmas }
    }

    pub fn connect(&self) -> Result<Connection> {
        let c = Connection::open(&self.file)
            .with_context(|| format!("cannot open SQLite database {}", self.file.display()))?;
        c.busy_timeout(Duration::from_secs(60))?;
        c.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))?;
        c.execute_batch(&self.pragmas)?;
        Ok(c)
    }
}

pub struct Sqlite {
    db: SqliteFile,
}

/// Busy and locked are conflicts (retried); anything else is an error.
pub fn map_err(e: rusqlite::Error) -> DbError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => {
            DbError::Conflict(e.to_string())
        }
        _ => DbError::Other(anyhow::Error::new(e)),
    }
}

impl Sqlite {
    pub fn open(o: &EngineOptions) -> Result<Self> {
        let db = SqliteFile::new(o.path.join("kv.sqlite"), o);
        db.connect()?.execute_batch(
            "CREATE TABLE IF NOT EXISTS kv(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID;",
        )?;
        Ok(Sqlite { db })
    }
}

impl Engine for Sqlite {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(SqliteSession {
            c: self.db.connect()?,
            open: false,
        }))
    }
}

struct SqliteSession {
    c: Connection,
    open: bool,
}

impl Session for SqliteSession {
    fn begin(&mut self, write: bool) -> DbResult<()> {
        self.c
            .execute_batch(if write { "BEGIN IMMEDIATE" } else { "BEGIN" })
            .map_err(map_err)?;
        self.open = true;
        Ok(())
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> DbResult<()> {
        let mut st = self
            .c
            .prepare_cached("INSERT OR REPLACE INTO kv(k, v) VALUES (?1, ?2)")
            .map_err(map_err)?;
        st.execute(params![key, value]).map_err(map_err)?;
        Ok(())
    }
    fn get(&mut self, key: &[u8]) -> DbResult<Option<Vec<u8>>> {
        let mut st = self
            .c
            .prepare_cached("SELECT v FROM kv WHERE k = ?1")
            .map_err(map_err)?;
        st.query_row(params![key], |r| r.get::<_, Vec<u8>>(0))
            .optional()
            .map_err(map_err)
    }
    fn delete(&mut self, key: &[u8]) -> DbResult<()> {
        let mut st = self
            .c
            .prepare_cached("DELETE FROM kv WHERE k = ?1")
            .map_err(map_err)?;
        st.execute(params![key]).map_err(map_err)?;
        Ok(())
    }
    fn scan(&mut self, start: &[u8], limit: usize, visit: &mut Visit<'_>) -> DbResult<usize> {
        let mut st = self
            .c
            .prepare_cached("SELECT k, v FROM kv WHERE k >= ?1 ORDER BY k LIMIT ?2")
            .map_err(map_err)?;
        let mut rows = st.query(params![start, limit as i64]).map_err(map_err)?;
        let mut n = 0;
        while let Some(r) = rows.next().map_err(map_err)? {
            n += 1;
            let k = r
                .get_ref(0)
                .map_err(map_err)?
                .as_blob()
                .map_err(|e| DbError::Other(e.into()))?;
            let v = r
                .get_ref(1)
                .map_err(map_err)?
                .as_blob()
                .map_err(|e| DbError::Other(e.into()))?;
            if !visit(k, v) {
                break;
            }
        }
        Ok(n)
    }
    fn commit(&mut self) -> DbResult<()> {
        self.open = false;
        match self.c.execute_batch("COMMIT") {
            Ok(()) => Ok(()),
            Err(e) => {
                // the COMMIT's error is the one to report; a failed ROLLBACK after it only
                // means SQLite already ended the transaction
                let _ = self.c.execute_batch("ROLLBACK");
                Err(map_err(e))
            }
        }
    }
    fn rollback(&mut self) -> DbResult<()> {
        if std::mem::take(&mut self.open) {
            self.c.execute_batch("ROLLBACK").map_err(map_err)?;
        }
        Ok(())
    }
}
