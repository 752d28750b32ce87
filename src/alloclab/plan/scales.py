"""What every preset shares: the scales, each scale's shortest window and rounds, and seed 004's
machine shapes scaled to this machine."""

from __future__ import annotations

import os

SCALES = ("smoke", "quick", "full")

# The shortest measured window each scale accepts (plan key min_window_s): shorter windows
# measure start-up and noise. `smoke` is for tests of the harness and has none.
MIN_WINDOW_S = {"smoke": 0.0, "quick": 5.0, "full": 10.0}

# Studies run in rounds until every comparison is decided (see plan/design.py and
# answers/decide.py); a quick study stops
# at its budget of wall time with what it has, and says how much more would decide the rest.
# `smoke` runs each cell once, for tests.


def rounds(scale: str, quick_budget: str, smoke_runs: int = 1) -> dict:
    if scale == "smoke":
        return {"runs": smoke_runs}
    return {"budget": quick_budget} if scale == "quick" else {}


def seed004_shapes(*memories: str) -> dict:
    """Seed 004's server shapes scaled to this machine: 1 core and 2 GiB, then 4 cores (or as many
    as leave one for the client) with each of `memories`; the client on the other cores. Named as
    they read: "1core-2GiB", "4cores-1GiB" ("1core-1GiB" on 2 cores)."""
    n = len(os.sched_getaffinity(0))
    four, last = max(1, min(4, n - 1)), n - 1
    cores = f"{four}core{'s' if four > 1 else ''}"
    shapes = {"1core-2GiB": {"server_cpus": "0", "client_cpus": cpu_range(min(1, last), last),
                             "server_memory_bytes": "2GiB"}}
    for mem in memories:
        shapes[f"{cores}-{mem}"] = {"server_cpus": cpu_range(0, four - 1),
                                    "client_cpus": cpu_range(min(four, last), last), "server_memory_bytes": mem}
    return shapes


def cpu_range(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}"
