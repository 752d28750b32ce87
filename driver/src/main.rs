//! alloclab-driver: runs one workload on one engine in this process, so that an allocator
//! preloaded into this process is the allocator under test. Events go to --events-fd or
//! --events (versioned JSON lines); logs go to stderr; stdout carries only `info` output.

mod alloc_account;
mod engines;
mod events;
mod runner;
mod rusage;
mod workloads;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use serde_json::json;

use engines::{Compression, EngineOptions, SyncMode};
use events::EventSink;
use workloads::kv::{KvKind, KvSpec, KvWorkload, Pattern};
use workloads::oltp::{OltpSpec, OltpWorkload};
use workloads::tpcc::{self, Mix, Mode, TpccSpec, TpccWorkload};
use workloads::Workload;

#[derive(Parser)]
#[command(
    name = "alloclab-driver",
    version,
    about = "alloclab's in-process benchmark driver"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print the driver's version, event schema and engine versions as JSON on stdout.
    Info,
    /// Run one workload against one engine.
    Run(Box<RunArgs>),
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
struct Channel {
    /// file descriptor to write events to (inherited from the parent)
    #[arg(long)]
    events_fd: Option<i32>,
    /// file to write events to
    #[arg(long)]
    events: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct Target {
    /// tidesdb, rocksdb, sqlite, null; for TPC-C also mariadb and postgres (servers)
    #[arg(long)]
    engine: String,
    /// directory for the engine's files (created if missing)
    #[arg(long, default_value = ".")]
    db_path: PathBuf,
    /// server engines: the server's unix socket (PostgreSQL: the socket file in its directory)
    #[arg(long)]
    socket: Option<PathBuf>,
    /// server engines: the database to use
    #[arg(long, default_value = "tpcc")]
    database: String,
    /// MariaDB: the storage engine of the tables (InnoDB, ROCKSDB, ...)
    #[arg(long, default_value = "InnoDB")]
    table_engine: String,
    #[command(flatten)]
    engine_opts: EngineArgs,
}

#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    target: Target,
    /// write, read, mixed, delete, seek, range, or tpcc
    #[arg(long, default_value = "write")]
    workload: String,
    #[arg(long, value_enum, default_value = "random")]
    pattern: Pattern,
    #[arg(long, default_value_t = 16)]
    key_bytes: usize,
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// operations per engine batch / transaction
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// worker threads (TPC-C: virtual users)
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// measured operations in all (default 100000 unless --duration-s)
    #[arg(long, conflicts_with = "duration_s")]
    ops: Option<u64>,
    /// measured seconds
    #[arg(long)]
    duration_s: Option<f64>,
    /// unmeasured seconds before measuring (TPC-C: the ramp-up)
    #[arg(long, default_value_t = 0.0)]
    warmup_s: f64,
    /// keys populated before read/mixed/delete/seek/range, and drawn from by uniform/zipfian
    /// (default: the number of operations, or 1000000 with --duration-s)
    #[arg(long)]
    keyspace: Option<u64>,
    /// entries read by each range operation
    #[arg(long, default_value_t = 100)]
    range_len: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// retries of a transaction that hit a write conflict before it counts as an error
    #[arg(long, default_value_t = 100)]
    max_retries: u64,
    /// TPC-C: warehouses used (the database may hold more)
    #[arg(long)]
    warehouses: Option<u32>,
    /// TPC-C: transaction mix
    #[arg(long, value_enum, default_value = "spec")]
    tpcc_mix: Mix,
    /// TPC-C: how the client drives the database (procedures: MariaDB and PostgreSQL)
    #[arg(long, value_enum, default_value = "rows")]
    tpcc_mode: Mode,
    /// TPC-C: each virtual user draws a warehouse per transaction instead of its home one
    #[arg(long)]
    all_warehouses: bool,
    /// TPC-C: the spec's keying and think times
    #[arg(long)]
    think: bool,
    /// TPC-C: check consistency conditions 1-4 after the measured window
    #[arg(long)]
    check: bool,
    /// OLTP: sysbench tables sbtest1..N (prepared by `sysbench prepare`)
    #[arg(long, default_value_t = 10)]
    tables: u32,
    /// OLTP: rows per table
    #[arg(long, default_value_t = 100_000)]
    table_size: u32,
    #[command(flatten)]
    channel: Channel,
}

#[derive(Args, Debug)]
struct LoadArgs {
    #[command(flatten)]
    target: Target,
    #[arg(long)]
    warehouses: u32,
    /// loader threads
    #[arg(long, default_value_t = 1)]
    loaders: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    channel: Channel,
}

#[derive(Args, Debug)]
struct CheckArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    channel: Channel,
}

#[derive(Args, Debug)]
struct SampleArgs {
    #[arg(long, default_value_t = 10)]
    warehouses: u32,
    /// transactions to draw
    #[arg(long, default_value_t = 20_000)]
    count: u64,
    /// virtual users drawing in turn
    #[arg(long, default_value_t = 8)]
    threads: usize,
    #[arg(long, value_enum, default_value = "spec")]
    tpcc_mix: Mix,
    #[arg(long)]
    all_warehouses: bool,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Args, Debug)]
struct CorruptArgs {
    #[command(flatten)]
    target: Target,
    #[arg(long, default_value_t = 1)]
    warehouse: u32,
    #[arg(long, default_value_t = 1)]
    district: u32,
    #[arg(long, default_value_t = 5)]
    next_o_id_delta: i64,
}

#[derive(Args, Debug)]
struct EngineArgs {
    #[arg(long)]
    memtable_bytes: Option<usize>,
    #[arg(long)]
    block_cache_bytes: Option<usize>,
    #[arg(long, value_enum, default_value = "none")]
    sync: SyncMode,
    #[arg(long, value_enum, default_value = "none")]
    compression: Compression,
    #[arg(long)]
    flush_threads: Option<usize>,
    #[arg(long)]
    compaction_threads: Option<usize>,
    /// null engine: simulated latency of each call in nanoseconds
    #[arg(long, default_value_t = 0)]
    null_latency_ns: u64,
}

impl Target {
    fn server(&self) -> Option<tpcc::sql::Server> {
        self.socket.as_ref().map(|s| tpcc::sql::Server {
            socket: s.clone(),
            database: self.database.clone(),
            table_engine: self.table_engine.clone(),
        })
    }

    fn engine_version(&self) -> serde_json::Value {
        engines::versions()
            .get(self.engine.as_str())
            .cloned()
            .unwrap_or_default()
    }

    fn tpcc(&self) -> Result<Box<dyn tpcc::TpccDb>> {
        tpcc::open(&self.engine, &self.options()?, self.server())
    }

    fn options(&self) -> Result<EngineOptions> {
        let known = engines::ENGINES.contains(&self.engine.as_str())
            || tpcc::ENGINES.contains(&self.engine.as_str());
        if !known {
            bail!(
                "unknown engine '{}'; choose one of {}",
                self.engine,
                tpcc::ENGINES.join(", ")
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
    fn open(&self) -> Result<EventSink> {
        EventSink::open(self.events_fd, self.events.as_deref())
    }
}

/// Emit `start`, run `body`, emit `end` with its outcome.
fn with_events(
    sink: &EventSink,
    start: serde_json::Value,
    body: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let mut fields = json!({
        "pid": std::process::id(),
        "driver_version": env!("CARGO_PKG_VERSION"),
        "ld_preload": std::env::var("LD_PRELOAD").ok(),
        // what /proc/self/maps holds now: a fallback proof for runs so short that the
        // parent cannot read /proc/PID/maps before the process exits
        "mapped_files": rusage::mapped_files(),
    });
    if let (Some(f), serde_json::Value::Object(extra)) = (fields.as_object_mut(), start) {
        f.extend(extra);
    }
    sink.emit("start", fields)?;
    let result = body();
    match &result {
        Ok(()) => sink.emit("end", json!({"status": "ok"}))?,
        Err(e) => sink.emit("end", json!({"status": "error", "error": format!("{e:#}")}))?,
    }
    result
}

fn run(a: RunArgs) -> Result<()> {
    if a.threads == 0 {
        bail!("--threads must be at least 1");
    }
    if a.interval_ms == 0 {
        bail!("--interval-ms must be at least 1");
    }
    if let Some(d) = a.duration_s {
        if !(d > 0.0 && d.is_finite()) {
            bail!("--duration-s must be a positive number of seconds, got {d}");
        }
    }
    if !(a.warmup_s >= 0.0 && a.warmup_s.is_finite()) {
        bail!("--warmup-s must be zero or a positive number of seconds");
    }
    let ops = match (a.ops, a.duration_s) {
        (Some(0), _) => bail!("--ops must be at least 1"),
        (Some(n), _) => Some(n),
        (None, None) => Some(100_000),
        (None, Some(_)) => None,
    };
    let opts = a.target.options()?;
    let is_tpcc = a.workload == "tpcc";
    let is_oltp = a.workload.starts_with("oltp_");
    let oltp_spec = if is_oltp {
        Some(OltpSpec::new(
            &a.workload,
            a.tables,
            a.table_size,
            a.seed,
            a.max_retries,
        )?)
    } else {
        None
    };
    let kv_kind = if is_tpcc || is_oltp {
        None
    } else {
        Some(
            <KvKind as clap::ValueEnum>::from_str(&a.workload, true).map_err(|_| {
                anyhow::anyhow!(
                    "unknown workload '{}'; choose write, read, mixed, delete, seek, range, tpcc, \
                     oltp_point_select, oltp_read_only or oltp_read_write",
                    a.workload
                )
            })?,
        )
    };
    let sink = a.channel.open()?;
    let kv_spec = kv_kind.map(|kind| KvSpec {
        kind,
        pattern: a.pattern,
        key_bytes: a.key_bytes,
        value_bytes: a.value_bytes,
        batch: a.batch,
        keyspace: a.keyspace.unwrap_or(ops.unwrap_or(1_000_000)),
        range_len: a.range_len,
        seed: a.seed,
        max_retries: a.max_retries,
    });
    if let Some(s) = &kv_spec {
        s.validate()?;
    }
    let start = json!({
        "engine": a.target.engine,
        "engine_version": a.target.engine_version(),
        "engine_options": opts,
        "workload": if is_tpcc { json!("tpcc") } else if let Some(o) = &oltp_spec { json!(o) } else { json!(kv_spec) },
        "threads": a.threads,
        "ops": ops,
        "duration_s": a.duration_s,
        "warmup_s": a.warmup_s,
    });
    let cfg = runner::RunConfig {
        threads: a.threads,
        ops,
        duration: a.duration_s.map(Duration::from_secs_f64),
        warmup: Duration::from_secs_f64(a.warmup_s),
        interval: Duration::from_millis(a.interval_ms),
        ops_per_call: if is_tpcc || is_oltp {
            1
        } else {
            a.batch as u64
        },
    };
    with_events(&sink, start, || {
        let t0 = Instant::now();
        if let Some(spec) = oltp_spec {
            let server = a
                .target
                .server()
                .context("OLTP runs against a server: pass --socket")?;
            let workload = OltpWorkload::new(&a.target.engine, server, spec)?;
            runner::run(&workload, &cfg, &sink)?;
        } else if let Some(spec) = kv_spec {
            let engine = engines::open(&a.target.engine, &opts)?;
            phase_end(&sink, "open", t0)?;
            let workload = KvWorkload::new(spec, &*engine)?;
            workload.prepare(a.threads, &sink)?;
            runner::run(&workload, &cfg, &sink)?;
            close(&sink, engine)?;
        } else {
            let db = a.target.tpcc()?;
            phase_end(&sink, "open", t0)?;
            let meta = tpcc::read_meta(&*db)?;
            let spec = TpccSpec {
                warehouses: a.warehouses.unwrap_or(meta.warehouses),
                mix: a.tpcc_mix,
                mode: a.tpcc_mode,
                all_warehouses: a.all_warehouses,
                think: a.think,
                seed: a.seed,
                max_retries: a.max_retries,
            };
            let workload = TpccWorkload::new(&*db, spec)?;
            runner::run(&workload, &cfg, &sink)?;
            if a.check {
                emit_check(&*db, meta.warehouses, &sink)?;
            }
            close(&sink, db)?;
        }
        Ok(())
    })
}

fn phase_end(sink: &EventSink, phase: &str, since: Instant) -> Result<()> {
    let secs = since.elapsed().as_secs_f64();
    sink.emit(
        "phase",
        json!({"phase": phase, "state": "end", "duration_s": secs}),
    )
}

/// Drop an engine, which closes it (flushing what it must), and say how long that took.
fn close<T>(sink: &EventSink, engine: T) -> Result<()> {
    let t = Instant::now();
    drop(engine);
    phase_end(sink, "close", t)
}

fn emit_check(db: &dyn tpcc::TpccDb, warehouses: u32, sink: &EventSink) -> Result<()> {
    let t0 = Instant::now();
    sink.emit("phase", json!({"phase": "check", "state": "begin"}))?;
    let conditions = tpcc::check(db, warehouses)?;
    let ok = conditions.iter().all(|c| c.ok);
    sink.emit(
        "check",
        json!({"ok": ok, "conditions": conditions, "duration_s": t0.elapsed().as_secs_f64()}),
    )
}

fn load(a: LoadArgs) -> Result<()> {
    let opts = a.target.options()?;
    let sink = a.channel.open()?;
    let start = json!({"engine": a.target.engine, "engine_version": a.target.engine_version(),
                       "engine_options": opts, "workload": "tpcc-load", "warehouses": a.warehouses,
                       "loaders": a.loaders});
    with_events(&sink, start, || {
        let db = a.target.tpcc()?;
        tpcc::load(&*db, a.warehouses, a.loaders, a.seed, &sink)?;
        close(&sink, db)
    })
}

fn check(a: CheckArgs) -> Result<()> {
    a.target.options()?;
    let sink = a.channel.open()?;
    let start = json!({"engine": a.target.engine, "workload": "tpcc-check"});
    with_events(&sink, start, || {
        let db = a.target.tpcc()?;
        let meta = tpcc::read_meta(&*db)?;
        emit_check(&*db, meta.warehouses, &sink)
    })
}

fn corrupt(a: CorruptArgs) -> Result<()> {
    let db = a.target.tpcc()?;
    let mut tx = db.session()?;
    let e = |e: engines::DbError| anyhow::anyhow!("{e}");
    tx.begin(true).map_err(e)?;
    let mut d = tx.district(a.warehouse, a.district).map_err(e)?;
    d.next_o_id = (d.next_o_id as i64 + a.next_o_id_delta) as u32;
    tx.put_district(&d, false).map_err(e)?;
    tx.commit().map_err(e)?;
    eprintln!(
        "w{} d{}: d_next_o_id is now {}",
        a.warehouse, a.district, d.next_o_id
    );
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Info => {
            println!(
                "{}",
                json!({
                    "driver_version": env!("CARGO_PKG_VERSION"),
                    "event_schema": events::SCHEMA_VERSION,
                    "engines": engines::versions(),
                    "workloads": ["write", "read", "mixed", "delete", "seek", "range", "tpcc", "oltp_point_select", "oltp_read_only", "oltp_read_write"],
                    "histogram_sigfig": runner::SIGFIG,
                })
            );
            Ok(())
        }
        Cmd::Run(a) => run(*a),
        Cmd::TpccLoad(a) => load(*a),
        Cmd::TpccCheck(a) => check(*a),
        Cmd::TpccCorrupt(a) => corrupt(*a),
        Cmd::TpccSample(a) => {
            let spec = TpccSpec {
                warehouses: a.warehouses.max(1),
                mix: a.tpcc_mix,
                mode: tpcc::Mode::Rows,
                all_warehouses: a.all_warehouses,
                think: false,
                seed: a.seed,
                max_retries: 0,
            };
            println!("{}", tpcc::sample(&spec, a.count, a.threads));
            Ok(())
        }
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("alloclab-driver: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
