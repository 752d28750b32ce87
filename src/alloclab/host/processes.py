"""The processes alloclab starts: each in its own process group, killed whole (a server's
children, a build's compilers, perf), and none outliving alloclab."""

from __future__ import annotations

import ctypes
import os
import signal


def kill_group(pid: int) -> None:
    """SIGKILL to the process group that `pid` leads (started with start_new_session); a group
    already gone, or no longer ours, is left alone."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def die_with_parent() -> None:
    """preexec_fn: the kernel kills the child if alloclab dies (even by kill -9), so that no
    target outlives the study that started it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def child_setup(cpus: set[int] | None = None, then=None):
    """preexec_fn of a process alloclab starts: dies with alloclab, runs on the CPU set `cpus`
    (if any), then `then` (e.g. joins a memory cgroup)."""
    def setup():
        die_with_parent()
        if cpus:
            os.sched_setaffinity(0, cpus)
        if then:
            then()
    return setup


def stop_groups(pids: list[int], grace_s: float = 5.0) -> None:
    """SIGTERM to each process group, then SIGKILL to those still there after `grace_s`."""
    import time
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace_s
    for pid in pids:
        while True:
            try:
                os.killpg(pid, 0)
            except (ProcessLookupError, PermissionError):
                break
            if time.monotonic() > deadline:
                kill_group(pid)
                break
            time.sleep(0.1)
