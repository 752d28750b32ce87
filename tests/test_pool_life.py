"""PostgreSQL's life on a pool of sessions held throughout: the pool's private memory summed over
its backends at each sample (real processes), a storm's short backends counted apart, a real
smoke life, and a backend the cgroup's OOM killer kills, recorded as an outcome at its cycle with
the server's reset."""

import csv
import io
import json
import subprocess
import sys
import time

import pytest
from conftest import need
from test_life_workload import only

from alloclab import plan, study
from alloclab.answers import life
from alloclab.host import backends
from alloclab.plan.presets import preset
from alloclab.results.store import Store
from alloclab.study.progress import Progress

MIB = 2**20
# a process that holds `MiB` of private memory, touched, and says so; its title is its last argument
HOLD = ("import sys, time; b = bytearray(int(sys.argv[1]) << 20); b[::4096] = b'x' * len(b[::4096]); "
        "print('ready', flush=True); time.sleep(120)")
# a "postmaster" that starts one child per (MiB, title) pair and waits
PARENT = (f"import subprocess, sys; HOLD = {HOLD!r}\n"
          "kids = [subprocess.Popen([sys.executable, '-c', HOLD, m, t], stdout=subprocess.PIPE)\n"
          "        for m, t in zip(sys.argv[1::2], sys.argv[2::2])]\n"
          "[k.stdout.readline() for k in kids]\n"
          "print(' '.join(str(k.pid) for k in kids), flush=True)\n"
          "[k.wait() for k in kids]")


def anon(pid: int) -> int:
    return backends._status(pid)[0]


def test_the_pool_is_summed_over_its_backends_present_at_each_sample_in_private_memory_apart_from_a_storm():
    kids = [("40", "postgres: root sbtest [local] idle"), ("24", "postgres: root sbtest [local] idle"),
            ("16", "postgres: root sbtest [local] SELECT"), ("8", "postgres: checkpointer")]
    parent = subprocess.Popen([sys.executable, "-c", PARENT, *[x for k in kids for x in k]], stdout=subprocess.PIPE,
                              text=True)
    try:
        a, b, storm, aux = map(int, parent.stdout.readline().split())
        s = backends.sample(parent.pid, {a, b}, {})
        # the pool: its two backends' RssAnon, not their RSS (which counts the interpreter's file pages)
        assert s["pool_backends"] == 2 and s["pool_anon_bytes"] == pytest.approx(anon(a) + anon(b), abs=2 * MIB)
        assert s["pool_anon_bytes"] >= 64 * MIB
        rss = sum(int(open(f"/proc/{p}/status").read().split("VmRSS:")[1].split()[0]) * 1024 for p in (a, b))
        assert rss - s["pool_anon_bytes"] > 4 * MIB
        # a backend not of the pool (a storm's) is counted apart, and so is an auxiliary process
        assert s["other_backends"] == 1 and s["other_anon_bytes"] == pytest.approx(anon(storm), abs=MIB)
        assert s["aux_anon_bytes"] == pytest.approx(anon(aux), abs=MIB) and s["postmaster_anon_bytes"] > 0
        # a backend that went away adds nothing to the next sample
        subprocess.run(["kill", "-9", str(b)], check=True)
        time.sleep(0.3)
        after = backends.sample(parent.pid, {a, b}, {})
        assert after["pool_backends"] == 1 and after["pool_anon_bytes"] == pytest.approx(anon(a), abs=2 * MIB)
    finally:
        parent.kill()
        subprocess.run(["pkill", "-9", "-P", str(parent.pid)])
    assert backends.sample(parent.pid, {a}, {}) is None or parent.wait(5) is not None


def pool_life(tmp_path, **keys):
    raw = only(preset("memory-life", "smoke"), "postgres", **keys)
    out = tmp_path / "res"
    study.run(plan.load(raw, default_seed=1), out, Progress(0, stream=io.StringIO(), live=False))
    (r,) = Store(out).rows()
    run_dir = out / "runs" / r.run_id
    assert (run_dir / "run.json").exists(), r.reason
    return r, json.loads((run_dir / "run.json").read_text()), run_dir


@pytest.mark.slow
def test_a_smoke_life_on_postgres_measures_the_pool_and_its_account(tmp_path, found):
    need(found, "jemalloc")
    r, j, run_dir = pool_life(tmp_path, allocators=["jemalloc+MALLOC_CONF=background_thread:true"])
    assert r.status == "ok" and r.allocator_verified, r.reason
    phases = j["life"]["phases"]
    assert [(p["cycle"], p["name"]) for p in phases] == [(c, n) for c in (1, 2, 3)
                                                         for n in ("oltp", "report", "maint", "storm", "rest")]
    assert all(not p["cut"] for p in phases) and j["life"]["stopped"] is None
    # measured on the pool's private memory (pool.csv), its five backends present throughout
    pool = life.read_rss(run_dir, "pool.csv")
    with open(run_dir / "pool.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {int(x["pool_backends"]) for x in rows} == {5} and all(x["rss_bytes"] == x["pool_anon_bytes"] for x in rows)
    assert r.own.settled_rss_bytes == int(j["life"]["measured"]["settled"][-1][2]) and r.own.life_cycles == 3
    assert min(v for _, v in pool) > 5 * MIB
    # PostgreSQL's account: the pool's memory contexts, every session's, at every phase's end
    assert all(p["engine"]["pool_sessions"] == 5 and p["engine"]["engine_bytes"] > 1 * MIB for p in phases)
    assert r.own.overhead_bytes is not None and r.ops_per_s > 0
    # jemalloc's background thread runs in the postmaster only: a forked backend has none
    note = j["life"]["pool"]
    assert "jemalloc_bg_thd" in note["postmaster_threads"] and note["backend_threads"] == ["postgres"]
    # each storm's short backends were counted apart, and gave back all they had once they exited
    assert len(note["storms"]) == 3 and all(s["backends_max"] >= 1 and s["anon_max_bytes"] > 0 for s in note["storms"])
    assert all(s["anon_left_bytes"] == 0 for s in note["storms"])


@pytest.mark.slow
def test_a_backend_oom_killed_under_the_cgroup_limit_is_an_outcome_at_its_cycle_with_the_servers_reset(tmp_path):
    # reports at a work_mem of 2 GiB on every session of the pool: about 250 MiB at once, above 200
    raw = only(preset("memory-life", "smoke"), "postgres", allocators=["glibc"], server_memory_bytes="200MiB")
    w = raw["workloads"][0]
    w |= {"tables": 2, "table_size": 60_000,
          "phases": [p | ({"work_mem": "2GiB"} if p["name"] == "report" else {}) for p in w["phases"]]}
    out = tmp_path / "res"
    study.run(plan.load(raw, default_seed=1), out, Progress(0, stream=io.StringIO(), live=False))
    (r,) = Store(out).rows()
    j = json.loads((out / "runs" / r.run_id / "run.json").read_text())
    assert r.status == "ok", r.reason  # an outcome, not a failed row
    oom = j["life"]["oom"]
    assert r.own.oom_killed and oom["killed"] and r.own.oom_cycle == oom["cycle"] == 1 and oom["phase"] == "report"
    # the server lived on: it ended every session of the pool and recovered, as its log says
    (cut,) = [p for p in j["life"]["phases"] if p.get("reset")]
    reset = cut["reset"]
    assert cut["name"] == "report" and cut["cut"]
    assert j["life"]["stopped"] == "the server reset 5 of the pool's 5 sessions"
    assert reset["sessions_lost"] == 5 and reset["signal"] == 9 and reset["killed_pool_backend"]
    assert reset["recovered_after_s"] is not None and any("terminated by signal 9" in x for x in reset["log"])
    assert j["clean_shutdown"] is True
