//! TPC-C as HammerDB runs it, checked as the specification asks: load (clause 4.3, `load`), the
//! five transactions (clause 2, `transactions`) on inputs drawn as the specification says
//! (`input`), NOPM from the database, and consistency conditions 1-4 (clause 3.3.2, `check`).
//! The transaction logic is written once against `TpccTx` (`traits`, with the other traits the
//! modules share); key-value engines (`kv`) and SQL engines (`sql`, over `sql_tx` and each
//! table's `sql_rows`) implement it. SQL engines also run whole transactions as prepared
//! statements (`stmts`) or stored procedures (`procs`). This file assembles them: which engine
//! gets which implementation, and the workload (its virtual users and the NOPM it measures).

mod check;
mod input;
pub mod kv;
mod load;
pub mod procs;
pub mod rows;
mod schema;
mod spec;
pub mod sql;
mod sql_rows;
mod sql_tx;
pub mod stmts;
mod traits;
mod transactions;

use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde_json::json;

pub use self::check::check;
pub use self::input::{sample, InputGen};
pub use self::load::{load, read_meta};
use self::rows::*;
pub use self::spec::{Mix, Mode, TpccSpec, TXNS};
use self::traits::{retry, Outcome, TxnSession};
pub use self::traits::{TpccDb, TpccTx};
use super::{Step, Worker, Workload};
use crate::engines::{self, EngineOptions};
use crate::events::EventSink;

/// Key-value engines get the ordered-key encoding; SQLite, MariaDB and PostgreSQL get SQL.
/// `server` says where a server alloclab started listens (its unix socket).
pub fn open(
    engine: &str,
    opts: &EngineOptions,
    server: Option<crate::sql::Server>,
) -> Result<Box<dyn TpccDb>> {
    let need_server = || {
        server
            .clone()
            .context("--socket is needed to reach a server")
    };
    Ok(match engine {
        "sqlite" => Box::new(sql::TpccSqlite::open(opts)?),
        "tidesdb" | "rocksdb" => Box::new(kv::TpccKv::new(engines::open(engine, opts)?)),
        "mariadb" => Box::new(sql::TpccServer::open(sql::Kind::MariaDb, need_server()?)?),
        "postgres" => Box::new(sql::TpccServer::open(sql::Kind::Postgres, need_server()?)?),
        other => bail!(
            "TPC-C runs on {}, not '{other}'",
            engines::names(|e| e.tpcc).join(", ")
        ),
    })
}

/// Sum of D_NEXT_O_ID over every district: HammerDB's NOPM counter.
pub fn next_order_sum(db: &dyn TpccDb, warehouses: u32) -> Result<u64> {
    let mut tx = db.session()?;
    let (_, r) = retry(&mut *tx, false, 100, &mut |tx| {
        tx.next_order_sum(warehouses)
    });
    r.map_err(|e| anyhow::anyhow!("cannot read d_next_o_id: {e}"))
}

// --- the workload -----------------------------------------------------------------------------

pub struct TpccWorkload<'a> {
    db: &'a dyn TpccDb,
    spec: TpccSpec,
    c_run: Constants,
    next_o_start: Mutex<Option<u64>>,
    server_txn_start: Mutex<Option<u64>>,
}

impl<'a> TpccWorkload<'a> {
    pub fn new(db: &'a dyn TpccDb, spec: TpccSpec) -> Result<Self> {
        let meta = read_meta(db)?;
        if spec.warehouses > meta.warehouses {
            bail!(
                "--warehouses {} but the database holds {}",
                spec.warehouses,
                meta.warehouses
            );
        }
        let c_run =
            Constants::for_run(&meta.c_load, &mut SmallRng::seed_from_u64(spec.seed ^ 0x8C));
        db.prepare_mode(spec.mode)?;
        Ok(TpccWorkload {
            db,
            spec,
            c_run,
            next_o_start: Mutex::new(None),
            server_txn_start: Mutex::new(None),
        })
    }
}

impl Workload for TpccWorkload<'_> {
    fn op_names(&self) -> Vec<&'static str> {
        TXNS.to_vec()
    }
    fn prepare(&self, _threads: usize, _sink: &EventSink) -> Result<()> {
        Ok(())
    }
    fn worker(&self, thread: usize, _threads: usize) -> Result<Box<dyn Worker + '_>> {
        Ok(Box::new(Terminal {
            tx: self.db.terminal(self.spec.mode)?,
            gen: InputGen::new(&self.spec, self.c_run, thread),
            max_retries: self.spec.max_retries,
        }))
    }
    fn measure_begin(&self) -> Result<()> {
        *self.next_o_start.lock().expect("poisoned") =
            Some(next_order_sum(self.db, self.spec.warehouses)?);
        *self.server_txn_start.lock().expect("poisoned") = self.db.transaction_counter()?;
        Ok(())
    }
    fn measure_end(&self, duration_s: f64) -> Result<serde_json::Value> {
        let start = self.next_o_start.lock().expect("poisoned").ok_or_else(|| {
            anyhow::anyhow!("measure_end came before measure_begin: no NOPM start")
        })?;
        let end = next_order_sum(self.db, self.spec.warehouses)?;
        let minutes = duration_s / 60.0;
        let started = *self.server_txn_start.lock().expect("poisoned");
        let server_tpm = match (started, self.db.transaction_counter()?) {
            (Some(a), Some(b)) if minutes > 0.0 => Some(b.saturating_sub(a) as f64 / minutes),
            _ => None,
        };
        Ok(json!({
            "kind": "tpcc",
            "warehouses": self.spec.warehouses,
            "d_next_o_id_sum_start": start,
            "d_next_o_id_sum_end": end,
            "nopm": if minutes > 0.0 { (end - start) as f64 / minutes } else { 0.0 },
            "server_tpm": server_tpm,
            "c_run": self.c_run,
            "mix": self.spec.mix,
            "mode": self.spec.mode,
        }))
    }
}

/// One HammerDB virtual user.
struct Terminal<'a> {
    tx: Box<dyn TxnSession + 'a>,
    gen: InputGen,
    max_retries: u64,
}

impl Worker for Terminal<'_> {
    fn step(&mut self) -> Step {
        let (op, input) = self.gen.next();
        self.gen.think(op);
        let (retries, r) = self.tx.run(&input, self.max_retries);
        let (rolled_back, result) = match r {
            Ok(Outcome::RolledBack) => (true, Ok(())),
            Ok(Outcome::Committed) => (false, Ok(())),
            Err(e) => (false, Err(e)),
        };
        Step {
            op,
            ops: 1,
            retries,
            rolled_back,
            result,
        }
    }
}

#[cfg(test)]
mod tests {
    //! TidesDB's missed rows, without a TPC-C transaction: the loader's rows written, the
    //! database closed and opened again, then consistency conditions 1-4 read back.
    use super::*;
    use crate::engines::{tides::Tides, Compression, EngineOptions, SyncMode};

    fn opts(path: &std::path::Path) -> EngineOptions {
        EngineOptions {
            path: path.into(),
            memtable_bytes: None,
            block_cache_bytes: None,
            sync: SyncMode::None,
            compression: Compression::None,
            flush_threads: None,
            compaction_threads: None,
            null_latency_ns: 0,
        }
    }

    /// Load 2 warehouses with 2 loaders, close, reopen: the conditions that fail.
    fn load_close_reopen(dir: &std::path::Path, seed: u64, wait_on_close: bool) -> Vec<String> {
        let _ = std::fs::remove_dir_all(dir);
        let sink =
            crate::events::EventSink::open(None, Some(&dir.with_extension("jsonl"))).unwrap();
        {
            let mut e = Tides::open(&opts(dir)).unwrap();
            e.wait_on_close = wait_on_close;
            load::load(&kv::TpccKv::new(Box::new(e)), 2, 2, seed, &sink).unwrap();
        }
        let db = kv::TpccKv::new(Box::new(Tides::open(&opts(dir)).unwrap()));
        let failed = check::check(&db, 2).unwrap().into_iter().filter(|c| !c.ok);
        let out = failed.map(|c| c.detail).collect();
        let _ = std::fs::remove_dir_all(dir);
        let _ = std::fs::remove_file(dir.with_extension("jsonl"));
        out
    }

    fn dir(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("alloclab-{name}-{}", std::process::id()))
    }

    #[test]
    fn a_tidesdb_load_keeps_every_row_across_a_close() {
        for seed in 31..34 {
            let failed = load_close_reopen(&dir("tides-close"), seed, true);
            assert!(failed.is_empty(), "seed {seed}: {failed:?}");
        }
    }

    #[test]
    #[ignore = "shows the engine's defect (minutes): cargo test --release -- --ignored --nocapture"]
    fn a_tidesdb_closed_at_once_after_a_load_loses_rows_now_and_then() {
        let rounds: u64 = std::env::var("ROUNDS").map_or(30, |r| r.parse().unwrap());
        let lost: Vec<_> = (0..rounds)
            .map(|r| load_close_reopen(&dir("tides-at-once"), 31 + r, false))
            .filter(|f| !f.is_empty())
            .collect();
        println!(
            "closed at once: {} of {rounds} loads missed rows; {lost:?}",
            lost.len()
        );
    }
}
