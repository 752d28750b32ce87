#!/usr/bin/env python3
"""What sending a run to a Ray node costs, measured on a local cluster (a head and one worker
node with one alloclab_slot, every node on this machine), in one run (not a test).

The same study (the null engine, short runs, so that the harness is what is timed) runs once on
this machine and once through the Ray executor. For every run, overhead = the time from the
executor starting it to its row being recorded, less the run's own wall time (wall_s: start of
the target to its reaping). Locally that is preparing the run folder and writing its files;
through Ray it adds the call to the node's worker, the row and the run's files coming back
(pickled through Ray's object store) and being written into the study folder. Also printed: a
bare round trip to the worker, and the worker's start (the node's own preflight).

    .venv/bin/python bench/ray_dispatch.py [--runs 20] [--ops 2000]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from alloclab import plan, study  # noqa: E402
from alloclab.study import fleet  # noqa: E402
from alloclab.study.progress import Progress  # noqa: E402


class Clock(Progress):
    """Progress that notes when each run is started and recorded."""

    def __init__(self):
        super().__init__(0, stream=io.StringIO(), live=False)
        self.began: dict[str, float] = {}
        self.over: list[float] = []
        self.walls: list[float] = []

    def start(self, spec):
        super().start(spec)
        self.began[spec.run_id] = time.monotonic()

    def finish(self, spec, row):
        took = time.monotonic() - self.began[spec.run_id]
        self.over.append(took - row.wall_s)
        self.walls.append(row.wall_s)
        super().finish(spec, row)


def _plan(runs: int, ops: int, executor: str, address: str = "") -> plan.Plan:
    d = {"name": f"dispatch-{executor}", "engines": ["null"], "allocators": ["glibc"], "runs": runs,
         "scale": "smoke", "workloads": [{"workload": "write", "threads": [1], "batch": [1], "ops": ops}]}
    if executor == "ray":
        d |= {"executor": "ray", "ray_address": address}
    return plan.load(d, default_seed=1)


def _ms(xs: list[float]) -> str:
    return f"median {1000 * statistics.median(xs):.1f} ms (min {1000 * min(xs):.1f}, max {1000 * max(xs):.1f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--ops", type=int, default=2000)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="alloclab-bench-"))
    t0 = time.monotonic()
    cluster = fleet.LocalCluster(workers=1, log_dir=tmp / "ray")
    print(f"local cluster (head + 1 worker node) up in {time.monotonic() - t0:.1f} s at {cluster.address}")
    try:
        local = Clock()
        study.run(_plan(a.runs, a.ops, "local"), tmp / "local", local)
        remote = Clock()
        t0 = time.monotonic()
        study.run(_plan(a.runs, a.ops, "ray", cluster.address), tmp / "ray", remote)
        whole = time.monotonic() - t0

        import ray
        ray.init(address=cluster.address, log_to_driver=False, logging_level=40)
        cls = ray.remote(num_cpus=0, resources={fleet.SLOT: 1})(fleet.NodeWorker)
        t0 = time.monotonic()
        w = cls.remote(_plan(1, a.ops, "local").to_json(), "rtt")
        ray.get(w.describe.remote())
        started = time.monotonic() - t0
        rtts = []
        for _ in range(200):
            t1 = time.monotonic()
            ray.get(w.describe.remote())
            rtts.append(time.monotonic() - t1)
        ray.get(w.close.remote())
        ray.kill(w)
        ray.shutdown()
    finally:
        cluster.stop()
    print(f"runs: {a.runs} x null engine, {a.ops} writes; run wall (local) {_ms(local.walls)}")
    print(f"overhead per run, this machine:  {_ms(local.over)}")
    print(f"overhead per run, through Ray:   {_ms(remote.over)}")
    extra = statistics.median(remote.over) - statistics.median(local.over)
    print(f"Ray's dispatch cost per run (median difference): {1000 * extra:.1f} ms; "
          f"ratio of overheads Ray / local: {statistics.median(remote.over) / statistics.median(local.over):.2f}x")
    print(f"a bare call to a node's worker (describe, 200 calls): {_ms(rtts)}")
    print(f"a node's worker start (its preflight: driver info, link checks): {1000 * started:.0f} ms")
    print(f"the Ray study in all (connect, worker start, {a.runs} runs, close): {whole:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
