#!/usr/bin/env python3
"""Would a throughput interval on its cell's spread decide memory-life's speed sooner, and keep
its 95 %? Read from stored rounds and simulated; nothing measured (not a test).

A cell's allocators run in the same rounds, so a round is a block and the allocators its
treatments (a randomized complete block design, Montgomery's "Design and Analysis of
Experiments", ch. 4): the log throughputs fit round + allocator, the residual variance s² rests on
(R − 1)(A − 1) degrees of freedom where a pair's own paired t rests on R − 1, and a paired
difference has variance 2 s². The cell's rule: the larger of √2 s and the pair's own spread, on
the cell's degrees of freedom. One spread fits only allocators that spread alike, so two guards,
each at a level (`--levels`: the percentile of its statistic where all spread alike): an allocator
whose pair with the baseline has an F ratio (its variance over 2 s²) beyond it is left out of the
fit, again until none is, and keeps its own interval; a baseline whose pairs' variances, averaged,
exceed 2 s² beyond it leaves the whole cell on its own (an outlying baseline run moves every ratio
of its round).

Three readings, each per guard level beside the pairs' own rule (what decide does):
  --studies   memory-life's stored steady loads (bench/data/memory-life): speed verdicts decided
              (a direction, or equivalent within ±5 %, one look at 95 %) after round k
  --simulate  six allocators, 5 rounds, runs spreading 2 %, allocators spreading alike and not:
              wrong directions for a true 0, and the share decided
  --coverage  the turns bench's rounds (bench/data/turns-bias) and the stored steady loads: draw 5
              rounds of a cell, and count how often each interval covers the mean ratio of the rounds
              not drawn ("expected": what an interval of the true spread would cover, 2Φ(1.96 /
              √(1 + k / held)) − 1, the held-out rounds having their own error)

    .venv/bin/python bench/block_spread.py [--studies] [--simulate] [--coverage] [--levels 0.9,0.75,0.6]
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from collections import defaultdict
from pathlib import Path
from statistics import NormalDist

import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import turns_bias  # noqa: E402

import alloclab.workloads  # noqa: E402,F401  (registers the workloads' own columns)
from alloclab.answers import analyse, decide, stats  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
BASE = "glibc"
MARGIN = 0.05


def fit(x: np.ndarray) -> tuple[float, float]:
    """rounds × allocators of log values, complete: (√2 s, (R − 1)(A − 1))."""
    n, a = x.shape
    res = x - x.mean(1, keepdims=True) - x.mean(0, keepdims=True) + x.mean()
    df = (n - 1) * (a - 1)
    return math.sqrt(2 * float((res ** 2).sum()) / df), float(df)


def excess(x: np.ndarray) -> np.ndarray:
    """(studies, rounds, allocators), the baseline first: the pairs' variances averaged, over 2 s²."""
    n, a = x.shape[1], x.shape[2]
    own = (x[:, :, 1:] - x[:, :, :1]).var(axis=1, ddof=1).mean(axis=1)
    res = x - x.mean(2, keepdims=True) - x.mean(1, keepdims=True) + x.mean((1, 2), keepdims=True)
    return own / (2 * (res ** 2).sum((1, 2)) / ((n - 1) * (a - 1)))


@functools.cache
def excess_limit(n: int, a: int, level: float) -> float:
    draws = np.random.default_rng(20261207).normal(size=(max(2000, 400_000 // (n * a)), n, a))
    return float(np.quantile(excess(draws), level))


def cell_rule(x: np.ndarray, level: float | None) -> list[tuple[float, float] | None]:
    """rounds × allocators (the baseline first): per variant, (SD, df) of its interval on the
    cell's spread, None for its own alone (level None: every pair its own)."""
    n, a = x.shape
    if level is None or a < 3 or excess(x[None])[0] > excess_limit(n, a, level):
        return [None] * (a - 1)
    own = (x[:, 1:] - x[:, :1]).std(axis=0, ddof=1)
    noisy: set[int] = set()
    while True:
        keep = [0] + [j for j in range(1, a) if j - 1 not in noisy]
        if len(keep) < 3:
            return [None] * (a - 1)
        sd, df = fit(x[:, keep])
        flagged = {j for j in range(a - 1) if (own[j] / sd) ** 2 > sps.f.ppf(level, n - 1, df)}
        if flagged <= noisy:
            return [None if j in noisy else (max(own[j], sd), df) for j in range(a - 1)]
        noisy |= flagged


def intervals(x: np.ndarray, level: float | None) -> list[tuple[float, float, float]]:
    """Per variant: (mean log ratio, low, high) at 95 %."""
    n = x.shape[0]
    d = x[:, 1:] - x[:, :1]
    out = []
    for j, got in enumerate(cell_rule(x, level)):
        sd, df = got if got else (float(d[:, j].std(ddof=1)), float(n - 1))
        half = sps.t.ppf(0.975, df) * sd / math.sqrt(n)
        m = float(d[:, j].mean())
        out.append((m, m - half, m + half))
    return out


def decided(x: np.ndarray, level: float | None) -> list[str]:
    return [stats.verdict_word(math.exp(lo), math.exp(hi), True, MARGIN) for _, lo, hi in intervals(x, level)]


def steady_loads(root: Path) -> dict[tuple[str, str], tuple[list[str], np.ndarray]]:
    """(study, engine) -> (allocators, baseline first; rounds × allocators of log throughput: a
    round's valid runs of one allocator averaged, as decide pairs them: decide.per_round)."""
    out = {}
    for study in sorted(p.parent for p in root.glob("*/runs.csv")):
        rows = [r for r in analyse.load(study).rows if r.part == "speed" and r.purpose == "measure"]
        groups = decide.per_round(rows, lambda r: r.ops_per_s if r.status == "ok" and r.allocator_verified else None)
        for cell, by in groups.items():
            names = sorted(by, key=lambda a: (a != BASE, a))
            keys = sorted(set.intersection(*(set(by[a]) for a in names)))
            out[(study.name, decide.cell_dict(cell)["engine"])] = (names, np.log([[by[a][k] for a in names]
                                                                                 for k in keys]))
    return out


def turns_bench(store: Path) -> dict[tuple[str, str, str], np.ndarray]:
    """(machine, cell, design) -> rounds × allocators (glibc first) of log throughput, every whole
    round of the store (turns_bias.read_store) whose runs of that design were all ok."""
    got: dict = defaultdict(list)
    for rec in turns_bias.read_store(store)[0]:
        for name, results in rec["results"].items():
            for res in results:
                runs = res.get("runs") or []
                if runs and all(r["status"] == "ok" and r.get("throughput") for r in runs):
                    got[(turns_bias.machine_key(rec)[:6], rec["cell"], name)].append(
                        {r["allocator"]: float(r["throughput"]) for r in runs})
    out = {}
    for key, rounds in got.items():
        names = sorted(set.intersection(*(set(r) for r in rounds)), key=lambda a: (a != BASE, a))
        if names[0] == BASE and len(names) >= 3:
            out[key] = np.log([[r[a] for a in names] for r in rounds])
    return out


def show_studies(levels: list[float | None]) -> None:
    print("Speed verdicts decided after round k (of 15 a study), own → cell's at each level:\n")
    loads = steady_loads(DATA / "memory-life")
    studies = sorted({s for s, _ in loads})
    print("| study | rule | " + " | ".join(f"after {k}" for k in range(3, 9)) + " |")
    print("|---|---|" + "---|" * 6)
    for s in studies:
        for level in levels:
            counts = []
            for k in range(3, 9):
                mine = [x[:k] for (st, _), (_, x) in loads.items() if st == s and len(x) >= k]
                counts.append(str(sum(w != "undecided" for x in mine for w in decided(x, level)))
                              if len(mine) == 3 else "–")
            print(f"| {s} | {'own' if level is None else f'cell, {level:g}'} | " + " | ".join(counts) + " |")


def show_simulation(levels: list[float | None], seeds: int = 1500) -> None:
    print("\nSimulated: six allocators, 5 rounds, runs spreading 2 % (× the factor each), true ratio 1; "
          "wrong directions (the worst pair) and share decided:\n")
    print("| allocators' spreads | " + " | ".join("own" if lv is None else f"cell, {lv:g}" for lv in levels) + " |")
    print("|---|" + "---|" * len(levels))
    for spreads in ((1, 1, 1, 1, 1, 1), (1, 1, 1, 1, 1, 2), (1, 1, 1, 1, 1, 3), (1.5, 1, 1, 1, 1, 1),
                    (3, 1, 1, 1, 1, 1)):
        rng = np.random.default_rng(int(10 * sum(spreads)))
        logs = (rng.normal(0, 0.05, (seeds, 5, 1)) + rng.normal(0, 1, (seeds, 5, 6)) * 0.02 * np.array(spreads))
        cells = []
        for level in levels:
            w = np.array([decided(x, level) for x in logs])
            wrong = np.isin(w, ["faster", "slower"]).mean(axis=0).max()
            cells.append(f"{wrong:.1%} wrong, {(w != 'undecided').mean():.0%} decided")
        print(f"| {' '.join(f'{s:g}' for s in spreads)} | " + " | ".join(cells) + " |")


def show_coverage(levels: list[float | None], draws: int = 300, k: int = 5) -> None:
    print(f"\nCoverage of the held-out rounds' ratio, {k} rounds drawn, {draws} draws a cell:\n")
    every = {**turns_bench(DATA / "turns-bias"),
             **{(s, e, "speed"): x for (s, e), (_, x) in steady_loads(DATA / "memory-life").items()}}
    rng = np.random.default_rng(1)
    print("| store | cell | design | rounds | expected | " + " | ".join(
        "own" if lv is None else f"cell, {lv:g}" for lv in levels) + " |")
    print("|---|---|---|---|---|" + "---|" * len(levels))
    total = np.zeros((len(levels), 3))
    for key, x in sorted(every.items()):
        if len(x) < (20 if key[2] != "speed" else 12):
            continue
        got = np.zeros((len(levels), 3))
        for _ in range(draws):
            idx = rng.permutation(len(x))
            truth = (x[idx[k:], 1:] - x[idx[k:], :1]).mean(axis=0)
            for i, level in enumerate(levels):
                for (_, lo, hi), t in zip(intervals(x[idx[:k]], level), truth):
                    got[i] += (lo <= t <= hi, (hi - lo) / 2, 1)
        total += got
        expected = 2 * NormalDist().cdf(1.96 / math.sqrt(1 + k / (len(x) - k))) - 1
        print(f"| {key[0]} | {key[1]} | {key[2]} | {len(x)} | {expected:.1%} | " + " | ".join(
            f"{c / n:.1%} ±{100 * h / n:.2f} %" for c, h, n in got) + " |")
    print("| all | | | | | " + " | ".join(f"{c / n:.1%} ±{100 * h / n:.2f} %" for c, h, n in total) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--studies", action="store_true")
    ap.add_argument("--simulate", action="store_true")
    ap.add_argument("--coverage", action="store_true")
    ap.add_argument("--levels", default="0.9,0.75,0.6", help="guard levels, comma-separated")
    a = ap.parse_args()
    levels: list[float | None] = [None] + [float(v) for v in a.levels.split(",")]
    every = not (a.studies or a.simulate or a.coverage)
    if a.studies or every:
        show_studies(levels)
    if a.simulate or every:
        show_simulation(levels)
    if a.coverage or every:
        show_coverage(levels)


if __name__ == "__main__":
    main()
