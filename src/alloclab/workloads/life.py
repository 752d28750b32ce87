"""A server's life (issue 36): one server up through cycles of phases (a steady load, bursts that
allocate and free differently, idle), and what its memory did over them: RSS settled at each idle
end and its creep over the cycles, the share of each burst given back, RSS over the engine's own
account, and whether the cgroup's OOM killer killed it, and when.

Its plan keys (`cycles`, `phases`), cells and labels; its kind of run (the sysbench tables as
golden data, as sysbench's OLTP; one server for the whole life, whose client is the phase
sequencer clients/life.py); its target, which reads the cgroup's OOM counter so that a server
the kernel killed for memory is an outcome, not a failure; and its row fields, computed after the
run by answers.life from the stored timeline (samples.csv) and the phases the client recorded.
MariaDB (InnoDB and the other engines of a MariaDB server) so far; RocksDB's embedded life and
PostgreSQL's are to come (a kind and a client of their own, the same measurement).
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
import time
from dataclasses import asdict, replace

from alloclab.answers import life
from alloclab.catalog import targets
from alloclab.catalog.names import ENGINES, LIFE, LIFE_BURSTS, LIFE_PHASE_KINDS, SYSBENCH_TESTS
from alloclab.clients import driver, sysbench
from alloclab.clients import life as life_client
from alloclab.core.errors import AlloclabError
from alloclab.plan import RunSpec
from alloclab.plan.schema import MAX_THREADS, check_table, choice, seconds, text, whole
from alloclab.plan.workload import Workload, extra_settings, profile_suffix
from alloclab.results.store import write_json
from alloclab.run.target import OnServer
from alloclab.servers.server import which
from alloclab.workloads.oltp import ServerOLTP

# The MariaDB life (measured by hand on this machine kind): 5 cycles of 25 s of sysbench's
# read/write at 64 connections, a mariadb-dump to nowhere while the load goes on, 150 connections
# at once each grouping and sorting a table, then 15 s idle; 4 tables of 20,000 rows and a
# 128 MiB buffer pool (server profile "life").
CYCLES = 5
PHASES = (
    {"name": "oltp", "kind": "steady", "duration_s": 25.0, "load": "oltp_read_write"},
    {"name": "dump", "kind": "burst", "burst": "dump", "load": "oltp_read_write", "duration_s": 5.0},
    {"name": "storm", "kind": "burst", "burst": "storm", "connections": 150},
    {"name": "rest", "kind": "idle", "duration_s": 15.0},
)
DATA = {"tables": 4, "table_size": 20_000, "threads": [64]}


def phases_of(c) -> list[dict]:
    return json.loads(c.phases) if c.phases else []


def shape_tag(c) -> str:
    """A life's shape in a cell's key and labels: its cycles, its phases' names and a digest of
    the phases whole (two lives that differ in a duration are two cells)."""
    names = "+".join(p["name"] for p in phases_of(c))
    return f"c{c.cycles}:{names}:{hashlib.sha256(c.phases.encode()).hexdigest()[:6]}"


class LifeTarget(OnServer):
    """A server kept up for a whole life, and the OOM-kill counter of its cgroup read while it
    runs: a server that dies while the counter grew was killed for memory, which ends its life
    as an outcome (the client ends where it is); any other death fails the run as before."""

    OOM_READ_S = 0.25  # between readings of the counter while the server runs

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.oom_readings: list[tuple[float, int]] = []  # (CLOCK_MONOTONIC, oom_kill)
        self.oom_error: str | None = None
        self.killed = False

    def read_oom(self) -> None:
        if self.limit is None:
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
        died = super().failure() is not None
        why = super().stop()
        self.killed = self.killed or (died and self._oom_grew())  # its client saw it first
        return None if self.killed else why


class LifeKind(ServerOLTP):
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
        for cycle in range(1, c.cycles + 1):
            for i, ph in enumerate(phases_of(c)):
                ph = {**ph, "cycle": cycle}
                if "load" in ph:
                    ph["threads"] = ph.get("threads", c.threads)
                    cell = replace(c, test=ph["load"], threads=ph["threads"], duration_s=ph["duration_s"], ops=None)
                    ph["load_events"] = str(run_dir / "life" / f"c{cycle}-{ph['name']}.events.jsonl")
                    ph["load_argv"] = driver.argv(exe, replace(spec, cell=cell, warmup_s=0.0,
                                                               seed=spec.seed + 1000 * cycle + i),
                                                  ph["load_events"], srv=srv)
                out.append(ph)
        return {"engine": srv.target.kind, "socket": str(srv.socket), "database": sysbench.DATABASE,
                "tables": c.tables, "client": which("mariadb", "mysql"), "dump": which("mariadb-dump", "mysqldump"),
                "phases": out}

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

    def outcome(self, target, watch, timeline, run_dir):
        """The life measured from the stored timeline and the phases its client recorded (moved to
        the samples' clock), and the OOM outcome from the cgroup's counter."""
        got = (watch.summary or {}).get("life")
        if not got or not isinstance(target, LifeTarget):
            return {}, {}
        t0 = timeline.t0
        recs = [{k: v for k, v in r.items() if not k.startswith("mono_")} | {
            "t_start_s": round(r["mono_start"] - t0, 4), "t_end_s": round(r["mono_end"] - t0, 4)}
            for r in got["phases"]]
        readings = [got["engine_at_start"]] + [r["engine"] for r in got["phases"] if r.get("engine")]
        engine = [(round(e["mono_s"] - t0, 4), e["engine_bytes"]) for e in readings]
        spans = [r for r in recs if r["t_end_s"] > r["t_start_s"]]
        whole = [(r["cycle"], r["name"], r["kind"], r["t_start_s"], r["t_end_s"]) for r in spans if not r["cut"]]
        every = [(r["cycle"], r["name"], r["kind"], r["t_start_s"], r["t_end_s"]) for r in spans]
        oom_at = [(round(t - t0, 4), n) for t, n in target.oom_readings]
        note = {"phases": recs, "engine": [{**{k: v for k, v in e.items() if k != "mono_s"},
                                            "t_s": round(e["mono_s"] - t0, 4)} for e in readings],
                "stopped": got.get("stopped"), "server_memory_bytes": target.spec.server_memory_bytes or None,
                "oom_readings": oom_at, "oom_counter_error": target.oom_error}
        try:
            measured = life.measure(life.read_rss(run_dir), whole, engine=engine)
            oom = life.oom_outcome(oom_at, every) if oom_at else None
        except AlloclabError as e:  # recorded beside the run; its row keeps no life fields
            return {}, {"life": note | {"error": str(e)}}
        return row_fields(measured, oom), {"life": note | {"measured": measured.to_json(),
                                                           "oom": asdict(oom) if oom else None}}


def _mib(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def row_fields(m: life.Life, oom: life.Oom | None) -> dict:
    """runs.csv's life columns (results.store.RunRow) from a measured life."""
    settled = [v for _, _, v in m.settled if v is not None]
    # a cycle's bursts one after another share the settled RSS before them and the idle after:
    # what the cycle gave back is the share of its highest burst's excess (a burst's own share
    # would count the growth of the bursts after it as not given back)
    highest = {}
    for g in m.given_back:
        if g.peak_bytes is not None and (g.cycle not in highest or g.peak_bytes > highest[g.cycle].peak_bytes):
            highest[g.cycle] = g
    shares = [g.share for g in highest.values() if g.share is not None]
    halves = [g.half_s for g in highest.values() if g.half_s is not None]
    last = next((e for e in reversed(m.ends) if e.over_engine_bytes is not None), None)
    return {"life_cycles": len(settled), "settled_rss_bytes": int(settled[-1]) if settled else None,
            "creep_mib_per_cycle": _mib(m.creep.slope_mib_per_cycle),
            "creep_ci_low_mib_per_cycle": _mib(m.creep.ci_low_mib_per_cycle),
            "creep_ci_high_mib_per_cycle": _mib(m.creep.ci_high_mib_per_cycle),
            "given_back_share": round(statistics.fmean(shares), 4) if shares else None,
            "half_given_back_s": round(statistics.median(halves), 3) if halves else None,
            "overhead_bytes": int(last.over_engine_bytes) if last else None,
            "overhead_growth_mib_per_cycle": _mib(m.overhead.over_engine_creep.slope_mib_per_cycle),
            "oom_killed": bool(oom and oom.killed), "oom_cycle": oom.cycle if oom and oom.killed else None}


def _fmt(x: float | None, fmt: str, unit: str = "") -> str:
    return "–" if x is None else format(x, fmt) + unit


# one phase of a life: how long, of which kind, and what runs in it
PHASE_SCHEMA = {
    "name": text,
    "kind": choice(LIFE_PHASE_KINDS),
    "duration_s": seconds(0.0, strict=True),
    "load": choice(SYSBENCH_TESTS),  # the driver's native sysbench test that runs through the phase
    "threads": whole(1, MAX_THREADS),  # the load's connections (default: the table's threads)
    "burst": choice(LIFE_BURSTS),
    "connections": whole(1, 100_000),  # storm: short connections, all at once
}


def _check_phase(where: str, p: dict) -> None:
    """What a phase of each kind runs: steady a load for its duration; a burst its burst (with a
    load beside it for duration_s, if it names one); idle nothing for its duration."""
    kind = p["kind"]
    if kind == "steady" and "load" not in p:
        raise AlloclabError(f"{where}.load: a steady phase needs a load",
                            "allowed values: " + ", ".join(SYSBENCH_TESTS))
    if kind == "burst" and "burst" not in p:
        raise AlloclabError(f"{where}.burst: a burst phase needs a burst", "allowed values: " + ", ".join(LIFE_BURSTS))
    if kind != "burst" and "burst" in p:
        raise AlloclabError(f"{where}.burst: only a burst phase has a burst", "give it kind = \"burst\"")
    if kind == "idle" and {"load", "threads"} & set(p):
        raise AlloclabError(f"{where}.load: an idle phase runs nothing", "leave out load and threads")
    if "duration_s" not in p and (kind != "burst" or "load" in p):
        raise AlloclabError(f"{where}.duration_s: a {kind} phase" + (" with a load" if kind == "burst" else "")
                            + " needs its length", "give duration_s, e.g. duration_s = \"20s\"")
    if "threads" in p and "load" not in p:
        raise AlloclabError(f"{where}.threads: threads are the load's connections, and the phase has no load",
                            "give it a load, or leave out threads")
    if "connections" in p and p.get("burst") != "storm":
        raise AlloclabError(f"{where}.connections: only a storm opens connections", "give it burst = \"storm\"")


def phases_key(key, v):
    if not isinstance(v, list) or not v:
        raise AlloclabError(f"{key}: expected a non-empty array of tables ([[workloads.phases]])")
    out = [check_table(f"{key}[{i}]", p, PHASE_SCHEMA) for i, p in enumerate(v)]
    for i, p in enumerate(out):
        where = f"{key}[{i}]"
        if "name" not in p or "kind" not in p:
            raise AlloclabError(f"{where}: a phase needs a name and a kind",
                                "allowed kinds: " + ", ".join(LIFE_PHASE_KINDS))
        if not re.match(r"^[A-Za-z0-9_-]+$", p["name"]):
            raise AlloclabError(f"{where}.name: {p['name']!r} may hold only letters, digits, '_' and '-'")
        _check_phase(where, p)
    names = [p["name"] for p in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise AlloclabError(f"{key}: the phase name {dup!r} is given twice", "give each phase of a cycle its own name")
    return out



class LifeWorkload(Workload):
    """Memory over a server's life: cycles of a steady load, bursts and idle."""

    names = (LIFE,)
    title = "a server's life"
    schema = {
        "cycles": whole(1, 1000),  # cycles of the phases below, one server up throughout
        "phases": phases_key,
    }
    only = frozenset(schema)
    keys = only | {"tables", "table_size"}
    headline_words = "steady throughput"
    server_profile = "life"

    def check(self, i: int, w: dict, engines: list[str]) -> None:
        for k in ("ops", "duration_s"):
            if k in w:
                raise AlloclabError(f"workloads[{i}].{k}: a life's length is its cycles and its phases' duration_s",
                                    "leave out ops and duration_s, and give cycles and [[workloads.phases]]")
        bad = [e for e in engines if e in ENGINES or targets.parse(e).kind != "mariadb"]
        if bad:
            raise AlloclabError(f"workloads[{i}]: a life runs on a MariaDB server so far, not on {', '.join(bad)}",
                                "use mariadb-innodb (or another engine of a MariaDB server); lives on RocksDB and "
                                "PostgreSQL are to come")

    def axes(self, w: dict, engine: str) -> tuple[list, list, list, list]:
        return [0], [""], [""], [""]

    def fields(self, w: dict, client: str) -> dict:
        return {"cycles": w.get("cycles", CYCLES),
                "phases": json.dumps(w.get("phases", list(PHASES)), sort_keys=True, separators=(",", ":"))}

    def table_of(self, word: str) -> dict | None:
        """`--workloads life`: the issue's MariaDB life on its data."""
        return {"workload": LIFE, "part": LIFE, **DATA} if word in self.names else None

    def key(self, c) -> str:
        prof = "" if c.profile == "default" else f"/{c.profile}"
        shape = "" if c.shape == "default" else f"/{c.shape}"
        return f"{c.engine}/{c.part}/{c.workload}/{c.tables}x{c.table_size}/{shape_tag(c)}/t{c.threads}{prof}{shape}"

    def settings(self, c: dict) -> str:
        return f"{c['pattern']}{extra_settings(c)}"

    def params(self, c: dict) -> str:
        return f"{c['pattern']}{profile_suffix(c)} t{c['threads']}"

    def describe(self, c) -> str:
        return f"life of {c.cycles} cycle(s) " + "+".join(p["name"] for p in phases_of(c)) + f" t{c.threads}"

    def outcome(self, r) -> str:
        died = f"OOM-killed in cycle {r.oom_cycle}" if r.oom_killed else "survived"
        settled = None if r.settled_rss_bytes is None else r.settled_rss_bytes / 2**20
        return (f"{r.ops_per_s:,.0f} tps steady  settled RSS {_fmt(settled, '.0f', ' MiB')}  creep "
                f"{_fmt(r.creep_mib_per_cycle, '+.1f', ' MiB/cycle')}  given back "
                f"{_fmt(None if r.given_back_share is None else 100 * r.given_back_share, '.0f', ' %')}  {died}  "
                f"({r.wall_s:.0f}s)")

    def work_done(self, r) -> float:
        return r.ops

    # --- the run ---------------------------------------------------------------------------
    def run_kind(self, cell):
        return LifeKind()

    def driver_workload(self, c) -> str:
        return c.test

    def driver_reach(self, c, srv) -> list[str]:
        return driver.reach(srv, sysbench.DATABASE) + ["--tables", str(c.tables), "--table-size", str(c.table_size)]


LIFE_WORKLOAD = LifeWorkload()
