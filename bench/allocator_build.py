#!/usr/bin/env python3
"""How long `alloclab setup allocators` takes from nothing (not a test): every source-built
allocator of the catalog, into an empty cache, then a second setup over it (which must do
nothing). With --cold-cargo, cargo's own cache is empty too (a fresh CARGO_HOME): the crates
are downloaded first (that needs crates.io or a mirror).

    .venv/bin/python bench/allocator_build.py [--cold-cargo]

Prints one line per allocator (seconds, library size, SHA-256) and the totals.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from alloclab.alloc import build  # noqa: E402
from alloclab.catalog.allocators import SOURCE_BUILT  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cold-cargo", action="store_true", help="also start from an empty cargo cache (CARGO_HOME)")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="alloclab-bench-build-"))
    try:
        os.environ["ALLOCLAB_ALLOCATORS"] = str(tmp / "allocators")
        if a.cold_cargo:
            home = tmp / "cargo"
            home.mkdir()
            for f in ("config.toml", "config"):  # keep the registry mirror, if one is configured
                src = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo")) / f
                if src.exists():
                    shutil.copy(src, home / f)
            os.environ["CARGO_HOME"] = str(home)
        cpus = os.cpu_count()
        t0 = time.monotonic()
        made = build.setup(notify=lambda m: None)
        total = time.monotonic() - t0
        t1 = time.monotonic()
        again = subprocess.run([sys.executable, "-m", "alloclab", "setup", "allocators"], capture_output=True,
                               text=True, env=os.environ)
        second = time.monotonic() - t1
        print(f"alloclab setup allocators from nothing ({cpus} CPUs, {'empty' if a.cold_cargo else 'warm'} cargo "
              "cache):")
        for name in SOURCE_BUILT:
            m = made[name]
            if m.get("refused"):
                print(f"  {name:16s} refused: {m['refused']}")
            else:
                print(f"  {name:16s} {m['build_s']:6.1f} s  {m['bytes'] / 2**20:5.1f} MiB  {m['upstream'][:40]:40s} "
                      f"sha256 {m['sha256'][:16]}")
        print(f"  total {total:.0f} s (fetch and builds); a second setup: {second:.1f} s, "
              f"{'built nothing' if 'building' not in again.stdout else 'BUILT AGAIN'} (exit {again.returncode})")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
