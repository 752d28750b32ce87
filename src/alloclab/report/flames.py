"""Flame graphs of profiled runs, drawn by inferno (a well-kept Rust port of Brendan Gregg's
FlameGraph; `./setup.sh` installs `inferno-flamegraph` and `inferno-diff-folded` under
~/.cache/alloclab/tools): per cell and allocator the runs' folded stacks merged, on-CPU
(cpu-clock samples) and off-CPU (the stacks of context switches), and a differential graph of
each allocator against the baseline."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from alloclab.answers.table import Table, params
from alloclab.core.cache import cache_dir


def tools_dir() -> Path:
    """Where ./setup.sh installs inferno (read when asked: the environment may change)."""
    return cache_dir("tools")


def tool(name: str) -> str | None:
    for d in (os.environ.get("ALLOCLAB_TOOLS"), str(tools_dir())):
        if d and os.access(Path(d) / "bin" / name, os.X_OK):
            return str(Path(d) / "bin" / name)
    return shutil.which(name)


def install_or_why() -> str | None:
    """Why flame graphs cannot be drawn here, or None: inferno is installed on its first use (a
    minute, with a progress line) where cargo is there (./setup.sh test installs it too)."""
    absent = [n for n in ("inferno-flamegraph", "inferno-diff-folded") if not tool(n)]
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    failed = tools_dir() / "inferno-install-failed.txt"  # tried once: a machine without crates.io says why
    defer = os.environ.get("ALLOCLAB_DEFER_TOOLS")  # ./setup.sh demo: its ten minutes are the study's
    if absent and os.access(cargo, os.X_OK) and not failed.exists() and not defer:
        print(f"alloclab: installing inferno (flame graphs) into {tools_dir()} on its first use (about a minute)",
              file=sys.stderr, flush=True)
        try:
            p = subprocess.run([cargo, "install", "--quiet", "--locked", "inferno", "--root", str(tools_dir())],
                               capture_output=True, text=True, timeout=1200)
            said = p.stderr
        except (OSError, subprocess.SubprocessError) as e:
            said = str(e)
        absent = [n for n in ("inferno-flamegraph", "inferno-diff-folded") if not tool(n)]
        if absent:
            failed.parent.mkdir(parents=True, exist_ok=True)
            failed.write_text(said[-2000:])
    if absent and defer and os.access(cargo, os.X_OK):
        return "inferno is not installed yet: alloclab report on this folder installs it (a minute) and draws them"
    if absent:
        return (f"{', '.join(absent)} not installed: cargo install inferno --locked --root {tools_dir()} "
                f"(./setup.sh test does it{'; its last try failed: ' + str(failed) if failed.exists() else ''})")
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


def flame_table(a, out: Path) -> Table | None:
    """With --profile: per cell and allocator an on-CPU and an off-CPU flame graph (the runs'
    stacks merged: the analysis' `flames`) and a differential one against the baseline allocator,
    as SVG files beside the report."""
    if not a.perf:
        return None
    base_alloc = a.baseline
    t = Table("flamegraphs", "Flame graphs (SVG files beside this report)",
              ["engine", "parameters", "allocator", "runs", "on-CPU", "off-CPU (context switches)",
               f"differential vs {base_alloc}"],
              note="On-CPU: perf cpu-clock samples; off-CPU: the stack of every context switch; differential: the "
                   "variant's on-CPU stacks coloured by the change from the baseline (red more, blue fewer, counts "
                   "normalised). Drawn by inferno.")
    why = install_or_why()
    if why:
        t.note += f" Absent here: {why}."
        return t
    d = out / "flamegraphs"
    d.mkdir(exist_ok=True)
    merged: dict[tuple, tuple[str, str]] = {}
    for cell, alloc, dirs in a.flames:
        merged[(cell, alloc)] = (merge([x / "stacks.folded" for x in dirs]),
                                 merge([x / "switches.folded" for x in dirs]))
    for i, (cell, alloc, dirs) in enumerate(a.flames):
        cpu, off = merged[(cell, alloc)]
        stem = f"{i + 1:03d}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', alloc)}"
        label = f"{cell[0]} {params(cell)} [{alloc}]"
        files = []
        for name, folded, title, count in ((f"{stem}-cpu.svg", cpu, f"on-CPU: {label}", "samples"),
                                            (f"{stem}-off.svg", off, f"off-CPU: {label}", "switches")):
            files.append(f"flamegraphs/{name}" if draw(folded, d / name, title, count) else "–")
        base = merged.get((cell, base_alloc))
        diff = "–"
        if alloc != base_alloc and base and draw_diff(base[0], cpu, d / f"{stem}-diff.svg",
                                                      f"{label} against {base_alloc}"):
            diff = f"flamegraphs/{stem}-diff.svg"
        t.add([cell[0], params(cell), alloc, str(len(dirs)), *files, diff])
    return t
