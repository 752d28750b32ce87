import math
import statistics

import numpy as np
import pytest

from alloclab.answers import stats

DATA = [10.2, 9.8, 10.5, 10.1, 9.9, 10.4, 10.0]

# Published oltp_read_only baseline (study 3): threads -> TPS.
STUDY3 = dict(zip(
    [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
    [731.50, 1365.77, 2438.49, 4478.28, 4535.01, 4882.08, 4753.91, 4581.43, 4297.46, 3626.27, 523.21],
))


def normal_sample(n=30, seed=42):
    return np.random.default_rng(seed).normal(100.0, 10.0, n)


# --- describe ---------------------------------------------------------------

def test_describe_matches_numpy_and_statistics():
    s = stats.describe(DATA)
    assert s.n == len(DATA)
    assert s.median == pytest.approx(statistics.median(DATA))
    assert s.mean == pytest.approx(statistics.mean(DATA))
    assert s.stdev == pytest.approx(statistics.stdev(DATA))
    assert s.stdev == pytest.approx(float(np.std(DATA, ddof=1)))
    assert s.cv == pytest.approx(statistics.stdev(DATA) / statistics.mean(DATA))
    assert s.enough and s.note == ""
    assert s.ci_low <= s.median <= s.ci_high
    assert s.outliers == ()


def test_cv_of_constant_values_is_zero():
    assert stats.describe([5.0, 5.0, 5.0, 5.0]).cv == 0.0


def test_cv_none_when_mean_is_zero():
    assert stats.describe([-1.0, 0.0, 1.0]).cv is None


def test_zero_variance():
    s = stats.describe([7.0] * 5)
    assert (s.ci_low, s.ci_high) == (7.0, 7.0)
    assert s.cv == 0.0 and s.stdev == 0.0
    assert s.outliers == ()
    assert stats.bootstrap_ci([7.0] * 5) == (7.0, 7.0)


@pytest.mark.parametrize("values", [[12.5], [12.5, 13.0]])
def test_fewer_than_three_runs(values):
    s = stats.describe(values)
    assert s.n == len(values)
    assert not s.enough
    assert s.ci_low is None and s.ci_high is None
    assert "fewer than 3" in s.note and f"n={len(values)}" in s.note
    if len(values) == 1:
        assert s.stdev is None and s.cv is None
    else:
        assert s.stdev == pytest.approx(statistics.stdev(values))


@pytest.mark.parametrize("bad", [[1.0, float("nan"), 2.0], [1.0, float("inf")], [], [[1.0, 2.0]]])
def test_describe_rejects_bad_input(bad):
    with pytest.raises(ValueError):
        stats.describe(bad)


def test_nan_raises_everywhere():
    nan = float("nan")
    with pytest.raises(ValueError):
        stats.bootstrap_ci([1.0, nan, 3.0])
    with pytest.raises(ValueError):
        stats.spread_pct({"a": nan, "b": 1.0})
    with pytest.raises(ValueError):
        stats.scaling({1: 1.0, 2: nan})


# --- bootstrap ----------------------------------------------------------------

def test_bootstrap_deterministic_for_seed():
    x = normal_sample()
    assert stats.bootstrap_ci(x, seed=3) == stats.bootstrap_ci(x, seed=3)
    # the median of resamples takes few distinct values, so show the seed matters with the mean
    assert stats.bootstrap_ci(x, np.mean, seed=3) != stats.bootstrap_ci(x, np.mean, seed=4)
    assert stats.describe(x, seed=3) == stats.describe(x, seed=3)


def test_bootstrap_matches_scipy_percentile():
    scipy_stats = pytest.importorskip("scipy.stats")
    x = normal_sample()
    low, high = stats.bootstrap_ci(x, seed=0, resamples=10000, confidence=0.95)
    ref = scipy_stats.bootstrap((x,), np.median, method="percentile", confidence_level=0.95,
                                n_resamples=10000, rng=np.random.default_rng(1)).confidence_interval
    tol = 0.02 * float(np.ptp(x))
    assert low == pytest.approx(ref.low, abs=tol)
    assert high == pytest.approx(ref.high, abs=tol)
    assert low <= float(np.median(x)) <= high


def test_bootstrap_other_stat_and_confidence():
    x = normal_sample()
    l95, h95 = stats.bootstrap_ci(x, np.mean)
    l80, h80 = stats.bootstrap_ci(x, np.mean, confidence=0.8)
    assert l95 <= l80 <= float(np.mean(x)) <= h80 <= h95


@pytest.mark.parametrize("kw", [{"confidence": 1.0}, {"confidence": 0.0}, {"resamples": 0}])
def test_bootstrap_rejects_bad_args(kw):
    with pytest.raises(ValueError):
        stats.bootstrap_ci([1.0, 2.0, 3.0], **kw)


# --- outliers -----------------------------------------------------------------

def test_outlier_textbook_example():
    assert stats.describe([10, 10.1, 9.9, 10.05, 9.95, 30]).outliers == (5,)


def test_modified_z_score_hand_computed():
    # median 3, |dev| = 2,1,0,1,97 -> MAD 1; z(100) = 0.6745 * 97 / 1
    z = stats.modified_z_scores([1, 2, 3, 4, 100])
    assert z[4] == pytest.approx(0.6745 * 97)
    assert z[0] == pytest.approx(-0.6745 * 2)
    assert stats.describe([1, 2, 3, 4, 100]).outliers == (4,)


def test_modified_z_score_mean_ad_variant_when_mad_is_zero():
    # median 5, MAD 0, MeanAD = 4/5 = 0.8; z(9) = 4 / (1.253314 * 0.8) = 3.989 > 3.5
    z = stats.modified_z_scores([5, 5, 5, 5, 9])
    assert z[4] == pytest.approx(4 / (1.253314 * 0.8))
    assert list(z[:4]) == [0.0] * 4
    assert stats.describe([5, 5, 5, 5, 9]).outliers == (4,)


# --- spread ---------------------------------------------------------------------

def test_spread_pct():
    best, worst, pct = stats.spread_pct({"glibc": 100.0, "jemalloc": 125.0, "tcmalloc": 110.0})
    assert (best, worst) == ("jemalloc", "glibc")
    assert pct == pytest.approx(25.0)


def test_spread_pct_single_and_bad():
    assert stats.spread_pct({"a": 5.0}) == ("a", "a", 0.0)
    with pytest.raises(ValueError):
        stats.spread_pct({})
    with pytest.raises(ValueError):
        stats.spread_pct({"a": 0.0, "b": 1.0})


# --- scaling --------------------------------------------------------------------

def test_scaling_perfectly_linear():
    s = stats.scaling({x: 100.0 * x for x in (1, 2, 4, 8, 16)})
    assert s.last_linear_x == 16
    assert (s.peak_x, s.peak_y) == (16, 1600.0)
    assert s.collapse_x is None and s.collapse_y is None


def test_scaling_study3_curve():
    s = stats.scaling(STUDY3)
    assert (s.peak_x, s.peak_y) == (32, 4882.08)
    # 2 threads: 1365.77 < 0.95 * 2 * 731.50 = 1389.85, so linear scaling ends at 1 thread
    assert s.last_linear_x == 1
    # 512: 3626.27 >= 0.5 * 4882.08 = 2441.04; 1024: 523.21 < 2441.04
    assert (s.collapse_x, s.collapse_y) == (1024, 523.21)
    assert s.collapse_fraction == 0.5


def test_scaling_accepts_unsorted_pairs_and_tolerance():
    pts = list(STUDY3.items())[::-1]
    assert stats.scaling(pts) == stats.scaling(STUDY3)
    # with 10% tolerance 2 threads pass (1365.77 >= 1316.7), 4 fail (2438.49 < 2633.4)
    assert stats.scaling(STUDY3, tolerance=0.10).last_linear_x == 2
    # a stricter collapse fraction never triggers
    assert stats.scaling(STUDY3, collapse_fraction=0.1).collapse_x is None


def test_scaling_linear_run_stops_at_first_failure():
    # 4 fails, 8 would pass again: the run must stop at 2
    s = stats.scaling({1: 10.0, 2: 20.0, 4: 30.0, 8: 80.0})
    assert s.last_linear_x == 2


def test_scaling_plateau_without_collapse():
    s = stats.scaling({1: 100.0, 2: 195.0, 4: 300.0, 8: 310.0, 16: 305.0, 32: 290.0})
    assert (s.peak_x, s.peak_y) == (8, 310.0)
    assert s.last_linear_x == 2
    assert s.collapse_x is None


def test_scaling_single_point():
    s = stats.scaling({4: 50.0})
    assert (s.peak_x, s.peak_y, s.last_linear_x) == (4, 50.0, 4)
    assert s.collapse_x is None


def test_scaling_zeros():
    s = stats.scaling({1: 0.0, 2: 10.0, 4: 0.0})
    assert s.last_linear_x == 1
    assert (s.peak_x, s.peak_y) == (2, 10.0)
    assert (s.collapse_x, s.collapse_y) == (4, 0.0)
    flat = stats.scaling({1: 0.0, 2: 0.0})
    assert (flat.peak_x, flat.last_linear_x, flat.collapse_x) == (1, 1, None)


@pytest.mark.parametrize("points", [
    [(1, 10.0), (2, 20.0), (1, 12.0)],  # duplicate x
    {},
    [],
    {0: 1.0, 1: 2.0},  # x must be positive
    {1: -1.0},  # y must be non-negative
])
def test_scaling_rejects_bad_input(points):
    with pytest.raises(ValueError):
        stats.scaling(points)


def test_scaling_rejects_bad_parameters():
    with pytest.raises(ValueError):
        stats.scaling(STUDY3, tolerance=1.0)
    with pytest.raises(ValueError):
        stats.scaling(STUDY3, collapse_fraction=0.0)


def test_results_are_plain_floats():
    s = stats.describe(DATA)
    for v in (s.median, s.mean, s.ci_low, s.ci_high, s.cv, s.stdev):
        assert type(v) is float and math.isfinite(v)


# --- machine noise: the processes alloclab starts are not "other processes" ---------------

def test_cpu_of_reaped_children_is_not_counted_as_other_processes(monkeypatch):
    """On a machine where only alloclab and the processes it started used the CPU, nothing is
    "other processes", even though its child burned a whole core meanwhile."""
    import os
    import subprocess
    import sys

    from alloclab.host import noise

    def only_us():
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    monkeypatch.setattr(noise, "_busy_s", only_us)
    watch = noise.CpuWatch()
    subprocess.run([sys.executable, "-c", "import time\nt=time.process_time()\nwhile time.process_time()-t<1: pass"],
                   check=True)
    assert watch.stop().other_cores < 0.01


# --- the signed-rank interval of a paired shift (shares that now and then jump) ------------------

def test_signed_rank_interval_is_the_inversion_of_the_exact_wilcoxon_test():
    """Just outside either end the exact two-sided signed-rank test (scipy's) rejects a shift at
    the interval's level; just inside it does not; the estimate is the median of Walsh averages."""
    from scipy import stats as sps
    rng = np.random.default_rng(1)
    for n in (8, 9, 12, 16, 30):
        d = rng.normal(3, 6, n)
        for conf in (0.95, 0.98726):
            est, lo, hi = stats.signed_rank_interval(d, conf)
            walsh = [(d[i] + d[j]) / 2 for i in range(n) for j in range(i, n)]
            assert est == pytest.approx(float(np.median(walsh)))
            p = [sps.wilcoxon(d - t, method="exact").pvalue for t in (lo - 1e-9, lo + 1e-9, hi - 1e-9, hi + 1e-9)]
            assert p[0] <= 1 - conf < p[1] and p[3] <= 1 - conf < p[2], (n, conf, p)


def test_signed_rank_interval_needs_pairs_enough_for_its_level():
    # all n of one sign has probability 2 * 2^-n: 5 pairs cannot reach 95 %, 6 can; 98.8 % needs 8
    assert stats.signed_rank_interval([1, 2, 3, 4, 5], 0.95) is None
    assert stats.signed_rank_interval([1, 2, 3, 4, 5, 6], 0.95) == (3.5, 1.0, 6.0)
    assert stats.signed_rank_interval(range(1, 8), 0.98726) is None
    assert stats.signed_rank_interval(range(1, 9), 0.98726) is not None
    # every pair the same: a shift of exactly that, with no width
    assert stats.signed_rank_interval([0.0] * 12, 0.95) == (0.0, 0.0, 0.0)


def test_a_heavy_tailed_difference_keeps_its_level_with_the_signed_rank_interval():
    """Paired differences as two arenas − glibc given back on RocksDB measured them (points): most
    rounds a few points apart, and in about one in eight an idle phase trims most of a burst
    (+30 to +55). The t interval of the mean then holds far less often than its 95 %; the
    signed-rank interval of the Hodges-Lehmann shift (the typical round's difference, which the
    rare trims do not pull) holds at its level, and it is no wider."""
    rng = np.random.default_rng(7)

    def draw(size):
        return rng.normal(3, 6, size) + (rng.random(size) < 0.12) * rng.uniform(30, 55, size)

    big = draw(3000)
    i, j = np.triu_indices(big.size)
    shift = float(np.median((big[i] + big[j]) / 2))  # the pseudo-median the interval is for
    mean = 3 + 0.12 * 42.5
    n, reps, t_held, sr_held, t_width, sr_width = 16, 1500, 0, 0, [], []
    for _ in range(reps):
        d = draw(n)
        half = stats._t(0.95, n - 1) * d.std(ddof=1) / math.sqrt(n)
        t_held += d.mean() - half <= mean <= d.mean() + half
        _, lo, hi = stats.signed_rank_interval(d, 0.95)
        sr_held += lo <= shift <= hi
        t_width.append(2 * half)
        sr_width.append(hi - lo)
    assert t_held / reps < 0.9  # measured 0.87
    assert 0.93 <= sr_held / reps <= 0.97  # measured 0.953
    assert np.median(sr_width) < np.median(t_width)  # measured 14.4 against 15.7 points


def test_ratio_interval_takes_the_signed_rank_rule_only_when_robust_and_pairs_enough():
    base = {k: math.exp(0.05) for k in range(1, 17)}
    d = [0.02, 0.05, 0.03, 0.45, 0.07, 0.01, 0.04, 0.06, 0.02, 0.5, 0.03, 0.05, 0.04, 0.0, 0.06, 0.03]
    var = {k: math.exp(0.05 + x) for k, x in zip(range(1, 17), d)}
    t = stats.ratio_interval(base, var, confidence=0.98726)
    sr = stats.ratio_interval(base, var, confidence=0.98726, robust=True)
    assert t.rule == "t" and sr.rule == "signed-rank" and sr.n_pairs == 16
    # two rounds of sixteen trimmed most of a burst: the mean (+9.1 points) and its interval take
    # them in and reach below 0; the typical round's difference is +4 points, above 0
    assert t.ci_low < 1 < t.ci_high and math.log(t.ratio) == pytest.approx(sum(d) / 16)
    assert math.log(sr.ratio) == pytest.approx(0.04) and sr.ci_low > 1
    # its implied spread: a t interval of that spread has the signed-rank interval's width
    half = stats._t(0.98726, 15) * sr.se_log
    assert 2 * half == pytest.approx(math.log(sr.ci_high) - math.log(sr.ci_low))
    few = {k: v for k, v in var.items() if k <= 7}
    assert stats.ratio_interval(base, few, confidence=0.98726, robust=True).rule == "t"
