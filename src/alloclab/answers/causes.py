"""Whose speed moves with the host's state: each allocator's own speed (log throughput per round
against its median) against the state, per cell (`own_slopes`). Many comparisons that all depend
on the host may be one fact about the baseline: where the variants' slopes are alike and the
baseline's differs from them all (`cause_of`; about 0 in the plainest case), the dependence is the
baseline's, said once. Also what the answers and the forest plot show of dependence: a
comparison's finding (`for_verdict`), its marks (`marks`) and the one short table (`table`).
Pure: rows and findings in, data out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as _scipy_stats

from alloclab.answers import decide
from alloclab.answers.dependence import (
    BUSY,
    SPEED,
    Finding,
    RatioAtState,
    Slope,
    round_states,
    rows_by_cell,
    slope,
    t_quantile,
    valid_rows,
)
from alloclab.answers.metrics import THROUGHPUT
from alloclab.results.store import RunRow

# Where a cell's dependence lies (OwnSlopes.cause): in the baseline alone (one fact, said once)
# or in each comparison (said per comparison).
BASELINE, PER_COMPARISON = "baseline", "per comparison"

# The marks of a comparison (marks()): the renderer picks their glyphs.
MARK_DEPENDS, MARK_BASELINES, MARK_DRIFTED = "depends", "the baseline's", "drifted"


# --- is it one fact? each allocator's own speed against the host's state -------------------

@dataclass(frozen=True)
class OwnSlopes:
    """One cell: each allocator's own speed (log throughput per round against its own median)
    against the host's state, and where the comparisons' dependence lies (cause_of)."""

    cell: tuple
    cell_key: str
    baseline: str
    state: str  # SPEED (each run's: the round's other runs, itself left out) or BUSY (its own)
    slopes: dict[str, Slope | None]  # allocator -> its own slope (None: too few rounds)
    pooled: Slope | None  # the variants' slopes pooled (inverse variance), what they share
    q: float | None  # Cochran's Q of the variants' slopes about the pooled one, and its p-value
    p: float | None
    difference: Slope | None  # pooled variants' slope − the baseline's
    cause: str  # BASELINE: one fact, said once; PER_COMPARISON: said per comparison

    @property
    def one_fact(self) -> bool:
        return self.cause == BASELINE

    @property
    def baseline_flat(self) -> bool:
        """The baseline's own slope's interval holds 0: its speed does not move with the state."""
        b = self.slopes.get(self.baseline)
        return b is not None and b.flat


def pool(slopes: Sequence[Slope], confidence: float = 0.95) -> tuple[Slope | None, float | None, float | None]:
    """Slopes of the same state pooled with inverse-variance weights (fixed effect): the pooled
    slope with its t interval (degrees of freedom: the slopes' own, summed), Cochran's Q of the
    slopes about it and Q's p-value (k − 1 degrees of freedom; the slopes share rounds, so Q is
    approximate). None where no slope has a standard error above 0."""
    have = [s for s in slopes if s.se and s.se > 0]
    if not have:
        return None, None, None
    w = [1 / s.se ** 2 for s in have]
    b = sum(wi * s.slope for wi, s in zip(w, have)) / sum(w)
    se = 1 / math.sqrt(sum(w))
    df = sum(s.df for s in have) or 1
    half = t_quantile(confidence, df) * se
    pooled = Slope(b, b - half, b + half, sum(s.n for s in have), have[0].state, se, df)
    if len(have) < 2:
        return pooled, None, None
    q = sum(wi * (s.slope - b) ** 2 for wi, s in zip(w, have))
    return pooled, q, float(_scipy_stats.chi2.sf(q, len(have) - 1))


def difference(a: Slope, b: Slope, confidence: float = 0.95) -> Slope | None:
    """a's slope − b's with Welch's interval (Satterthwaite's degrees of freedom)."""
    if not (a.se and b.se and a.df and b.df):
        return None
    se = math.hypot(a.se, b.se)
    df = se ** 4 / (a.se ** 4 / a.df + b.se ** 4 / b.df)
    half = t_quantile(confidence, df) * se
    d = a.slope - b.slope
    return Slope(d, d - half, d + half, min(a.n, b.n), a.state, se, max(1, int(df)))


def cause_of(base: Slope | None, variants: Sequence[Slope], alpha: float = 0.05) -> str:
    """Where a cell's dependence on the host's state lies. BASELINE, one fact ("the baseline's
    speed moves less (or more) with the host's state than every other allocator's"), when all of:
    at least two variants have a slope; their slopes are alike (Cochran's Q does not reject at
    `alpha`); their pooled slope differs from the baseline's (the interval of the difference
    excludes 0); and every variant's slope lies on the same side of the baseline's. Then every
    comparison's ratio moves with the state by about the same amount, for one reason. Else
    PER_COMPARISON. The baseline's own slope need not be about 0 (OwnSlopes.baseline_flat says
    whether it is): on the other runs' speed every allocator's own slope is near 1, since the
    state is made of their speeds. Q has little power with few variants: "alike" means "not
    shown to differ"."""
    vs = [v for v in variants if v is not None]
    if base is None or len(vs) < 2:
        return PER_COMPARISON
    pooled, _q, p = pool(vs, 1 - alpha)
    if pooled is None or p is None or p < alpha:
        return PER_COMPARISON
    d = difference(pooled, base, 1 - alpha)
    if d is None or not d.depends:
        return PER_COMPARISON
    side = [v.slope > base.slope for v in vs]
    return BASELINE if all(side) or not any(side) else PER_COMPARISON


def own_slopes(rows: list[RunRow], baseline: str, confidence: float = 0.95) -> list[OwnSlopes]:
    """Per cell with the baseline and at least one other allocator: each allocator's own log
    throughput per round (against its own median) regressed on the host's state of its rounds.
    The state, one kind per cell: SPEED, each run's round's other runs (every cell's, the run
    itself left out), where every run of the cell has another run in its round; else BUSY, the
    run's own other_busy_cores."""
    valid = valid_rows(rows)
    states = round_states(valid)
    out = []
    by = rows_by_cell(valid)
    for cell in sorted(by, key=lambda c: [str(x) for x in c]):
        allocs = by[cell]
        if baseline not in allocs or len(allocs) < 2:
            continue
        xs: dict[str, list[tuple[float | None, float, float]]] = {}
        for a, runs in allocs.items():
            xs[a] = []
            for k, r in sorted(runs.items()):
                own = states.get(k, {}).get((r.cell, r.allocator, r.run_id))
                if own is None:
                    continue
                # its round's other runs: not its own unit's (their more runs, in_their_places)
                others = [x for (c, a, _), x in states[k].items() if (c, a) != (r.cell, r.allocator)]
                xs[a].append((float(np.mean(others)) if others else None, r.other_busy_cores, own))
        speed = all(x is not None for pts in xs.values() for x, _b, _y in pts)
        state = SPEED if speed else BUSY
        slopes = {a: slope([y for _x, _b, y in pts], [x if speed else b for x, b, _y in pts], state, confidence)
                  for a, pts in sorted(xs.items())}
        variants = [s for a, s in slopes.items() if a != baseline and s is not None]
        pooled, q, p = pool(variants, confidence)
        base = slopes[baseline]
        diff = difference(pooled, base, confidence) if pooled is not None and base is not None else None
        key = next(iter(allocs[baseline].values())).cell
        out.append(OwnSlopes(cell, key, baseline, state, slopes, pooled, q, p, diff,
                             cause_of(base, variants, 1 - confidence)))
    return out


# --- for the answers and the forest plot -------------------------------------------------

def for_verdict(found: Sequence[Finding], v: decide.Verdict) -> Finding | None:
    """The finding of a verdict's comparison (allocators, on throughput), None where there is
    none: how a forest plot's row finds its dependence."""
    if v.comparison != "allocators" or v.metric != THROUGHPUT.name:
        return None
    return next((f for f in found if f.cell_key == v.var_unit[0] and f.variant == v.var_unit[1]
                 and f.baseline == v.base_unit[1]), None)


def marks(f: Finding | None, own: Sequence[OwnSlopes] = ()) -> tuple[str, ...]:
    """A comparison's marks for its forest plot row: MARK_DEPENDS where its ratio depends on the
    host's state, MARK_BASELINES beside it where that is its cell's baseline's one fact,
    MARK_DRIFTED where it drifted between the halves. Empty where there is nothing to mark."""
    if f is None:
        return ()
    out: tuple[str, ...] = ()
    if f.depends:
        out += (MARK_DEPENDS,)
        if any(o.one_fact and o.cell == f.cell and o.baseline == f.baseline for o in own):
            out += (MARK_BASELINES,)
    return out + ((MARK_DRIFTED,) if f.drifted else ())


@dataclass(frozen=True)
class DependenceLine:
    """One row of the short table of comparisons that depend on the host's state (or drifted)."""

    cell: tuple
    cell_key: str
    baseline: str
    variant: str
    state: str
    slope: Slope | None
    average: RatioAtState | None
    quiet: RatioAtState | None
    verdict_uses: str
    cause: str  # BASELINE or PER_COMPARISON
    drifted: bool


def table(found: Sequence[Finding], own: Sequence[OwnSlopes] = ()) -> list[DependenceLine]:
    """The comparisons that depend on the host's state or drifted, one line each, in the
    findings' order: the slope, the average and the quiet value, which the verdict uses, and
    whether the dependence is the cell's baseline's (one fact, said once above the table)."""
    out = []
    for f in found:
        if not (f.depends or f.drifted):
            continue
        cause = BASELINE if MARK_BASELINES in marks(f, own) else PER_COMPARISON
        out.append(DependenceLine(f.cell, f.cell_key, f.baseline, f.variant, f.slope.state if f.slope else "",
                                  f.slope, f.average, f.quiet, f.verdict_uses, cause, f.drifted))
    return out
