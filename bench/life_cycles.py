#!/usr/bin/env python3
"""Would longer lives decide creep sooner than more of them? (not a test) A forecast from stored
studies' lives: how much of the spread of each allocator's creep against glibc's is the slope's own
noise within a life (its settled readings about their line), which more cycles shrink, and how
many rounds its comparison would then need.

A life's creep is the OLS slope of its settled RSS over its warm cycles; its interval (runs.csv
creep_ci_*) gives the slope's standard error within the life, SE = half ÷ t(n − 2). Where the
readings scatter about their line independently, SE scales with 1 ÷ sqrt(Sxx) (Sxx: the warm
cycles' sum of squares about their mean, 28 for 7 of them, 110 for 11), while what differs from
life to life for other reasons does not shrink. Per round (the lives of a round averaged, the
difference to glibc's), the spread read from the rounds is split into the two parts, the first
scaled to C cycles (the table gives each SD a round), and the rounds to decide counted as the study
counts them (answers.stats.rounds_to_decide: the fewest rounds, at least 3, whose t interval of the
mean difference excludes 0 or lies within ±margin). A life of C cycles takes up to C ÷ now as
long. A forecast, not a measurement: it takes a creep to go on at its rate, and PostgreSQL's pools
level off (docs/results.md, "Longer pool lives, measured": at 12 cycles their differences to glibc
shrank toward 0 and spread more than forecast), so a study of lives that long is what answers it.

    .venv/bin/python bench/life_cycles.py RESULTS [RESULTS ...] [--engine postgres] [--cycles 12,16]
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from alloclab.answers import stats as answers_stats  # noqa: E402


def sxx(n: int) -> float:
    """The sum of squares of n consecutive cycle numbers about their mean."""
    return n * (n * n - 1) / 12


def lives(folder: Path, engine: str) -> dict[str, dict[int, list[tuple[float, float, int]]]]:
    """allocator -> round -> [(creep, its SE within the life, warm cycles)] of a stored study's lives."""
    out: dict[str, dict[int, list]] = defaultdict(lambda: defaultdict(list))
    with open(folder / "runs.csv", newline="") as f:
        for r in csv.DictReader(f):
            if (r["part"] != "life" or r["engine"] != engine or r["status"] != "ok"
                    or not r["creep_ci_low_mib_per_cycle"]):
                continue
            warm = int(r["life_cycles"]) - 1  # creep is read from cycle 2 on (answers.life.warm)
            half = (float(r["creep_ci_high_mib_per_cycle"]) - float(r["creep_ci_low_mib_per_cycle"])) / 2
            se = half / float(stats.t.ppf(0.975, warm - 2))
            out[r["allocator"]][int(r["repeat"])].append((float(r["creep_mib_per_cycle"]), se, warm))
    return out


def within(var: dict, base: dict, paired: list[int], cycles: int | None) -> float:
    """The slopes' own variance in a round's difference (the lives of a round averaged, the
    variant's and the baseline's added), at `cycles` a life (None: each life's own), averaged over
    the paired rounds."""
    def part(lives_k: list[tuple[float, float, int]]) -> float:
        return sum(se * se * (1 if cycles is None else sxx(w) / sxx(cycles - 1)) for _, se, w in lives_k) \
            / len(lives_k) ** 2
    return statistics.fmean(part(var[k]) + part(base[k]) for k in paired)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", type=Path)
    ap.add_argument("--engine", default="postgres")
    ap.add_argument("--baseline", default="glibc")
    ap.add_argument("--margin", type=float, default=1.0, help="MiB a cycle (memory-life quick's)")
    ap.add_argument("--cycles", default="12,16", help="lives' cycles to forecast, besides the stored")
    a = ap.parse_args()
    for folder in a.results:
        by = lives(folder, a.engine)
        base = by.get(a.baseline)
        if not base:
            raise SystemExit(f"{folder}: no {a.engine} lives of {a.baseline} with a creep interval")
        targets = [None] + [int(c) for c in a.cycles.split(",") if c]  # None: each life's own cycles
        print(f"\n{folder} ({a.engine}, margin ±{a.margin} MiB/cycle)")
        print("| allocator | rounds | difference | spread a round | of it within lives | rounds as stored | "
              + " | ".join(f"rounds at {c} cycles" for c in targets[1:]) + " |")
        print("|---" * (5 + len(targets)) + "|")
        for alloc, var in sorted(by.items()):
            if alloc == a.baseline:
                continue
            paired = sorted(set(var) & set(base))
            if len(paired) < 3:
                continue
            diffs = [statistics.fmean(x for x, _, _ in var[k]) - statistics.fmean(x for x, _, _ in base[k])
                     for k in paired]
            mean, sd = statistics.fmean(diffs), statistics.stdev(diffs)

            own = within(var, base, paired, None)
            rest = max(sd * sd - own, 0.0)
            cells = []
            for c in targets:
                sd_c = math.sqrt(rest + within(var, base, paired, c))
                # the study's own count (answers.decide: a difference's margin passed as expm1)
                n = answers_stats.rounds_to_decide(mean, sd_c, 0, confidence=0.95, margin=math.expm1(a.margin),
                                                   limit=200)
                cells.append(f"{n} (SD {sd_c:.2f})" if n < 200 else f"over 200 (SD {sd_c:.2f})")
            name = alloc if len(alloc) <= 24 else alloc[:21] + "…"
            print(f"| {name} | {len(paired)} | {mean:+.2f} | {sd:.2f} | {min(own / (sd * sd), 9.99):.0%} | "
                  + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
