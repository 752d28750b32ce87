"""The host's drift within a round of turns (answers.drift): a planted drift is taken out of the
runs' levels, a planted ratio moves by exactly itself, and a round that cannot be fitted gets no
factor (a study records each run's factor in runs.csv: tests/test_rounds.py)."""

import math
import random

import numpy as np
import pytest

from alloclab.answers import drift


def _round(levels: dict[str, float], rng: random.Random, turns: int = 12, noise: float = 0.01,
           swing: float = 0.3) -> dict[str, tuple[list[int], list[float]]]:
    """A round in turns as the interleaver gives them (a fresh order each cycle): each run's log
    level plus a host speed that wanders smoothly over the places, plus a little noise."""
    names = list(levels)
    n = turns * len(names)
    # a random walk smoothed over 9 places: consecutive turns correlate at about 0.8 or more, as
    # they did on the development machine
    walk = np.cumsum([rng.gauss(0, swing / 4) for _ in range(n + 8)])
    host = np.convolve(walk, np.ones(9) / 9, mode="valid")
    out: dict[str, tuple[list[int], list[float]]] = {a: ([], []) for a in names}
    place = 0
    for _ in range(turns):
        order = names[:]
        rng.shuffle(order)
        for a in order:
            out[a][0].append(place)
            out[a][1].append(levels[a] + float(host[place]) + rng.gauss(0, noise))
            place += 1
    return out


def _ratio(r: dict, a: str, b: str, f: dict | None = None) -> float:
    """a's mean log turn over b's, each moved by its factor (none: the raw ratio, as turns give it)."""
    f = f or {}
    return (np.mean(r[a][1]) + math.log(f.get(a, 1.0))) - (np.mean(r[b][1]) + math.log(f.get(b, 1.0)))


def test_a_planted_drift_is_taken_out_of_the_ratios():
    """Four runs, jemalloc planted 3 % faster than glibc, the host swinging by tens of percent
    over a round: over 200 rounds the adjusted ratio spreads several times less than the raw one,
    and both are centred on the planted 3 %."""
    rng = random.Random(7)
    levels = {"glibc": 13.0, "jemalloc": 13.0 + math.log(1.03), "mimalloc": 13.0, "tcmalloc": 12.9}
    raw, adj = [], []
    for _ in range(200):
        r = _round(levels, rng)
        f = drift.factors(r, knot=4)
        assert set(f) == set(levels)
        raw.append(_ratio(r, "jemalloc", "glibc"))
        adj.append(_ratio(r, "jemalloc", "glibc", f))
    assert np.std(adj) < np.std(raw) / 2, (np.std(adj), np.std(raw))
    for got in (raw, adj):
        assert abs(np.mean(got) - math.log(1.03)) < 3 * np.std(got) / math.sqrt(len(got)) + 0.002


def test_a_planted_ratio_moves_the_adjusted_ratio_by_exactly_itself():
    """The model is linear in each run's log throughput with a level per run: planting a ratio k on
    one run's every turn moves its adjusted ratio by log k and leaves the others' factors as they
    were (the coverage of planted ratios is the coverage of the estimate itself)."""
    rng = random.Random(3)
    r = _round({"glibc": 10.0, "jemalloc": 10.0, "mimalloc": 10.1}, rng)
    f = drift.factors(r, knot=3)
    planted = dict(r, jemalloc=(r["jemalloc"][0], [y + math.log(0.9) for y in r["jemalloc"][1]]))
    g = drift.factors(planted, knot=3)
    assert g == pytest.approx(f, rel=1e-9)
    assert _ratio(planted, "jemalloc", "glibc", g) - _ratio(r, "jemalloc", "glibc", f) == pytest.approx(math.log(0.9))


def test_no_drift_leaves_factors_near_one_and_a_round_that_cannot_be_fitted_gets_none():
    rng = random.Random(1)
    flat = _round({"glibc": 5.0, "jemalloc": 5.1}, rng, swing=0.0, noise=0.001)
    assert all(abs(x - 1) < 0.01 for x in drift.factors(flat, knot=2).values())
    assert drift.factors({"glibc": flat["glibc"]}, knot=2) == {}  # one run: nothing to compare
    short = {a: (p[:3], y[:3]) for a, (p, y) in flat.items()}
    assert drift.factors(short, knot=2) == {}  # fewer than MIN_TURNS turns a run
    bad = dict(flat, glibc=(flat["glibc"][0], flat["glibc"][1][:-1]))
    assert drift.factors(bad, knot=2) == {}  # places and values of different lengths
    # one run's turns all before the other's, a knot at every place: the host's speed and the runs'
    # levels cannot be told apart
    apart = {"glibc": ([0, 1, 2, 3], [1.0, 1.1, 1.2, 1.3]), "jemalloc": ([4, 5, 6, 7], [1.0, 1.1, 1.2, 1.3])}
    assert drift.factors(apart, knot=1) == {}
