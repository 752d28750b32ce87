#!/usr/bin/env python3
"""What `--profile` (perf record, cpu-clock at 999 Hz, call graphs) costs the process under
test: the same cell run with and without a profile, interleaved, in one run (not a test).
Prints the throughput of each pair and the median ratio profiled / unprofiled.

    .venv/bin/python bench/profile_overhead.py [--engine tidesdb] [--pairs 6] [--seconds 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from alloclab import driver, plan, profiling, stats  # noqa: E402
from alloclab.execute import execute  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", default="tidesdb")
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if profiling.unavailable():
        raise SystemExit(profiling.unavailable())
    p = plan.load({"engines": [a.engine], "allocators": ["glibc"], "runs": 1, "scale": "smoke",
                   "workloads": [{"workload": "write", "pattern": "random", "threads": [a.threads], "batch": [1],
                                  "value_bytes": 16, "duration_s": a.seconds}]}, default_seed=1)
    spec = p.expand()[0]
    exe = driver.locate()
    ratios = []
    with tempfile.TemporaryDirectory(prefix="alloclab-bench-") as d:
        for i in range(a.pairs):
            got = {}
            for perf in ((False, True) if i % 2 == 0 else (True, False)):  # alternate who goes first
                s = replace(spec, perf=perf, run_id=f"{i}-{int(perf)}", seed=spec.seed + i)
                row = execute(s, Path(d) / s.run_id, Path(d), exe, "bench")
                got[perf] = row.ops_per_s
            ratios.append(got[True] / got[False])
            print(f"pair {i + 1}: without {got[False]:,.0f} ops/s, with profile {got[True]:,.0f} ops/s, "
                  f"ratio {ratios[-1]:.3f}", flush=True)
    print(f"{a.engine} write t{a.threads} b1 v16, {a.seconds:g} s windows: median ratio profiled / unprofiled "
          f"{stats.median(ratios):.3f} over {len(ratios)} pairs (min {min(ratios):.3f}, max {max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
