"""The Ray executor against a real Ray cluster on this machine: a head that measures nothing and
two worker nodes with one alloclab_slot each, every node in its own process group. Runs are
real (SQLite and RocksDB in the driver, allocators preloaded and proved)."""

import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from test_faults import _env, alloclab, interrupt

from alloclab.answers import analyse, replicate
from alloclab.results.store import RunRow, Store
from alloclab.study import fleet

PLAN = ["--engines", "sqlite,rocksdb", "--allocators", "glibc,jemalloc", "--workloads", "write", "--runs", "2",
        "--duration", "3s", "--scale", "smoke", "--seed", "7", "--quiet"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = fleet.LocalCluster(workers=2, log_dir=tmp_path_factory.mktemp("ray"))
    yield c
    c.stop()


def rows(out: Path) -> list[dict]:
    with open(out / "runs.csv") as f:
        return list(csv.DictReader(f))


def start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "alloclab", "run", *args], env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def drivers_of(out: Path) -> list[int]:
    """alloclab-driver processes writing into a node's scratch for this study (none once it ended)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if cmd and cmd[0].endswith(b"alloclab-driver") and any(b"alloclab-node-" in a for a in cmd):
                found.append(int(pid))
    return found


def sections(md: Path) -> list[str]:
    return [line for line in md.read_text().splitlines() if line.startswith("#")]


def test_a_ray_study_survives_a_lost_node_and_matches_a_local_study(tmp_path, cluster):
    ray_out, local_out = tmp_path / "ray", tmp_path / "local"
    proc = start([*PLAN, "--ray", cluster.address, "--out", str(ray_out)])
    # kill a worker node mid-run: right after its first run is recorded, it runs the cell's
    # other allocator (a cell's runs of a round go back to back to one node)
    victim = None
    deadline = time.monotonic() + 300
    while victim is None and time.monotonic() < deadline and proc.poll() is None:
        done = rows(ray_out) if (ray_out / "runs.csv").exists() else []
        for r in done:
            if r["node"] in cluster.nodes:
                victim = r["node"]
                break
        time.sleep(0.05)
    assert victim, proc.communicate()[1]
    cluster.kill(victim)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert f"node {victim} was lost during" in err

    got = rows(ray_out)
    ids = [r["run_id"] for r in got]
    assert len(ids) == len(set(ids)) == 8  # every run once: the lost one ran again, nothing duplicated
    assert all(r["status"] == "ok" and r["allocator_verified"] == "true" for r in got), got
    lost = Store(ray_out).read_json(fleet.LOST)["lost"]
    assert len(lost) == 1 and lost[0]["node"] == victim
    again = next(r for r in got if r["run_id"] == lost[0]["run_id"])
    assert again["node"] != victim  # re-queued on the node that was left
    assert {r["node"] for r in got} <= set(cluster.nodes) | {victim} and all(r["node"] for r in got)
    assert len({r["machine_fingerprint"] for r in got}) == 1  # one machine: one fingerprint
    assert sorted(p.name for p in (ray_out / "runs").iterdir()) == sorted(ids)
    assert Store(ray_out).verify() == []
    assert drivers_of(ray_out) == []

    # the same plan on this machine: the same cells, columns and report sections (node empty)
    p = alloclab("run", *PLAN, "--out", str(local_out))
    assert p.returncode == 0, p.stderr
    local = rows(local_out)
    assert list(got[0]) == list(local[0]) == RunRow.columns() + ["value_bytes_min"]  # a key-value study's own
    assert sorted(r["run_id"] for r in local) == sorted(ids)
    assert {r["cell"] for r in local} == {r["cell"] for r in got}
    assert all(r["node"] == "" and r["machine_fingerprint"] for r in local)
    for name in ("report.md", "answers.md"):
        assert sections(ray_out / "report" / name) == sections(local_out / "report" / name), name
    env = (ray_out / "report" / "report.md").read_text()
    assert f"executor: Ray cluster at {cluster.address}" in env and f"node {victim}: " in env


def test_ctrl_c_stops_a_ray_study_and_resume_finishes_it_on_the_cluster(tmp_path, cluster):
    if len(cluster.nodes) < 1:
        pytest.fail("the cluster has no worker left")
    out = tmp_path / "res"
    proc = start([*PLAN, "--ray", cluster.address, "--out", str(out)])
    kept = interrupt(out, proc, 2, 8)
    time.sleep(2)  # the killed workers' drivers die with them
    assert drivers_of(out) == []
    p = alloclab("run", "--resume", str(out), "--quiet")  # the cluster is the one the study started on
    assert p.returncode == 0, p.stderr
    # the killed workers' folders (data copies, nothing measured) were swept by the next workers,
    # which removed their own when the study ended
    assert list(Path(tempfile.gettempdir()).glob("alloclab-node-*")) == []
    after = rows(out)
    assert len(after) == len({r["run_id"] for r in after}) == 8
    before = {r["run_id"]: r for r in kept}
    for r in after:
        if r["run_id"] in before:
            assert r["started_at"] == before[r["run_id"]]["started_at"]
    assert Store(out).verify() == []


def test_a_cluster_without_slots_or_unreachable_is_refused_before_any_folder(tmp_path):
    out = tmp_path / "res"
    p = alloclab("run", *PLAN, "--ray", "127.0.0.1:1", "--out", str(out))
    assert p.returncode != 0
    assert "cannot reach the Ray cluster at 127.0.0.1:1" in p.stderr, p.stderr
    assert not out.exists()


def test_a_ray_study_over_machines_that_differ_answers_per_machine(tmp_path):
    """Two worker nodes labelled as two machines (ALLOCLAB_MACHINE_LABEL): the runs carry two
    fingerprints, pairs stay within a machine, every comparison is answered on each machine
    first, and only those that do not differ between them are pooled."""
    c = fleet.LocalCluster(workers=2, log_dir=tmp_path / "ray", labels=["rack-a", "rack-b"])
    try:
        out = tmp_path / "res"
        plan = ["--engines", "sqlite", "--allocators", "glibc,jemalloc,mimalloc", "--workloads", "write",
                "--threads", "1,2", "--runs", "6", "--duration", "2s", "--scale", "smoke", "--seed", "3", "--quiet"]
        p = alloclab("run", *plan, "--ray", c.address, "--out", str(out))
        assert p.returncode == 0, p.stderr
    finally:
        c.stop()
    got = rows(out)
    assert all(r["status"] == "ok" and r["allocator_verified"] == "true" for r in got), got
    fps = {r["machine_fingerprint"] for r in got}
    assert len(fps) == 2, fps  # two labels: two machines, though one host
    by_round = {}
    for r in got:  # a cell's runs of a round ran back to back on one node: pairs within a machine
        by_round.setdefault((r["repeat"], r["cell"]), set()).add(r["machine_fingerprint"])
    assert all(len(m) == 1 for m in by_round.values()), by_round
    s = analyse.load(out)
    assert s.fingerprints() == sorted(fps)
    thr = [v for v in s.verdicts() if v.metric == "throughput"]
    per = s.per_machine()
    assert set(per) == fps and all([v for v in vs if v.metric == "throughput"] for vs in per.values())
    outcomes = {x.key: x.outcome for x in s.between_machines()}
    for v in thr:  # pooled only where the machines do not differ; where they differ, answered apart
        assert bool(v.machine) == (outcomes[replicate.key(v)] == replicate.DIFFERS), (v, outcomes)
    md = (out / "report" / "report.md").read_text()
    head = md.split("## Answers")[1].split("\n## ")[0]
    assert "; on 2 machines (rack-a: " in head and "; rack-b: " in head
    svg = next((out / "report" / "charts").glob("verdicts_throughput.svg")).read_text()
    assert "on rack-a: " in svg and "on rack-b: " in svg
