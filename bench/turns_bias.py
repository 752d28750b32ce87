#!/usr/bin/env python3
"""Turns checked against runs alone (not a test), a measurement that accumulates over sessions and
machines: does measuring a cell's allocators in turns (the waiting processes stopped with SIGSTOP)
change their *ratios* against glibc?

A round measures one cell in several designs, back to back, in an order seeded per round, each
design one `alloclab run --runs 1` with the round's seed:
  alone  glibc, jemalloc, mimalloc, tcmalloc one after another (slice 0), in an order drawn per round
  t0.1   the same four in turns of 0.1 s      t0.5  ... of 0.5 s (the default study's design)
  t3     ... of 3 s
  w0.2   ... of 0.5 s, each after 0.2 s unmeasured (`--turn-warmup`; the turns above take 20 ms):
         a server stopped for the others' turns outlives an allocator's delay before it hands
         freed pages back (mimalloc 2.0's 100 ms), and starts each turn faulting them in again
  p2     glibc with each other allocator, two at a time, in turns of 0.5 s
  p13    the whole catalog (13 allocators) in turns of 0.5 s: expensive, so not in the default set
Every round is appended to a store (one JSON line per round, never rewritten), so that later
sessions, on this machine or others, add to it (--append) and the table pools them all.

THE ORDER. `alloclab run --runs 1` runs a cell's allocators in the order it is given them. Rounds
stored before 2026-11-27 09:30 gave every design the four in one fixed order, so `alone` always ran
glibc first and tcmalloc last: an allocator's ratio alone was confounded with its place in the row
(drift, or what the runs before it left behind). From then on each design's four come in an order
drawn from the round's seed, and the record says so (`order_drawn`). The ±3 % target is judged on
the rounds whose order was drawn; the fixed-order rounds are shown beside them, never dropped.

THE GATE, written down before the data: a round counts only if every run of its `alone` design
  (1) got at least 85 % of its threads' CPU over its measured window: (cpu_user_s + cpu_sys_s) /
      (min(threads, cores) x duration_s) >= 0.85, from runs.csv. For an embedded cell (TidesDB)
      cpu_*_s is the driver's getrusage(RUSAGE_SELF) over the window: the whole process (client
      threads, engine and its background threads); duration_s is that window. For a server cell
      the client's CPU (client_cpu_*_s) is added to the server's;
  (2) saw no other busy process above 0.2 cores: runs.csv `other_busy_cores`, the machine's busy
      CPU (/proc/stat, steal included) less alloclab's and its children's, over the run's wall time.
A round without an `alone` design is not gated. The rounds each machine's gate removed are counted
and printed. The gate is not an option: changing it means a new record format.

Analysis. Per round and allocator the log ratio against glibc of each design; the bias of a design
is its log ratio minus the `alone` design's in the same round (paired). Per machine, the mean bias
with its t interval; over machines, a DerSimonian-Laird random-effects pool (tau = the SD between
machines, 95 % interval mean +- 1.96 se; a machine of fewer than 3 rounds takes the pooled
within-machine variance). Slices: per round, the slope of the log ratio on log10(slice) over
t0.1, t0.5 and t3, pooled the same way (% per tenfold slice; a trend toward long slices is a
bias), and turns of 0.1 s against turns of 0.5 s, paired. Participants: p2 and p13 each against
t0.5 (4), paired. A machine is alloclab's fingerprint of it without alloclab's commit, and its
boot: a fresh VM of the same kind is another machine.

    .venv/bin/python bench/turns_bias.py [--store DIR] [--append] [--cells default,write,tpcc]
        [--designs alone,t0.1,t0.5,t3,p2[,p13]] [--rounds 10] [--seed S]
    .venv/bin/python bench/turns_bias.py --report [--store DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import fcntl
import hashlib
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
FORMAT = "alloclab-turns-bias/1"
STORE_FILE = "rounds.jsonl"
BASELINE = "glibc"
FOUR = ("glibc", "jemalloc", "mimalloc", "tcmalloc")
COMPARED = FOUR[1:]
# the gate (see the docstring): fixed before the data
GATE_MIN_CPU_SHARE = 0.85
GATE_MAX_OTHER_CORES = 0.20
GATE_TEXT = (f"a round counts only if every run of its `alone` design got ≥ {100 * GATE_MIN_CPU_SHARE:.0f} % of its "
             f"threads' CPU over its window ((cpu_user_s + cpu_sys_s) / (min(threads, cores) × duration_s)) "
             f"and saw other processes (steal included) busy on ≤ {GATE_MAX_OTHER_CORES:g} cores")
TARGET_PCT = 3.0  # the target: the pooled interval within ±3 %
SLICES = {"t0.1": 0.1, "t0.5": 0.5, "t3": 3.0}
TURN_WARMUP_S = 0.02  # each turn's unmeasured start in every design that takes turns, but...
WARMED = {"w0.2": (0.5, 0.2)}  # ... these: (slice, the turn's unmeasured start)
DESIGNS = ("alone", *SLICES, *WARMED, "p2", "p13")
DEFAULT_DESIGNS = "alone,t0.1,t0.5,t3,p2"
CELLS = {
    # the default study's cell: TidesDB memtable point reads, 2 threads, 6 s windows
    "default": ["--preset", "kv-allocators", "--scale", "quick"],
    # a writing cell: TidesDB puts (flushes and compactions run only in their own run's turns)
    "write": ["--engines", "tidesdb", "--workloads", "write", "--threads", "2", "--duration", "6s"],
    # TPC-C on InnoDB, alloclab's own client
    "tpcc": ["--engines", "mariadb-innodb", "--workloads", "tpcc", "--warehouses", "2", "--duration", "10s"],
    # memory-life's price in speed: each life's steady load alone (the preset's part `speed`), whose
    # allocators the preset measures in turns of 0.5 s between the round's lives
    **{f"life-{short}": ["--preset", "memory-life", "--scale", "quick", "--workloads", "speed", "--engines", engine]
       for short, engine in (("mariadb", "mariadb-innodb"), ("rocksdb", "rocksdb"), ("postgres", "postgres"))},
}
STUDY_TIMEOUT_S = 1800


def default_store() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "alloclab" / "turns-bias"


# --- the store: one JSON line per round, appended whole, never rewritten ---------------------------

def store_file(store: Path) -> Path:
    return Path(store) / STORE_FILE


def read_store(store: Path) -> tuple[list[dict], int]:
    """The store's rounds, and how many lines were not whole rounds of this format (a line torn by
    a crash, another format): those are left out, never repaired."""
    f = store_file(store)
    if not f.exists():
        return [], 0
    records, bad = [], 0
    for line in f.read_text().splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(rec, dict) and rec.get("format") == FORMAT:
            records.append(rec)
        else:
            bad += 1
    return records, bad


def append_record(store: Path, rec: dict) -> None:
    """One round as one whole line at the end of the store (a torn last line is closed first)."""
    f = store_file(store)
    f.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(rec, sort_keys=True, separators=(",", ":")) + "\n"
    with open(f, "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            fh.seek(0, os.SEEK_END)
            if fh.tell() > 0:
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    line = "\n" + line
            fh.write(line.encode())
            fh.flush()
            os.fsync(fh.fileno())
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def refusal(store: Path, append: bool) -> str | None:
    """Why a measurement may not start on this store, in one sentence, or None."""
    records, bad = read_store(store)
    if (records or bad) and not append:
        return (f"turns_bias: {store} already holds {len(records)} round(s); add --append to add rounds to it, "
                f"or name a new folder with --store.")
    return None


# --- measuring --------------------------------------------------------------------------------------

def _num(x, default=None):
    try:
        return float(x) if x not in (None, "") else default
    except ValueError:
        return default


def window_cpu_s(run: dict) -> float:
    """The CPU a run took over its window: the process under test's, and a server's client's
    (absent for an embedded engine, whose driver is the process under test)."""
    return (_num(run.get("cpu_user_s"), 0.0) + _num(run.get("cpu_sys_s"), 0.0)
            + _num(run.get("client_cpu_s"), 0.0))


def cpu_share(run: dict, cores: int | None) -> float | None:
    """The gate's (1): the run's CPU over its window per thread it could have used (a server's
    client shares the threads' cores)."""
    dur, threads = _num(run.get("duration_s"), 0.0), int(_num(run.get("threads"), 0) or 0)
    if dur <= 0 or threads <= 0:
        return None
    return window_cpu_s(run) / (min(threads, cores or threads) * dur)


def runs_from_csv(path: Path, metric: str, cores: int | None) -> list[dict]:
    """The measured runs of a study's runs.csv: throughput and the gate's facts, per run."""
    out = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r.get("purpose", "measure") != "measure":
                continue
            client = (None if r.get("client_cpu_user_s") in (None, "") else
                      round(_num(r.get("client_cpu_user_s"), 0.0) + _num(r.get("client_cpu_sys_s"), 0.0), 4))
            run = {"allocator": r["allocator"], "cell_key": r["cell"], "status": r["status"],
                   "reason": (r.get("reason") or "")[:200], "metric": metric,
                   "throughput": _num(r.get(metric), 0.0), "duration_s": _num(r.get("duration_s"), 0.0),
                   "threads": int(_num(r.get("threads"), 0) or 0), "cpu_user_s": _num(r.get("cpu_user_s"), 0.0),
                   "cpu_sys_s": _num(r.get("cpu_sys_s"), 0.0), "client_cpu_s": client,
                   "other_busy_cores": _num(r.get("other_busy_cores"), 0.0), "wall_s": _num(r.get("wall_s"), 0.0),
                   "started_at": r.get("started_at", ""), "machine_fingerprint": r.get("machine_fingerprint", ""),
                   # in turns: how much the host's drift between its turns moved it (answers.drift);
                   # absent before
                   "drift_factor": _num(r.get("drift_factor"), 0.0) or None}
            share = cpu_share(run, cores)
            run["cpu_share"] = None if share is None else round(share, 4)
            out.append(run)
    return out


def _git(*args: str) -> str | None:
    try:
        p = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=10)
        return p.stdout.strip() if p.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def machine_block(described: dict) -> dict:
    """The machine of a round: alloclab's fingerprint and words (host.machine), and the key rounds
    pool under: that fingerprint without alloclab's commit, and the boot."""
    sys.path.insert(0, str(ROOT / "src"))
    from alloclab.host import machine  # noqa: E402  (only where a round is measured)
    boot = _boot_id()
    kind = machine.fingerprint({**described, "alloclab_commit": None})
    return {"key": hashlib.sha256(f"{kind}/{boot}".encode()).hexdigest()[:12], "fingerprint":
            machine.fingerprint(described), "kind": kind, "words": machine.in_words(described),
            "boot_id": boot, "hostname": described.get("hostname"), "cores": described.get("cores"),
            **{k: described.get(k) for k in ("cpu_model", "kernel", "os", "memory_bytes", "label") if k in described}}


def one_study(cell: str, allocators: Iterable[str], slice_s: float, seed: int, cores: int | None,
              warm_s: float = TURN_WARMUP_S) -> tuple[dict, dict]:
    """One design's study (one `alloclab run --runs 1`): its runs, and the machine it described."""
    allocators = list(allocators)
    tmp = Path(tempfile.mkdtemp(prefix="alloclab-turns-"))
    out = tmp / "res"
    t0 = time.monotonic()
    study = {"allocators": allocators, "slice_s": slice_s, "turn_warmup_s": warm_s if slice_s else None, "rc": None,
             "error": None, "runs": []}
    described: dict = {}
    try:
        cmd = [str(ROOT / ".venv" / "bin" / "alloclab"), "run", *CELLS[cell], "--runs", "1", "--seed", str(seed),
               "--allocators", ",".join(allocators), "--slice", f"{slice_s:g}s",
               *(["--turn-warmup", f"{1000 * warm_s:g}ms"] if slice_s else []), "--out", str(out), "--quiet"]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=STUDY_TIMEOUT_S)
            study["rc"] = p.returncode
            if p.returncode not in (0, 1):
                study["error"] = (p.stderr or p.stdout)[-600:]
        except subprocess.TimeoutExpired:
            study["error"] = f"ran past {STUDY_TIMEOUT_S} s"
        with contextlib.suppress(OSError, ValueError):
            described = json.loads((out / "machine.json").read_text())
        if (out / "runs.csv").exists():
            study["runs"] = runs_from_csv(out / "runs.csv", "nopm" if cell == "tpcc" else "ops_per_s",
                                          described.get("cores") or cores)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    study["seconds"] = round(time.monotonic() - t0, 1)
    return study, described


def design_studies(design: str, rng: random.Random) -> list[tuple[list[str], float, float]]:
    """A design's studies: (allocators, slice, each turn's unmeasured start) each."""
    def drawn(names) -> list[str]:  # the order the runs go in, or take turns in: drawn per round and design
        names = list(names)
        rng.shuffle(names)
        return names
    if design == "alone":
        return [(drawn(FOUR), 0.0, TURN_WARMUP_S)]
    if design in SLICES:
        return [(drawn(FOUR), SLICES[design], TURN_WARMUP_S)]
    if design in WARMED:
        return [(drawn(FOUR), *WARMED[design])]
    if design == "p2":
        return [(drawn([BASELINE, x]), 0.5, TURN_WARMUP_S) for x in drawn(COMPARED)]
    if design == "p13":
        sys.path.insert(0, str(ROOT / "src"))
        from alloclab.catalog.allocators import SHOOTOUT  # noqa: E402
        return [(drawn(SHOOTOUT), 0.5, TURN_WARMUP_S)]
    raise ValueError(design)


def measure_round(cell: str, designs: list[str], seed: int) -> dict:
    """One round: every design of `designs` on `cell`, in an order seeded by the round's seed."""
    rng = random.Random(seed)
    order = list(designs)
    rng.shuffle(order)
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    results: dict[str, list[dict]] = {}
    described: dict = {}
    for d in order:
        results[d] = []
        for allocators, slice_s, warm_s in design_studies(d, rng):
            study, desc = one_study(cell, allocators, slice_s, seed, described.get("cores"), warm_s=warm_s)
            described = described or desc
            results[d].append(study)
            if study["error"]:
                print(f"# {cell} {d} {','.join(allocators)}: {study['error'].strip().splitlines()[-1:]}",
                      file=sys.stderr, flush=True)
    if not described:  # no study got as far as describing the machine
        sys.path.insert(0, str(ROOT / "src"))
        from alloclab.host import machine  # noqa: E402
        described = machine.describe(Path(tempfile.gettempdir()), None)
    return {"format": FORMAT, "round": uuid.uuid4().hex[:12], "seed": seed, "cell": cell, "cell_args": CELLS[cell],
            "designs": list(designs), "order": order, "order_drawn": True, "results": results,
            "machine": machine_block(described),
            "alloclab": {"commit": _git("rev-parse", "HEAD"),
                         "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
                         "version": described.get("alloclab_version")},
            "gate_when_stored": {"min_cpu_share": GATE_MIN_CPU_SHARE, "max_other_busy_cores": GATE_MAX_OTHER_CORES},
            "started_at": started,
            "ended_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


# --- analysis (on stored records alone) ------------------------------------------------------------

def per_cpu(run: dict) -> float | None:
    """Operations per CPU-second over the run's window: its throughput × window over the CPU it
    took there (the server's and its client's; an embedded engine: the driver's whole process)."""
    cpu, dur = window_cpu_s(run), _num(run.get("duration_s"), 0.0)
    return run["throughput"] * dur / cpu if cpu > 0 and dur > 0 and (run.get("throughput") or 0) > 0 else None


READINGS = {"throughput": lambda r: r.get("throughput") or None, "per_cpu": per_cpu}


def log_ratios(rec: dict, design: str, reading: str = "throughput") -> dict[str, float]:
    """Per allocator, the log of its throughput (or another of READINGS) over glibc's in the same
    study of the design; where an allocator had several runs in it (a cell's runs_per_round: two
    MariaDB servers of each in memory-life quick), the mean of their logs."""
    out = {}
    read = READINGS[reading]
    for study in rec.get("results", {}).get(design, []):
        logs: dict[str, list[float]] = {}
        for r in study.get("runs", []):
            v = read(r) if r.get("status") == "ok" else None
            if v and v > 0:
                logs.setdefault(r["allocator"], []).append(math.log(v))
        if BASELINE not in logs:
            continue
        base = sum(logs[BASELINE]) / len(logs[BASELINE])
        for x, v in logs.items():
            if x != BASELINE:
                out[x] = sum(v) / len(v) - base
    return out


def gate(rec: dict) -> list[str]:
    """Why the gate removes this round (empty: it counts)."""
    cores = (rec.get("machine") or {}).get("cores")
    why = []
    for study in rec.get("results", {}).get("alone", []):
        for r in study.get("runs", []):
            if r.get("status") != "ok":
                continue
            share = cpu_share(r, cores)
            if share is not None and share < GATE_MIN_CPU_SHARE:
                why.append(f"starved: {r['allocator']} got {100 * share:.0f} % of its threads' CPU")
            if (r.get("other_busy_cores") or 0.0) > GATE_MAX_OTHER_CORES:
                why.append(f"busy host: {r['other_busy_cores']:.2f} other cores during {r['allocator']}")
    return why


def order_drawn(rec: dict) -> bool:
    """Whether the round's designs ran the allocators in an order drawn per round (THE ORDER)."""
    return bool(rec.get("order_drawn"))


def machine_key(rec: dict) -> str:
    return (rec.get("machine") or {}).get("key") or "unknown"


@dataclass
class Estimate:
    mean: float  # on the log scale
    lo: float
    hi: float
    n: int  # rounds
    k: int  # machines
    tau: float | None  # between machines, log scale; None: not estimable (one machine)

    @property
    def half_pct(self) -> float:
        return max(pct(self.hi) - pct(self.mean), pct(self.mean) - pct(self.lo))


def pct(v: float) -> float:
    return 100 * (math.exp(v) - 1)


def _var(v: list[float]) -> float:
    m = sum(v) / len(v)
    return sum((y - m) ** 2 for y in v) / (len(v) - 1)


def t_interval(values: list[float]) -> Estimate | None:
    n = len(values)
    if n == 0:
        return None
    m = sum(values) / n
    if n < 2:
        return Estimate(m, math.nan, math.nan, n, 1, None)
    half = stats.t.ppf(0.975, n - 1) * math.sqrt(_var(values) / n)
    return Estimate(m, m - half, m + half, n, 1, None)


def dersimonian_laird(ys: list[float], vs: list[float]) -> tuple[float, float, float]:
    """Random-effects pool of estimates `ys` with within variances `vs`: mean, its se, tau²."""
    w = [1 / v for v in vs]
    sw = sum(w)
    fixed = sum(wi * y for wi, y in zip(w, ys)) / sw
    q = sum(wi * (y - fixed) ** 2 for wi, y in zip(w, ys))
    c = sw - sum(wi * wi for wi in w) / sw
    tau2 = max(0.0, (q - (len(ys) - 1)) / c) if c > 0 else 0.0
    ws = [1 / (v + tau2) for v in vs]
    mean = sum(wi * y for wi, y in zip(ws, ys)) / sum(ws)
    return mean, math.sqrt(1 / sum(ws)), tau2


def within_var(by_machine: dict[str, list[float]]) -> float | None:
    """The variance within machines, pooled over those of two values or more (None: no such)."""
    within = [(len(v) - 1, _var(v)) for v in by_machine.values() if len(v) >= 2]
    df = sum(d for d, _ in within)
    return sum(d * s2 for d, s2 in within) / df if df else None


def pool(by_machine: dict[str, list[float]]) -> Estimate | None:
    """Per machine first, then over machines (DerSimonian-Laird); one machine: its t interval."""
    groups = {m: v for m, v in by_machine.items() if v}
    n = sum(len(v) for v in groups.values())
    if not groups:
        return None
    if len(groups) == 1:
        return t_interval(next(iter(groups.values())))
    within = within_var(groups)
    if within is None:  # one round per machine: t over all of them
        e = t_interval([y for v in groups.values() for y in v])
        return Estimate(e.mean, e.lo, e.hi, n, len(groups), None)
    pooled_var = max(within, 1e-12)
    ys, vs = [], []
    for v in groups.values():
        ys.append(sum(v) / len(v))
        vs.append(max(_var(v) if len(v) >= 3 else pooled_var, 1e-12) / len(v))
    mean, se, tau2 = dersimonian_laird(ys, vs)
    z = stats.norm.ppf(0.975)
    return Estimate(mean, mean - z * se, mean + z * se, n, len(groups), math.sqrt(tau2))


def paired(records: list[dict], design: str, ref: str, reading: str = "throughput",
           ref_reading: str = "throughput") -> dict[tuple[str, str], dict[str, list[float]]]:
    """(cell, allocator) -> machine -> the round's log ratio in `design` minus in `ref` (each in its
    reading: throughput, or ops per CPU-second)."""
    out: dict[tuple[str, str], dict[str, list[float]]] = {}
    for rec in records:
        a, b = log_ratios(rec, design, reading), log_ratios(rec, ref, ref_reading)
        for x in COMPARED:
            if x in a and x in b:
                out.setdefault((rec["cell"], x), {}).setdefault(machine_key(rec), []).append(a[x] - b[x])
    return out


def slice_slopes(records: list[dict]) -> dict[tuple[str, str], dict[str, list[float]]]:
    """(cell, allocator) -> machine -> the round's slope of the log ratio on log10(slice)."""
    out: dict[tuple[str, str], dict[str, list[float]]] = {}
    for rec in records:
        per = {d: log_ratios(rec, d) for d in SLICES}
        for x in COMPARED:
            pts = [(math.log10(s), per[d][x]) for d, s in SLICES.items() if x in per[d]]
            if len(pts) < 2:
                continue
            mx, my = sum(p[0] for p in pts) / len(pts), sum(p[1] for p in pts) / len(pts)
            b = sum((px - mx) * (py - my) for px, py in pts) / sum((px - mx) ** 2 for px, _ in pts)
            out.setdefault((rec["cell"], x), {}).setdefault(machine_key(rec), []).append(b)
    return out


def fmt(e: Estimate | None, with_n: bool = False) -> str:
    """'+1.2 [−0.8, +3.1] ✓': ✓ the interval is within ±3 % of its mean; ‼ all of it beyond ±3 %."""
    if e is None:
        return "–"
    s = f"{pct(e.mean):+.1f}"
    if not math.isnan(e.lo):
        s += f" [{pct(e.lo):+.1f}, {pct(e.hi):+.1f}]"
        if e.half_pct <= TARGET_PCT:
            s += " ✓"
        if pct(e.lo) > TARGET_PCT or pct(e.hi) < -TARGET_PCT:
            s += " ‼"
    return (s + f" ({e.n})" if with_n else s).replace("-", "−")


def report(records: list[dict], bad_lines: int = 0) -> str:
    """The pooled tables, in Markdown, from stored rounds alone."""
    if not records:
        return "No rounds stored yet."
    removed = {rec["round"]: gate(rec) for rec in records}
    kept = [rec for rec in records if not removed[rec["round"]]]
    machines: dict[str, dict] = {}
    for rec in records:
        m = machines.setdefault(machine_key(rec), {"words": (rec.get("machine") or {}).get("words", "?"),
                                                   "rounds": 0, "removed": 0, "starved": 0, "busy": 0})
        if not order_drawn(rec):  # the per-machine table is of rounds in a drawn order
            continue
        m["rounds"] += 1
        why = removed[rec["round"]]
        if why:
            m["removed"] += 1
            m["starved"] += any(w.startswith("starved") for w in why)
            m["busy"] += any(w.startswith("busy") for w in why)
    cells = sorted({rec["cell"] for rec in records}, key=lambda c: (list(CELLS).index(c) if c in CELLS else 99, c))
    removed_per_cell = Counter((rec["cell"], order_drawn(rec)) for rec in records if removed[rec["round"]])
    commits = {(rec.get("alloclab") or {}).get("commit") for rec in records}
    n_drawn = sum(1 for rec in kept if order_drawn(rec))
    lines = [f"**Turns against runs alone**: {len(records)} round(s) stored, {len(kept)} counted "
             f"({n_drawn} of them in a drawn order), on "
             f"{len(machines)} machine(s), {len(commits)} alloclab commit(s)"
             + (f"; {bad_lines} line(s) of the store were not whole rounds and were left out" if bad_lines else "")
             + ".", "",
             f"Gate (fixed before the data): {GATE_TEXT}.", "",
             "Turns vs alone: the bias of the log ratio vs glibc in turns of 0.5 s among 4 (the default "
             "study's design) against runs one after another in the same round, pooled over machines "
             "(DerSimonian–Laird; τ = SD between machines). ✓ measured to ±3 % (the issue's target); "
             "‼ all of the interval beyond ±3 %.", "",
             "The target is judged on rounds whose allocators ran in an order drawn per round; before "
             "2026-11-27 09:30 `alone` always ran glibc first and tcmalloc last (the order column).", "",
             "| cell | allocator | order | turns vs alone % [95 % CI] | n rounds | machines | τ | gate removed |",
             "|---|---|---|---|---|---|---|---|"]
    drawn = [rec for rec in kept if order_drawn(rec)]
    t05 = paired(drawn, "t0.5", "alone")
    fixed = paired([rec for rec in kept if not order_drawn(rec)], "t0.5", "alone")
    for c in cells:
        for x in COMPARED:
            for words, d, gated in (("drawn", t05, removed_per_cell[(c, True)]),
                                    ("fixed (old)", fixed, removed_per_cell[(c, False)])):
                e = pool(d.get((c, x), {}))
                if e is None and words != "drawn" and not gated:
                    continue
                tau = "–" if e is None or e.tau is None else f"{100 * e.tau:.1f} %"
                lines.append(f"| {c} | {x} | {words} | {fmt(e) if words == 'drawn' else fmt(e).replace(' ✓', '')} | "
                             f"{e.n if e else 0} | {e.k if e else 0} | {tau} | {gated} |")
    lines += ["", "Slices and participants, % [95 % CI] (rounds): each design's bias against runs alone, the "
              "slope of the log ratio on the slice (% per tenfold slice: 0.1 → 1 s), turns of 0.1 s against "
              "turns of 0.5 s, and 2 or 13 taking turns against 4 in turns of 0.5 s (paired in the round). "
              "Against runs alone: rounds in a drawn order only; the slope, t0.1 vs t0.5 and the participants "
              "(turns against turns): every counted round.", "",
              "| cell | allocator | t0.1 vs alone | t3 vs alone | slope per ×10 slice | t0.1 vs t0.5 | p2 vs t0.5 "
              "| p13 vs t0.5 |",
              "|---|---|---|---|---|---|---|---|"]
    t01, t3 = paired(drawn, "t0.1", "alone"), paired(drawn, "t3", "alone")
    slopes = slice_slopes(kept)
    t01_t05 = paired(kept, "t0.1", "t0.5")
    p2, p13 = paired(kept, "p2", "t0.5"), paired(kept, "p13", "t0.5")
    for c in cells:
        for x in COMPARED:
            row = [pool(d.get((c, x), {})) for d in (t01, t3, slopes, t01_t05, p2, p13)]
            lines.append(f"| {c} | {x} | " + " | ".join(fmt(e, with_n=True) for e in row) + " |")
    lines += warmed_table(drawn, kept, cells)
    lines += per_cpu_table(drawn, kept, cells)
    lines += ["", "Per machine (turns of 0.5 s vs alone, mean [t interval] (rounds), rounds in a drawn order):", "",
              "| machine | rounds (drawn) | gate removed | "
              + " | ".join(f"{c}: {x}" for c in cells for x in COMPARED) + " |",
              "|---|---|---|" + "---|" * (len(cells) * len(COMPARED))]
    for key, m in machines.items():
        cols = [fmt(t_interval(t05.get((c, x), {}).get(key, [])), with_n=True) for c in cells for x in COMPARED]
        why = ", ".join(f"{n} {w}" for n, w in ((m["starved"], "starved"), (m["busy"], "busy")) if n)
        lines.append(f"| {m['words']} ({key}) | {m['rounds']} | {m['removed']}" + (f" ({why})" if why else "")
                     + " | " + " | ".join(cols) + " |")
    return "\n".join(lines)


def spread(records: list[dict], design: str, reading: str) -> dict[tuple[str, str], float]:
    """(cell, allocator) -> the SD over rounds of the log ratio, pooled within machines."""
    groups: dict[tuple[str, str], dict[str, list[float]]] = {}
    for rec in records:
        for x, v in log_ratios(rec, design, reading).items():
            if x in COMPARED:
                groups.setdefault((rec["cell"], x), {}).setdefault(machine_key(rec), []).append(v)
    return {key: math.sqrt(v) for key, by in groups.items() if (v := within_var(by)) is not None}


def warmed_table(drawn: list[dict], kept: list[dict], cells: list[str]) -> list[str]:
    """Turns whose start is longer unmeasured (WARMED) against runs alone and against turns of 0.5 s
    after 20 ms, with the spread of each over rounds; only for cells that measured them."""
    lines = []
    for w in WARMED:
        mine = measured(cells, kept, w)
        if not mine:
            continue
        slice_s, warm_s = WARMED[w]
        vs_alone, vs_t05 = paired(drawn, w, "alone"), paired(kept, w, "t0.5")
        sd_w, sd_t05 = spread(kept, w, "throughput"), spread(kept, "t0.5", "throughput")
        lines += ["", f"Turns of {slice_s:g} s each after {1000 * warm_s:g} ms unmeasured ({w}), % [95 % CI] "
                  "(rounds): against runs alone (drawn order) and against turns of 0.5 s after 20 ms (t0.5), "
                  "paired in the round; the SD over rounds of the log ratio vs glibc, in each (within machines).",
                  "", f"| cell | allocator | {w} vs alone | {w} vs t0.5 | SD {w} | SD t0.5 |",
                  "|---|---|---|---|---|---|"]
        lines += pooled_and_spread_rows(mine, (vs_alone, vs_t05), (sd_w, sd_t05))
    return lines


def measured(cells: list[str], kept: list[dict], design: str) -> list[str]:
    """The cells of `cells` with a counted round that measured `design`."""
    return [c for c in cells if any(rec["cell"] == c and design in rec.get("results", {}) for rec in kept)]


def pooled_and_spread_rows(cells: list[str], biases: tuple[dict, dict], sds: tuple[dict, dict]) -> list[str]:
    """A table row per (cell, allocator): two pooled paired differences, then two spreads."""
    lines = []
    for c in cells:
        for x in COMPARED:
            a, b = (pool(d.get((c, x), {})) for d in biases)
            sd = [f"{100 * d[(c, x)]:.1f} %" if (c, x) in d else "–" for d in sds]
            lines.append(f"| {c} | {x} | {fmt(a, with_n=True)} | {fmt(b, with_n=True)} | {sd[0]} | {sd[1]} |")
    return lines


def per_cpu_table(drawn: list[dict], kept: list[dict], cells: list[str]) -> list[str]:
    """Ops per CPU-second as the reading of a cell's speed: its bias against throughput of runs
    alone (what a verdict on it would have to match) and its spread beside throughput's."""
    cells = measured(cells, kept, "t0.5")
    if not cells:
        return []
    in_turns = paired(drawn, "t0.5", "alone", "per_cpu", "throughput")
    alone = paired(drawn, "alone", "alone", "per_cpu", "throughput")
    sd_tp, sd_cpu = spread(kept, "t0.5", "throughput"), spread(kept, "t0.5", "per_cpu")
    lines = ["", "Ops per CPU-second (throughput × window ÷ the CPU of the process under test and its client over "
             "it) as the reading of speed, % [95 % CI] (rounds): in turns of 0.5 s against throughput of runs "
             "alone, and alone against throughput alone (paired in the round, drawn order); beside them the SD "
             "over rounds of the log ratio vs glibc in turns of 0.5 s, throughput's and this reading's (within "
             "machines, every counted round).", "",
             "| cell | allocator | per CPU-s in turns vs throughput alone | per CPU-s alone vs throughput alone "
             "| SD throughput | SD per CPU-s |", "|---|---|---|---|---|---|"]
    return lines + pooled_and_spread_rows(cells, (in_turns, alone), (sd_tp, sd_cpu))


# --- the command --------------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, default=default_store(),
                    help=f"folder of the stored rounds ({STORE_FILE}); default {default_store()}")
    ap.add_argument("--append", action="store_true", help="add rounds to a store that already holds some")
    ap.add_argument("--report", action="store_true", help="print the pooled tables from the store, measure nothing")
    ap.add_argument("--cells", default="default", help=f"of {', '.join(CELLS)} (default: default)")
    ap.add_argument("--designs", default=DEFAULT_DESIGNS,
                    help=f"of {', '.join(DESIGNS)} (default {DEFAULT_DESIGNS}; p13 takes the whole catalog)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--seed", type=int, help="the first round's seed (default: a fresh one); round r uses seed + r")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    if a.report:
        records, bad = read_store(a.store)
        if not records:
            print(f"turns_bias: {store_file(a.store)} holds no rounds; measure some first (without --report).",
                  file=sys.stderr)
            return 2
        print(report(records, bad))
        return 0
    cells, designs = a.cells.split(","), a.designs.split(",")
    wrong = [c for c in cells if c not in CELLS] + [d for d in designs if d not in DESIGNS]
    if wrong or a.rounds < 1:
        print(f"turns_bias: {', '.join(wrong) or '--rounds'} is not one of the cells ({', '.join(CELLS)}), designs "
              f"({', '.join(DESIGNS)}) or a positive number of rounds.", file=sys.stderr)
        return 2
    why = refusal(a.store, a.append)
    if why:
        print(why, file=sys.stderr)
        return 2
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1, 2**31)
    print(f"# storing into {store_file(a.store)}; seeds {seed}..{seed + a.rounds - 1}; {GATE_TEXT}",
          file=sys.stderr, flush=True)
    for r in range(a.rounds):
        for cell in cells:
            rec = measure_round(cell, designs, seed + r)
            append_record(a.store, rec)
            said = "; ".join(f"{d} " + ", ".join(f"{x} {math.exp(v):.3f}" for x, v in sorted(log_ratios(rec, d).items())
                                                  if x in COMPARED) for d in rec["order"])
            gated = gate(rec)
            print(f"# {cell} round {r + 1}/{a.rounds} (seed {seed + r}): {said}"
                  + (f" [gate removes it: {'; '.join(gated)}]" if gated else ""), file=sys.stderr, flush=True)
    records, bad = read_store(a.store)
    print(report(records, bad))
    return 0


if __name__ == "__main__":
    sys.exit(main())
