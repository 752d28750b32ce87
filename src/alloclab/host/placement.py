"""Where a server runs: a CPU set (sched_setaffinity, inherited by its threads and children)
and a memory limit through a cgroup of its own (v2 where the memory controller is enabled,
else v1), as study 5's machine shapes ask."""

from __future__ import annotations

import os
import re
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


class MemoryLimit:
    """A cgroup with a memory limit; `attach` puts the calling process in it (use it as a
    preexec_fn so the server and all its children inherit it)."""

    def __init__(self, name: str, limit_bytes: int):
        self.limit = limit_bytes
        v2 = CGROUP / "cgroup.controllers"
        if v2.exists() and "memory" in v2.read_text().split():
            self.dir, self.file, self.procs = CGROUP / name, "memory.max", "cgroup.procs"
        elif (CGROUP / "memory").is_dir():
            self.dir, self.file, self.procs = CGROUP / "memory" / name, "memory.limit_in_bytes", "cgroup.procs"
        else:
            raise AlloclabError("this kernel offers no cgroup memory controller, so no memory limit can be applied",
                                "drop the memory limit, or enable the memory controller (cgroup v1 or v2)")
        try:
            self.dir.mkdir(exist_ok=True)
            (self.dir / self.file).write_text(str(limit_bytes))
        except OSError as e:
            raise AlloclabError(f"cannot create the cgroup {self.dir}: {e.strerror}",
                                "memory limits need root and a writable cgroup tree") from e

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
