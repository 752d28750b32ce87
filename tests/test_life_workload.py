"""A server's life (workload "life", issue 36): its plan keys, the memory-life preset, the life's
verdicts, and real lives on MariaDB: a smoke life under glibc, a planted creep
(driver/creep/creep.c preloaded into the server) found with its slope inside the interval, and a
server the kernel OOM-kills under its cgroup limit, recorded as killed at its cycle."""

import io
import json
import math
import os
import shutil
import statistics
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import expand, with_own

from alloclab import plan, study
from alloclab.alloc.allocators import Allocator
from alloclab.answers import decide, life, metrics, stats, together, wording
from alloclab.catalog import metrics as cmetrics
from alloclab.catalog.allocators import JEMALLOC_BACKGROUND
from alloclab.core.errors import AlloclabError
from alloclab.plan.design import Design
from alloclab.plan.presets import preset
from alloclab.results.store import RunRow, Store
from alloclab.run import interleave
from alloclab.run.node import Node, make_scratch
from alloclab.study.progress import Progress
from alloclab.workloads import life as life_workload
from alloclab.workloads import life_runs
from alloclab.workloads.life_runs import CREEP, GIVEN_BACK, LIFE_METRICS, OVERHEAD

ROOT = Path(__file__).resolve().parents[1]
FOUND = {"glibc": Allocator("glibc", "glibc", None, version="2.36"),
         "jemalloc": Allocator("jemalloc", "jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", version="5.3")}
STEADY = {"name": "load", "kind": "steady", "duration_s": 1.5, "load": "oltp_read_only"}
IDLE = {"name": "rest", "kind": "idle", "duration_s": 2.5}
ROCKS_STEADY = {"name": "churn", "kind": "steady", "duration_s": 1.0, "load": "mixed"}


def raw_life(phases=None, engines=("mariadb-innodb",), **table):
    w = {"part": "life", "workload": "life", "threads": [2], "tables": 1, "table_size": 1000, **table}
    if phases is not None:
        w["phases"] = phases
    return {"engines": list(engines), "allocators": ["glibc"], "runs": 1, "scale": "smoke", "workloads": [w]}


def load(raw):
    return plan.load(raw, found_allocators=FOUND, default_seed=1)


def only(raw: dict, engine: str, **keys) -> dict:
    """A preset's plan on one of its engines: its life there (not the steady load alone)."""
    return {**raw, "engines": [engine], **keys,
            "workloads": [w for w in raw["workloads"] if engine in w["engines"] and w["workload"] == "life"]}


# --- the plan ------------------------------------------------------------------------------
@pytest.mark.parametrize("raw, says", [
    (raw_life([{"name": "x", "kind": "nap", "duration_s": 1}]), "workloads[0].phases[0].kind: 'nap' is not allowed"),
    (raw_life([{"name": "x", "kind": "steady", "duration_s": 1}]),
     "workloads[0].phases[0].load: a steady phase needs a load"),
    (raw_life([{"name": "x", "kind": "steady", "load": "oltp_read_only"}]),
     "workloads[0].phases[0].duration_s: a steady phase needs its length"),
    (raw_life([{"name": "x", "kind": "burst", "duration_s": 1}]),
     "workloads[0].phases[0].burst: a burst phase needs a burst"),
    (raw_life([{"name": "x", "kind": "burst", "burst": "fsck"}]),
     "workloads[0].phases[0].burst: 'fsck' is not allowed"),
    (raw_life([{"name": "x", "kind": "burst", "burst": "dump", "load": "oltp_read_only"}]),
     "workloads[0].phases[0].duration_s: a burst phase with a load needs its length"),
    (raw_life([{"name": "x", "kind": "burst", "burst": "dump", "connections": 10}]),
     "workloads[0].phases[0].connections: only a storm opens connections"),
    (raw_life([{"name": "x", "kind": "idle", "duration_s": 1, "load": "oltp_read_only"}]),
     "workloads[0].phases[0].load: an idle phase runs nothing"),
    (raw_life([{"name": "x", "kind": "idle", "duration_s": 1, "burst": "dump"}]),
     "workloads[0].phases[0].burst: only a burst phase has a burst"),
    (raw_life([{"name": "x", "kind": "idle", "duration_s": "0s"}]),
     "workloads[0].phases[0].duration_s: must be a duration > 0.0s"),
    (raw_life([{"name": "a b", "kind": "idle", "duration_s": 1}]), "workloads[0].phases[0].name: 'a b' may hold only"),
    (raw_life([IDLE, IDLE]), "workloads[0].phases: the phase name 'rest' is given twice"),
    (raw_life([]), "workloads[0].phases: expected a non-empty array of tables"),
    (raw_life([{"kind": "idle", "duration_s": 1}]), "workloads[0].phases[0]: a phase needs a name and a kind"),
    (raw_life([{**IDLE, "speed": 3}]), "workloads[0].phases[0]: unknown key(s) speed"),
    (raw_life(cycles=0), "workloads[0].cycles: must be >= 1"),
    (raw_life(cycles=1), "workloads[0].cycles: a life of 1 cycle has no creep and no given back"),
    (raw_life(duration_s=30), "workloads[0].duration_s: a life's length is its cycles and its phases' duration_s"),
    (raw_life(engines=["rocksdb"]), "workloads[0].phases: a life on an embedded engine needs its phases"),
    (raw_life([STEADY, {"name": "d", "kind": "burst", "burst": "dump"}], engines=["postgres"]),
     "workloads[0].phases[1].burst: 'dump' is not a burst of PostgreSQL's pool"),
    (raw_life([{**STEADY, "threads": 8}], engines=["postgres"]),
     "workloads[0].phases[0].threads: 8 is more sessions than the pool holds (threads = 2)"),
    (raw_life([{"name": "s", "kind": "burst", "burst": "storm", "work_mem": "1MiB"}], engines=["postgres"]),
     "workloads[0].phases[0].work_mem: only PostgreSQL's report and maintenance bursts set work_mem"),
    (raw_life([STEADY, IDLE], engines=["rocksdb", "mariadb-innodb"]),
     "workloads[0]: one life's phases run on one kind of engine"),
    (raw_life([STEADY, IDLE], engines=["postgres", "mariadb-innodb"]),
     "workloads[0]: one life's phases run on one kind of engine"),
    (raw_life([ROCKS_STEADY, IDLE]), "workloads[0].phases[0].load: 'mixed' does not run on a MariaDB server"),
    (raw_life([STEADY, IDLE], engines=["rocksdb"]),
     "workloads[0].phases[0].load: 'oltp_read_only' does not run on an embedded engine"),
    (raw_life([ROCKS_STEADY, {"name": "d", "kind": "burst", "burst": "dump"}], engines=["rocksdb"]),
     "workloads[0].phases[1].burst: 'dump' is not a burst of an embedded engine"),
    (raw_life([STEADY, {"name": "c", "kind": "burst", "burst": "compact"}]),
     "workloads[0].phases[1].burst: 'compact' is not a burst of a MariaDB server"),
    (raw_life([ROCKS_STEADY, {"name": "s", "kind": "burst", "burst": "storm", "connections": 3}], engines=["rocksdb"]),
     "workloads[0].phases[1].burst: 'storm' is not a burst of an embedded engine"),
    (raw_life([STEADY, IDLE], value_bytes_min=10), "workloads[0].value_bytes_min: a server's life has the sysbench"),
    (raw_life([ROCKS_STEADY, IDLE], engines=["rocksdb"], value_bytes_min=500, value_bytes=[400]),
     "workloads[0].value_bytes_min: 500 is above value_bytes"),
    ({"engines": ["mariadb-innodb"], "workloads": [{"workload": "sysbench", "test": "oltp_read_only", "cycles": 3}]},
     'workloads[0]: cycles only apply to workload = "life"'),
    ({"engines": ["mariadb-innodb"], "decide_on": ["creep"],
      "workloads": [{"workload": "sysbench", "test": "oltp_read_only"}]},
     "decide_on names only a life's memory metrics (creep), and workloads[0] (sysbench) is not a life"),
    ({**raw_life(), "decide_on": ["latency"]}, "decide_on[0]: 'latency' is not allowed"),
])
def test_bad_life_plans_are_refused_in_one_sentence_naming_the_key(raw, says):
    with pytest.raises(AlloclabError) as e:
        load(raw)
    assert e.value.message.startswith(says) and "\n" not in e.value.message, e.value.message


def test_a_life_without_phases_is_the_issues_mariadb_life():
    c = load(raw_life()).cells()[0]
    assert c.params.cycles == 5 and [p["name"] for p in life_workload.phases_of(c)] == ["oltp", "dump", "storm", "rest"]
    storm = life_workload.phases_of(c)[2]
    assert storm == {"name": "storm", "kind": "burst", "burst": "storm", "connections": 150}
    word = load({"engines": ["mariadb-innodb"], "allocators": ["glibc"],
                 "workloads": [life_workload.LIFE_WORKLOAD.table_of("life")]}).cells()[0]
    assert (word.params.tables, word.params.table_size, word.threads) == (4, 20_000, 64)
    # its own cell per shape: a life whose idle is longer is another cell
    a = load(raw_life([STEADY, IDLE], cycles=3)).cells()[0]
    b = load(raw_life([STEADY, {**IDLE, "duration_s": 3.0}], cycles=3)).cells()[0]
    assert a.key != b.key and a.key.startswith("mariadb-innodb/life/life/1x1000/c3:load+rest:")


def test_the_memory_life_preset():
    smoke, quick = load(preset("memory-life", "smoke")), plan.load(preset("memory-life", "quick"), default_seed=1,
                                                                      found_allocators=_every_allocator())
    assert [a.name for a in smoke.allocators] == ["glibc", "jemalloc"] and smoke.runs == 1
    assert [a.name for a in quick.allocators] == ["glibc", "jemalloc", "tcmalloc", "mimalloc", JEMALLOC_BACKGROUND,
                                                  "glibc+MALLOC_ARENA_MAX=2"]
    assert quick.budget == 3600 and quick.engines == ["mariadb-innodb", "rocksdb", "postgres"]
    assert {c.engine for c in smoke.cells()} == {c.engine for c in quick.cells()} == {"mariadb-innodb", "rocksdb",
                                                                                      "postgres"}
    # the lives' planned seconds (a burst without a length: 2 s) and about 15 s each to start and end:
    # smoke's one after another, one round in 5 minutes; quick's whole round at once, its longest
    # life's time, with each engine's steady load alone in turns after them (its allocators' windows
    # and about 3 s each to start), 8 rounds in 60 minutes
    def planned(c):
        if c.workload != "life":
            return len(quick.allocators) * (c.duration_s + 1.0 + 3.0)
        return c.params.cycles * sum(ph.get("duration_s", 2.0) for ph in life_workload.phases_of(c)) + 15

    assert sum(planned(c) for c in smoke.cells() if c.workload == "life") * len(smoke.allocators) < 5 * 60
    assert max(planned(c) for c in quick.beside()) + sum(planned(c) for c in quick.cells()
                                                          if c.key in quick.turns()) < 60 * 60 / 8
    # two RocksDB lives and two PostgreSQL pools of each allocator a round (runs_per_round),
    # MariaDB's one: thirty at once
    lives = {c.key for c in quick.beside()}
    places = {(c.engine, n) for (key, _), n in quick.places().items() for c in quick.beside() if c.key == key}
    assert places == {("mariadb-innodb", 1), ("rocksdb", 2), ("postgres", 2)}
    assert smoke.side_by_side == 1 and quick.whole_round
    assert quick.side_by_side == sum(n for (key, _), n in quick.places().items() if key in lives) == 30
    # the round's thirty lives run as one group: every engine's together; a unit's second life
    # on other keys than its first, each allocator's k-th on the same
    first = [s for s in quick.round_specs(1, None, 1) if s.cell.key in lives]
    assert [len(g) for g in interleave.groups(first)] == [30]
    assert sorted((s.cell.engine, s.copy) for s in first) == [("mariadb-innodb", 0)] * 6 + [("postgres", 0)] * 6 + \
        [("postgres", 1)] * 6 + [("rocksdb", 0)] * 6 + [("rocksdb", 1)] * 6
    assert len({s.seed for s in first if s.cell.engine == "rocksdb"}) == 2
    assert len({s.seed for s in first if s.cell.engine == "postgres"}) == 2
    # its rounds go on for memory, and for the speed measured alone in turns; the lives' throughput,
    # a share of the machine, is told as it stands (tests/test_life_price.py)
    assert smoke.design.decide_on == quick.design.decide_on == ("creep", "given_back", "overhead", "throughput")
    # quick's MariaDB idle outlasts jemalloc+bg5s's two 5 s decays (dirty, then muzzy: MADV_FREE'd
    # pages stay in RSS until purged), so its settled reading, the idle's last 20 %, comes after both;
    # PostgreSQL's (no background thread in a forked backend) and RocksDB's keep theirs
    idles = {c.engine: [ph["duration_s"] for ph in life_workload.phases_of(c) if ph["kind"] == "idle"]
             for c in quick.beside()}
    assert idles == {"mariadb-innodb": [13.0], "postgres": [6.0], "rocksdb": [5.0]}
    assert (1 - life.SETTLE_SHARE) * idles["mariadb-innodb"][0] > 5.0 + 5.0
    # quick's lives: 8 cycles (7 once warm: the creep's slope), RocksDB's 6 (its creeps decide at 6);
    # the lives in the first 5 rounds
    lives = {c.engine: c for c in quick.beside()}
    assert {e: c.params.cycles for e, c in lives.items()} == {"mariadb-innodb": 8, "postgres": 8, "rocksdb": 6}
    assert quick.side_by_side_rounds == 5
    # PostgreSQL's pool: 2 x cores + 1 sessions (HikariCP's formula), the load and the reports on it
    n = len(os.sched_getaffinity(0))
    assert lives["postgres"].threads == 2 * n + 1 and "report" in lives["postgres"].params.phases
    # quick's coarser bar: ±5 % and ±10 points of a burst; smoke (and full) keep ±2 % and ±5 points
    assert (quick.design.margin, quick.design.margins) == (0.05, (("given_back", 0.10),))
    assert (smoke.design.margin, smoke.design.margins) == (0.02, ())
    # stored in plan.json, read back by a report; a plan.json from before the key has none
    stored = json.loads(json.dumps({"design": quick.design.to_json()}))
    assert Design.from_plan(stored).margins == (("given_back", 0.10),)
    assert Design.from_plan({"design": {k: v for k, v in stored["design"].items() if k != "margins"}}).margins == ()
    assert metrics.margin_words(quick.design.decide_on, quick.design.margin, (), quick.design.margins) == \
        "±5 %; creep of settled RSS: ±1 MiB/cycle; share of a burst given back: ±10 points"
    # creep's margin is in MiB a cycle, its own or the plan's (margins_pct takes it in that unit)
    mine = plan.load({**preset("memory-life", "quick"), "margins_pct": {"creep": 2.0, "given_back": 10.0}},
                     default_seed=1, found_allocators=_every_allocator())
    assert dict(mine.design.margins) == {"creep": 2.0, "given_back": 0.10}
    assert metrics.margin_of("creep", 0.05, mine.design.margins) == 2.0


def test_the_small_server_preset_is_seed_004s_shapes_around_a_life():
    quick = plan.load(preset("small-server", "quick"), default_seed=1, found_allocators=_every_allocator())
    assert [a.name for a in quick.allocators] == ["glibc", "jemalloc", "tcmalloc", "mimalloc"]
    assert quick.side_by_side == 4 and quick.budget == 1800
    limits = sorted(s["server_memory_bytes"] for s in quick.shapes.values())
    assert limits == [320 << 20, 1 << 30, 2 << 30] and quick.shapes["1core-2GiB"]["server_cpus"] == "0"
    assert all(n.startswith(("1core-", "2cores-", "3cores-", "4cores-")) for n in quick.shapes), list(quick.shapes)
    assert {c.workload for c in quick.cells()} == {"life"} and len(quick.cells()) == 3
    assert all(c.engine == "mariadb-innodb" for c in quick.cells())
    assert quick.design.decide_on == ()  # speed and memory together: both keep its rounds going


def _every_allocator():
    return {n: Allocator(n, n, None if n == "glibc" else f"/usr/lib/lib{n}.so") for n in
            ("glibc", "jemalloc", "tcmalloc", "mimalloc")}


# --- verdicts ----------------------------------------------------------------------------------
def _row(alloc, rnd, creep=None, given=None, overhead=None, ops=1000.0):
    base = dict.fromkeys(RunRow.columns(), 0)
    base |= dict(run_id=f"{alloc}-{rnd}", study="s", cell="c", engine="mariadb-innodb", allocator=alloc,
                 allocator_base=alloc, allocator_verified=True, workload="life", part="life", pattern="c3:x:1",
                 repeat=rnd, ops_per_s=ops, p99_ns=1e6, peak_rss_bytes=1 << 27, status="ok", reason="",
                 started_at="", profile="default", shape="default", client="", node="",
                 machine_fingerprint="", purpose="measure", index=rnd)
    return RunRow.of(**base, creep_mib_per_cycle=creep, given_back_share=given, overhead_bytes=overhead)


def test_a_creep_that_scatters_about_none_is_not_read_as_creeping_more_than_a_flat_one():
    """A pool whose slopes read -3 and +3 MiB a cycle by turns creeps as little as a flat one: read as
    a difference it is not decided higher (floored at 1 MiB a cycle and divided, it read 1 and 3
    against 1, "creeps more"); a scatter within the margin is equivalent."""
    policy = Design(questions=("allocators",), baseline="glibc", adaptive=False)
    flat = [_row("glibc", r, creep=0.1 + 0.01 * (r % 3), given=0.02, overhead=60 << 20) for r in range(1, 9)]
    wide = [_row("jemalloc", r, creep=3.0 * (-1) ** r, given=0.02, overhead=60 << 20) for r in range(1, 9)]
    near = [_row("tcmalloc", r, creep=0.3 + 0.1 * (-1) ** r, given=0.02, overhead=60 << 20) for r in range(1, 9)]
    vs = {v.variant: v for v in decide.verdicts(flat + wide + near, policy) if v.metric == "creep"}
    assert vs["jemalloc"].verdict == "undecided" and abs(vs["jemalloc"].delta_pct) < 0.2
    assert vs["tcmalloc"].verdict in ("higher", "equivalent") and -1 < vs["tcmalloc"].ci_delta[0]
    assert vs["tcmalloc"].ci_delta[1] < 1 and vs["tcmalloc"].delta_pct == pytest.approx(0.2, abs=0.02)
    # a creep of hundreds of MiB a cycle (a leak) is a difference like any other, not an overflow
    iv, word = decide.ratio_verdict({1: 800.0, 2: 801.0, 3: 799.0}, {1: 790.0, 2: 791.5, 3: 789.0}, False, policy,
                                    CREEP)
    assert word == "lower" and math.log(iv.ratio) == pytest.approx(-9.83, abs=0.01)


def test_life_verdicts_only_where_the_rows_have_lives():
    policy = Design(questions=("allocators",), baseline="glibc", adaptive=False)
    rows = [_row("glibc", r, creep=14.0 + r % 2, given=0.02, overhead=(60 + r) << 20) for r in range(1, 6)]
    rows += [_row("jemalloc", r, creep=0.3, given=0.45 + 0.01 * r, overhead=(30 + r) << 20) for r in range(1, 6)]
    vs = {v.metric: v for v in decide.verdicts(rows, policy)}
    assert set(vs) == {"throughput", "p99_latency", "peak_rss", "creep", "given_back", "overhead"}
    # creep is compared as a difference in MiB a cycle; a share given back as a difference in
    # percentage points (a ratio of two shares near 0 swings without bound)
    assert vs["creep"].verdict == "lower" and vs["creep"].unit == "MiB/cycle"
    assert vs["creep"].delta_pct == pytest.approx(0.3 - 14.6, abs=0.01)
    assert vs["given_back"].verdict == "higher" and vs["given_back"].unit == "points"
    assert vs["given_back"].delta_pct == pytest.approx(100 * (0.48 - 0.02), abs=0.01)
    lo, hi = vs["given_back"].ci_delta
    assert lo < 46 < hi and hi - lo < 5
    assert metrics.value(_row("glibc", 1, given=-0.03), GIVEN_BACK) == -0.03  # RSS grew while idle
    assert vs["overhead"].verdict == "lower"
    # a life with no engine account larger than RSS: an overhead of 0 or less is no value
    assert metrics.value(_row("glibc", 1, overhead=-5 << 20), OVERHEAD) is None
    assert metrics.value(_row("glibc", 1, creep=-3.0), CREEP) == -3.0  # settled RSS fell: a value, not none
    # rows without lives keep the three metrics they always had
    plain = [with_own(r, creep_mib_per_cycle=None, given_back_share=None, overhead_bytes=None) for r in rows]
    assert {v.metric for v in decide.verdicts(plain, policy)} == {"throughput", "p99_latency", "peak_rss"}
    assert tuple(m.name for m in LIFE_METRICS) == cmetrics.goals()[1:]  # the names a plan's decide_on takes
    assert decide.stopping(plain, policy) == (metrics.THROUGHPUT,)
    assert decide.stopping(rows, policy) == (metrics.THROUGHPUT,) + LIFE_METRICS
    assert decide.stopping(rows, replace(policy, decide_on=("creep", "overhead"))) == (CREEP, OVERHEAD)


def test_two_allocators_that_give_back_almost_nothing_are_equivalent_within_five_points():
    """memory-life's RocksDB life: glibc gives back 0-6 % of its bursts (now and then it trims an
    arena's top), two arenas 1-5 %. As a ratio of shares (study 4) that stayed undecided at
    −5 % [−14, +5]; as a difference it is equivalent within the metric's own ±5 points, while a
    real difference of 12 points is decided higher, and one of 4 points with wide rounds is not."""
    policy = Design(questions=("allocators",), baseline="glibc", adaptive=False)
    glibc = (0.0015, 0.0003, 0.0027, 0.0027, 0.0, 0.0005, 0.062, 0.0672, 0.0512, 0.0034)
    arenas = (0.0274, 0.0445, 0.008, 0.0377, 0.0279, 0.0465, 0.0498, 0.0084, 0.0285, 0.0405)
    rows = [_row("glibc", r, given=g) for r, g in enumerate(glibc, 1)]
    rows += [_row("glibc+MALLOC_ARENA_MAX=2", r, given=g) for r, g in enumerate(arenas, 1)]
    rows += [_row("jemalloc", r, given=g + 0.12) for r, g in enumerate(glibc, 1)]
    rows += [_row("tcmalloc", r, given=g + (0.04 if r % 2 else -0.02) + 0.06 * (-1) ** (r // 2))
             for r, g in enumerate(glibc, 1)]
    vs = {v.variant: v for v in decide.verdicts(rows, policy, (GIVEN_BACK,))}
    assert vs["glibc+arenas2"].verdict == "equivalent", vs["glibc+arenas2"].ci_delta
    # the shift of the paired differences (Hodges-Lehmann: the median of their Walsh averages)
    d = [a - g for a, g in zip(arenas, glibc)]
    walsh = [(d[i] + d[j]) / 2 for i in range(10) for j in range(i, 10)]
    assert vs["glibc+arenas2"].delta_pct == pytest.approx(100 * statistics.median(walsh), abs=1e-6)
    assert vs["jemalloc"].verdict == "higher" and vs["jemalloc"].delta_pct == pytest.approx(12.0, abs=1e-6)
    assert vs["tcmalloc"].verdict == "undecided" and vs["tcmalloc"].rounds_to_decide
    from alloclab.answers import wording
    assert wording.short(vs["tcmalloc"]).endswith("(undecided at the ±5 points margin)")


def test_a_life_study_that_decides_on_memory_stops_a_unit_whose_throughput_is_undecided():
    """memory-life's rounds go on for memory (decide_on): jemalloc's memory is decided at the look
    after round 4 while its throughput (noisy, lives side by side) is not; by default it runs on."""
    policy = Design(questions=("allocators",), baseline="glibc", adaptive=True, looks=(4, 8))
    noisy = (1000.0, 700.0, 1300.0, 900.0)
    jitter = (1.0, 1.03, 0.98, 1.01)
    rows = [_row("glibc", r, creep=14.0 * jitter[r - 1], given=0.02, overhead=int((60 << 20) * jitter[r - 1]),
                 ops=1000.0) for r in range(1, 5)]
    rows += [_row("jemalloc", r, creep=0.3, given=0.5 * jitter[-r], overhead=int((30 << 20) * jitter[-r]),
                  ops=noisy[r - 1]) for r in range(1, 5)]
    units = sorted({(r.cell, r.allocator) for r in rows})
    active, _ = decide.active_units(units, rows, policy)
    assert active == set(units)
    memory = replace(policy, decide_on=tuple(m.name for m in LIFE_METRICS))
    active, why = decide.active_units(units, rows, memory)
    assert active == set() and "decided at the look after round 4" in why[("c", "jemalloc")]
    # a life in no comparison of decide_on's metrics (one allocator) does not run on for its throughput
    alone = [r for r in rows if r.allocator == "jemalloc"]
    assert decide.active_units([("c", "jemalloc")], alone, policy)[0] == {("c", "jemalloc")}
    active, why = decide.active_units([("c", "jemalloc")], alone, memory)
    assert not active and why[("c", "jemalloc")] == "it is in no comparison of creep, given_back, overhead (decide_on)"
    # stored in plan.json and read back; a plan.json from before the key decides as before
    stored = json.loads(json.dumps({"design": memory.to_json()}))
    assert Design.from_plan(stored).decide_on == memory.decide_on
    del stored["design"]["decide_on"]
    assert Design.from_plan(stored).decide_on == ()


def test_a_study_of_lives_that_decides_on_memory_says_what_more_rounds_would_decide(tmp_path):
    """Its subline estimates the rounds for its undecided memory verdict (not for throughput, which
    it tells as it stands), and the note under the verdicts says what the rounds went on for."""
    from alloclab.answers import analyse, sentences
    rng = np.random.default_rng(5)
    rows = []
    for r in range(1, 9):
        rows += [_row("glibc", r, creep=14.0, given=0.02, overhead=60 << 20, ops=1000.0),
                 _row("jemalloc", r, creep=0.3, given=0.5, overhead=(59 << 20) * (1 + 0.1 * rng.standard_normal()),
                      ops=1000.0 * (1 + 0.3 * rng.standard_normal()))]
    design = Design(questions=("allocators",), baseline="glibc", decide_on=tuple(m.name for m in LIFE_METRICS))
    study = analyse.Study(root=tmp_path, rows=rows, machine={"cpu_model": "Test CPU", "cores": 2, "kernel": "6.1"},
                          plan={"allocators": [{"name": "glibc"}, {"name": "jemalloc"}], "engines": ["mariadb-innodb"],
                                "design": design.to_json()},
                          schedule={"design": {"looks": [4, 8], "planned_rounds": 8}, "rounds": [{}] * 8})
    vs = {v.metric: v for v in study.verdicts()}
    assert vs["throughput"].verdict == "undecided" and vs["overhead"].verdict == "undecided", vs["overhead"]
    assert vs["creep"].verdict == "lower" and vs["given_back"].verdict == "higher"
    ans = sentences.build(study)
    to_decide = vs["overhead"].rounds_to_decide
    assert f"About {to_decide} more round(s) would decide the rest" in ans.subline, ans.subline
    assert "The rounds went on while comparisons of creep of settled RSS, share of a burst given back, RSS " \
           "over the engine's own account were undecided (plan key decide_on)" in sentences.to_markdown(ans)


def test_survived_or_killed_is_counted_over_rounds_paired_by_round():
    """glibc OOM-killed in 6 of 7 rounds, jemalloc in none: fewer kills (McNemar's exact test on
    the 6 discordant rounds, p = 1/32); tcmalloc killed in the same rounds as glibc: not told
    apart. The answer lines say it with the cycles the kills happened in."""
    from alloclab.answers import sentences
    killed = {1, 2, 3, 5, 6, 7}
    rows = [with_own(_row("glibc", r), oom_killed=r in killed, oom_cycle=4 if r in killed else None)
            for r in range(1, 8)]
    rows += [_row("jemalloc", r) for r in range(1, 8)]
    rows += [with_own(_row("tcmalloc", r), oom_killed=r in killed, oom_cycle=5 if r in killed else None)
             for r in range(1, 8)]
    k = life.kills({r.repeat: r.own.oom_killed for r in rows if r.allocator == "glibc"},
                   {r.repeat: r.own.oom_killed for r in rows if r.allocator == "jemalloc"})
    assert (k.rounds, k.base_killed, k.var_killed, k.only_base, k.p, k.word) == (7, 6, 0, 6, 1 / 32, "fewer kills")
    assert life.kills({1: True, 2: False}, {1: True, 2: False}).word == "not told apart"
    assert life.kills({1: False}, {1: False}).word == "none killed"
    policy = Design(questions=("allocators",), baseline="glibc", adaptive=False)
    speed = [v for v in decide.verdicts(rows, policy) if v.metric == "throughput"]
    by_unit = {}
    for r in rows:
        by_unit.setdefault((r.cell, r.allocator), []).append(r)
    said = sentences.survived(by_unit, speed)
    assert said.startswith("OOM-killed in rounds: glibc 6 of 7 (cycles 4, 4, 4, 4, 4, 4); ")
    assert "jemalloc 0 of 7, fewer kills (McNemar p = 0.031)" in said
    assert "tcmalloc 6 of 7 (cycles 5, 5, 5, 5, 5, 5), not told apart (McNemar p = 1)" in said
    assert sentences.survived(by_unit, speed[:0]) == ""
    calm = {u: [with_own(r, oom_killed=False) for r in rs] for u, rs in by_unit.items()}
    assert sentences.survived(calm, speed) == ""
    # a round's more runs of a unit (together.in_their_places) do not count as rounds: its first does
    more = {**by_unit, ("c", "jemalloc"): by_unit[("c", "jemalloc")] + [
        with_own(replace(_row("jemalloc", 7), index=99), oom_killed=True, oom_cycle=3)]}
    assert "jemalloc 0 of 7, fewer kills" in sentences.survived(more, speed)


def test_a_cycles_bursts_give_back_as_one():
    """After a warm-up cycle, a dump that takes 4 MiB, then a storm that takes 100 MiB, then idle
    that returns 50: the cycle gave back half of its excess (the dump's own share would count the
    storm's growth as kept), half of it within 2 s of the idle phase's start."""
    mib, hz = life.MIB, 20

    def rss(t):
        if t < 20:  # cycle 1 warms up: 60 MiB, a burst to 90, settled at 100
            return 60 if t < 10 else 90 if t < 12 else 100
        t -= 20
        if t < 10:
            return 100
        if t < 12:
            return 104
        if t < 14:
            return 104 + 96 * (t - 12) / 2
        return 200 if t < 14.05 else max(150, 200 - 25 * (t - 14))
    timeline = [(i / hz, int(rss(i / hz) * mib)) for i in range(44 * hz)]
    phases = [(1, "oltp", "steady", 0, 10), (1, "dump", "burst", 10, 12), (1, "rest", "idle", 12, 20),
              (2, "oltp", "steady", 20, 30), (2, "dump", "burst", 30, 32), (2, "storm", "burst", 32, 34.05),
              (2, "rest", "idle", 34.05, 44)]
    m = life.measure(timeline, phases)
    dump = next(g for g in m.given_back if g.burst == "dump" and g.cycle == 2)
    assert dump.share < -10  # its own share: the storm's growth counted against it
    f = life_runs.row_fields(m, None)
    assert f["given_back_share"] == pytest.approx(0.5, abs=0.01)
    assert f["half_given_back_s"] == pytest.approx(2.0, abs=0.1)
    assert f["given_back_bursts"] == 1  # cycle 2's (cycle 1 warms up)
    assert f["settled_rss_bytes"] == 150 * mib and f["life_cycles"] == 2 and f["oom_killed"] is False


def test_a_life_gives_back_mib_over_mib_not_a_mean_of_shares():
    """After a warm-up cycle, cycle 2: a burst of 40 MiB, none of it given back; cycle 3: one of
    2 MiB, all of it. The life gave back 2 of 42 MiB (a mean of the two shares would say half)."""
    mib, hz = life.MIB, 20
    shape = [(0, 10, 80), (10, 12, 120), (12, 20, 100),
             (20, 30, 100), (30, 32, 140), (32, 40, 140), (40, 42, 142), (42, 50, 140)]
    timeline = [(i / hz, int(next(v for a, b, v in shape if a <= i / hz < b) * mib)) for i in range(50 * hz)]
    phases = [(1, "load", "steady", 0, 10), (1, "swarm", "burst", 10, 12), (1, "rest", "idle", 12, 20),
              (2, "load", "steady", 20, 30), (2, "swarm", "burst", 30, 32), (2, "rest", "idle", 32, 40),
              (3, "swarm", "burst", 40, 42), (3, "rest", "idle", 42, 50)]
    m = life.measure(timeline, phases)
    assert [round(g.share, 2) for g in m.given_back] == [0.5, 0.0, 1.0]
    assert life_runs.row_fields(m, None)["given_back_share"] == pytest.approx(2 / 42, abs=1e-3)
    # a third cycle whose burst fits in what the allocator kept: nothing to give back, not in the share's base
    flat = [(t, v if t < 50 else 140 * mib) for t, v in timeline] + [(50 + i / hz, 140 * mib) for i in range(10 * hz)]
    f = life_runs.row_fields(life.measure(flat, phases + [(4, "swarm", "burst", 50, 52), (4, "rest", "idle", 52, 60)]),
                             None)
    assert f["given_back_bursts"] == 2 and f["given_back_share"] == pytest.approx(2 / 42, abs=1e-3)


def test_a_burst_gives_back_at_most_all_and_at_least_none_of_its_excess():
    """Cycle 2's idle returns 30 MiB after a burst of 10 (share 3: memory from before it), cycle 3's
    RSS grows 5 MiB more while idle after a burst of 10 (share −0.5): the life gave back 10 of 20
    MiB, not 25 (the raw shares, weighted): what the idle phases did beyond the bursts is creep's."""
    mib, hz = life.MIB, 20
    shape = [(0, 10, 80), (10, 12, 120), (12, 20, 130),
             (20, 30, 130), (30, 32, 140), (32, 40, 110), (40, 42, 120), (42, 43, 120), (43, 50, 125)]
    timeline = [(i / hz, int(next(v for a, b, v in shape if a <= i / hz < b) * mib)) for i in range(50 * hz)]
    phases = [(1, "load", "steady", 0, 10), (1, "swarm", "burst", 10, 12), (1, "rest", "idle", 12, 20),
              (2, "load", "steady", 20, 30), (2, "swarm", "burst", 30, 32), (2, "rest", "idle", 32, 40),
              (3, "swarm", "burst", 40, 42), (3, "rest", "idle", 42, 50)]
    m = life.measure(timeline, phases)
    assert [round(g.share, 2) for g in m.given_back[1:]] == [3.0, -0.5]  # each burst's own, as measured
    assert life_runs.row_fields(m, None)["given_back_share"] == pytest.approx(0.5, abs=1e-3)


def test_the_first_cycles_bursts_are_warm_up_left_out_of_the_lifes_share():
    """A burst with no idle phase before it is measured from the steady load of a server still
    filling its caches: shown with its share, marked warm-up, and left out of the life's share
    (counted, the 80 MiB the caches kept in cycle 1 would pull the life's share from 1 to a third)."""
    mib, hz = life.MIB, 20
    shape = [(0, 10, 100), (10, 12, 200), (12, 20, 180), (20, 30, 180), (30, 32, 200), (32, 40, 180)]
    timeline = [(i / hz, int(next(v for a, b, v in shape if a <= i / hz < b) * mib)) for i in range(40 * hz)]
    phases = [(c, name, kind, 20 * (c - 1) + a, 20 * (c - 1) + b) for c in (1, 2)
              for name, kind, a, b in (("load", "steady", 0, 10), ("swarm", "burst", 10, 12), ("rest", "idle", 12, 20))]
    m = life.measure(timeline, phases)
    first, second = m.given_back
    assert first.warmup and round(first.share, 2) == 0.2 and "warming up" in first.note
    assert not second.warmup and round(second.share, 2) == 1.0 and "warming" not in second.note
    assert life_runs.row_fields(m, None)["given_back_share"] == pytest.approx(1.0)
    one_cycle = life.measure(timeline[:20 * hz], phases[:3])
    assert life_runs.row_fields(one_cycle, None)["given_back_share"] is None


def test_a_life_that_starts_idle_still_warms_up_in_its_first_cycle():
    """Phases in the order idle, steady, burst: the first burst has an idle phase before it, but
    that idle is a cold server's: the first cycle is still warm-up."""
    mib, hz = life.MIB, 20
    shape = [(0, 15, 100), (15, 17, 200), (17, 32, 180), (32, 34, 200), (34, 49, 180), (49, 51, 200)]
    timeline = [(i / hz, int(next(v for a, b, v in shape if a <= i / hz < b) * mib)) for i in range(51 * hz)]
    phases = [(c, name, kind, 17 * (c - 1) + a, 17 * (c - 1) + b) for c in (1, 2, 3)
              for name, kind, a, b in (("rest", "idle", 0, 5), ("load", "steady", 5, 15), ("swarm", "burst", 15, 17))]
    m = life.measure(timeline, phases)
    first, second, last = m.given_back
    assert first.warmup and first.before_bytes == 100 * mib and "warming up" in first.note
    assert not second.warmup and second.before_bytes == 180 * mib and round(second.share, 2) == 1.0
    assert last.share is None  # no idle phase after it
    assert life_runs.row_fields(m, None)["given_back_share"] == pytest.approx(1.0)


def test_old_folders_load_without_other_workloads_columns():
    """A folder from before workloads owned their columns has every column in every row; read
    back, a key-value row has no life columns (no creep of None, no OOM kill of False)."""
    rows = Store(ROOT / "tests/fixtures/study-v1").rows()
    assert rows and all(r.value("creep_mib_per_cycle") is None and r.value("oom_killed") is None for r in rows)
    assert all(not hasattr(r.own, "life_cycles") for r in rows)


# --- real lives --------------------------------------------------------------------------------
def test_a_smoke_life_on_mariadb_records_its_phases_and_memory(tmp_path, found):
    raw = only(preset("memory-life", "smoke"), "mariadb-innodb", allocators=["glibc"])
    out = tmp_path / "res"
    res = study.run(plan.load(raw, default_seed=1), out, Progress(0, stream=io.StringIO(), live=False))
    (r,) = Store(out).rows()
    assert res.ok == 1 and r.status == "ok" and r.allocator_verified, r.reason
    j = json.loads((out / "runs" / r.run_id / "run.json").read_text())
    phases = j["life"]["phases"]
    assert [(p["cycle"], p["name"]) for p in phases] == [(c, n) for c in (1, 2, 3)
                                                         for n in ("oltp", "dump", "storm", "rest")]
    assert all(not p["cut"] for p in phases) and j["life"]["stopped"] is None
    # on the samples' clock, one after another, inside the sampled span
    samples = life.read_rss(out / "runs" / r.run_id)
    assert samples[0][0] <= phases[0]["t_start_s"] and phases[-1]["t_end_s"] <= samples[-1][0] + 0.1
    assert all(a["t_end_s"] <= b["t_start_s"] for a, b in zip(phases, phases[1:]))
    steady = [p for p in phases if p["kind"] == "steady"]
    assert all(p["t_end_s"] - p["t_start_s"] >= 3.0 and p["ops"] > 0 for p in steady)
    # the engine's account at the end of every phase: Memory_used and the buffer pool
    ends = [p["engine"] for p in phases if p["kind"] == "idle"]
    assert all(e["memory_used_bytes"] > e["engine_bytes"] > e["buffer_pool_data_bytes"] > 0 for e in ends)
    # and the allocator's own, read by the helper inside the server when the client opened each
    # phase's gate, inside the phase (after the engine's)
    for p in phases:
        acc = p["engine"]["allocator"]
        assert acc["allocator"] == "glibc" and acc["processes"] == 1, acc
        assert acc["resident_bytes"] >= acc["live_bytes"] > 0
    assert len({p["engine"]["allocator"]["live_bytes"] for p in phases}) > 1  # read anew each time
    measured = j["life"]["measured"]["ends"]
    assert all(e["alloc_kept_bytes"] == e["alloc_resident_bytes"] - e["alloc_live_bytes"] for e in measured)
    assert r.own.alloc_kept_bytes == int(measured[-1]["alloc_kept_bytes"])
    assert r.own.alloc_kept_growth_mib_per_cycle is not None
    # the window's own account at the life's end still comes (the final gate, after the phases')
    assert j["alloc_account"]["live_bytes"] > 0 and r.alloc_live_bytes > 0
    # the row's life, as answers.life measures the stored timeline
    assert r.own.life_cycles == 3 and r.own.settled_rss_bytes > 50 << 20
    assert r.own.oom_killed is False and r.own.oom_cycle is None
    # its creep once warm: cycles 2 and 3, a slope without an interval (a third warm cycle gives one)
    assert r.own.creep_mib_per_cycle is not None and r.own.creep_ci_low_mib_per_cycle is None
    assert r.own.overhead_bytes is not None and r.own.overhead_growth_mib_per_cycle is not None
    assert r.ops_per_s > 0 and r.ops == sum(p["ops"] for p in steady)
    whole = [(p["cycle"], p["name"], p["kind"], p["t_start_s"], p["t_end_s"]) for p in phases]
    again = life.measure(samples, whole)
    assert again.creep.slope_mib_per_cycle == pytest.approx(r.own.creep_mib_per_cycle, abs=1e-3)
    assert r.own.settled_rss_bytes == int(again.settled[-1][2])





def test_a_smoke_life_on_rocksdb_records_its_phases_and_both_accounts(tmp_path, found):
    """RocksDB inside the driver, open through the whole life: the phases on the samples' clock,
    RocksDB's own account (block cache, memtables, table readers) and the allocator's at the end
    of every phase, and the row's life measured from them."""
    raw = only(preset("memory-life", "smoke"), "rocksdb", allocators=["glibc", "jemalloc"])
    out = tmp_path / "res"
    res = study.run(plan.load(raw, default_seed=1), out, Progress(0, stream=io.StringIO(), live=False))
    rows = Store(out).rows()
    assert res.ok == 2 and all(r.status == "ok" and r.allocator_verified for r in rows), [r.reason for r in rows]
    for r in rows:
        run_dir = out / "runs" / r.run_id
        j = json.loads((run_dir / "run.json").read_text())
        phases = j["life"]["phases"]
        assert [(p["cycle"], p["name"]) for p in phases] == [(c, n) for c in (1, 2, 3)
                                                             for n in ("churn", "swarm", "compact", "rest")]
        samples = life.read_rss(run_dir)
        assert samples[0][0] <= phases[0]["t_start_s"] and phases[-1]["t_end_s"] <= samples[-1][0] + 0.1
        assert all(a["t_end_s"] <= b["t_start_s"] for a, b in zip(phases, phases[1:]))
        assert all(p["ops"] > 0 for p in phases if p["kind"] == "steady" or p["name"] == "swarm")
        for p in phases:  # RocksDB's account, its cache within its 16 MiB
            parts = p["engine"]["engine_parts"]
            assert set(parts) == {"block_cache_bytes", "memtables_bytes", "table_readers_bytes"}
            assert 0 < parts["block_cache_bytes"] <= 17 << 20 and parts["memtables_bytes"] > 0
            assert p["engine"]["engine_bytes"] == sum(parts.values())
        account = phases[-1]["engine"]["allocator"]
        assert account["resident_bytes"] >= account["live_bytes"] > 0 if r.allocator == "jemalloc" else \
            account["live_bytes"] > 0
        # the row: what was settled, and RSS over RocksDB's account, measured from the stored files
        assert r.own.life_cycles == 3 and r.own.settled_rss_bytes > phases[-1]["engine"]["engine_bytes"]
        assert r.own.overhead_bytes is not None and r.ops > 0 and not r.own.oom_killed
        assert r.cell.startswith("rocksdb/life/life/uniform/k16/v128-4096/n20000/c3:churn+swarm+compact+rest:")
        ends = j["life"]["measured"]["ends"]
        assert all(e["alloc_live_bytes"] is not None for e in ends), ends
        assert r.own.alloc_kept_bytes == int(ends[-1]["alloc_kept_bytes"]) > 0
    # the report's life table: one line per allocator, from runs.csv
    from alloclab.answers import analyse
    from alloclab.answers.lives import life_table
    t = life_table(analyse.load(out), rows)
    assert [x[2] for x in t.rows] == ["glibc", "jemalloc"] and all(x[11] != "–" for x in t.rows), t.rows
    # the limit it found, checked: the lives again under it, and 60 % below it, where the kernel kills
    # the driver (the engine inside it) for memory: an outcome at its cycle, never a failed run
    from alloclab.answers import sentences
    from alloclab.answers.lives import needed
    from alloclab.study import limits
    need = needed(rows)
    done = limits.check(out, below_pct=60, lives=1, progress=Progress(0, stream=io.StringIO(), live=False))
    assert all(d.failed == 0 and d.invalid == 0 and d.ok == 2 for d in done.values()), done
    s = analyse.load(out)
    below = {u: e for u, e in s.checks["below"].items()}
    assert {u: e["limit"] for u, e in below.items()} == {u: -(-int(b * 0.4) // 2**20) * 2**20 for u, b in need.items()}
    # killed, at the cycle its events reached (at 40 % of its need, often before the first: none)
    assert all(e["rows"][0].own.oom_killed and e["rows"][0].status == "ok" for e in below.values()), below
    assert {u: e["limit"] for u, e in s.checks["at"].items()} == {u: -(-b // 2**20) * 2**20 for u, b in need.items()}
    line = next(x for x in sentences.build(s).lines if "memory it needs" in x)
    assert line.count("(at it: ") == 2 and line.count(" MiB: 1 of 1 killed)") == 2, line
    assert Store(out).verify() == []  # the study's manifest covers them

# kept by the shim: 15.94 MiB/s in steps of 8 MiB, which fall anywhere in an idle phase's tail: the
# settled values scatter by a few MiB, as a real server's do, so that the interval is a real one
# (smooth steps gave one of ±0.1 MiB that the server's own creep and the sampler's delays under a
# busy CPU, 0.1-0.2 MiB per cycle, could miss)
KIB, PERIOD_S = 8160, 0.5


def creeping_life(tmp_path, driver_exe, shim, limit: str | None = None, cycles: int = 6):
    """One life of `cycles` cycles (1.5 s of light load, 2.5 s idle) on MariaDB under glibc with the
    creep shim preloaded into the server, run by the one runner (a shim that is no allocator
    would be refused by the study's preflight)."""
    raw = raw_life([STEADY, IDLE], cycles=cycles)
    if limit:
        raw["server_memory_bytes"] = limit
    spec = expand(plan.load(raw, default_seed=1))[0]
    spec = replace(spec, allocator=Allocator(name="glibc+creep", base="creep", path=str(shim), env=(
        ("ALLOCLAB_CREEP_KIB", str(KIB)), ("ALLOCLAB_CREEP_PERIOD_S", str(PERIOD_S)))))
    scratch = make_scratch()  # short: a unix socket's path has room for 107 bytes
    try:
        node = Node(driver_exe, scratch, tmp_path / "study", "life")
        run_dir = tmp_path / "study" / "runs" / spec.run_id
        row = node.run(spec, run_dir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert (run_dir / "run.json").exists(), row.reason
    return row, json.loads((run_dir / "run.json").read_text()), life.read_rss(run_dir)


def test_a_planted_creep_is_found_with_its_slope_inside_the_interval(tmp_path, driver_exe, creep_shim):
    row, j, samples = creeping_life(tmp_path, driver_exe, creep_shim)
    assert row.status == "ok" and row.allocator_verified, row.reason
    assert row.own.life_cycles == 6 and not row.own.oom_killed
    # the shim keeps a fixed amount per second, and cycles are not all equally long: what it kept
    # per cycle is its rate times the slope over cycles of the moments each settled value was read
    # (the median time of the samples in the last 20 % of each idle phase)
    idle = [p for p in j["life"]["phases"] if p["kind"] == "idle"]
    read_at = [statistics.median([t for t, _ in samples if p["t_end_s"] - life.SETTLE_SHARE * (
        p["t_end_s"] - p["t_start_s"]) <= t <= p["t_end_s"]]) for p in idle]
    seconds_per_cycle = np.polyfit(range(2, len(read_at) + 1), read_at[1:], 1)[0]  # once warm, as creep
    planted = KIB / 1024 / PERIOD_S * seconds_per_cycle
    # inside the interval: the row's is a 95 % one, which by its nature misses one time in twenty;
    # the same slope's 99 % interval from the stored settled values misses one in a hundred
    settled = [(c, v) for c, _, v in j["life"]["measured"]["settled"]]
    wide = life.creep(life.warm(settled), confidence=0.99)  # once warm, as the row's
    assert wide.slope_mib_per_cycle == pytest.approx(row.own.creep_mib_per_cycle, abs=1e-3)
    assert wide.ci_low_mib_per_cycle <= planted <= wide.ci_high_mib_per_cycle, (planted, wide, row)
    # and the interval is narrow enough to tell it (measured here: ±1.1 to ±1.7 MiB on 65 MiB)
    assert row.own.creep_ci_high_mib_per_cycle - row.own.creep_ci_low_mib_per_cycle < 0.2 * planted


def test_a_server_oom_killed_under_its_cgroup_limit_is_an_outcome_at_its_cycle(tmp_path, driver_exe, creep_shim):
    # about 100 MiB at start, 16 MiB more a second: 400 MiB are reached in the fourth or fifth cycle
    row, j, samples = creeping_life(tmp_path, driver_exe, creep_shim, limit="400MiB", cycles=8)
    assert row.status == "ok" and row.allocator_verified, row.reason  # an outcome, not a failed row
    oom = j["life"]["oom"]
    assert row.own.oom_killed and oom["killed"] and oom["kills"] == 1 and j["life"]["stopped"] == "the server went away"
    # the kill lies between two readings of the cgroup's counter, in the phase that held the
    # server's last sample: the timeline ends there
    cycle_of_last = next(p["cycle"] for p in j["life"]["phases"] if p["t_start_s"] <= samples[-1][0] <= p["t_end_s"])
    assert row.own.oom_cycle == oom["cycle"] == cycle_of_last and 3 <= row.own.oom_cycle <= 6, (row.own.oom_cycle, oom)
    assert oom["t_before_s"] <= oom["t_seen_s"] and samples[-1][0] <= oom["t_seen_s"] + 0.1
    # the cycles before it kept their settled RSS and creep, and the server's last RSS neared the limit
    assert row.own.life_cycles == row.own.oom_cycle - 1 and row.own.creep_mib_per_cycle > 30
    assert samples[-1][1] > 350 << 20 and j["life"]["server_memory_bytes"] == 400 << 20
    assert j["clean_shutdown"] is False


def test_the_start_line_names_each_margin_its_metric_has():
    assert metrics.margin_words(("creep", "given_back", "overhead"), 0.02) == \
        "±2 %; creep of settled RSS: ±1 MiB/cycle; share of a burst given back: ±5 points"
    assert metrics.margin_words((), 0.04) == metrics.margin_words((), 0.04, {"read"}) == "±4 %"
    assert metrics.margin_words((), 0.02, {"life"}) == \
        "±2 %; creep of settled RSS: ±1 MiB/cycle; share of a burst given back: ±5 points"


def test_a_plans_own_margin_for_a_metric_decides_its_verdicts_and_is_said():
    """margins_pct sets one metric's equivalence margin over its default and the study's: tcmalloc
    giving back 2-4 points more of a burst than glibc is undecided at given back's ±5 points and
    equivalent at ±10; the verdict keeps the margin it was decided at, and says it."""
    given = {"glibc": (0.00, 0.02, 0.01, 0.00, 0.03, 0.01, 0.00, 0.02),
             "tcmalloc": (0.09, 0.00, 0.06, 0.01, 0.07, 0.00, 0.05, 0.02)}
    rows = [_row(a, r + 1, creep=5.0, given=g[r], overhead=(100 + r) << 20) for a, g in given.items() for r in range(8)]
    fine = Design(questions=("allocators",), baseline="glibc", adaptive=False)
    coarse = replace(fine, margins=(("given_back", 0.10),))
    [at5] = [v for v in decide.verdicts(rows, fine) if v.metric == "given_back"]
    [at10] = [v for v in decide.verdicts(rows, coarse) if v.metric == "given_back"]
    assert 2 < at5.delta_pct < 4 and at5.ci_delta == at10.ci_delta and 5 < at5.ci_delta[1] < 10, at5.ci_delta
    assert (at5.verdict, at5.margin) == ("undecided", 0.05) and (at10.verdict, at10.margin) == ("equivalent", 0.10)
    assert "(undecided at the ±5 points margin)" in wording.short(at5)
    # the other metrics keep the study's margin (creep its own, in MiB a cycle); the plan's margin
    # for one of them is its own
    assert all(v.margin == {"creep": 1.0}.get(v.metric, 0.02) for v in decide.verdicts(rows, coarse)
               if v.metric != "given_back")
    assert metrics.margin_of("overhead", 0.05, (("given_back", 0.1),)) == 0.05
    assert metrics.margin_of("given_back", 0.05) == 0.05
    assert metrics.margin_of("overhead", 0.02, (("overhead", 0.04),)) == 0.04
    # the verdict note says each margin that is not the study's
    said = metrics.own_margins(["throughput", "given_back", "overhead", "given_back"], 0.02, (("overhead", 0.04),))
    assert said == (" Share of a burst given back: a difference in percentage points, decided when its interval "
                    "excludes 0, equivalent within ±5 points. RSS over the engine's own account: equivalent "
                    "within ±4 %.")
    # and, where the study's level allows it from some round on, the rule a share's interval follows
    said = metrics.own_margins(["given_back"], 0.02, (), stats.signed_rank_min_pairs(0.98726))
    assert ("a difference in percentage points, the median of the rounds' differences (Hodges-Lehmann) with the "
            "signed-rank interval from 8 rounds on (before, the mean with its t interval), decided") in said


@pytest.mark.parametrize("bad, said", [
    ({"given_bak": 10}, "margins_pct: unknown key(s) given_bak"),
    ({"overhead": 0}, "margins_pct.overhead: must be above 0 and at most 100"),
    ({"overhead": "5%"}, "margins_pct.overhead: expected a percentage"),
    (5, "margins_pct: expected a table"),
])
def test_a_plans_margins_are_checked_before_any_work(bad, said):
    raw = {**preset("memory-life", "smoke"), "margins_pct": bad}
    with pytest.raises(AlloclabError) as e:
        plan.load(raw, found_allocators=_every_allocator())
    assert said in str(e.value), str(e.value)


def test_side_by_side_the_decided_keep_an_undecided_cells_lives_company():
    """memory-life's RocksDB glibc gave back ~2 % of a burst beside five other lives and ~17 % beside
    two: side by side, a run's company is part of what it measures, so every allocator of a cell
    runs while any of its comparisons is open (together.company), but one that keeps failing; a cell
    whose comparisons are all decided stops whole."""
    policy = Design(questions=("allocators",), baseline="glibc", adaptive=True, looks=(4, 8),
                    decide_on=tuple(m.name for m in LIFE_METRICS))
    jitter = (1.0, 1.03, 0.98, 1.01)
    rows = []
    for cell, engine, open_given in (("c", "mariadb-innodb", (0.02, 0.30, 0.01, 0.25)), ("d", "rocksdb", None)):
        for r in range(1, 5):
            j = jitter[r - 1]
            rows += [replace(_row("glibc", r, creep=14.0 * j, given=0.02 * j, overhead=int((60 << 20) * j)), cell=cell,
                             engine=engine, run_id=f"{cell}-glibc-{r}"),
                     replace(_row("jemalloc", r, creep=0.3 * j, given=0.6 * j, overhead=int((30 << 20) * j)), cell=cell,
                             engine=engine, run_id=f"{cell}-jemalloc-{r}"),
                     replace(_row("tcmalloc", r, creep=0.5 * j, given=(open_given[r - 1] if open_given else 0.5 * j),
                                  overhead=int((40 << 20) * j)), cell=cell, engine=engine,
                                  run_id=f"{cell}-tcmalloc-{r}")]
    # mimalloc failed twice in cell c: it keeps no company
    rows += [replace(_row("mimalloc", r), cell="c", run_id=f"c-mimalloc-{r}", status="failed", reason="crashed")
             for r in (3, 4)]
    units = [(c, a) for c in ("c", "d") for a in ("glibc", "jemalloc", "tcmalloc")] + [("c", "mimalloc")]
    active, why = decide.active_units(units, rows, policy)
    assert active == {("c", "glibc"), ("c", "tcmalloc")}, (active, why)
    assert together.company(units, active, why) == {("c", "jemalloc")}
    assert why[("c", "mimalloc")] == decide.FAILING
    assert together.company(units, set(), why) == set()
    # the whole round at once (memory-life quick: both engines' lives together): the decided cell
    # keeps the open one company too, so every life shares the machine with the same eleven
    assert together.company(units, active, why, whole_round=True) == \
        {("c", "jemalloc"), ("d", "glibc"), ("d", "jemalloc"), ("d", "tcmalloc")}
    assert together.company(units, set(), why, whole_round=True) == set()


def test_a_decided_allocators_place_goes_to_more_runs_of_the_undecided():
    """memory-life quick: after the looks, two arenas − glibc given back on RocksDB was the last
    comparison open, beside ten decided lives as company. The four decided RocksDB lives' places go to
    two more places each of glibc and two arenas (together.in_their_places), so the cell still runs
    twelve lives at once (two places each, runs_per_round) and the open comparison gets six runs of
    each a round, averaged to one pair per round;
    MariaDB's and PostgreSQL's cells, all decided, keep their lives as company."""
    from alloclab.catalog.allocators import GLIBC_TWO_ARENAS
    from alloclab.study import rounds
    quick = plan.load(preset("memory-life", "quick"), default_seed=1, found_allocators=_every_allocator())
    cells = {c.engine: c.key for c in quick.beside()}  # the lives (their steady loads alone take turns after)
    jitter = (1.0, 1.03, 0.98, 1.01)
    rows = []
    for engine, key in cells.items():
        for r in range(1, 5):
            j = jitter[r - 1]
            for i, a in enumerate(x.name for x in quick.allocators):
                given = (0.02 * j if a == "glibc" else
                         (0.05, 0.45, 0.02, 0.30)[r - 1] if (engine, a) == ("rocksdb", GLIBC_TWO_ARENAS) else 0.6 * j)
                rows.append(replace(_row(a, r, creep=(14.0 if a == "glibc" else 0.3 + 0.1 * i) * j, given=given,
                                         overhead=int(((60 if a == "glibc" else 30 - i) << 20) * j)),
                                    cell=key, engine=engine, run_id=f"{engine}-{a}-{r}", index=len(rows)))
    sched = rounds.Schedule(rounds=[{"round": r, "runs": []} for r in range(1, 5)],
                            design={"planned_rounds": 8, "looks": [4, 8], "basis": "test"})
    said = io.StringIO()
    specs = rounds._next_round(quick, sched, rows, Progress(0, stream=said, live=False))
    alone = [s for s in specs if s.slice_s]  # the steady loads alone, not measured yet: all of them, in turns
    # (MariaDB's: two servers of each allocator)
    assert len(alone) == 24 and all(s.cell.part == "speed" for s in alone) and specs[-24:] == alone
    specs = specs[:-24]
    got = {}
    for s in specs:
        got.setdefault((s.cell.engine, s.allocator.name), []).append(s)
    open_ = {("rocksdb", "glibc"), ("rocksdb", GLIBC_TWO_ARENAS)}
    # each RocksDB allocator has two places a round (runs_per_round): the open ones take the
    # decided ones' two each, six runs a round
    assert {u for u, ss in got.items() if len(ss) == 6} == open_, {u: len(ss) for u, ss in got.items()}
    assert {u for u in got if u[0] == "rocksdb"} == open_  # the decided RocksDB lives gave their places
    # company kept: MariaDB's one life of each, PostgreSQL's two pools of each (runs_per_round)
    for server, n in (("mariadb-innodb", 1), ("postgres", 2)):
        assert sorted(len(ss) for u, ss in got.items() if u[0] == server) == [n] * 6
    assert len(specs) == 30 and len({s.run_id for s in specs}) == 30
    assert [len(g) for g in interleave.groups(specs)] == [30]  # still the whole round at once
    # each allocator's k-th run on the same keys; another seed for each k
    for k in range(6):
        assert len({s.seed for u in open_ for s in got[u] if s.copy == k}) == 1
    assert len({s.seed for s in got[("rocksdb", "glibc")]}) == 6
    assert "8 more run(s) of them in decided ones' places, 12 decided beside them as company" in said.getvalue()
    # the round's three runs of a unit are one pair: their mean
    more = [replace(_row(a, 5, given=g), cell=cells["rocksdb"], engine="rocksdb", run_id=f"x-{a}-{g}", index=100 + i)
            for i, (a, g) in enumerate([("glibc", 0.0), ("glibc", 0.03), ("glibc", 0.06),
                                        (GLIBC_TWO_ARENAS, 0.1), (GLIBC_TWO_ARENAS, 0.4), (GLIBC_TWO_ARENAS, 0.1)])]
    groups = decide._groups(rows + more, GIVEN_BACK)
    rocks = next(c for c in groups if c[0] == "rocksdb")
    assert groups[rocks]["glibc"][(5, "")] == pytest.approx(0.03)
    assert groups[rocks][GLIBC_TWO_ARENAS][(5, "")] == pytest.approx(0.2)
    v = next(v for v in decide.verdicts(rows + more, quick.design, [GIVEN_BACK])
             if v.engine == "rocksdb" and v.var_unit[1] == GLIBC_TWO_ARENAS)
    assert v.n_pairs == 5
    assert decide.more_runs(rows + more) == 4
    # an uneven share stays company: three places, two open units, one more run each
    units = [("c", a) for a in "abcde"]
    assert together.in_their_places(units, {("c", "a"), ("c", "b")}, {("c", "c"), ("c", "d"), ("c", "e")}) == \
        ({("c", "a"): 1, ("c", "b"): 1}, {("c", "e")})
    assert together.in_their_places(units, set(), {("c", "c")}) == ({}, {("c", "c")})


def test_a_cells_runs_per_round_are_its_places_not_runs_in_decided_ones_places():
    """runs_per_round = 2: every round measures each allocator of the cell twice (their mean is the
    round's value); only runs beyond those two took a decided allocator's place, and a study's
    runs at once count both (analyse.Study.side_by_side)."""
    from alloclab.answers.analyse import Study
    two = [replace(_row(a, r, given=g), run_id=f"{a}-{r}-{k}", index=10 * r + k)
           for r in (1, 2) for a, g in (("glibc", 0.02), ("jemalloc", 0.5)) for k in (0, 1)]
    assert decide.places(two) == {"c": 2} and decide.more_runs(two) == 0
    # four runs of glibc in a round are two beyond its places (in a decided allocator's)
    more = [replace(_row("glibc", 3, given=0.02), run_id=f"g-3-{k}", index=30 + k) for k in range(4)]
    assert decide.more_runs(two + more) == 2
    groups = decide._groups(two, GIVEN_BACK)
    assert groups[next(iter(groups))]["jemalloc"][(1, "")] == pytest.approx(0.5)
    study = Study(root=Path("."), rows=two, machine={},
                  plan={"side_by_side": 4, "allocators": [{"name": "glibc"}, {"name": "jemalloc"}]})
    assert study.side_by_side == 4
    assert study.where().endswith(", a cell's runs 4 at a time, side by side, 2 runs of each allocator a round on "
                                  "mariadb-innodb")
    assert decide.places([_row("glibc", 1)]) == {"c": 1} and decide.more_runs([_row("glibc", 1)]) == 0
    # a life preset's steady loads alone (their workload's turns), without the lives: nothing ran
    # side by side, whatever the plan's side_by_side, and the method note says turns
    from alloclab.answers.context import method_note
    sched = {"rounds": [{"runs": [{"cell_key": "c", "cell": {"engine": "mariadb-innodb"}, "purpose": "measure",
                                   "slice_s": 0.5, "side_by_side": 1} for _ in range(2)]}]}
    alone = Study(root=Path("."), rows=two, machine={}, schedule=sched,
                  plan={"side_by_side": 24, "allocators": [{"name": "glibc"}, {"name": "jemalloc"}]})
    assert alone.side_by_side == 1
    assert alone.where().endswith(", runs in turns of 0.5 s, 2 runs of each allocator a round on mariadb-innodb")
    assert "(the runs of a cell in one round measured in turns of 0.5 s)" in method_note(alone, [])
    # an engine whose parts differ in their places names the part (memory-life: MariaDB's one life
    # of each allocator a round, two servers of each for its steady load)
    lives = [replace(_row(a, 1), cell="life", part="life", run_id=f"l-{a}", index=90 + i)
             for i, a in enumerate(("glibc", "jemalloc"))]
    mixed = Study(root=Path("."), rows=[replace(r, part="speed") for r in two] + lives, machine={}, schedule=sched,
                  plan={"side_by_side": 24, "allocators": [{"name": "glibc"}, {"name": "jemalloc"}]})
    assert mixed.where().endswith(", 2 runs of each allocator a round on mariadb-innodb (speed)")


def test_the_life_headline_says_which_machine_a_per_machine_answer_is_from():
    """A comparison whose machines disagree is answered per machine (analyse.Study.verdicts; a
    study resumed by another alloclab commit counts as another machine): its life in the headline
    says on which, as the lines under it do, rather than naming the engine twice."""
    from alloclab.answers import sentences
    from alloclab.answers.lives import life_headline
    policy = Design(questions=("allocators",), baseline="glibc", adaptive=False)
    rows = [_row("glibc", r, creep=14.0 + r % 2, given=0.02, overhead=(60 + r) << 20) for r in range(1, 6)]
    rows += [_row("jemalloc", r, creep=0.3, given=0.45 + 0.01 * r, overhead=(30 + r) << 20) for r in range(1, 6)]
    vs = decide.verdicts(rows, policy, LIFE_METRICS)
    lives = {}
    for v in vs + [replace(v, machine="node-b") for v in vs]:
        lives.setdefault(sentences._question(v), {}).setdefault(v.metric, []).append(v)
    said = life_headline(lives, {}, "here", "")
    assert said.startswith("Leanest without a decided slowdown (RSS over the engine's account): "
                           "mariadb-innodb jemalloc −"), said
    assert "; mariadb-innodb on node-b alone jemalloc −" in said and "6 of 6 verdicts decided; here." in said


def test_a_units_more_runs_in_a_round_count_as_that_round():
    """A unit's more runs in one round (together.in_their_places) are one round wherever rounds are
    counted: its valid rounds against min_runs, its failing (two rounds in a row without a valid
    run, not two runs of one round), the round's wall time (the longest of its runs side by side),
    and the host's state that a comparison's speed is read against (every run of the round but
    the two units' own, their more runs too)."""
    from alloclab.answers import dependence
    from alloclab.study import pace
    ok = [_row("glibc", 1), replace(_row("glibc", 2), index=20),
          replace(_row("glibc", 2), index=21, run_id="glibc-2-c1", status="failed", reason="crashed"),
          replace(_row("glibc", 3), index=30, status="failed", reason="crashed"),
          replace(_row("glibc", 3), index=31, run_id="glibc-3-c1", status="failed", reason="crashed")]
    st = decide.unit_states(ok)[("c", "glibc")]
    assert (st.n_valid, st.attempts, st.failing) == (2, 3, False)
    four = replace(_row("glibc", 4), index=40, status="failed", reason="crashed")
    st = decide.unit_states(ok + [four])[("c", "glibc")]
    assert st.failing  # rounds 3 and 4 without a valid run
    st = decide.unit_states([_row("glibc", 1), replace(_row("glibc", 1), index=2, run_id="g-1-c1", status="failed",
                                                       reason="x"),
                             replace(_row("glibc", 1), index=3, run_id="g-1-c2", status="failed", reason="x")])
    assert not st[("c", "glibc")].failing  # two failed runs of one round are not two rounds
    # the round's wall: its runs side by side, the longest of each group (a copy's too)
    quick = plan.load(preset("memory-life", "quick"), default_seed=1, found_allocators=_every_allocator())
    key = quick.cells()[0].key
    walls = [replace(_row(a, 5), cell=key, wall_s=w, index=i, run_id=f"w{i}")
             for i, (a, w) in enumerate([("glibc", 100.0), ("jemalloc", 101.0), ("glibc", 130.0)])]
    assert pace._round_wall(quick, walls, 5) == 130.0
    # the host's state of a round for glibc vs jemalloc: tcmalloc's run, not glibc's second one
    runs = []
    for r in range(1, 4):
        runs += [replace(_row("glibc", r, ops=1000.0 * r), index=10 * r, run_id=f"g{r}"),
                 replace(_row("glibc", r, ops=5000.0 * r), index=10 * r + 1, run_id=f"g{r}-c1"),
                 replace(_row("jemalloc", r, ops=1000.0 * r), index=10 * r + 2, run_id=f"j{r}"),
                 replace(_row("tcmalloc", r, ops=1000.0 * r), index=10 * r + 3, run_id=f"t{r}")]
    states = dependence.round_states(runs)
    f = next(f for f in dependence.findings(runs, "glibc") if f.variant == "jemalloc")
    assert [x for x, _y in f.points] == pytest.approx([states[(r, "")][("c", "tcmalloc", f"t{r}")]
                                                       for r in range(1, 4)])


def test_the_first_pictures_panels_follow_the_plans_engines_not_the_order_runs_ended():
    """ml-quick-h1 drew MariaDB's life first and ml-quick-h3 RocksDB's (whose first run ended
    first): the first screen's panels follow the plan's engines."""
    from types import SimpleNamespace
    rows = []
    for engine, key in (("rocksdb", "d"), ("mariadb-innodb", "c")):
        for a in ("glibc", "jemalloc"):
            rows.append(replace(_row(a, 1), cell=key, engine=engine, run_id=f"{engine}-{a}", pattern="c3:x:1",
                                index=len(rows)))
    study = SimpleNamespace(engines=["mariadb-innodb", "rocksdb"], allocators=["glibc", "jemalloc"], baseline="glibc",
                            run_json=lambda run_id: {"life": {"phases": [{"t_start_s": 0.0, "t_end_s": 1.0,
                                                                          "kind": "idle"}]}},
                            samples=lambda run_id, name="samples.csv": [{"t_s": 0.0, "rss_bytes": 1 << 20}])
    lives = life_workload.LIFE_WORKLOAD.section_data(study, rows)["lives"]
    assert [x["title"].split(":")[0] for x in lives] == ["mariadb-innodb", "rocksdb"]


def test_overhead_is_the_median_of_the_idle_ends_once_warm():
    """RSS over the engine's account is read at the idle ends from cycle 2 on, their median: one
    end's reading depends on where the allocator's purging stood (PostgreSQL's pool under mimalloc,
    machine-g: 27, 55, 39 and 29 MiB over its account at one life's four idle ends), and the first
    cycle is the engine's warm-up."""
    mib = 2**20

    def lived(overs):
        ends = [life.IdleEnd(c, "rest", 100.0 * mib, 12.0 * mib, None if v is None else v * mib)
                for c, v in enumerate(overs, start=1)]
        return life.Life([(e.cycle, e.phase, e.rss_bytes) for e in ends], life.creep([]), [], ends,
                         life.overhead(ends))

    assert life_runs.row_fields(lived([27.2, 55.3, 39.4, 28.9]), None)["overhead_bytes"] == int(39.4 * mib)
    assert life_runs.row_fields(lived([14.8, 33.3, 33.2, 33.5]), None)["overhead_bytes"] == int(33.3 * mib)
    # a life killed in its first cycle, or whose later ends were not read, keeps the ends it has
    assert life_runs.row_fields(lived([20.0]), None)["overhead_bytes"] == 20 * mib
    assert life_runs.row_fields(lived([None, 30.0, None]), None)["overhead_bytes"] == 30 * mib
    assert life_runs.row_fields(lived([None, None]), None)["overhead_bytes"] is None
