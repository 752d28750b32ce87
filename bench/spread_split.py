#!/usr/bin/env python3
"""Where a round's spread comes from (not a test): for each cell of a stored study whose servers
took turns, how much of the spread of a round's throughput ratio to the baseline is the turns'
own (time within a run) and how much lies between servers (what a longer window cannot reach).

A round's ratio is the mean log throughput of an allocator's servers less the baseline's. Within a
run, each server's turns are matched to the baseline server's in the same cycle of turns (a turn's
place in the round's order, divided by the servers taking turns), and the cycles are split into
two interleaved halves (blocks of --block cycles): half the difference of the two halves' ratios
has the spread that the run's measured time puts on the whole run's ratio. What is left of the
round's spread, sqrt(observed^2 - within^2), lies between servers: fresh servers of one allocator
differ, and only more servers a round narrow it. A within-run part above the observed spread means
the halves differ by more than their time (a load that is not steady within a run, such as
RocksDB's compactions): the split says nothing there. Each SD read from a handful of rounds is
itself rough (six rounds: about ±30 %).

    .venv/bin/python bench/spread_split.py RESULTS [--baseline glibc] [--block 3]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import alloclab.workloads  # noqa: E402,F401  (registers the workloads' own columns)
from alloclab.catalog.allocators import short_name  # noqa: E402
from alloclab.results import turns as stored_turns  # noqa: E402
from alloclab.results.store import Store  # noqa: E402


def turns(run_dir: Path) -> dict[int, tuple[float, float]] | None:
    """A run's measured turns by place in its round's order: (ops, seconds); None where the run did
    not take turns."""
    got = stored_turns.measured(run_dir)
    return dict(zip(*got)) if got else None


def _rate(t: dict[int, tuple[float, float]], cycles) -> float:
    return sum(t[c][0] for c in cycles) / sum(t[c][1] for c in cycles)


def split(root: Path, baseline: str, block: int) -> list[tuple[str, str, int, float, float]]:
    """Per (cell, allocator): rounds, the observed SD of a round's log ratio, and its within-run part."""
    store = Store(root)
    runs = defaultdict(lambda: defaultdict(list))  # (cell, round) -> allocator -> [(log ops/s, turns)]
    for r in store.rows():
        if r.status == "ok" and r.ops_per_s > 0:
            t = turns(store.run_dir(r.run_id))
            if t is not None:
                runs[(r.cell, r.repeat)][r.allocator].append((math.log(r.ops_per_s), t))
    ratio, half = defaultdict(list), defaultdict(list)
    for (cell, _), by in sorted(runs.items()):
        n = sum(len(v) for v in by.values())  # the servers that took turns in this round
        base = [{p // n: x for p, x in t.items()} for _, t in by.get(baseline, [])]
        if not base:
            continue
        for a, mine in by.items():
            if a == baseline or len(mine) != len(base):
                continue
            ratio[(cell, a)].append(statistics.mean(x for x, _ in mine) - statistics.mean(x for x, _ in by[baseline]))
            diffs = []
            for (_, t), b in zip(mine, base):
                t = {p // n: x for p, x in t.items()}
                common = sorted(set(t) & set(b))
                halves = [[c for i, c in enumerate(common) if (i // block) % 2 == h] for h in (0, 1)]
                if all(halves):
                    diffs.append(math.log(_rate(t, halves[0]) / _rate(b, halves[0]))
                                 - math.log(_rate(t, halves[1]) / _rate(b, halves[1])))
            if diffs:
                half[(cell, a)].append(statistics.mean(diffs))
    out = []
    for key, v in ratio.items():
        if len(v) >= 2 and len(half[key]) >= 2:
            out.append((*key, len(v), statistics.stdev(v), statistics.pstdev(half[key]) / 2))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path)
    ap.add_argument("--baseline", default="glibc")
    ap.add_argument("--block", type=int, default=3, help="cycles of turns in each block of the two halves")
    a = ap.parse_args()
    print("| cell | allocator | rounds | a round's ratio, SD % | within a run % | between servers % |")
    print("|---|---|---|---|---|---|")
    rows = split(a.results, a.baseline, a.block)
    by_cell = defaultdict(list)
    for cell, alloc, n, obs, within in rows:
        by_cell[cell].append((n, obs, within))
        _line(cell, short_name(alloc), n, obs, within)
    for cell, got in by_cell.items():  # each cell's allocators pooled: the mean of their variances
        _line(cell, "all, pooled", sum(n for n, _, _ in got), math.sqrt(statistics.mean(o ** 2 for _, o, _ in got)),
              math.sqrt(statistics.mean(w ** 2 for _, _, w in got)))


def _line(cell: str, alloc: str, n: int, obs: float, within: float) -> None:
    between = math.sqrt(max(0.0, obs ** 2 - within ** 2))
    print(f"| {cell} | {alloc} | {n} | {100 * obs:.1f} | {100 * within:.1f} | {100 * between:.1f} |")


if __name__ == "__main__":
    main()
