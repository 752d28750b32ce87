//! TPC-C as HammerDB runs it, checked as the specification asks: load (clause 4.3, `load`), the
//! five transactions (clause 2, `transactions`) on inputs drawn as the specification says
//! (`input`), NOPM from the database, and consistency conditions 1-4 (clause 3.3.2, `check`).
//! The transaction logic is written once against `TpccTx`; key-value engines (`kv`) and SQL
//! engines (`sql`, over `sql_tx`) implement it. SQL engines also run whole transactions as
//! prepared statements (`stmts`) or stored procedures (`procs`). This file holds the traits,
//! the run's spec, and the workload: its virtual users and the NOPM it measures.

mod check;
mod input;
pub mod kv;
mod load;
pub mod procs;
pub mod rows;
mod schema;
pub mod sql;
mod sql_tx;
pub mod stmts;
mod transactions;

use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::Serialize;
use serde_json::json;

pub use self::check::check;
pub use self::input::{sample, Input, InputGen};
pub use self::load::{load, read_meta};
use self::rows::*;
use self::transactions::RowSession;
use super::{retry_conflicts, Step, Worker, Workload};
use crate::engines::{self, DbError, DbResult, EngineOptions};
use crate::events::EventSink;

pub const TXNS: [&str; 5] = ["neword", "payment", "delivery", "slev", "ostat"];
const NEWORD: usize = 0;
const PAYMENT: usize = 1;
const DELIVERY: usize = 2;
const SLEV: usize = 3;
const OSTAT: usize = 4;

pub trait TpccDb: Send + Sync {
    fn session(&self) -> Result<Box<dyn TpccTx + '_>>;
    /// Make ready what `mode` needs (procedures mode: create the procedures); before any
    /// measured transaction, so that a failure names the server and what failed.
    fn prepare_mode(&self, mode: Mode) -> Result<()> {
        match mode {
            Mode::Rows => Ok(()),
            other => bail!(
                "TPC-C mode {} runs on SQL engines only (MariaDB, PostgreSQL; SQLite: statements)",
                other.name()
            ),
        }
    }
    /// One virtual user's way of running whole transactions in `mode`.
    fn terminal(&self, mode: Mode) -> Result<Box<dyn TxnSession + '_>> {
        match mode {
            Mode::Rows => Ok(Box::new(RowSession(self.session()?))),
            other => bail!(
                "TPC-C mode {} runs on SQL engines only (MariaDB, PostgreSQL; SQLite: statements)",
                other.name()
            ),
        }
    }
    /// After a load: bring the engine's statistics up to date (SQL engines: ANALYZE). A bulk
    /// load can leave them at zero rows, and MariaDB then updated a customer by its primary key
    /// through a range scan of the district's 3,000 (2,800 rows read per Payment, 28,000 per
    /// Delivery, 4x the server's CPU per New-Order).
    fn analyze(&self) -> Result<()> {
        Ok(())
    }
    /// The server's own count of committed plus rolled-back transactions, where there is a
    /// server (MariaDB: Com_commit + Com_rollback; PostgreSQL: xact_commit + xact_rollback).
    fn transaction_counter(&self) -> Result<Option<u64>> {
        Ok(None)
    }
}

/// Row-level access TPC-C needs, inside begin .. commit. `insert` tells SQL engines
/// whether a put is an INSERT or an UPDATE; key-value engines write the row either way.
pub trait TpccTx {
    /// Loading: writes may wait until commit and go together (SQL: multi-row INSERTs), and
    /// the session may skip checks a fresh load cannot fail.
    fn set_bulk(&mut self, _on: bool) -> DbResult<()> {
        Ok(())
    }
    /// Rows per load transaction: servers take bulk inserts best in large transactions.
    fn load_batch(&self) -> usize {
        500
    }
    fn begin(&mut self, write: bool) -> DbResult<()>;
    fn commit(&mut self) -> DbResult<()>;
    fn rollback(&mut self) -> DbResult<()>;
    fn meta(&mut self) -> DbResult<Option<String>>;
    fn put_meta(&mut self, text: &str) -> DbResult<()>;
    fn warehouse(&mut self, w: u32) -> DbResult<Warehouse>;
    fn put_warehouse(&mut self, r: &Warehouse, insert: bool) -> DbResult<()>;
    fn district(&mut self, w: u32, d: u32) -> DbResult<District>;
    fn put_district(&mut self, r: &District, insert: bool) -> DbResult<()>;
    fn customer(&mut self, w: u32, d: u32, c: u32) -> DbResult<Customer>;
    fn put_customer(&mut self, r: &Customer, insert: bool) -> DbResult<()>;
    /// Customer ids with this last name, ordered by first name.
    fn customer_ids_by_last(&mut self, w: u32, d: u32, last: &str) -> DbResult<Vec<u32>>;
    fn item(&mut self, i: u32) -> DbResult<Option<Item>>;
    fn put_item(&mut self, r: &Item) -> DbResult<()>;
    fn stock(&mut self, w: u32, i: u32) -> DbResult<Stock>;
    fn put_stock(&mut self, r: &Stock, insert: bool) -> DbResult<()>;
    fn order(&mut self, w: u32, d: u32, o: u32) -> DbResult<Order>;
    fn put_order(&mut self, r: &Order, insert: bool) -> DbResult<()>;
    fn last_order_of(&mut self, w: u32, d: u32, c: u32) -> DbResult<Option<Order>>;
    fn insert_new_order(&mut self, w: u32, d: u32, o: u32) -> DbResult<()>;
    fn oldest_new_order(&mut self, w: u32, d: u32) -> DbResult<Option<u32>>;
    fn delete_new_order(&mut self, w: u32, d: u32, o: u32) -> DbResult<()>;
    fn order_lines(&mut self, w: u32, d: u32, o: u32) -> DbResult<Vec<OrderLine>>;
    fn put_order_line(&mut self, r: &OrderLine, insert: bool) -> DbResult<()>;
    /// Item ids of the order lines of orders o_lo <= o_id < o_hi.
    fn recent_line_items(&mut self, w: u32, d: u32, o_lo: u32, o_hi: u32) -> DbResult<Vec<u32>>;
    fn insert_history(&mut self, r: &History) -> DbResult<()>;
    /// (max o_id, sum of o_ol_cnt) over a district's orders
    fn district_order_stats(&mut self, w: u32, d: u32) -> DbResult<(u32, u64)>;
    /// (min, max, count) of a district's new-order ids (0, 0, 0 when none)
    fn district_new_order_stats(&mut self, w: u32, d: u32) -> DbResult<(u32, u32, u64)>;
    fn district_order_line_count(&mut self, w: u32, d: u32) -> DbResult<u64>;
    /// Sum of D_NEXT_O_ID over warehouses 1..=w, read without taking row locks (HammerDB's
    /// NOPM counter must not queue behind running New-Orders).
    fn next_order_sum(&mut self, warehouses: u32) -> DbResult<u64> {
        let mut sum = 0u64;
        for w in 1..=warehouses {
            for d in 1..=DISTRICTS {
                sum += self.district(w, d)?.next_o_id as u64;
            }
        }
        Ok(sum)
    }
}

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
        "mariadb" => Box::new(sql::TpccMariaDb::open(need_server()?)?),
        "postgres" => Box::new(sql::TpccPostgres::open(need_server()?)?),
        other => bail!(
            "TPC-C runs on {}, not '{other}'",
            engines::names(|e| e.tpcc).join(", ")
        ),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mix {
    /// 45/43/4/4/4 (New-Order, Payment, Delivery, Stock-Level, Order-Status)
    Spec,
    /// HammerDB's 10/10/1/1/1 out of 23
    Hammerdb,
}

/// How the client drives the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// row at a time through `TpccTx` (the key-value engines' only way; SQL engines too)
    Rows,
    /// prepared statements, set-based where the specification allows, fewest round trips
    Statements,
    /// one CALL per transaction, the work inside the server (HammerDB's default)
    Procedures,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Rows => "rows",
            Mode::Statements => "statements",
            Mode::Procedures => "procedures",
        }
    }
}

/// A virtual user's connection that runs whole transactions, retrying conflicts up to `max`
/// times; returns the retries and the outcome.
pub trait TxnSession {
    fn run(&mut self, input: &Input, max: u64) -> (u64, DbResult<Outcome>);
}

/// A session whose transaction is one call (a procedure, or its statements between BEGIN and
/// COMMIT): retried whole on a conflict, with the same time stamp.
pub trait WholeTxn {
    fn once(&mut self, input: &Input, now: i64) -> DbResult<Outcome>;
}

impl<T: WholeTxn> TxnSession for T {
    fn run(&mut self, input: &Input, max: u64) -> (u64, DbResult<Outcome>) {
        let now = now_s();
        retry_conflicts(max, || {
            self.once(input, now)
                .map_err(|e| order_id_taken_is_a_conflict(input, e))
        })
    }
}

/// A New-Order that finds its order id already taken read the district's next order id before
/// another New-Order committed it: under optimistic concurrency (TideSQL's default, which does
/// not lock on SELECT ... FOR UPDATE) that shows first as a duplicate key at the INSERT, and it
/// is a conflict, retried like one, as PostgreSQL's unique violations after a concurrent commit
/// are (sysbench's pgsql driver does the same). A duplicate that commits would fail the run's
/// consistency check; an engine that never lets it pass fails the run after `max` retries.
pub(super) fn order_id_taken_is_a_conflict(input: &Input, e: DbError) -> DbError {
    match e {
        DbError::Other(err) if matches!(input, Input::NewOrder { .. }) => {
            let text = format!("{err:#}");
            if text.contains("1062") && text.contains("Duplicate entry") {
                DbError::Conflict(text)
            } else {
                DbError::Other(err)
            }
        }
        e => e,
    }
}

/// How a transaction ended: committed, or rolled back on purpose (New-Order's 1 %).
pub enum Outcome {
    Committed,
    RolledBack,
}

#[derive(Debug, Clone, Serialize)]
pub struct TpccSpec {
    pub warehouses: u32,
    pub mix: Mix,
    pub mode: Mode,
    /// each virtual user picks a random warehouse per transaction instead of its home one
    pub all_warehouses: bool,
    /// the spec's keying and think times (off in HammerDB's default)
    pub think: bool,
    pub seed: u64,
    pub max_retries: u64,
}

/// Run `body` as one transaction of `tx`, retried whole on a conflict (at most `max` times):
/// how the load, the NOPM counter and rows mode run their work over `TpccTx`.
fn retry<T>(
    tx: &mut dyn TpccTx,
    write: bool,
    max: u64,
    body: &mut dyn FnMut(&mut dyn TpccTx) -> DbResult<T>,
) -> (u64, DbResult<T>) {
    retry_conflicts(max, || match tx.begin(write).and_then(|_| body(tx)) {
        Ok(v) => tx.commit().map(|_| v),
        Err(e) => {
            // the transaction's error is the one to report; a rollback that fails after it
            // only means the engine already ended the transaction
            let _ = tx.rollback();
            Err(e)
        }
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
