"""Building small real runs for tests."""

from alloclab import plan
from alloclab.alloc.allocators import Allocator


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
