"""A life's runs (workloads/life.py): its kinds of run (on a MariaDB server, whose
client is the phase sequencer clients/life.py, with a target that reads the cgroup's OOM-kill
counter; on an engine inside the driver, `alloclab-driver life`), and what both measure after a
run from its stored files: its memory (answers.life over samples.csv) and runs.csv's life columns.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import statistics
import time
from dataclasses import asdict, dataclass, replace

from alloclab.alloc import account as alloc_account
from alloclab.answers import life
from alloclab.catalog.metrics import Metric
from alloclab.catalog.names import ENGINES
from alloclab.clients import driver, sysbench
from alloclab.clients import life as life_client
from alloclab.core.errors import AlloclabError
from alloclab.host.backends import POOL_COLUMNS
from alloclab.host.placement import ChargeWatch, MemoryLimit
from alloclab.plan import RunSpec
from alloclab.results.store import write_json
from alloclab.run.target import OnServer
from alloclab.servers.server import pg_bindir, which
from alloclab.workloads.oltp import ServerOLTP


def embedded(engine: str) -> bool:
    """Whether a life on `engine` runs inside the driver (else on a MariaDB server)."""
    return engine in ENGINES


@dataclass(frozen=True)
class LifeParams:
    """A life's own parameters: how many cycles, its phases (their plan tables, as JSON text), an
    embedded engine's smallest value (uniform in [value_bytes_min, value_bytes]; 0: fixed), a
    server's sysbench tables, and the test of one phase's load (set per phase, "" for the life)."""

    cycles: int = 0
    phases: str = ""
    value_bytes_min: int = 0
    tables: int = 10
    table_size: int = 100_000
    test: str = ""


@dataclass(frozen=True)
class LifeColumns:
    """runs.csv's life columns, from its stored RSS timeline and phases (answers.life). RSS settled at
    the end of the last idle phase and its creep over the cycles once warm (OLS slope from cycle 2
    on, 95 % interval); the share of a cycle's burst excess (its bursts' highest peak over the
    settled RSS before them) given back by the end of the idle phase after them (over all cycles:
    MiB given back ÷ MiB of excess) and the seconds to give back half (median); RSS over the
    engine's own account at the idle ends once warm (their median) and its growth per cycle; whether
    the cgroup's OOM killer killed the server, and in which cycle; the allocator's own resident −
    live at the last idle end where it was read (its growth per cycle): the part of RSS the
    allocator holds that nobody uses."""

    life_cycles: int = 0  # cycles whose idle phase ended with a settled RSS
    settled_rss_bytes: int | None = None
    creep_mib_per_cycle: float | None = None
    creep_ci_low_mib_per_cycle: float | None = None
    creep_ci_high_mib_per_cycle: float | None = None
    given_back_share: float | None = None
    half_given_back_s: float | None = None
    # the cycles whose bursts took an excess to give back (the share's base): a burst that fits in
    # what the allocator kept from the ones before it has none, and the share rests on the others
    given_back_bursts: int | None = None
    overhead_bytes: int | None = None
    overhead_growth_mib_per_cycle: float | None = None
    oom_killed: bool = False
    oom_cycle: int | None = None
    alloc_kept_bytes: int | None = None
    alloc_kept_growth_mib_per_cycle: float | None = None
    # the kernel's charge of the life's own cgroup: its peak (page cache included), and the
    # high-water mark of what it cannot reclaim (anonymous, shared and kernel memory, sampled at 20 Hz)
    cgroup_peak_bytes: int | None = None
    unreclaimable_peak_bytes: int | None = None
    engine_peak_bytes: int | None = None  # the engine's own account at its highest reading


# a server's life's verdict metrics, read from its columns: settled RSS's slope over cycles once
# warm (a difference in MiB a cycle, equivalent within ±1: catalog.metrics.Metric.difference says
# why), the share of a burst's excess given back while idle (a difference under 5 points: none),
# RSS over the engine's own account at the idle ends once warm (their median from cycle 2 on; none
# where the account is larger: it counts what it reserved)
CREEP = Metric("creep_mib_per_cycle", "Creep (settled RSS per cycle)", "MiB/cycle", 1, False, "creep",
               "creep of settled RSS", difference=True, margin=1.0, life=True)
GIVEN_BACK = Metric("given_back_share", "Given back after a burst", "share", 1, True, "given_back",
                    "share of a burst given back", points=True, margin=0.05, life=True)
OVERHEAD = Metric("overhead_bytes", "RSS over the engine's account", "MiB", 2**20, False, "overhead",
                  "RSS over the engine's own account", life=True)
LIFE_METRICS = (CREEP, GIVEN_BACK, OVERHEAD)


def phases_of(c) -> list[dict]:
    return json.loads(c.params.phases) if c.params.phases else []


def shape_tag(c) -> str:
    """A life's shape in a cell's key and labels: its cycles, its phases' names and a digest of
    the phases whole (two lives that differ in a duration are two cells)."""
    names = "+".join(p["name"] for p in phases_of(c))
    return f"c{c.params.cycles}:{names}:{hashlib.sha256(c.params.phases.encode()).hexdigest()[:6]}"


class LifeTarget(OnServer):
    """A server kept up for a whole life, and the OOM-kill counter of its cgroup read while it
    runs: a server that dies while the counter grew was killed for memory, which ends its life
    as an outcome (the client ends where it is); any other death fails the run as before."""

    OOM_READ_S = 0.25  # between readings of the counter while the server runs

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.mem.life = True  # the allocator's own account at every phase's end (the phase gates)
        self.oom_readings: list[tuple[float, int]] = []  # (CLOCK_MONOTONIC, oom_kill)
        self.oom_error: str | None = None
        self.killed = False
        self.charge, self.charge_error = None, None
        if self.limit is None:  # a cgroup of its own all the same: the kernel's charge of the server
            try:
                self.limit = MemoryLimit(f"alloclab-{os.getpid()}-{self.spec.index}", 0)
            except AlloclabError as e:
                self.charge_error = str(e)

    def read_oom(self) -> None:
        if self.limit is None or not self.spec.server_memory_bytes:
            return
        try:
            n = life.oom_kills(self.limit.oom_counter().read_text())
        except (OSError, AlloclabError) as e:
            self.oom_error = self.oom_error or str(e)
            return
        self.oom_readings.append((time.monotonic(), n))

    def start(self) -> None:
        self.read_oom()  # before the server exists: the count its life starts from
        super().start()
        if self.limit is not None:
            self.charge = ChargeWatch(self.limit).start()

    def _oom_grew(self) -> bool:
        return bool(self.oom_readings) and self.oom_readings[-1][1] > self.oom_readings[0][1]

    def failure(self) -> str | None:
        if self.killed:
            return None
        why = super().failure()
        if why or not self.oom_readings or time.monotonic() - self.oom_readings[-1][0] >= self.OOM_READ_S:
            self.read_oom()
        if why and self._oom_grew():
            self.killed = True  # its client ends the life where it is
            return None
        return why

    def stop(self) -> str | None:
        self.read_oom()  # the last reading, before the cgroup goes
        if self.charge is not None:
            self.charge.end()
        died = super().failure() is not None
        why = super().stop()
        self.killed = self.killed or (died and self._oom_grew())  # its client saw it first
        return None if self.killed else why


CGROUP_CSV = "cgroup.csv"  # a life's unreclaimable charge over time (host.placement.ChargeWatch)


def charged(target, run_dir, t0: float) -> dict | None:
    """What the kernel charged the life's cgroup (run.json's life.cgroup; its samples in
    life/cgroup.csv), or why it was not read; None for a target without a cgroup of its own."""
    watch = getattr(target, "charge", None)
    if watch is None:
        why = getattr(target, "charge_error", None)
        return {"error": why} if why else None
    watch.write(run_dir / "life" / CGROUP_CSV, t0)
    return watch.note()


def killed_driver(target, run_dir, t0: float) -> tuple[dict, dict]:
    """An embedded life whose driver the kernel killed under its limit: its outcome (the cycle its
    events had reached) and the cgroup's charge up to then; it sent no summary to measure more on."""
    cycle = None
    try:
        with open(run_dir / "events.jsonl") as f:
            for line in f:
                ev = json.loads(line)
                if ev.get("type") == "phase" and isinstance(ev.get("life"), dict):
                    cycle = ev["life"].get("cycle", cycle)
    except (OSError, ValueError):
        pass
    note = {"server_memory_bytes": target.spec.server_memory_bytes, "oom_counter_error": target.oom_error,
            "oom": {"killed": True, "cycle": cycle, "by": "the driver (the engine inside it)"},
            "cgroup": charged(target, run_dir, t0)}
    cg = note["cgroup"] or {}
    return {"oom_killed": True, "oom_cycle": cycle, "cgroup_peak_bytes": cg.get("peak_bytes"),
            "unreclaimable_peak_bytes": cg.get("unreclaimable_peak_bytes")}, {"life": note}


class Measured:
    """What both kinds of life do after a run: measure it from what the run stored."""

    def outcome(self, target, watch, timeline, run_dir):
        """The life measured from the stored timeline and the phases its client recorded (moved to
        the samples' clock), and the OOM outcome from the cgroup's counter."""
        got = (watch.summary or {}).get("life")
        if not got and getattr(target, "driver_killed", False):  # the driver itself, killed under its limit
            return killed_driver(target, run_dir, timeline.t0)
        if not got:
            return {}, {}
        readings_oom = target.oom_readings if isinstance(target, LifeTarget) else []
        t0 = timeline.t0
        recs = [{k: v for k, v in r.items() if not k.startswith("mono_")} | {
            "t_start_s": round(r["mono_start"] - t0, 4), "t_end_s": round(r["mono_end"] - t0, 4)}
            for r in got["phases"]]
        readings = [got["engine_at_start"]] + [r["engine"] for r in got["phases"] if r.get("engine")]
        engine = [(round(e["mono_s"] - t0, 4), e["engine_bytes"]) for e in readings
                  if e.get("engine_bytes") is not None]
        # the allocator's own account at the phases' ends: read by the driver in its own process (an
        # embedded life) or by the helper in the server's (account.PhaseGates); a library that offers
        # none leaves glibc's mallinfo2, which is not its account (account.own)
        base = target.spec.allocator.base
        account = [(round(e["mono_s"] - t0, 4), a["live_bytes"], a["resident_bytes"]) for e in readings
                   for a in [alloc_account.own(e.get("allocator"), base) or {}] if a.get("live_bytes") is not None
                   and a.get("resident_bytes") is not None]
        spans = [r for r in recs if r["t_end_s"] > r["t_start_s"]]
        whole = [(r["cycle"], r["name"], r["kind"], r["t_start_s"], r["t_end_s"]) for r in spans if not r["cut"]]
        every = [(r["cycle"], r["name"], r["kind"], r["t_start_s"], r["t_end_s"]) for r in spans]
        oom_at = [(round(t - t0, 4), n) for t, n in readings_oom]
        note = {"phases": recs, "engine": [{**{k: v for k, v in e.items() if k != "mono_s"},
                                            "t_s": round(e["mono_s"] - t0, 4)} for e in readings],
                "stopped": got.get("stopped"), "server_memory_bytes": target.spec.server_memory_bytes or None,
                "oom_readings": oom_at, "oom_counter_error": getattr(target, "oom_error", None),
                "cgroup": charged(target, run_dir, t0)}
        try:
            rss = self.series(run_dir, t0, note)
            measured = life.measure(rss, whole, engine=engine or None, account=account or None)
            oom = life.oom_outcome(oom_at, every) if oom_at else None
        except AlloclabError as e:  # recorded beside the run; its row keeps no life fields
            return {}, {"life": note | {"error": str(e)}}
        cg = note["cgroup"] or {}
        return row_fields(measured, oom) | {"cgroup_peak_bytes": cg.get("peak_bytes"),
                                            "unreclaimable_peak_bytes": cg.get("unreclaimable_peak_bytes"),
                                            "engine_peak_bytes": max((b for _, b in engine), default=None)}, {
            "life": note | {"measured": measured.to_json(), "oom": asdict(oom) if oom else None}}

    def series(self, run_dir, t0: float, note: dict) -> list[tuple[float, int]]:
        """The memory the life is measured on: the process's RSS (a server's whole tree)."""
        return life.read_rss(run_dir)


class LifeKind(Measured, ServerOLTP):
    """A life on a MariaDB server: the sysbench tables as golden data, one server throughout, the
    phase sequencer as its client, and its memory measured after the run."""

    name = "server life"

    def __init__(self):
        super().__init__(native=True)
        self.client_label = "life client"

    def plan(self, spec: RunSpec, exe, srv, run_dir) -> dict:
        """Every phase of every cycle, resolved: a load's whole driver command line, its events file."""
        c = spec.cell
        out = []
        for cycle in range(1, c.params.cycles + 1):
            for i, ph in enumerate(phases_of(c)):
                ph = {**ph, "cycle": cycle}
                if "load" in ph:
                    ph["threads"] = ph.get("threads", c.threads)
                    cell = replace(c, params=replace(c.params, test=ph["load"]), threads=ph["threads"],
                                   duration_s=ph["duration_s"], ops=None)
                    ph["load_events"] = str(run_dir / "life" / f"c{cycle}-{ph['name']}.events.jsonl")
                    ph["load_argv"] = driver.argv(exe, replace(spec, cell=cell, warmup_s=0.0,
                                                               seed=spec.seed + 1000 * cycle + i),
                                                  ph["load_events"], srv=srv)
                out.append(ph)
        return {"engine": srv.target.kind, "socket": str(srv.socket), "database": sysbench.DATABASE,
                "tables": c.params.tables, "client": which("mariadb", "mysql"),
                "dump": which("mariadb-dump", "mysqldump"), "phases": out}

    def client_argv(self, spec, exe, events):
        run_dir = events.parent

        def argv(srv):
            path = run_dir / "life" / "plan.json"
            write_json(path, self.plan(spec, exe, srv, run_dir))
            return life_client.command(path, events)
        return argv

    def target(self, spec, run_dir, node, data, events):
        return LifeTarget(spec, run_dir, node.scratch, data, self.client_argv(spec, node.exe, events),
                          self.client_label)

    def row_fields(self, spec):
        return {"pattern": shape_tag(spec.cell), "batch": 1, "key_bytes": 0, "value_bytes": 0, "client": ""}


class PoolLife(LifeKind):
    """A life on PostgreSQL: the pool of sessions held throughout (clients/pglife.py) carries the
    load and the report bursts, and the life is measured on the pool's private memory (RssAnon
    summed over its backends at each sample), stored as pool.csv on the samples' clock."""

    name = "pooled life"

    def plan(self, spec: RunSpec, exe, srv, run_dir) -> dict:
        c = spec.cell
        out = [{**ph, "cycle": cycle, **({"threads": ph.get("threads", c.threads)} if "load" in ph else {})}
               for cycle in range(1, c.params.cycles + 1) for ph in phases_of(c)]
        return {"engine": "postgres", "socket_dir": str(srv.socket_dir), "database": sysbench.DATABASE,
                "tables": c.params.tables, "table_size": c.params.table_size, "pool": c.threads,
                "seed": spec.seed, "client": str(pg_bindir() / "psql"), "log": str(srv.log_path),
                "pool_samples": str(run_dir / "life" / POOL_RAW), "phases": out}

    def target(self, spec, run_dir, node, data, events):
        t = super().target(spec, run_dir, node, data, events)
        t.mem.life = False  # a forked backend has no helper thread of its own to write its account
        return t

    def series(self, run_dir, t0: float, note: dict) -> list[tuple[float, int]]:
        """pool.csv (t_s, rss_bytes = the pool's private memory, and the rest sampled) from the
        client's samples; the storms' backends and the threads, told apart in the life's note."""
        raw = run_dir / "life" / POOL_RAW
        if not raw.is_file():
            raise AlloclabError(f"{raw} does not exist: the pool was never sampled")
        with open(raw, newline="") as f:
            rows = list(csv.DictReader(f))
        with open(run_dir / POOL_CSV, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["t_s", "rss_bytes", *POOL_COLUMNS[2:], "pool_anon_bytes"])
            for r in rows:
                w.writerow([round(float(r["mono_s"]) - t0, 4), r["pool_anon_bytes"],
                            *(r[k] for k in POOL_COLUMNS[2:]), r["pool_anon_bytes"]])
        note["pool"] = pool_note(rows, note["phases"], note["engine"], t0)
        return life.read_rss(run_dir, POOL_CSV)


POOL_RAW = "pool-samples.csv"  # the life client's, on CLOCK_MONOTONIC
POOL_CSV = "pool.csv"  # the run's, on the samples' clock: what a pooled life is measured on
STORM_GONE_S = 1.0  # after a storm, when what its backends left is read


def pool_note(rows: list[dict], phases: list[dict], engine: list[dict], t0: float) -> dict:
    """What the samples tell beside the pool's memory: the threads of the postmaster and of the
    pool's busiest backend at the phases' ends, most named (jemalloc's background thread is
    `jemalloc_bg_thd`; alloclab's helper left out), the pool's backends, and per
    storm the most short backends at once, their private memory at its highest and what of it was
    left a second after the phase's end (a backend goes a few milliseconds after its client; one
    that exits returns its heap: nothing)."""
    def col(k, rs):
        return [int(r[k]) for r in rs]
    out = {"postmaster_threads": max((e.get("postmaster_threads") or [] for e in engine), key=len, default=[]),
           "backend_threads": max((e.get("backend_threads") or [] for e in engine), key=len, default=[]),
           "pool_backends_max": max(col("pool_backends", rows), default=None), "storms": []}
    for p in (p for p in phases if p.get("burst") == "storm"):
        inside = [r for r in rows if p["t_start_s"] <= float(r["mono_s"]) - t0 <= p["t_end_s"]]
        after = [r for r in rows if float(r["mono_s"]) - t0 > p["t_end_s"] + STORM_GONE_S][:1]
        out["storms"].append({"cycle": p["cycle"], "name": p["name"],
                              "backends_max": max(col("other_backends", inside), default=0),
                              "anon_max_bytes": max(col("other_anon_bytes", inside), default=0),
                              "anon_left_bytes": col("other_anon_bytes", after)[0] if after else None})
    return out


def _mib(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def row_fields(m: life.Life, oom: life.Oom | None) -> dict:
    """runs.csv's life columns (LifeColumns) from a measured life."""
    settled = [v for _, _, v in m.settled if v is not None]
    # a cycle's bursts one after another share the settled RSS before them and the idle after:
    # what the cycle gave back is the share of its highest burst's excess (a burst's own share
    # would count the growth of the bursts after it as not given back). The first cycle's bursts
    # (GivenBack.warmup) are left out: their excess over a server still filling its caches and
    # pools is mostly warm-up that no allocator gives back (in the quick studies it was half of
    # glibc's excess on RocksDB, and it pulled every share toward 0)
    highest = {}
    for g in (g for g in m.given_back if not g.warmup):
        if g.peak_bytes is not None and (g.cycle not in highest or g.peak_bytes > highest[g.cycle].peak_bytes):
            highest[g.cycle] = g
    # over the life, MiB given back over MiB of excess: a burst of 2 MiB given back whole does
    # not weigh as much as one of 40 MiB kept (a mean of per-cycle shares made them equal). Each
    # burst gives back between none and all of its excess: an idle phase that returns more (memory
    # held from before the burst) or keeps growing is creep's to tell, and counted here it let a
    # burst of 1.5 MiB "give back" 13 times its size and swing a life's share by 20 points
    shared = [g for g in highest.values() if g.share is not None]
    excess = sum(g.excess_bytes for g in shared)
    given = sum(min(1.0, max(0.0, g.share)) * g.excess_bytes for g in shared)
    halves = [g.half_s for g in highest.values() if g.half_s is not None]
    kept = next((e.alloc_kept_bytes for e in reversed(m.ends) if e.alloc_kept_bytes is not None), None)
    return {"life_cycles": len(settled), "settled_rss_bytes": int(settled[-1]) if settled else None,
            "creep_mib_per_cycle": _mib(m.creep.slope_mib_per_cycle),
            "creep_ci_low_mib_per_cycle": _mib(m.creep.ci_low_mib_per_cycle),
            "creep_ci_high_mib_per_cycle": _mib(m.creep.ci_high_mib_per_cycle),
            "given_back_share": round(given / excess, 4) if shared else None,
            "half_given_back_s": round(statistics.median(halves), 3) if halves else None,
            "given_back_bursts": len(shared) if highest else None,
            # once warm (life.Overhead says why not the last idle end's)
            "overhead_bytes": None if m.overhead.over_engine_warm_bytes is None
            else int(m.overhead.over_engine_warm_bytes),
            "overhead_growth_mib_per_cycle": _mib(m.overhead.over_engine_creep.slope_mib_per_cycle),
            "oom_killed": bool(oom and oom.killed), "oom_cycle": oom.cycle if oom and oom.killed else None,
            "alloc_kept_bytes": None if kept is None else int(kept),
            "alloc_kept_growth_mib_per_cycle": _mib(m.overhead.alloc_kept_creep.slope_mib_per_cycle)}


