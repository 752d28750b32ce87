#!/usr/bin/env python3
"""How long the studies' stack takes to make from nothing on this machine, and the plugin's
build, in one run (not a test).

`alloclab setup stack` runs into a fresh folder (ALLOCLAB_STACK under a temporary directory,
its vendor cache beside it, so nothing already made is reused): its wall time and each step's,
then the TidesDB and plugin build times of the default TideSQL build, a second setup (a no-op),
and one more TideSQL build on demand (`--tidesql 4.2.5`: its TidesDB and its plugin). The
files come from ../shared/vendor (or ALLOCLAB_VENDOR); packages other than the vendored
MariaDB from this machine's Debian mirror. Needs root.

    sudo .venv/bin/python bench/stack_setup.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup(home: Path, *extra: str) -> tuple[float, str]:
    env = {**os.environ, "ALLOCLAB_STACK": str(home), "PYTHONPATH": str(ROOT / "src")}
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "alloclab", "setup", "stack", *extra], capture_output=True, text=True,
                       env=env)
    took = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"alloclab setup stack failed (exit {p.returncode}): {p.stderr.strip()[-600:]}")
    return took, p.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", help="make the stack in this folder and keep it (default: a temporary one, removed)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("the stack's setup needs root (debootstrap, chroot): run this as root")
    base = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="alloclab-stack-bench-", dir="/var/tmp"))
    home = base / "stack"
    if home.exists():
        sys.exit(f"{home} exists: give --keep a new folder")
    try:
        total, _ = setup(home)
        st = json.loads((home / "state.json").read_text())
        again, out = setup(home)
        redone = [line for line in out.splitlines() if line.endswith(" ...")]
        more, _ = setup(home, "--tidesql", "4.2.5")
        st2 = json.loads((home / "state.json").read_text())
    finally:
        if not a.keep:
            subprocess.run(["rm", "-rf", str(base)], check=False)
    steps = st["steps"]
    default = next(iter(st["builds"].values()))
    extra = next(b for n, b in st2["builds"].items() if n not in st["builds"])
    print(f"machine: {os.cpu_count()} cores; server {steps['check']['server_version']}")
    print("| what | seconds |")
    print("|---|---|")
    print(f"| **alloclab setup stack, from nothing** | **{total:.1f}** |")
    for name, rec in steps.items():
        print(f"| step {name} | {rec['seconds']:.1f} |")
    print(f"| TidesDB {default['tidesdb_version']} build (cmake, in the root) | {default['tidesdb_build_s']:.1f} |")
    print(f"| TideSQL {default['tidesql_version']} plugin build (out of the server's tree) | "
          f"{default['plugin_build_s']:.1f} |")
    print(f"| second setup (no-op{'' if not redone else ', redid ' + ', '.join(redone)}) | {again:.1f} |")
    print(f"| one more build on demand, --tidesql 4.2.5 (TidesDB {extra['tidesdb_version']} "
          f"{extra['tidesdb_build_s']:.1f} s + plugin {extra['plugin_build_s']:.1f} s + load check) | {more:.1f} |")
    print(f"\ntarget: from nothing <= 120 s; measured {total:.1f} s ({total / 120:.2f} of it)")


if __name__ == "__main__":
    main()
