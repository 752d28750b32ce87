"""`alloclab doctor`: what on this machine can move the numbers, and what it means.

Each check is a small class: `read()` says what it found, `verdict()` whether it is fine for
benchmarking, `meaning` why it matters. Nothing here changes the machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from alloclab.clients import driver
from alloclab.servers import root


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


@dataclass
class Finding:
    name: str
    value: str
    ok: bool | None  # None: cannot tell
    meaning: str


class Check:
    """A check; `class X(Check, good=(...))` names the values that are fine for benchmarking, `good_start`
    how a fine value begins. A check with neither cannot tell, unless its own `ok` can."""

    name = ""
    meaning = ""
    good: tuple[str, ...] = ()
    good_start: tuple[str, ...] = ()

    def __init_subclass__(cls, good: tuple[str, ...] = (), good_start: tuple[str, ...] = (), **kw):
        super().__init_subclass__(**kw)
        cls.good, cls.good_start = good, good_start

    def read(self) -> str | None:
        raise NotImplementedError

    def ok(self, value: str) -> bool | None:
        if not (self.good or self.good_start):
            return None
        return value in self.good or value.startswith(self.good_start)

    def find(self) -> Finding:
        v = self.read()
        return Finding(self.name, v if v is not None else "not available", self.ok(v) if v is not None else None,
                       self.meaning)


class Governor(Check, good=("performance",)):
    name = "CPU frequency governor"
    meaning = ("'performance' keeps clocks steady; 'powersave'/'ondemand'/'schedutil' let them vary with load, "
               "which adds run-to-run noise. Not exposed in most VMs (the hypervisor decides).")

    def read(self):
        govs = {_read(f"/sys/devices/system/cpu/cpu{i}/cpufreq/scaling_governor") for i in range(os.cpu_count() or 1)}
        govs.discard(None)
        return ",".join(sorted(govs)) if govs else None


class Turbo(Check, good=("off",)):
    name = "turbo / boost"
    meaning = "Turbo makes clocks depend on temperature and on other cores' load: compare only runs made alike."

    def read(self):
        no_turbo = _read("/sys/devices/system/cpu/intel_pstate/no_turbo")
        if no_turbo is not None:
            return "off" if no_turbo == "1" else "on"
        boost = _read("/sys/devices/system/cpu/cpufreq/boost")
        return None if boost is None else ("on" if boost == "1" else "off")


class TransparentHugePages(Check, good=("madvise", "never")):
    name = "transparent huge pages"
    meaning = ("THP changes RSS and page-fault counts, and allocators differ in how they use huge pages "
               "(jemalloc and mimalloc can ask for them). Keep it the same across compared studies.")

    def read(self):
        v = _read("/sys/kernel/mm/transparent_hugepage/enabled")
        if v is None:
            return None
        return next((w.strip("[]") for w in v.split() if w.startswith("[")), v)


class Swap(Check, good=("none",)):
    name = "swap"
    meaning = "With swap in use, RSS undercounts memory and latency has swap-in spikes: peak RSS needs no swap."

    def read(self):
        lines = (_read("/proc/swaps") or "").splitlines()[1:]
        return "none" if not lines else f"{len(lines)} device(s)"


class Perf(Check, good_start=("hardware", "software")):
    name = "perf"
    meaning = ("perf gives profiles and context-switch stacks (study 3); where hardware counters are missing "
               "(VMs) only software events such as cpu-clock and context-switches work.")

    def read(self):
        if not shutil.which("perf"):
            return "not installed (apt-get install linux-perf)"
        hw = subprocess.run(["perf", "stat", "-e", "instructions", "true"], capture_output=True, text=True)
        sw = subprocess.run(["perf", "stat", "-e", "cpu-clock,context-switches", "true"], capture_output=True,
                            text=True)
        if hw.returncode == 0 and "not supported" not in hw.stderr:
            return "hardware and software events"
        return "software events only" if sw.returncode == 0 else "not usable here"


class Uprobes(Check, good_start=("available",)):
    name = "uprobes"
    meaning = ("--profile counts the allocator's calls and sizes in a short separate run with uprobes on "
               "malloc/calloc/realloc/free (perf probe -x); they need root and a kernel with uprobe events.")

    def read(self):
        for d in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
            if os.path.exists(f"{d}/uprobe_events"):
                return f"available ({d})"
        return "no uprobe_events in tracefs (mount tracefs, or a kernel with CONFIG_UPROBE_EVENTS)"


class AccountHelper(Check, good_start=("built",)):
    name = "memory-account helper"
    meaning = ("liballoclab_account.so, preloaded beside the allocator into servers, reads the allocator's own "
               "account of memory at the end of each run's window (built by ./setup.sh beside the driver).")

    def read(self):
        lib = driver.account_library()
        return f"built ({lib})" if lib else "not built: run ./setup.sh"


class Cgroups(Check):
    name = "cgroups"
    meaning = "Server CPU and memory limits (study 5) need a memory controller, in cgroup v1 or v2."

    def read(self):
        v2 = _read("/sys/fs/cgroup/cgroup.controllers")
        if v2 is not None:
            return f"v2 ({v2 or 'no controllers'})"
        if os.path.isdir("/sys/fs/cgroup/memory"):
            return "v1 (memory, cpuset)" if os.path.isdir("/sys/fs/cgroup/cpuset") else "v1 (memory)"
        return None

    def ok(self, value):
        return "memory" in value


class Load(Check):
    name = "load right now"
    meaning = "Other busy processes steal CPU from the target: alloclab records this per run and flags it."

    def read(self):
        one, five, _ = os.getloadavg()
        return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"

    def ok(self, value):
        return os.getloadavg()[0] < 0.5 * (os.cpu_count() or 1)


class Stack(Check, good_start=("ready",)):
    name = "MariaDB 11.8.6 + TideSQL stack"
    meaning = ("The studies' own server (mariadb11-innodb, mariadb11-myrocks, mariadb11-tidesdb[@build] targets): a "
               "Debian trixie root with the vendored MariaDB 11.8.6, built by `alloclab setup stack`, cached outside "
               "the checkout (ALLOCLAB_STACK).")

    def read(self):
        return root.describe()


CHECKS = (Governor, Turbo, TransparentHugePages, Swap, Perf, Uprobes, AccountHelper, Cgroups, Load, Stack)


def findings() -> list[Finding]:
    return [c().find() for c in CHECKS]
