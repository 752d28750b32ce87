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
- **quiet**: where the slope excludes 0, the ratio at the quiet state: the least-squares line's
  value at the state of the quietest tenth of the rounds (`quiet_state_value`: the 90th
  percentile of the other runs' speed, or the 10th percentile of the busy share), with its
  interval (95 % unless asked; the mean of the line at x0: se = s·√(1/n + (x0 − x̄)²/Sxx), t with
  n − 2 degrees of freedom), beside the **average** over the study (the paired geometric mean,
  decide's ratio, at the same confidence). The verdict keeps the average (`VERDICT_USES`, said
  on every finding): see there why.
- **own slopes** (answers.causes): whether many comparisons that depend on the host are one fact
  about the baseline.

Calibrated by simulation (tests/test_verdicts.py): with no dependence, false alarms <= 5 %.
Pure: rows in, findings out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as _scipy_stats

from alloclab.answers import decide, stats
from alloclab.answers.metrics import THROUGHPUT, value
from alloclab.answers.replicate import DIFFERS, RatioOfRatios, ratio_of_ratios
from alloclab.core.errors import AlloclabError
from alloclab.results.store import RunRow

MIN_ROUNDS = 6  # fewer rounds than this tell nothing about a slope

# The host's state of a round, as a finding measures it (Slope.state).
SPEED = "speed of the other runs"  # log speed against the runs' own medians: higher is quieter
BUSY = "busy share"  # cores' worth of CPU other processes used during the runs: lower is quieter
STATES = (SPEED, BUSY)

QUIET_SHARE = 0.10  # the quiet state: the edge of the quietest tenth of the rounds

AVERAGE, QUIET = "average", "quiet"
# Which ratio a verdict rests on where the ratio depends on the host's state: the average over
# the study. Its error is the one the study's looks control (Pocock's levels, calibrated by
# simulation in tests/test_verdicts.py) and the stopping rule decided on it. The value at the
# quiet state is a conditional estimate at a state picked from the same rounds, at the edge of
# the states seen, with a wider interval; and the slope test that gates it runs once per
# comparison at 5 % (12 comparisons in the shootout): a verdict that switched its estimand on
# that test would inherit the test's false alarms and no longer be the rule the study stopped
# on. The quiet value is given beside it, for the reader whose server has its host to itself.
VERDICT_USES = AVERAGE



@dataclass(frozen=True)
class Slope:
    slope: float  # change of the log ratio per unit of state (state: log speed against its median)
    ci_low: float
    ci_high: float
    n: int
    state: str  # SPEED or BUSY
    se: float | None = None  # the slope's standard error, and the degrees of freedom of its t
    df: int = 0

    @property
    def depends(self) -> bool:
        return self.ci_low > 0 or self.ci_high < 0

    @property
    def flat(self) -> bool:
        """Its interval holds 0: no dependence shown."""
        return not self.depends


@dataclass(frozen=True)
class RatioAtState:
    """The ratio variant ÷ baseline at one state of the host, with its interval: AVERAGE, the
    paired geometric mean over the study's rounds (at their mean state); QUIET, the least-squares
    line's value at the quiet state (quiet_state_value). Carries mean_log, se_log and df, so
    that answers.replicate.ratio_of_ratios compares two of them as it compares two verdicts."""

    at: str  # AVERAGE or QUIET
    ratio: float
    ci_low: float
    ci_high: float
    state: str  # SPEED or BUSY
    state_value: float  # the state it is read at (in the state's unit)
    n: int  # the rounds it rests on
    mean_log: float
    se_log: float
    df: int  # of its t: n - 1 for the average, n - 2 for the line's value
    confidence: float

    @property
    def delta_pct(self) -> float:
        return (self.ratio - 1) * 100


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
    cell_key: str = ""  # runs.csv's `cell`, as decide.Verdict.var_unit[0] holds it
    average: RatioAtState | None = None  # over the study (the paired geometric mean), at findings' confidence
    quiet: RatioAtState | None = None  # at the quiet state, where the ratio depends on the state
    verdict_uses: str = VERDICT_USES  # AVERAGE: which of the two the verdict rests on

    @property
    def drifted(self) -> bool:
        return self.drift is not None and self.drift.outcome == DIFFERS

    @property
    def depends(self) -> bool:
        return self.slope is not None and self.slope.depends


@dataclass(frozen=True)
class _Line:
    """A least-squares line of y on x and what its intervals need."""

    n: int
    x_mean: float
    y_mean: float
    slope: float
    s: float  # residual standard deviation (n - 2 degrees of freedom)
    sxx: float

    def at(self, x0: float) -> tuple[float, float]:
        """The line's value at x0 and the standard error of that mean."""
        return (self.y_mean + self.slope * (x0 - self.x_mean),
                self.s * math.sqrt(1 / self.n + (x0 - self.x_mean) ** 2 / self.sxx))


def t_quantile(confidence: float, df: float) -> float:
    return float(_scipy_stats.t.ppf(1 - (1 - confidence) / 2, df))


def _check(y: Sequence[float], x: Sequence[float], confidence: float) -> None:
    if len(y) != len(x):
        raise AlloclabError(f"a line needs one state per ratio: {len(y)} ratio(s), {len(x)} state(s)",
                            "pass the rounds' log ratios and their states in the same order")
    if not 0 < confidence < 1:
        raise AlloclabError(f"confidence must be between 0 and 1, got {confidence!r}")


def _fit(y: Sequence[float], x: Sequence[float]) -> _Line | None:
    """The least-squares line of y on x; None below MIN_ROUNDS points or where x does not vary."""
    n = len(y)
    if n < MIN_ROUNDS:
        return None
    xa, ya = np.asarray(x, float), np.asarray(y, float)
    sxx = float(((xa - xa.mean()) ** 2).sum())
    if sxx <= 0:
        return None
    b = float(((xa - xa.mean()) * (ya - ya.mean())).sum() / sxx)
    resid = ya - ya.mean() - b * (xa - xa.mean())
    return _Line(n, float(xa.mean()), float(ya.mean()), b, math.sqrt(float((resid ** 2).sum()) / (n - 2)), sxx)


def slope(y: list[float], x: list[float], state: str = SPEED, confidence: float = 0.95) -> Slope | None:
    """Least-squares slope of y on x with its t interval (n - 2 degrees of freedom)."""
    _check(y, x, confidence)
    line = _fit(y, x)
    if line is None:
        return None
    se = line.s / math.sqrt(line.sxx)
    half = t_quantile(confidence, line.n - 2) * se
    return Slope(line.slope, line.slope - half, line.slope + half, line.n, state, se, line.n - 2)


def quiet_state_value(x: Sequence[float], state: str) -> float:
    """The quiet state of a set of rounds: the edge of their quietest tenth (QUIET_SHARE). For
    SPEED (the other runs' log speed against their medians, higher = quieter) the 90th percentile
    of the rounds' states; for BUSY (other processes' cores, lower = quieter) the 10th percentile.
    Linear interpolation between rounds (numpy's default), so always inside the states seen: the
    quiet value is never an extrapolation. SPEED is relative to the study's own medians: it is
    the quietest tenth of this study's rounds, not an idle machine."""
    if state not in STATES:
        raise AlloclabError(f"unknown host state {state!r}", f"one of: {', '.join(STATES)}")
    if len(x) == 0:
        raise AlloclabError("no rounds: a quiet state needs the states of some rounds")
    q = 1 - QUIET_SHARE if state == SPEED else QUIET_SHARE
    return float(np.quantile(np.asarray(x, float), q))


def ratio_at_state(y_log: Sequence[float], x: Sequence[float], x0: float, state: str = SPEED,
                   confidence: float = 0.95) -> RatioAtState | None:
    """The ratio at state x0 from the rounds' log ratios y_log and their states x: the least-
    squares line's value there, exp(ŷ(x0)), with the t interval of the line's mean at x0,
    se = s·√(1/n + (x0 − x̄)²/Sxx) on n − 2 degrees of freedom. None below MIN_ROUNDS rounds or
    where the state does not vary."""
    _check(y_log, x, confidence)
    line = _fit(y_log, x)
    if line is None:
        return None
    m, se = line.at(x0)
    half = t_quantile(confidence, line.n - 2) * se
    return RatioAtState(QUIET, math.exp(m), math.exp(m - half), math.exp(m + half), state, float(x0), line.n, m, se,
                        line.n - 2, confidence)


def average_ratio(y_log: Sequence[float], x: Sequence[float], state: str = SPEED,
                  confidence: float = 0.95) -> RatioAtState | None:
    """The ratio over the study: the geometric mean of the rounds' ratios with the paired t
    interval (n − 1 degrees of freedom), as stats.ratio_interval makes it, read at the rounds'
    mean state. None below stats.MIN_RUNS rounds."""
    _check(y_log, x, confidence)
    n = len(y_log)
    if n < stats.MIN_RUNS:
        return None
    ya = np.asarray(y_log, float)
    m, se = float(ya.mean()), float(ya.std(ddof=1)) / math.sqrt(n)
    half = t_quantile(confidence, n - 1) * se
    return RatioAtState(AVERAGE, math.exp(m), math.exp(m - half), math.exp(m + half), state,
                        float(np.mean(np.asarray(x, float))), n, m, se, n - 1, confidence)


def adjusted_log_ratios(y_log: Sequence[float], x: Sequence[float], x0: float) -> list[float]:
    """Each round's log ratio moved along the least-squares line to the state x0: its residual
    plus the line's value at x0, y_i − b·(x_i − x0). Their mean is the line's value at x0; their
    spread is the residuals'. (A t interval on them alone misses the slope's own uncertainty:
    ratio_at_state has the interval.) The log ratios unchanged where there is no line."""
    _check(y_log, x, 0.95)
    line = _fit(y_log, x)
    if line is None:
        return [float(y) for y in y_log]
    return [float(y) - line.slope * (float(xi) - x0) for y, xi in zip(y_log, x)]


def at_quiet_state(f: Finding, confidence: float = 0.95) -> RatioAtState | None:
    """A finding's ratio at the quiet state of its rounds, whether or not its slope excludes 0
    (Finding.quiet holds it only where it does); None where the finding has no slope."""
    if f.slope is None:
        return None
    xs = [x for x, _r in f.points]
    ys = [math.log(r) for _x, r in f.points]
    return ratio_at_state(ys, xs, quiet_state_value(xs, f.slope.state), f.slope.state, confidence)


def round_states(rows: list[RunRow]) -> dict[tuple, dict[str, float]]:
    """round -> (cell, allocator, run_id) -> its log speed against the median of its own cell and
    allocator."""
    logs: dict[tuple, list[tuple[RunRow, float]]] = defaultdict(list)
    for r in rows:
        v = value(r, THROUGHPUT)
        if v:
            logs[(decide.cell_of(r), r.allocator)].append((r, math.log(v)))
    out: dict[tuple, dict[str, float]] = defaultdict(dict)
    for runs in logs.values():
        med = float(np.median([x for _r, x in runs]))
        for r, x in runs:
            out[decide.pair_key(r)][(r.cell, r.allocator, r.run_id)] = x - med
    return out


def valid_rows(rows: list[RunRow]) -> list[RunRow]:
    return [r for r in rows if r.status == "ok" and r.allocator_verified and r.purpose == "measure"]


def rows_by_cell(valid: list[RunRow]) -> dict[tuple, dict[str, dict[tuple, RunRow]]]:
    """cell -> allocator -> round -> its run (a round's first; decide takes the mean of a unit's
    runs in a round, decide.per_round)."""
    by: dict[tuple, dict[str, dict[tuple, RunRow]]] = defaultdict(lambda: defaultdict(dict))
    for r in sorted(valid, key=lambda r: r.index):
        by[decide.cell_of(r)][r.allocator].setdefault(decide.pair_key(r), r)
    return by


def findings(rows: list[RunRow], baseline: str, margin: float = 0.02, confidence: float = 0.95) -> list[Finding]:
    """Every allocator comparison on throughput (each allocator against `baseline`, same cell).
    `confidence`: of the average and the quiet value (the slope's interval stays at 95 %)."""
    valid = valid_rows(rows)
    states = round_states(valid)
    by = rows_by_cell(valid)
    out = []
    for cell in sorted(by, key=lambda c: [str(x) for x in c]):
        base = by[cell].get(baseline)
        for alloc in sorted(a for a in by[cell] if a != baseline):
            if base:
                out.append(_finding(cell, baseline, alloc, base, by[cell][alloc], states, margin, confidence))
    return out


def _finding(cell, baseline, alloc, base: dict, var: dict, states: dict, margin: float,
             confidence: float = 0.95) -> Finding:
    pts, busy = [], []
    for k in sorted(set(base) & set(var)):
        b, v = value(base[k], THROUGHPUT), value(var[k], THROUGHPUT)
        if not (b and v):
            continue
        # the others: every run of the round but the two units' (their more runs too, in_their_places)
        mine = {(base[k].cell, base[k].allocator), (var[k].cell, var[k].allocator)}
        others = [x for (c, a, _), x in states.get(k, {}).items() if (c, a) not in mine]
        y = math.log(v / b)
        pts.append((float(np.mean(others)) if others else None, y))
        busy.append(((base[k].other_busy_cores + var[k].other_busy_cores) / 2, y))
    if pts and all(x is not None for x, _y in pts):
        use, state = pts, SPEED
    else:
        use, state = busy, BUSY
    xs, ys = [x for x, _y in use], [y for _x, y in use]
    s = slope(ys, xs, state)
    slow = fast = quiet = None
    if s is not None:
        med = float(np.median(xs))
        lo = [y for x, y in use if x < med]
        hi = [y for x, y in use if x > med]
        # slow rounds: the other runs slower (state below its median), or the host busier
        if state == BUSY:
            lo, hi = hi, lo
        slow = math.exp(float(np.mean(lo))) if lo else None
        fast = math.exp(float(np.mean(hi))) if hi else None
        if s.depends:
            quiet = ratio_at_state(ys, xs, quiet_state_value(xs, state), state, confidence)
    drift, halves = _drift(base, var, margin)
    key = next(iter(base.values())).cell if base else ""
    return Finding(cell, baseline, alloc, s, slow, fast, tuple((x, math.exp(y)) for x, y in use), drift, halves,
                   cell_key=key, average=average_ratio(ys, xs, state, confidence) if use else None, quiet=quiet)


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
