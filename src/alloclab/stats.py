"""Pure statistics for benchmark results: per-cell summaries with seeded bootstrap intervals,
outlier flags, ratio comparisons between two groups of runs, spread across allocators and
thread-sweep scaling. numpy only; no I/O."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Callable

import numpy as np

MIN_RUNS = 3
_Z_CUTOFF = 3.5  # Iglewicz & Hoaglin
_BATCH_CELLS = 1_000_000  # bound on resamples * n held in memory at once


@dataclass(frozen=True)
class CellStats:
    n: int
    median: float
    mean: float
    ci_low: float | None  # bootstrap CI of the median; None when n < 3
    ci_high: float | None
    cv: float | None  # stdev / mean; None when n < 2 or mean == 0
    stdev: float | None  # ddof=1; None when n < 2
    outliers: tuple[int, ...]  # indices with |modified z| > 3.5
    enough: bool  # n >= 3
    note: str


@dataclass(frozen=True)
class Comparison:
    ratio: float  # median(variant) / median(baseline)
    ci_low: float | None  # bootstrap CI of the ratio; None when either n < 3
    ci_high: float | None
    verdict: str
    delta_pct: float  # (ratio - 1) * 100


@dataclass(frozen=True)
class Scaling:
    peak_x: float
    peak_y: float
    last_linear_x: float
    collapse_x: float | None
    collapse_y: float | None
    collapse_fraction: float


def _finite_array(values: Iterable[float], what: str = "values") -> np.ndarray:
    arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{what}: expected a flat sequence of numbers")
    if arr.size == 0:
        raise ValueError(f"{what}: empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: contains NaN or infinity")
    return arr


def _check_bootstrap_args(resamples: int, confidence: float) -> None:
    if int(resamples) != resamples or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")


def _boot_stats(arr: np.ndarray, stat: Callable, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """stat of `resamples` resamples (with replacement) of arr, in batches to bound memory."""
    n = arr.size
    batch = max(1, _BATCH_CELLS // n)
    out = []
    for start in range(0, resamples, batch):
        idx = rng.integers(0, n, size=(min(batch, resamples - start), n))
        out.append(np.asarray(stat(arr[idx], axis=1), dtype=float))
    return np.concatenate(out)


def _percentile_interval(boot: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = 1.0 - confidence
    low, high = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def bootstrap_ci(values: Iterable[float], stat: Callable = np.median, *, seed: int = 0,
                 resamples: int = 10000, confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of stat(values); `stat` must accept an `axis` argument.
    Deterministic for a given seed."""
    arr = _finite_array(values)
    _check_bootstrap_args(resamples, confidence)
    boot = _boot_stats(arr, stat, np.random.default_rng(seed), int(resamples))
    return _percentile_interval(boot, confidence)


def modified_z_scores(values: Iterable[float]) -> np.ndarray:
    """Iglewicz-Hoaglin modified z-scores 0.6745 * (x - median) / MAD. When MAD is 0 the
    mean-absolute-deviation variant (x - median) / (1.253314 * MeanAD) is used; when that is
    0 too, all scores are 0."""
    arr = _finite_array(values)
    dev = arr - np.median(arr)
    mad = float(np.median(np.abs(dev)))
    if mad > 0:
        return 0.6745 * dev / mad
    mean_ad = float(np.mean(np.abs(dev)))
    if mean_ad > 0:
        return dev / (1.253314 * mean_ad)
    return np.zeros_like(arr)


def median(values: Iterable[float]) -> float:
    """The median alone, for where no interval is wanted (describe() also bootstraps)."""
    return float(np.median(_finite_array(values)))


def describe(values: Iterable[float], *, seed: int = 0, resamples: int = 10000,
             confidence: float = 0.95) -> CellStats:
    """Summary of one cell's runs; the interval is a seeded bootstrap CI of the median."""
    arr = _finite_array(values)
    _check_bootstrap_args(resamples, confidence)
    n = int(arr.size)
    mean = float(np.mean(arr))
    stdev = float(np.std(arr, ddof=1)) if n >= 2 else None
    cv = stdev / mean if stdev is not None and mean != 0 else None
    enough = n >= MIN_RUNS
    ci_low = ci_high = None
    if enough:
        ci_low, ci_high = bootstrap_ci(arr, seed=seed, resamples=resamples, confidence=confidence)
    outliers = tuple(int(i) for i in np.flatnonzero(np.abs(modified_z_scores(arr)) > _Z_CUTOFF))
    note = "" if enough else f"n={n}: fewer than {MIN_RUNS} valid runs, no interval"
    return CellStats(n=n, median=median(arr), mean=mean, ci_low=ci_low, ci_high=ci_high,
                     cv=cv, stdev=stdev, outliers=outliers, enough=enough, note=note)


def _verdict(ci_low: float, ci_high: float, higher_is_better: bool) -> str:
    up, down = ("faster", "slower") if higher_is_better else ("higher", "lower")
    if ci_low > 1:
        return up
    if ci_high < 1:
        return down
    return "no difference detected"


def compare(baseline: Iterable[float], variant: Iterable[float], *, higher_is_better: bool = True,
            seed: int = 0, resamples: int = 10000, confidence: float = 0.95) -> Comparison:
    """Ratio of medians variant/baseline with a bootstrap CI (groups resampled independently).

    The verdict describes the variant relative to the baseline, and only when the CI excludes 1:
    with higher_is_better=True (throughput) "faster" (CI above 1) or "slower" (CI below 1);
    with higher_is_better=False (latency, RSS) "higher" (CI above 1) or "lower" (CI below 1).
    Otherwise "no difference detected", or "insufficient data" when either group has n < 3.
    Raises ValueError when the baseline median, or a resampled one, is not positive."""
    base = _finite_array(baseline, "baseline")
    var = _finite_array(variant, "variant")
    _check_bootstrap_args(resamples, confidence)
    base_median = float(np.median(base))
    if base_median <= 0:
        raise ValueError(f"baseline median is {base_median}: a ratio needs a positive baseline")
    ratio = float(np.median(var)) / base_median
    delta_pct = (ratio - 1.0) * 100.0
    if base.size < MIN_RUNS or var.size < MIN_RUNS:
        return Comparison(ratio, None, None, "insufficient data", delta_pct)
    rng = np.random.default_rng(seed)
    boot_base = _boot_stats(base, np.median, rng, int(resamples))
    boot_var = _boot_stats(var, np.median, rng, int(resamples))
    if np.any(boot_base <= 0):
        raise ValueError("baseline median is not positive in some resamples: ratio undefined")
    ci_low, ci_high = _percentile_interval(boot_var / boot_base, confidence)
    return Comparison(ratio, ci_low, ci_high, _verdict(ci_low, ci_high, higher_is_better), delta_pct)


def spread_pct(medians: Mapping[str, float]) -> tuple[str, str, float]:
    """(best name, worst name, (best - worst) / worst * 100) for a higher-is-better metric.
    Ties go to the first name in the mapping's order."""
    if not medians:
        raise ValueError("spread_pct: no medians")
    names = list(medians)
    vals = _finite_array([medians[k] for k in names], "medians")
    best, worst = names[int(np.argmax(vals))], names[int(np.argmin(vals))]
    if medians[worst] <= 0:
        raise ValueError(f"spread_pct: worst median {medians[worst]} is not positive")
    return best, worst, (medians[best] - medians[worst]) / medians[worst] * 100.0


def _sorted_points(points: Mapping[float, float] | Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    pairs = list(points.items()) if isinstance(points, Mapping) else [tuple(p) for p in points]
    if not pairs:
        raise ValueError("scaling: no points")
    if any(len(p) != 2 for p in pairs):
        raise ValueError("scaling: each point must be an (x, y) pair")
    xs = _finite_array([p[0] for p in pairs], "x")
    ys = _finite_array([p[1] for p in pairs], "y")
    if len(set(xs.tolist())) != xs.size:
        raise ValueError("scaling: duplicate x values")
    if np.any(xs <= 0) or np.any(ys < 0):
        raise ValueError("scaling: x must be positive and y non-negative")
    return sorted((int(x) if x.is_integer() else x, y) for x, y in zip(xs.tolist(), ys.tolist()))


def scaling(points: Mapping[float, float] | Iterable[tuple[float, float]], *, tolerance: float = 0.05,
            collapse_fraction: float = 0.5) -> Scaling:
    """Peak, end of near-linear scaling and collapse of a sweep y(x) (e.g. throughput vs threads).

    last_linear_x: the last x of the unbroken run from the smallest x0 where
    y(x) >= (1 - tolerance) * y(x0) * x / x0 (x0 when y(x0) == 0).
    collapse_x: the first x after the peak where y < collapse_fraction * peak_y, else None."""
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance!r}")
    if not 0 < collapse_fraction <= 1:
        raise ValueError(f"collapse_fraction must be in (0, 1], got {collapse_fraction!r}")
    pts = _sorted_points(points)
    x0, y0 = pts[0]
    last_linear_x = x0
    if y0 > 0:
        for x, y in pts[1:]:
            if y < (1 - tolerance) * y0 * x / x0:
                break
            last_linear_x = x
    peak_i = max(range(len(pts)), key=lambda i: (pts[i][1], -i))
    peak_x, peak_y = pts[peak_i]
    collapse = next(((x, y) for x, y in pts[peak_i + 1:] if y < collapse_fraction * peak_y), (None, None))
    return Scaling(peak_x=peak_x, peak_y=peak_y, last_linear_x=last_linear_x, collapse_x=collapse[0],
                   collapse_y=collapse[1], collapse_fraction=collapse_fraction)
