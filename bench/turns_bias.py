#!/usr/bin/env python3
"""Turns checked against runs alone (not a test): does measuring a cell's allocators in turns
(the waiting processes stopped with SIGSTOP) change the *ratios* against glibc?

Each round measures one cell in three designs, in a seeded order per round:
  alone   the four allocators one after another (slice 0)
  turns4  the four in turns of 0.5 s
  turns2  glibc with each other allocator, two at a time, in turns of 0.5 s
Per allocator and design the round's log ratio against glibc; the bias of a design is the mean,
over rounds, of its log ratio minus the alone design's in the same round (paired), with a 95 %
t interval; and four in turns against two in turns. Printed as a table, one line per cell,
allocator and design.

    .venv/bin/python bench/turns_bias.py [--cells default,write,tpcc] [--rounds 20] [--seed 1]
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
ALLOCATORS = ("glibc", "jemalloc", "mimalloc", "tcmalloc")
CELLS = {
    # the default study's cell: TidesDB memtable point reads, 2 threads, 6 s windows
    "default": ["--preset", "kv-allocators", "--scale", "quick"],
    # a writing cell: TidesDB puts (flushes and compactions run only in their own run's turns)
    "write": ["--engines", "tidesdb", "--workloads", "write", "--threads", "2", "--duration", "6s"],
    # TPC-C on InnoDB, alloclab's own client
    "tpcc": ["--engines", "mariadb-innodb", "--workloads", "tpcc", "--warehouses", "2", "--duration", "10s"],
}


def one(cell: str, allocators: tuple[str, ...], slice_s: float, seed: int) -> dict[str, float]:
    """One round of one design: each allocator's throughput (NOPM for TPC-C)."""
    out = Path(tempfile.mkdtemp(prefix="alloclab-turns-")) / "res"
    p = subprocess.run([str(ROOT / ".venv" / "bin" / "alloclab"), "run", *CELLS[cell], "--runs", "1", "--seed",
                        str(seed), "--allocators", ",".join(allocators), "--slice", f"{slice_s}s", "--out", str(out),
                        "--quiet"], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise SystemExit(f"{cell} {allocators} slice {slice_s}: {p.stderr[-800:]}")
    with open(out / "runs.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["status"] == "ok" and r.get("purpose", "measure") == "measure"]
    key = "nopm" if cell == "tpcc" else "ops_per_s"
    return {r["allocator"]: float(r[key]) for r in rows if float(r[key] or 0) > 0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", default="default,write,tpcc")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    print("cell | allocator | design | rounds | bias of the log ratio vs alone, % [95 % CI]")
    for cell in a.cells.split(","):
        rng = random.Random(a.seed)
        logs: dict[tuple[str, str], list[float]] = {}  # (design, allocator) -> log ratio per round
        for r in range(a.rounds):
            seed = 1000 * a.seed + r
            designs = ["alone", "turns4", "turns2"]
            rng.shuffle(designs)
            got: dict[str, dict[str, float]] = {}
            for d in designs:
                if d == "turns2":
                    got[d] = {}
                    for x in ALLOCATORS[1:]:
                        pair = one(cell, ("glibc", x), 0.5, seed)
                        if "glibc" in pair and x in pair:
                            got[d][x] = pair[x] / pair["glibc"]
                else:
                    t = one(cell, ALLOCATORS, 0.0 if d == "alone" else 0.5, seed)
                    got[d] = {x: t[x] / t["glibc"] for x in ALLOCATORS[1:] if x in t and "glibc" in t}
            for d, ratios in got.items():
                for x in ALLOCATORS[1:]:
                    logs.setdefault((d, x), []).append(math.log(ratios[x]) if x in ratios else math.nan)
            print(f"# {cell} round {r + 1}: " + "; ".join(f"{d} " + ", ".join(f"{x} {got[d].get(x, math.nan):.3f}"
                                                                            for x in ALLOCATORS[1:]) for d in got),
                  file=sys.stderr, flush=True)
        for x in ALLOCATORS[1:]:
            for d, ref in (("turns4", "alone"), ("turns2", "alone"), ("turns4", "turns2")):
                pairs = zip(logs[(d, x)], logs[(ref, x)])
                diffs = [t - s for t, s in pairs if not (math.isnan(t) or math.isnan(s))]
                n = len(diffs)
                design = d if ref == "alone" else f"{d} vs {ref}"
                if n < 2:
                    print(f"{cell} | {x} | {design} | {n} | –")
                    continue
                m = sum(diffs) / n
                sd = math.sqrt(sum((y - m) ** 2 for y in diffs) / (n - 1))
                half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
                pct = lambda v: 100 * (math.exp(v) - 1)  # noqa: E731
                print(f"{cell} | {x} | {design} | {n} | {pct(m):+.1f} [{pct(m - half):+.1f}, {pct(m + half):+.1f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
