"""Does a ratio depend on the host's state? Turns cancel a slow second that falls on every
allocator alike; they cannot cancel an effect that exists only while the host is busy (an
allocator with the larger footprint losing more on a loaded machine). Per comparison:

- **state**: how fast the machine ran in each round, measured on the *other* runs of that round
  (the cell's other allocators, the other cells), each against its own median: never on the two
  runs compared, whose own noise would otherwise make a slope of nothing. Where a round has no
  other run, the other processes' busy share of the two runs (the noise account) is the state.
- **slope** of the paired log ratio on the state (least squares), its 95 % interval: where it
  excludes 0, the ratio depends on the host's state, and the answer gives the ratio in the
  slow and in the fast half of the rounds instead of one number that averages two regimes.
- **drift**: the ratio in the first and in the second half of the rounds, and their ratio of
  ratios (answers.replicate): where it excludes 1, the effect drifted during the study.

Calibrated by simulation (tests/test_verdicts.py): with no dependence, false alarms <= 5 %.
Pure: rows in, findings out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from scipy import stats as _scipy_stats

from alloclab.answers import decide, stats
from alloclab.answers.metrics import THROUGHPUT, value
from alloclab.answers.replicate import DIFFERS, RatioOfRatios, ratio_of_ratios
from alloclab.results.store import RunRow

MIN_ROUNDS = 6  # fewer rounds than this tell nothing about a slope


@dataclass(frozen=True)
class Slope:
    slope: float  # change of the log ratio per unit of state (state: log speed against its median)
    ci_low: float
    ci_high: float
    n: int
    state: str  # "speed of the other runs" or "busy share"

    @property
    def depends(self) -> bool:
        return self.ci_low > 0 or self.ci_high < 0


@dataclass(frozen=True)
class Finding:
    cell: tuple
    baseline: str
    variant: str
    slope: Slope | None
    slow: float | None  # the ratio (geometric mean) in the rounds slower than the median state, and faster
    fast: float | None
    points: tuple[tuple[float, float], ...]  # (state, ratio) per round, for the scatter
    drift: RatioOfRatios | None  # second half's ratio ÷ first half's
    halves: tuple[float | None, float | None] = (None, None)  # the ratio in the first and second half

    @property
    def drifted(self) -> bool:
        return self.drift is not None and self.drift.outcome == DIFFERS


def slope(y: list[float], x: list[float], state: str = "speed of the other runs",
          confidence: float = 0.95) -> Slope | None:
    """Least-squares slope of y on x with its t interval (n - 2 degrees of freedom)."""
    n = len(y)
    if n < MIN_ROUNDS:
        return None
    xa, ya = np.asarray(x, float), np.asarray(y, float)
    sxx = float(((xa - xa.mean()) ** 2).sum())
    if sxx <= 0:
        return None
    b = float(((xa - xa.mean()) * (ya - ya.mean())).sum() / sxx)
    resid = ya - ya.mean() - b * (xa - xa.mean())
    se = math.sqrt(float((resid ** 2).sum()) / (n - 2) / sxx)
    half = float(_scipy_stats.t.ppf(1 - (1 - confidence) / 2, n - 2)) * se
    return Slope(b, b - half, b + half, n, state)


def _states(rows: list[RunRow]) -> dict[tuple, dict[str, float]]:
    """round -> run_id -> its log speed against the median of its own cell and allocator."""
    logs: dict[tuple, list[tuple[RunRow, float]]] = defaultdict(list)
    for r in rows:
        v = value(r, THROUGHPUT)
        if v:
            logs[(decide.cell_of(r), r.allocator)].append((r, math.log(v)))
    out: dict[tuple, dict[str, float]] = defaultdict(dict)
    for runs in logs.values():
        med = float(np.median([x for _r, x in runs]))
        for r, x in runs:
            out[decide.pair_key(r)][r.run_id] = x - med
    return out


def findings(rows: list[RunRow], baseline: str, margin: float = 0.02) -> list[Finding]:
    """Every allocator comparison on throughput (each allocator against `baseline`, same cell)."""
    valid = [r for r in rows if r.status == "ok" and r.allocator_verified and r.purpose == "measure"]
    states = _states(valid)
    by: dict[tuple, dict[str, dict[tuple, RunRow]]] = defaultdict(lambda: defaultdict(dict))
    for r in sorted(valid, key=lambda r: r.index):
        by[decide.cell_of(r)][r.allocator].setdefault(decide.pair_key(r), r)
    out = []
    for cell in sorted(by, key=lambda c: [str(x) for x in c]):
        base = by[cell].get(baseline)
        for alloc in sorted(a for a in by[cell] if a != baseline):
            if base:
                out.append(_finding(cell, baseline, alloc, base, by[cell][alloc], states, margin))
    return out


def _finding(cell, baseline, alloc, base: dict, var: dict, states: dict, margin: float) -> Finding:
    pts, busy = [], []
    for k in sorted(set(base) & set(var)):
        b, v = value(base[k], THROUGHPUT), value(var[k], THROUGHPUT)
        if not (b and v):
            continue
        others = [x for rid, x in states.get(k, {}).items() if rid not in (base[k].run_id, var[k].run_id)]
        y = math.log(v / b)
        pts.append((float(np.mean(others)) if others else None, y))
        busy.append(((base[k].other_busy_cores + var[k].other_busy_cores) / 2, y))
    if pts and all(x is not None for x, _y in pts):
        use, state = pts, "speed of the other runs"
    else:
        use, state = busy, "busy share"
    s = slope([y for _x, y in use], [x for x, _y in use], state)
    slow = fast = None
    if s is not None:
        med = float(np.median([x for x, _y in use]))
        lo = [y for x, y in use if x < med]
        hi = [y for x, y in use if x > med]
        # slow rounds: the other runs slower (state below its median), or the host busier
        if state == "busy share":
            lo, hi = hi, lo
        slow = math.exp(float(np.mean(lo))) if lo else None
        fast = math.exp(float(np.mean(hi))) if hi else None
    drift, halves = _drift(base, var, margin)
    return Finding(cell, baseline, alloc, s, slow, fast, tuple((x, math.exp(y)) for x, y in use), drift, halves)


def _drift(base: dict, var: dict, margin: float) -> tuple[RatioOfRatios | None, tuple]:
    """The ratio of the second half of the rounds against the first half's, and the two ratios."""
    rounds = sorted(set(base) & set(var))
    if len(rounds) < MIN_ROUNDS:
        return None, (None, None)
    half = len(rounds) // 2
    halves = []
    for ks in (rounds[:half], rounds[half:]):
        b = {k: value(base[k], THROUGHPUT) for k in ks}
        v = {k: value(var[k], THROUGHPUT) for k in ks}
        halves.append(stats.ratio_interval({k: x for k, x in b.items() if x}, {k: x for k, x in v.items() if x}))
    return ratio_of_ratios(halves[0], halves[1], margin), (halves[0].ratio, halves[1].ratio)
