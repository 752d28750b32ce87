#!/usr/bin/env python3
"""What profiling costs, and why it is kept out of the statistics: the same cell run as a
measured run, a profiled run (perf record: cpu-clock at 999 Hz and every context switch, with
call graphs) and a call-counting run (uprobes on malloc/calloc/realloc/free), interleaved, in
one run (not a test). Prints each triple and the median ratios profiled / measured and
counted / measured. `--profile` adds the two instrumented kinds as separate runs, so measured
runs (and every verdict) pay none of it.

    .venv/bin/python bench/profile_overhead.py [--engine tidesdb] [--triples 6] [--seconds 4]
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # helpers: one run outside a study

from _common import arguments  # noqa: E402
from helpers import execute  # noqa: E402

from alloclab import plan  # noqa: E402
from alloclab.answers import stats  # noqa: E402
from alloclab.clients import driver  # noqa: E402
from alloclab.run import profiling  # noqa: E402

KINDS = ("measure", "profile", "calls")


def main() -> int:
    a = arguments(__doc__, engine="tidesdb", triples=6, seconds=4.0, threads=2).parse_args()
    if profiling.unavailable():
        raise SystemExit(profiling.unavailable())
    p = plan.load({"engines": [a.engine], "allocators": ["glibc"], "runs": 1, "scale": "smoke",
                   "workloads": [{"workload": "write", "pattern": "random", "threads": [a.threads], "batch": [1],
                                  "value_bytes": 16, "duration_s": a.seconds}]}, default_seed=1)
    spec = p.round_specs(1, None, 1)[0]
    exe = driver.locate()
    ratios: dict[str, list[float]] = {"profile": [], "calls": []}
    with tempfile.TemporaryDirectory(prefix="alloclab-bench-") as d:
        for i in range(a.triples):
            got = {}
            order = KINDS[i % 3:] + KINDS[:i % 3]  # rotate who goes first
            for kind in order:
                s = replace(spec, purpose=kind, run_id=f"{i}-{kind}", seed=spec.seed + i)
                got[kind] = execute(s, Path(d) / s.run_id, Path(d), exe, "bench").ops_per_s
            for k in ratios:
                ratios[k].append(got[k] / got["measure"])
            print(f"triple {i + 1}: measured {got['measure']:,.0f} ops/s, profiled {got['profile']:,.0f} "
                  f"({ratios['profile'][-1]:.3f}), counting calls {got['calls']:,.0f} ({ratios['calls'][-1]:.3f})",
                  flush=True)
    for k, what in (("profile", "profiled / measured"), ("calls", "counting calls / measured")):
        r = ratios[k]
        print(f"{a.engine} write t{a.threads} b1 v16, {a.seconds:g} s windows: median ratio {what} "
              f"{stats.median(r):.3f} over {len(r)} runs (min {min(r):.3f}, max {max(r):.3f})")
    print("measured runs of a --profile study are plain runs: their cost of profiling is 0 by construction")
    return 0


if __name__ == "__main__":
    sys.exit(main())
