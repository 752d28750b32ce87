"""The memory a server needs, read where the kernel counts it: a cgroup's unreclaimable charge
(anonymous, shared and kernel memory: memory.stat, and v1's kmem counter, under cgroup v1 and v2)
and its peak; a planted allocation moves both by its size."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from alloclab.core.errors import AlloclabError
from alloclab.host.placement import ChargeWatch, MemoryLimit, unreclaimable

V2_STAT = """anon 104857600
file 52428800
kernel 2097152
shmem 8388608
file_mapped 4096
anon_thp 0
"""
# v1: a leaf cgroup's own counts, then the hierarchy's sums (total_*), which a reader prefers
V1_STAT = """cache 52428800
rss 100663296
rss_huge 4194304
shmem 8388608
mapped_file 4096
total_cache 52428800
total_rss 104857600
total_rss_huge 4194304
total_shmem 8388608
"""


def test_unreclaimable_is_anonymous_shared_and_kernel_memory_on_both_cgroup_versions():
    assert unreclaimable(V2_STAT, 2) == 104857600 + 8388608 + 2097152  # page cache (file) left out
    # v2 before 5.18 has no `kernel`: its unreclaimable parts
    parts = V2_STAT.replace("kernel 2097152\n", "kernel_stack 16384\npagetables 65536\nslab_reclaimable 4096\n"
                            "slab_unreclaimable 8192\npercpu 1024\nsock 0\n")
    assert unreclaimable(parts, 2) == 104857600 + 8388608 + 16384 + 65536 + 8192 + 1024
    # v1: total_rss (huge pages within) + total_shmem, and the kernel memory of memory.kmem.usage_in_bytes
    assert unreclaimable(V1_STAT, 1) == 104857600 + 8388608
    assert unreclaimable(V1_STAT, 1, kmem=3145728) == 104857600 + 8388608 + 3145728
    own = "\n".join(line for line in V1_STAT.splitlines() if not line.startswith("total_"))
    assert unreclaimable(own, 1) == 100663296 + 8388608
    assert unreclaimable("", 2) == 0


def _cgroup(name: str) -> MemoryLimit:
    try:
        return MemoryLimit(name, 0)
    except AlloclabError as e:
        pytest.skip(f"no writable memory cgroup here: {e}")


PLANT = ("import sys, time; b = bytearray(int(sys.argv[1]) << 20); "
         "[b.__setitem__(i, 1) for i in range(0, len(b), 4096)]; print('ok', flush=True); time.sleep(1.0)")


def _planted(mib: int) -> tuple[int, int | None, int]:
    """A process in a cgroup of its own that allocates and touches `mib` MiB: the high-water mark
    of the cgroup's unreclaimable charge, the kernel's peak, and the samples taken."""
    cg = _cgroup(f"alloclab-test-{os.getpid()}-{mib}")
    try:
        watch = ChargeWatch(cg).start()
        p = subprocess.Popen([sys.executable, "-c", PLANT, str(mib)], preexec_fn=cg.attach, stdout=subprocess.PIPE,
                             text=True)
        assert p.stdout.readline().strip() == "ok"
        time.sleep(0.3)  # a few samples while it holds the memory
        p.wait(30)
        watch.end()
        note = watch.note()
        assert note["version"] == cg.version and note["error"] is None and note["samples"] > 5
        return note["unreclaimable_peak_bytes"], note["peak_bytes"], note["samples"]
    finally:
        cg.remove()


def test_a_planted_allocation_moves_the_charge_and_the_peak_by_its_size():
    small, small_peak, _ = _planted(32)
    large, large_peak, _ = _planted(160)
    mib = 2**20
    assert small >= 32 * mib and large >= 160 * mib
    # the 128 MiB more shows in both, within the interpreter's own few MiB
    assert 120 * mib <= large - small <= 140 * mib, (small / mib, large / mib)
    if small_peak is not None and large_peak is not None:  # memory.peak: kernel 5.19 and later on v2
        assert large_peak >= large and 110 * mib <= large_peak - small_peak <= 160 * mib
