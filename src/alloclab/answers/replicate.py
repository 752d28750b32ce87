"""Replication: the same plan's comparisons in several studies, machines may differ (that is the
point). Per comparison, each study's verdict, and each later study's ratio against the first
one's (the ratio of their ratios) with a 95 % interval: "replicates" when that interval lies
within the plan's margin, "differs" when it excludes 1, else "not known"; and Cochran's Q with
I², the share of the spread between studies that their own noise does not explain.

What to expect on a new machine (`new_machine`): per comparison, the studies' mean log ratios
pooled with a random-effects model (DerSimonian & Laird), τ (the spread between machines) and a
95 % prediction interval for one more machine of the kind the studies ran on (Higgins, Thompson
& Spiegelhalter 2009), with a verdict on that interval at the plan's margin.

Before/after of one cell and allocator in two folders (`between_folders`): decide's rule, once.

Pure: studies' verdicts in, replications out (decide makes the verdicts, from stored rows).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from scipy import stats as _scipy_stats

from alloclab.answers import decide
from alloclab.answers.decide import Verdict
from alloclab.answers.metrics import margin_of, within
from alloclab.answers.stats import RatioInterval
from alloclab.plan.design import DEFAULT_MARGIN, UNDECIDED, Design

REPLICATES, DIFFERS, NOT_KNOWN = "replicates", "differs", "not known"


@dataclass(frozen=True)
class RatioOfRatios:
    ratio: float  # a later study's ratio ÷ the first study's
    ci_low: float | None
    ci_high: float | None
    outcome: str


@dataclass(frozen=True)
class Replication:
    key: tuple  # metric, comparison, engine, workload, threads, settings, baseline, variant
    verdicts: tuple[Verdict | None, ...]  # each study's, None where it has no such comparison
    against_first: tuple[RatioOfRatios | None, ...]  # each study's ratio ÷ the first's (None: the first itself)
    outcome: str
    q: float | None  # Cochran's Q over the studies with an interval, and its p-value
    p: float | None
    i2: float | None  # I² = (Q - df) / Q, at least 0


def key(v: Verdict) -> tuple:
    return (v.metric, v.comparison, v.engine, v.workload, v.threads, v.settings, v.baseline, v.variant)


def ratio_of_ratios(a: Verdict | RatioInterval, b: Verdict | RatioInterval, margin: float = DEFAULT_MARGIN,
                    confidence: float = 0.95, metric: str = "") -> RatioOfRatios | None:
    """b's ratio ÷ a's, with Welch's interval on the difference of their mean log ratios (from
    each one's mean log ratio, its standard error and degrees of freedom); "replicates" within
    the metric's margin (a share's: its difference of differences within ±its points)."""
    if a.mean_log is None or b.mean_log is None:
        return None
    metric = metric or getattr(a, "metric", "")
    d = b.mean_log - a.mean_log
    if a.se_log is None or b.se_log is None or a.df < 1 or b.df < 1:
        return RatioOfRatios(math.exp(d), None, None, NOT_KNOWN)
    se = math.hypot(a.se_log, b.se_log)
    df = se ** 4 / (a.se_log ** 4 / a.df + b.se_log ** 4 / b.df) if se > 0 else float(a.df + b.df)
    half = float(_scipy_stats.t.ppf(1 - (1 - confidence) / 2, df)) * se
    lo, hi = math.exp(d - half), math.exp(d + half)
    own = a.margin_or(margin) if isinstance(a, Verdict) else margin_of(metric, margin)  # a verdict's: as decided
    outcome = (DIFFERS if lo > 1 or hi < 1 else REPLICATES if within(metric, lo, hi, margin, ((metric, own),))
               else NOT_KNOWN)
    return RatioOfRatios(math.exp(d), lo, hi, outcome)


def heterogeneity(vs: list[Verdict]) -> tuple[float | None, float | None, float | None]:
    """Cochran's Q of the studies' mean log ratios (weights 1 / se²), its p-value and I²."""
    have = [v for v in vs if v.mean_log is not None and v.se_log]
    if len(have) < 2:
        return None, None, None
    w = [1 / v.se_log ** 2 for v in have]
    pooled = sum(wi * v.mean_log for wi, v in zip(w, have)) / sum(w)
    q = sum(wi * (v.mean_log - pooled) ** 2 for wi, v in zip(w, have))
    df = len(have) - 1
    return q, float(_scipy_stats.chi2.sf(q, df)), max(0.0, (q - df) / q) if q > 0 else 0.0


def replicate(studies: list[list[Verdict]], margin: float = DEFAULT_MARGIN) -> list[Replication]:
    """Every comparison that at least two of the studies made."""
    by_key = [{key(v): v for v in vs} for vs in studies]
    keys = sorted({k for d in by_key for k in d if sum(k in e for e in by_key) >= 2},
                  key=lambda k: [str(x) for x in k])
    out = []
    for k in keys:
        vs = tuple(d.get(k) for d in by_key)
        first = vs[0]
        against = tuple(None if i == 0 or v is None or first is None else ratio_of_ratios(first, v, margin,
                                                                                         metric=k[0])
                        for i, v in enumerate(vs))
        outcomes = [r.outcome for r in against if r is not None]
        q, p, i2 = heterogeneity([v for v in vs if v is not None])
        if DIFFERS in outcomes or (p is not None and len(outcomes) > 1 and p < 0.05):
            outcome = DIFFERS
        elif outcomes and all(o == REPLICATES for o in outcomes):
            outcome = REPLICATES
        else:
            outcome = NOT_KNOWN
        out.append(Replication(k, vs, against, outcome, q, p, i2))
    return out


# --- what to expect on a new machine ------------------------------------------------------

PREDICTION = 0.95
RULE_K2 = ("2 studies: Higgins' t with k − 2 = 0 degrees of freedom has no interval; shown: t with 1 degree of "
           "freedom, wide because 2 machines say little about the spread between machines")


@dataclass(frozen=True)
class NewMachine:
    """One comparison over k studies: the random-effects pooled ratio with its 95 % interval, τ
    and the 95 % prediction interval of the ratio on one more machine, with its verdict."""

    key: tuple  # as Replication.key
    k: int  # the studies with an interval (those pooled)
    ratio: float
    ci_low: float
    ci_high: float
    tau: float  # between-study standard deviation of the log ratio (DerSimonian–Laird)
    pi_low: float
    pi_high: float
    df: int  # of the prediction interval's t
    outcome: str  # faster/slower (higher/lower), equivalent, or NOT_KNOWN
    rule: str  # how the prediction interval was made where Higgins' formula has none ("": it has one)


def random_effects(means: list[float], ses: list[float]) -> tuple[float, float, float]:
    """DerSimonian–Laird: the pooled mean, its standard error and τ² from each study's mean and
    standard error (every standard error > 0)."""
    pairs = list(zip(means, ses))
    tau2, _ = moments([pairs])
    return (*_pooled(pairs, tau2), tau2)


def predict(vs: list[Verdict], margin: float = DEFAULT_MARGIN, confidence: float = PREDICTION) -> NewMachine | None:
    """One comparison's studies (the same key, one verdict each) -> what to expect on a new
    machine; None with fewer than 2 studies that have an interval. The pooled interval is the
    normal one of DerSimonian–Laird; the prediction interval is μ ± t(k − 2) · √(τ² + SE(μ)²)
    (Higgins et al. 2009), with k = 2 the stated rule RULE_K2 (t with 1 degree of freedom)."""
    have = [v for v in vs if v is not None and v.mean_log is not None and v.se_log]
    if len(have) < 2:
        return None
    k = len(have)
    mu, se, tau2 = random_effects([v.mean_log for v in have], [v.se_log for v in have])
    z = float(_scipy_stats.norm.ppf(1 - (1 - confidence) / 2))
    df = max(1, k - 2)
    half = float(_scipy_stats.t.ppf(1 - (1 - confidence) / 2, df)) * math.sqrt(tau2 + se ** 2)
    lo, hi = math.exp(mu - half), math.exp(mu + half)
    own = have[0].margin_or(margin)  # the margin the studies' verdicts were decided at
    word = decide.interval_word(have[0].metric, lo, hi, margin, ((have[0].metric, own),))
    return NewMachine(key(have[0]), k, math.exp(mu), math.exp(mu - z * se), math.exp(mu + z * se), math.sqrt(tau2),
                      lo, hi, df, NOT_KNOWN if word == UNDECIDED else word, RULE_K2 if k == 2 else "")


def new_machine(studies: list[list[Verdict]], margin: float = DEFAULT_MARGIN) -> list[NewMachine]:
    """Every comparison that at least two of the studies made with an interval, in key order."""
    by_key = [{key(v): v for v in vs} for vs in studies]
    keys = sorted({k for d in by_key for k in d}, key=lambda k: [str(x) for x in k])
    out = [predict([d.get(k) for d in by_key], margin) for k in keys]
    return [p for p in out if p is not None]


@dataclass(frozen=True)
class Shared:
    """What to expect on a new machine, one metric's comparisons together: the spread between
    machines (τ) they share, each comparison's prediction interval with it, how often leaving
    one machine out put its ratio inside the others' interval, and whether the interval is usable
    (at most twice the margin wide on either side), else how many machines it would take."""

    metric: str
    tau: float  # the shared τ (SD of the log ratio between machines)
    df: int  # of the prediction intervals' t: Σ(k − 1) − 1 over the comparisons
    preds: tuple[NewMachine, ...]
    loo_inside: int  # left-out machines' ratios inside the others' interval ...
    loo_total: int  # ... of this many (machines × comparisons)
    usable: bool
    needed: int | None  # machines a usable interval would take (None: no number would)
    limit: float  # the usable half-width (log)


def moments(groups: list[list[tuple[float, float]]]) -> tuple[float, int]:
    """τ² of studies' (mean, standard error) pairs, shared by the groups (comparisons) they form:
    DerSimonian–Laird's moments (Q, its degrees of freedom and c) summed over the groups; and its
    degrees of freedom Σ(k − 1). One group: DerSimonian–Laird's own τ²."""
    q = dfs = c = 0.0
    for have in groups:
        w = [1 / se ** 2 for _, se in have]
        sw = sum(w)
        fixed = sum(wi * m for wi, (m, _) in zip(w, have)) / sw
        q += sum(wi * (m - fixed) ** 2 for wi, (m, _) in zip(w, have))
        dfs += len(have) - 1
        c += sw - sum(wi ** 2 for wi in w) / sw
    return (max(0.0, (q - dfs) / c) if c > 0 else 0.0), int(dfs)


def _pooled(have: list[tuple[float, float]], tau2: float) -> tuple[float, float]:
    """The random-effects mean of (mean, standard error) pairs at τ², and its standard error."""
    ws = [1 / (se ** 2 + tau2) for _, se in have]
    return sum(w * m for w, (m, _) in zip(ws, have)) / sum(ws), math.sqrt(1 / sum(ws))


def _pairs(vs: list[Verdict]) -> list[tuple[float, float]]:
    return [(v.mean_log, v.se_log) for v in vs]


def _t(df: int, confidence: float) -> float:
    return float(_scipy_stats.t.ppf(1 - (1 - confidence) / 2, max(1, df)))


def shared(studies: list[list[Verdict]], metric: str, margin: float = DEFAULT_MARGIN,
           confidence: float = PREDICTION) -> Shared | None:
    """One metric's comparisons over the studies (each study a machine), τ shared by them: each
    comparison's μ ± t(Σ(k − 1) − 1)·√(τ² + SE(μ)²), and its calibration by leaving each machine
    out in turn (the others' interval for its ratio, its own SE added). None with fewer than two
    studies with an interval for any comparison, or three machines in all."""
    by_key = [{key(v): v for v in vs if v.metric == metric} for vs in studies]
    keys = sorted({k for d in by_key for k in d}, key=lambda k: [str(x) for x in k])
    rows = [[d.get(k) for d in by_key] for k in keys]
    groups = [[v for v in r if v is not None and v.mean_log is not None and v.se_log] for r in rows]
    if len(studies) < 3 or not any(len(g) >= 2 for g in groups):
        return None
    tau2, dfs = moments([_pairs(g) for g in groups if len(g) >= 2])
    df = max(1, dfs - 1)
    preds = []
    for g in (g for g in groups if len(g) >= 2):
        mu, se = _pooled(_pairs(g), tau2)
        half = _t(df, confidence) * math.sqrt(tau2 + se ** 2)
        lo, hi = math.exp(mu - half), math.exp(mu + half)
        z = float(_scipy_stats.norm.ppf(1 - (1 - confidence) / 2))
        word = decide.interval_word(metric, lo, hi, margin, ((metric, g[0].margin_or(margin)),))
        preds.append(NewMachine(key(g[0]), len(g), math.exp(mu), math.exp(mu - z * se), math.exp(mu + z * se),
                                math.sqrt(tau2), lo, hi, df, NOT_KNOWN if word == UNDECIDED else word,
                                f"τ shared by the {metric} comparisons"))
    inside = total = 0
    for i in range(len(studies)):  # each machine left out: the others' interval for its ratio
        others = [[v for j, v in enumerate(r) if j != i and v in g] for r, g in zip(rows, groups)]
        t2, d = moments([_pairs(o) for o in others if len(o) >= 2])
        for r, o in zip(rows, others):
            left = r[i]
            if len(o) < 2 or left is None or left.mean_log is None or not left.se_log:
                continue
            mu, se = _pooled(_pairs(o), t2)
            total += 1
            inside += abs(left.mean_log - mu) <= _t(d - 1, confidence) * math.sqrt(t2 + se ** 2 + left.se_log ** 2)
    limit = math.log(1 + 2 * margin)
    worst = max(math.log(p.pi_high / p.ratio) for p in preds)
    return Shared(metric, math.sqrt(tau2), df, tuple(preds), inside, total, worst <= limit,
                  None if worst <= limit else _machines_needed(tau2, groups, len(preds), limit, confidence), limit)


def _machines_needed(tau2: float, groups: list[list[Verdict]], m: int, limit: float, confidence: float) -> int | None:
    """The fewest machines, more than the studies have, whose prediction interval would be usable
    (half-width within `limit`) at this τ, for `m` comparisons each as precise as the least precise
    study; None where τ alone is too wide for any number, or it would take more than 1,000."""
    se2 = max(v.se_log ** 2 for g in groups for v in g)
    if float(_scipy_stats.norm.ppf(1 - (1 - confidence) / 2)) * math.sqrt(tau2) >= limit:
        return None
    for k in range(max(len(g) for g in groups) + 1, 1001):
        if _t(m * (k - 1) - 1, confidence) * math.sqrt(tau2 + (tau2 + se2) / k) <= limit:
            return k
    return None


def shared_sentences(sh: Shared, on: str = "on a new machine of this kind", unit: str = "machines") -> list[str]:
    """The lines of what to expect with τ shared: one per comparison with its interval and the
    calibration, or one line saying why no usable interval, and how many machines it would take."""
    loo = (f"calibration: each of the {unit} left out in turn, its ratios fell inside the others' intervals "
           f"{sh.loo_inside} times of {sh.loo_total}")
    if not sh.usable:
        widest = max(p.pi_high / p.ratio for p in sh.preds)
        need = (f"about {sh.needed} {unit} would make it ±{_pct0(math.exp(sh.limit)).strip('+ %')} %"
                if sh.needed else f"no number of {unit} would: they differ by τ {100 * sh.tau:.1f} %, too much for "
                "the margin")
        return [f"{on}: no usable interval from {max(p.k for p in sh.preds)} {unit} (τ {100 * sh.tau:.1f} %, shared "
                f"by {len(sh.preds)} comparisons, gives ±{100 * (widest - 1):.1f} %); {need} ({loo})"]
    out = []
    for p in sh.preds:
        m, comparison, engine, workload, threads, settings, baseline, variant = p.key
        out.append(f"{on}: {variant} vs {baseline} ({engine} {workload} t{threads}) between {_pct0(p.pi_low)} and "
                   f"{_pct0(p.pi_high)}, {p.outcome}")
    return out + [f"(τ {100 * sh.tau:.1f} % shared by the {len(sh.preds)} comparisons of "
                  f"{max(p.k for p in sh.preds)} {unit}, t with {sh.df} degrees of freedom; {loo})"]


def _pct0(x: float) -> str:
    return f"{100 * (x - 1):+.0f} %".replace("-", "−")


def new_machine_sentences(preds: list[NewMachine], on: str = "on a new machine of this kind", unit: str = "machines",
                          metric: str = "throughput") -> list[str]:
    """One line per comparison on `metric`: "on a new machine of this kind: jemalloc vs glibc
    (tidesdb read_random t2) between −12 % and +9 %, not known (2 machines, τ 3.0 %: wide ...)"."""
    out = []
    for p in preds:
        m, comparison, engine, workload, threads, settings, baseline, variant = p.key
        if m != metric:
            continue
        few = f" ({p.k} {unit}, τ {100 * p.tau:.1f} %: wide with few {unit})" if p.k < 5 else \
            f" ({p.k} {unit}, τ {100 * p.tau:.1f} %)"
        out.append(f"{on}: {variant} vs {baseline} ({engine} {workload} t{threads}) between {_pct0(p.pi_low)} "
                   f"and {_pct0(p.pi_high)}, {p.outcome}{few}")
    return out


# --- before/after of two folders ----------------------------------------------------------

def between_folders(before: Mapping, after: Mapping, higher_is_better: bool,
                    policy: Design) -> tuple[RatioInterval, str]:
    """after ÷ before of one cell and allocator in two folders (runs keyed as decide keys them),
    by decide's rule for one look (95 %) at the policy's margin. Runs of two folders never ran in
    one round, so none pair: decide's rule then takes Welch's interval on the logs of each
    folder's runs. (What the folders do share, each allocator's baseline in every round, makes
    the ratio of ratios: `replicate`.)"""
    b = {("before", *_as_tuple(k)): v for k, v in before.items()}
    a = {("after", *_as_tuple(k)): v for k, v in after.items()}
    return decide.ratio_verdict(b, a, higher_is_better, replace(policy, adaptive=False, looks=()))


def _as_tuple(k) -> tuple:
    return k if isinstance(k, tuple) else (k,)
