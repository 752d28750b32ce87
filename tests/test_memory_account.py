"""The allocator's own account of memory, read inside the process under test by the driver at
the end of the measured window: real runs under glibc, jemalloc, mimalloc and a link-time
jemalloc build."""

import io
import json

from conftest import need

from alloclab import plan, report, study
from alloclab.progress import Progress
from alloclab.store import Store


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
    # each answer says why, from the allocator's own numbers (mimalloc offers no live bytes)
    answers = text.split("## Answers")[1].split("\n## ")[0]
    assert "jemalloc against glibc" in answers and "(why: fragmentation (RSS ÷ live) 1." in answers
    csv_head = (out / "runs.csv").read_text().splitlines()[0]
    assert ",alloc_live_bytes,alloc_resident_bytes,fragmentation," in csv_head
