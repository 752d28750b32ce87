"""CPU profiles of the process under test (perf, cpu-clock, call graphs) over the measured
window, and the allocator's share of them: real runs, real perf."""

import io
import json
import re
import xml.etree.ElementTree as ET

import pytest
from conftest import need

from alloclab import flames, plan, profiling, report, study
from alloclab.progress import Progress
from alloclab.store import Store


def test_a_malloc_bound_workload_spends_clearly_more_cpu_in_the_allocator_than_the_null_engine(tmp_path, found):
    if profiling.unavailable():
        pytest.skip(profiling.unavailable())
    need(found, "jemalloc")
    raw = {"engines": ["tidesdb", "null"], "allocators": ["glibc", "jemalloc"], "runs": 1, "scale": "smoke",
           "perf": True,
           "workloads": [{"part": "churn", "workload": "write", "pattern": "random", "threads": [2], "batch": [1],
                          "value_bytes": 16, "duration_s": 2.0}]}
    out = tmp_path / "res"
    res = study.run(plan.load(raw, default_seed=1), out, Progress(0, stream=io.StringIO(), live=False))
    rows = {r.engine: r for r in Store(out).rows() if r.allocator == "glibc"}
    assert res.ok == 4, [(r.run_id, r.reason) for r in Store(out).rows()]
    tides, null = rows["tidesdb"], rows["null"]
    assert null.alloc_cpu_total_pct is not None and null.alloc_cpu_total_pct < 1.0, null
    assert tides.alloc_cpu_self_pct > 2.0 and tides.alloc_cpu_self_pct > 5 * max(null.alloc_cpu_self_pct, 0.1)
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
    text = report.build(out).read_text()
    assert "Allocator share of CPU" in text and "switches in allocator %" in text
    # flame graphs per cell and allocator (inferno), on- and off-CPU, and jemalloc against glibc
    if flames.missing():
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
    stacks = profiling.parse_script(script)
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
    assert "1 ok, 0 failed" in p.stdout
    row = Store(out).rows()[0]
    assert row.alloc_cpu_self_pct is None
    table = (out / "report" / "tables" / "alloc_cpu.md").read_text()
    assert "absent: perf is not installed" in table
