//! alloclab-driver: runs one workload on one engine in this process, so that an allocator
//! preloaded into this process is the allocator under test. Events go to --events-fd or
//! --events (versioned JSON lines); logs go to stderr; stdout carries only `info` output.

mod engines;
mod events;
mod runner;
mod rusage;
mod workloads;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::{Args, Parser, Subcommand};
use serde_json::json;

use engines::{Compression, EngineOptions, SyncMode};
use events::EventSink;
use workloads::kv::{KvKind, KvSpec, KvWorkload, Pattern};
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
}

#[derive(Args, Debug)]
struct RunArgs {
    #[arg(long)]
    engine: String,
    /// directory for the engine's files (created if missing)
    #[arg(long)]
    db_path: PathBuf,
    #[arg(long, value_enum, default_value = "write")]
    workload: KvKind,
    #[arg(long, value_enum, default_value = "random")]
    pattern: Pattern,
    #[arg(long, default_value_t = 16)]
    key_bytes: usize,
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// operations per engine batch / transaction
    #[arg(long, default_value_t = 1)]
    batch: usize,
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// measured operations in all (default 100000 unless --duration-s)
    #[arg(long, conflicts_with = "duration_s")]
    ops: Option<u64>,
    /// measured seconds
    #[arg(long)]
    duration_s: Option<f64>,
    /// unmeasured seconds before measuring
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
    /// file descriptor to write events to (inherited from the parent)
    #[arg(long)]
    events_fd: Option<i32>,
    /// file to write events to
    #[arg(long)]
    events: Option<PathBuf>,
    #[command(flatten)]
    engine_opts: EngineArgs,
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
    let spec = KvSpec {
        kind: a.workload,
        pattern: a.pattern,
        key_bytes: a.key_bytes,
        value_bytes: a.value_bytes,
        batch: a.batch,
        keyspace: a.keyspace.unwrap_or(ops.unwrap_or(1_000_000)),
        range_len: a.range_len,
        seed: a.seed,
        max_retries: a.max_retries,
    };
    let workload = KvWorkload::new(spec.clone())?;
    let sink = EventSink::open(a.events_fd, a.events.as_deref())?;
    let e = &a.engine_opts;
    let opts = EngineOptions {
        path: a.db_path.clone(),
        memtable_bytes: e.memtable_bytes,
        block_cache_bytes: e.block_cache_bytes,
        sync: e.sync,
        compression: e.compression,
        flush_threads: e.flush_threads,
        compaction_threads: e.compaction_threads,
        null_latency_ns: e.null_latency_ns,
    };
    let result = (|| -> Result<()> {
        if !engines::ENGINES.contains(&a.engine.as_str()) {
            bail!(
                "unknown engine '{}'; choose one of {}",
                a.engine,
                engines::ENGINES.join(", ")
            );
        }
        sink.emit(
            "start",
            json!({
                "pid": std::process::id(),
                "driver_version": env!("CARGO_PKG_VERSION"),
                "engine": a.engine,
                "engine_version": engines::versions()[a.engine.as_str()],
                "engine_options": opts,
                "workload": spec,
                "threads": a.threads,
                "ops": ops,
                "duration_s": a.duration_s,
                "warmup_s": a.warmup_s,
                "ld_preload": std::env::var("LD_PRELOAD").ok(),
                // what /proc/self/maps holds now: a fallback proof for runs so short that
                // the parent cannot read /proc/PID/maps before the process exits
                "mapped_files": rusage::mapped_files(),
            }),
        )?;
        let t0 = Instant::now();
        let engine = engines::open(&a.engine, &opts)?;
        sink.emit(
            "phase",
            json!({"phase": "open", "state": "end", "duration_s": t0.elapsed().as_secs_f64()}),
        )?;
        workload.prepare(&*engine, a.threads, &sink)?;
        let cfg = runner::RunConfig {
            threads: a.threads,
            ops,
            duration: a.duration_s.map(Duration::from_secs_f64),
            warmup: Duration::from_secs_f64(a.warmup_s),
            interval: Duration::from_millis(a.interval_ms),
            ops_per_call: a.batch as u64,
        };
        runner::run(&*engine, &workload, &cfg, &sink)?;
        let t1 = Instant::now();
        drop(engine);
        sink.emit(
            "phase",
            json!({"phase": "close", "state": "end", "duration_s": t1.elapsed().as_secs_f64()}),
        )?;
        Ok(())
    })();
    match &result {
        Ok(()) => sink.emit("end", json!({"status": "ok"}))?,
        Err(e) => sink.emit("end", json!({"status": "error", "error": format!("{e:#}")}))?,
    }
    result
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
                    "histogram_sigfig": runner::SIGFIG,
                })
            );
            Ok(())
        }
        Cmd::Run(a) => run(*a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("alloclab-driver: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
