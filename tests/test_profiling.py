"""CPU profiles of the process under test (perf, cpu-clock, call graphs) over the measured
window, and the allocator's share of them: real runs, real perf."""

import io
import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import need

from alloclab import plan, report, study
from alloclab.answers import analyse
from alloclab.report import flames
from alloclab.results.store import Store
from alloclab.run import profiling
from alloclab.study.progress import Progress


def test_a_malloc_bound_workload_spends_clearly_more_cpu_in_the_allocator_than_the_null_engine(tmp_path, found):
    if profiling.unavailable():
        pytest.skip(profiling.unavailable())
    need(found, "jemalloc")
    raw = {"engines": ["tidesdb", "null"], "allocators": ["glibc", "jemalloc"], "runs": 1, "scale": "smoke",
           "perf": True, "profile_runs": 1,
           "workloads": [{"part": "churn", "workload": "write", "pattern": "random", "threads": [2], "batch": [1],
                          "value_bytes": 16, "duration_s": 2.0}]}
    out = tmp_path / "res"
    res = study.run(plan.load(raw, default_seed=1), out, Progress(0, stream=io.StringIO(), live=False))
    all_rows = Store(out).rows()
    # per engine: 2 measured runs, 2 profiled runs (one per allocator), 1 run counting calls
    assert res.ok == 10, [(r.run_id, r.reason) for r in all_rows]
    by = {(r.engine, r.allocator, r.purpose): r for r in all_rows}
    assert sorted(r.purpose for r in all_rows if r.engine == "tidesdb") == ["calls", "measure", "measure",
                                                                            "profile", "profile"]
    # measured runs carry no profile: perf never slows a run that enters the statistics
    assert all(r.alloc_cpu_self_pct is None and r.alloc_calls_per_s is None for r in all_rows
               if r.purpose == "measure")
    assert {r.run_id for r in analyse.load(out).rows} == {r.run_id for r in all_rows if r.purpose == "measure"}
    tides, null = by[("tidesdb", "glibc", "profile")], by[("null", "glibc", "profile")]
    assert null.alloc_cpu_total_pct is not None and null.alloc_cpu_total_pct < 1.0, null
    # TidesDB's share here ranged 1.7-3.6 % over runs of this machine (its flushes and compactions
    # vary the rest of the profile), the null engine's is 0: clearly more, with room for that spread
    assert tides.alloc_cpu_self_pct > 1.0 and tides.alloc_cpu_self_pct > 5 * max(null.alloc_cpu_self_pct, 0.1)
    assert tides.alloc_cpu_self_pct <= tides.alloc_cpu_total_pct
    run_dir = out / "runs" / tides.run_id
    assert not (run_dir / "perf.data").exists()  # large: only the folded stacks are kept
    folded = (run_dir / "stacks.folded").read_text()
    assert any(("malloc" in line or "free" in line) for line in folded.splitlines())
    note = json.loads((run_dir / "run.json").read_text())["profile"]
    assert note["recorded"] and note["absent_because"] is None and note["frequency_hz"] == profiling.FREQ_HZ
    # context switches were recorded too, each with its stack; the null engine's do not pass
    # through the allocator
    assert (run_dir / "switches.folded").read_text().strip()
    assert tides.alloc_cs_pct is not None and (null.alloc_cs_pct or 0) < 5
    # the calls run: uprobes on libc's malloc family; TidesDB allocates per put, null never
    calls_t, calls_n = by[("tidesdb", "glibc", "calls")], by[("null", "glibc", "calls")]
    # the null engine's few calls are the runner's, at a steady rate per second (about 4k/s here):
    # per operation they are a hundredth of TidesDB's or less on any machine, however fast it is
    assert calls_t.alloc_calls_per_op > 1.0, calls_t
    assert calls_n.alloc_calls_per_op < calls_t.alloc_calls_per_op / 100, (calls_t, calls_n)
    calls = json.loads((out / "runs" / calls_t.run_id / "calls.json").read_text())
    assert calls["calls"]["malloc"] > 1000 and calls["calls"]["free"] > 1000 and calls["library"].endswith("libc.so.6")
    # 16-byte values and keys: most sized calls are small
    small = sum(b["pct"] for b in calls["sizes"] if b["bucket"] in ("≤ 16 B", "≤ 32 B", "≤ 64 B", "≤ 128 B"))
    assert small > 50, calls["sizes"]
    assert not subprocess.run(["perf", "probe", "-l"], capture_output=True, text=True).stdout.strip().count(
        "alloclab_"), "the uprobes were removed"
    text = report.build(out).read_text()
    assert "Allocator share of CPU" in text and "switches in allocator %" in text
    assert "Allocation rate and sizes" in text
    # flame graphs per cell and allocator (inferno), on- and off-CPU, and jemalloc against glibc
    if flames.install_or_why():
        assert "Absent here: " in text
        return
    graphs = out / "report" / "flamegraphs"
    names = sorted(p.name for p in graphs.iterdir())
    assert any(n.endswith("-jemalloc-diff.svg") for n in names) and sum(n.endswith("-off.svg") for n in names) == 4
    for p in graphs.iterdir():
        root = ET.parse(p).getroot()
        assert root.tag.endswith("svg")
    import csv
    table = list(csv.DictReader((out / "report" / "tables" / "flamegraphs.csv").open()))
    tides_glibc = next(r["on-CPU"] for r in table if r["engine"] == "tidesdb" and r["allocator"] == "glibc")
    titles = " ".join(t.text or "" for t in ET.parse(out / "report" / tides_glibc).iter() if t.tag.endswith("title"))
    assert re.search(r"\b(malloc|free|cfree|_int_malloc|_int_free)\b", titles), titles[:500]
    html_text = (out / "report" / "report.html").read_text()
    assert '<a href="flamegraphs/' in html_text


def test_shares_count_leaf_frames_stacks_and_kernel_time_under_the_allocator():
    script = """drv 1
\t  1 _int_malloc (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t  2 malloc (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t  3 main (/bin/drv)

drv 1
\t  1 memcpy (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t  2 malloc (/usr/lib/x86_64-linux-gnu/libc.so.6)

drv 1
\tffff do_syscall_64 ([kernel.kallsyms])
\t  4 madvise (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t  5 je_extent_purge (/usr/lib/x86_64-linux-gnu/libjemalloc.so.2)

drv 1
\t  6 work (/bin/drv)
"""
    stacks = [st for stacks in profiling.parse_by_event(script).values() for st in stacks]
    by_event = profiling.parse_by_event(script.replace("drv 1\n\t  6", "drv context-switches/period=1/:\n\t  6"))
    assert [len(by_event["cpu-clock"]), len(by_event["context-switches"])] == [3, 1]
    assert profiling.switch_share(by_event["context-switches"]) == 0.0
    assert len(stacks) == 4 and stacks[0][0] == ("_int_malloc", "/usr/lib/x86_64-linux-gnu/libc.so.6")
    sh = profiling.shares(stacks)
    # leaf in the allocator: 1 of 4; allocator anywhere: 3 of 4; kernel reached from it: 1 of 4
    # (memcpy is libc but not malloc; madvise's caller is jemalloc)
    assert (sh.samples, sh.self_pct, sh.total_pct, sh.kernel_pct) == (4, 25.0, 75.0, 25.0)
    assert "main;malloc;_int_malloc 1" in profiling.folded(stacks).splitlines()


def test_without_perf_the_study_runs_on_and_says_profiles_are_absent(tmp_path):
    import os
    import subprocess
    import sys

    from conftest import ROOT
    out = tmp_path / "res"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "ALLOCLAB_PERF": str(tmp_path / "no-perf-here")}
    p = subprocess.run([sys.executable, "-m", "alloclab", "run", "--engines", "null", "--allocators", "glibc",
                        "--workloads", "write", "--ops", "20000", "--runs", "1", "--scale", "smoke", "--profile",
                        "--quiet", "--out", str(out)], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    said = p.stdout + p.stderr
    assert "profiles are absent from this study: perf is not installed: apt-get install -y linux-perf" in said
    assert "1 ok, 0 failed" in p.stdout  # no profiled runs: none would record anything
    row = Store(out).rows()[0]
    assert row.alloc_cpu_self_pct is None
    table = (out / "report" / "tables" / "alloc_cpu.md").read_text()
    assert "absent: perf is not installed" in table


def test_without_permission_for_uprobes_the_study_completes_and_says_why(tmp_path):
    """Not root: perf may still sample the user's own processes (perf_event_paranoid 2), but
    placing uprobes needs root. The study, run as another user, completes; its call-counting run
    says why it counted nothing, in run.json and in the report."""
    import os
    import shutil
    import sys
    import tempfile

    from conftest import ROOT
    if os.geteuid() != 0 or profiling.unavailable():
        pytest.skip("needs root (to run the study as another user) and perf")
    base = tempfile.mkdtemp(prefix="alloclab-test-")
    try:
        shutil.chown(base, "postgres", "postgres")
        out = f"{base}/res"
        # the checkout's Python may live under root's home, closed to other users: the system's
        # Python of the same version runs the same packages
        system = shutil.which("python3", path="/usr/bin")
        got = subprocess.run([system or "false", "-c", "import sys; print(sys.version_info[:2])"],
                             capture_output=True, text=True).stdout.strip()
        if got != str(sys.version_info[:2]):
            pytest.skip(f"no system Python {sys.version_info[:2]} for another user to run")
        import sysconfig
        path = f"{ROOT}/src:{sysconfig.get_paths()['purelib']}:{sysconfig.get_paths()['platlib']}"
        cmd = (f"cd {ROOT} && PYTHONPATH={path} {system} -m alloclab run --engines null --allocators glibc "
               f"--workloads write --duration 2s --runs 1 --scale smoke --profile --quiet --out {out}")
        p = subprocess.run(["su", "postgres", "-s", "/bin/sh", "-c", cmd], capture_output=True, text=True,
                           timeout=600)
        assert p.returncode == 0, p.stderr + p.stdout
        assert "3 ok, 0 failed" in p.stdout, p.stdout
        rows = {r.purpose: r for r in Store(out).rows()}
        assert rows["profile"].alloc_cpu_total_pct is not None  # its own processes: sampled
        calls = rows["calls"]
        assert calls.status == "ok" and calls.alloc_calls_per_s is None
        why = json.loads((Path(out) / "runs" / calls.run_id / "run.json").read_text())["profile"]["absent_because"]
        assert why and "uprobe" in why, why
        table = (Path(out) / "report" / "tables" / "alloc_calls.md").read_text()
        assert "absent: perf probe cannot place a uprobe" in table, table
    finally:
        shutil.rmtree(base, ignore_errors=True)
