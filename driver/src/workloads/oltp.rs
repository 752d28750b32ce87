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

use super::tpcc::sql::{connection, Server, SqlConn, V};
use super::{retry_conflicts, Step, Worker, Workload};
use crate::engines::DbResult;
use crate::events::EventSink;

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
        let mut c = connection(engine, &server)?;
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
        Ok(Box::new(OltpWorker {
            c: connection(&self.engine, &self.server)?,
            rng: SmallRng::seed_from_u64(
                self.spec.seed ^ (thread as u64 + 1).wrapping_mul(0x9E3779B97F4A7C15),
            ),
            spec: self.spec.clone(),
        }))
    }
}

struct OltpWorker {
    c: Box<dyn SqlConn + Send>,
    rng: SmallRng,
    spec: OltpSpec,
}

/// sysbench's c and pad values: groups of 11 random digits joined by dashes.
fn digits(rng: &mut SmallRng, groups: usize) -> String {
    (0..groups)
        .map(|_| {
            (0..11)
                .map(|_| (b'0' + rng.gen_range(0..10u8)) as char)
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("-")
}

impl OltpWorker {
    fn sql(&self, text: &str, table: u32) -> String {
        self.c
            .dialect()
            .sql(&text.replace("%u", &table.to_string()))
    }

    fn id(&mut self) -> i64 {
        self.rng.gen_range(1..=self.spec.table_size) as i64
    }

    fn table(&mut self) -> u32 {
        self.rng.gen_range(1..=self.spec.tables)
    }

    fn reads(&mut self) -> DbResult<()> {
        let t = self.table();
        let q = self.sql("SELECT c FROM sbtest%u WHERE id=?", t);
        for _ in 0..10 {
            let id = self.id();
            std::hint::black_box(self.c.query(&q, &[V::I(id)])?);
        }
        for text in [
            "SELECT c FROM sbtest%u WHERE id BETWEEN ? AND ?",
            "SELECT SUM(k) FROM sbtest%u WHERE id BETWEEN ? AND ?",
            "SELECT c FROM sbtest%u WHERE id BETWEEN ? AND ? ORDER BY c",
            "SELECT DISTINCT c FROM sbtest%u WHERE id BETWEEN ? AND ? ORDER BY c",
        ] {
            let t = self.table();
            let q = self.sql(text, t);
            let id = self.id();
            std::hint::black_box(
                self.c
                    .query(&q, &[V::I(id), V::I(id + self.spec.range_size as i64 - 1)])?,
            );
        }
        Ok(())
    }

    fn writes(&mut self) -> DbResult<()> {
        let t = self.table();
        let q = self.sql("UPDATE sbtest%u SET k=k+1 WHERE id=?", t);
        let id = self.id();
        self.c.exec(&q, &[V::I(id)])?;
        let t = self.table();
        let q = self.sql("UPDATE sbtest%u SET c=? WHERE id=?", t);
        let (c, id) = (digits(&mut self.rng, 10), self.id());
        self.c.exec(&q, &[V::T(c), V::I(id)])?;
        let t = self.table();
        let (id, k) = (self.id(), self.id());
        let del = self.sql("DELETE FROM sbtest%u WHERE id=?", t);
        let ins = self.sql(
            "INSERT INTO sbtest%u (id, k, c, pad) VALUES (?, ?, ?, ?)",
            t,
        );
        self.c.exec(&del, &[V::I(id)])?;
        let (c, pad) = (digits(&mut self.rng, 10), digits(&mut self.rng, 5));
        self.c.exec(&ins, &[V::I(id), V::I(k), V::T(c), V::T(pad)])
    }

    fn event(&mut self) -> DbResult<()> {
        if self.spec.test == "oltp_point_select" {
            let t = self.table();
            let q = self.sql("SELECT c FROM sbtest%u WHERE id=?", t);
            let id = self.id();
            std::hint::black_box(self.c.query(&q, &[V::I(id)])?);
            return Ok(());
        }
        self.c.batch("BEGIN")?;
        let body = self.reads().and_then(|_| {
            if self.spec.test == "oltp_read_write" {
                self.writes()
            } else {
                Ok(())
            }
        });
        match body.and_then(|_| self.c.batch("COMMIT")) {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = self.c.batch("ROLLBACK");
                Err(e)
            }
        }
    }
}

impl Worker for OltpWorker {
    fn step(&mut self) -> Step {
        let max = self.spec.max_retries;
        let (retries, result) = retry_conflicts(max, || self.event());
        Step {
            op: 0,
            ops: 1,
            retries,
            rolled_back: false,
            result,
        }
    }
}
