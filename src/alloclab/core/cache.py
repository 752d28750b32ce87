"""Where alloclab keeps what it builds or unpacks once per machine, outside any checkout:
$XDG_CACHE_HOME/alloclab (~/.cache/alloclab). setup.sh follows the same rule."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(name: str) -> Path:
    """The folder `name` of alloclab's cache (read when asked: the environment may change)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "alloclab" / name


def cargo_target() -> Path:
    """Where cargo builds the driver: CARGO_TARGET_DIR, else the cache's cargo-target, shared by
    every clone so that a fresh one compiles the driver's own crates and not its dependencies."""
    return Path(os.environ["CARGO_TARGET_DIR"]) if os.environ.get("CARGO_TARGET_DIR") else cache_dir("cargo-target")
