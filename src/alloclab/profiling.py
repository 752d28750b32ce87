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
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

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
    """`perf record` attached to one process for the measured window."""

    def __init__(self, out: Path):
        self.out = out
        self.pid = 0  # the process to profile, set once it runs
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        if unavailable() or self.proc is not None or not self.pid:
            return
        self.proc = subprocess.Popen(
            [perf_exe(), "record", "-q", "-e", f"cpu-clock/freq={FREQ_HZ}/", "-e", "context-switches/period=1/",
             "-g", "-p", str(self.pid),
             "-o", str(self.out)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


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


def parse_script(text: str) -> list[list[tuple[str, str]]]:
    """The stacks of all samples, whatever their event."""
    return [st for stacks in parse_by_event(text).values() for st in stacks]


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
