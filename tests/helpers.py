"""Building small real runs for tests (and benches): plans expanded whole, one run executed
with a given driver outside any study; a bench script loaded as a module."""

import importlib.util
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from alloclab import plan
from alloclab.alloc.allocators import Allocator
from alloclab.results.store import RunRow
from alloclab.run import execute as _execute


def bench(name: str):
    """A bench script (bench/NAME.py) as a module, to call its functions."""
    spec = importlib.util.spec_from_file_location(f"{name}_bench", Path(__file__).resolve().parents[1] / "bench" /
                                                  f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # a dataclass of the script looks its module up
    spec.loader.exec_module(mod)
    return mod


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


def sim_row(i: int, alloc: str, rnd: int, ops_per_s: float, busy: float = 0.0) -> RunRow:
    """A simulated valid run of one TidesDB read cell (the statistics' tests): its round, its
    throughput and the other processes' busy share."""
    return RunRow(
        run_id=f"{i:05d}-{alloc}-r{rnd}", index=i, study="sim", cell="tidesdb/c/read", engine="tidesdb",
        allocator=alloc, allocator_base=alloc, allocator_verified=True, workload="read", part="c",
        pattern="random", threads=2, batch=1, key_bytes=16, value_bytes=100, repeat=rnd, seed=0, ops=1,
        duration_s=6.0, ops_per_s=float(ops_per_s), p50_ns=1, p95_ns=1, p99_ns=1e6, p999_ns=1, max_ns=1, mean_ns=1,
        errors=0, retries=0, peak_rss_bytes=1 << 20, cpu_user_s=0, cpu_sys_s=0, ctx_voluntary=0, ctx_involuntary=0,
        minor_faults=0, major_faults=0, wall_s=7.0, status="ok", reason="", started_at="", other_busy_cores=busy)


def with_own(r: RunRow, **own) -> RunRow:
    """A row with some of its workload's own columns changed (results.columns)."""
    return replace(r, own=replace(r.own, **own))
