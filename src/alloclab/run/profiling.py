"""Where the CPU time of the process under test goes: `perf record` with the `cpu-clock`
software event and call graphs over the measured window, then the share of samples spent in
the allocator: its own library (jemalloc, mimalloc, tcmalloc) or glibc's malloc family inside
libc ("self": the sample's leaf frame; "total": any frame of the stack), and the kernel time
reached from it ("kernel": a kernel leaf whose nearest user frame is the allocator: brk, mmap,
munmap, madvise, futex under malloc/free). Stacks are kept folded (one line per distinct
stack), the input of flame graphs.

perf missing or not permitted is said once, with the fix; the run goes on without a profile.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from alloclab.alloc import allocators
from alloclab.host.processes import kill_group

FREQ_HZ = 999

ALLOCATOR_DSO = re.compile(r"lib(jemalloc|mimalloc|tcmalloc|tcmalloc_minimal)[^/]*\.so")
LIBC_DSO = re.compile(r"/libc(\.so\.6|-[0-9.]+\.so)$")
# glibc's malloc family (malloc/malloc.c, malloc/arena.c), with the names glibc exports too
GLIBC_MALLOC = frozenset("""
malloc free calloc realloc reallocarray posix_memalign aligned_alloc memalign valloc pvalloc cfree
__libc_malloc __libc_free __libc_calloc __libc_realloc __libc_memalign __libc_valloc __libc_pvalloc
__malloc_trim malloc_trim malloc_usable_size __malloc_usable_size
_int_malloc _int_free _int_realloc _int_memalign _mid_memalign _int_free_merge_chunk _int_free_create_chunk
_int_free_maybe_consolidate malloc_consolidate sysmalloc sysmalloc_mmap systrim mtrim heap_trim shrink_heap
new_heap alloc_new_heap unlink_chunk tcache_init tcache_get tcache_put tcache_thread_shutdown
arena_get2 arena_get_retry _int_new_arena get_free_list reused_arena arena_thread_freeres
__malloc_arena_thread_freeres ptmalloc_init __default_morecore __glibc_morecore morecore
""".split())


def is_allocator_frame(sym: str, dso: str) -> bool:
    if ALLOCATOR_DSO.search(dso):
        return True
    base = sym.split("@")[0].split("+")[0]
    return bool(LIBC_DSO.search(dso)) and base in GLIBC_MALLOC


def is_kernel(dso: str) -> bool:
    return dso.startswith("[kernel") or dso == "[vdso]"


def perf_exe() -> str | None:
    """perf: ALLOCLAB_PERF if set, else the one on PATH."""
    exe = os.environ.get("ALLOCLAB_PERF") or shutil.which("perf")
    return exe if exe and os.access(exe, os.X_OK) else None


@functools.lru_cache(maxsize=4)
def _unavailable(exe: str | None) -> str | None:
    if not exe:
        return "perf is not installed: apt-get install -y linux-perf (./setup.sh installs it)"
    p = subprocess.run([exe, "record", "-q", "-e", "cpu-clock", "-g", "-o", "/dev/null", "--", "true"],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        err = (p.stderr or p.stdout).strip().splitlines()
        why = next((x for x in err if "paranoid" in x or "ermission" in x or "not supported" in x), err[-1] if err
                   else f"exit {p.returncode}")
        try:
            level = Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
        except OSError:
            level = "?"
        return (f"perf cannot record here ({why.strip()}; perf_event_paranoid={level}): run as root, or "
                "sysctl kernel.perf_event_paranoid=1, or in a container allow perf_event_open")
    return None


def unavailable() -> str | None:
    """Why perf cannot profile here (with the fix), or None when it can."""
    return _unavailable(perf_exe())


class Recorder:
    """`perf record` attached to the processes under test for the measured window: CPU samples
    and context switches with their stacks ("profile"), or uprobes on the allocator's malloc,
    calloc, realloc and free for at most CALLS_WINDOW_S ("calls")."""

    def __init__(self, out: Path, purpose: str = "profile"):
        self.out = out
        self.purpose = purpose
        self.pids: list[int] = []  # the processes to record, set once they run
        self.proc: subprocess.Popen | None = None
        self.probes: Probes | None = None
        self.window: tuple[float, float] | None = None  # monotonic start, stop
        self.error: str | None = None
        self.library: str | None = None  # the library probed (calls)
        self._err = out.with_name(out.name + ".err")  # perf's own words, read when it stops

    def prepare(self) -> None:
        """Place the uprobes of a calls run (about a second) before its window opens."""
        if self.purpose != "calls" or unavailable() or self.probes is not None or self.error or not self.pids:
            return
        try:
            self.library = malloc_library(self.pids[0])
            self.probes = Probes(self.library, f"alloclab_{os.getpid()}_{self.pids[0]}")
        except ProbeError as e:
            self.error = str(e)

    def start(self) -> None:
        if unavailable() or self.proc is not None or not self.pids:
            return
        if self.purpose == "calls":
            self.prepare()
            if self.probes is None:
                return
            events = [x for ev in self.probes.events for x in ("-e", ev)]
        else:
            events = ["-e", f"cpu-clock/freq={FREQ_HZ}/", "-e", "context-switches/period=1/", "-g"]
        with open(self._err, "wb") as err:
            self.proc = subprocess.Popen(
                [perf_exe(), "record", "-q", *events, "-p", ",".join(map(str, self.pids)), "-o", str(self.out)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        self.window = (time.monotonic(), 0.0)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            if self.window:
                self.window = (self.window[0], time.monotonic())
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                kill_group(self.proc.pid)
                self.proc.wait()
        if self.probes is not None:
            self.probes.remove()
            self.probes = None
        self._said()

    def _said(self) -> None:
        """perf's own words when it recorded nothing (e.g. it may not attach to the process)."""
        err = self._err
        if not err.exists():
            return
        lines = [x.strip() for x in err.read_text(errors="replace").splitlines() if x.strip()]
        err.unlink()
        if not self.out.exists():
            self.error = self.error or (f"perf record failed: {lines[-1]}" if lines else
                                        f"perf record exited with code {self.proc.returncode if self.proc else '?'}")

    @property
    def seconds(self) -> float:
        return self.window[1] - self.window[0] if self.window and self.window[1] else 0.0


# the allocator's entry points and the arguments that carry sizes (x86-64 SysV registers)
CALL_PROBES = (("malloc", "size=%di:u64"), ("calloc", "n=%di:u64 size=%si:u64"), ("realloc", "size=%si:u64"),
               ("free", ""))


class ProbeError(RuntimeError):
    pass


def malloc_library(pid: int) -> str:
    """The file whose malloc the process calls: a mapped allocator library, else libc."""
    files = allocators.read_maps(pid) or []
    lib = next((f for f in files if ALLOCATOR_DSO.search(f)), None) or next(
        (f for f in files if LIBC_DSO.search(f)), None)
    if lib is None:
        raise ProbeError(f"process {pid} maps neither libc nor an allocator library")
    # maps names files as this process sees them (a chroot's files by their host path); a
    # process in another mount namespace names them in its own
    return lib if os.path.exists(lib) else f"/proc/{pid}/root{lib}"


class Probes:
    """uprobes on one library's allocation functions, under a group of our own, removed after."""

    def __init__(self, library: str, group: str):
        self.group = group
        self.library = library
        self.events: list[str] = []
        for fn, args in CALL_PROBES:
            p = subprocess.run([perf_exe(), "probe", "-q", "-x", library, "-a", f"{group}:{fn}={fn} {args}".strip()],
                               capture_output=True, text=True, timeout=120)
            if p.returncode != 0:
                self.remove()
                err = (p.stderr or p.stdout).strip().splitlines()
                raise ProbeError(f"perf probe cannot place a uprobe on {fn} in {library}: "
                                 f"{err[-1] if err else p.returncode} (uprobes need root and a kernel with "
                                 "CONFIG_UPROBE_EVENTS)")
            self.events.append(f"{group}:{fn}")

    def remove(self) -> None:
        if self.events:
            subprocess.run([perf_exe(), "probe", "-q", "-d", f"{self.group}:*"], capture_output=True, timeout=120)
            self.events = []


SIZE_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 4096, 16384, 65536, 262144, 1 << 20)


def bucket_label(upper: int | None) -> str:
    if upper is None:
        return f"> {bucket_label(SIZE_BUCKETS[-1])}"
    return f"≤ {upper >> 20} MiB" if upper >= 1 << 20 else f"≤ {upper >> 10} KiB" if upper >= 1024 else f"≤ {upper} B"


def read_calls(data: Path, seconds: float) -> dict:
    """Calls per second of each function and the histogram of requested sizes (malloc, calloc
    n × size, realloc), from a calls run's perf.data."""
    p = subprocess.run([perf_exe() or "perf", "script", "-i", str(data), "-F", "time,event,trace"],
                       capture_output=True, text=True, timeout=600)
    return count_calls(p.stdout, seconds)


TRACE = re.compile(r"^\s*(?:(\d+\.\d+):\s+)?\S+:(\w+):\s*\([0-9a-f]+\)(.*)$")


def count_calls(text: str, seconds: float) -> dict:
    """`seconds`: how long perf ran. The calls are counted over the span in which perf saw them
    (first to last call) when that is shorter: attaching uprobes takes a while on a busy machine,
    and calls per second must not count that while as a quiet one."""
    counts: Counter = Counter()
    sizes: Counter = Counter()
    first = last = None
    for line in text.splitlines():
        m = TRACE.match(line)
        if not m:
            continue
        t, fn, rest = m.group(1), m.group(2), m.group(3)
        if t:
            first = float(t) if first is None else first
            last = float(t)
        counts[fn] += 1
        args = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
        if fn == "free" or "size" not in args:
            continue
        try:
            n = int(args["size"], 0) * (int(args["n"], 0) if "n" in args else 1)
        except ValueError:
            continue
        sizes[next((b for b in SIZE_BUCKETS if n <= b), None)] += 1
    total = sum(counts.values())
    n_sized = sum(sizes.values())
    if first is not None and last > first and total > 100:
        seconds = min(seconds, last - first) if seconds else last - first
    return {"seconds": round(seconds, 3), "calls": dict(counts), "total": total,
            "per_s": {k: round(v / seconds, 1) for k, v in counts.items()} if seconds else {},
            "total_per_s": round(total / seconds, 1) if seconds else None,
            "sizes": [{"bucket": bucket_label(b), "calls": sizes[b], "pct": round(100 * sizes[b] / n_sized, 2)}
                      for b in (*SIZE_BUCKETS, None) if sizes[b]]}


def read_stacks(data: Path) -> dict[str, list[list[tuple[str, str]]]]:
    """The samples of a perf.data file by event (cpu-clock, context-switches): each a stack of
    (symbol, dso), leaf first."""
    p = subprocess.run([perf_exe() or "perf", "script", "-i", str(data), "-F", "comm,event,ip,sym,dso"],
                       capture_output=True, text=True, timeout=600)
    return parse_by_event(p.stdout)


FRAME = re.compile(r"^\s*[0-9a-f]+\s+(.*?)\s+\(([^()]*)\)\s*$")


def parse_by_event(text: str) -> dict[str, list[list[tuple[str, str]]]]:
    """perf script's text: a header line per sample (`comm event:`), then its frames."""
    out: dict[str, list] = {}
    event, cur = "cpu-clock", []

    def flush():
        if cur:
            out.setdefault(event, []).append(list(cur))
        cur.clear()

    for line in text.splitlines():
        m = FRAME.match(line)
        if m:
            cur.append((m.group(1), m.group(2)))
        elif line.strip():
            flush()
            last = line.split()[-1]
            event = last.rstrip(":").split("/")[0] if last.endswith(":") else "cpu-clock"
        else:
            flush()
    flush()
    return out


def switch_share(stacks: list[list[tuple[str, str]]]) -> float | None:
    """The share of context switches whose stack passes through the allocator (a thread that
    waits inside malloc/free: futex under the allocator's locks)."""
    if not stacks:
        return None
    return round(100 * sum(any(is_allocator_frame(s, d) for s, d in st) for st in stacks) / len(stacks), 3)


@dataclass
class Shares:
    samples: int
    self_pct: float
    total_pct: float
    kernel_pct: float


def shares(stacks: list[list[tuple[str, str]]]) -> Shares:
    n = len(stacks)
    if not n:
        return Shares(0, 0.0, 0.0, 0.0)
    own = total = kernel = 0
    for st in stacks:
        flags = [is_allocator_frame(s, d) for s, d in st]
        total += any(flags)
        if flags[0]:
            own += 1
        elif is_kernel(st[0][1]):
            # kernel time inside an allocator call: the allocator is among the user frames
            # (its syscall wrappers, mmap/madvise/brk/futex, are plain libc frames)
            kernel += any(flags)
    return Shares(n, round(100 * own / n, 3), round(100 * total / n, 3), round(100 * kernel / n, 3))


def folded(stacks: list[list[tuple[str, str]]]) -> str:
    """Brendan Gregg's folded format (root first, `;`-separated, then the count): what
    flame-graph tools read."""
    c = Counter(";".join(s.replace(";", ":") for s, _d in reversed(st)) for st in stacks)
    return "".join(f"{k} {v}\n" for k, v in sorted(c.items()))
