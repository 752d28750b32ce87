"""What the demo leaves out is built on its first use: a source-built allocator when a plan names
it, and inferno when a report draws flame graphs (left to the next report in the demo)."""

from alloclab.alloc import allocators, build
from alloclab.report import flames


def test_a_source_built_allocator_named_before_it_was_built_is_built_then(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ALLOCLAB_ALLOCATORS", str(tmp_path / "allocators"))
    assert "rpmalloc" not in build.built()
    a = allocators.parse("rpmalloc")
    assert a.path and a.path.startswith(str(tmp_path)) and "built from crate" in a.source
    assert "rpmalloc" in build.built()
    said = capsys.readouterr().err
    assert "rpmalloc is built from sources on its first use" in said and "building rpmalloc" in said
    assert allocators.parse("rpmalloc").path == a.path  # once: the cache keeps it


def test_the_demo_leaves_flame_graphs_to_the_next_report(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("ALLOCLAB_TOOLS", raising=False)
    monkeypatch.setattr(flames.shutil, "which", lambda name: "/usr/bin/true" if name == "cargo" else None)
    monkeypatch.setattr(flames.os, "access", lambda p, m: str(p) == "/usr/bin/true")
    monkeypatch.setenv("ALLOCLAB_DEFER_TOOLS", "1")
    assert "alloclab report on this folder installs it" in flames.install_or_why()


def test_a_first_use_build_happens_in_cargos_cache_and_is_copied_beside_the_driver(tmp_path, monkeypatch):
    """alloclab's cache and cargo's target follow the environment as setup.sh's do, and a part of
    the driver built on its first use is built there (a fake cargo that says where it was asked
    to build) and copied where alloclab looks, the checkout's own build left alone."""
    from alloclab.clients import driver
    from alloclab.core.cache import cache_dir, cargo_target
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("CARGO_TARGET_DIR", raising=False)
    assert cache_dir("tools") == tmp_path / "xdg" / "alloclab" / "tools"
    assert cargo_target() == tmp_path / "xdg" / "alloclab" / "cargo-target"
    monkeypatch.setenv("CARGO_TARGET_DIR", str(tmp_path / "target"))
    assert cargo_target() == tmp_path / "target"
    fake = tmp_path / "bin" / "cargo"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\nwhile [ "$1" != --target-dir ]; do shift; done\nmkdir -p "$2/release"\n'
                    'echo "$@" > "$2/release/alloclab-driver"\n')
    fake.chmod(0o755)
    monkeypatch.setattr(driver.shutil, "which", lambda name: str(fake) if name == "cargo" else None)
    dest = tmp_path / "release" / "alloclab-driver-jemalloc"
    driver._build("the driver with jemalloc linked in", ["--features", "link-jemalloc"], "alloclab-driver", dest)
    assert dest.read_text().split() == ["--target-dir", str(tmp_path / "target"), "--features", "link-jemalloc"]
    assert not dest.with_name(dest.name + ".tmp").exists()
