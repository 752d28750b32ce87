"""An answer for a quiet host (issue 37, item 3): where a ratio depends on the host's state, the
ratio at the quiet state with its interval beside the average (stored rows with a planted slope);
none where nothing depends; and whether many dependences are one fact about the baseline (each
allocator's own speed against the state)."""

import math

import numpy as np
import pytest
from helpers import sim_row

from alloclab.answers import causes, decide, dependence, stats
from alloclab.core.errors import AlloclabError
from alloclab.plan.design import Design

NOISE = {"glibc": 0.02, "jemalloc": 0.03, "mimalloc": 0.02, "tcmalloc": 0.03}  # each allocator's own log sd


_row = sim_row


def _busy_rows(rng, rounds=12, beta=-0.15, base_log=0.0, sd=0.01):
    """glibc and jemalloc only (no other run: the busy share is the state), the busy share known
    exactly: log(jemalloc ÷ glibc) = base_log + beta · busy + noise. Returns rows and the busy shares."""
    busy = rng.uniform(0.0, 1.0, rounds)
    rows = []
    for r in range(rounds):
        g = 13 + rng.normal(0, sd)
        rows.append(_row(len(rows) + 1, "glibc", r + 1, math.exp(g), busy[r]))
        rows.append(_row(len(rows) + 1, "jemalloc", r + 1, math.exp(g + base_log + beta * busy[r] + rng.normal(0, sd)),
                         busy[r]))
    return rows, busy


def _host_rows(rng, rounds=16, move=None, host_sd=0.10, noise=None):
    """One cell, four allocators; the host's state h of a round moves allocator a's log speed by
    move[a] · h (1 where not given): a planted dependence of a's ratio on the state is
    move[a] − move[baseline]."""
    host = rng.normal(0, host_sd, rounds)
    rows = []
    for r in range(rounds):
        for a, sd in (noise or NOISE).items():
            x = 13.0 + host[r] * (move or {}).get(a, 1.0) + rng.normal(0, sd)
            rows.append(_row(len(rows) + 1, a, r + 1, math.exp(x)))
    return rows, host


def test_the_quiet_ratio_contains_the_planted_value_at_the_quiet_state():
    rows, busy = _busy_rows(np.random.default_rng(11), rounds=14, beta=-0.15, base_log=0.01)
    (f,) = dependence.findings(rows, "glibc")
    assert f.slope.state == dependence.BUSY and f.slope.depends and f.slope.slope < 0
    q = f.quiet
    assert q is not None and q.at == dependence.QUIET and q.state == dependence.BUSY
    assert q.state_value == pytest.approx(np.quantile(busy, 0.10))  # the quietest tenth: the least busy
    planted = math.exp(0.01 - 0.15 * q.state_value)
    assert q.ci_low < planted < q.ci_high, (q, planted)
    assert q.df == 12 and q.n == 14 and q.confidence == 0.95
    # beside it, the average over the study: decide's paired ratio (at 95 %), lower on a busy host
    iv = stats.ratio_interval({r.repeat: r.ops_per_s for r in rows if r.allocator == "glibc"},
                              {r.repeat: r.ops_per_s for r in rows if r.allocator == "jemalloc"})
    a = f.average
    assert a.at == dependence.AVERAGE and a.ratio == pytest.approx(iv.ratio)
    assert (a.ci_low, a.ci_high) == pytest.approx((iv.ci_low, iv.ci_high))
    assert a.ratio < q.ratio  # the quiet host loses less
    assert f.verdict_uses == dependence.AVERAGE


def test_the_quiet_interval_covers_the_planted_value_95_percent_of_the_time():
    rng = np.random.default_rng(12)
    hits = n = 0
    for _ in range(400):
        rows, _busy = _busy_rows(rng, rounds=10, beta=-0.10, sd=0.02)
        (f,) = dependence.findings(rows, "glibc")
        q = dependence.at_quiet_state(f)  # at the quiet state whether or not the slope excludes 0
        n += 1
        hits += q.ci_low < math.exp(-0.10 * q.state_value) < q.ci_high
    assert 0.92 <= hits / n <= 0.98, hits / n


def test_on_the_other_runs_speed_the_quiet_state_is_the_fast_edge():
    # jemalloc gains 1.5 × the host's swing: its ratio to glibc is exp(0.5 h); the others measure h
    noise = {"glibc": 0.005, "jemalloc": 0.005, "mimalloc": 0.003, "tcmalloc": 0.003}
    rows, host = _host_rows(np.random.default_rng(21), rounds=16, move={"jemalloc": 1.5}, noise=noise)
    f = next(f for f in dependence.findings(rows, "glibc") if f.variant == "jemalloc")
    assert f.slope.state == dependence.SPEED and f.slope.depends
    xs = [x for x, _r in f.points]
    q = f.quiet
    assert q.state_value == pytest.approx(np.quantile(xs, 0.90))  # the others ran fastest: the quietest
    assert min(xs) < q.state_value <= max(xs)  # never an extrapolation
    # the state is h against the others' medians (to their noise): its quietest tenth is h's
    planted = math.exp(0.5 * np.quantile(host, 0.90))
    assert q.ci_low < planted < q.ci_high, (q, planted)
    assert q.ratio > f.average.ratio
    # the adjusted log ratios: residuals plus the value at the quiet state, their mean that value
    ys = [math.log(r) for _x, r in f.points]
    adj = dependence.adjusted_log_ratios(ys, xs, q.state_value)
    assert np.mean(adj) == pytest.approx(q.mean_log)
    assert np.std(adj) < np.std(ys) / 3  # the state's share of the spread is gone


def test_no_dependence_gives_no_quiet_answer():
    rows, _host = _host_rows(np.random.default_rng(31), rounds=16)  # every allocator moves alike
    for f in dependence.findings(rows, "glibc"):
        assert not f.depends and f.quiet is None
        assert f.average is not None and f.verdict_uses == dependence.AVERAGE
        assert causes.marks(f) == ()
    assert causes.table(dependence.findings(rows, "glibc")) == []
    # too few rounds for a line: an average, no slope, nothing at a state
    few, _ = _busy_rows(np.random.default_rng(32), rounds=5)
    (f,) = dependence.findings(few, "glibc")
    assert f.slope is None and f.quiet is None and dependence.at_quiet_state(f) is None and f.average.n == 5


def test_a_dependence_that_is_the_baselines_is_one_fact():
    # the shootout's shape: glibc flat, every other allocator moves with the host alike
    rng = np.random.default_rng(41)
    rows, _host = _host_rows(rng, rounds=16, move={"glibc": 0.0})
    fs = dependence.findings(rows, "glibc")
    assert all(f.depends and f.slope.slope > 0 for f in fs)  # three positive slopes ...
    (own,) = causes.own_slopes(rows, "glibc")
    assert own.state == dependence.SPEED and own.baseline_flat
    assert all(own.slopes[a].depends for a in ("jemalloc", "mimalloc", "tcmalloc"))
    assert own.p >= 0.05 and own.difference.depends and own.difference.slope > 0
    assert own.cause == causes.BASELINE and own.one_fact  # ... one fact
    assert all(causes.marks(f, [own]) == (causes.MARK_DEPENDS, causes.MARK_BASELINES) for f in fs)
    assert {x.cause for x in causes.table(fs, [own])} == {causes.BASELINE}
    # over many studies of that shape, one fact is found in most (91 % in 500 here)
    found = sum(causes.own_slopes(_host_rows(rng, rounds=16, move={"glibc": 0.0})[0], "glibc")[0].one_fact
                for _ in range(100))
    assert found >= 80, found
    # glibc moving less than the others, not still: the same one fact (86 %), its slope not about 0
    less = [causes.own_slopes(_host_rows(rng, rounds=16, move={"glibc": 0.7})[0], "glibc")[0]
            for _ in range(100)]
    assert sum(o.one_fact for o in less) >= 75
    assert not any(o.baseline_flat for o in less)


def test_dependences_of_their_own_are_said_per_comparison():
    rng = np.random.default_rng(51)
    # glibc flat, but the variants move unlike each other: tcmalloc not at all
    rows, _ = _host_rows(rng, rounds=16, move={"glibc": 0.0, "jemalloc": 1.5, "mimalloc": 1.0, "tcmalloc": 0.0})
    (own,) = causes.own_slopes(rows, "glibc")
    assert own.p < 0.05 and own.cause == causes.PER_COMPARISON
    fs = dependence.findings(rows, "glibc")
    jem = next(f for f in fs if f.variant == "jemalloc")
    assert causes.marks(jem, [own]) == (causes.MARK_DEPENDS,)
    # glibc moves with the host like the others: nothing depends, and one fact is a rare false
    # alarm (6.6 % in 500 here; the slopes share the rounds' runs, so the tests are approximate)
    owns = []
    for _ in range(300):
        rows, _ = _host_rows(rng, rounds=16)
        owns.append(causes.own_slopes(rows, "glibc")[0])
    assert sum(o.one_fact for o in owns) / 300 <= 0.10
    # one variant is no shared fact
    two, _ = _busy_rows(rng, rounds=12)
    assert causes.own_slopes(two, "glibc")[0].cause == causes.PER_COMPARISON


def test_a_forest_row_finds_its_dependence():
    rows, _ = _host_rows(np.random.default_rng(61), rounds=16, move={"glibc": 0.0})
    fs = dependence.findings(rows, "glibc")
    vs = decide.verdicts(rows, Design(baseline="glibc", adaptive=False))
    tput = [v for v in vs if v.metric == "throughput"]
    assert len(tput) == 3
    for v in tput:
        f = causes.for_verdict(fs, v)
        assert f is not None and f.variant == v.variant and f.cell_key == v.var_unit[0]
    assert all(causes.for_verdict(fs, v) is None for v in vs if v.metric != "throughput")


def test_bad_inputs_are_refused_in_one_sentence():
    with pytest.raises(AlloclabError, match="one state per ratio"):
        dependence.ratio_at_state([0.1, 0.2], [0.0], 0.0)
    with pytest.raises(AlloclabError, match="unknown host state"):
        dependence.quiet_state_value([0.1, 0.2], "load")
    with pytest.raises(AlloclabError, match="no rounds"):
        dependence.quiet_state_value([], dependence.BUSY)
