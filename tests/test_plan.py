"""Plan validation and expansion (no processes)."""

import pytest
from helpers import expand

from alloclab import plan
from alloclab.alloc.allocators import Allocator
from alloclab.core.errors import AlloclabError
from alloclab.plan.presets import preset
from alloclab.run import interleave

FOUND = {
    "glibc": Allocator("glibc", "glibc", None, version="2.36"),
    "jemalloc": Allocator("jemalloc", "jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", version="5.3"),
    "mimalloc": Allocator("mimalloc", "mimalloc", "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2", version="2.0"),
}


def load(raw):
    return plan.load(raw, found_allocators=FOUND, default_seed=1)


def minimal(**kw):
    return {"engines": ["null"], "workloads": [{"workload": "write", "threads": [1, 2]}], **kw}


@pytest.mark.parametrize("raw, words", [
    (minimal(bogus=1), ["unknown key", "bogus", "allowed keys"]),
    (minimal(engines=["oracle"]), ["engines[0]", "oracle", "allowed values", "tidesdb"]),
    ({"engines": ["null"], "workloads": [{"workload": "write", "threads": [0]}]}, ["threads[0]", ">= 1"]),
    ({"engines": ["null"], "workloads": [{"workload": "scan"}]}, ["workload", "scan", "allowed values"]),
    ({"engines": ["null"], "workloads": [{"workload": "write", "speed": 3}]}, ["workloads[0]", "speed"]),
    ({"engines": ["null"], "workloads": [{"workload": "write", "ops": 5, "duration_s": 2}]},
     ["either ops or duration_s"]),
    ({"engines": ["null"], "workloads": [{"workload": "write", "key_bytes": 4}]}, ["key_bytes", "between 8 bytes"]),
    (minimal(allocators=["hoard"]), ["unknown allocator", "hoard"]),
    (minimal(allocators=["tcmalloc"]), ["not installed", "apt-get install", "libgoogle-perftools4"]),
    (minimal(allocators=["jemalloc+MALLOC_CONF"]), ["ENV=value"]),
    (minimal(allocators=["glibc", "glibc"]), ["duplicate"]),
    (minimal(baseline="tcmalloc", allocators=["glibc"]), ["baseline", "allowed values", "glibc"]),
    (minimal(runs=0), ["runs", ">= 1"]),
    (minimal(warmup_s="soon"), ["warmup_s", "not a duration"]),
    (minimal(engine_options={"sync": "sometimes"}), ["engine_options.sync", "allowed values", "full"]),
    ({"engines": ["null"]}, ["no workloads"]),
])
def test_bad_plans_are_refused_with_the_key_and_allowed_values(raw, words):
    with pytest.raises(AlloclabError) as e:
        load(raw)
    msg = str(e.value)
    for w in words:
        assert w in msg, msg


def test_runs_interleave_allocators_and_share_seeds_per_cell():
    p = load(minimal(allocators=["glibc", "jemalloc", "mimalloc"], runs=2))
    specs = expand(p)
    assert len(specs) == 2 * 2 * 3
    # A B C on a cell, never A A A
    for i in range(0, len(specs), 3):
        group = specs[i:i + 3]
        assert len({s.cell for s in group}) == 1
        assert sorted(s.allocator.name for s in group) == ["glibc", "jemalloc", "mimalloc"]
        assert len({s.seed for s in group}) == 1
    # which allocator goes first rotates
    assert len({specs[i].allocator.name for i in range(0, len(specs), 3)}) > 1
    assert [s.index for s in specs] == list(range(1, len(specs) + 1))
    assert len({s.run_id for s in specs}) == len(specs)


def test_order_is_reproducible_from_the_seed():
    a = [s.run_id for s in expand(load(minimal(allocators=["glibc", "jemalloc"], runs=3, seed=9)))]
    b = [s.run_id for s in expand(load(minimal(allocators=["glibc", "jemalloc"], runs=3, seed=9)))]
    c = [s.run_id for s in expand(load(minimal(allocators=["glibc", "jemalloc"], runs=3, seed=10)))]
    assert a == b
    assert a != c or len(a) < 4


def test_tuning_variants_are_their_own_allocator():
    p = load(minimal(allocators=["jemalloc", "jemalloc+MALLOC_CONF=narenas:2", "glibc+MALLOC_ARENA_MAX=2"]))
    names = [a.name for a in p.allocators]
    assert names == ["jemalloc", "jemalloc+MALLOC_CONF=narenas:2", "glibc+MALLOC_ARENA_MAX=2"]
    env = p.allocators[1].target_env({"LD_PRELOAD": "/x.so", "MALLOC_CONF": "junk", "PATH": "/bin"})
    assert env == {"LD_PRELOAD": FOUND["jemalloc"].path, "MALLOC_CONF": "narenas:2", "PATH": "/bin"}
    assert p.allocators[2].target_env({"MALLOC_ARENA_MAX": "8"}) == {"MALLOC_ARENA_MAX": "2"}


@pytest.mark.parametrize("scale", ["smoke", "full"])
def test_kv_preset_has_the_nine_parts_of_study_2(scale):
    p = load(preset("kv-allocators", scale) | {"allocators": ["glibc", "jemalloc"]})
    parts = {c.part for c in p.cells()}
    assert parts == {"churn_small", "contention", "mixed", "large_4kb", "large_64kb", "batch", "seq_vs_random",
                     "zipfian", "zipfian_mixed", "read_random", "delete"}
    assert {c.engine for c in p.cells()} == {"tidesdb", "rocksdb", "sqlite"}
    churn = sorted(c.threads for c in p.cells() if c.part == "churn_small" and c.engine == "tidesdb")
    assert churn == [1, 4, 8, 16]
    if scale == "full":
        assert {c.ops for c in p.cells() if c.part == "churn_small"} == {5_000_000}


def test_quick_kv_preset_asks_the_main_question_in_windows_of_at_least_5s():
    p = load(preset("kv-allocators", "quick") | {"allocators": ["glibc", "jemalloc"]})
    assert {c.engine for c in p.cells()} == {"tidesdb"}
    assert [(c.part, c.workload, c.threads, c.batch) for c in p.cells()] == [("read_random", "read", 2, 1)]
    assert all(c.duration_s >= 5 and c.ops is None for c in p.cells())
    assert p.adaptive and p.budget == 600 and p.min_window_s == 5 and p.design.margin == 0.04 and p.slice_s == 0.5
    assert all(s.slice_s == 0.5 and s.turn_warmup_s == 0.02 for s in p.round_specs(1, None, 1))
    warmed = load(preset("kv-allocators", "quick") | {"allocators": ["glibc", "jemalloc"], "turn_warmup_s": "250ms"})
    assert all(s.turn_warmup_s == 0.25 for s in warmed.round_specs(1, None, 1))
    # one look, after the budget's rounds, at the plain 95 % (its intervals carry the spread between studies)
    assert p.design.max_looks == 1 and p.design.confidence == 0.95 and len(p.design.planned_looks) == 1
    assert preset("kv-allocators", "quick")["allocators"] == ["glibc", "jemalloc", "mimalloc", "tcmalloc"]


def test_runs_per_round_is_checked_before_any_run_and_takes_turns_as_one_group():
    raw = {"engines": ["null"], "allocators": ["glibc", "jemalloc"],
           "workloads": [{"workload": "write", "duration_s": "5s", "runs_per_round": 2}]}
    p = load(raw)
    assert set(p.places().values()) == {2} and len(p.round_specs(1, None, 1)) == 4
    # a decided unit's runs stop; the open one keeps both of its places
    assert [s.allocator.name for s in p.round_specs(4, {(p.cells()[0].key, "jemalloc")}, 1)] == ["jemalloc"] * 2
    with pytest.raises(AlloclabError, match=r"workloads\[0\]\.runs_per_round"):
        load(raw | {"workloads": [{"workload": "write", "duration_s": "5s", "runs_per_round": 0}]})
    # in turns, every run of the cell's round is up together: each allocator's two servers take
    # turns with the others' in one group
    turns = load(raw | {"slice_s": 0.5})
    specs = turns.round_specs(1, None, 1)
    assert [len(g) for g in interleave.groups(specs)] == [4]
    assert sorted(s.allocator.name for s in specs) == ["glibc", "glibc", "jemalloc", "jemalloc"]
    assert len({s.run_id for s in specs}) == 4


def test_windows_shorter_than_the_scale_floor_are_refused_naming_the_key():
    raw = {"engines": ["null"], "workloads": [{"workload": "write", "duration_s": "1s"}]}
    with pytest.raises(AlloclabError) as e:
        load(raw)
    assert "workloads[0].duration_s" in str(e.value) and "5 s floor" in str(e.value) and "--scale smoke" in str(e.value)
    assert load(raw | {"scale": "smoke"}).cells()[0].duration_s == 1
    assert load(raw | {"min_window_s": "0.5s"}).min_window_s == 0.5


@pytest.mark.parametrize("raw, words", [
    (minimal(target_ci_pct=0), ["target_ci_pct", "above 0"]),
    (minimal(target_ci_pct=True), ["target_ci_pct", "percentage"]),
    (minimal(margin_pct=-1), ["margin_pct"]),
    (minimal(budget="soon"), ["budget", "not a duration"]),
    (minimal(budget=0), ["budget", "> 0"]),
    (minimal(runs=3, target_ci_pct=2), ["runs = 3", "target_ci_pct", "drop runs"]),
    (minimal(min_runs=5, max_rounds=4), ["min_runs", "max_rounds"]),
    (minimal(questions=["weather"]), ["questions[0]", "allowed values", "allocators"]),
    (minimal(baseline_engine="oracle"), ["baseline_engine", "allowed values", "null"]),
])
def test_bad_round_settings_are_refused(raw, words):
    with pytest.raises(AlloclabError) as e:
        load(raw)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_adaptive_rounds_cover_only_the_active_units_in_a_fresh_order_per_round():
    p = load(minimal(allocators=["glibc", "jemalloc", "mimalloc"]))
    assert p.adaptive and p.runs is None and p.design.min_runs == 3
    units = p.units()
    assert len(units) == 2 * 3
    active = {units[0], units[4]}
    r2 = p.round_specs(2, active, 10)
    assert {(s.cell.key, s.allocator.name) for s in r2} == active
    assert [s.index for s in r2] == [10, 11] and all(s.repeat == 2 for s in r2)
    orders = {tuple(s.cell.key for s in p.round_specs(r, None, 1)) for r in range(1, 9)}
    assert len(orders) > 1  # rounds are drawn afresh
    assert p.round_specs(3, None, 1) == p.round_specs(3, None, 1)  # and reproducibly
    again = plan.Plan.from_json(p.to_json())
    assert again.round_specs(4, None, 1) == p.round_specs(4, None, 1)


def test_sizes_and_durations_accept_units():
    p = load({"engines": ["null"], "scale": "smoke", "engine_options": {"memtable_bytes": "64MiB"},
              "workloads": [{"workload": "write", "duration_s": "1.5s", "value_bytes": "4KiB"}], "warmup_s": "500ms"})
    assert p.engine_options["memtable_bytes"] == 64 << 20
    assert p.warmup_s == 0.5
    c = p.cells()[0]
    assert (c.duration_s, c.ops, c.value_bytes) == (1.5, None, 4096)


@pytest.mark.parametrize("name", ["kv-allocators", "tpcc-allocators", "engines-tpcc", "sysbench-scaling",
                                  "sysbench-allocators"])
@pytest.mark.parametrize("scale", ["quick", "full"])
def test_every_preset_rounds_until_decided_in_windows_above_the_floor(name, scale):
    p = plan.load(preset(name, scale) | {"allocators": ["glibc", "jemalloc"]}, found_allocators=FOUND, default_seed=1)
    assert p.adaptive and p.min_window_s == {"quick": 5, "full": 10}[scale]
    assert (p.budget is not None) == (scale == "quick")
    assert all(c.duration_s is None or c.duration_s >= p.min_window_s for c in p.cells())
    if name == "engines-tpcc":
        assert p.design.questions == ("engines", "profiles") and p.design.baseline_engine == "mariadb-innodb"
    if name == "sysbench-allocators":
        assert p.design.min_runs == 4


def test_a_link_time_allocator_stays_linked_through_a_stored_plan():
    a = Allocator("jemalloc@link", "jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", link=True)
    assert Allocator.from_json(a.to_json()) == a
    p = load({"engines": ["null"], "scale": "smoke", "runs": 1, "workloads": [{"workload": "write", "ops": 10}]})
    p.allocators = [a]
    again = plan.Plan.from_json(p.to_json())
    assert again.allocators == [a]
    spec = expand(again)[0]
    assert plan.RunSpec.from_json(spec.to_json()).allocator.link


def test_profiled_and_call_counting_runs_are_separate_runs_of_the_first_rounds():
    p = load(minimal(allocators=["glibc", "jemalloc"], runs=3, perf=True, profile_runs=2))
    specs = expand(p)
    cells = {s.cell.key for s in specs}
    by = {purpose: [s for s in specs if s.purpose == purpose] for purpose in ("measure", "profile", "calls")}
    assert len(by["measure"]) == 3 * 2 * len(cells)  # the measured rounds are untouched
    assert {s.repeat for s in by["profile"]} == {1, 2} and len(by["profile"]) == 2 * 2 * len(cells)
    # one short call-counting run per cell, under the baseline allocator, never longer than the cap
    assert len(by["calls"]) == len(cells) and {s.allocator.name for s in by["calls"]} == {"glibc"}
    assert all(s.cell.duration_s is None or s.cell.duration_s <= plan.CALLS_WINDOW_S for s in by["calls"])
    assert len({s.run_id for s in specs}) == len(specs)
    assert all(s.run_id.endswith("-prof") for s in by["profile"]) and all(s.run_id.endswith("-calls")
                                                                          for s in by["calls"])
    # a stored spec keeps its purpose
    assert plan.RunSpec.from_json(by["profile"][0].to_json()).purpose == "profile"
    # without --profile: measured runs only
    assert {s.purpose for s in expand(load(minimal(runs=2)))} == {"measure"}
    with pytest.raises(AlloclabError, match="profile_runs"):
        load(minimal(perf=True, profile_runs=0))


def test_study_3_profiles_by_default():
    for scale in ("smoke", "quick", "full"):
        assert preset("sysbench-scaling", scale)["perf"] is True


def test_tpcc_mode_defaults_to_procedures_on_servers_and_rows_embedded():
    raw = {"engines": ["tidesdb", "mariadb-innodb", "postgres"],
           "workloads": [{"workload": "tpcc", "warehouses": 1, "threads": 2}], "runs": 1}
    cells = {c.engine: c for c in load(raw).cells()}
    assert (cells["tidesdb"].params.mode, cells["mariadb-innodb"].params.mode, cells["postgres"].params.mode) == (
        "rows", "procedures", "procedures")
    # the engine's default mode leaves the key as it was; another mode is a cell of its own
    assert cells["mariadb-innodb"].key.endswith("/w1/vu2")
    both = load({**raw, "engines": ["postgres"],
                 "workloads": [{"workload": "tpcc", "warehouses": 1, "threads": 2, "mode": ["procedures", "rows"]}]})
    assert sorted(c.key.split("/w1/vu2")[1] for c in both.cells()) == ["", "/rows"]
    with pytest.raises(AlloclabError, match=r"workloads\[0\].mode: procedures run inside a server, not in tidesdb"):
        load({**raw, "workloads": [{"workload": "tpcc", "mode": ["procedures"]}]})
    with pytest.raises(AlloclabError, match="mode"):
        load({**raw, "workloads": [{"workload": "write", "mode": ["rows"]}]})
    with pytest.raises(AlloclabError, match="statements are SQL, which tidesdb do not speak"):
        load({**raw, "workloads": [{"workload": "tpcc", "mode": ["statements"]}]})
    sqlite = load({**raw, "engines": ["sqlite"], "workloads": [{"workload": "tpcc", "mode": ["statements"]}]})
    assert sqlite.cells()[0].key.endswith("/statements")


def test_one_environment_policy_for_every_process_alloclab_starts(monkeypatch):
    """A preload or allocator tuning in the user's shell never reaches a process alloclab
    starts: not the process under test (which gets exactly its allocator's), not a client,
    a loader or a dataset's preparation (the dataset code once kept MALLOC_* set), and a
    wrapper into the studies' root gets no LD_* at all."""
    import inspect
    import os

    from alloclab.alloc import environment
    from alloclab.catalog import targets
    from alloclab.run import datasets, golden
    from alloclab.servers.server import _host_env
    monkeypatch.setenv("LD_PRELOAD", "/stray.so")
    monkeypatch.setenv("MALLOC_ARENA_MAX", "1")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.tcache_count=0")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/somewhere")
    monkeypatch.setenv("KEEP_ME", "yes")
    cleaned = environment.clean()
    assert "LD_PRELOAD" not in cleaned and "MALLOC_ARENA_MAX" not in cleaned and "GLIBC_TUNABLES" not in cleaned
    assert cleaned["KEEP_ME"] == "yes" and cleaned["LD_LIBRARY_PATH"] == "/somewhere"
    a = Allocator("jemalloc-tuned", "jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
                  env=(("MALLOC_CONF", "narenas:1"),))
    t = a.target_env(dict(os.environ))
    assert t["LD_PRELOAD"] == a.path and t["MALLOC_CONF"] == "narenas:1" and "MALLOC_ARENA_MAX" not in t
    assert "LD_LIBRARY_PATH" not in environment.wrapper() and "MALLOC_ARENA_MAX" not in environment.wrapper()
    assert _host_env(targets.parse("mariadb11-innodb"), dict(os.environ)) == environment.wrapper()
    # the modules that start clients, loaders and preparations use the one policy
    for mod in (datasets, golden):
        src = inspect.getsource(mod)
        assert "environment.clean()" in src and "os.environ.items()" not in src, mod.__name__


def test_a_library_is_checked_by_the_preflight_not_by_plan_validation(tmp_path):
    """Plan validation reads only the plan; that a library exists and exports malloc and free is
    a machine check, made before any work (no results folder)."""
    from alloclab import study
    from alloclab.run import preflight
    p = load(minimal(allocators=["glibc", "x=/nonexistent/libx.so"], runs=1))
    with pytest.raises(AlloclabError, match="does not exist"):
        preflight.preflight(p, None)
    with pytest.raises(AlloclabError, match="does not exist"):
        study.run(p, tmp_path / "res")
    assert not (tmp_path / "res").exists()
    fake = tmp_path / "libfake.so"
    fake.write_text("not an ELF file")
    with pytest.raises(AlloclabError, match="not an allocator"):
        preflight.preflight(load(minimal(allocators=[f"x={fake}"], runs=1)), None)


@pytest.mark.parametrize("raw, words", [
    ({"engines": ["mariadb-innodb"], "workloads": [{"workload": "sysbench", "test": "oltp_read_only",
                                                     "duration_s": 10}]}, "driven by sysbench"),
    ({"engines": ["mariadb11-innodb"], "workloads": [{"workload": "tpcc", "client": "hammerdb",
                                                       "duration_s": 10}]}, "driven by HammerDB"),
    ({"engines": ["tidesdb"], "workloads": [{"workload": "read", "ops": 1000}]}, "duration_s (--duration)"),
    ({"engines": ["tidesdb"], "workloads": [{"workload": "read", "duration_s": 0.2}]}, "at most 0.2 s"),
    ({"engines": ["tidesdb"], "executor": "ray", "workloads": [{"workload": "read", "duration_s": 10}]}, "Ray"),
    ({"engines": ["tidesdb"], "slice_s": "10ms", "workloads": [{"workload": "read", "duration_s": 10}]},
     "shorter than 0.05 s"),
])
def test_turns_are_refused_where_they_cannot_apply_naming_slice_s(raw, words):
    with pytest.raises(AlloclabError) as e:
        load({"scale": "smoke", "slice_s": 0.5} | raw)
    assert str(e.value).startswith("slice_s: ") and words in str(e.value) + (e.value.hint or "")


@pytest.mark.parametrize("raw, words", [
    ({"slice_s": 0.5}, "turns (slice_s)"),
    ({"executor": "ray"}, "a Ray cluster"),
    ({"side_by_side": 0}, "side_by_side: must be >= 1"),
])
def test_side_by_side_is_refused_beside_turns_and_ray(raw, words):
    with pytest.raises(AlloclabError) as e:
        load({"scale": "smoke", "engines": ["tidesdb"], "side_by_side": 3,
              "workloads": [{"workload": "read", "duration_s": 10}]} | raw)
    assert str(e.value).startswith("side_by_side: ") and words in str(e.value), str(e.value)


def test_side_by_side_runs_a_cells_runs_of_a_round_together_that_many_at_a_time():
    from alloclab.run import interleave
    p = load({"scale": "smoke", "engines": ["tidesdb", "rocksdb"], "side_by_side": 2, "runs": 2,
              "allocators": ["glibc", "jemalloc", "mimalloc"], "workloads": [{"workload": "read", "ops": 1000}]})
    todo = p.round_specs(1, None, 0)
    got = [[(s.cell.engine, s.allocator.name) for s in g] for g in interleave.groups(todo)]
    assert [len(g) for g in got] == [2, 1, 2, 1]
    assert all(len({e for e, _ in g}) == 1 for g in got)  # never two cells together
    assert sorted(a for g in got for _, a in g) == sorted(["glibc", "jemalloc", "mimalloc"] * 2)


def test_side_by_side_of_the_whole_round_runs_every_cells_runs_together():
    """side_by_side at least the round's runs (memory-life quick's twelve lives): the whole round at
    once, its warm-ups before and its profiles after; fewer: a cell's runs that many at a time, as
    in plans stored before (whole_round absent)."""
    from alloclab.plan import Plan, side_by_side_groups
    from alloclab.run import interleave
    raw = {"scale": "smoke", "engines": ["tidesdb", "rocksdb"], "runs": 2,
           "allocators": ["glibc", "jemalloc", "mimalloc"], "workloads": [{"workload": "read", "ops": 1000}]}
    whole = load({**raw, "side_by_side": 6})
    assert whole.whole_round and [len(g) for g in interleave.groups(whole.round_specs(1, None, 0))] == [6]
    assert {s.cell.engine for s in interleave.groups(whole.round_specs(1, None, 0))[0]} == {"tidesdb", "rocksdb"}
    for n in (3, 5):  # a cell's at a time: never two cells together
        p = load({**raw, "side_by_side": n})
        assert not p.whole_round and [len(g) for g in interleave.groups(p.round_specs(1, None, 0))] == [3, 3]
    assert not load({**raw, "engines": ["tidesdb"], "side_by_side": 6}).whole_round  # one cell: a cell's
    # warm-ups and profiles run alone, before and after the round's measured runs together
    both = load({**raw, "side_by_side": 6, "warmup_round": True, "perf": True})
    todo = both.round_specs(1, None, 0)
    assert [s.purpose for s in todo][:2] == ["warmup"] * 2 and [s.purpose for s in todo][2:8] == ["measure"] * 6
    groups = interleave.groups(todo)
    assert [len(g) for g in groups][:3] == [1, 1, 6] and all(len(g) == 1 for g in groups[3:])
    assert [s.index for s in todo] == list(range(len(todo)))
    # a plan stored before whole_round existed resumes a cell's at a time
    old = Plan.from_json({k: v for k, v in whole.to_json().items() if k != "whole_round"})
    assert not old.whole_round and [len(g) for g in interleave.groups(old.round_specs(1, None, 0))] == [3, 3]
    assert side_by_side_groups(list("aaabbb"), 6, whole_round=True) == [[0, 1, 2, 3, 4, 5]]
    assert side_by_side_groups(list("aaabbb"), 6) == [[0, 1, 2], [3, 4, 5]]
    assert side_by_side_groups(list("aaaaabb"), 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert side_by_side_groups(list("abc"), 1) == [[0], [1], [2]]


def test_a_study_says_how_many_runs_were_side_by_side_not_more_than_it_had():
    """memory-life's side_by_side = 6 with 3 allocators ran 3 at a time, and says 3."""
    from pathlib import Path

    from alloclab.answers.analyse import Study
    allocs = [{"name": a} for a in ("jemalloc", "jemalloc+MALLOC_CONF=narenas:1", "jemalloc+MALLOC_CONF=narenas:2")]
    for side, want in ((6, 3), (2, 2), (1, 1), (None, 1)):
        s = Study(Path("."), [], {"allocators": allocs, "side_by_side": side}, {})
        assert s.side_by_side == want
        assert ("runs one after another" if want == 1 else f"a cell's runs {want} at a time") in s.where()
    # two cells' runs all at once (memory-life quick): the round's, and says so
    from dataclasses import replace

    from alloclab.results.store import RunRow
    row = RunRow(**dict.fromkeys(RunRow.columns(), 0))
    rows = [replace(row, cell=c, allocator=a["name"]) for c in ("x", "y") for a in allocs]
    # a plan stored before whole_round: the runs' clocks tell (both cells up together, or one after the other)
    from alloclab.answers.analyse import cells_overlapped
    def clock(r, i, later):  # y's runs 100 s after x's, or with them (a second apart within a cell)
        return f"2026-11-28T05:{'02' if later and r.cell == 'y' else '00'}:4{i % 3}+00:00"

    timed = [replace(r, purpose="measure", repeat=1, wall_s=100.0, started_at=clock(r, i, later))
             for later in (False, True) for i, r in enumerate(rows)]
    assert cells_overlapped(timed[:6]) and not cells_overlapped(timed[6:])
    plan_before = {"allocators": allocs, "side_by_side": 12}
    assert "a round's runs 6 at a time" in Study(Path("."), timed[:6], plan_before, {}).where()
    assert "a cell's runs 3 at a time" in Study(Path("."), timed[6:], plan_before, {}).where()
    for side, whole, want, words in ((12, True, 6, "a round's runs 6 at a time"),
                                     (6, True, 6, "a round's runs 6 at a time"),
                                     (6, False, 3, "a cell's runs 3 at a time"),
                                     (2, False, 2, "a cell's runs 2 at a time")):
        s = Study(Path("."), rows, {"allocators": allocs, "side_by_side": side, "whole_round": whole}, {})
        assert s.side_by_side == want and words in s.where(), s.where()


def test_a_budget_counts_runs_side_by_side_as_one_runs_time():
    """Six lives of 100 s side by side take 100 s a round, not 600 s: a 30-minute budget affords
    about 16 rounds, not 2."""
    from dataclasses import replace

    from alloclab.results.store import RunRow
    from alloclab.study import pace, rounds
    raw = {"scale": "smoke", "engines": ["tidesdb"], "budget": "30m", "allocators": ["glibc", "jemalloc", "mimalloc"],
           "workloads": [{"workload": "read", "duration_s": 10}]}
    base = dict.fromkeys(RunRow.columns(), 0)
    rows = [RunRow(**{k: v for k, v in base.items() if k in RunRow.columns()})] * 3
    for sbs, want in ((1, 3 * 110), (3, 110)):
        p = load({**raw, "side_by_side": sbs})
        cell = p.cells()[0].key
        done = [replace(r, cell=cell, repeat=1, wall_s=100.0, allocator=a.name) for r, a in zip(rows, p.allocators)]
        d = rounds.plan_design(p, done, elapsed_s=want / 1.1, rounds_done=1)
        assert f"at about {want // 60:.0f}m{want % 60:02.0f}s a round" in d["basis"], d["basis"]
        assert pace._round_wall(p, done, 1) == 100.0 * 3 / sbs
    # two cells, lives of 100 s and of 60 s: a cell's at a time 160 s a round, the round's at once 100 s
    p2 = load({**raw, "engines": ["tidesdb", "rocksdb"], "side_by_side": 3})
    cells = [c.key for c in p2.cells()]
    done = [replace(rows[0], cell=c, repeat=1, wall_s=w, allocator=a.name, index=i)
            for i, (c, w, a) in enumerate((c, w, a) for c, w in zip(cells, (100.0, 60.0)) for a in p2.allocators)]
    assert pace._round_wall(p2, done, 1) == 160.0
    p2.side_by_side, p2.whole_round = 6, True
    assert pace._round_wall(p2, done, 1) == 100.0
    assert "at about 1m50s a round" in rounds.plan_design(p2, done, elapsed_s=100.0, rounds_done=1)["basis"]


@pytest.mark.parametrize("raw", [
    {"engines": ["mariadb11-innodb", "postgres"], "workloads": [{"workload": "tpcc", "duration_s": 10}]},
    {"engines": ["tidesdb", "sqlite"],
     "workloads": [{"workload": w, "duration_s": 10} for w in ("write", "mixed", "tpcc")]},
    {"engines": ["mariadb-innodb"], "workloads": [{"workload": "sysbench", "test": "oltp_read_write",
                                                   "client": "native", "duration_s": 10}]},
])
def test_turns_take_any_workload_of_alloclabs_own_client(raw):
    """The waiting side is stopped (a server, or the driver with its engine), so writing work and
    TPC-C take turns too."""
    p = load({"scale": "smoke", "slice_s": 0.5} | raw)
    assert all(s.slice_s == 0.5 for s in p.round_specs(1, None, 1))


def test_a_window_that_cannot_end_within_the_budget_or_a_runs_timeout_is_refused():
    with pytest.raises(AlloclabError, match=r"workloads\[0\].duration_s: a run of 1e\+11 s .* budget of 600 s") as e:
        load(minimal(budget="10m", workloads=[{"workload": "write", "duration_s": 99999999999.0}]))
    assert "--duration" in e.value.hint
    with pytest.raises(AlloclabError, match=r"longer than run_timeout_s \(60 s\)"):
        load(minimal(runs=1, run_timeout_s=60.0, workloads=[{"workload": "write", "duration_s": 50.0, }],
                     warmup_s=20.0))
    load(minimal(runs=1, run_timeout_s=60.0, workloads=[{"workload": "write", "duration_s": 50.0}]))


def test_the_time_to_decide_counts_the_company_that_runs_beside_the_open_comparisons():
    """Side by side, the decided keep the undecided company (together.company), so more rounds of an
    open RocksDB comparison cost what the round's longest life takes where the whole round runs at
    once (MariaDB's 100 s), and what RocksDB's lives take where a cell's run alone (60 s)."""
    from dataclasses import replace
    from pathlib import Path
    from types import SimpleNamespace

    from alloclab.answers import context
    from alloclab.answers.analyse import Study
    from alloclab.results.store import RunRow
    allocs = [{"name": a} for a in ("glibc", "jemalloc", "tcmalloc")]
    row = RunRow(**dict.fromkeys(RunRow.columns(), 0))
    rows = [replace(row, cell=c, allocator=a["name"], wall_s=w) for c, w in (("x", 100.0), ("y", 60.0)) for a in allocs]
    todo = [SimpleNamespace(rounds_to_decide=5, base_unit=("y", "glibc"), var_unit=("y", a)) for a in ("jemalloc",
                                                                                                        "tcmalloc")]
    for side, want in ((6, "8m20s"), (3, "5m00s")):
        s = Study(Path("."), rows, {"allocators": allocs, "side_by_side": side, "whole_round": side == 6}, {})
        assert f"≈ {want} more" in context.to_decide(s, todo), (side, context.to_decide(s, todo))


def test_in_turns_more_rounds_cost_each_cells_longest_run_not_their_sum():
    """A cell's allocators take turns in one window, so a round of a cell in turns lasts as long as
    its longest run. Before a study's turns were read from rounds.json, the time to decide summed
    its units as if they ran one after another: the default study of machine-c said "≈ 1h07m more"
    for 50 rounds at 29 s a round; it now says 22m26s."""
    from dataclasses import replace
    from pathlib import Path
    from types import SimpleNamespace

    from alloclab.answers import context
    from alloclab.answers.analyse import Study
    from alloclab.results.store import RunRow
    allocs = [{"name": a} for a in ("glibc", "jemalloc", "tcmalloc")]
    row = RunRow(**dict.fromkeys(RunRow.columns(), 0))
    rows = [replace(row, cell="x", allocator=a["name"], wall_s=30.0, repeat=1) for a in allocs]
    sched = {"rounds": [{"runs": [{"cell_key": "x", "slice_s": 0.5, "cell": {"engine": "tidesdb"}}]}]}
    todo = [SimpleNamespace(rounds_to_decide=10, base_unit=("x", "glibc"), var_unit=("x", a))
            for a in ("jemalloc", "tcmalloc")]
    s = Study(Path("."), rows, {"allocators": allocs, "slice_s": 0.5}, {}, sched)
    assert "≈ 5m00s more" in context.to_decide(s, todo), context.to_decide(s, todo)
    alone = Study(Path("."), rows, {"allocators": allocs}, {})
    assert "≈ 15m00s more" in context.to_decide(alone, todo), context.to_decide(alone, todo)


def test_a_resume_looks_once_more_and_the_forecast_reckons_with_its_wider_intervals():
    """memory-life looks once, at 95 %; resumed with more budget, it looks again, and both looks
    together hold at 96.5 %: each at Pocock's 97.9 %. A forecast at 95 % promised rounds that the
    resumed study then read at 97.9 % (o6 resumed for one round: 50 decided verdicts became 47)."""
    import math

    from alloclab.answers import stats
    from alloclab.plan.design import OVERALL_ALPHA, Design, look_alpha
    once = Design(max_looks=1, looks=(7,))
    assert once.confidence == 0.95
    assert once.ahead(7).looks == (7, 8)
    two = 1 - look_alpha(2, overall=OVERALL_ALPHA)
    assert once.ahead(7).confidence == pytest.approx(two) == pytest.approx(0.9794, abs=1e-4)
    assert once.resumed_confidence(26) == pytest.approx(two)  # one look more, wherever the last falls
    # the default design adds a look every 1.5 x the last: further rounds, more looks, a stricter level
    free = Design(looks=(4, 6, 9, 14, 20))
    assert free.resumed_confidence(30) < free.resumed_confidence(77)
    assert Design(adaptive=False).ahead(5) == Design(adaptive=False)
    # a comparison whose rounds ended before a look (memory-life's lives: rounds 1-5) reads the same
    # data at it again: resumed after its look at 7 and looking at 14, the lives keep 95 %
    resumed = Design(max_looks=1, looks=(7, 14))
    assert resumed.level(range(1, 6), 14) == 0.95
    assert resumed.level(range(1, 15), 14) == pytest.approx(two)
    # while a study runs, the looks to come count for everything: the level is the design's
    assert free.level(range(1, 7), 6) == free.confidence
    plain = stats.rounds_to_decide(math.log(0.97), 0.06, 7, confidence=0.95, margin=0.05)
    resumed = stats.rounds_to_decide(math.log(0.97), 0.06, 7, confidence=0.95, margin=0.05,
                                     confidence_at=lambda more: once.resumed_confidence(7 + more))
    assert resumed > plain


def test_in_turns_a_units_round_is_its_share_of_its_cells_turns():
    """A cell's turns take its runs' windows one after another: twelve servers (six allocators, two
    each) took 100 s a round, and once three allocators were decided, the six left took 48 s. Each
    unit's round is its runs' share of the turns (2 x 100 / 12 and 2 x 48 / 6), so a round of the
    three open ones costs about 48 s, not the 100 s of a round of all of them."""
    from dataclasses import replace

    from alloclab.answers import together
    from alloclab.results.store import RunRow
    row = RunRow(**dict.fromkeys(RunRow.columns(), 0))
    six, three = ["glibc", "a", "b", "c", "d", "e"], ["glibc", "a", "b"]
    rows = ([replace(row, cell="s", allocator=a, repeat=1, wall_s=100.0 - i) for i, a in enumerate(six * 2)]
            + [replace(row, cell="s", allocator=a, repeat=2, wall_s=48.0 - i) for i, a in enumerate(three * 2)]
            + [replace(row, cell="life", allocator=a, repeat=1, wall_s=300.0) for a in six])
    walls = together.unit_walls(rows, ["s"])
    assert walls[("s", "c")] == pytest.approx(200 / 12)
    assert walls[("s", "glibc")] == pytest.approx((200 / 12 + 96 / 6) / 2)
    assert walls[("life", "a")] == 300.0  # side by side or alone: a run's own wall
    assert together.round_wall({("s", a) for a in three}, walls, 1, False, ["s"]) == pytest.approx(49.0, abs=1.0)


def test_the_budget_the_forecast_names_affords_the_rounds_it_names(tmp_path):
    """The report's resume command gives a budget for the rounds it says would decide the rest,
    and a study resumed with it plans that many rounds (study.rounds.resumed_design): the same pace
    (the open units' shares of a round) and the same 1.1 on it. Past max_rounds, a resume cannot go
    on: the forecast says to run it again with a larger --max-rounds (machine-c: 30, of which 20 ran)."""
    import json
    import re
    import shutil

    from conftest import ROOT

    from alloclab.answers import analysis
    from alloclab.core.units import parse_duration
    from alloclab.results.store import Store
    from alloclab.study import rounds

    folder = tmp_path / "machine-c"
    shutil.copytree(ROOT / "bench/data/replication/machine-c", folder)
    said = analysis.build(folder).answers.to_decide
    m = re.search(r"About (\d+) more round\(s\) would decide the rest .*past the 30 rounds this study may run: "
                  r"run it again with --max-rounds (\d+) and --budget", said)
    assert m and int(m.group(2)) == 20 + int(m.group(1)), said
    raw = json.loads((folder / "plan.json").read_text())
    raw["design"]["max_rounds"] = 100
    (folder / "plan.json").write_text(json.dumps(raw))
    said = analysis.build(folder).answers.to_decide
    m = re.search(r"About (\d+) more round\(s\) would decide the rest \(≈ \S+ more; alloclab run --resume \S+ "
                  r"--budget (\S+)\)", said)
    assert m, said
    store = Store(folder)
    p = plan.Plan.from_json(store.read_json("plan.json"))
    p.budget = parse_duration(m.group(2))
    rows, _ = store.rows_repaired()
    planned = rounds.resumed_design(p, rounds.Schedule.load(store), rows)["planned_rounds"]
    assert 20 + int(m.group(1)) <= planned <= 20 + int(m.group(1)) + 2
