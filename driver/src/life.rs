//! A life on an embedded engine (alloclab issue 36): one engine open in this process through
//! cycles of phases, so that the allocator preloaded here lives through all of them. The same
//! events as alloclab's life client for servers (alloclab.clients.life), so the runner reads
//! both alike:
//!
//!   steady  a key-value load (`load`: write, read, mixed, ...) for duration_s
//!   burst   `compact`: flush the memtables and compact the whole key range; `scan`: one
//!           iterator over every key (every block through the block cache); with a load beside
//!           it for duration_s where the phase names one
//!   idle    nothing, for duration_s
//!
//! Each load is one run of the runner with its events in a file of its own
//! (`<events dir>/life/c<cycle>-<name>.events.jsonl`); the life's own channel gets `start`, the
//! `measure` phase around the whole life, a `phase` event at each phase's begin and end (`life`:
//! its record, on CLOCK_MONOTONIC, which the sampler shares), an `interval` every second, the
//! `summary` (the steady phases' loads summed, and `life`: phases and readings) and `end`. At the
//! life's start and each phase's end it reads the engine's own account (`Engine::memory`) and
//! the allocator's (`alloc_account`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::cli::LifeArgs;
use crate::engines::Engine;
use crate::events::EventSink;
use crate::runner::{self, RunConfig};
use crate::workloads::kv::{KvKind, KvWorkload};
use crate::workloads::{Named, Workload};

pub const KINDS: &[&str] = &["steady", "burst", "idle"];
pub const BURSTS: &[&str] = &["compact", "scan"];

/// One phase of a cycle, as alloclab's plan gives it (`[[workloads.phases]]`).
#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    pub name: String,
    pub kind: String,
    pub duration_s: Option<f64>,
    pub load: Option<String>,
    pub threads: Option<usize>,
    pub burst: Option<String>,
}

impl Phase {
    fn check(&self) -> Result<Option<KvKind>> {
        let at = format!("phase {:?}", self.name);
        if !KINDS.contains(&self.kind.as_str()) {
            bail!(
                "{at}: kind {:?}; choose one of {}",
                self.kind,
                KINDS.join(", ")
            );
        }
        let load = match self.load.as_deref().map(Named::parse).transpose()? {
            Some(Named::Kv(k)) => Some(k),
            Some(_) => bail!("{at}: load {:?} is not a key-value workload", self.load),
            None => None,
        };
        match (self.kind.as_str(), &self.burst, load) {
            ("steady", _, None) => bail!("{at}: a steady phase needs a load"),
            ("burst", None, _) => bail!("{at}: a burst phase needs a burst"),
            ("burst", Some(b), _) if !BURSTS.contains(&b.as_str()) => {
                bail!("{at}: burst {b:?}; choose one of {}", BURSTS.join(", "))
            }
            ("idle", _, Some(_)) => bail!("{at}: an idle phase runs nothing"),
            (k, Some(_), _) if k != "burst" => bail!("{at}: only a burst phase has a burst"),
            _ => {}
        }
        let timed = self.kind != "burst" || load.is_some();
        match self.duration_s {
            Some(d) if !(d > 0.0 && d.is_finite()) => bail!("{at}: duration_s must be positive"),
            None if timed => bail!("{at}: a {} phase needs its duration_s", self.kind),
            _ => {}
        }
        Ok(load)
    }
}

/// CLOCK_MONOTONIC in seconds: the clock every process here shares (Python's time.monotonic).
pub fn mono_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// The engine's own account (`engine_bytes`: the sum of its parts, null where it keeps none)
/// and the allocator's, now.
fn reading(engine: &dyn Engine) -> Value {
    let parts = engine.memory();
    let total: Option<u64> = parts
        .as_ref()
        .filter(|m| !m.is_empty())
        .map(|m| m.values().filter_map(Value::as_u64).sum());
    json!({"engine_bytes": total, "engine_parts": parts, "allocator": crate::alloc_account::read(),
           "mono_s": mono_s()})
}

/// The `summary` event a load's runner wrote into its own events file.
fn summary_of(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the load's events {}", path.display()))?;
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|v| v["type"] == "summary")
        .ok_or_else(|| anyhow!("the load sent no summary ({})", path.display()))
}

/// The steady phases' loads as one summary: operations, calls, errors, windows and CPU summed,
/// each phase's operations under its own name ("put c1 churn"), so their histograms merge where
/// latencies are read; the process's memory and allocator account read now.
fn summed(steady: &[(String, Value)]) -> Value {
    let mut out = Map::new();
    let mut ops = Map::new();
    let mut usage = Map::new();
    let mut first_error = Value::Null;
    for (label, s) in steady {
        for k in [
            "duration_s",
            "total_ops",
            "total_calls",
            "total_errors",
            "total_retries",
            "total_rollbacks",
        ] {
            let v =
                out.get(k).and_then(Value::as_f64).unwrap_or(0.0) + s[k].as_f64().unwrap_or(0.0);
            out.insert(k.into(), json!(v));
        }
        if let Some(m) = s["ops"].as_object() {
            for (name, op) in m {
                ops.insert(format!("{name} {label}"), op.clone());
            }
        }
        if let Some(m) = s["usage_window"].as_object() {
            for (k, v) in m {
                let sum =
                    usage.get(k).and_then(Value::as_f64).unwrap_or(0.0) + v.as_f64().unwrap_or(0.0);
                usage.insert(k.clone(), json!(sum));
            }
        }
        if first_error.is_null() {
            first_error = s["first_error"].clone();
        }
        for k in ["histogram_encoding", "histogram_sigfig", "latency_unit"] {
            out.insert(k.into(), s[k].clone());
        }
    }
    for k in [
        "total_ops",
        "total_calls",
        "total_errors",
        "total_retries",
        "total_rollbacks",
    ] {
        let v = out.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        out.insert(k.into(), json!(v as u64));
    }
    let window = out.get("duration_s").and_then(Value::as_f64).unwrap_or(0.0);
    let total = out.get("total_ops").and_then(Value::as_f64).unwrap_or(0.0);
    let (hwm, rss) = crate::rusage::memory();
    out.insert(
        "ops_per_s".into(),
        json!(if window > 0.0 { total / window } else { 0.0 }),
    );
    out.insert("ops".into(), Value::Object(ops));
    out.insert("usage_window".into(), Value::Object(usage));
    out.insert("first_error".into(), first_error);
    out.insert("vm_hwm_bytes".into(), json!(hwm));
    out.insert("rss_bytes".into(), json!(rss));
    out.insert("alloc_account".into(), crate::alloc_account::read());
    Value::Object(out)
}

/// The steady phases' loads: ("c1 churn", its summary).
type Steady = Vec<(String, Value)>;

struct Life<'a> {
    args: &'a LifeArgs,
    engine: &'a dyn Engine,
    sink: &'a EventSink,
    dir: PathBuf,
    label: Mutex<String>,
}

impl Life<'_> {
    /// A phase's load: one run of the runner for its duration, its events in a file of its own.
    fn load(&self, ph: &Phase, kind: KvKind, cycle: u32, i: usize) -> Result<Value> {
        let r = &self.args.run;
        let mut spec = r.kv_spec(kind, None);
        spec.seed = r.seed + 1000 * cycle as u64 + i as u64;
        let path = self.dir.join(format!("c{cycle}-{}.events.jsonl", ph.name));
        let sink = EventSink::open(None, Some(&path))?;
        let workload = KvWorkload::new(spec, self.engine)?;
        let cfg = RunConfig {
            threads: ph.threads.unwrap_or(r.threads),
            ops: None,
            duration: ph.duration_s.map(Duration::from_secs_f64),
            warmup: Duration::ZERO,
            interval: Duration::from_millis(r.interval_ms),
            ops_per_call: Named::Kv(kind).per_call(r.batch),
            gate: false,
        };
        runner::run(&workload, &cfg, &sink)?;
        let s = summary_of(&path)?;
        if s["total_errors"].as_u64().unwrap_or(0) > 0 {
            bail!(
                "the load had {} failed calls; first: {}",
                s["total_errors"],
                s["first_error"]
            );
        }
        Ok(s)
    }

    fn burst(&self, what: &str) -> Result<()> {
        match what {
            "compact" => self.engine.compact(),
            _ => {
                let mut session = self.engine.session()?;
                let e = |e| anyhow!("scan failed: {e}");
                session.begin(false).map_err(e)?;
                session
                    .scan(&[], usize::MAX, &mut |k, v| {
                        std::hint::black_box((k, v));
                        true
                    })
                    .map_err(e)?;
                session.commit().map_err(e)
            }
        }
    }

    /// One phase: its record (with `mono_start`/`mono_end`) and its load's summary.
    fn phase(
        &self,
        ph: &Phase,
        load: Option<KvKind>,
        cycle: u32,
        i: usize,
    ) -> Result<(Value, Option<Value>)> {
        let label = format!("c{cycle} {}", ph.name);
        *self.label.lock().expect("poisoned") = label.clone();
        let mut rec = json!({"cycle": cycle, "name": ph.name, "kind": ph.kind, "burst": ph.burst,
                             "load": ph.load, "threads": ph.threads, "connections": null});
        let start = mono_s();
        rec["mono_start"] = json!(start);
        self.sink.emit(
            "phase",
            json!({"phase": label, "state": "begin", "life": {"mono_s": start, "cycle": cycle, "name": ph.name,
                   "kind": ph.kind}}),
        )?;
        let summary = std::thread::scope(|s| -> Result<Option<Value>> {
            let burst = ph.burst.as_deref().map(|b| s.spawn(move || self.burst(b)));
            let summary = load.map(|k| self.load(ph, k, cycle, i)).transpose();
            if let Some(h) = burst {
                h.join().map_err(|_| anyhow!("the burst panicked"))??;
                rec["burst_s"] = json!(mono_s() - start);
            }
            summary
        })
        .with_context(|| format!("phase {:?} of cycle {cycle}", ph.name))?;
        if let (None, Some(d)) = (load, ph.duration_s) {
            // idle, or a burst that lasts at least this long
            let left = start + d - mono_s();
            if left > 0.0 {
                std::thread::sleep(Duration::from_secs_f64(left));
            }
        }
        rec["engine"] = reading(self.engine);
        let end = mono_s();
        rec["mono_end"] = json!(end);
        rec["cut"] = json!(false);
        if let Some(s) = &summary {
            rec["ops"] = s["total_ops"].clone();
            rec["window_s"] = s["duration_s"].clone();
            rec["ops_per_s"] = s["ops_per_s"].clone();
        }
        let mut life = rec.clone();
        life["mono_s"] = json!(end);
        self.sink.emit(
            "phase",
            json!({"phase": label, "state": "end", "life": life}),
        )?;
        Ok((rec, summary))
    }
}

/// The whole life on `engine`, after its keys are populated.
pub fn live(args: &LifeArgs, engine: &dyn Engine, sink: &EventSink) -> Result<()> {
    let phases: Vec<Phase> =
        serde_json::from_str(&args.phases).context("--phases is not a JSON array of phases")?;
    if phases.is_empty() {
        bail!("--phases names no phase");
    }
    let loads = phases
        .iter()
        .map(Phase::check)
        .collect::<Result<Vec<_>>>()?;
    if args.cycles == 0 {
        bail!("--cycles must be at least 1");
    }
    let dir = match (&args.phase_events, &args.run.channel.events) {
        (Some(d), _) => d.clone(),
        (None, Some(e)) => e.parent().unwrap_or(Path::new(".")).join("life"),
        (None, None) => bail!("with --events-fd, pass --phase-events DIR for the loads' events"),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let life = Life {
        args,
        engine,
        sink,
        dir,
        label: Mutex::new(String::new()),
    };
    let populate = args.run.kv_spec(KvKind::Read, None);
    KvWorkload::new(populate, engine)?.prepare(args.run.threads, sink)?;
    let first = reading(engine);
    sink.emit("phase", json!({"phase": "measure", "state": "begin"}))?;
    let done = AtomicBool::new(false);
    let (records, steady) = std::thread::scope(|s| -> Result<(Vec<Value>, Steady)> {
        // an interval every second (a life that idles is not hung)
        s.spawn(|| {
            let mut next = Instant::now();
            while !done.load(Ordering::Acquire) {
                next += Duration::from_secs(1);
                while Instant::now() < next && !done.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(50));
                }
                let label = life.label.lock().expect("poisoned").clone();
                let _ = sink.emit("interval", json!({"ops": {}, "life_phase": label}));
            }
        });
        let mut records = Vec::new();
        let mut steady = Vec::new();
        let mut run = || -> Result<()> {
            for cycle in 1..=args.cycles {
                for (i, (ph, load)) in phases.iter().zip(&loads).enumerate() {
                    let (rec, summary) = life.phase(ph, *load, cycle, i)?;
                    records.push(rec);
                    if let (Some(s), "steady") = (summary, ph.kind.as_str()) {
                        steady.push((format!("c{cycle} {}", ph.name), s));
                    }
                }
            }
            Ok(())
        };
        let r = run();
        done.store(true, Ordering::Release);
        r.map(|_| (records, steady))
    })?;
    sink.emit("phase", json!({"phase": "measure", "state": "end"}))?;
    let mut summary = summed(&steady);
    summary["life"] = json!({"phases": records, "engine_at_start": first, "stopped": null,
                             "engine": args.run.target.engine});
    sink.emit("summary", summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(
        kind: &str,
        load: Option<&str>,
        burst: Option<&str>,
        duration_s: Option<f64>,
    ) -> Phase {
        Phase {
            name: "p".into(),
            kind: kind.into(),
            duration_s,
            load: load.map(String::from),
            threads: None,
            burst: burst.map(String::from),
        }
    }

    #[test]
    fn phases_are_checked_as_alloclab_checks_them() {
        assert!(phase("steady", Some("mixed"), None, Some(1.0))
            .check()
            .unwrap()
            .is_some());
        assert!(phase("burst", None, Some("compact"), None)
            .check()
            .unwrap()
            .is_none());
        assert!(phase("burst", Some("read"), Some("scan"), Some(2.0))
            .check()
            .is_ok());
        assert!(phase("idle", None, None, Some(1.0)).check().is_ok());
        for (p, says) in [
            (phase("steady", None, None, Some(1.0)), "needs a load"),
            (
                phase("steady", Some("tpcc"), None, Some(1.0)),
                "not a key-value workload",
            ),
            (
                phase("steady", Some("mixed"), None, None),
                "needs its duration_s",
            ),
            (
                phase("burst", None, Some("dump"), None),
                "choose one of compact, scan",
            ),
            (
                phase("burst", Some("read"), Some("scan"), None),
                "needs its duration_s",
            ),
            (phase("idle", Some("read"), None, Some(1.0)), "runs nothing"),
            (
                phase("idle", None, Some("scan"), Some(1.0)),
                "only a burst phase",
            ),
            (
                phase("nap", None, None, Some(1.0)),
                "choose one of steady, burst, idle",
            ),
            (phase("idle", None, None, Some(-1.0)), "must be positive"),
        ] {
            let e = format!("{:#}", p.check().unwrap_err());
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn the_loads_summaries_sum_with_each_phases_operations_named() {
        let one = |ops: u64, secs: f64| {
            json!({"duration_s": secs, "total_ops": ops, "total_calls": ops, "total_errors": 0,
                   "total_retries": 1, "total_rollbacks": 0, "ops": {"get": {"ops": ops}},
                   "usage_window": {"cpu_user_s": 0.5}, "first_error": null,
                   "histogram_encoding": "hdr", "histogram_sigfig": 3, "latency_unit": "ns"})
        };
        let s = summed(&[
            ("c1 churn".into(), one(100, 1.0)),
            ("c2 churn".into(), one(300, 3.0)),
        ]);
        assert_eq!(s["total_ops"], 400);
        assert_eq!(s["total_retries"], 2);
        assert_eq!(s["ops_per_s"], 100.0);
        assert_eq!(s["usage_window"]["cpu_user_s"], 1.0);
        let names: Vec<_> = s["ops"].as_object().unwrap().keys().cloned().collect();
        assert_eq!(names, ["get c1 churn", "get c2 churn"]);
    }
}
