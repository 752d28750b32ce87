"""A memory answer's price in speed: each life's steady load alone, its allocators in turns (a
workload's own slice_s) beside lives side by side; the lives' throughput told, never decided on;
the leanest setting that costs no speed and the leanest overall with its price; the frontier."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from test_life_workload import _every_allocator, _row

from alloclab import cli, plan
from alloclab.answers import decide
from alloclab.answers.lives import choose, frontier, life_headline
from alloclab.core.errors import AlloclabError
from alloclab.plan import flags
from alloclab.plan.design import Design
from alloclab.plan.presets import preset
from alloclab.run import interleave
from alloclab.workloads.kv import KV
from alloclab.workloads.life_runs import LIFE_METRICS

SPEED = "mariadb-innodb/speed/sysbench/oltp_read_write/native/4x20000/t16/life"


def _quick():
    return plan.load(preset("memory-life", "quick"), default_seed=1, found_allocators=_every_allocator())


def test_a_workloads_own_turns_run_after_the_rounds_lives_side_by_side():
    """memory-life quick: the round's lives all at once (one stretch side by side), then each
    engine's steady load alone, its allocators in turns of 0.1 s, one cell after another; the
    lives' throughput is told where their engine's speed is measured in turns."""
    p = _quick()
    assert p.turns() == {c.key: 0.1 for c in p.cells() if c.part == "speed"} and len(p.turns()) == 3
    assert p.whole_round and {c.part for c in p.beside()} == {"life"}
    assert p.told() == frozenset(c.key for c in p.beside())
    specs = p.round_specs(1, None, 1)
    groups = interleave.groups(specs)
    # MariaDB's twelve: two servers of each allocator (runs_per_round), all in turns together
    assert sorted(len(g) for g in groups[1:]) == [6, 6, 12] and len(groups[0]) == 30
    assert next(g for g in groups if len(g) == 12)[0].cell.key == SPEED
    assert {s.cell.part for s in groups[0]} == {"life"} and all(s.whole_round and s.side_by_side == 30
                                                                 for s in groups[0])
    for g in groups[1:]:
        assert len({s.cell.key for s in g}) == 1 and all(s.slice_s == 0.1 and s.side_by_side == 1 and
                                                         not s.whole_round for s in g)
    # the speed cells run on the life's server settings, on the life's data
    speed = next(c for c in p.cells() if c.key == SPEED)
    assert speed.profile == "life" and speed.params.tables == 4 and speed.params.table_size == 20_000
    rocks = next(c for c in p.cells() if c.part == "speed" and c.engine == "rocksdb")
    assert rocks.params.value_bytes_min == 128 and "--value-bytes-min" in KV.driver_args(rocks)
    # a round's wall time: the lives' longest, then each turns cell's longest
    key = p.beside()[0].key
    rows = [replace(_row(a, 1), cell=key, wall_s=w, index=i, run_id=f"l{i}") for i, (a, w) in
            enumerate([("glibc", 100.0), ("jemalloc", 120.0)])]
    rows += [replace(_row(a, 1), cell=SPEED, wall_s=w, index=10 + i, run_id=f"s{i}") for i, (a, w) in
             enumerate([("glibc", 40.0), ("jemalloc", 41.0)])]
    from alloclab.study import pace
    assert pace._round_wall(p, rows, 1) == 161.0


def test_turns_of_a_workload_are_checked_as_the_plans_and_slice_overrides_them():
    """A life cannot take turns (it counts cycles, not a window in seconds); a workload's profile beside the
    plan's profiles is refused; `--slice` says how every cell is measured (the workloads' own
    turns and side by side go)."""
    raw = preset("memory-life", "quick")
    bad = {**raw, "workloads": [{**raw["workloads"][0], "slice_s": 0.5}]}
    with pytest.raises(AlloclabError, match="slice_s: turns cut a window in seconds; the cell mariadb-innodb/life/"):
        plan.load(bad, default_seed=1, found_allocators=_every_allocator())
    bad = {**raw, "profiles": {"life": {}}}
    with pytest.raises(AlloclabError, match=r"workloads\[3\].profile: the plan names its own profiles"):
        plan.load(bad, default_seed=1, found_allocators=_every_allocator())
    bad = {**raw, "workloads": [{**raw["workloads"][3], "profile": "nosuch"}]}
    with pytest.raises(AlloclabError, match="no mariadb profile 'nosuch'"):
        plan.load(bad, default_seed=1, found_allocators=_every_allocator())
    a = cli.parser().parse_args(["run", "--preset", "memory-life", "--workloads", "speed", "--slice", "0",
                                 "--runs", "1"])
    raw = flags.plan_dict(a)
    assert "side_by_side" not in raw and not any("slice_s" in w for w in raw["workloads"])
    p = plan.load(raw, default_seed=1, found_allocators=_every_allocator())
    assert p.turns() == {} and {c.part for c in p.cells()} == {"speed"}


def _vs(rows):
    return decide.verdicts(rows, Design(questions=("allocators",), baseline="glibc", adaptive=False),
                           LIFE_METRICS)


def _lives_and_price(speed_of: dict[str, float]):
    """Lives of glibc, jemalloc (lean) and a leaner tuning; their steady speed alone planted."""
    rows = []
    for r in range(1, 7):
        rows += [_row("glibc", r, creep=14.0, given=0.02, overhead=(100 + r) << 20),
                 _row("jemalloc", r, creep=1.0, given=0.5, overhead=(60 + r % 2) << 20),
                 _row("jemalloc+decay0", r, creep=1.0, given=0.9, overhead=(30 + r % 2) << 20)]
    lived: dict = {}
    for v in _vs(rows):
        lived.setdefault(v.metric, []).append(v)
    speed = [replace(_row(a, r, ops=ops * (1 + 0.002 * (r % 3))), cell=SPEED, part="speed", workload="sysbench",
                     run_id=f"{a}-{r}-speed")
             for r in range(1, 7) for a, ops in (("glibc", 1000.0), *speed_of.items())]
    price = [v for v in decide.verdicts(speed, Design(questions=("allocators",), baseline="glibc", adaptive=False))
             if v.metric == "throughput"]
    return lived, price


def test_the_leanest_that_costs_no_speed_and_the_leanest_overall_with_its_price():
    lived, price = _lives_and_price({"jemalloc": 1000.0, "jemalloc+decay0": 600.0})
    c = choose(lived, price)
    assert c.leanest.variant == "jemalloc+decay0" and c.leanest_price.verdict == "slower"
    assert c.free.variant == "jemalloc" and c.free_price.verdict == "equivalent"
    f = frontier(lived, price)
    assert f["free"] == "jemalloc" and f["leanest"] == "jemalloc+decay0" and f["speed_alone"]
    pts = {p.variant: p for p in f["points"]}
    assert pts["jemalloc+decay0"].x < pts["jemalloc"].x < 0 and pts["jemalloc+decay0"].y == pytest.approx(-40, abs=1)
    from alloclab.answers import sentences
    lives = {sentences._question(lived["overhead"][0]): lived}
    q = next(iter(lives))
    said = life_headline(lives, {q: price}, "AMD EPYC, 2 cores", "")
    assert said == ("Leanest without a decided slowdown (RSS over the engine's account): mariadb-innodb jemalloc "
                    "−42 %, leaner at a price jemalloc+decay0 −71 % for −40 % speed. 8 of 8 verdicts "
                    "decided; AMD EPYC, 2 cores."), said
    # where the leanest costs nothing, one name per engine; three engines stay within 40 words
    lived, price = _lives_and_price({"jemalloc": 1000.0, "jemalloc+decay0": 1001.0})
    assert choose(lived, price).free is choose(lived, price).leanest
    three = {}
    for engine in ("mariadb-innodb", "rocksdb", "postgres"):
        moved = {m: [replace(v, engine=engine) for v in got] for m, got in lived.items()}
        three[sentences._question(moved["overhead"][0])] = moved
    said = life_headline(three, dict.fromkeys(three, price), "AMD EPYC, 2 cores", "")
    assert "leaner at a price" not in said and len(said.split()) <= 40, said
    # a price not decided yet says how far the speed may still lie, never "no slower"
    vague = [replace(v, verdict="undecided", ci_low=0.80, ci_high=1.15) for v in price]
    said = life_headline(three, dict.fromkeys(three, vague), "AMD EPYC, 2 cores", "")
    assert said.count("(speed ±20 %)") == 3 and len(said.split()) <= 40, said
    # o1's shape: three engines, one leaner at a price, two free ones whose speed is open: the open
    # prices leave the sentence (the Answers' lines keep them), the decided price stays
    lived_p, price_p = _lives_and_price({"jemalloc": 1000.0, "jemalloc+decay0": 600.0})
    vague_p = [replace(v, verdict="undecided", ci_low=0.80, ci_high=1.15) if v.variant == "jemalloc" else v
               for v in price_p]
    mixed = {sentences._question(lived_p["overhead"][0]): lived_p}
    for engine in ("rocksdb", "postgres"):
        mixed[sentences._question(replace(lived["overhead"][0], engine=engine))] = {
            m: [replace(v, engine=engine) for v in got] for m, got in lived.items()}
    prices = {q: (vague_p if q[1] == "mariadb-innodb" or q[2] == "mariadb-innodb" else vague) for q in mixed}
    said = life_headline(mixed, prices, "AMD EPYC, 2 cores", "")
    assert len(said.split()) <= 40 and "(speed ±" not in said, said
    assert "mariadb-innodb jemalloc −42 %, leaner at a price jemalloc+decay0 −71 % for −40 % speed;" in said, said


def test_a_lives_throughput_beside_its_speed_in_turns_is_told_and_never_keeps_rounds_going():
    """Side by side, a life's throughput is a share of the machine: where its engine's speed is
    measured alone in turns (Plan.told), its undecided throughput keeps no unit running."""
    policy = Design(questions=("allocators",), baseline="glibc", adaptive=False, decide_on=(
        "creep", "given_back", "overhead", "throughput"))
    rows = []
    for r in range(1, 7):  # memory decided; throughput all over the place
        rows += [_row("glibc", r, creep=14.0, given=0.02, overhead=(100 + r) << 20, ops=1000.0 * (1 + (r % 3))),
                 _row("jemalloc", r, creep=1.0, given=0.5, overhead=(60 + r % 2) << 20, ops=1000.0 * (1 + (r % 2)))]
    units = [("c", "glibc"), ("c", "jemalloc")]
    active, _ = decide.active_units(units, rows, policy)
    assert active == set(units)  # the life's own throughput is undecided
    active, why = decide.active_units(units, rows, policy, told=frozenset({"c"}))
    assert active == set() and all("decided" in w for w in why.values())


def test_the_study_reads_how_its_cells_ran_from_rounds_json():
    from alloclab.answers.analyse import Study
    spec = lambda key, engine, t, side: {"cell_key": key, "cell": {"engine": engine}, "slice_s": t,  # noqa: E731
                                         "side_by_side": side, "purpose": "measure"}
    sched = {"rounds": [{"runs": [spec("life-m", "mariadb-innodb", 0.0, 24), spec("life-r", "rocksdb", 0.0, 24),
                                  spec(SPEED, "mariadb-innodb", 0.5, 1)]}]}
    st = Study(root=SimpleNamespace(), rows=[], plan={"side_by_side": 24}, machine={}, schedule=sched)
    assert st.turns() == {SPEED: 0.5} and st.told() == frozenset({"life-m"})
    assert st.side_rounds() == 0  # the lives ran in every round
    # the lives' runs finished in round 1 only, the steady load's in rounds 1 and 2 (a round drawn
    # and never run counts for neither)
    rows = [replace(_row("glibc", 1), cell="life-m"), replace(_row("glibc", 1), cell=SPEED),
            replace(_row("glibc", 2), cell=SPEED)]
    sched["rounds"].append({"round": 3, "runs": sched["rounds"][0]["runs"]})
    st = Study(root=SimpleNamespace(), rows=rows, plan={"side_by_side": 24}, machine={}, schedule=sched)
    assert st.side_rounds() == 1 and "(the lives in round 1 only)" in st.where()
    assert Study(root=SimpleNamespace(), rows=rows[:2], plan={"side_by_side": 24}, machine={},
                 schedule=sched).side_rounds() == 0


def _lives_then_steady(tmp_path, jemalloc_creep: list[float]):
    """A study of MariaDB's lives in rounds 1-4 (side by side; glibc creeps 14 MiB a cycle, jemalloc
    `jemalloc_creep`, its overhead scattered: undecided after 4 rounds) and its steady load alone in
    turns of 0.1 s in rounds 1-8 (its throughput scattered: undecided after 8), one look at round 8."""
    import numpy as np

    from alloclab.answers import analyse
    rng = np.random.default_rng(3)
    rows = []
    for r, creep in zip(range(1, 5), jemalloc_creep):
        rows += [_row("glibc", r, creep=14.0, given=0.02, overhead=60 << 20),
                 _row("jemalloc", r, creep=creep, given=0.5,
                      overhead=int((59 << 20) * (1 + 0.1 * rng.standard_normal())))]
    for r in range(1, 9):  # the steady load's throughput scatters: undecided after 8
        rows += [replace(_row(a, r, ops=1000.0 * (1 + 0.15 * rng.standard_normal())), run_id=f"s-{a}-{r}", cell=SPEED,
                         part="speed", workload="sysbench") for a in ("glibc", "jemalloc")]
    spec = lambda key, t, side: {"cell_key": key, "cell": {"engine": "mariadb-innodb"}, "slice_s": t,  # noqa: E731
                                 "side_by_side": side, "purpose": "measure"}
    design = Design(questions=("allocators",), baseline="glibc",
                    decide_on=("creep", "given_back", "overhead", "throughput"))
    st = analyse.Study(root=tmp_path, rows=rows, machine={"cpu_model": "Test CPU", "cores": 2, "kernel": "6.1"},
                       plan={"allocators": [{"name": "glibc"}, {"name": "jemalloc"}], "engines": ["mariadb-innodb"],
                             "design": design.to_json(), "side_by_side": 2},
                       schedule={"design": {"looks": [8], "planned_rounds": 8},
                                 "rounds": [{"round": r, "runs": [spec("c", 0.0, 2), spec(SPEED, 0.1, 1)]}
                                            for r in range(1, 9)]})
    return st


def test_a_lives_open_verdict_counts_rounds_of_lives_and_a_resume_is_not_said_to_decide_it(tmp_path):
    """The lives ran in rounds 1-4 (side_by_side_rounds), the steady load alone in turns in rounds
    1-8. A life's open verdict says the rounds of lives that would decide it, and the subline's
    resume (for the steady load's open verdict) says the lives' are not among what it decides."""
    from alloclab.answers import sentences
    st = _lives_then_steady(tmp_path, [0.3] * 4)
    assert st.side_rounds() == 4
    vs = {(v.base_unit[0], v.metric): v for v in st.verdicts()}
    assert vs[("c", "overhead")].verdict == "undecided" and vs[(SPEED, "throughput")].verdict == "undecided"
    ans = sentences.build(st)
    n = vs[("c", "overhead")].rounds_to_decide
    assert "The lives' 1 undecided are not among them: the lives ran their 4 rounds (plan key " \
           f"side_by_side_rounds); more rounds of them take a new study: {n} more (a new study with " \
           f"side_by_side_rounds = {4 + n}) would decide them." in ans.subline, ans.subline
    assert "would decide the rest" in ans.subline.split("The lives'")[0], ans.subline
    life = next(s for s in ans.sentences if "over its life" in s)
    assert f"about {n} more rounds of lives would decide" in life, life


def test_a_resume_counts_the_lives_at_their_own_level_and_says_which_it_reads_again(tmp_path):
    """The lives ran in rounds 1-4, the steady load in rounds 1-8 with one look. A life's creep
    decided at 95 % (t = 3.9 on 4 rounds) is open at the 97.9 % of a resume's two looks, but no
    later look sees more of it (Design.level): the subline counts it neither among the lives'
    undecided nor among what a resume goes on with, so the counts add up to the headline's. A
    verdict decided now that the resume's next look reads again is named as such, apart from the
    undecided ones."""
    from alloclab.answers import context, sentences
    # creep jemalloc - glibc: mean -1.7, se 0.44
    st = _lives_then_steady(tmp_path, [14.0 + d for d in (-1.0, -2.8, -2.0, -1.0)])
    vs = {(v.base_unit[0], v.metric): v for v in st.verdicts()}
    assert vs[("c", "creep")].verdict == "lower" and vs[("c", "overhead")].verdict == "undecided"
    ahead = st.design.ahead(8)
    read_again = {(v.base_unit[0], v.metric): v for v in decide.verdicts(st.rows, ahead)}[("c", "creep")]
    assert read_again.verdict == "undecided"  # ...had the lives' rounds been read at the resume's 97.9 %
    ans = sentences.build(st)
    assert "The lives' 1 undecided are not among them" in ans.subline, ans.subline
    # the steady load's: one undecided now, and two decided now that the resume's next look reads again
    v = lambda k: SimpleNamespace(metric="throughput", base_unit=("s", "glibc"), var_unit=("s", k),  # noqa: E731
                                  confidence=0.97942)
    todo, now = [v("jemalloc"), v("tcmalloc"), v("mimalloc")], [v("jemalloc")]
    assert context._of_these(todo, now) == ("a resume goes on with (1 undecided, and 2 decided at this look that the "
                                            "next reads at 97.9 %)")
    assert context._of_these(todo, todo) == context._of_these(todo, None) == "undecided"


def test_the_cliffs_preset_puts_each_public_cliff_on_the_frontier():
    """memory-cliffs: memory-life's MariaDB and RocksDB lives with the settings public reports found
    a cliff at, one life of each a round all side by side, each steady load alone in turns after."""
    from alloclab.catalog.allocators import CLIFF_TUNINGS, short_name
    q = plan.load(preset("memory-cliffs", "quick"), default_seed=1, found_allocators=_every_allocator())
    names = [a.name for a in q.allocators]
    assert names[:4] == ["glibc", "jemalloc", "tcmalloc", "mimalloc"] and names[4:] == CLIFF_TUNINGS
    assert {short_name(n) for n in CLIFF_TUNINGS} == {
        "glibc+arenas1", "glibc+arenas2", "jemalloc+decay0", "jemalloc+narenas1", "mimalloc+reset0",
        "tcmalloc+decommit", "tcmalloc+release10"}
    assert q.engines == ["mariadb-innodb", "rocksdb"] and q.budget == 90 * 60 and q.whole_round
    assert [len(g) for g in interleave.groups(q.round_specs(1, None, 1))] == [22, 11, 11]
    assert q.told() == frozenset(c.key for c in q.beside())
    assert q.design.max_looks == 0  # its looks as plan_looks plans them (90 minutes afford several)


def test_memory_life_quick_looks_once_at_the_plain_95_percent():
    """memory-life quick decides at one look, after the last round its budget affords; `looks` must
    be a whole number of at least 1, and a fixed number of runs has no looks to set."""
    p = _quick()
    assert p.design.max_looks == 1 and p.design.planned_looks == (30,) and p.design.confidence == 0.95
    raw = preset("memory-life", "quick")
    with pytest.raises(AlloclabError, match="looks: must be >= 1, got 0"):
        plan.load({**raw, "looks": 0}, default_seed=1, found_allocators=_every_allocator())
    with pytest.raises(AlloclabError, match="runs = 2 fixes the number of runs; looks only apply"):
        plan.load({**raw, "runs": 2}, default_seed=1, found_allocators=_every_allocator())
    a = cli.parser().parse_args(["run", "--preset", "memory-life", "--runs", "1"])
    assert "looks" not in flags.plan_dict(a)


def test_a_tables_rows_have_as_many_cells_and_numbers_as_its_headings():
    """A row of another width would shift every column of the CSV after it (the limit table's CSV
    once put its CI's upper end under "× the engine's account")."""
    from alloclab.answers.table import Table
    t = Table("t", "T", ["a", "b"], raw_headers=["a", "b_low", "b_high"])
    t.add(["1", "2–3"], [1, 2, 3])
    with pytest.raises(ValueError, match="table t: a row of 2 cells and 2 numbers, for 2 headings and 3 raw ones"):
        t.add(["1", "2–3"], [1, 2])


def test_memory_life_quick_ends_its_lives_after_five_rounds_and_its_steady_loads_go_on(monkeypatch):
    """quick's lives run in rounds 1-5 (side_by_side_rounds), every life together as before; the
    steady loads alone go on in the rounds the budget then affords, planned at their own pace. A
    study whose only open comparisons are the lives' stops there; the key needs runs side by side."""
    from alloclab.study import rounds
    from alloclab.study.progress import Progress
    p = _quick()
    assert p.side_by_side_rounds == 5
    assert sorted(len(g) for g in interleave.groups(p.round_specs(5, p.in_round(5), 1))) == [6, 6, 12, 30]
    later = p.round_specs(6, p.in_round(6), 1)
    assert {s.cell.part for s in later} == {"speed"} and len(later) == 24  # MariaDB's two servers of each
    # round 1: the lives 185 s, each steady load 50 s: 5 rounds at 1.1 x 335 s, then 165 s a round
    life, speed = p.beside()[0].key, sorted(p.turns())
    rows = [replace(_row("glibc", 1), cell=life, wall_s=185.0, run_id="l")]
    rows += [replace(_row("glibc", 1), cell=k, wall_s=50.0, index=2 + i, run_id=f"s{i}") for i, k in enumerate(speed)]
    budget = replace(p, budget=52 * 60.0)
    d = rounds.plan_design(budget, rows, elapsed_s=335.0, rounds_done=1)
    assert d["planned_rounds"] == 12 and d["looks"] == [12], d  # (3120 - 335 - 4 x 368.5) // 165 = 7 more
    assert "for 5 (side_by_side_rounds), then 2m45s" in d["basis"]
    assert rounds.plan_design(replace(budget, side_by_side_rounds=0), rows, 335.0, 1)["planned_rounds"] == 8
    # after round 5 a round draws only the steady loads; lives alone open: the study stops
    sched = rounds.Schedule(design={"planned_rounds": 12, "looks": [12], "basis": ""})
    sched.rounds = [{"round": r, "runs": []} for r in range(1, 6)]
    lives = {u for u in p.units() if u[0] == life}
    monkeypatch.setattr(rounds.decide, "active_units", lambda *a: (set(lives), {}))
    assert rounds._next_round(budget, sched, [], Progress(0)) is None
    assert "of the runs side by side, which ran their 5 rounds" in sched.stop["text"]
    monkeypatch.setattr(rounds.decide, "active_units", lambda *a: (set(p.units()), {}))
    sched.stop = None
    specs = rounds._next_round(budget, sched, [], Progress(0))
    assert {s.cell.part for s in specs} == {"speed"} and len(specs) == 24
    raw = preset("memory-life", "quick")
    assert plan.load({**raw, "side_by_side": 1}, default_seed=1,  # nothing side by side: no effect
                     found_allocators=_every_allocator()).side_by_side_rounds == 0
    with pytest.raises(AlloclabError, match="side_by_side_rounds: must be >= 2, got 1"):
        plan.load({**raw, "side_by_side_rounds": 1}, default_seed=1, found_allocators=_every_allocator())
    with pytest.raises(AlloclabError, match=r"side_by_side_rounds: 2 is fewer than min_runs \(3\)"):
        plan.load({**raw, "side_by_side_rounds": 2}, default_seed=1, found_allocators=_every_allocator())
    assert "side_by_side_rounds" not in preset("memory-cliffs", "quick")  # its lives in every round
    a = cli.parser().parse_args(["run", "--preset", "memory-life", "--slice", "0.5"])
    assert "side_by_side_rounds" not in flags.plan_dict(a)


def test_after_the_lives_rounds_more_rounds_cost_the_steady_loads_alone_and_the_lives_say_why_not_more():
    """Where only the steady loads' comparisons are open, a round of them costs their turns alone,
    not the lives' stretch beside (together.round_wall); a study whose lives ended after their
    side_by_side_rounds says that a resume cannot give the lives more rounds."""
    from alloclab.answers import context, together
    life, speed = ("life", "glibc"), (SPEED, "glibc")
    # in turns, a unit's wall is its share of the cell's round (together.unit_walls): two runs' turns of 50 s
    walls = {life: 180.0, ("life", "jemalloc"): 185.0, speed: 25.0, (SPEED, "jemalloc"): 25.0}
    assert together.round_wall({speed, (SPEED, "jemalloc")}, walls, 24, True, [SPEED]) == 50.0
    assert together.round_wall({life, speed}, walls, 24, True, [SPEED]) == 210.0  # the lives together, then turns
    v = SimpleNamespace(rounds_to_decide=4, var_unit=("life", "jemalloc"), base_unit=life)
    st = SimpleNamespace(side_rounds=lambda: 7, side_cells=lambda: {"life"}, plan={}, schedule={})
    assert "ran their 7 rounds (plan key side_by_side_rounds)" in context.to_decide(st, [v])


def test_a_larger_budget_buys_a_preset_more_rounds_of_lives_and_the_report_says_which_budget(tmp_path):
    """memory-life quick's lives run 5 rounds at its 60 minutes: another budget scales them (never
    below min_runs), a plan file's budget too, but not a plan file's own side_by_side_rounds; and a
    study whose lives ended open names the budget of a new study that runs the rounds of lives
    deciding them."""
    from alloclab.answers import context

    def lives(*args, toml=None):
        if toml is not None:
            (tmp_path / "p.toml").write_text(toml)
            args = ("--plan", str(tmp_path / "p.toml"), *args)
        return flags.plan_dict(cli.parser().parse_args(["run", *args])).get("side_by_side_rounds")

    assert lives("--preset", "memory-life") == 5
    assert lives("--preset", "memory-life", "--budget", "60m") == 5
    assert lives("--preset", "memory-life", "--budget", "1h48m") == 9
    assert lives("--preset", "memory-life", "--budget", "1h47m") == 8
    assert lives("--preset", "memory-life", "--budget", "36m") == 3
    assert lives("--preset", "memory-life", "--budget", "20m") == 3  # min_runs
    assert lives(toml='preset = "memory-life"\nbudget = "2h"\n') == 10
    assert lives("--budget", "2h", toml='preset = "memory-life"\nside_by_side_rounds = 4\n') == 4
    assert lives("--preset", "memory-life", "--slice", "0.5", "--budget", "2h") is None
    assert plan.load({**preset("memory-life", "quick"), "budget": "1h48m", "side_by_side_rounds": 9}, default_seed=1,
                     found_allocators=_every_allocator()).side_by_side_rounds == 9
    stored = {"preset": "memory-life", "scale": "quick", "budget": 3600.0, "side_by_side_rounds": 5}
    assert flags.lives_follow_budget(stored) and flags.lives_follow_budget({**stored, "budget": 6480.0,
                                                                            "side_by_side_rounds": 9})
    assert not flags.lives_follow_budget({**stored, "side_by_side_rounds": 7})  # a plan file's own
    assert not flags.lives_follow_budget({**stored, "preset": "no-such-preset"})
    v = lambda k: SimpleNamespace(rounds_to_decide=k)  # noqa: E731
    st = SimpleNamespace(plan=stored, schedule={})
    assert context._more_lives(st, [v(43), v(2), v(4), v(4)], 5) == (
        "more rounds of them take a new study: 4 more (a new study with --budget 1h48m) would decide 3 of the 4; "
        "all 43 more (--budget 9h36m) would decide the rest.")
    assert lives("--preset", "memory-life", "--budget", "1h48m") == 5 + 4  # what it names runs them
    assert context._more_lives(st, [v(4)], 5) == ("more rounds of them take a new study: 4 more (a new study with "
                                                  "--budget 1h48m) would decide them.")
    # a study whose lives' rounds took 12m30s: a new study's budget affords 9 of them at that pace (1.1 x)
    t0 = datetime(2026, 12, 7, 6, tzinfo=timezone.utc)
    starts = {"rounds": [{"round": r, "started_at": (t0 + timedelta(seconds=750 * (r - 1))).isoformat()}
                         for r in range(1, 8)]}
    assert context._lives_pace(starts, 5) == 750.0
    assert context._more_lives(SimpleNamespace(plan=stored, schedule=starts), [v(4)], 5) == (
        "more rounds of them take a new study: 4 more (a new study with --budget 2h04m) would decide them.")
    st = SimpleNamespace(plan={**stored, "side_by_side_rounds": 7}, schedule={})
    assert context._more_lives(st, [v(2), v(5000)], 7) == (
        "more rounds of them take a new study: 2 more (a new study with side_by_side_rounds = 9) would decide 1 of "
        "the 2; the others' differences are too small for this noise however many rounds ran.")
    assert context._more_lives(st, [v(5000)], 7) == ("more rounds of them would not decide them: their differences "
                                                     "are too small for this noise.")


def test_after_the_lives_rounds_the_last_look_moves_at_the_steady_loads_pace():
    """The look was planned at round 6 from a slow first round; after round 5, the last of the lives,
    the 11 minutes left (a little more) afford three rounds of the steady loads alone (200 s a round at 1.1 x), not
    one more round at the lives' pace (600 s), and the look moves to round 8."""
    from types import SimpleNamespace as Row

    from alloclab.study import rounds
    p = _quick()
    life, speed = p.beside()[0].key, sorted(p.turns())
    rows = [Row(cell=life, repeat=5, wall_s=400.0, index=0)]
    rows += [Row(cell=k, repeat=5, wall_s=w, index=1 + i) for i, (k, w) in enumerate(zip(speed, (100.0, 50.0, 50.0)))]
    design = {"planned_rounds": 6, "looks": [6], "basis": "the first round's pace"}
    grown = rounds.extend_design(p, design, rows, elapsed_s=48.9 * 60, rounds_done=5)
    assert grown["looks"] == [8] and "after round 5" in grown["basis"] and "then 3m40s" in grown["basis"], grown
    # after round 6 (the steady loads alone) of a look planned at 7, at their own pace: 7.5 minutes
    # left, two more
    rows6 = [Row(cell=k, repeat=6, wall_s=w, index=1 + i) for i, (k, w) in enumerate(zip(speed, (100.0, 50.0, 50.0)))]
    at7 = {**design, "planned_rounds": 7, "looks": [7]}
    assert rounds.extend_design(p, at7, rows6, elapsed_s=52.5 * 60, rounds_done=6)["looks"] == [8]
