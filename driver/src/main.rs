//! alloclab-driver: runs one workload on one engine in this process, so that an allocator
//! preloaded into this process is the allocator under test. Events go to --events-fd or
//! --events (versioned JSON lines); logs go to stderr; stdout carries only `info` output.

mod alloc_account;
mod cli;
mod engines;
mod events;
mod gate;
mod histograms;
mod life;
mod runner;
mod rusage;
mod sql;
mod workloads;

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;
use serde_json::json;

use cli::{CheckArgs, Cli, Cmd, CorruptArgs, LifeArgs, LoadArgs, RunArgs};
use events::EventSink;
use workloads::kv::KvWorkload;
use workloads::oltp::OltpWorkload;
use workloads::tpcc::{self, TpccWorkload};
use workloads::{Spec, Workload};

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
    let ops = a.ops()?;
    let opts = a.target.options()?;
    let (named, spec) = a.spec(ops)?;
    let sink = a.channel.open()?;
    let start = json!({
        "engine": a.target.engine,
        "engine_version": a.target.engine_version(),
        "engine_options": opts,
        "workload": spec.describe(),
        "threads": a.threads,
        "ops": ops,
        "duration_s": a.duration_s,
        "warmup_s": a.warmup_s,
    });
    let cfg = a.run_config(ops, named);
    with_events(&sink, start, || {
        let t0 = Instant::now();
        match spec {
            Spec::Oltp(spec) => {
                let server = a
                    .target
                    .server()
                    .context("OLTP runs against a server: pass --socket")?;
                let workload = OltpWorkload::new(&a.target.engine, server, spec)?;
                runner::run(&workload, &cfg, &sink)?;
            }
            Spec::Kv(spec) => {
                let engine = engines::open(&a.target.engine, &opts)?;
                phase_end(&sink, "open", t0)?;
                let workload = KvWorkload::new(spec, &*engine)?;
                workload.prepare(a.threads, &sink)?;
                runner::run(&workload, &cfg, &sink)?;
                close(&sink, engine)?;
            }
            Spec::Tpcc => {
                let db = a.target.tpcc()?;
                phase_end(&sink, "open", t0)?;
                let meta = tpcc::read_meta(&*db)?;
                let workload = TpccWorkload::new(&*db, a.tpcc_spec(meta.warehouses))?;
                runner::run(&workload, &cfg, &sink)?;
                if a.check {
                    emit_check(&*db, meta.warehouses, &sink)?;
                }
                close(&sink, db)?;
            }
        }
        Ok(())
    })
}

fn life(a: LifeArgs) -> Result<()> {
    a.run.ops()?;
    let opts = a.run.target.options()?;
    let sink = a.run.channel.open()?;
    let start = json!({
        "engine": a.run.target.engine,
        "engine_version": a.run.target.engine_version(),
        "engine_options": opts,
        "workload": "life",
        "threads": a.run.threads,
        "cycles": a.cycles,
    });
    with_events(&sink, start, || {
        let t0 = Instant::now();
        let engine = engines::open(&a.run.target.engine, &opts)?;
        phase_end(&sink, "open", t0)?;
        life::live(&a, &*engine, &sink)?;
        close(&sink, engine)
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
                    "workloads": workloads::names(),
                    "histogram_sigfig": histograms::SIGFIG,
                })
            );
            Ok(())
        }
        Cmd::Run(a) => run(*a),
        Cmd::Life(a) => life(*a),
        Cmd::TpccLoad(a) => load(*a),
        Cmd::TpccCheck(a) => check(*a),
        Cmd::TpccCorrupt(a) => corrupt(*a),
        Cmd::TpccSample(a) => {
            println!("{}", tpcc::sample(&a.spec(), a.count, a.threads));
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
