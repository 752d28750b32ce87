"""Sampling a process from /proc: RSS timeline, high-water mark, CPU, context switches, faults."""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, fields

CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Sample:
    t_s: float
    phase: str
    rss_bytes: int
    vm_hwm_bytes: int
    cpu_user_s: float
    cpu_sys_s: float
    minor_faults: int
    major_faults: int
    ctx_voluntary: int
    ctx_involuntary: int
    threads: int

    @classmethod
    def columns(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def row(self) -> list:
        return list(asdict(self).values())


def read(pid: int, t_s: float, phase: str, reaped: bool = False, zombie: bool = False) -> Sample | None:
    """One sample of `pid`, or None if it is gone (or a zombie without memory, unless
    `zombie`: then its counters with no memory, as a tree's sum needs them until its parent
    waits for it). `reaped`: add the CPU time and faults of its children that ended and were
    waited for, so that a tree's counters never shrink when a worker ends (PostgreSQL's
    backends)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
        with open(f"/proc/{pid}/status") as f:
            status = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # fields after the parenthesised command name
    rest = stat[stat.rfind(")") + 2:].split()
    kv = {}
    for line in status.splitlines():
        k, _, v = line.partition(":")
        kv[k] = v.strip()
    if "VmRSS" not in kv and not zombie:
        return None

    def kb(name: str) -> int:
        return int(kv.get(name, "0 kB").split()[0]) * 1024

    return Sample(
        t_s=round(t_s, 4), phase=phase,
        rss_bytes=kb("VmRSS"), vm_hwm_bytes=kb("VmHWM"),
        cpu_user_s=(int(rest[11]) + (int(rest[13]) if reaped else 0)) / CLK_TCK,
        cpu_sys_s=(int(rest[12]) + (int(rest[14]) if reaped else 0)) / CLK_TCK,
        minor_faults=int(rest[7]) + (int(rest[8]) if reaped else 0),
        major_faults=int(rest[9]) + (int(rest[10]) if reaped else 0),
        ctx_voluntary=int(kv.get("voluntary_ctxt_switches", 0)),
        ctx_involuntary=int(kv.get("nonvoluntary_ctxt_switches", 0)),
        threads=int(kv.get("Threads", 0)),
    )


class Timeline:
    """Samples of one process at a fixed rate, driven by the caller's loop."""

    def __init__(self, hz: float = 20.0):
        if hz < 10:
            raise ValueError("sampling below 10 Hz misses short peaks; use 10 Hz or more")
        self.period = 1.0 / hz
        self.samples: list[Sample] = []
        self.t0 = time.monotonic()
        self.next_at = self.t0

    def due(self) -> float:
        """Seconds until the next sample is due (<= 0: now)."""
        return self.next_at - time.monotonic()

    def pace(self, resting: bool) -> None:
        """Resting: what is sampled is stopped (its client waits for its turn), so one sample a
        second says all there is (its counters and peak do not move); awake again: due now."""
        now = time.monotonic()
        if resting:
            self.next_at = max(self.next_at, now + self.REST_S)
        elif self.next_at > now + self.period:
            self.next_at = now

    REST_S = 1.0

    def take(self, pid: int, phase: str) -> Sample | None:
        now = time.monotonic()
        self.next_at = max(self.next_at + self.period, now)
        s = read(pid, now - self.t0, phase)
        if s is not None:
            self.samples.append(s)
        return s

    def take_tree(self, pids: list[int], phase: str) -> Sample | None:
        """One sample of a process tree (a server and its workers): the sum over its processes,
        VmHWM being the largest single process's."""
        now = time.monotonic()
        self.next_at = max(self.next_at + self.period, now)
        # the first pid is the tree's root: it holds the counters of its workers that ended. A
        # worker waited for while the others are read would be counted twice or not at all: the
        # root is read before and after them, and the sample taken again if it changed
        t = now - self.t0
        for _ in range(5):
            before = read(pids[0], t, phase, reaped=True) if pids else None
            others = [read(p, t, phase, zombie=True) for p in pids[1:]]
            root = read(pids[0], t, phase, reaped=True) if pids else None
            if before is None or root is None or (before.cpu_user_s, before.cpu_sys_s, before.minor_faults) == (
                    root.cpu_user_s, root.cpu_sys_s, root.minor_faults):
                break
        parts = [x for x in [root, *others] if x is not None]
        if not parts:
            return None
        s = Sample(t_s=parts[0].t_s, phase=phase, rss_bytes=sum(x.rss_bytes for x in parts),
                   vm_hwm_bytes=max(x.vm_hwm_bytes for x in parts),
                   cpu_user_s=sum(x.cpu_user_s for x in parts), cpu_sys_s=sum(x.cpu_sys_s for x in parts),
                   minor_faults=sum(x.minor_faults for x in parts), major_faults=sum(x.major_faults for x in parts),
                   ctx_voluntary=sum(x.ctx_voluntary for x in parts),
                   ctx_involuntary=sum(x.ctx_involuntary for x in parts), threads=sum(x.threads for x in parts))
        self.samples.append(s)
        return s

    def peak_rss(self) -> int:
        return max((s.rss_bytes for s in self.samples), default=0)

    def peak_hwm(self) -> int:
        return max((s.vm_hwm_bytes for s in self.samples), default=0)
