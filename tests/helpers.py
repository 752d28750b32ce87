"""Building small real runs for tests."""

from alloclab import plan
from alloclab.allocators import Allocator


def specs(found, allocs, engine="tidesdb", **workload):
    wl = {"workload": "write", "ops": 2000, "threads": [2], **workload}
    if wl["workload"] != "tpcc":
        wl.setdefault("batch", [10])
    wl = {k: v for k, v in wl.items() if v is not None}
    p = plan.load({"engines": [engine], "allocators": allocs, "workloads": [wl], "scale": "smoke", "runs": 1},
                  found_allocators=found,
                  default_seed=1)
    return p.expand()


def with_allocator(spec, alloc: Allocator):
    from dataclasses import replace
    return replace(spec, allocator=alloc)
