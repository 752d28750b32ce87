"""bench/spread_split.py on a stored study of the real driver whose allocators took turns (null
engine: this tests the harness): a round's ratio as the study stored it, and a within-run part
read from the turns the runs stored."""

import math
import statistics

from conftest import need
from helpers import bench
from test_rounds import alloclab, write_plan

from alloclab.results.store import Store


def test_a_rounds_spread_is_split_into_the_turns_own_and_the_servers(tmp_path, found):
    need(found, "jemalloc")
    out = tmp_path / "res"
    p = alloclab("run", "--plan", str(write_plan(tmp_path)), "--runs", "3", "--slice", "0.05", "--out", str(out),
                 "--quiet")
    assert p.returncode == 0, p.stderr
    script = bench("spread_split")
    rows = Store(out).rows()
    some = next(r for r in rows if r.allocator == "jemalloc")
    t = script.turns(out / "runs" / some.run_id)
    assert t and all(ops > 0 and s > 0 for ops, s in t.values())  # the run's measured turns, by place
    got = script.split(out, "glibc", 1)
    cells = sorted({r.cell for r in rows})
    assert sorted((c, a, n) for c, a, n, _, _ in got) == [(c, "jemalloc", 3) for c in cells]
    for cell, _a, _n, observed, within in got:
        def log_rate(a, k, cell=cell):
            return math.log(next(r.ops_per_s for r in rows if (r.cell, r.allocator, r.repeat) == (cell, a, k)))
        ratios = [log_rate("jemalloc", k) - log_rate("glibc", k) for k in (1, 2, 3)]
        assert observed == statistics.stdev(ratios)  # a round's ratio as the study stored its runs
        assert within > 0
