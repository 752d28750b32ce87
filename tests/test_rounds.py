"""Studies in rounds with the real driver (null engine: this tests the harness) and real
allocators: adaptive rounds stop when decided or at the budget, --resume with a larger budget
continues the same rounds, --runs N is exactly N, and the report leads with the answers."""

import csv
import json
import subprocess
import sys

from conftest import ROOT, need

from alloclab.plan.design import Design, taken_looks
from alloclab.results.store import Store


def alloclab(*args):
    return subprocess.run([sys.executable, "-m", "alloclab", *args], capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}, timeout=600)


def write_plan(tmp_path, extra=""):
    p = tmp_path / "plan.toml"
    p.write_text(f"""
name = "rounds"
scale = "smoke"
engines = ["null"]
allocators = ["glibc", "jemalloc"]
seed = 4
{extra}
[engine_options]
null_latency_ns = 20000

[[workloads]]
part = "w"
workload = "write"
threads = [1, 2]
duration_s = 0.3
""")
    return p


def test_adaptive_study_runs_rounds_until_decided_and_answers_first(tmp_path, found):
    need(found, "jemalloc")
    out = tmp_path / "res"
    p = alloclab("run", "--plan", str(write_plan(tmp_path, "max_rounds = 6\ntarget_ci_pct = 1")), "--out", str(out),
                 "--quiet")
    assert p.returncode == 0, p.stderr
    assert "## Answers" in p.stdout and "round(s)" in p.stdout
    rows = Store(out).rows()
    sched = json.loads((out / "rounds.json").read_text())
    # every unit got at least 3 runs; rounds are numbered, seeded and recorded in the order they ran
    per_unit = {}
    for r in rows:
        per_unit.setdefault((r.cell, r.allocator), []).append(r.repeat)
    assert len(per_unit) == 4 and all(len(v) >= 3 for v in per_unit.values())
    assert [r["round"] for r in sched["rounds"]] == list(range(1, len(sched["rounds"]) + 1))
    assert len({r["seed"] for r in sched["rounds"]}) == len(sched["rounds"])
    ran = [d["run_id"] for r in sched["rounds"] for d in r["runs"]]
    assert ran == [r.run_id for r in sorted(rows, key=lambda r: r.index)]
    assert sched["stop"]["reason"] in ("decided", "planned")
    assert len(sched["rounds"]) <= 6
    # it looked only at its planned rounds (from round 4 on, up to max_rounds), and stopped at one
    assert sched["design"]["looks"] == [4, 6] and sched["design"]["planned_rounds"] == 6
    assert len(sched["rounds"]) in sched["design"]["looks"]
    # runs of a round are paired: both allocators of a cell ran in every round the cell ran
    for cell in {r.cell for r in rows}:
        rounds = [sorted(r.repeat for r in rows if r.cell == cell and r.allocator == a) for a in ("glibc", "jemalloc")]
        assert rounds[0] == rounds[1]
    # verdicts.csv and .json with the promised columns
    with open(out / "report" / "verdicts.csv") as f:
        vrows = list(csv.DictReader(f))
    for col in ("engine", "workload", "threads", "settings", "metric", "baseline", "variant", "n_baseline",
                "n_variant", "ratio", "ci_low", "ci_high", "verdict", "rounds_to_decide"):
        assert col in vrows[0], col
    assert {v["metric"] for v in vrows} == {"throughput", "p99_latency", "peak_rss"}
    assert {v["verdict"] for v in vrows} <= {"faster", "slower", "higher", "lower", "equivalent", "undecided"}
    assert len(json.loads((out / "report" / "verdicts.json").read_text())["verdicts"]) == len(vrows)
    page = (out / "report" / "report.html").read_text()
    # the answer first: the headline, the forest plot, one line per cell, then the rest
    assert page.index("id='answer'") < page.index("id='forest'") < page.index("<h2>") < page.index("<h2>Verdicts") \
        < page.index("<h2>Charts</h2>")
    assert alloclab("verify", str(out)).returncode == 0


def test_budget_stops_cleanly_and_resume_with_a_larger_budget_continues_the_rounds(tmp_path, found):
    need(found, "jemalloc")
    out = tmp_path / "res"
    plan = write_plan(tmp_path, "max_rounds = 8\ntarget_ci_pct = 0.01\nmargin_pct = 0.01")
    p = alloclab("run", "--plan", str(plan), "--budget", "3s", "--out", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    first = Store(out).rows()
    sched = json.loads((out / "rounds.json").read_text())
    assert sched["stop"]["reason"] == "budget" and "budget" in p.stdout
    assert 0 < len(first) < 4 * 8
    assert "could not afford 3 valid runs" in (out / "report" / "report.md").read_text() or len(first) >= 12
    # a budget already spent is refused before any work
    q = alloclab("run", "--resume", str(out), "--budget", "1s")
    assert q.returncode == 2 and "already spent" in q.stderr and "larger --budget" in q.stderr
    # plan flags cannot change a stored study
    q = alloclab("run", "--resume", str(out), "--target-ci", "5")
    assert q.returncode == 2 and "--target-ci" in q.stderr
    p = alloclab("run", "--resume", str(out), "--budget", "40s", "--quiet")
    assert p.returncode == 0, p.stderr
    rows = Store(out).rows()
    assert len(rows) > len(first)
    assert rows[:len(first)] == first  # nothing finished was run again or changed
    assert len({r.run_id for r in rows}) == len(rows)
    sched2 = json.loads((out / "rounds.json").read_text())
    assert sched2["rounds"][:len(sched["rounds"]) - 1] == sched["rounds"][:-1]  # the same rounds, continued
    assert len(sched2["sittings"]) == 2 and sched2["sittings"][1]["budget_s"] == 40
    # each sitting records the machine and alloclab its rows ran on (a report names them where they differ)
    assert {s["machine_fingerprint"] for s in sched2["sittings"]} == {r.machine_fingerprint for r in rows}
    assert all(s["machine"]["cpu_model"] and "alloclab_commit" in s["machine"] for s in sched2["sittings"])
    assert sched2["elapsed_s"] > sched["elapsed_s"]
    assert sched2["stop"]["reason"] in ("planned", "decided", "budget")
    assert alloclab("verify", str(out)).returncode == 0


def test_runs_means_exactly_n(tmp_path, found):
    need(found, "jemalloc")
    out = tmp_path / "res"
    p = alloclab("run", "--plan", str(write_plan(tmp_path)), "--runs", "2", "--out", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    rows = Store(out).rows()
    assert len(rows) == 2 * 2 * 2 and sorted({r.repeat for r in rows}) == [1, 2]
    assert json.loads((out / "rounds.json").read_text())["stop"]["reason"] == "runs"
    assert "8 ok, 0 failed, 0 invalid of 8 runs in 2 round(s)" in p.stdout


def test_bad_round_flags_are_refused_before_any_work(tmp_path):
    out = tmp_path / "res"
    p = alloclab("run", "--plan", str(write_plan(tmp_path)), "--target-ci", "0", "--out", str(out))
    assert p.returncode == 2 and "target_ci_pct" in p.stderr and not out.exists()
    p = alloclab("run", "--plan", str(write_plan(tmp_path)), "--budget", "soon", "--out", str(out))
    assert p.returncode == 2 and "budget" in p.stderr and "not a duration" in p.stderr and not out.exists()
    p = alloclab("run", "--engines", "null", "--workloads", "write", "--duration", "1s", "--out", str(out))
    assert p.returncode == 2 and "floor" in p.stderr and "--scale smoke" in p.stderr and not out.exists()


def test_a_warmup_round_runs_each_cell_once_and_never_measures_it(tmp_path, found):
    need(found, "jemalloc")
    out = tmp_path / "res"
    p = alloclab("run", "--plan", str(write_plan(tmp_path, "warmup_round = true")), "--runs", "2", "--out", str(out),
                 "--quiet")
    assert p.returncode == 0, p.stderr
    rows = Store(out).rows()
    warm = [r for r in rows if r.purpose == "warmup"]
    # one per cell, first in round 1, with the baseline allocator; no perf, no statistics
    assert len(warm) == 2 and all(r.run_id.endswith("-r1-warm") and r.allocator == "glibc" for r in warm)
    assert [r.purpose for r in rows[:1]] == ["warmup"] and len(rows) == 2 + 8
    from alloclab.answers import analyse
    assert len(analyse.load(out).rows) == 8
    assert not any((out / "runs" / r.run_id / "perf.data").exists() for r in warm)


def test_turns_interleave_a_cells_allocators_and_each_run_stays_a_run(tmp_path, found):
    """slice_s: the drivers of a cell's allocators are up together and measure in turns (the real
    engine: turns pause TidesDB's writers mid-window, and a waiting driver is stopped with its
    engine's background threads); each run keeps its own folder, proof and window, which is the
    sum of its turns."""
    need(found, "jemalloc")
    out = tmp_path / "res"
    p = alloclab("run", "--engines", "tidesdb", "--workloads", "write", "--threads", "2", "--allocators",
                 "glibc,jemalloc", "--runs", "2", "--duration", "1s", "--slice", "250ms", "--scale", "smoke",
                 "--out", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    rows = sorted(Store(out).rows(), key=lambda r: r.index)
    assert [(r.allocator_base, r.repeat) for r in rows] == [("glibc", 1), ("jemalloc", 1), ("jemalloc", 2),
                                                            ("glibc", 2)]
    assert all(r.status == "ok" and r.allocator_verified for r in rows)
    for r in rows:
        evs = [json.loads(line) for line in (out / "runs" / r.run_id / "events.jsonl").open()]
        turns = [e for e in evs if e["type"] == "interval"]
        assert len(turns) == 4  # 1 s in turns of 250 ms
        assert abs(r.duration_s - 1.0) < 0.1 and r.ops_per_s > 0
        assert any(e.get("gated") for e in evs if e["type"] == "phase")
        # stopped once at the gate after its warm-up and after each of its 4 turns
        assert json.loads((out / "runs" / r.run_id / "run.json").read_text())["frozen_while_waiting"] == 5
    # each turn's place in its round's sequence: a round's two runs share its 8 places, 4 each, and
    # each run's drift factor (the host's drift between its turns and the other's) is in runs.csv
    for k in (1, 2):
        places = [json.loads((out / "runs" / r.run_id / "run.json").read_text())["turn_places"] for r in rows
                  if r.repeat == k]
        assert sorted(places[0] + places[1]) == list(range(8)) and [len(x) for x in places] == [4, 4], places
    assert all(r.drift_factor is not None and 0.5 < r.drift_factor < 2 for r in rows), rows
    # up together: the first run of a round lived through the other's turns and preparation
    assert rows[0].wall_s > 2 * rows[0].duration_s
    # the group's other drivers are not "other processes" of the machine: one account per group
    assert rows[0].other_busy_cores == rows[1].other_busy_cores and rows[2].other_busy_cores == rows[3].other_busy_cores
    p = alloclab("run", "--resume", str(out), "--ray", "127.0.0.1:1")
    assert p.returncode == 2 and "turns (slice_s)" in p.stderr and "Ray" in p.stderr
    p = alloclab("run", "--engines", "tidesdb", "--workloads", "read", "--ops", "1000", "--slice", "250ms",
                 "--scale", "smoke", "--out", str(tmp_path / "no"))
    assert p.returncode == 2 and "slice_s" in p.stderr and "--duration" in p.stderr


def test_each_turn_starts_with_the_plans_unmeasured_warm_up(tmp_path, found):
    """turn_warmup_s (--turn-warmup): before each turn is timed its run works unmeasured, so a
    round of 2 runs x 4 turns of 250 ms after 300 ms each lasts at least 8 x 550 ms; the window
    stays the sum of the timed turns."""
    need(found, "jemalloc")
    out = tmp_path / "res"
    p = alloclab("run", "--engines", "tidesdb", "--workloads", "read", "--allocators", "glibc,jemalloc", "--runs",
                 "1", "--duration", "1s", "--slice", "250ms", "--turn-warmup", "300ms", "--scale", "smoke",
                 "--out", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    rows = sorted(Store(out).rows(), key=lambda r: r.index)
    assert all(r.status == "ok" and abs(r.duration_s - 1.0) < 0.1 for r in rows)
    assert rows[0].wall_s > 8 * 0.55, rows[0].wall_s
    assert json.loads((out / "plan.json").read_text())["turn_warmup_s"] == 0.3


def test_the_last_look_moves_later_when_decided_comparisons_stop_running():
    """Study 1 in 40 minutes: once InnoDB's comparisons are decided only TidesDB's runs go on and a
    round takes half as long; the budget left then affords more rounds than the first round's pace
    planned. The last look moves later (never earlier), the number of looks stays."""
    from dataclasses import replace
    from types import SimpleNamespace as Row

    from alloclab import plan as plan_mod
    from alloclab import study
    p = plan_mod.load({"engines": ["mariadb11-innodb", "mariadb11-tidesdb"], "budget": "40m", "slice_s": 0.5,
                       "allocators": ["glibc", "jemalloc", "mimalloc", "tcmalloc"], "scale": "quick",
                       "workloads": [{"workload": "tpcc", "duration_s": 20}]}, default_seed=1)
    design = {"planned_rounds": 9, "looks": [4, 6, 9], "basis": "the first round's pace"}
    rows = [Row(cell="tides", repeat=7, wall_s=w) for w in (120, 110, 100, 90)]  # up together: 120 s
    grown = study.extend_design(p, design, rows, elapsed_s=30 * 60, rounds_done=7)
    assert grown["looks"] == [4, 6, 11] and grown["planned_rounds"] == 11  # 600 s left at 132 s a round
    assert "after round 7" in grown["basis"]
    assert study.extend_design(p, design, rows, elapsed_s=38 * 60, rounds_done=7) is design  # never earlier
    assert study.extend_design(p, grown, rows, elapsed_s=30 * 60, rounds_done=11) is grown  # the last look came
    # one after another, a round lasts the sum of its runs: 420 s at 1.1 x, one more round in 10 minutes
    assert study.extend_design(replace(p, slice_s=0.0), design, rows, elapsed_s=30 * 60, rounds_done=7) is design
    assert study.extend_design(replace(p, budget=None), design, rows, elapsed_s=0, rounds_done=7) is design


def test_a_budget_stop_after_the_second_to_last_look_takes_the_last_look_at_the_last_round():
    """The budget ran out in round 17 of a study whose last look was planned at 18: its verdicts
    come from the 17 rounds it ran (the same number of looks, so the same level), not from the
    look at round 6. Any other stop, or a stop before the second-to-last look, keeps the design."""
    design = {"looks": [4, 6, 18]}
    assert taken_looks(design, {"reason": "budget"}, 17) == (4, 6, 17)
    assert taken_looks(design, {"reason": "budget"}, 5) == (4, 6, 18)
    assert taken_looks(design, {"reason": "decided"}, 17) == (4, 6, 18)
    assert taken_looks(design, None, 17) == (4, 6, 18)
    plan = {"allocators": [{"name": "glibc"}, {"name": "jemalloc"}], "engines": ["tidesdb"], "budget": 600}
    rounds = [{"round": i} for i in range(1, 18)]
    policy = Design.from_plan(plan, {"design": design, "stop": {"reason": "budget"}, "rounds": rounds})
    assert policy.planned_looks == (4, 6, 17) and policy.last_look(17) == 17
    assert policy.confidence == Design.from_plan(plan, {"design": design}).confidence
