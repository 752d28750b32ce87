//! Storage engines behind one narrow trait. Engines never time themselves: the runner does.

use std::path::PathBuf;

use anyhow::{bail, Result};
use serde::Serialize;

mod null;
mod rocks;
pub mod sqlite;
pub(crate) mod tides;

/// What an engine call can fail with. `Conflict` is retryable (a write-write conflict or a
/// busy lock); everything else is an error of the run.
#[derive(Debug)]
pub enum DbError {
    Conflict(String),
    Other(anyhow::Error),
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DbError::Conflict(m) => write!(f, "conflict: {m}"),
            DbError::Other(e) => write!(f, "{e:#}"),
        }
    }
}

impl<E: Into<anyhow::Error>> From<E> for DbError {
    fn from(e: E) -> Self {
        DbError::Other(e.into())
    }
}

pub type DbResult<T> = std::result::Result<T, DbError>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum SyncMode {
    /// never fsync the log
    None,
    /// fsync on every commit
    Full,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Lz4,
    Zstd,
}

/// The engine settings the studies vary. `None` means the engine's own default.
#[derive(Debug, Clone, Serialize)]
pub struct EngineOptions {
    pub path: PathBuf,
    pub memtable_bytes: Option<usize>,
    pub block_cache_bytes: Option<usize>,
    pub sync: SyncMode,
    pub compression: Compression,
    pub flush_threads: Option<usize>,
    pub compaction_threads: Option<usize>,
    /// null engine only: simulated latency of every call, in nanoseconds
    pub null_latency_ns: u64,
}

pub trait Engine: Send + Sync {
    /// One session per worker thread; a session holds at most one open transaction.
    fn session(&self) -> Result<Box<dyn Session + '_>>;
    /// What the engine says it holds in memory, in bytes, by part (RocksDB: its block cache,
    /// memtables and table readers); None where it keeps no account.
    fn memory(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        None
    }
    /// Flush and compact everything now (a life's burst); an engine without either does nothing.
    fn compact(&self) -> Result<()> {
        Ok(())
    }
}

/// What `Session::scan` calls with each entry's key and value: true to go on.
pub type Visit<'a> = dyn FnMut(&[u8], &[u8]) -> bool + 'a;

/// A connection-like handle used by one thread. Every operation runs inside
/// `begin` .. `commit`/`rollback`; `write` tells engines with lock modes what is coming.
pub trait Session {
    fn begin(&mut self, write: bool) -> DbResult<()>;
    /// A write transaction with snapshot isolation and first-committer-wins on written keys
    /// (no lost updates), as TPC-C needs. Engines whose writers are serialised anyway keep
    /// the default.
    fn begin_snapshot(&mut self) -> DbResult<()> {
        self.begin(true)
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> DbResult<()>;
    fn get(&mut self, key: &[u8]) -> DbResult<Option<Vec<u8>>>;
    fn delete(&mut self, key: &[u8]) -> DbResult<()>;
    /// Visit up to `limit` entries with key >= `start`, in key order, until `visit` says stop.
    /// Returns how many were visited.
    fn scan(&mut self, start: &[u8], limit: usize, visit: &mut Visit<'_>) -> DbResult<usize>;
    fn commit(&mut self) -> DbResult<()>;
    fn rollback(&mut self) -> DbResult<()>;
}

/// An engine the driver reaches, and what runs on it.
pub struct EngineInfo {
    pub name: &'static str,
    /// the key-value suite runs on it (in this process)
    pub key_value: bool,
    /// TPC-C runs on it
    pub tpcc: bool,
}

/// Every engine the driver knows: the one registry. The embedded ones run in this process;
/// `mariadb` and `postgres` are servers alloclab started, reached over their unix socket.
pub const ENGINES: &[EngineInfo] = &[
    EngineInfo {
        name: "tidesdb",
        key_value: true,
        tpcc: true,
    },
    EngineInfo {
        name: "rocksdb",
        key_value: true,
        tpcc: true,
    },
    EngineInfo {
        name: "sqlite",
        key_value: true,
        tpcc: true,
    },
    EngineInfo {
        name: "null",
        key_value: true,
        tpcc: false,
    },
    EngineInfo {
        name: "mariadb",
        key_value: false,
        tpcc: true,
    },
    EngineInfo {
        name: "postgres",
        key_value: false,
        tpcc: true,
    },
];

/// The names of the engines `which` says yes to.
pub fn names(which: impl Fn(&EngineInfo) -> bool) -> Vec<&'static str> {
    ENGINES
        .iter()
        .filter(|e| which(e))
        .map(|e| e.name)
        .collect()
}

pub fn open(name: &str, opts: &EngineOptions) -> Result<Box<dyn Engine>> {
    std::fs::create_dir_all(&opts.path)?;
    Ok(match name {
        "tidesdb" => Box::new(tides::Tides::open(opts)?),
        "rocksdb" => Box::new(rocks::Rocks::open(opts)?),
        "sqlite" => Box::new(sqlite::Sqlite::open(opts)?),
        "null" => Box::new(null::Null::new(opts.null_latency_ns)),
        other => bail!(
            "unknown engine '{other}'; choose one of {}",
            names(|e| e.key_value).join(", ")
        ),
    })
}

/// Versions of the engines compiled into this driver.
pub fn versions() -> serde_json::Value {
    serde_json::json!({
        "tidesdb": tides::version(),
        "rocksdb": rocks::version(),
        "sqlite": sqlite::version(),
        "null": env!("CARGO_PKG_VERSION"),
    })
}

fn missing_txn() -> DbError {
    DbError::Other(anyhow::anyhow!(
        "operation outside a transaction: call begin() first"
    ))
}
