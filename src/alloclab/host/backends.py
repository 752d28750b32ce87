"""A forked server's processes (PostgreSQL's postmaster and its children) sampled by what they
are: the backends of a pool whose PIDs are known, the other client backends (a connection
storm's), the auxiliary processes; each one's private memory (RssAnon: its RSS would count the
shared buffers it touched) and threads, read from /proc."""

from __future__ import annotations

import csv
import os
import re
import threading
import time

SAMPLE_HZ = 20.0
POOL_COLUMNS = ("mono_s", "pool_anon_bytes", "pool_backends", "pool_threads_max", "postmaster_anon_bytes",
                "postmaster_threads", "other_anon_bytes", "other_backends", "aux_anon_bytes")


def _status(pid: int) -> tuple[int, int] | None:
    """(RssAnon bytes, threads) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            text = f.read()
    except OSError:
        return None
    anon = re.search(r"^RssAnon:\s+(\d+) kB", text, re.M)
    threads = re.search(r"^Threads:\s+(\d+)", text, re.M)
    if anon is None:
        return None  # a zombie: its memory is gone
    return int(anon.group(1)) * 1024, int(threads.group(1)) if threads else 0


HELPER_THREAD = "alloclab-accoun"  # alloclab's account helper (alloc/account.py), as /proc shortens it


def thread_names(pid: int) -> list[str]:
    """The names of a process's threads but alloclab's own helper (jemalloc's background thread
    is `jemalloc_bg_thd`)."""
    out = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                out.append(f.read().strip())
    except OSError:
        return out
    return [n for n in out if n != HELPER_THREAD]


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _is_backend(pid: int, cache: dict[int, bool]) -> bool:
    """A client backend (its title names a connection: `postgres: user db [local] ...`), not an
    auxiliary process or a parallel worker."""
    if pid not in cache:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cache[pid] = b"[local]" in f.read()
        except OSError:
            return False
    return cache[pid]


def sample(postmaster: int, pool: set[int], cache: dict[int, bool]) -> dict | None:
    """One sample of the server's processes, summed by what they are; None once the postmaster is
    gone. The pool's is summed over its backends present now: a backend that went away adds
    nothing."""
    pm = _status(postmaster)
    if pm is None:
        return None
    out = dict.fromkeys(POOL_COLUMNS, 0)
    out |= {"mono_s": round(time.monotonic(), 4), "postmaster_anon_bytes": pm[0], "postmaster_threads": pm[1]}
    for pid in _children(postmaster):
        st = _status(pid)
        if st is None:
            continue
        if pid in pool:
            out["pool_anon_bytes"] += st[0]
            out["pool_backends"] += 1
            out["pool_threads_max"] = max(out["pool_threads_max"], st[1])
        elif _is_backend(pid, cache):
            out["other_anon_bytes"] += st[0]
            out["other_backends"] += 1
        else:
            out["aux_anon_bytes"] += st[0]
    return out


class Sampler(threading.Thread):
    """The pool's private memory at 20 Hz into a CSV file, until `done` is set."""

    def __init__(self, path: str, postmaster: int, pool: set[int]):
        super().__init__(daemon=True)
        self.path, self.postmaster, self.pool = path, postmaster, pool
        self.done, self.latest = threading.Event(), None

    def run(self) -> None:
        cache: dict[int, bool] = {}
        with open(self.path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=POOL_COLUMNS)
            w.writeheader()
            while not self.done.is_set():
                s = sample(self.postmaster, self.pool, cache)
                if s is not None:
                    w.writerow(s)
                    self.latest = s
                self.done.wait(1.0 / SAMPLE_HZ)
            f.flush()
