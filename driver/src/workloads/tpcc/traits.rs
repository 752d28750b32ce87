//! What the engines implement and the transactions are written against: a database (`TpccDb`),
//! its row-level transactions (`TpccTx`), a virtual user's way of running whole transactions
//! (`TxnSession`, `WholeTxn`) and how one ended (`Outcome`); with the retry of a transaction
//! on a conflict that every mode shares.

use anyhow::{bail, Result};

use super::input::Input;
use super::rows::*;
use super::spec::Mode;
use super::transactions::RowSession;
use crate::engines::{DbError, DbResult};
use crate::workloads::retry_conflicts;

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

/// A row `TpccTx` reads is not there.
pub(super) fn missing(what: &str) -> DbError {
    DbError::Other(anyhow::anyhow!(
        "TPC-C row missing: {what} (is the database loaded?)"
    ))
}

/// How a transaction ended: committed, or rolled back on purpose (New-Order's 1 %).
pub enum Outcome {
    Committed,
    RolledBack,
}

/// Run `body` as one transaction of `tx`, retried whole on a conflict (at most `max` times):
/// how the load, the NOPM counter and rows mode run their work over `TpccTx`.
pub(super) fn retry<T>(
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
