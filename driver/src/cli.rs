//! The command line: the commands and their flags (clap), and what they are turned into: the
//! engine's options, the server to reach, the event channel, and the run's workload spec.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, Parser, Subcommand};

use crate::engines::{self, Compression, EngineOptions, SyncMode};
use crate::events::EventSink;
use crate::runner::RunConfig;
use crate::sql::Server;
use crate::workloads::kv::{KvKind, KvSpec, Pattern};
use crate::workloads::oltp::OltpSpec;
use crate::workloads::tpcc::{self, Mix, Mode, TpccSpec};
use crate::workloads::{Named, Spec};

#[derive(Parser)]
#[command(
    name = "alloclab-driver",
    version,
    about = "alloclab's in-process benchmark driver"
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand)]
pub enum Cmd {
    /// Print the driver's version, event schema and engine versions as JSON on stdout.
    Info,
    /// Run one workload against one engine.
    Run(Box<RunArgs>),
    /// Live through cycles of phases (loads, bursts, idle) on one embedded engine, kept open
    /// throughout: memory over its life (alloclab's `life` workload).
    Life(Box<LifeArgs>),
    /// Load TPC-C warehouses into an empty database (unmeasured).
    TpccLoad(Box<LoadArgs>),
    /// Check TPC-C consistency conditions 1-4 (clause 3.3.2); emits a `check` event.
    TpccCheck(Box<CheckArgs>),
    /// Draw TPC-C transaction inputs without a database and print their counts as JSON.
    TpccSample(SampleArgs),
    /// Test helper: shift one district's D_NEXT_O_ID so that condition 2 breaks.
    #[command(hide = true)]
    TpccCorrupt(Box<CorruptArgs>),
}

#[derive(Args, Debug)]
pub struct Channel {
    /// file descriptor to write events to (inherited from the parent)
    #[arg(long)]
    pub events_fd: Option<i32>,
    /// file to write events to
    #[arg(long)]
    pub events: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct Target {
    /// tidesdb, rocksdb, sqlite, null; for TPC-C also mariadb and postgres (servers)
    #[arg(long)]
    pub engine: String,
    /// directory for the engine's files (created if missing)
    #[arg(long, default_value = ".")]
    pub db_path: PathBuf,
    /// server engines: the server's unix socket (PostgreSQL: the socket file in its directory)
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// server engines: the database to use
    #[arg(long, default_value = "tpcc")]
    pub database: String,
    /// MariaDB: the storage engine of the tables (InnoDB, ROCKSDB, ...)
    #[arg(long, default_value = "InnoDB")]
    pub table_engine: String,
    #[command(flatten)]
    pub engine_opts: EngineArgs,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: Target,
    /// the workload: a key-value one (write, read, mixed, delete, seek, range), tpcc, or one of
    /// sysbench's OLTP tests (oltp_point_select, ...); `info` lists them (workloads::names)
    #[arg(long, default_value = "write")]
    pub workload: String,
    #[arg(long, value_enum, default_value = "random")]
    pub pattern: Pattern,
    #[arg(long, default_value_t = 16)]
    pub key_bytes: usize,
    #[arg(long, default_value_t = 100)]
    pub value_bytes: usize,
    /// values of mixed sizes: each put's value is uniform in [--value-bytes-min, --value-bytes]
    #[arg(long)]
    pub value_bytes_min: Option<usize>,
    /// operations per engine batch / transaction
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// worker threads (TPC-C: virtual users)
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// measured operations in all (default 100000 unless --duration-s)
    #[arg(long, conflicts_with = "duration_s")]
    pub ops: Option<u64>,
    /// measured seconds
    #[arg(long)]
    pub duration_s: Option<f64>,
    /// unmeasured seconds before measuring (TPC-C: the ramp-up)
    #[arg(long, default_value_t = 0.0)]
    pub warmup_s: f64,
    /// keys populated before read/mixed/delete/seek/range, and drawn from by uniform/zipfian
    /// (default: the number of operations, or 1000000 with --duration-s)
    #[arg(long)]
    pub keyspace: Option<u64>,
    /// entries read by each range operation
    #[arg(long, default_value_t = 100)]
    pub range_len: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// measure in slices commanded on stdin, to interleave runs: after the warm-up the driver
    /// prints `ready` on stdout and waits; `go MS` measures for MS milliseconds and answers
    /// `paused` (`full` once the slices add up to --duration-s, `done` if every worker has
    /// ended), `end` (or end of input) finishes the run; the window is the sum of the slices, and
    /// ending before --duration-s is measured fails the run
    #[arg(long, requires = "duration_s")]
    pub gate: bool,
    /// retries of a transaction that hit a write conflict before it counts as an error (an
    /// optimistic engine under TPC-C's contention may need many; each waits up to 10 ms)
    #[arg(long, default_value_t = 1000)]
    pub max_retries: u64,
    /// TPC-C: warehouses used (the database may hold more)
    #[arg(long)]
    pub warehouses: Option<u32>,
    /// TPC-C: transaction mix
    #[arg(long, value_enum, default_value = "spec")]
    pub tpcc_mix: Mix,
    /// TPC-C: how the client drives the database (procedures: MariaDB and PostgreSQL)
    #[arg(long, value_enum, default_value = "rows")]
    pub tpcc_mode: Mode,
    /// TPC-C: each virtual user draws a warehouse per transaction instead of its home one
    #[arg(long)]
    pub all_warehouses: bool,
    /// TPC-C: the spec's keying and think times
    #[arg(long)]
    pub think: bool,
    /// TPC-C: check consistency conditions 1-4 after the measured window
    #[arg(long)]
    pub check: bool,
    /// OLTP: sysbench tables sbtest1..N (prepared by `sysbench prepare`)
    #[arg(long, default_value_t = 10)]
    pub tables: u32,
    /// OLTP: rows per table
    #[arg(long, default_value_t = 100_000)]
    pub table_size: u32,
    #[command(flatten)]
    pub channel: Channel,
}

#[derive(Args, Debug)]
pub struct LifeArgs {
    /// the engine, the keys (--keyspace, populated first), value sizes, threads, seed and events
    /// (--workload is not used: each phase names its load)
    #[command(flatten)]
    pub run: RunArgs,
    /// cycles of the phases
    #[arg(long)]
    pub cycles: u32,
    /// one cycle's phases as a JSON array of {name, kind, duration_s, load, threads, burst}
    /// (steady: a key-value load; burst: compact or scan, with a load beside it if given;
    /// idle: nothing)
    #[arg(long)]
    pub phases: String,
    /// where each load's events go (default: `life/` beside --events)
    #[arg(long)]
    pub phase_events: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct LoadArgs {
    #[command(flatten)]
    pub target: Target,
    #[arg(long)]
    pub warehouses: u32,
    /// loader threads
    #[arg(long, default_value_t = 1)]
    pub loaders: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub channel: Channel,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    pub target: Target,
    #[command(flatten)]
    pub channel: Channel,
}

#[derive(Args, Debug)]
pub struct SampleArgs {
    #[arg(long, default_value_t = 10)]
    pub warehouses: u32,
    /// transactions to draw
    #[arg(long, default_value_t = 20_000)]
    pub count: u64,
    /// virtual users drawing in turn
    #[arg(long, default_value_t = 8)]
    pub threads: usize,
    #[arg(long, value_enum, default_value = "spec")]
    pub tpcc_mix: Mix,
    #[arg(long)]
    pub all_warehouses: bool,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Args, Debug)]
pub struct CorruptArgs {
    #[command(flatten)]
    pub target: Target,
    #[arg(long, default_value_t = 1)]
    pub warehouse: u32,
    #[arg(long, default_value_t = 1)]
    pub district: u32,
    #[arg(long, default_value_t = 5)]
    pub next_o_id_delta: i64,
}

#[derive(Args, Debug)]
pub struct EngineArgs {
    #[arg(long)]
    pub memtable_bytes: Option<usize>,
    #[arg(long)]
    pub block_cache_bytes: Option<usize>,
    #[arg(long, value_enum, default_value = "none")]
    pub sync: SyncMode,
    #[arg(long, value_enum, default_value = "none")]
    pub compression: Compression,
    #[arg(long)]
    pub flush_threads: Option<usize>,
    #[arg(long)]
    pub compaction_threads: Option<usize>,
    /// null engine: simulated latency of each call in nanoseconds
    #[arg(long, default_value_t = 0)]
    pub null_latency_ns: u64,
}

impl Target {
    pub fn server(&self) -> Option<Server> {
        self.socket.as_ref().map(|s| Server {
            socket: s.clone(),
            database: self.database.clone(),
            table_engine: self.table_engine.clone(),
        })
    }

    pub fn engine_version(&self) -> serde_json::Value {
        engines::versions()
            .get(self.engine.as_str())
            .cloned()
            .unwrap_or_default()
    }

    pub fn tpcc(&self) -> Result<Box<dyn tpcc::TpccDb>> {
        tpcc::open(&self.engine, &self.options()?, self.server())
    }

    pub fn options(&self) -> Result<EngineOptions> {
        if !engines::ENGINES.iter().any(|e| e.name == self.engine) {
            bail!(
                "unknown engine '{}'; choose one of {}",
                self.engine,
                engines::names(|_| true).join(", ")
            );
        }
        let e = &self.engine_opts;
        Ok(EngineOptions {
            path: self.db_path.clone(),
            memtable_bytes: e.memtable_bytes,
            block_cache_bytes: e.block_cache_bytes,
            sync: e.sync,
            compression: e.compression,
            flush_threads: e.flush_threads,
            compaction_threads: e.compaction_threads,
            null_latency_ns: e.null_latency_ns,
        })
    }
}

impl Channel {
    pub fn open(&self) -> Result<EventSink> {
        EventSink::open(self.events_fd, self.events.as_deref())
    }
}

impl RunArgs {
    /// The measured operations (None: as many as --duration-s allows), once the run's threads,
    /// interval and times are checked.
    pub fn ops(&self) -> Result<Option<u64>> {
        if self.threads == 0 {
            bail!("--threads must be at least 1");
        }
        if self.interval_ms == 0 {
            bail!("--interval-ms must be at least 1");
        }
        if let Some(d) = self.duration_s {
            if !(d > 0.0 && d.is_finite()) {
                bail!("--duration-s must be a positive number of seconds, got {d}");
            }
        }
        if !(self.warmup_s >= 0.0 && self.warmup_s.is_finite()) {
            bail!("--warmup-s must be zero or a positive number of seconds");
        }
        let ops = match (self.ops, self.duration_s) {
            (Some(0), _) => bail!("--ops must be at least 1"),
            (Some(n), _) => Some(n),
            (None, None) => Some(100_000),
            (None, Some(_)) => None,
        };
        Ok(ops)
    }

    /// The run's workload (the factory: `workloads::Named`), its spec checked.
    pub fn spec(&self, ops: Option<u64>) -> Result<(Named, Spec)> {
        let named = Named::parse(&self.workload)?;
        let spec = match named {
            Named::Tpcc => Spec::Tpcc,
            Named::Oltp(test) => Spec::Oltp(OltpSpec::new(
                test,
                self.tables,
                self.table_size,
                self.seed,
                self.max_retries,
            )?),
            Named::Kv(kind) => {
                let s = self.kv_spec(kind, ops);
                s.validate()?;
                Spec::Kv(s)
            }
        };
        Ok((named, spec))
    }

    /// The key-value workload's spec (checked by `KvSpec::validate`).
    pub fn kv_spec(&self, kind: KvKind, ops: Option<u64>) -> KvSpec {
        KvSpec {
            kind,
            pattern: self.pattern,
            key_bytes: self.key_bytes,
            value_bytes: self.value_bytes,
            value_bytes_min: self.value_bytes_min,
            batch: self.batch,
            keyspace: self.keyspace.unwrap_or(ops.unwrap_or(1_000_000)),
            range_len: self.range_len,
            seed: self.seed,
            max_retries: self.max_retries,
        }
    }

    /// TPC-C's spec over a database loaded with `loaded` warehouses.
    pub fn tpcc_spec(&self, loaded: u32) -> TpccSpec {
        TpccSpec {
            warehouses: self.warehouses.unwrap_or(loaded),
            mix: self.tpcc_mix,
            mode: self.tpcc_mode,
            all_warehouses: self.all_warehouses,
            think: self.think,
            seed: self.seed,
            max_retries: self.max_retries,
        }
    }

    /// How the runner times the run.
    pub fn run_config(&self, ops: Option<u64>, named: Named) -> RunConfig {
        RunConfig {
            threads: self.threads,
            ops,
            duration: self.duration_s.map(Duration::from_secs_f64),
            warmup: Duration::from_secs_f64(self.warmup_s),
            interval: Duration::from_millis(self.interval_ms),
            gate: self.gate,
            ops_per_call: named.per_call(self.batch),
        }
    }
}

impl SampleArgs {
    /// The spec the inputs are drawn for (no database: rows mode, no think times).
    pub fn spec(&self) -> TpccSpec {
        TpccSpec {
            warehouses: self.warehouses.max(1),
            mix: self.tpcc_mix,
            mode: Mode::Rows,
            all_warehouses: self.all_warehouses,
            think: false,
            seed: self.seed,
            max_retries: 0,
        }
    }
}
