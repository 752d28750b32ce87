#!/usr/bin/env python3
"""How often would a study decide one comparison of a share given back? Redrawn from stored lives
(not a test): each allocator's lives of a cell, pooled over the given study folders, are drawn
with replacement into simulated studies of R rounds, each round's value of an allocator the mean
of its k lives there (k before the first look, k' after it, as decided allocators' places go to
the open ones), and the comparison is judged at the last look as alloclab judges it: the median of
the rounds' differences with the signed-rank interval at the per-look level of the design's 4
looks, decided when it excludes 0 or lies within the margin.

This is what moved memory-life quick to two RocksDB lives of each allocator a round
(`runs_per_round`): two arenas − glibc given back on RocksDB was the one comparison left open in 3
of 8 quick studies of one life a round.

    .venv/bin/python bench/life_redraw.py /root/alloclab-results/ml-quick-h{1,2,3} \
        [--engine rocksdb] [--variant glibc+MALLOC_ARENA_MAX=2] [--designs 15:1/2,14:2/4]
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from alloclab.answers import stats  # noqa: E402
from alloclab.plan.design import FIRST_LOOK, OVERALL_ALPHA, look_alpha  # noqa: E402


def lives(folders: list[Path], engine: str, allocator: str) -> list[float]:
    """Every measured life's share given back (points) of `allocator` on `engine` in `folders`."""
    out = []
    for folder in folders:
        with open(folder / "runs.csv", newline="") as f:
            for r in csv.DictReader(f):
                if (r["engine"], r["allocator"], r["purpose"], r["status"]) == (engine, allocator, "measure", "ok") \
                        and r["given_back_share"]:
                    out.append(100 * float(r["given_back_share"]))
    return out


def decided_share(var: list[float], base: list[float], rounds: int, before: int, after: int, margin: float,
                  studies: int, rng: random.Random) -> float:
    level = 1 - look_alpha(4, OVERALL_ALPHA)
    decided = 0
    for _ in range(studies):
        d = []
        for r in range(1, rounds + 1):
            k = before if r <= FIRST_LOOK else after
            d.append(sum(rng.choice(var) for _ in range(k)) / k - sum(rng.choice(base) for _ in range(k)) / k)
        _, lo, hi = stats.signed_rank_interval(d, level)
        decided += lo > 0 or hi < 0 or (lo > -margin and hi < margin)
    return decided / studies


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--engine", default="rocksdb")
    ap.add_argument("--baseline", default="glibc")
    ap.add_argument("--variant", default="glibc+MALLOC_ARENA_MAX=2")
    ap.add_argument("--margin", type=float, default=10.0, help="points (quick's bar: 10)")
    ap.add_argument("--designs", default="15:1/2,14:2/4",
                    help="rounds:lives a round before the first look/after it, comma-separated")
    ap.add_argument("--studies", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    var, base = lives(a.folders, a.engine, a.variant), lives(a.folders, a.engine, a.baseline)
    if len(var) < 10 or len(base) < 10:
        print(f"life_redraw: too few lives to redraw ({a.variant}: {len(var)}, {a.baseline}: {len(base)}); "
              "give study folders of a memory-life preset", file=sys.stderr)
        return 2
    print(f"{a.variant} − {a.baseline}, share given back on {a.engine}: {len(var)} and {len(base)} lives "
          f"from {len(a.folders)} folder(s); decided at the last look (±{a.margin:g} points), "
          f"{a.studies} redrawn studies each")
    rng = random.Random(a.seed)
    for design in a.designs.split(","):
        rounds, _, ks = design.partition(":")
        before, _, after = ks.partition("/")
        got = decided_share(var, base, int(rounds), int(before), int(after or before), a.margin, a.studies, rng)
        print(f"  {rounds} rounds, lives of each a round {before} (after round {FIRST_LOOK}: {after or before}): "
              f"decided in {100 * got:.0f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
