"""Machine noise around a run: how much CPU everything else on the machine used meanwhile.

/proc/stat counts busy time of all CPUs; subtracting alloclab's own CPU time and that of its
reaped children (the process under test and its client, with their own reaped children:
PostgreSQL's backends, sysbench's threads) leaves what other processes took. No sampling
sleep, so it costs nothing.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

CLK_TCK = os.sysconf("SC_CLK_TCK")
# above this many cores' worth of CPU used by others during a run, the run is flagged
BUSY_OTHER_CORES = 0.25


def _busy_s() -> float:
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def _self_cpu_s() -> float:
    """alloclab and every child it has reaped (and theirs, recursively)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@dataclass
class Noise:
    load_1m_before: float
    other_cores: float

    @property
    def busy(self) -> bool:
        return self.other_cores > BUSY_OTHER_CORES

    def to_json(self) -> dict:
        return {"load_1m_before": self.load_1m_before, "other_busy_cores": round(self.other_cores, 3),
                "busy": self.busy, "threshold_cores": BUSY_OTHER_CORES}


class CpuWatch:
    def __init__(self):
        self.load_1m = os.getloadavg()[0]
        self.t0 = time.monotonic()
        self.busy0 = _busy_s()
        self.self0 = _self_cpu_s()

    def stop(self, unreaped_cpu_s: float = 0.0) -> Noise:
        """Call after the process under test and its client were reaped (their CPU is then in
        alloclab's children time); `unreaped_cpu_s`: CPU of any that still run."""
        wall = max(time.monotonic() - self.t0, 1e-6)
        others = _busy_s() - self.busy0 - unreaped_cpu_s - (_self_cpu_s() - self.self0)
        # clock-tick rounding can make a quiet machine look slightly negative
        return Noise(self.load_1m, max(others, 0.0) / wall)
