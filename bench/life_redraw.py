#!/usr/bin/env python3
"""How often would a study decide one comparison of a share given back? Redrawn from stored lives
(not a test): each allocator's lives of a cell, pooled over the given study folders, are drawn
with replacement into simulated studies of R rounds, each round's value of an allocator the mean
of its k lives there (k before the first look, k' after it, as decided allocators' places go to
the open ones), and the comparison is judged at the last look by alloclab's own rule
(decide.ratio_verdict: the median of the rounds' differences with the signed-rank interval at the
per-look level of the looks such a study plans, decided when it excludes 0 or lies within the
margin).

This is what moved memory-life quick to two RocksDB lives of each allocator a round
(`runs_per_round`): two arenas − glibc given back on RocksDB was the one comparison left open in 3
of 8 quick studies of one life a round.

    .venv/bin/python bench/life_redraw.py /root/alloclab-results/ml-quick-h{1,2,3} \
        [--engine rocksdb] [--variant glibc+MALLOC_ARENA_MAX=2] [--designs 15:1/2,14:2/4]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from alloclab.answers import decide, metrics  # noqa: E402
from alloclab.plan.design import FIRST_LOOK, UNDECIDED, Design, plan_looks  # noqa: E402
from alloclab.results.store import Store  # noqa: E402
from alloclab.workloads.life_runs import GIVEN_BACK  # noqa: E402


def lives(folders: list[Path], engine: str, allocator: str) -> list[float]:
    """Every valid measured life's share given back (0-1) of `allocator` on `engine` in `folders`."""
    return [v for folder in folders for r in Store(folder).rows()
            if (r.engine, r.allocator, r.purpose, r.status) == (engine, allocator, "measure", "ok")
            and r.allocator_verified and (v := metrics.value(r, GIVEN_BACK)) is not None]


def decided_share(var: list[float], base: list[float], rounds: int, before: int, after: int, margin: float,
                  studies: int, rng: random.Random) -> float:
    """The share of `studies` redrawn studies whose comparison alloclab's one rule
    (decide.ratio_verdict, at the level of the looks a study of `rounds` plans) decides."""
    policy = Design(looks=plan_looks(rounds), margins=(("given_back", margin / 100),))
    decided = 0
    for _ in range(studies):
        b, v = {}, {}
        for r in range(1, rounds + 1):
            k = before if r <= FIRST_LOOK else after
            b[r] = sum(rng.choice(base) for _ in range(k)) / k
            v[r] = sum(rng.choice(var) for _ in range(k)) / k
        decided += decide.ratio_verdict(b, v, True, policy, GIVEN_BACK)[1] != UNDECIDED
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
