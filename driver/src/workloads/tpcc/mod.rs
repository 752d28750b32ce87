//! TPC-C as HammerDB runs it, checked as the specification asks: load (clause 4.3), the five
//! transactions (clause 2), NOPM from the database, and consistency conditions 1-4
//! (clause 3.3.2). The transaction logic is written once against `TpccTx`; key-value
//! engines (`kv`) and SQL engines (`sql`) implement it.

pub mod kv;
pub mod procs;
pub mod rows;
pub mod sql;
pub mod stmts;

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::json;

use self::rows::*;
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

pub const ENGINES: &[&str] = &["tidesdb", "rocksdb", "sqlite", "mariadb", "postgres"];

/// Key-value engines get the ordered-key encoding; SQLite, MariaDB and PostgreSQL get SQL.
/// `server` says where a server alloclab started listens (its unix socket).
pub fn open(
    engine: &str,
    opts: &EngineOptions,
    server: Option<sql::Server>,
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
        other => bail!("TPC-C runs on {}, not '{other}'", ENGINES.join(", ")),
    })
}

/// What the loader leaves in the database for the runs that follow.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub warehouses: u32,
    pub seed: u64,
    pub c_load: Constants,
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
        retry_conflicts(max, || self.once(input, now))
    }
}

/// The row-at-a-time way: the transaction logic below, over `TpccTx`.
pub(crate) struct RowSession<'a>(pub(crate) Box<dyn TpccTx + 'a>);

impl TxnSession for RowSession<'_> {
    fn run(&mut self, input: &Input, max: u64) -> (u64, DbResult<Outcome>) {
        execute(&mut *self.0, input, max)
    }
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

// --- load ------------------------------------------------------------------------------------

/// Load `warehouses` at the spec's cardinalities with `loaders` threads, deterministically from
/// `seed`. Commits every few hundred rows.
pub fn load(
    db: &dyn TpccDb,
    warehouses: u32,
    loaders: usize,
    seed: u64,
    sink: &EventSink,
) -> Result<()> {
    if warehouses == 0 || loaders == 0 {
        bail!("--warehouses and --loaders must be at least 1");
    }
    let t0 = Instant::now();
    let c_load = Constants::random(&mut SmallRng::seed_from_u64(seed ^ 0xC0157));
    {
        let mut tx = db.session()?;
        if tx
            .begin(false)
            .and_then(|_| tx.meta())
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .is_some()
        {
            bail!("the database already holds a TPC-C load: load into an empty --db-path");
        }
        tx.rollback().map_err(|e| anyhow::anyhow!("{e}"))?; // read-only: it only ends the snapshot
    }
    sink.emit(
        "phase",
        json!({"phase": "load", "state": "begin", "warehouses": warehouses, "loaders": loaders}),
    )?;
    let done = std::sync::atomic::AtomicU32::new(0);
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = (0..loaders)
            .map(|l| {
                let done = &done;
                s.spawn(move || -> Result<()> {
                    let mut tx = db.session()?;
                    tx.set_bulk(true)
                        .map_err(|e| anyhow::anyhow!("cannot set the load's session up: {e}"))?;
                    let lo = ITEMS as u64 * l as u64 / loaders as u64 + 1;
                    let hi = ITEMS as u64 * (l as u64 + 1) / loaders as u64;
                    let mut rng = SmallRng::seed_from_u64(seed ^ 0x17E45 ^ l as u64);
                    batched(&mut *tx, lo as u32..=hi as u32, |tx, i| {
                        tx.put_item(&item(&mut rng, i))
                    })?;
                    for w in (1..=warehouses).filter(|w| (*w as usize - 1) % loaders == l) {
                        load_warehouse(&mut *tx, w, seed, &c_load)?;
                        let n = done.fetch_add(1, std::sync::atomic::Ordering::AcqRel) + 1;
                        sink.emit(
                            "phase",
                            json!({"phase": "load", "state": "progress", "warehouses_done": n}),
                        )?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| anyhow::anyhow!("a loader thread panicked"))??;
        }
        Ok(())
    })?;
    let meta = Meta {
        warehouses,
        seed,
        c_load,
    };
    let mut tx = db.session()?;
    let text = serde_json::to_string(&meta)?;
    let (_, r) = retry(&mut *tx, true, 100, &mut |tx| tx.put_meta(&text));
    r.map_err(|e| anyhow::anyhow!("cannot store the load's metadata: {e}"))?;
    let secs = t0.elapsed().as_secs_f64();
    sink.emit(
        "phase",
        json!({"phase": "load", "state": "end", "warehouses": warehouses, "duration_s": secs,
               "warehouses_per_min": warehouses as f64 * 60.0 / secs}),
    )?;
    Ok(())
}

/// Apply `f` to each id in its own write transaction batch of 500.
fn batched(
    tx: &mut dyn TpccTx,
    ids: std::ops::RangeInclusive<u32>,
    mut f: impl FnMut(&mut dyn TpccTx, u32) -> DbResult<()>,
) -> Result<()> {
    let ids: Vec<u32> = ids.collect();
    let per = tx.load_batch();
    for chunk in ids.chunks(per) {
        let (_, r) = retry(tx, true, 100, &mut |tx| {
            chunk.iter().try_for_each(|&i| f(tx, i))
        });
        r.map_err(|e| anyhow::anyhow!("load failed: {e}"))?;
    }
    Ok(())
}

fn load_warehouse(tx: &mut dyn TpccTx, w: u32, seed: u64, c: &Constants) -> Result<()> {
    let mut rng = SmallRng::seed_from_u64(seed ^ (w as u64).wrapping_mul(0x9E3779B97F4A7C15));
    let now = now_s();
    let wh = warehouse(&mut rng, w);
    batched(tx, 1..=1, |tx, _| tx.put_warehouse(&wh, true))?;
    batched(tx, 1..=ITEMS, |tx, i| {
        tx.put_stock(&stock(&mut rng, w, i), true)
    })?;
    for d in 1..=DISTRICTS {
        let dist = district(&mut rng, w, d);
        batched(tx, 1..=1, |tx, _| tx.put_district(&dist, true))?;
        batched(tx, 1..=CUSTOMERS, |tx, cid| {
            tx.put_customer(&customer(&mut rng, c, w, d, cid, now), true)?;
            tx.insert_history(&history(&mut rng, w, d, cid, now))
        })?;
        let orders = orders(&mut rng, w, d, now);
        // an order is about 11 rows (itself, its lines, maybe a new-order)
        for chunk in orders.chunks((tx.load_batch() / 5).max(1)) {
            let (_, r) = retry(tx, true, 100, &mut |tx| {
                for (o, lines) in chunk {
                    tx.put_order(o, true)?;
                    if o.o_id >= FIRST_NEW_ORDER {
                        tx.insert_new_order(w, d, o.o_id)?;
                    }
                    lines.iter().try_for_each(|l| tx.put_order_line(l, true))?;
                }
                Ok(())
            });
            r.map_err(|e| anyhow::anyhow!("load failed: {e}"))?;
        }
    }
    Ok(())
}

// --- consistency ----------------------------------------------------------------------------

#[derive(Debug, Clone, Serialize)]
pub struct Condition {
    pub id: u32,
    pub ok: bool,
    pub detail: String,
}

/// Consistency conditions 1-4 of clause 3.3.2 over every warehouse and district.
pub fn check(db: &dyn TpccDb, warehouses: u32) -> Result<Vec<Condition>> {
    let mut tx = db.session()?;
    let e = |e: DbError| anyhow::anyhow!("consistency check failed to read: {e}");
    tx.begin(false).map_err(e)?;
    let mut fails: [Vec<String>; 4] = Default::default();
    for w in 1..=warehouses {
        let wh = tx.warehouse(w).map_err(e)?;
        let mut d_ytd = 0;
        for d in 1..=DISTRICTS {
            let dist = tx.district(w, d).map_err(e)?;
            d_ytd += dist.ytd;
            let (max_o, sum_ol) = tx.district_order_stats(w, d).map_err(e)?;
            let (min_no, max_no, n_no) = tx.district_new_order_stats(w, d).map_err(e)?;
            let lines = tx.district_order_line_count(w, d).map_err(e)?;
            if dist.next_o_id - 1 != max_o || (n_no > 0 && max_no != max_o) {
                fails[1].push(format!(
                    "w{w} d{d}: d_next_o_id-1={} max(o_id)={max_o} max(no_o_id)={max_no}",
                    dist.next_o_id - 1
                ));
            }
            if n_no > 0 && (max_no - min_no + 1) as u64 != n_no {
                fails[2].push(format!(
                    "w{w} d{d}: max-min+1={} count={n_no}",
                    max_no - min_no + 1
                ));
            }
            if sum_ol != lines {
                fails[3].push(format!(
                    "w{w} d{d}: sum(o_ol_cnt)={sum_ol} order lines={lines}"
                ));
            }
        }
        if wh.ytd != d_ytd {
            fails[0].push(format!("w{w}: w_ytd={} sum(d_ytd)={d_ytd}", wh.ytd));
        }
    }
    tx.rollback().map_err(|e| anyhow::anyhow!("{e}"))?; // read-only: it only ends the snapshot
    let what = [
        "W_YTD = sum(D_YTD)",
        "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)",
        "max(NO_O_ID) - min(NO_O_ID) + 1 = rows in NEW-ORDER",
        "sum(O_OL_CNT) = rows in ORDER-LINE",
    ];
    Ok((0..4)
        .map(|i| Condition {
            id: i as u32 + 1,
            ok: fails[i].is_empty(),
            detail: if fails[i].is_empty() {
                format!("{} holds everywhere", what[i])
            } else {
                format!(
                    "{} fails in {} place(s): {}",
                    what[i],
                    fails[i].len(),
                    fails[i]
                        .iter()
                        .take(3)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            },
        })
        .collect())
}

pub fn read_meta(db: &dyn TpccDb) -> Result<Meta> {
    let mut tx = db.session()?;
    let m = tx
        .begin(false)
        .and_then(|_| tx.meta())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    tx.rollback().map_err(|e| anyhow::anyhow!("{e}"))?; // read-only: it only ends the snapshot
    let text = m.context("this database holds no TPC-C load: run tpcc-load first")?;
    Ok(serde_json::from_str(&text)?)
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

/// The inputs of one transaction, drawn as clauses 2.4.1 - 2.8.1 say. Drawing is kept apart
/// from executing, so that the draws can be checked on their own (`tpcc-sample`).
#[derive(Debug, Clone)]
pub enum Input {
    NewOrder {
        w: u32,
        d: u32,
        c: u32,
        lines: Vec<(u32, u32, u32)>,
        rollback: bool,
    },
    Payment {
        w: u32,
        d: u32,
        c_w: u32,
        c_d: u32,
        by_name: Option<String>,
        c_id: u32,
        amount: i64,
    },
    OrderStatus {
        w: u32,
        d: u32,
        by_name: Option<String>,
        c_id: u32,
    },
    Delivery {
        w: u32,
        carrier: u32,
    },
    StockLevel {
        w: u32,
        d: u32,
        threshold: i32,
    },
}

/// One virtual user's source of inputs.
pub struct InputGen {
    rng: SmallRng,
    home_w: u32,
    home_d: u32,
    spec: TpccSpec,
    c: Constants,
}

impl InputGen {
    pub fn new(spec: &TpccSpec, c: Constants, thread: usize) -> Self {
        InputGen {
            rng: SmallRng::seed_from_u64(
                spec.seed ^ (thread as u64 + 1).wrapping_mul(0xA24BAED4963EE407),
            ),
            home_w: (thread as u32 % spec.warehouses) + 1,
            home_d: (thread as u32 / spec.warehouses % DISTRICTS) + 1,
            spec: spec.clone(),
            c,
        }
    }

    fn pick(&mut self) -> usize {
        match self.spec.mix {
            Mix::Spec => match self.rng.gen_range(0..100) {
                0..=44 => NEWORD,
                45..=87 => PAYMENT,
                88..=91 => DELIVERY,
                92..=95 => SLEV,
                _ => OSTAT,
            },
            Mix::Hammerdb => match self.rng.gen_range(1..=23) {
                1..=10 => NEWORD,
                11..=20 => PAYMENT,
                21 => DELIVERY,
                22 => SLEV,
                _ => OSTAT,
            },
        }
    }

    fn w(&mut self) -> u32 {
        if self.spec.all_warehouses {
            self.rng.gen_range(1..=self.spec.warehouses)
        } else {
            self.home_w
        }
    }

    fn other_w(&mut self, w: u32) -> u32 {
        if self.spec.warehouses == 1 {
            return w;
        }
        loop {
            let x = self.rng.gen_range(1..=self.spec.warehouses);
            if x != w {
                return x;
            }
        }
    }

    fn customer_by_name_or_id(&mut self) -> (Option<String>, u32) {
        if self.rng.gen_range(1..=100) <= 60 {
            (
                Some(last_name(nurand(&mut self.rng, 255, self.c.c_last, 0, 999))),
                0,
            )
        } else {
            (None, nurand(&mut self.rng, 1023, self.c.c_id, 1, CUSTOMERS))
        }
    }

    pub fn next(&mut self) -> (usize, Input) {
        let op = self.pick();
        let input = match op {
            NEWORD => {
                let w = self.w();
                let d = self.rng.gen_range(1..=DISTRICTS);
                let c = nurand(&mut self.rng, 1023, self.c.c_id, 1, CUSTOMERS);
                let ol_cnt = self.rng.gen_range(5..=15u32);
                let rollback = self.rng.gen_range(1..=100) == 1;
                let mut lines = Vec::with_capacity(ol_cnt as usize);
                for n in 1..=ol_cnt {
                    let i = if rollback && n == ol_cnt {
                        ITEMS + 1
                    } else {
                        nurand(&mut self.rng, 8191, self.c.ol_i_id, 1, ITEMS)
                    };
                    let remote = self.spec.warehouses > 1 && self.rng.gen_range(1..=100) == 1;
                    let supply = if remote { self.other_w(w) } else { w };
                    lines.push((i, supply, self.rng.gen_range(1..=10u32)));
                }
                Input::NewOrder {
                    w,
                    d,
                    c,
                    lines,
                    rollback,
                }
            }
            PAYMENT => {
                let w = self.w();
                let d = self.rng.gen_range(1..=DISTRICTS);
                let (c_w, c_d) = if self.spec.warehouses > 1 && self.rng.gen_range(1..=100) > 85 {
                    (self.other_w(w), self.rng.gen_range(1..=DISTRICTS))
                } else {
                    (w, d)
                };
                let (by_name, c_id) = self.customer_by_name_or_id();
                Input::Payment {
                    w,
                    d,
                    c_w,
                    c_d,
                    by_name,
                    c_id,
                    amount: self.rng.gen_range(100..=500_000i64),
                }
            }
            OSTAT => {
                let w = self.w();
                let d = self.rng.gen_range(1..=DISTRICTS);
                let (by_name, c_id) = self.customer_by_name_or_id();
                Input::OrderStatus {
                    w,
                    d,
                    by_name,
                    c_id,
                }
            }
            DELIVERY => Input::Delivery {
                w: self.w(),
                carrier: self.rng.gen_range(1..=10u32),
            },
            _ => Input::StockLevel {
                w: self.home_w,
                d: self.home_d,
                threshold: self.rng.gen_range(10..=20),
            },
        };
        (op, input)
    }

    fn think(&mut self, op: usize) {
        if !self.spec.think {
            return;
        }
        // keying times (clause 5.2.5.7) and mean think times (clause 5.2.5.4)
        let (keying, think_mean) = [
            (18.0, 12.0),
            (3.0, 12.0),
            (2.0, 5.0),
            (2.0, 5.0),
            (2.0, 10.0),
        ][op];
        let u: f64 = self.rng.gen_range(f64::EPSILON..1.0);
        let think = (-u.ln() * think_mean).min(think_mean * 10.0);
        std::thread::sleep(Duration::from_secs_f64(keying + think));
    }
}

/// One HammerDB virtual user.
struct Terminal<'a> {
    tx: Box<dyn TxnSession + 'a>,
    gen: InputGen,
    max_retries: u64,
}

pub enum Outcome {
    Committed,
    RolledBack,
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

fn money(cents: i64) -> f64 {
    cents as f64 / 100.0
}

fn by_name_or_id(
    tx: &mut dyn TpccTx,
    w: u32,
    d: u32,
    by_name: &Option<String>,
    c_id: u32,
) -> DbResult<u32> {
    match by_name {
        Some(last) => {
            let ids = tx.customer_ids_by_last(w, d, last)?;
            if ids.is_empty() {
                return Err(DbError::Other(anyhow::anyhow!(
                    "no customer named {last} in w{w} d{d}"
                )));
            }
            // the one at position n/2 rounded up, in first-name order (clause 2.5.2.2)
            Ok(ids[(ids.len() - 1) / 2])
        }
        None => Ok(c_id),
    }
}

fn execute(tx: &mut dyn TpccTx, input: &Input, max: u64) -> (u64, DbResult<Outcome>) {
    let now = now_s();
    match input {
        // clause 2.4
        Input::NewOrder { w, d, c, lines, .. } => {
            let (w, d, c) = (*w, *d, *c);
            let (retries, r) = retry(tx, true, max, &mut |tx| {
                let wh = tx.warehouse(w)?;
                let mut dist = tx.district(w, d)?;
                let cust = tx.customer(w, d, c)?;
                let o_id = dist.next_o_id;
                dist.next_o_id += 1;
                tx.put_district(&dist, false)?;
                let all_local = lines.iter().all(|l| l.1 == w);
                let ol_cnt = lines.len() as u32;
                let order = Order {
                    w_id: w,
                    d_id: d,
                    o_id,
                    c_id: c,
                    entry_d: now,
                    carrier_id: None,
                    ol_cnt,
                    all_local,
                };
                tx.put_order(&order, true)?;
                tx.insert_new_order(w, d, o_id)?;
                let mut total = 0i64;
                for (n, &(i, supply, qty)) in lines.iter().enumerate() {
                    let Some(item) = tx.item(i)? else {
                        // the unused item number: the 1 % of New-Orders that roll back (clause 2.4.2.3)
                        return Err(DbError::Other(anyhow::Error::new(RollbackSignal)));
                    };
                    let mut st = tx.stock(supply, i)?;
                    let q = qty as i32;
                    st.quantity = if st.quantity >= q + 10 {
                        st.quantity - q
                    } else {
                        st.quantity - q + 91
                    };
                    st.ytd += qty as i64;
                    st.order_cnt += 1;
                    if supply != w {
                        st.remote_cnt += 1;
                    }
                    tx.put_stock(&st, false)?;
                    let amount = qty as i64 * item.price;
                    total += amount;
                    let line = OrderLine {
                        w_id: w,
                        d_id: d,
                        o_id,
                        number: n as u32 + 1,
                        i_id: i,
                        supply_w_id: supply,
                        delivery_d: None,
                        quantity: qty,
                        amount,
                        dist_info: st.dist[(d - 1) as usize].clone(),
                    };
                    tx.put_order_line(&line, true)?;
                }
                let discount = 1.0 - cust.discount as f64 / 1e4;
                std::hint::black_box(
                    money(total) * discount * (1.0 + (wh.tax + dist.tax) as f64 / 1e4),
                );
                Ok(Outcome::Committed)
            });
            match r {
                Err(DbError::Other(e)) if e.is::<RollbackSignal>() => {
                    (retries, Ok(Outcome::RolledBack))
                }
                other => (retries, other),
            }
        }
        // clause 2.5
        Input::Payment {
            w,
            d,
            c_w,
            c_d,
            by_name,
            c_id,
            amount,
        } => {
            let (w, d, c_w, c_d, amount) = (*w, *d, *c_w, *c_d, *amount);
            retry(tx, true, max, &mut |tx| {
                let mut wh = tx.warehouse(w)?;
                wh.ytd += amount;
                tx.put_warehouse(&wh, false)?;
                let mut dist = tx.district(w, d)?;
                dist.ytd += amount;
                tx.put_district(&dist, false)?;
                let c = by_name_or_id(tx, c_w, c_d, by_name, *c_id)?;
                let mut cust = tx.customer(c_w, c_d, c)?;
                cust.balance -= amount;
                cust.ytd_payment += amount;
                cust.payment_cnt += 1;
                if cust.credit == "BC" {
                    let mut data =
                        format!("{c} {c_d} {c_w} {d} {w} {:.2}|{}", money(amount), cust.data);
                    data.truncate(500);
                    cust.data = data;
                }
                tx.put_customer(&cust, false)?;
                let data = format!("{}    {}", wh.name, dist.name);
                let h = History {
                    c_id: c,
                    c_d_id: c_d,
                    c_w_id: c_w,
                    d_id: d,
                    w_id: w,
                    date: now,
                    amount,
                    data,
                };
                tx.insert_history(&h)?;
                Ok(Outcome::Committed)
            })
        }
        // clause 2.6
        Input::OrderStatus {
            w,
            d,
            by_name,
            c_id,
        } => {
            let (w, d) = (*w, *d);
            retry(tx, false, max, &mut |tx| {
                let c = by_name_or_id(tx, w, d, by_name, *c_id)?;
                std::hint::black_box(tx.customer(w, d, c)?.balance);
                if let Some(o) = tx.last_order_of(w, d, c)? {
                    std::hint::black_box(tx.order_lines(w, d, o.o_id)?);
                }
                Ok(Outcome::Committed)
            })
        }
        // clause 2.7, as one transaction over the ten districts (HammerDB's way)
        Input::Delivery { w, carrier } => {
            let (w, carrier) = (*w, *carrier);
            retry(tx, true, max, &mut |tx| {
                for d in 1..=DISTRICTS {
                    let Some(o_id) = tx.oldest_new_order(w, d)? else {
                        continue;
                    };
                    tx.delete_new_order(w, d, o_id)?;
                    let mut order = tx.order(w, d, o_id)?;
                    order.carrier_id = Some(carrier);
                    tx.put_order(&order, false)?;
                    let mut sum = 0;
                    for mut line in tx.order_lines(w, d, o_id)? {
                        line.delivery_d = Some(now);
                        sum += line.amount;
                        tx.put_order_line(&line, false)?;
                    }
                    let mut cust = tx.customer(w, d, order.c_id)?;
                    cust.balance += sum;
                    cust.delivery_cnt += 1;
                    tx.put_customer(&cust, false)?;
                }
                Ok(Outcome::Committed)
            })
        }
        // clause 2.8
        Input::StockLevel { w, d, threshold } => {
            let (w, d, threshold) = (*w, *d, *threshold);
            retry(tx, false, max, &mut |tx| {
                let next = tx.district(w, d)?.next_o_id;
                let items: HashSet<u32> = tx
                    .recent_line_items(w, d, next.saturating_sub(20), next)?
                    .into_iter()
                    .collect();
                let mut low = 0;
                for i in items {
                    if tx.stock(w, i)?.quantity < threshold {
                        low += 1;
                    }
                }
                std::hint::black_box(low);
                Ok(Outcome::Committed)
            })
        }
    }
}

/// Counts over `n` drawn inputs, for checking the draws against the specification's rates.
pub fn sample(spec: &TpccSpec, n: u64, vus: usize) -> serde_json::Value {
    let c = Constants::random(&mut SmallRng::seed_from_u64(spec.seed));
    let mut gens: Vec<InputGen> = (0..vus.max(1)).map(|t| InputGen::new(spec, c, t)).collect();
    let mut by_type = [0u64; 5];
    let (mut rollbacks, mut lines, mut remote_lines) = (0u64, 0u64, 0u64);
    let (mut payments_remote, mut payments_by_name, mut ostat_by_name) = (0u64, 0u64, 0u64);
    for k in 0..n {
        let vu = (k as usize) % gens.len();
        let (op, input) = gens[vu].next();
        by_type[op] += 1;
        match input {
            Input::NewOrder {
                w,
                lines: l,
                rollback,
                ..
            } => {
                rollbacks += rollback as u64;
                lines += l.len() as u64;
                remote_lines += l.iter().filter(|x| x.1 != w).count() as u64;
            }
            Input::Payment {
                w, c_w, by_name, ..
            } => {
                payments_remote += (c_w != w) as u64;
                payments_by_name += by_name.is_some() as u64;
            }
            Input::OrderStatus { by_name, .. } => ostat_by_name += by_name.is_some() as u64,
            _ => {}
        }
    }
    json!({
        "transactions": n,
        "by_type": TXNS.iter().zip(by_type).map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "new_order_rollbacks": rollbacks,
        "order_lines": lines,
        "remote_order_lines": remote_lines,
        "payments_remote": payments_remote,
        "payments_by_name": payments_by_name,
        "order_status_by_name": ostat_by_name,
    })
}

/// Business rollback of New-Order: rolled back on purpose, then reported as completed.
#[derive(Debug)]
struct RollbackSignal;

impl std::fmt::Display for RollbackSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "New-Order rolled back on purpose (unused item number)")
    }
}

impl std::error::Error for RollbackSignal {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_constants_respect_clause_2_1_6_1() {
        let mut rng = SmallRng::seed_from_u64(1);
        for _ in 0..1000 {
            let load = Constants::random(&mut rng);
            let run = Constants::for_run(&load, &mut rng);
            let delta = (run.c_last as i64 - load.c_last as i64).abs();
            assert!((65..=119).contains(&delta) && delta != 96 && delta != 112);
        }
    }

    #[test]
    fn nurand_stays_in_range_and_last_names_follow_the_syllables() {
        let mut rng = SmallRng::seed_from_u64(2);
        for _ in 0..10000 {
            let v = nurand(&mut rng, 1023, 7, 1, 3000);
            assert!((1..=3000).contains(&v));
        }
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
    }
}
