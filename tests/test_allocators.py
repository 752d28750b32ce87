"""The allocator registry, injection and proof, with real processes and real allocators."""

import os
import stat
from dataclasses import replace

import pytest
from conftest import need
from helpers import execute, specs

from alloclab.alloc import allocators
from alloclab.alloc.allocators import Allocator, mapped_files, prove
from alloclab.core.errors import AlloclabError

MAPS = """\
55d0c0a00000-55d0c0a01000 r--p 00000000 fd:01 1 /opt/driver
7f00 r-xp 00000000 fd:01 2 /usr/lib/x86_64-linux-gnu/libjemalloc.so.2
7f01 r-xp 00000000 fd:01 3 /usr/lib/x86_64-linux-gnu/libc.so.6
7f02 rw-p 00000000 00:00 0 [heap]
7f03 rw-p 00000000 00:00 0
"""


def test_mapped_files_reads_paths_only():
    assert mapped_files(MAPS) == ["/opt/driver", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
                                  "/usr/lib/x86_64-linux-gnu/libc.so.6"]


def test_glibc_proof_fails_when_another_allocator_is_mapped():
    p = prove(Allocator("glibc", "glibc", None), mapped_files(MAPS), 42)
    assert not p.verified and "libjemalloc" in p.reason


def test_missing_proof_source_is_not_a_proof():
    p = prove(Allocator("glibc", "glibc", None), None, 42)
    assert not p.verified and "/proc/42/maps" in p.reason


def test_a_reaped_client_s_pid_is_never_read_for_the_proof():
    """Events read after the client was reaped name a PID another process may now hold: the
    runner then reads no maps, and the proof falls back to the driver's own report."""
    from alloclab.core import events
    from alloclab.run.execute import Watch

    start = events.Event("start", {"pid": os.getpid(), "mapped_files": ["/x/libc.so.6"]})
    live = Watch(under_test=True)
    live.handle(start)
    assert live.maps_at_start and allocators.whole(live.maps_at_start)  # a live child is read
    reaped = Watch(under_test=False)
    reaped.handle(start)
    assert reaped.maps_at_start is None and reaped.start["mapped_files"] == ["/x/libc.so.6"]
    # a read of a process that does not map the driver's binary is another process's
    assert allocators.whole(live.maps_at_start, os.path.realpath("/proc/self/exe"))
    assert not allocators.whole(live.maps_at_start, "/usr/bin/env")


def test_parse_forms(found):
    need(found, "jemalloc")
    assert allocators.parse("glibc", found).path is None
    a = allocators.parse("jemalloc+MALLOC_CONF=narenas:2", found)
    assert a.name == "jemalloc+MALLOC_CONF=narenas:2" and a.base == "jemalloc"
    assert dict(a.env) == {"MALLOC_CONF": "narenas:2"}
    g = allocators.parse("glibc+MALLOC_ARENA_MAX=1+GLIBC_TUNABLES=glibc.malloc.tcache_count=0", found)
    assert dict(g.env) == {"MALLOC_ARENA_MAX": "1", "GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"}
    with pytest.raises(AlloclabError, match="MALLOC_ARENA_MAX is not an option jemalloc documents"):
        allocators.parse("jemalloc+MALLOC_ARENA_MAX=1", found)
    custom = allocators.parse(f"mine={found['jemalloc'].path}", found)
    assert custom.name == "mine" and custom.path == found["jemalloc"].path
    with pytest.raises(AlloclabError, match="absolute"):
        allocators.parse("mine=lib.so", found)


def test_every_installed_allocator_is_found_with_a_version(found):
    need(found, "glibc", "jemalloc", "mimalloc", "tcmalloc", "tcmalloc-minimal")
    for a in found.values():
        assert not a.version or a.version == allocators.checked(a).version  # discovery asks no package manager
        a = allocators.checked(a)  # the preflight's check: the package that installed it
        assert a.version and a.version != "unknown", a
        if a.path:
            assert os.path.isabs(a.path) and os.path.exists(a.path)


@pytest.mark.parametrize("name", ["glibc", "jemalloc", "mimalloc", "tcmalloc", "tcmalloc-minimal"])
def test_real_run_proves_its_allocator(name, found, driver_exe, tmp_path, scratch):
    need(found, name)
    spec = specs(found, [name])[0]
    row = execute(spec, tmp_path / "run", scratch, driver_exe, "t")
    assert row.status == "ok", row.reason
    assert row.allocator_verified
    assert row.ops == 2000 and row.ops_per_s > 0 and row.p99_ns > 0 and row.peak_rss_bytes > 0


def test_missing_library_makes_an_invalid_run(found, driver_exe, tmp_path, scratch):
    spec = specs(found, ["glibc"])[0]
    ghost = Allocator("jemalloc", "jemalloc", "/nonexistent/libjemalloc.so.2", version="5")
    row = execute(replace(spec, allocator=ghost), tmp_path / "run", scratch, driver_exe, "t")
    assert row.status == "invalid"
    assert not row.allocator_verified
    assert "/nonexistent/libjemalloc.so.2" in row.reason and "does not exist" in row.reason


def test_preload_the_target_never_receives_makes_an_invalid_run(found, driver_exe, tmp_path, scratch):
    need(found, "jemalloc")
    # a launcher that drops LD_PRELOAD before starting the real driver: the silent mistake
    wrapper = tmp_path / "strip-preload"
    wrapper.write_text(f"#!/bin/sh\nunset LD_PRELOAD\nexec {driver_exe} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    spec = specs(found, ["jemalloc"])[0]
    row = execute(spec, tmp_path / "run", scratch, wrapper, "t")
    assert row.status == "invalid"
    assert not row.allocator_verified
    assert "not mapped" in row.reason and "libjemalloc" in row.reason
    # and the run's own numbers are still stored, for diagnosis
    assert (tmp_path / "run" / "events.jsonl").exists() and row.ops == 2000


def test_tuning_env_reaches_the_process(found, driver_exe, tmp_path, scratch):
    need(found, "jemalloc")
    spec = specs(found, ["jemalloc+MALLOC_CONF=narenas:1,stats_print:true"])[0]
    row = execute(spec, tmp_path / "run", scratch, driver_exe, "t")
    assert row.status == "ok", row.reason
    # jemalloc prints its statistics at exit when stats_print is set: proof the variable arrived
    assert "narenas" in (tmp_path / "run" / "driver.log").read_text()
