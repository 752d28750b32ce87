"""Flame graphs of profiled runs, drawn by inferno (a well-kept Rust port of Brendan Gregg's
FlameGraph; `./setup.sh` installs `inferno-flamegraph` and `inferno-diff-folded` under
~/.cache/alloclab/tools): per cell and allocator the runs' folded stacks merged, on-CPU
(cpu-clock samples) and off-CPU (the stacks of context switches), and a differential graph of
each allocator against the baseline."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path


def tools_dir() -> Path:
    """Where ./setup.sh installs inferno (read when asked: the environment may change)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "alloclab" / "tools"


def tool(name: str) -> str | None:
    for d in (os.environ.get("ALLOCLAB_TOOLS"), str(tools_dir())):
        if d and os.access(Path(d) / "bin" / name, os.X_OK):
            return str(Path(d) / "bin" / name)
    return shutil.which(name)


def missing() -> str | None:
    """Why flame graphs cannot be drawn here, or None."""
    absent = [n for n in ("inferno-flamegraph", "inferno-diff-folded") if not tool(n)]
    if absent:
        return (f"{', '.join(absent)} not installed: cargo install inferno --locked --root {tools_dir()} "
                "(./setup.sh does it)")
    return None


def merge(paths: list[Path]) -> str:
    """Folded stacks of several runs, summed."""
    total: Counter = Counter()
    for p in paths:
        try:
            text = p.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            stack, _, n = line.rpartition(" ")
            if stack and n.isdigit():
                total[stack] += int(n)
    return "".join(f"{k} {v}\n" for k, v in sorted(total.items()))


def draw(folded: str, svg: Path, title: str, count_name: str = "samples") -> bool:
    if not folded.strip():
        return False
    p = subprocess.run([tool("inferno-flamegraph"), "--title", title, "--countname", count_name],
                       input=folded, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        return False
    svg.write_text(p.stdout)
    return True


def draw_diff(base: str, variant: str, svg: Path, title: str) -> bool:
    """Differential flame graph: the variant's stacks, coloured by the change from the baseline
    (red: more samples, blue: fewer), counts normalised to the same total."""
    if not base.strip() or not variant.strip():
        return False
    with tempfile.TemporaryDirectory(prefix="alloclab-flame-") as d:
        (Path(d) / "base").write_text(base)
        (Path(d) / "variant").write_text(variant)
        p = subprocess.run([tool("inferno-diff-folded"), "--normalize", str(Path(d) / "base"),
                            str(Path(d) / "variant")], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        return False
    return draw(p.stdout, svg, title)
