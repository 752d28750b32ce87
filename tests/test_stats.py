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
