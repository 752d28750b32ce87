//! sysbench's OLTP tests run natively: the same tables (sbtest1..N, prepared by `sysbench
//! prepare`) and the same statements as oltp_common.lua, one event per call:
//!   oltp_point_select  1 point select, no explicit transaction
//!   oltp_read_only     BEGIN, 10 point selects, 4 range selects (simple, sum, order, distinct), COMMIT
//!   oltp_read_write    the read-only event plus an index update, a non-index update and a
//!                      delete + insert of the same row, in one transaction

use anyhow::{bail, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::{retry_conflicts, Step, Worker, Workload};
use crate::engines::{DbError, DbResult};
use crate::events::EventSink;
use crate::sql::{c_library_connection, libpq, Prepared, Server, SqlConn, V};

pub const TESTS: [&str; 3] = ["oltp_point_select", "oltp_read_only", "oltp_read_write"];

#[derive(Debug, Clone, Serialize)]
pub struct OltpSpec {
    pub test: &'static str,
    pub tables: u32,
    pub table_size: u32,
    pub range_size: u32,
    pub seed: u64,
    pub max_retries: u64,
}

impl OltpSpec {
    pub fn new(
        test: &str,
        tables: u32,
        table_size: u32,
        seed: u64,
        max_retries: u64,
    ) -> Result<Self> {
        let Some(t) = TESTS.iter().find(|t| **t == test) else {
            bail!(
                "unknown OLTP test '{test}'; choose one of {}",
                TESTS.join(", ")
            );
        };
        if tables == 0 || table_size == 0 {
            bail!("--tables and --table-size must be at least 1");
        }
        Ok(OltpSpec {
            test: t,
            tables,
            table_size,
            range_size: 100,
            seed,
            max_retries,
        })
    }
}

pub struct OltpWorkload {
    engine: String,
    server: Server,
    spec: OltpSpec,
}

impl OltpWorkload {
    pub fn new(engine: &str, server: Server, spec: OltpSpec) -> Result<Self> {
        let mut c = c_library_connection(engine, &server)?;
        // the tables sysbench prepared must be there
        let n = c
            .query("SELECT COUNT(*) FROM sbtest1", &[])
            .map_err(|e| anyhow::anyhow!("no sysbench tables: {e}"))?;
        if n.is_empty() {
            bail!("sbtest1 is empty: run sysbench prepare first");
        }
        Ok(OltpWorkload {
            engine: engine.to_string(),
            server,
            spec,
        })
    }
}

impl Workload for OltpWorkload {
    fn op_names(&self) -> Vec<&'static str> {
        vec![self.spec.test]
    }
    fn prepare(&self, _threads: usize, _sink: &EventSink) -> Result<()> {
        Ok(())
    }
    fn worker(&self, thread: usize, _threads: usize) -> Result<Box<dyn Worker + '_>> {
        Ok(Box::new(OltpWorker::new(
            c_library_connection(&self.engine, &self.server)?,
            SmallRng::seed_from_u64(
                self.spec.seed ^ (thread as u64 + 1).wrapping_mul(0x9E3779B97F4A7C15),
            ),
            self.spec.clone(),
        )?))
    }
}

/// One table's statements, prepared once per connection, as sysbench's oltp_common.lua does.
struct TableStmts {
    point: Prepared,
    simple_range: Prepared,
    sum_range: Prepared,
    order_range: Prepared,
    distinct_range: Prepared,
    index_update: Prepared,
    non_index_update: Prepared,
    delete: Prepared,
    insert: Prepared,
}

impl TableStmts {
    fn prepare(c: &mut dyn SqlConn, table: u32) -> DbResult<Self> {
        let d = c.dialect();
        let mut p = |text: &str| c.prepare(&d.sql(&text.replace("%u", &table.to_string())));
        Ok(TableStmts {
            point: p("SELECT c FROM sbtest%u WHERE id=?")?,
            simple_range: p("SELECT c FROM sbtest%u WHERE id BETWEEN ? AND ?")?,
            sum_range: p("SELECT SUM(k) FROM sbtest%u WHERE id BETWEEN ? AND ?")?,
            order_range: p("SELECT c FROM sbtest%u WHERE id BETWEEN ? AND ? ORDER BY c")?,
            distinct_range: p(
                "SELECT DISTINCT c FROM sbtest%u WHERE id BETWEEN ? AND ? ORDER BY c",
            )?,
            index_update: p("UPDATE sbtest%u SET k=k+1 WHERE id=?")?,
            non_index_update: p("UPDATE sbtest%u SET c=? WHERE id=?")?,
            delete: p("DELETE FROM sbtest%u WHERE id=?")?,
            insert: p("INSERT INTO sbtest%u (id, k, c, pad) VALUES (?, ?, ?, ?)")?,
        })
    }
}

struct OltpWorker {
    c: Box<dyn SqlConn + Send>,
    rng: SmallRng,
    spec: OltpSpec,
    /// per table (sbtest1 is index 0)
    tables: Vec<TableStmts>,
    begin: Prepared,
    commit: Prepared,
    /// parameters, reused from call to call
    args: Vec<V>,
}

/// sysbench's c and pad values: groups of 11 random digits joined by dashes, written into `out`.
fn digits(rng: &mut SmallRng, groups: usize, out: &mut String) {
    out.clear();
    for g in 0..groups {
        if g > 0 {
            out.push('-');
        }
        for _ in 0..11 {
            out.push((b'0' + rng.gen_range(0..10u8)) as char);
        }
    }
}

/// `text` into the reused value `v` (its buffer kept).
fn text_into(v: &mut V) -> &mut String {
    if !matches!(v, V::T(_)) {
        *v = V::T(String::with_capacity(128));
    }
    match v {
        V::T(t) => t,
        _ => unreachable!(),
    }
}

impl OltpWorker {
    fn new(mut c: Box<dyn SqlConn + Send>, rng: SmallRng, spec: OltpSpec) -> Result<Self> {
        let prepared = (|| -> DbResult<_> {
            let tables = (1..=spec.tables)
                .map(|t| TableStmts::prepare(&mut *c, t))
                .collect::<DbResult<Vec<_>>>()?;
            Ok((tables, c.prepare("BEGIN")?, c.prepare("COMMIT")?))
        })();
        let (tables, begin, commit) =
            prepared.map_err(|e| anyhow::anyhow!("preparing the OLTP statements: {e}"))?;
        Ok(OltpWorker {
            c,
            rng,
            spec,
            tables,
            begin,
            commit,
            args: vec![V::Null; 4],
        })
    }

    fn id(&mut self) -> i64 {
        self.rng.gen_range(1..=self.spec.table_size) as i64
    }

    fn table(&mut self) -> usize {
        self.rng.gen_range(0..self.spec.tables as usize)
    }

    /// Run `st` of table `t` with the first `n` reused arguments.
    fn call(&mut self, t: usize, st: fn(&TableStmts) -> Prepared, n: usize) -> DbResult<()> {
        let st = st(&self.tables[t]);
        std::hint::black_box(self.c.run(st, &self.args[..n])?);
        Ok(())
    }

    fn reads(&mut self) -> DbResult<()> {
        // oltp_common.lua: the point selects of one event read one table
        let t = self.table();
        for _ in 0..10 {
            self.args[0] = V::I(self.id());
            self.call(t, |s| s.point, 1)?;
        }
        let ranges: [fn(&TableStmts) -> Prepared; 4] = [
            |s| s.simple_range,
            |s| s.sum_range,
            |s| s.order_range,
            |s| s.distinct_range,
        ];
        for st in ranges {
            let t = self.table();
            let id = self.id();
            self.args[0] = V::I(id);
            self.args[1] = V::I(id + self.spec.range_size as i64 - 1);
            self.call(t, st, 2)?;
        }
        Ok(())
    }

    fn writes(&mut self) -> DbResult<()> {
        let t = self.table();
        self.args[0] = V::I(self.id());
        self.call(t, |s| s.index_update, 1)?;
        let t = self.table();
        digits(&mut self.rng, 10, text_into(&mut self.args[0]));
        self.args[1] = V::I(self.id());
        self.call(t, |s| s.non_index_update, 2)?;
        let t = self.table();
        let (id, k) = (self.id(), self.id());
        self.args[0] = V::I(id);
        self.call(t, |s| s.delete, 1)?;
        self.args[1] = V::I(k);
        digits(&mut self.rng, 10, text_into(&mut self.args[2]));
        digits(&mut self.rng, 5, text_into(&mut self.args[3]));
        self.call(t, |s| s.insert, 4)
    }

    fn event(&mut self) -> DbResult<()> {
        if self.spec.test == "oltp_point_select" {
            let t = self.table();
            self.args[0] = V::I(self.id());
            return self.call(t, |s| s.point, 1);
        }
        self.c.run(self.begin, &[])?;
        let body = self.reads().and_then(|_| {
            if self.spec.test == "oltp_read_write" {
                self.writes()
            } else {
                Ok(())
            }
        });
        match body.and_then(|_| self.c.run(self.commit, &[]).map(|_| ())) {
            Ok(()) => Ok(()),
            Err(e) => {
                // the statement's error is the one to report: a failed ROLLBACK after it only
                // means the server already ended the transaction
                let _ = self.c.batch("ROLLBACK");
                Err(e)
            }
        }
    }
}

/// The errors sysbench's drivers restart a transaction on, beyond the conflicts every
/// workload retries: PostgreSQL's unique violation (23505), which READ COMMITTED gives
/// oltp_read_write's delete and re-insert of one id by two threads at once.
fn as_sysbench_retries(e: DbError) -> DbError {
    match e {
        DbError::Other(x)
            if x.downcast_ref::<libpq::PgError>()
                .is_some_and(|p| p.sqlstate == "23505") =>
        {
            DbError::Conflict(x.to_string())
        }
        other => other,
    }
}

impl Worker for OltpWorker {
    fn step(&mut self) -> Step {
        let max = self.spec.max_retries;
        let (retries, result) = retry_conflicts(max, || self.event().map_err(as_sysbench_retries));
        Step {
            op: 0,
            ops: 1,
            retries,
            rolled_back: false,
            result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_postgres_unique_violation_restarts_the_transaction_as_sysbench_does() {
        let unique = DbError::Other(anyhow::Error::new(libpq::PgError {
            sqlstate: "23505".into(),
            message: "duplicate key".into(),
        }));
        assert!(matches!(as_sysbench_retries(unique), DbError::Conflict(_)));
        let other = DbError::Other(anyhow::Error::new(libpq::PgError {
            sqlstate: "42P01".into(),
            message: "no such table".into(),
        }));
        assert!(matches!(as_sysbench_retries(other), DbError::Other(_)));
    }
}
