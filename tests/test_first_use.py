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
