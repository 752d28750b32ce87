"""Building small real runs for tests (and benches): plans expanded whole, one run executed
with a given driver outside any study."""

from dataclasses import dataclass
from pathlib import Path

from alloclab import plan
from alloclab.alloc.allocators import Allocator
from alloclab.run import execute as _execute


def expand(p: plan.Plan) -> list[plan.RunSpec]:
    """Every run of a fixed study (`runs` rounds of every unit), in the order they run."""
    specs: list[plan.RunSpec] = []
    for rnd in range(1, (p.runs or p.design.min_runs) + 1):
        specs += p.round_specs(rnd, None, len(specs) + 1)
    return specs


@dataclass
class Place:
    """What a run needs of the node it runs on: the driver, a scratch folder, the study's name
    (run.node.Node has these, and the data it prepared)."""

    exe: Path
    scratch: Path
    study: str


def execute(spec, run_dir: Path, scratch: Path, exe: Path, study: str, on_event=None, sample_hz: float = 20.0,
            seed_data: Path | None = None):
    """An embedded run with a given driver binary and data: the one runner."""
    return _execute.run(spec, run_dir, Place(exe, scratch, study), seed_data, on_event, sample_hz)


def specs(found, allocs, engine="tidesdb", **workload):
    wl = {"workload": "write", "ops": 2000, "threads": [2], **workload}
    if wl["workload"] != "tpcc":
        wl.setdefault("batch", [10])
    wl = {k: v for k, v in wl.items() if v is not None}
    p = plan.load({"engines": [engine], "allocators": allocs, "workloads": [wl], "scale": "smoke", "runs": 1},
                  found_allocators=found,
                  default_seed=1)
    return expand(p)


def with_allocator(spec, alloc: Allocator):
    from dataclasses import replace
    return replace(spec, allocator=alloc)


def kill_servers_mid_run(out, server_pids):
    """A started thread that waits for the first server run of the study in `out` to have a
    client, then kill -9s every server `server_pids()` returns."""
    import os
    import signal
    import threading
    import time

    def killer():
        for _ in range(1200):
            runs = out / "runs"
            if server_pids() and runs.exists() and any((d / "client.log").exists() for d in runs.iterdir()):
                time.sleep(1.5)
                for pid in server_pids():
                    os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.05)

    th = threading.Thread(target=killer)
    th.start()
    return th
