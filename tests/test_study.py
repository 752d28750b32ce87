"""A whole study end to end on the real embedded engines and real allocators, then its report,
its manifest, and what `alloclab verify` says after tampering."""

import csv
import io
import json
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, need
from helpers import expand

from alloclab import plan, report, study
from alloclab.results.store import RunRow, Store
from alloclab.study.progress import Progress


def alloclab(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "alloclab", *args], capture_output=True, text=True, cwd=cwd,
                          env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}, timeout=600)


@pytest.fixture(scope="module")
def small_study(tmp_path_factory, found):
    need(found, "jemalloc", "mimalloc")
    out = tmp_path_factory.mktemp("study") / "res"
    raw = {"name": "t", "engines": ["tidesdb", "rocksdb", "sqlite"], "allocators": ["glibc", "jemalloc", "mimalloc"],
           "runs": 1, "warmup_s": 0.05,
           "workloads": [
               {"part": "churn_small", "workload": "write", "key_bytes": 16, "value_bytes": 64, "threads": [1, 2],
                "ops": 3000},
               {"part": "large_4kb", "workload": "write", "key_bytes": 64, "value_bytes": 4096, "batch": 10,
                "threads": 2, "ops": 300},
               {"part": "read_random", "workload": "read", "threads": 2, "ops": 2000}]}
    p = plan.load(raw, default_seed=5)
    import io
    res = study.run(p, out, Progress(len(expand(p)), stream=io.StringIO(), live=False))
    return out, res


def test_study_runs_every_cell_with_proved_allocators(small_study):
    out, res = small_study
    assert res.total == 3 * 3 * 4 and res.ok == res.total
    rows = Store(out).rows()
    assert len(rows) == res.total
    assert all(r.allocator_verified and r.status == "ok" for r in rows)
    assert {r.engine for r in rows} == {"tidesdb", "rocksdb", "sqlite"}
    for r in rows:
        d = out / "runs" / r.run_id
        assert (d / "events.jsonl").exists() and (d / "samples.csv").exists() and (d / "run.json").exists()
        assert r.peak_rss_bytes > 1 << 20 and r.ops > 0 and r.cpu_user_s >= 0 and r.ctx_voluntary >= 0
    # CPU time is counted in clock ticks: a run of a few milliseconds may show none, a study not
    assert sum(r.cpu_user_s + r.cpu_sys_s for r in rows) > 0.1


def test_results_are_never_world_writable(small_study):
    import os
    out, _ = small_study
    for dirpath, _dirs, files in os.walk(out):
        for name in [dirpath] + [os.path.join(dirpath, f) for f in files]:
            assert os.stat(name).st_mode & 0o002 == 0, name


def test_runs_csv_has_the_promised_columns(small_study):
    out, _ = small_study
    with open(out / "runs.csv") as f:
        header = next(csv.reader(f))
    for col in ("run_id engine allocator allocator_verified workload threads batch key_bytes value_bytes repeat ops "
                "duration_s ops_per_s p50_ns p95_ns p99_ns p999_ns max_ns peak_rss_bytes cpu_user_s cpu_sys_s "
                "ctx_voluntary ctx_involuntary status").split():
        assert col in header
    assert header == RunRow.columns() + ["value_bytes_min"]  # the key-value workloads' own column


def test_samples_are_at_least_10hz(small_study):
    out, _ = small_study
    rows = Store(out).rows()
    longest = max(rows, key=lambda r: r.wall_s)
    with open(out / "runs" / longest.run_id / "samples.csv") as f:
        ts = [float(r["t_s"]) for r in csv.DictReader(f)]
    assert len(ts) >= 3
    gaps = sorted(b - a for a, b in zip(ts, ts[1:]))
    # 20 Hz asked; at least 10 Hz over the run and in 19 gaps of 20, whatever a stall of this
    # 2-core VM does to one of them
    assert (len(ts) - 1) / (ts[-1] - ts[0]) >= 10 and gaps[int(0.95 * (len(gaps) - 1))] < 0.1 + 0.05, gaps
    assert gaps[-1] < 0.5, gaps


def test_report_from_stored_files(small_study, tmp_path):
    out, _ = small_study
    md = report.build(out)
    text = md.read_text()
    assert "Δ% vs glibc" in text and "| tidesdb | churn_small |" in text
    for name in ("put_throughput_vs_threads.png", "peak_rss_vs_threads.png", "large_value_p99.png"):
        assert (md.parent / "charts" / name).stat().st_size > 5000
    # rebuilt elsewhere, from the copied folder alone: the same tables
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    shutil.rmtree(copy / "report")
    assert report.build(copy).read_text() == text


def test_manifest_verifies_and_tampering_is_named(small_study, tmp_path):
    out, _ = small_study
    import shutil
    copy = tmp_path / "tamper"
    shutil.copytree(out, copy)
    p = alloclab("verify", str(copy))
    assert p.returncode == 0, p.stdout + p.stderr
    rows = (copy / "runs.csv").read_text().splitlines()
    rows[1] = rows[1].replace(",ok,", ",ok ,", 1)
    (copy / "runs.csv").write_text("\n".join(rows) + "\n")
    victim = next((copy / "runs").iterdir()) / "samples.csv"
    victim.write_text(victim.read_text() + "0,measure,1,1,0,0,0,0,0,0,1\n")
    p = alloclab("verify", str(copy))
    assert p.returncode == 1
    assert "changed: runs.csv" in p.stdout
    assert f"changed: {victim.relative_to(copy)}" in p.stdout


def test_bad_flags_fail_before_any_work(tmp_path):
    out = tmp_path / "never"
    p = alloclab("run", "--threads", "0", "--out", str(out))
    assert p.returncode == 2 and "threads" in p.stderr and ">= 1" in p.stderr
    assert not out.exists()
    p = alloclab("run", "--engines", "tidesdb,oracle", "--out", str(out))
    assert p.returncode == 2 and "oracle" in p.stderr and "allowed values" in p.stderr
    assert not out.exists()


def test_cli_run_with_flags_end_to_end(tmp_path, found):
    need(found, "jemalloc")
    out = tmp_path / "cli"
    p = alloclab("run", "--engines", "tidesdb", "--allocators", "glibc,jemalloc", "--workloads", "write",
                 "--threads", "1,2", "--ops", "2000", "--runs", "2", "--seed", "3", "--out", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    assert "report:" in p.stdout and "8 ok, 0 failed, 0 invalid of 8 runs" in p.stdout
    assert "[8/8]" in p.stderr and "ETA" in p.stderr
    rows = Store(out).rows()
    # interleaved: allocators alternate within each cell and repeat
    assert [r.allocator for r in rows][:2] in (["glibc", "jemalloc"], ["jemalloc", "glibc"])
    assert alloclab("verify", str(out)).returncode == 0


def test_a_folder_from_before_rounds_json_resumes_from_its_runs_in_order(tmp_path):
    """A study folder from before rounds.json (tests/fixtures/study-v1: runs_in_order in
    plan.json) resumes: its rounds are its repeats, every run of them is finished, so nothing
    runs again and the folder still verifies."""
    out = tmp_path / "study-v1"
    shutil.copytree(ROOT / "tests" / "fixtures" / "study-v1", out)
    assert not (out / "rounds.json").exists()
    before = (out / "runs.csv").read_text()
    res = study.resume(out, Progress(0, stream=io.StringIO(), live=False))
    assert res.ok == 36 and (out / "runs.csv").read_text() == before
    rounds = json.loads((out / "rounds.json").read_text())["rounds"]
    assert [r["round"] for r in rounds] == [1, 2, 3] and sum(len(r["runs"]) for r in rounds) == 36
    assert Store(out).verify() == []


def test_side_by_side_across_cells_runs_the_whole_round_at_once(tmp_path, found):
    """side_by_side = the round's runs (memory-life quick's twelve lives): both cells' runs start
    together and share the machine, and every run is recorded as its own."""
    need(found, "jemalloc")
    raw = {"name": "sbs", "scale": "smoke", "engines": ["tidesdb", "rocksdb"], "allocators": ["glibc", "jemalloc"],
           "runs": 1, "side_by_side": 4, "warmup_s": 0.05,
           "workloads": [{"workload": "write", "key_bytes": 16, "value_bytes": 64, "threads": 1, "duration_s": 3}]}
    p = plan.load(raw, default_seed=3)
    out = tmp_path / "res"
    study.run(p, out, Progress(len(expand(p)), stream=io.StringIO(), live=False))
    rows = Store(out).rows()
    assert len(rows) == 4 and all(r.status == "ok" and r.allocator_verified for r in rows), [r.reason for r in rows]
    assert {r.engine for r in rows} == {"tidesdb", "rocksdb"}
    from datetime import datetime
    spans = [(datetime.fromisoformat(r.started_at).timestamp(), r.wall_s) for r in rows]
    # every run was up while every other was: one group, not two cells one after the other
    assert max(s for s, _ in spans) < min(s + w for s, w in spans), spans
