"""Replication: the same plan's comparisons in several studies, machines may differ (that is the
point). Per comparison, each study's verdict, and each later study's ratio against the first
one's (the ratio of their ratios) with a 95 % interval: "replicates" when that interval lies
within the plan's margin, "differs" when it excludes 1, else "not known"; and Cochran's Q with
I², the share of the spread between studies that their own noise does not explain.

Pure: studies' verdicts in, replications out (decide makes the verdicts, from stored rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats as _scipy_stats

from alloclab.answers.decide import Verdict
from alloclab.answers.stats import RatioInterval
from alloclab.plan.design import DEFAULT_MARGIN

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
                    confidence: float = 0.95) -> RatioOfRatios | None:
    """b's ratio ÷ a's, with Welch's interval on the difference of their mean log ratios (from
    each one's mean log ratio, its standard error and degrees of freedom)."""
    if a.mean_log is None or b.mean_log is None:
        return None
    d = b.mean_log - a.mean_log
    if a.se_log is None or b.se_log is None or a.df < 1 or b.df < 1:
        return RatioOfRatios(math.exp(d), None, None, NOT_KNOWN)
    se = math.hypot(a.se_log, b.se_log)
    df = se ** 4 / (a.se_log ** 4 / a.df + b.se_log ** 4 / b.df) if se > 0 else float(a.df + b.df)
    half = float(_scipy_stats.t.ppf(1 - (1 - confidence) / 2, df)) * se
    lo, hi = math.exp(d - half), math.exp(d + half)
    outcome = DIFFERS if lo > 1 or hi < 1 else REPLICATES if 1 - margin <= lo and hi <= 1 + margin else NOT_KNOWN
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
        against = tuple(None if i == 0 or v is None or first is None else ratio_of_ratios(first, v, margin)
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
