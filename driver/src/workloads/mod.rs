//! Workloads behind one trait. A workload decides what each call does; the runner times it.

pub mod kv;

use anyhow::Result;

use crate::engines::{DbError, DbResult, Engine, Session};
use crate::events::EventSink;

/// What one call of a worker did: which operation (an index into `op_names`), how many
/// logical operations it covered (a batch of 100 puts is one call of 100 ops), how many
/// times a conflict made it retry, and whether it finally succeeded.
pub struct Step {
    pub op: usize,
    pub ops: u64,
    pub retries: u64,
    pub result: DbResult<()>,
}

pub trait Workload: Send + Sync {
    /// Names of the operation types this workload records, e.g. ["put", "get"].
    fn op_names(&self) -> Vec<&'static str>;
    /// Unmeasured preparation (e.g. the populate phase of read workloads).
    fn prepare(&self, engine: &dyn Engine, threads: usize, sink: &EventSink) -> Result<()>;
    /// The state of one worker thread.
    fn worker(&self, thread: usize, threads: usize) -> Box<dyn Worker>;
}

pub trait Worker: Send {
    fn step(&mut self, session: &mut dyn Session) -> Step;
}

/// Run `body` as one transaction, retrying on conflicts (at most `max_retries` times).
/// Returns the number of retries and the final outcome.
pub fn transact(
    session: &mut dyn Session,
    write: bool,
    max_retries: u64,
    body: &mut dyn FnMut(&mut dyn Session) -> DbResult<()>,
) -> (u64, DbResult<()>) {
    let mut retries = 0;
    loop {
        let attempt = session
            .begin(write)
            .and_then(|_| body(session))
            .and_then(|_| session.commit());
        match attempt {
            Err(DbError::Conflict(m)) => {
                let _ = session.rollback();
                if retries >= max_retries {
                    return (retries, Err(DbError::Conflict(m)));
                }
                retries += 1;
            }
            Err(e) => {
                let _ = session.rollback();
                return (retries, Err(e));
            }
            Ok(()) => return (retries, Ok(())),
        }
    }
}
