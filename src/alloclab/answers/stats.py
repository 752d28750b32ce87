"""Pure statistics for benchmark results: per-cell summaries with seeded bootstrap intervals,
outlier flags, the interval of a ratio between two groups of runs (paired by round where they
pair: ratio_interval, the one rule every verdict uses, through decide), spread across allocators
and thread-sweep scaling. numpy and scipy only; no I/O."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
from scipy import stats as _scipy_stats

from alloclab.plan.design import DEFAULT_MARGIN, EQUIVALENT, FASTER, HIGHER, LOWER, SLOWER, UNDECIDED

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
    """A ratio variant / baseline as tables show it: decide's ratio (ratio_interval) and verdict."""

    ratio: float  # the geometric mean of the per-round ratios (paired), else the ratio of geometric means
    ci_low: float | None  # its interval; None where there is none
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


def verdict_word(ci_low: float, ci_high: float, higher_is_better: bool = True,
                 margin: float = DEFAULT_MARGIN) -> str:
    """One word for an interval of a ratio variant/baseline: the direction when it excludes 1
    (faster/slower for throughput, higher/lower for latency and memory), `equivalent` when it
    lies wholly inside [1 - margin, 1 + margin], else `undecided`."""
    up, down = (FASTER, SLOWER) if higher_is_better else (HIGHER, LOWER)
    if ci_low > 1:
        return up
    if ci_high < 1:
        return down
    if ci_low >= 1 - margin and ci_high <= 1 + margin:
        return EQUIVALENT
    return UNDECIDED


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


# --- verdicts from rounds: paired log ratios, adjusted for repeated looks ------------------
# (the per-look level is the design's: plan.design.look_alpha)

@dataclass(frozen=True)
class RatioInterval:
    """variant/baseline: the ratio (geometric mean of the per-round ratios when paired, else the
    ratio of geometric means) and its interval, with what it rests on."""

    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    n_baseline: int
    n_variant: int
    n_pairs: int
    paired: bool
    mean_log: float | None  # mean log ratio and its standard deviation (per pair or pooled)
    sd_log: float | None
    confidence: float
    # "t": the paired t interval (or Welch's); "signed-rank": the Hodges-Lehmann shift of the
    # paired log ratios with its signed-rank interval (robust=True), mean_log then the shift and
    # sd_log the spread a t interval of the same width would have (what replications combine)
    rule: str = "t"
    # the spread of this ratio between studies on one machine (SD of the log ratio; Design.between),
    # added to the rounds' own error: the interval then covers the ratio another study would read
    between_sd: float = 0.0

    @property
    def n(self) -> int:
        """The pairs it rests on, or the smaller group where it is not paired."""
        return self.n_pairs if self.paired else min(self.n_baseline, self.n_variant)

    @property
    def se_log(self) -> float | None:
        """The standard error of the mean log ratio (what replications combine), with the spread
        between studies where it carries one."""
        if self.sd_log is None or self.n <= 1:
            return None
        return with_between(self.sd_log / math.sqrt(self.n), self.between_sd, self.n - 1)[0]

    @property
    def df(self) -> float:
        """n − 1; with a spread between studies, Satterthwaite's (with_between)."""
        if self.sd_log is None or self.n <= 1:
            return self.n - 1
        return with_between(self.sd_log / math.sqrt(self.n), self.between_sd, self.n - 1)[1]


def with_between(within_se: float, between_sd: float, df: float) -> tuple[float, float]:
    """A standard error estimated on df degrees of freedom with the spread between studies added in
    quadrature, and Satterthwaite's degrees of freedom for it (the spread, a figure known from stored
    studies, taken as exact): (within_se, df) unchanged where there is no spread."""
    if not between_sd:
        return within_se, df
    if within_se <= 0:
        return between_sd, float("inf")
    return math.hypot(within_se, between_sd), df * (1 + (between_sd / within_se) ** 2) ** 2


def _t(confidence: float, df: float) -> float:
    return float(_scipy_stats.t.ppf(1 - (1 - confidence) / 2, df))


def signed_rank_interval(d: Iterable[float], confidence: float) -> tuple[float, float, float] | None:
    """The Hodges-Lehmann shift of paired differences `d` (the median of their Walsh averages) and
    its distribution-free interval, the inversion of the exact two-sided Wilcoxon signed-rank
    test at `confidence` (Hollander & Wolfe): None where so few pairs cannot reach that level
    (all of one sign would still be too likely: at 95 %, fewer than 6; at 98.7 %, fewer than 8)."""
    x = _finite_array(d, "differences")
    n = x.size
    walsh = np.sort((x[:, None] + x[None, :])[np.triu_indices(n)] / 2)
    # the exact null distribution of the signed-rank sum: counts of each sum over 2^n sign choices
    dist = np.zeros(n * (n + 1) // 2 + 1)
    dist[0] = 1.0
    for i in range(1, n + 1):
        dist[i:] = dist[i:] + dist[:-i].copy()
    lower_tail = np.cumsum(dist / dist.sum())  # P(T <= s)
    # k: how many Walsh averages each end drops, the most with P(T <= k - 1) <= alpha / 2
    k = int(np.searchsorted(lower_tail, (1 - confidence) / 2, side="right"))
    if k < 1:
        return None
    return float(np.median(walsh)), float(walsh[k - 1]), float(walsh[walsh.size - k])


def signed_rank_min_pairs(confidence: float) -> int:
    """The fewest pairs from which signed_rank_interval gives an interval at `confidence`."""
    return next(n for n in range(2, 64) if 2.0 ** (1 - n) <= 1 - confidence)


def ratio_interval(baseline: Mapping[int, float], variant: Mapping[int, float], *,
                   confidence: float = 0.95, robust: bool = False, between_sd: float = 0.0) -> RatioInterval:
    """Interval of variant/baseline from runs keyed by round. With 3 rounds or more in which both
    ran, a paired t interval on the log ratios (each round's runs are interleaved, so the round's
    machine state cancels); otherwise Welch's interval on the logs of each group (n >= 2 each);
    otherwise no interval. Values must be positive. `robust`: paired log ratios whose spread has
    a heavy tail (a share that now and then jumps) take the signed-rank interval of their
    Hodges-Lehmann shift wherever there are pairs enough for it at this level, the t interval
    below that (which of the two depends on the number of pairs alone, never on their values).
    `between_sd`: the ratio's spread between studies on one machine (SD of the log ratio), added to
    the paired t interval's standard error (its degrees of freedom then Satterthwaite's): the interval of
    the ratio another study on this machine would read, not only of these rounds' mean."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    if not (between_sd >= 0 and math.isfinite(between_sd)):
        raise ValueError(f"between_sd must be a finite spread of at least 0, got {between_sd!r}")
    b = {k: float(v) for k, v in baseline.items()}
    v = {k: float(x) for k, x in variant.items()}
    for name, g in (("baseline", b), ("variant", v)):
        vals = np.array(list(g.values()), dtype=float)
        if vals.size and (not np.all(np.isfinite(vals)) or np.any(vals <= 0)):
            raise ValueError(f"{name}: ratios need positive finite values")
    pairs = sorted(set(b) & set(v))
    nb, nv = len(b), len(v)
    if not b or not v:
        return RatioInterval(None, None, None, nb, nv, len(pairs), False, None, None, confidence)
    if len(pairs) >= MIN_RUNS:
        d = np.log([v[k] / b[k] for k in pairs])
        n = d.size
        hl = signed_rank_interval(d, confidence) if robust else None
        if hl is not None:
            shift, lo, hi = hl
            sd = (hi - lo) / 2 * np.sqrt(n) / _t(confidence, n - 1)
            return RatioInterval(float(np.exp(shift)), float(np.exp(lo)), float(np.exp(hi)), nb, nv, n, True, shift,
                                 float(sd), confidence, "signed-rank")
        m, sd = float(d.mean()), float(d.std(ddof=1))
        iv = RatioInterval(None, None, None, nb, nv, n, True, m, sd, confidence, between_sd=between_sd)
        half = _t(confidence, iv.df) * iv.se_log
        return replace(iv, ratio=float(np.exp(m)), ci_low=float(np.exp(m - half)), ci_high=float(np.exp(m + half)))
    lb, lv = np.log(list(b.values())), np.log(list(v.values()))
    m = float(lv.mean() - lb.mean())
    if nb < 2 or nv < 2:
        return RatioInterval(float(np.exp(m)), None, None, nb, nv, len(pairs), False, m, None, confidence)
    vb, vv = lb.var(ddof=1) / nb, lv.var(ddof=1) / nv
    se = float(np.sqrt(vb + vv))
    if se == 0:
        df = float(nb + nv - 2)
    else:
        df = (vb + vv) ** 2 / (vb ** 2 / (nb - 1) + vv ** 2 / (nv - 1))
    half = _t(confidence, df) * se
    sd = se * np.sqrt(min(nb, nv))  # per-run spread that would give this standard error
    return RatioInterval(float(np.exp(m)), float(np.exp(m - half)), float(np.exp(m + half)), nb, nv, len(pairs),
                         False, m, float(sd), confidence)


def rounds_to_decide(mean_log: float | None, sd_log: float | None, n: int, *, confidence: float,
                     margin: float = DEFAULT_MARGIN, limit: int = 10_000, between_sd: float = 0.0,
                     confidence_at: Callable[[int], float] | None = None) -> int | None:
    """Further rounds after which an interval of this spread would be expected to decide: exclude
    1 (when the estimate is outside the margin) or sit inside the margin (when it is inside).
    None when nothing is known about the spread; `limit` when it would take longer than that (a
    spread between studies, `between_sd`, is a floor no number of rounds goes below).
    `confidence_at`: the level the interval would have after that many further rounds (a study
    resumed for them looks again: Design.resumed_confidence), else `confidence` throughout."""
    if mean_log is None or sd_log is None:
        return None
    if sd_log == 0 and not between_sd:
        return 0 if n >= MIN_RUNS else MIN_RUNS - n
    lm = float(np.log1p(margin))
    effect = abs(mean_log)
    # the interval must shrink below the effect (to exclude 1) or below the room left inside
    # the margin (to be equivalent), whichever is larger
    need_half = max(effect, lm - effect)
    if need_half <= 0:
        return limit
    def decides(total: int) -> bool:
        se, df = with_between(sd_log / math.sqrt(total), between_sd, total - 1)
        level = confidence_at(total - n) if confidence_at else confidence
        return _t(level, df) * se < need_half

    lo, hi = max(n, MIN_RUNS), n + limit
    if not decides(hi):
        return limit
    while lo < hi:  # the half-width shrinks as rounds grow: the first total that decides
        mid = (lo + hi) // 2
        if decides(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo - n


def mean_ci_half_width(values: Iterable[float], confidence: float = 0.95) -> float | None:
    """Half-width of the t interval of the mean, relative to the mean (0.02 = +-2 %)."""
    arr = _finite_array(values)
    if arr.size < 2 or arr.mean() == 0:
        return None
    return float(_t(confidence, arr.size - 1) * arr.std(ddof=1) / np.sqrt(arr.size) / abs(arr.mean()))
