"""The host's drift within a round of turns, read from the turns themselves. In turns, each run
of a round measures slices of its window in a shuffled order, so a slow second of the host falls
on all of them alike on average; but within a round the host's speed still moves from turn to
turn (consecutive turns of different runs correlate at about 0.8 on the development machine),
and which allocator's turns met the slow ones is luck that turns leave in the round's ratios.

Each turn's log throughput is modelled as its run's level plus the host's speed at that place in
the round's sequence of turns, a piecewise-linear function of the place with a knot every `knot`
places, plus noise; the runs' levels and the function are fitted together by least squares (a
two-way fixed-effects model, the runs one factor and the host's speed the other). A run's level
against its own mean log turn says how much the host's drift moved it: its `drift factor`
(adjusted throughput = throughput × factor). The levels' differences are the run's ratios with
the drift between their turns removed; every run of the round enters the host's speed, none is
left out, and no run's level leaks into another's (its own indicator absorbs it).

Recorded, not compared: over the default study's rounds on the development machine the ratios
with the drift taken out spread as much as the measured ones (docs/results.md), so verdicts
compare throughput as measured; the factor stays in runs.csv for the estimand bench
(bench/estimand.py) and for a reader who asks how much the host moved a run.

Pure: a round's turns in, each run's factor out (study.local stores it as runs.csv's
drift_factor)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

MIN_TURNS = 4  # fewer turns a run than this: no factor (a line through the host's speed needs them)
# a design nearly without a solution (a run whose turns fall where few others ran) gives factors
# far from 1 that no drift measured: such a round gets none
MAX_CONDITION = 1e3


def factors(turns: Mapping[str, tuple[Sequence[int], Sequence[float]]], knot: int) -> dict[str, float]:
    """run -> its drift factor, from each run's (places, log throughputs) of one round's turns.
    {} where the round cannot be fitted: fewer than two runs, a run with fewer than MIN_TURNS
    turns, places and values of different lengths, or a design the least squares cannot solve
    or solves only nearly (its condition number over MAX_CONDITION)."""
    runs = sorted(turns)
    if len(runs) < 2 or knot < 1:
        return {}
    for r in runs:
        places, logs = turns[r]
        if len(places) != len(logs) or len(places) < MIN_TURNS or not all(math.isfinite(x) for x in logs):
            return {}
    place = np.concatenate([np.asarray(turns[r][0], float) for r in runs])
    y = np.concatenate([np.asarray(turns[r][1], float) for r in runs])
    which = np.concatenate([np.full(len(turns[r][0]), i) for i, r in enumerate(runs)])
    lo, hi = float(place.min()), float(place.max())
    knots = np.arange(lo, hi + knot, knot, dtype=float)
    hats = np.clip(1 - np.abs(place[:, None] - knots[None, :]) / knot, 0, None)
    levels = (which[:, None] == np.arange(len(runs))[None, :]).astype(float)
    x = np.hstack([levels, hats[:, 1:]])  # the first hat is the runs' levels' own (one level per run)
    if np.linalg.matrix_rank(x) < x.shape[1] or np.linalg.cond(x) > MAX_CONDITION:
        return {}
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    fitted_host = hats[:, 1:] @ beta[len(runs):]
    out = {}
    for i, r in enumerate(runs):
        mine = which == i
        # the run's level is its mean log turn less the host's speed over its own turns (the
        # hats' mean at its places): the factor is what the drift took from it, or gave it,
        # measured against the round's host speed on average
        own = float(fitted_host[mine].mean())
        out[r] = math.exp(float(fitted_host.mean()) - own)
    return out
