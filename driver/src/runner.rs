//! The only place that times anything. Worker threads call the workload, time each call and
//! record it into their own HDR histograms (one per operation type); the reporter merges
//! them every interval, emits an interval event, and keeps the cumulative histograms for the
//! final summary. Warm-up calls are counted but never recorded.

use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use hdrhistogram::sync::SyncHistogram;
use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};

use crate::engines::DbError;
use crate::events::EventSink;
use crate::gate;
use crate::histograms::{encode, new_histogram, percentiles, SIGFIG};
use crate::rusage;
use crate::workloads::Workload;

const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;
/// Workers wait here (session open) until every worker is ready, so that nobody starts
/// before the clock does.
const PENDING: u8 = 3;
/// Gated runs only: workers park between slices.
const PAUSE: u8 = 4;

pub struct RunConfig {
    pub threads: usize,
    /// measured operations in all (split across threads as they claim them), or
    pub ops: Option<u64>,
    /// a measured duration
    pub duration: Option<Duration>,
    pub warmup: Duration,
    pub interval: Duration,
    /// logical operations per call (the batch size), so that `ops` can be claimed per call
    pub ops_per_call: u64,
    /// measure in slices commanded on stdin (see the driver's --gate)
    pub gate: bool,
}

/// Counters of one thread, one slot per operation type. Only that thread writes them.
struct Counters {
    calls: Vec<AtomicU64>,
    ops: Vec<AtomicU64>,
    errors: Vec<AtomicU64>,
    /// of the errors, the conflicts still there after the last retry (contention, not a fault)
    gave_up: Vec<AtomicU64>,
    retries: Vec<AtomicU64>,
    rollbacks: Vec<AtomicU64>,
    warmup_ops: AtomicU64,
}

impl Counters {
    fn new(n: usize) -> Self {
        let v = || (0..n).map(|_| AtomicU64::new(0)).collect();
        Counters {
            calls: v(),
            ops: v(),
            errors: v(),
            gave_up: v(),
            retries: v(),
            rollbacks: v(),
            warmup_ops: AtomicU64::new(0),
        }
    }
}

#[derive(Default, Clone, Copy)]
struct Totals {
    calls: u64,
    ops: u64,
    errors: u64,
    gave_up: u64,
    retries: u64,
    rollbacks: u64,
}

fn sum(counters: &[Box<Counters>], op: usize) -> Totals {
    let f = |sel: fn(&Counters) -> &Vec<AtomicU64>| {
        counters
            .iter()
            .map(|c| sel(c)[op].load(Ordering::Relaxed))
            .sum()
    };
    Totals {
        calls: f(|c| &c.calls),
        ops: f(|c| &c.ops),
        errors: f(|c| &c.errors),
        gave_up: f(|c| &c.gave_up),
        retries: f(|c| &c.retries),
        rollbacks: f(|c| &c.rollbacks),
    }
}

pub fn run(workload: &dyn Workload, cfg: &RunConfig, sink: &EventSink) -> Result<()> {
    let names = workload.op_names();
    let n = names.len();
    let threads = cfg.threads;
    let counters: Vec<Box<Counters>> = (0..threads).map(|_| Box::new(Counters::new(n))).collect();
    let mut iv = Intervals {
        sink,
        names: &names,
        counters: &counters,
        syncs: (0..n).map(|_| new_histogram().into_sync()).collect(),
        cumulative: (0..n).map(|_| new_histogram()).collect(),
        prev: vec![Totals::default(); n],
    };
    let phase = AtomicU8::new(PENDING);
    let ready = AtomicUsize::new(0);
    let claimed = AtomicU64::new(0);
    let done = AtomicUsize::new(0);
    let parked = AtomicUsize::new(0);
    let first_error: Mutex<Option<String>> = Mutex::new(None);
    let base = Instant::now();
    let last_finish_ns = AtomicU64::new(0);
    let measure_start_ns = AtomicU64::new(0);

    // the reporter sleeps until its next tick; a worker that ends wakes it (no polling: on a
    // saturated machine every wake-up takes a core from the workload under test)
    let reporter = std::thread::current();
    let results = std::thread::scope(|scope| -> Result<Vec<Result<()>>> {
        let mut handles = Vec::new();
        for (t, ctr) in counters.iter().enumerate() {
            let mut recorders: Vec<_> = iv.syncs.iter().map(|s| s.recorder()).collect();
            let reporter = reporter.clone();
            let (phase, claimed, done, first_error, last_finish_ns, names, ready, parked) = (
                &phase,
                &claimed,
                &done,
                &first_error,
                &last_finish_ns,
                &names,
                &ready,
                &parked,
            );
            handles.push(scope.spawn(move || -> Result<()> {
                let mut body = || -> Result<()> {
                    let mut worker = workload.worker(t, threads)?;
                    ready.fetch_add(1, Ordering::AcqRel);
                    while phase.load(Ordering::Acquire) == PENDING {
                        std::thread::yield_now();
                    }
                    loop {
                        let ph = phase.load(Ordering::SeqCst);
                        if ph == STOP {
                            break;
                        }
                        if ph == PAUSE {
                            // idle recorders: a refresh neither waits for them nor loses what
                            // they hold (they hand it over if a refresh is under way)
                            let idle: Vec<_> = recorders.iter_mut().map(|r| r.idle()).collect();
                            parked.fetch_add(1, Ordering::SeqCst);
                            while phase.load(Ordering::SeqCst) == PAUSE {
                                std::thread::park();
                            }
                            parked.fetch_sub(1, Ordering::SeqCst);
                            drop(idle);
                            continue;
                        }
                        if ph == MEASURE {
                            if let Some(total) = cfg.ops {
                                if claimed.fetch_add(cfg.ops_per_call, Ordering::Relaxed) >= total {
                                    break;
                                }
                            }
                        }
                        let t0 = Instant::now();
                        let step = worker.step();
                        let ns = t0.elapsed().as_nanos() as u64;
                        // a call that began in a turn's warm-up is the warm-up's, though it may
                        // end inside the timed turn: one call a thread a turn (an --ops count
                        // stays exact: only measured calls claim it)
                        if ph != MEASURE {
                            ctr.warmup_ops.fetch_add(step.ops, Ordering::Relaxed);
                            continue;
                        }
                        let op = step.op;
                        ctr.calls[op].fetch_add(1, Ordering::Relaxed);
                        ctr.retries[op].fetch_add(step.retries, Ordering::Relaxed);
                        if step.rolled_back {
                            ctr.rollbacks[op].fetch_add(1, Ordering::Relaxed);
                        }
                        match step.result {
                            Ok(()) => {
                                recorders[op].saturating_record(ns.max(1));
                                ctr.ops[op].fetch_add(step.ops, Ordering::Relaxed);
                            }
                            Err(e) => {
                                ctr.errors[op].fetch_add(1, Ordering::Relaxed);
                                if matches!(e, DbError::Conflict(_)) {
                                    ctr.gave_up[op].fetch_add(1, Ordering::Relaxed);
                                }
                                let mut fe = first_error.lock().expect("poisoned");
                                if fe.is_none() {
                                    let kind = if matches!(e, DbError::Conflict(_)) {
                                        "gave up after retries"
                                    } else {
                                        "error"
                                    };
                                    *fe = Some(format!("{} {kind}: {e}", names[op]));
                                }
                            }
                        }
                    }
                    Ok(())
                };
                let r = body();
                drop(recorders); // hands the last samples to the reporter
                last_finish_ns.fetch_max(base.elapsed().as_nanos() as u64, Ordering::AcqRel);
                done.fetch_add(1, Ordering::AcqRel);
                reporter.unpark();
                r
            }));
        }

        let all_done = || done.load(Ordering::Acquire) == threads;
        let nap = |until: Instant| {
            while Instant::now() < until && !all_done() {
                std::thread::park_timeout(until.saturating_duration_since(Instant::now()));
            }
        };
        // every worker has its session (or gave up) before the clock starts
        while ready.load(Ordering::Acquire) + done.load(Ordering::Acquire) < threads {
            std::thread::sleep(Duration::from_micros(200));
        }
        if !cfg.warmup.is_zero() {
            phase.store(WARMUP, Ordering::Release);
            sink.emit("phase", json!({"phase": "warmup", "state": "begin"}))?;
            nap(Instant::now() + cfg.warmup);
            let warm: u64 = counters
                .iter()
                .map(|c| c.warmup_ops.load(Ordering::Relaxed))
                .sum();
            sink.emit(
                "phase",
                json!({"phase": "warmup", "state": "end", "ops": warm}),
            )?;
        }
        workload.measure_begin()?;
        let mut usage0 = rusage::current();
        let duration_s = if cfg.gate {
            // slices commanded on stdin: workers park between them, the window is their sum
            let wake = || handles.iter().for_each(|h| h.thread().unpark());
            let settle = || {
                while parked.load(Ordering::SeqCst) + done.load(Ordering::SeqCst) < threads {
                    std::thread::sleep(Duration::from_micros(100));
                }
            };
            let mut measured = Duration::ZERO;
            let mut first = true;
            let gated = (|| -> Result<()> {
                phase.store(PAUSE, Ordering::SeqCst);
                settle();
                sink.emit(
                    "phase",
                    json!({"phase": "measure", "state": "begin", "gated": true}),
                )?;
                gate::serve(cfg.duration.unwrap_or_default(), all_done, |turn, warm| {
                    if first {
                        usage0 = rusage::current(); // the window's own CPU and switches
                        first = false;
                    }
                    if !warm.is_zero() {
                        // work not measured: the caches and TLB the others' turns took are
                        // this process's again before its turn is timed
                        phase.store(WARMUP, Ordering::SeqCst);
                        wake();
                        nap(Instant::now() + warm);
                    }
                    let t = Instant::now();
                    phase.store(MEASURE, Ordering::SeqCst);
                    wake();
                    nap(t + turn);
                    phase.store(PAUSE, Ordering::SeqCst);
                    // every histogram changes hands at once while the workers finish their
                    // calls and park (one after another, a rarely called operation's would hold
                    // up the next for its whole wait); a call that ended just before its worker
                    // parked may land in a later turn
                    std::thread::scope(|s| {
                        for h in iv.syncs.iter_mut() {
                            s.spawn(move || h.refresh_timeout(Duration::from_millis(250)));
                        }
                    });
                    settle();
                    measured += t.elapsed();
                    iv.emit(measured.as_secs_f64(), None)?;
                    Ok(measured)
                })
            })();
            // whatever happened, the workers leave their gate before the scope joins them
            phase.store(STOP, Ordering::SeqCst);
            wake();
            while !all_done() {
                std::thread::sleep(Duration::from_millis(1));
            }
            gated?;
            // the ended workers' last samples, into the summary's histograms
            for (s, c) in iv.syncs.iter_mut().zip(iv.cumulative.iter_mut()) {
                s.refresh_timeout(Duration::from_millis(250));
                c.add(&**s)
                    .map_err(|e| anyhow!("cannot merge histograms: {e:?}"))?;
            }
            measured.as_secs_f64()
        } else {
            let start = Instant::now();
            measure_start_ns.store(base.elapsed().as_nanos() as u64, Ordering::Release);
            phase.store(MEASURE, Ordering::Release);
            sink.emit("phase", json!({"phase": "measure", "state": "begin"}))?;
            let mut tick = start;
            loop {
                tick += cfg.interval;
                let stop_at = cfg.duration.map(|d| start + d);
                let wake = stop_at.map_or(tick, |s| s.min(tick));
                nap(wake);
                if stop_at.is_some_and(|s| Instant::now() >= s) {
                    phase.store(STOP, Ordering::Release);
                }
                let last = all_done() || phase.load(Ordering::Acquire) == STOP;
                if last {
                    // wait for the workers to finish their last call, then take everything left
                    while !all_done() {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                iv.emit(
                    start.elapsed().as_secs_f64(),
                    Some(cfg.interval.min(Duration::from_millis(250))),
                )?;
                if last {
                    break;
                }
            }
            let end_ns = last_finish_ns.load(Ordering::Acquire);
            end_ns.saturating_sub(measure_start_ns.load(Ordering::Acquire)) as f64 / 1e9
        };
        let usage1 = rusage::current();
        sink.emit(
            "phase",
            json!({"phase": "measure", "state": "end", "duration_s": duration_s}),
        )?;
        let extra = workload.measure_end(duration_s)?;
        summary(
            sink,
            &names,
            &iv.cumulative,
            &counters,
            duration_s,
            (&usage0, &usage1),
            &first_error,
            extra,
        )?;
        Ok(handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("worker thread panicked")))
            })
            .collect())
    })?;
    for r in results {
        r?;
    }
    Ok(())
}

/// The interval reports of one window: per-operation histograms handed over by the workers'
/// recorders, the cumulative ones kept for the summary, and the counters at the last report.
struct Intervals<'a> {
    sink: &'a EventSink,
    names: &'a [&'static str],
    counters: &'a [Box<Counters>],
    syncs: Vec<SyncHistogram<u64>>,
    cumulative: Vec<Histogram<u64>>,
    prev: Vec<Totals>,
}

impl Intervals<'_> {
    /// Emit what happened since the last report (after a refresh of up to `refresh`, if given).
    fn emit(&mut self, elapsed_s: f64, refresh: Option<Duration>) -> Result<()> {
        let mut ops = Map::new();
        for (i, name) in self.names.iter().enumerate() {
            let sync = &mut self.syncs[i];
            if let Some(wait) = refresh {
                sync.refresh_timeout(wait);
            }
            let now = sum(self.counters, i);
            let p = self.prev[i];
            let mut m = percentiles(sync);
            m.insert("calls".into(), json!(now.calls - p.calls));
            m.insert("ops".into(), json!(now.ops - p.ops));
            m.insert("errors".into(), json!(now.errors - p.errors));
            m.insert("retries".into(), json!(now.retries - p.retries));
            m.insert("rollbacks".into(), json!(now.rollbacks - p.rollbacks));
            self.prev[i] = now;
            self.cumulative[i]
                .add(&**sync)
                .map_err(|e| anyhow!("cannot merge histograms: {e:?}"))?;
            sync.reset();
            ops.insert(name.to_string(), Value::Object(m));
        }
        let (hwm, rss) = rusage::memory();
        self.sink.emit(
            "interval",
            json!({"phase": "measure", "elapsed_s": elapsed_s, "ops": ops,
                   "rss_bytes": rss, "vm_hwm_bytes": hwm, "usage": rusage::current()}),
        )
    }
}

#[allow(clippy::too_many_arguments)]
fn summary(
    sink: &EventSink,
    names: &[&'static str],
    cumulative: &[Histogram<u64>],
    counters: &[Box<Counters>],
    duration_s: f64,
    (usage0, usage1): (&rusage::Usage, &rusage::Usage),
    first_error: &Mutex<Option<String>>,
    workload_extra: Value,
) -> Result<()> {
    let mut ops = Map::new();
    let mut total = Totals::default();
    for (i, name) in names.iter().enumerate() {
        let t = sum(counters, i);
        total.ops += t.ops;
        total.calls += t.calls;
        total.errors += t.errors;
        total.gave_up += t.gave_up;
        total.rollbacks += t.rollbacks;
        total.retries += t.retries;
        let mut m = percentiles(&cumulative[i]);
        m.insert("calls".into(), json!(t.calls));
        m.insert("ops".into(), json!(t.ops));
        m.insert("errors".into(), json!(t.errors));
        m.insert("gave_up".into(), json!(t.gave_up));
        m.insert("retries".into(), json!(t.retries));
        m.insert("rollbacks".into(), json!(t.rollbacks));
        m.insert("hist".into(), json!(encode(&cumulative[i])?));
        ops.insert(name.to_string(), Value::Object(m));
    }
    let warm: u64 = counters
        .iter()
        .map(|c| c.warmup_ops.load(Ordering::Relaxed))
        .sum();
    // both read at the end of the measured window (fragmentation = RSS / live bytes)
    let account = crate::alloc_account::read();
    let (hwm, rss) = rusage::memory();
    sink.emit(
        "summary",
        json!({
            "duration_s": duration_s,
            "ops": ops,
            "total_ops": total.ops,
            "total_calls": total.calls,
            "total_errors": total.errors,
            "total_gave_up": total.gave_up,
            "total_retries": total.retries,
            "total_rollbacks": total.rollbacks,
            "workload": workload_extra,
            "ops_per_s": if duration_s > 0.0 { total.ops as f64 / duration_s } else { 0.0 },
            "warmup_ops": warm,
            "first_error": *first_error.lock().expect("poisoned"),
            "usage_window": usage1.since(usage0),
            "usage_total": usage1,
            "vm_hwm_bytes": hwm,
            "rss_bytes": rss,
            "alloc_account": account,
            "histogram_encoding": "hdr-v2-deflate-base64",
            "histogram_sigfig": SIGFIG,
            "latency_unit": "ns per call (one call = one batch/transaction of `batch` ops)",
        }),
    )
}
