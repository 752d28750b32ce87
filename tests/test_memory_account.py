"""The allocator's own account of memory, read inside the process under test by the driver at
the end of the measured window: real runs under glibc, jemalloc, mimalloc and a link-time
jemalloc build."""

import io
import json

import pytest
from conftest import need

from alloclab import plan, report, study
from alloclab.results.store import Store
from alloclab.study.progress import Progress


def test_live_bytes_come_from_each_allocators_own_interface_and_fit_in_rss(tmp_path, found):
    need(found, "jemalloc", "mimalloc")
    raw = {"engines": ["rocksdb"], "allocators": ["glibc", "jemalloc", "mimalloc", "jemalloc@link"], "runs": 1,
           "scale": "smoke", "workloads": [{"part": "w", "workload": "write", "pattern": "random", "threads": [2],
                                            "batch": [100], "value_bytes": 100, "ops": 100000}]}
    out = tmp_path / "res"
    res = study.run(plan.load(raw, default_seed=1), out, Progress(0, stream=io.StringIO(), live=False))
    rows = {r.allocator: r for r in Store(out).rows()}
    assert res.ok == 4, [(r.run_id, r.reason) for r in rows.values()]
    for name, source in (("glibc", "mallinfo2"), ("jemalloc", "mallctl"), ("jemalloc@link", "mallctl")):
        r = rows[name]
        j = json.loads((out / "runs" / r.run_id / "run.json").read_text())
        acc, rss = j["alloc_account"], j["summary"]["rss_bytes"]
        assert acc["source"].startswith(source), acc
        # RocksDB's memtable and block cache are tens of MiB, all of it touched: live within RSS
        assert 10 << 20 < r.alloc_live_bytes <= rss, (name, r.alloc_live_bytes, rss)
        assert r.fragmentation == round(rss / r.alloc_live_bytes, 4) and r.fragmentation >= 1
        assert r.alloc_resident_bytes >= 0.9 * r.alloc_live_bytes
    mi = rows["mimalloc"]
    assert mi.alloc_live_bytes is None and mi.fragmentation is None and mi.alloc_resident_bytes > 0
    text = report.build(out).read_text()
    table = text.split("## The allocator's own memory account")[1].split("\n## ")[0]
    assert "| mimalloc | 1 | not offered |" in table and "mimalloc 2.0 keeps no count of live bytes" in table
    # each answer says why in full, from the allocator's own numbers (mimalloc offers no live bytes)
    why = text.split("## Why: each answer in full")[1].split("\n## ")[0]
    assert "jemalloc against glibc" in why and "(why: fragmentation (RSS ÷ live) 1." in why
    csv_head = (out / "runs.csv").read_text().splitlines()[0]
    assert ",alloc_live_bytes,alloc_resident_bytes,fragmentation," in csv_head


def test_servers_give_their_account_profile_and_calls_at_the_end_of_the_window(tmp_path, found):
    """MariaDB (the host's and, where set up, the stack's 11.8 in its root) and PostgreSQL (the
    postmaster and every backend, through fork): the helper preloaded beside the allocator
    writes each process's account when the client's window ends; profiled runs record the
    server and its backends; the calls run counts the server's malloc family."""
    from alloclab.answers import analyse
    from alloclab.run import profiling
    from alloclab.servers import root
    need(found, "jemalloc")
    engines = ["mariadb-innodb", "postgres"] + (["mariadb11-innodb"] if root.describe().startswith("ready") else [])
    raw = {"engines": engines, "allocators": ["glibc", "jemalloc"], "runs": 1, "scale": "smoke", "perf": True,
           "profile_runs": 1,
           "workloads": [{"part": "scaling", "workload": "sysbench", "test": "oltp_read_write", "threads": [2],
                          "tables": 2, "table_size": 2000, "duration_s": 3.0}]}
    out = tmp_path / "res"
    res = study.run(plan.load(raw, default_seed=1), out, Progress(0, stream=io.StringIO(), live=False))
    rows = Store(out).rows()
    assert res.ok == len(rows) == 5 * len(engines), [(r.run_id, r.reason) for r in rows if r.status != "ok"]
    for r in rows:
        j = json.loads((out / "runs" / r.run_id / "run.json").read_text())
        acc = j["alloc_account"]
        assert acc and acc["source"] == ("mallinfo2" if r.allocator == "glibc" else "mallctl stats.*"), (r.run_id, j)
        # live bytes within the server's RSS at the same moment (InnoDB's buffer pool and
        # PostgreSQL's shared buffers are RSS the allocator never handed out)
        assert 1 << 20 < r.alloc_live_bytes and r.fragmentation > 1.0, r
        if r.engine == "postgres":  # the postmaster, its helpers and the 2 backends that served sysbench
            assert acc["processes"] >= 4 and acc["processes"] == acc["processes_expected"], acc
    if profiling.unavailable():
        return
    symbol = {"postgres": "PostgresMain", "mariadb-innodb": "dispatch_command", "mariadb11-innodb": "dispatch_command"}
    for r in rows:
        if r.purpose == "profile":
            assert r.alloc_cpu_total_pct is not None and r.alloc_cpu_total_pct > 0, r
            folded = (out / "runs" / r.run_id / "stacks.folded").read_text()
            assert symbol[r.engine] in folded, r.run_id  # the server's own frames, backends included
        elif r.purpose == "calls":
            calls = json.loads((out / "runs" / r.run_id / "calls.json").read_text())
            assert r.alloc_calls_per_op > 5 and calls["calls"]["malloc"] > 1000, (r, calls)
            assert calls["library"].endswith("libc.so.6")
        else:
            assert r.alloc_cpu_total_pct is None and r.alloc_calls_per_s is None
    assert len(analyse.load(out).rows) == 2 * len(engines)  # statistics from measured runs only
    text = report.build(out).read_text()
    assert "Allocator share of CPU vs threads" in text and "processes |" in text.split("memory account")[1]
    # one thread count: the share is a table; a line "vs threads" through one point is not drawn
    assert not (out / "report" / "charts" / "alloc_share_vs_threads.svg").exists()


def test_an_allocator_without_an_interface_is_never_given_glibcs_numbers():
    from alloclab.alloc import account
    glibc = {"allocator": "glibc", "source": "mallinfo2", "live_bytes": 10, "resident_bytes": 12}
    assert account.own(glibc, "glibc") is glibc
    other = account.own(glibc, "myalloc")
    assert other["live_bytes"] is None and "myalloc offers none of the interfaces" in other["note"]
    assert account.row_fields(other, 100) == {"alloc_live_bytes": None, "alloc_resident_bytes": None,
                                              "fragmentation": None}
    # a server of several processes: byte counts added up, the process count kept
    s = account.summed([{"allocator": "jemalloc", "source": "mallctl stats.*", "pid": 1, "live_bytes": 5,
                         "resident_bytes": 7}, {"allocator": "jemalloc", "source": "mallctl stats.*", "pid": 2,
                                                "live_bytes": 6, "resident_bytes": None}], 3)
    assert (s["live_bytes"], s["resident_bytes"], s["processes"], s["processes_expected"]) == (11, None, 2, 3)


def test_phase_gates_take_turns_and_a_missing_helper_costs_one_wait(tmp_path):
    """The client's side of a life's phase gates, against a stand-in for the helper's thread (the
    real helper in a real server: test_life_workload's smoke life): phase k opens gate 1 or 2 in
    turn and takes it back once the account is there; where nothing writes, one wait of WAIT_S and
    then none."""
    import fcntl
    import threading
    import time
    from pathlib import Path

    from alloclab.alloc import account
    acc = account.ServerAccount(tmp_path / "acc", Path("/no/helper.so"), life=True)
    acc.env({})
    env, fds = acc.client_env()
    assert len(fds) == 2 and sorted(p.name for p in (tmp_path / "acc").iterdir()) == ["gate", "gate-1", "gate-2"]
    gates = account.PhaseGates(env[account.PHASE_GATES_ENV])

    def helper(n):  # what lib.rs's thread does, for n phases
        for k in range(1, n + 1):
            with open(tmp_path / "acc" / f"gate-{2 - k % 2}") as g:
                fcntl.flock(g, fcntl.LOCK_SH)
                (tmp_path / "acc" / f"phase-{k}-7.json").write_text(json.dumps({"pid": 7, "live_bytes": k}))
    t = threading.Thread(target=helper, args=(5,))
    t.start()
    got = [gates.read(k) for k in range(1, 6)]
    t.join(5)
    assert [g["live_bytes"] for g in got] == [1, 2, 3, 4, 5] and not t.is_alive()
    # both gates are held again: a helper would wait for phase 6
    for k in (1, 2):
        with open(tmp_path / "acc" / f"gate-{k}") as g:
            with pytest.raises(BlockingIOError):
                fcntl.flock(g, fcntl.LOCK_SH | fcntl.LOCK_NB)
    t0 = time.monotonic()
    assert gates.read(6) is None and time.monotonic() - t0 >= account.WAIT_S * 0.9
    t0 = time.monotonic()
    assert gates.read(7) is None and time.monotonic() - t0 < 1.0  # silent from then on, no WAIT_S
    acc.close()
