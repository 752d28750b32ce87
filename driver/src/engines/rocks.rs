//! RocksDB through the `rocksdb` crate, linked to the system librocksdb. An optimistic
//! transaction DB, so that write batches and conflict-checked transactions share one handle.

use anyhow::{Context, Result};
use rocksdb::{
    BlockBasedOptions, Cache, DBCompressionType, ErrorKind, OptimisticTransactionDB,
    OptimisticTransactionOptions, Options, Transaction, WriteOptions,
};

use super::{
    missing_txn, Compression, DbError, DbResult, Engine, EngineOptions, Session, SyncMode, Visit,
};

/// The rocksdb crate has no runtime version call; the driver reports the library it was
/// linked against, read at build time from the system headers when available.
pub fn version() -> String {
    option_env!("ALLOCLAB_ROCKSDB_VERSION")
        .unwrap_or("unknown")
        .to_string()
}

pub struct Rocks {
    db: OptimisticTransactionDB,
    sync: bool,
    _cache: Option<Cache>,
}

fn map_err(e: rocksdb::Error) -> DbError {
    match e.kind() {
        ErrorKind::Busy | ErrorKind::TryAgain => DbError::Conflict(e.to_string()),
        _ => DbError::Other(anyhow::Error::new(e)),
    }
}

impl Rocks {
    pub fn open(o: &EngineOptions) -> Result<Self> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        if let Some(b) = o.memtable_bytes {
            opts.set_write_buffer_size(b);
        }
        let flush = o.flush_threads.unwrap_or(1).max(1) as i32;
        let compact = o.compaction_threads.unwrap_or(1).max(1) as i32;
        opts.set_max_background_jobs(flush + compact);
        opts.increase_parallelism(flush + compact);
        opts.set_compression_type(match o.compression {
            Compression::None => DBCompressionType::None,
            Compression::Lz4 => DBCompressionType::Lz4,
            Compression::Zstd => DBCompressionType::Zstd,
        });
        let mut cache = None;
        if let Some(b) = o.block_cache_bytes {
            let c = Cache::new_lru_cache(b);
            let mut bbo = BlockBasedOptions::default();
            bbo.set_block_cache(&c);
            opts.set_block_based_table_factory(&bbo);
            cache = Some(c);
        }
        let db = OptimisticTransactionDB::open(&opts, &o.path).context("cannot open RocksDB")?;
        Ok(Rocks {
            db,
            sync: o.sync == SyncMode::Full,
            _cache: cache,
        })
    }
}

/// RocksDB's own account of its memory (its properties), by the names `Engine::memory` gives.
const MEMORY: &[(&str, &str)] = &[
    ("block_cache_bytes", "rocksdb.block-cache-usage"),
    ("memtables_bytes", "rocksdb.cur-size-all-mem-tables"),
    ("table_readers_bytes", "rocksdb.estimate-table-readers-mem"),
];

impl Engine for Rocks {
    fn memory(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        let mut m = serde_json::Map::new();
        for (name, property) in MEMORY {
            if let Ok(Some(v)) = self.db.property_int_value(*property) {
                m.insert(name.to_string(), v.into());
            }
        }
        Some(m)
    }
    fn compact(&self) -> Result<()> {
        self.db.flush().context("RocksDB flush failed")?;
        self.db.compact_range(None::<&[u8]>, None::<&[u8]>);
        Ok(())
    }
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        let mut wopts = WriteOptions::default();
        wopts.set_sync(self.sync);
        Ok(Box::new(RocksSession {
            db: &self.db,
            wopts,
            txn: None,
        }))
    }
}

struct RocksSession<'a> {
    db: &'a OptimisticTransactionDB,
    wopts: WriteOptions,
    txn: Option<Transaction<'a, OptimisticTransactionDB>>,
}

impl<'a> RocksSession<'a> {
    fn txn(&mut self) -> DbResult<&mut Transaction<'a, OptimisticTransactionDB>> {
        self.txn.as_mut().ok_or_else(missing_txn)
    }
}

impl Session for RocksSession<'_> {
    fn begin(&mut self, _write: bool) -> DbResult<()> {
        let t = self
            .db
            .transaction_opt(&self.wopts, &OptimisticTransactionOptions::default());
        self.txn = Some(t);
        Ok(())
    }
    fn begin_snapshot(&mut self) -> DbResult<()> {
        // validate written keys against the snapshot taken at begin, not at first write
        let mut topts = OptimisticTransactionOptions::default();
        topts.set_snapshot(true);
        self.txn = Some(self.db.transaction_opt(&self.wopts, &topts));
        Ok(())
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> DbResult<()> {
        self.txn()?.put(key, value).map_err(map_err)
    }
    fn get(&mut self, key: &[u8]) -> DbResult<Option<Vec<u8>>> {
        self.txn()?.get(key).map_err(map_err)
    }
    fn delete(&mut self, key: &[u8]) -> DbResult<()> {
        self.txn()?.delete(key).map_err(map_err)
    }
    fn scan(&mut self, start: &[u8], limit: usize, visit: &mut Visit<'_>) -> DbResult<usize> {
        let txn = self.txn()?;
        let mut it = txn.raw_iterator();
        it.seek(start);
        let mut n = 0;
        while n < limit && it.valid() {
            n += 1;
            if !visit(it.key().unwrap_or_default(), it.value().unwrap_or_default()) {
                break;
            }
            it.next();
        }
        it.status().map_err(map_err)?;
        Ok(n)
    }
    fn commit(&mut self) -> DbResult<()> {
        self.txn
            .take()
            .ok_or_else(missing_txn)?
            .commit()
            .map_err(map_err)
    }
    fn rollback(&mut self) -> DbResult<()> {
        match self.txn.take() {
            Some(t) => t.rollback().map_err(map_err),
            None => Ok(()),
        }
    }
}
