"""A server's life: one server up through cycles of phases (a steady load, bursts that
allocate and free differently, idle), and what its memory did over them: RSS settled at each idle
end and its creep over the cycles, the share of each burst given back, RSS over the engine's own
account, and whether the cgroup's OOM killer killed it, and when.

Its plan keys (`cycles`, `phases`), cells and labels; its kind of run (the sysbench tables as
golden data, as sysbench's OLTP; one server for the whole life, whose client is the phase
sequencer clients/life.py); its target, which reads the cgroup's OOM counter so that a server
the kernel killed for memory is an outcome, not a failure; and its row fields, computed after the
run by answers.life from the stored timeline (samples.csv) and the phases the client recorded.
Two kinds of life, one measurement: on a MariaDB server (InnoDB and the other engines of a MariaDB
server), whose client is the phase sequencer clients/life.py with sysbench loads and the server's
bursts (dump, storm, groupby); and on an embedded engine (RocksDB; TidesDB and SQLite keep no
account of their memory), where the driver's `life` command keeps the engine open in the process
under test through key-value loads and the engine's bursts (compact, scan), with values of mixed
sizes (uniform in [value_bytes_min, value_bytes]); and on PostgreSQL, whose backends live as long
as their connection: a pool of sessions held for the whole life (the table's threads: its size, as
an application's pool or pgbouncer in session mode holds them) carries the load and the reports,
beside maintenance and a storm of short connections, and the life is measured on the pool's
private memory (clients/pglife.py).
"""

from __future__ import annotations

import json
import re

from alloclab.answers import decide
from alloclab.answers.lives import life_table, limit_table, pooled
from alloclab.answers.table import fmt_num
from alloclab.catalog import targets
from alloclab.catalog.allocators import short_name
from alloclab.catalog.names import (
    KV_WORKLOADS,
    LIFE,
    LIFE_BURSTS,
    LIFE_ENGINE_BURSTS,
    LIFE_PHASE_KINDS,
    LIFE_POOL_BURSTS,
    LIFE_POOL_LOADS,
    LIFE_SERVER_BURSTS,
    SYSBENCH_TESTS,
)
from alloclab.clients import driver, sysbench
from alloclab.core.errors import AlloclabError
from alloclab.plan.schema import MAX_THREADS, check_table, choice, seconds, size, text, whole
from alloclab.plan.workload import Workload, extra_settings, profile_suffix
from alloclab.report import charts
from alloclab.workloads.life_embedded import EmbeddedLife
from alloclab.workloads.life_runs import (
    LIFE_METRICS,
    POOL_CSV,
    LifeColumns,
    LifeKind,
    LifeParams,
    PoolLife,
    embedded,
    phases_of,
    shape_tag,
)

# The first MariaDB life (measured by hand on this machine kind): 5 cycles of 25 s of sysbench's
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
# PostgreSQL's life, on a pool of sessions held throughout (the table's threads: its size): the
# load on the pool, reporting queries on every session at a work_mem of 32 MiB, CREATE INDEX and
# VACUUM at a maintenance_work_mem of 64 MiB, a storm of short connections, then idle
POOL_PHASES = (
    {"name": "oltp", "kind": "steady", "duration_s": 25.0, "load": "oltp_read_write"},
    {"name": "report", "kind": "burst", "burst": "report", "work_mem": 32 * 2**20},
    {"name": "maint", "kind": "burst", "burst": "maintenance", "work_mem": 64 * 2**20},
    {"name": "storm", "kind": "burst", "burst": "storm", "connections": 150},
    {"name": "rest", "kind": "idle", "duration_s": 15.0},
)


def kind_of(engine: str) -> str:
    return "embedded" if embedded(engine) else "pool" if pooled(engine) else "server"


# one phase of a life: how long, of which kind, and what runs in it
PHASE_SCHEMA = {
    "name": text,
    "kind": choice(LIFE_PHASE_KINDS),
    "duration_s": seconds(0.0, strict=True),
    # what runs through the phase: on a server the driver's native sysbench test, on an embedded
    # engine a key-value workload
    "load": choice(SYSBENCH_TESTS + KV_WORKLOADS),
    "threads": whole(1, MAX_THREADS),  # the load's connections (default: the table's threads)
    "burst": choice(LIFE_BURSTS),
    "connections": whole(1, 100_000),  # storm: short connections, all at once
    # PostgreSQL's report: the sessions' work_mem; its maintenance: maintenance_work_mem
    "work_mem": size(64 * 1024),
}


def _check_phase(where: str, p: dict) -> None:
    """What a phase of each kind runs: steady a load for its duration; a burst its burst (with a
    load beside it for duration_s, if it names one); idle nothing for its duration."""
    kind = p["kind"]
    if kind == "steady" and "load" not in p:
        raise AlloclabError(f"{where}.load: a steady phase needs a load",
                            "allowed values: " + ", ".join(SYSBENCH_TESTS + KV_WORKLOADS))
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
    if "work_mem" in p and p.get("burst") not in ("report", "maintenance"):
        raise AlloclabError(f"{where}.work_mem: only PostgreSQL's report and maintenance bursts set work_mem",
                            "give it burst = \"report\" or \"maintenance\", or leave work_mem out")


def cycles_key(key, v):
    v = whole(1, 1000)(key, v)
    if v < 2:
        raise AlloclabError(f"{key}: a life of {v} cycle has no creep and no given back (its first cycle warms "
                            "the engine up and is left out)", "give cycles = 2 or more (the presets give 3 to 5)")
    return v


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



def when_killed(r) -> str:
    """When a life was killed: in its cycle, or before its first (an embedded engine's driver
    killed while it filled its keys)."""
    return f"in cycle {r.own.oom_cycle}" if r.own.oom_cycle else "before its first cycle"


class LifeWorkload(Workload):
    """Memory over a server's life: cycles of a steady load, bursts and idle."""

    names = (LIFE,)
    title = "a server's life"
    schema = {
        "cycles": cycles_key,  # cycles of the phases below, one server up throughout
        "phases": phases_key,
        "value_bytes_min": size(1),  # an embedded engine's values: uniform in [value_bytes_min, value_bytes]
    }
    only = frozenset(schema)
    keys = only | {"tables", "table_size"}
    headline_words = "steady throughput"
    metrics = LIFE_METRICS
    Params = LifeParams
    Columns = LifeColumns
    server_profile = "life"

    def check(self, i: int, w: dict, engines: list[str]) -> None:
        for k in ("ops", "duration_s"):
            if k in w:
                raise AlloclabError(f"workloads[{i}].{k}: a life's length is its cycles and its phases' duration_s",
                                    "leave out ops and duration_s, and give cycles and [[workloads.phases]]")
        bad = [e for e in engines if not embedded(e) and targets.parse(e).kind not in ("mariadb", "postgres")]
        if bad:
            raise AlloclabError(f"workloads[{i}]: a life runs on a MariaDB or PostgreSQL server or an embedded engine, "
                                f"not on {', '.join(bad)}", "use mariadb-innodb (or another engine of a MariaDB "
                                "server), postgres or rocksdb; give the table engines = [...] to keep it off other "
                                "engines")
        kinds = {kind_of(e) for e in engines}
        if len(kinds) > 1:
            raise AlloclabError(f"workloads[{i}]: one life's phases run on one kind of engine (a MariaDB server, "
                                f"PostgreSQL's pool or an embedded engine), and this table is for {', '.join(engines)}",
                                "give each kind its own [[workloads]] table with engines = [...] (a server's loads are "
                                "sysbench tests, an embedded engine's key-value workloads)")
        kind = next(iter(kinds), "server")
        if kind == "embedded" and "phases" not in w:
            raise AlloclabError(f"workloads[{i}].phases: a life on an embedded engine needs its phases (the default "
                                "phases are a MariaDB server's)", "give [[workloads.phases]] with key-value loads and "
                                "bursts " + " or ".join(LIFE_ENGINE_BURSTS) + ", or use the preset memory-life")
        loads, bursts, where = {"embedded": (KV_WORKLOADS, LIFE_ENGINE_BURSTS, "an embedded engine"),
                                "pool": (LIFE_POOL_LOADS, LIFE_POOL_BURSTS, "PostgreSQL's pool"),
                                "server": (SYSBENCH_TESTS, LIFE_SERVER_BURSTS, "a MariaDB server")}[kind]
        for j, p in enumerate(w.get("phases", POOL_PHASES if kind == "pool" else PHASES)):
            if "load" in p and p["load"] not in loads:
                raise AlloclabError(f"workloads[{i}].phases[{j}].load: {p['load']!r} does not run on {where}",
                                    "allowed values: " + ", ".join(loads))
            if "burst" in p and p["burst"] not in bursts:
                raise AlloclabError(f"workloads[{i}].phases[{j}].burst: {p['burst']!r} is not a burst of {where}",
                                    "allowed values: " + ", ".join(bursts))
            if "connections" in p and kind == "embedded":
                raise AlloclabError(f"workloads[{i}].phases[{j}].connections: an embedded engine has no connections",
                                    "leave it out (threads sets a load's threads)")
            if kind == "pool" and p.get("threads", 0) > min(w.get("threads", [1 << 30])):
                raise AlloclabError(f"workloads[{i}].phases[{j}].threads: {p['threads']} is more sessions than the "
                                    f"pool holds (threads = {min(w.get('threads', [0]))})",
                                    "a PostgreSQL life's load runs on its pool: give threads at most the table's")
        if "value_bytes_min" in w and kind != "embedded":
            raise AlloclabError(f"workloads[{i}].value_bytes_min: a server's life has the sysbench tables' rows",
                                "leave it out, or run the life on an embedded engine")
        if w.get("value_bytes_min", 1) > min(w.get("value_bytes", [100])):
            raise AlloclabError(f"workloads[{i}].value_bytes_min: {w['value_bytes_min']} is above value_bytes",
                                "give value_bytes_min at most the smallest value_bytes")

    def variants(self, w: dict, engine: str) -> list[tuple[str, LifeParams]]:
        return [("", LifeParams(
            cycles=w.get("cycles", CYCLES),
            phases=json.dumps(w.get("phases", list(POOL_PHASES if pooled(engine) else PHASES)), sort_keys=True,
                              separators=(",", ":")),
            value_bytes_min=w.get("value_bytes_min", 0), tables=w.get("tables", LifeParams.tables),
            table_size=w.get("table_size", LifeParams.table_size)))]

    def table_of(self, word: str) -> dict | None:
        """`--workloads life`: the first hand-measured MariaDB life on its data."""
        return {"workload": LIFE, "part": LIFE, **DATA} if word in self.names else None

    def key(self, c) -> str:
        prof = "" if c.profile == "default" else f"/{c.profile}"
        shape = "" if c.shape == "default" else f"/{c.shape}"
        if embedded(c.engine):
            low = c.params.value_bytes_min
            values = f"v{low}-{c.value_bytes}" if low else f"v{c.value_bytes}"
            data = f"{c.pattern}/k{c.key_bytes}/{values}/n{c.keyspace}"
        else:
            data = f"{c.params.tables}x{c.params.table_size}"
        return f"{c.engine}/{c.part}/{c.workload}/{data}/{shape_tag(c)}/t{c.threads}{prof}{shape}"

    def settings(self, c: dict) -> str:
        return f"{c['pattern']}{extra_settings(c)}"

    def params(self, c: dict) -> str:
        return f"{c['pattern']}{profile_suffix(c)} t{c['threads']}"

    def describe(self, c) -> str:
        return f"life of {c.params.cycles} cycle(s) " + "+".join(p["name"] for p in phases_of(c)) + f" t{c.threads}"

    def outcome(self, r) -> str:
        pool = pooled(r.engine)
        died = (f"{'a backend ' if pool else ''}OOM-killed {when_killed(r)}"
                f"{' (the server reset its sessions)' if pool else ''}" if r.own.oom_killed else "survived")
        o = r.own
        settled = None if o.settled_rss_bytes is None else o.settled_rss_bytes / 2**20
        given = None if o.given_back_share is None else 100 * o.given_back_share
        what = "the pool's private memory" if pool else "RSS"
        return (f"{r.ops_per_s:,.0f} tps steady  settled {what} {fmt_num(settled, '.0f', ' MiB')}  creep "
                f"{fmt_num(o.creep_mib_per_cycle, '+.1f', ' MiB/cycle')}  given back "
                f"{fmt_num(given, '.0f', ' %')}  {died}  "
                f"({r.wall_s:.0f}s)")

    def work_done(self, r) -> float:
        return r.ops

    # --- the report: a picture of the lives first ---------------------------------------------
    def section_data(self, study, rows):
        """Per life (cell), the RSS over the whole life of one round's run of each allocator (the
        first round in which every allocator has a valid run, else each allocator's first), the
        phases of the baseline's run and the cgroup's limit: the report's first picture, its
        panels in the plan's order of engines (not in the order their runs happened to end)."""
        out = []
        order = list(study.engines)
        for cell in sorted(dict.fromkeys(decide.cell_of(r) for r in rows),
                           key=lambda c: order.index(c[0]) if c[0] in order else len(order)):
            mine = sorted((r for r in rows if decide.cell_of(r) == cell), key=lambda r: (r.repeat, r.index))
            allocs = [a for a in study.allocators if any(r.allocator == a for r in mine)]
            whole = [n for n in sorted({r.repeat for r in mine})
                     if {r.allocator for r in mine if r.repeat == n} >= set(allocs)]
            pick = {a: next(r for r in mine if r.allocator == a and (not whole or r.repeat == whole[0]))
                    for a in allocs}
            base = pick.get(study.baseline) or next(iter(pick.values()))
            lines, phases, limit = [], [], None
            for a, r in pick.items():
                note = study.run_json(r.run_id).get("life") or {}
                ph = note.get("phases") or []
                t0 = ph[0]["t_start_s"] if ph else 0.0
                pts = [(float(x["t_s"]) - t0, int(x["rss_bytes"]) / 2**20)
                       for x in study.samples(r.run_id, POOL_CSV if pooled(r.engine) else "samples.csv")]
                lines.append({"label": short_name(a) + (f" (OOM-killed {when_killed(r)})"
                                                         if r.own.oom_killed else ""),
                              "t": [t for t, _ in pts], "mib": [m for _, m in pts], "killed": bool(r.own.oom_killed)})
                if r is base:
                    phases = [(p["kind"], p["t_start_s"] - t0, p["t_end_s"] - t0) for p in ph]
                    limit = note.get("server_memory_bytes")
            c = decide.cell_dict(cell)
            rounds = f"round {whole[0]}" if whole else "each allocator's first run"
            cycles, _, names = base.pattern.partition(":")  # the row's pattern is the life's shape_tag
            shape = f"{cycles[1:]} cycles of {names.rsplit(':', 1)[0]}, t{base.threads}"
            out.append({"title": f"{c['engine']}: {shape} ({rounds})", "lines": lines, "pool": pooled(c["engine"]),
                        "phases": phases, "limit_mib": limit / 2**20 if limit else None})
        return {"lives": out}

    def report_tables(self, a, rows):
        """What each allocator kept, gave back and let creep over its lives, and who was killed."""
        if not rows:
            return []
        need = limit_table(rows, a.study.checks)
        return [life_table(a.study, rows)] + ([need] if need.rows else [])

    def first_charts(self, a, out) -> list:
        """The first screen of a study of lives: RSS over every life, then the forest plots of creep,
        given back and overhead (the memory answer), each with its caption."""
        lives = a.sections[self.names[0]]["lives"]
        drawn = charts.draw_life(lives, out)
        first = []
        if drawn:
            pool = ("; PostgreSQL: its pool's private memory, RssAnon summed over the pool's backends"
                    if any(x.get("pool") for x in lives) else "")
            first.append((*drawn, "RSS of the process under test over its whole life (MiB, sampled at 20 Hz from "
                          f"/proc; a server's process tree{pool}), one line per allocator from the same round; shaded: "
                          "bursts (orange) and idle phases (grey) as the baseline's run had them; dashed: the cgroup's "
                          "memory limit; ×: killed by the kernel's OOM killer. Measured on " + a.answers.where + "."))
        drawn = charts.draw_frontier(a.answers, out)
        if drawn:
            first.append((*drawn, "Memory against speed, one panel per life: each allocator and setting at its change "
                          "of RSS over the engine's account (x; left is leaner) and of steady throughput (y) against "
                          "the baseline (the square at 0, 0), each with its 95 % interval; shaded: the speed margin "
                          f"±{a.answers.margin_pct:g} %; red: decided slower, green: decided leaner, grey: neither; "
                          "ringed: the leanest that costs no speed; boxed: the leanest overall, at a price; ×: speed "
                          "not measured. Speed: each life's steady load alone, its allocators in turns, where the "
                          "study measured it (the axis says), else the lives' own. Measured on " + a.answers.where
                          + "."))
        for m in self.metrics:
            f = charts.draw_verdicts(a.answers, out, m.name)
            if f:
                first.append(f)
        return first

    # --- the run ---------------------------------------------------------------------------
    def run_kind(self, cell):
        return EmbeddedLife() if embedded(cell.engine) else PoolLife() if pooled(cell.engine) else LifeKind()

    def driver_command(self, c) -> str:
        return "life" if embedded(c.engine) else "run"

    def driver_workload(self, c) -> str:
        return c.params.test or "mixed"  # an embedded life: each phase names its load

    def driver_args(self, c) -> list[str]:
        if not embedded(c.engine):
            return []
        a = ["--cycles", str(c.params.cycles), "--phases", c.params.phases, "--pattern", c.pattern, "--key-bytes",
             str(c.key_bytes), "--value-bytes", str(c.value_bytes), "--batch", str(c.batch), "--range-len",
             str(c.range_len)]
        a += ["--value-bytes-min", str(c.params.value_bytes_min)] if c.params.value_bytes_min else []
        return a + (["--keyspace", str(c.keyspace)] if c.keyspace is not None else [])

    def driver_reach(self, c, srv) -> list[str]:
        return driver.reach(srv, sysbench.DATABASE) + ["--tables", str(c.params.tables), "--table-size",
                                                        str(c.params.table_size)]


LIFE_WORKLOAD = LifeWorkload()
