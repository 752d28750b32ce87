//! Workloads behind one trait. A workload decides what each call does; the runner times it.

pub mod kv;
pub mod oltp;
pub mod tpcc;

use anyhow::{anyhow, Result};
use serde_json::{json, Value};

use crate::engines::{DbError, DbResult, Session};
use crate::events::EventSink;

pub const TPCC: &str = "tpcc";

/// What `--workload` names: one of the key-value suite, TPC-C, or one of sysbench's OLTP tests.
/// The driver's one list of workloads: `names` (which `info` prints) and `parse` come from it.
#[derive(Debug, Clone, Copy)]
pub enum Named {
    Kv(kv::KvKind),
    Tpcc,
    Oltp(&'static str),
}

impl Named {
    pub fn parse(name: &str) -> Result<Named> {
        if name == TPCC {
            return Ok(Named::Tpcc);
        }
        if let Some(t) = oltp::TESTS.iter().find(|t| **t == name) {
            return Ok(Named::Oltp(t));
        }
        <kv::KvKind as clap::ValueEnum>::from_str(name, true)
            .map(Named::Kv)
            .map_err(|_| {
                anyhow!(
                    "unknown workload '{name}'; choose one of {}",
                    names().join(", ")
                )
            })
    }

    /// Operations one call covers: a key-value call is a batch, the others one transaction.
    pub fn per_call(&self, batch: usize) -> u64 {
        match self {
            Named::Kv(_) => batch as u64,
            _ => 1,
        }
    }
}

/// Every workload the driver runs, by the name `--workload` takes.
pub fn names() -> Vec<String> {
    use clap::ValueEnum;
    kv::KvKind::value_variants()
        .iter()
        .filter_map(|k| k.to_possible_value())
        .map(|v| v.get_name().to_string())
        .chain([TPCC.to_string()])
        .chain(oltp::TESTS.iter().map(|t| t.to_string()))
        .collect()
}

/// A run's workload, made from its name and flags (cli::RunArgs::spec): what the runner is
/// given, once its engine or server is open.
pub enum Spec {
    Kv(kv::KvSpec),
    Tpcc,
    Oltp(oltp::OltpSpec),
}

impl Spec {
    /// The workload as the run's `start` event describes it.
    pub fn describe(&self) -> Value {
        match self {
            Spec::Kv(s) => json!(s),
            Spec::Tpcc => json!(TPCC),
            Spec::Oltp(s) => json!(s),
        }
    }
}

/// What one call of a worker did: which operation (an index into `op_names`), how many
/// logical operations it covered (a batch of 100 puts is one call of 100 ops), how many
/// times a conflict made it retry, whether it was a business rollback (TPC-C's 1 % of
/// New-Orders: a completed transaction, not an error), and whether it finally succeeded.
pub struct Step {
    pub op: usize,
    pub ops: u64,
    pub retries: u64,
    pub rolled_back: bool,
    pub result: DbResult<()>,
}

impl Step {
    pub fn new(op: usize, ops: u64, (retries, result): (u64, DbResult<()>)) -> Self {
        Step {
            op,
            ops,
            retries,
            rolled_back: false,
            result,
        }
    }
}

pub trait Workload: Send + Sync {
    /// Names of the operation types this workload records, e.g. ["put", "get"].
    fn op_names(&self) -> Vec<&'static str>;
    /// Unmeasured preparation (e.g. the populate phase of read workloads).
    fn prepare(&self, threads: usize, sink: &EventSink) -> Result<()>;
    /// One worker thread's state, with its own engine session.
    fn worker(&self, thread: usize, threads: usize) -> Result<Box<dyn Worker + '_>>;
    /// Called just before the measured window opens.
    fn measure_begin(&self) -> Result<()> {
        Ok(())
    }
    /// Called once the measured window has closed; what it returns joins the summary.
    fn measure_end(&self, _duration_s: f64) -> Result<serde_json::Value> {
        Ok(serde_json::Value::Null)
    }
}

pub trait Worker {
    fn step(&mut self) -> Step;
}

/// Run `body` as one transaction, retrying on conflicts (at most `max_retries` times).
/// Returns the number of retries and the final outcome.
pub fn transact(
    session: &mut dyn Session,
    write: bool,
    max_retries: u64,
    body: &mut dyn FnMut(&mut dyn Session) -> DbResult<()>,
) -> (u64, DbResult<()>) {
    retry_conflicts(max_retries, || {
        let attempt = session
            .begin(write)
            .and_then(|_| body(session))
            .and_then(|_| session.commit());
        if attempt.is_err() {
            // the attempt's error is the one to report (and retried if it is a conflict); a
            // rollback that fails after it only means the engine already ended the transaction
            let _ = session.rollback();
        }
        attempt
    })
}

/// Run `attempt` again, after a backoff, while it ends in a conflict, at most `max` times;
/// returns the retries and the last outcome. Every retry loop of the driver is this one.
pub fn retry_conflicts<T>(
    max: u64,
    mut attempt: impl FnMut() -> DbResult<T>,
) -> (u64, DbResult<T>) {
    let mut retries = 0;
    loop {
        match attempt() {
            Err(DbError::Conflict(_)) if retries < max => {
                retries += 1;
                backoff(retries);
            }
            other => return (retries, other),
        }
    }
}

/// Wait a random while before retry number `attempt` after a conflict: up to 20 us doubled
/// per attempt, capped at 10 ms, so that conflicting writers stop colliding in lockstep.
pub fn backoff(attempt: u64) {
    use rand::Rng;
    let cap_us = (20u64 << attempt.min(9)).min(10_000);
    let us = rand::thread_rng().gen_range(0..=cap_us);
    std::thread::sleep(std::time::Duration::from_micros(us));
}

/// Run `work(t)` for t in 0..n, each on a thread of its own, and wait for them all: the first
/// error in thread order, or `panicked` where a thread panicked (populating, loading).
pub fn on_threads(
    n: usize,
    panicked: &str,
    work: impl Fn(usize) -> Result<()> + Sync,
) -> Result<()> {
    std::thread::scope(|s| {
        let work = &work;
        let handles: Vec<_> = (0..n).map(|t| s.spawn(move || work(t))).collect();
        for h in handles {
            h.join().map_err(|_| anyhow!("{panicked}"))??;
        }
        Ok(())
    })
}
