"""How an undecided verdict is said when it measured too little, and `--allocators` with a
tuning whose options hold commas."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from alloclab import cli
from alloclab.alloc.tuning import split_list
from alloclab.answers import analyse, analysis, decide, sentences, wording
from alloclab.answers.analyse import Study
from alloclab.results.store import RunRow

ROOT = Path(__file__).resolve().parents[1]


def _v(lo: float, hi: float, ratio: float = 1.0) -> decide.Verdict:
    return decide.Verdict("allocators", "rocksdb", "read", 2, "", "throughput", "glibc", "jemalloc", 8, 8, 8, ratio,
                          lo, hi, "undecided", 40, 0.95, "", ("c", "glibc"), ("c", "jemalloc"), margin=0.05)


def test_an_interval_wider_than_twice_the_margin_is_not_measured_precisely():
    wide = wording.short(_v(0.39, 2.74, 0.95))  # −61 % to +174 % at a ±5 % margin
    assert wide == "jemalloc −5.0 %: not measured precisely (±174.0 %)"
    assert "equivalent" not in wide
    # within twice the margin it says how large a difference could still be, and that it is undecided
    near = wording.short(_v(0.93, 1.06, 0.99))
    assert near == "jemalloc −1.0 % [−7.0, +6.0] equivalent within ±7.0 % (undecided at the ±5 % margin)"


def test_a_stored_studys_answers_never_call_a_wide_interval_equivalent(tmp_path):
    """The replication folders' reports changed in this one place only: an undecided interval
    over twice the margin is said as not measured precisely (the fixture of machine-c had
    tcmalloc's ±8.4 % at ±4 %, which read "equivalent within ±8.4 %")."""
    folder = tmp_path / "machine-a"
    shutil.copytree(ROOT / "tests/fixtures/replication/machine-a", folder)
    a = analysis.build(folder)
    for line in a.answers.lines:
        for part in line.split("; "):
            if "equivalent within ±" in part:
                wide = float(part.split("equivalent within ±")[1].split(" ")[0])
                assert wide <= 2 * a.answers.margin_pct, part


@pytest.mark.parametrize("text,want", [
    ("jemalloc+MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0",
     ["jemalloc+MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0"]),
    ("glibc,jemalloc+MALLOC_CONF=narenas:1,dirty_decay_ms:0,mimalloc,tcmalloc=/x/lib.so",
     ["glibc", "jemalloc+MALLOC_CONF=narenas:1,dirty_decay_ms:0", "mimalloc", "tcmalloc=/x/lib.so"]),
    ("glibc, jemalloc,,mimalloc", ["glibc", "jemalloc", "mimalloc"]),
    ("jemalloc+MALLOC_CONF=background_thread:true,dirty_decay_ms:5000,glibc+MALLOC_ARENA_MAX=2",
     ["jemalloc+MALLOC_CONF=background_thread:true,dirty_decay_ms:5000", "glibc+MALLOC_ARENA_MAX=2"]),
])
def test_a_tuning_with_several_options_works_on_the_command_line(text, want):
    assert split_list(text) == want
    assert cli.parser().parse_args(["run", "--allocators", text]).allocators == want


def _life(alloc: str, rnd: int, killed: bool) -> RunRow:
    base = dict.fromkeys(RunRow.columns(), 0) | dict(
        run_id=f"{alloc}-{rnd}", index=rnd, study="s", cell="mariadb-innodb/life/life/1x1000/c3:x:1/t16",
        engine="mariadb-innodb", allocator=alloc, allocator_base=alloc, allocator_verified=True, workload="life",
        part="life", pattern="c3:x:1", threads=16, repeat=rnd, ops_per_s=1000.0 + rnd, p99_ns=1e6,
        peak_rss_bytes=1 << 27, duration_s=30.0, status="ok", reason="", started_at="", profile="default",
        shape="default", client="", node="", machine_fingerprint="", purpose="measure", allocator_version="",
        allocator_source="")
    return RunRow.of(**base, oom_killed=killed, oom_cycle=1 if killed else None, life_cycles=0)


def test_a_study_whose_lives_were_killed_names_the_kills_first():
    """As a new user ran it: two lives under a 230 MiB limit, both OOM-killed in cycle 1. The
    headline says so before any figure of what they measured until they died."""
    allocs = [{"name": "glibc"}, {"name": "jemalloc"}]
    rows = [_life("glibc", 1, True), _life("jemalloc", 1, True)]
    s = Study(Path("."), rows, {"allocators": allocs, "runs": 1, "server_memory_bytes": 230 << 20}, {})
    head = sentences.build(s).headline
    assert head.startswith("OOM-killed: glibc in 1 of 1 lives (cycle 1); jemalloc in 1 of 1 (cycle 1). "), head
    calm = Study(Path("."), [_life("glibc", 1, False), _life("jemalloc", 1, False)],
                 {"allocators": allocs, "runs": 1}, {})
    assert "OOM-killed" not in sentences.build(calm).headline


def test_a_tuning_has_a_short_name_in_answers_defined_beside_its_version(tmp_path):
    from alloclab.answers import provenance
    from alloclab.catalog.allocators import short_name
    assert short_name("jemalloc+MALLOC_CONF=background_thread:true,dirty_decay_ms:5000,muzzy_decay_ms:5000") == \
        "jemalloc+bg5s"
    assert short_name("glibc+MALLOC_ARENA_MAX=2") == "glibc+arenas2" and short_name("jemalloc") == "jemalloc"
    assert short_name("jemalloc+MALLOC_CONF=narenas:3") == "jemalloc+MALLOC_CONF=narenas:3"  # unknown: as given
    rows = [_life(a, r, False) for r in (1, 2, 3) for a in ("glibc", "glibc+MALLOC_ARENA_MAX=2")]
    s = Study(tmp_path, rows, {"allocators": [{"name": "glibc", "version": "2.36"},
                                              {"name": "glibc+MALLOC_ARENA_MAX=2", "version": "2.36"}],
                               "runs": 3}, {})
    ans = sentences.build(s)
    assert {v.variant for v in ans.verdicts} == {"glibc+arenas2"}
    assert any(line.startswith("allocator glibc+arenas2 (glibc+MALLOC_ARENA_MAX=2): 2.36")
               for line in provenance.environment(s))


def test_more_rounds_in_turns_cost_the_open_units_share_of_a_window(tmp_path):
    """The time more rounds would take, in turns: a round is one window that the cell's allocators
    share, each run its share of it (together.unit_walls), so a round of all four costs what a round
    took (the longest run, never their sum: machine-c's rounds took about 27 s; before turns were
    counted, it said 1h07m for 50 rounds), and a round of the units still open their shares."""
    import re
    import statistics
    from collections import defaultdict

    folder = tmp_path / "machine-c"
    shutil.copytree(ROOT / "bench/data/replication/machine-c", folder)
    a = analysis.build(folder)
    m = re.search(r"would decide the rest \(≈ (\d+)m(\d+)s more", a.answers.to_decide)
    n = re.search(r"(\d+) more round\(s\) would decide the rest", a.answers.to_decide)
    assert m and n, a.answers.to_decide
    rounds, seconds = int(n.group(1)), 60 * int(m.group(1)) + int(m.group(2))
    study = analyse.load(folder)
    walls = study.unit_walls()
    took = defaultdict(float)
    for r in study.rows:
        took[r.repeat] = max(took[r.repeat], r.wall_s)
    assert sum(walls.values()) == pytest.approx(statistics.median(took.values()), rel=0.05)
    share = statistics.median(walls.values())
    assert 2 * share * 0.95 <= seconds / rounds <= sum(walls.values()) * 1.05  # a baseline and one variant at least


def test_a_life_question_is_ordered_by_its_effect_in_margins_not_in_its_unit():
    """A creep of 15 MiB a cycle (±1) and −64 % over the account (±5 %): the effects compare in
    margins (15 and about 21), not as 15 against |log 0.36| = 1.02."""
    def v(metric, ratio, margin):
        return decide.Verdict("allocators", "mariadb-innodb", "life", 16, "", metric, "glibc", "jemalloc", 8, 8, 8,
                              ratio, ratio, ratio, "lower", 8, 0.95, "", ("c", "glibc"), ("c", "jemalloc"),
                              margin=margin)
    creep, over = v("creep", 2.718281828 ** -15, 1.0), v("overhead", 0.36, 0.05)
    assert sentences._effect(creep) == pytest.approx(15.0)
    assert sentences._effect(over) == pytest.approx(20.9, abs=0.1)
    assert sentences._effect(over) > sentences._effect(creep)
    # a share given back compared in points: 0.3 (30 points) at ±10 points is 3 margins
    assert sentences._effect(v("given_back", 2.718281828 ** 0.3, 0.10)) == pytest.approx(3.0)
