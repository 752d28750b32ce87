"""Where a server runs: a CPU set (sched_setaffinity, inherited by its threads and children)
and a memory limit through a cgroup of its own (v2 where the memory controller is enabled,
else v1), as study 5's machine shapes ask."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

from alloclab.core.errors import AlloclabError

CGROUP = Path("/sys/fs/cgroup")


def parse_cpus(text: str, key: str = "cpus") -> set[int]:
    """'0-3,6' -> {0, 1, 2, 3, 6}, checked against the CPUs this process may use."""
    cpus: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise AlloclabError(f"{key}: {text!r} is not a CPU list", "write e.g. 0-3 or 0,2")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise AlloclabError(f"{key}: {part} is backwards")
        cpus.update(range(lo, hi + 1))
    allowed = os.sched_getaffinity(0)
    if not cpus <= allowed:
        raise AlloclabError(f"{key}: CPU(s) {sorted(cpus - allowed)} do not exist here",
                            f"this machine offers CPUs {min(allowed)}-{max(allowed)}")
    return cpus


# v2's memory.stat before `kernel` (kernel 5.18): the kernel memory it charges that cannot be
# reclaimed (stacks, page tables, unreclaimable slab, per-CPU data, socket buffers)
V2_KERNEL_PARTS = ("kernel_stack", "pagetables", "slab_unreclaimable", "percpu", "sock")


def unreclaimable(stat: str, version: int, kmem: int = 0) -> int:
    """What of a cgroup's charge the kernel cannot reclaim without swap, from its memory.stat:
    anonymous memory, shared memory (PostgreSQL's shared buffers) and the kernel's own memory
    charged to it (a backend's page tables and stack: a storm of 60 forked backends charges tens of
    MiB of it at once). The page cache it also charges (a datadir's files) goes under a limit
    before anything is killed, so a limit that fits this fits the server. v2: `anon` + `shmem` +
    `kernel` (its parts before 5.18); v1: `rss` (anonymous, huge pages included) + `shmem`
    (total_* where the hierarchy sums them) + `kmem`, memory.kmem.usage_in_bytes, which v1's
    memory.stat leaves out."""
    got = {}
    for line in stat.splitlines():
        k, _, v = line.partition(" ")
        if v.strip().isdigit():
            got[k] = int(v)
    if version == 2:
        kernel = got["kernel"] if "kernel" in got else sum(got.get(k, 0) for k in V2_KERNEL_PARTS)
        return got.get("anon", 0) + got.get("shmem", 0) + kernel
    return got.get("total_rss", got.get("rss", 0)) + got.get("total_shmem", got.get("shmem", 0)) + kmem


class MemoryLimit:
    """A cgroup with a memory limit (0: none, the cgroup only accounts for what its processes are
    charged); `attach` puts the calling process in it (use it as a preexec_fn so the server and all
    its children inherit it)."""

    def __init__(self, name: str, limit_bytes: int):
        self.limit = limit_bytes
        v2 = CGROUP / "cgroup.controllers"
        if v2.exists() and "memory" in v2.read_text().split():
            self.dir, self.file, self.procs, self.version = CGROUP / name, "memory.max", "cgroup.procs", 2
        elif (CGROUP / "memory").is_dir():
            self.dir, self.file, self.procs = CGROUP / "memory" / name, "memory.limit_in_bytes", "cgroup.procs"
            self.version = 1
        else:
            raise AlloclabError("this kernel offers no cgroup memory controller, so no memory limit can be applied",
                                "drop the memory limit, or enable the memory controller (cgroup v1 or v2)")
        try:
            self.dir.mkdir(exist_ok=True)
            (self.dir / self.file).write_text(str(limit_bytes) if limit_bytes else "max" if self.version == 2
                                              else "-1")
        except OSError as e:
            raise AlloclabError(f"cannot create the cgroup {self.dir}: {e.strerror}",
                                "memory limits need root and a writable cgroup tree") from e

    def _number(self, name: str) -> int | None:
        """A counter file of the cgroup as a number; None where this kernel has no such file."""
        try:
            return int((self.dir / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def unreclaimable(self) -> int:
        """Its anonymous, shared and kernel memory now (module function `unreclaimable`; v1 keeps
        the kernel's memory in a file of its own, absent on a kernel without v1's kmem files)."""
        kmem = (self._number("memory.kmem.usage_in_bytes") or 0) if self.version == 1 else 0
        return unreclaimable((self.dir / "memory.stat").read_text(), self.version, kmem)

    def peak(self) -> int | None:
        """The kernel's own high-water mark of the cgroup's whole charge (page cache included):
        memory.peak (v2, kernel 5.19 and later; None before) or memory.max_usage_in_bytes (v1)."""
        return self._number("memory.peak" if self.version == 2 else "memory.max_usage_in_bytes")

    def attach(self) -> None:
        (self.dir / self.procs).write_text(str(os.getpid()))

    def remove(self) -> None:
        try:
            self.dir.rmdir()
        except OSError:
            pass

    def oom_counter(self) -> Path:
        """The file whose `oom_kill N` line counts this cgroup's OOM kills (answers.life.oom_kills
        parses it): memory.events under cgroup v2, memory.oom_control under v1."""
        return self.dir / ("memory.events" if self.file == "memory.max" else "memory.oom_control")


class ChargeWatch:
    """The kernel's charge of a cgroup over a run: its unreclaimable part (anonymous, shared and
    kernel memory, `unreclaimable`) sampled at `hz` in a thread of its own, its high-water mark, and at
    the end the kernel's own peak of the whole charge (MemoryLimit.peak). What a server needs
    under a container's limit, read where the kernel counts it."""

    def __init__(self, cgroup: MemoryLimit, hz: float = 20.0):
        self.cgroup, self.period = cgroup, 1.0 / hz
        self.samples: list[tuple[float, int]] = []  # (CLOCK_MONOTONIC, unreclaimable bytes)
        self.error: str | None = None
        self.peak: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cgroup charge", daemon=True)

    def start(self) -> ChargeWatch:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.monotonic(), self.cgroup.unreclaimable()))
            except OSError as e:  # the cgroup went: the run is ending
                self.error = self.error or f"{self.cgroup.dir}/memory.stat: {e.strerror}"
            self._stop.wait(self.period)

    def end(self) -> None:
        """Stop sampling; read the kernel's peak while the cgroup is still there."""
        self._stop.set()
        self._thread.join(5)
        self.peak = self.cgroup.peak()

    def note(self) -> dict:
        """For run.json: the cgroup's version, the kernel's peak, the unreclaimable high-water mark."""
        return {"version": self.cgroup.version, "peak_bytes": self.peak,
                "unreclaimable_peak_bytes": max((b for _, b in self.samples), default=None),
                "samples": len(self.samples), "error": self.error}

    def write(self, path: Path, t0: float) -> None:
        """Its samples as CSV (t_s on the run's samples' clock, from t0; unreclaimable_bytes)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("t_s,unreclaimable_bytes\n" + "".join(f"{t - t0:.3f},{b}\n" for t, b in self.samples))
