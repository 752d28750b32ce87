"""A study's design: the questions it may ask, the bar for an answer, and the rounds at which it
looks at its comparisons. Plain numbers and rules: the verdicts that use them are answers.decide's."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace

import numpy as np

from alloclab.catalog import metrics

QUESTIONS = ("allocators", "engines", "profiles")

# The verdict words: a ratio's interval above 1 or below it (faster/slower for a metric where
# higher is better, higher/lower for latency and memory), wholly inside the margin, or neither.
FASTER, SLOWER, HIGHER, LOWER = "faster", "slower", "higher", "lower"
EQUIVALENT, UNDECIDED = "equivalent", "undecided"
DECIDED_WORDS = (FASTER, SLOWER, HIGHER, LOWER)  # a direction
DEFAULT_TARGET_CI = 0.02
DEFAULT_MIN_RUNS = 3
DEFAULT_MAX_ROUNDS = 30
DEFAULT_MARGIN = 0.02  # "equivalent" when the whole interval sits inside 1 +- this
OTHER = "other"  # Design.between's entry for a variant it does not name
THROUGHPUT = metrics.THROUGHPUT.name  # the metric a name alone in Design.between is of


def between_key(metric: str, variant: str) -> str:
    """Design.between's key of a variant's spread on a metric: the name alone for throughput."""
    return variant if metric == THROUGHPUT else f"{metric}.{variant}"


def between_parts(key: str) -> tuple[str, str]:
    """between_key's (metric, variant): a key whose part before its first dot is no metric's is a
    name alone (an allocator's name may hold a dot: mimalloc-2.0)."""
    metric, dot, variant = key.partition(".")
    return (metric, variant) if dot and metric in metrics.by_name() and metric != THROUGHPUT else (THROUGHPUT, key)


# A study that runs rounds until its comparisons are decided looks at them only at a few
# planned rounds, not after every round: each look costs confidence (see stats.look_alpha), so
# fewer looks give narrower intervals at the same overall error. The looks: from round 4 (a
# t interval on 3 pairs is too wide to decide much), each about 1.5 times the one before, and
# the last round the study plans (its budget's worth of rounds, or max_rounds).
FIRST_LOOK = 4
LOOK_RATIO = 1.5
# a round is planned at this times the pace its runs were measured at (study.pace), and a budget
# the report names for more rounds (answers.context.to_decide) reckons with the same
PACE_SLACK = 1.1
OVERALL_ALPHA = 0.035  # Pocock's per-look level for this overall error keeps t intervals under 5 % (simulated)


def plan_looks(last: int, min_runs: int = DEFAULT_MIN_RUNS, done: tuple[int, ...] = (),
               max_looks: int = 0) -> tuple[int, ...]:
    """The rounds a study looks at, ending at `last`: the looks `done` already (a study resumed
    with more budget keeps them), then from max(min_runs, 4) on, each about 1.5 times the last;
    at most `max_looks` of them (0: no limit), the last always among them, and never fewer than the
    looks taken (a study resumed after its one look has looked twice)."""
    out = [x for x in done if x < last]
    kept = len(out)
    nxt = max(min_runs, FIRST_LOOK) if not out else max(out[-1] + 1, math.ceil(out[-1] * LOOK_RATIO))
    while nxt < last:
        out.append(nxt)
        nxt = max(nxt + 1, math.ceil(nxt * LOOK_RATIO))
    if out and out[-1] not in done and last < out[-1] * 1.25:
        out.pop()  # the last planned look would come right before the end: the end is the look
    if max_looks:
        out = out[:max(max_looks - 1, kept)]
    return tuple(out) + (max(last, 1),)


def _per_look(looks: int) -> float:
    """Per-look confidence for this many looks (Design.confidence): plain 95 % for one."""
    return 0.95 if looks <= 1 else 1 - look_alpha(looks, overall=OVERALL_ALPHA)


def taken_looks(design: dict, stop: dict | None, rounds: int) -> tuple[int, ...]:
    """The looks of a design as the study took them. A study its budget stopped after its
    second-to-last look but before its last takes the last look at the last round it ran: the
    number of looks, and so each look's level, stays, and when a budget ends depends on time,
    never on the ratios (the rounds after the previous look are not thrown away)."""
    looks = tuple(design.get("looks") or ())
    if (looks and stop and stop.get("reason") == "budget" and rounds < looks[-1]
            and (len(looks) < 2 or looks[-2] < rounds)):
        return looks[:-1] + (rounds,)
    return looks


def default_questions(allocators: list[str], engines: list[str]) -> list[str]:
    if len(allocators) > 1:
        return ["allocators"]
    return ["engines"] if len(engines) > 1 else ["allocators"]


# --- verdicts from rounds: paired log ratios, adjusted for repeated looks ------------------
#
# A study that stops when a comparison is decided looks at its data after every round; a
# plain 95 % interval looked at 30 times calls a true difference of 0 "faster" or "slower" in
# about a quarter of studies (tests/test_verdicts.py shows it). Adaptive studies therefore use,
# at every look, the per-look level of Pocock's group-sequential design for the largest number
# of looks the study may take: the intervals then hold together, over all looks, with about
# 95 % probability. A study with a fixed number of runs looks once and uses plain 95 %.

# Pocock's nominal two-sided per-look alpha for an overall 0.05, by number of looks
# (Jennison & Turnbull, Group Sequential Methods, table 2.1; 50 and 100 extrapolated as
# log-linear, and lowered a little: our first looks have 2-4 degrees of freedom).
_POCOCK = ((1, 0.05), (2, 0.0294), (3, 0.0221), (4, 0.0182), (5, 0.0158), (6, 0.0142), (8, 0.0120),
           (10, 0.0106), (15, 0.0086), (20, 0.0075), (30, 0.0060), (50, 0.0048), (100, 0.0036))


def look_alpha(looks: int, overall: float = 0.05) -> float:
    """Per-look two-sided alpha so that `looks` looks keep the overall error near `overall`."""
    if looks < 1:
        raise ValueError(f"looks must be >= 1, got {looks!r}")
    xs = [k for k, _ in _POCOCK]
    ys = [a for _, a in _POCOCK]
    if looks >= xs[-1]:
        a = ys[-1] * (xs[-1] / looks) ** 0.25
    else:
        a = float(np.exp(np.interp(np.log(looks), np.log(xs), np.log(ys))))
    return a * overall / 0.05


def fallback_baseline(allocators: list[str]) -> str:
    """The baseline of a plan that names none: glibc where it is among the allocators, else the
    first of them (the one rule, for plans and for folders whose plan.json lacks it)."""
    return "glibc" if "glibc" in allocators or not allocators else allocators[0]


@dataclass(frozen=True)
class Design:
    """How a study decides: the questions it asks, the bar for an answer (margin and target CI
    as fractions), and when it looks. Built once from the plan (Plan.design), stored in
    plan.json as "design", and read by the study, the verdicts, the report and compare; the
    looks a study planned (and took) are its rounds.json's."""

    questions: tuple[str, ...] = ("allocators",)
    baseline: str = "glibc"
    baseline_engine: str = ""
    margin: float = DEFAULT_MARGIN
    target_ci: float = DEFAULT_TARGET_CI
    min_runs: int = DEFAULT_MIN_RUNS
    max_rounds: int = DEFAULT_MAX_ROUNDS
    adaptive: bool = True
    profiles: tuple[str, ...] = ()
    looks: tuple[int, ...] = ()  # the rounds after which comparisons may be decided (adaptive)
    # the most looks the study takes (plan key `looks`; 0: plan_looks' own); 1: one look, at its last
    # round, at the plain 95 % (nothing is decided, and nothing stops, before it)
    max_looks: int = 0
    # the metrics (catalog.names.GOALS) whose undecided comparisons keep a (cell, allocator) running;
    # (): throughput and, where the rows are a life's, its memory metrics
    decide_on: tuple[str, ...] = ()
    # a metric's own margin (name, fraction; a share compared in points: points / 100; a difference
    # in its own unit: in that unit), over the metric's default (answers.metrics) and `margin`: plan
    # key margins_pct
    margins: tuple[tuple[str, float], ...] = ()
    # how far a variant's ratio moves between studies on one machine an hour apart (SD of the log
    # ratio, a fraction; "other": any variant not named), added to each verdict's own error so that
    # its interval covers what a study an hour later reads: plan key between_studies_pct. A name
    # alone is throughput's; "METRIC.name" another metric's (between_key)
    between: tuple[tuple[str, float], ...] = ()
    # the folder of stored studies whose runs on this machine give it its own spreads (plan key
    # between_studies_from; answers.spread), and what they gave: (key, SD, studies), each of which
    # floors `between` (floored)
    between_from: str = ""
    between_own: tuple[tuple[str, float, int], ...] = ()

    def between_sd(self, variant: str, metric: str = THROUGHPUT) -> float:
        """The spread between studies a verdict of this variant on this metric carries (0: none)."""
        table = dict(self.between)
        return table.get(between_key(metric, variant), table.get(between_key(metric, OTHER), 0.0))

    def floored(self, own: dict[str, tuple[float, int]]) -> Design:
        """This design with the machine's own spreads (between_key -> (SD, studies)) under its
        table's: each variant's entry becomes the larger of the two (a variant the table names
        only through "other" gets its own entry)."""
        table = dict(self.between)
        for k, (sd, _) in own.items():
            metric, variant = between_parts(k)
            table[k] = max(sd, self.between_sd(variant, metric))
        return replace(self, between=tuple(sorted(table.items())),
                       between_own=tuple(sorted((k, sd, n) for k, (sd, n) in own.items())))

    @property
    def margin_pct(self) -> float:
        """The margin in percent, as sentences and the plan's keys say it."""
        return 100 * self.margin

    @property
    def planned_looks(self) -> tuple[int, ...]:
        return self.looks or plan_looks(self.max_rounds, self.min_runs, max_looks=self.max_looks)

    @property
    def confidence(self) -> float:
        """Per-look confidence: Pocock's level for the study's number of looks, overall 3.5 %; a
        study that looks once (a fixed number of runs, or looks = 1) has the plain 95 %."""
        return _per_look(len(self.planned_looks) if self.adaptive else 1)

    def ahead(self, ran: int) -> Design:
        """This design as the study resumed after `ran` rounds decides at its next look: the looks
        it took and one more, at that many looks' level (a fixed number of runs: unchanged)."""
        if not self.adaptive:
            return self
        return replace(self, looks=tuple(x for x in self.looks if x <= ran) + (ran + 1,))

    def level(self, rounds: Iterable[int] = (), ran: int = 0) -> float:
        """The per-look level of a comparison whose pairs fell in `rounds`, in a study that has run
        `ran` rounds. A comparison whose rounds all came before the study's first look, taken, was
        read with its data once: every later look reads the same pairs again and adds no chance of
        error, so its level is that of the looks that could see more of it, the first and any still
        to come (memory-life's lives end after round 5: resumed after its look at round 7, their
        verdicts keep the 95 % they were decided at, while the steady loads, which went on, look
        twice at 97.9 %). Nothing stops before the first look, so such an end was planned
        (side_by_side_rounds), never read from the ratios; a comparison that stopped later stopped
        for its verdict, and keeps the study's level."""
        looks, rounds = self.planned_looks, set(rounds)
        if not self.adaptive or not rounds or ran < looks[0] or max(rounds) > looks[0]:
            return self.confidence
        return _per_look(1 + sum(1 for x in looks[1:] if x > ran))

    def resumed_confidence(self, last: int, rounds: Iterable[int] = (), ran: int = 0) -> float:
        """The per-look level of a comparison (its pairs' `rounds`; `ran`: the study's rounds so far)
        once the study is resumed with more budget up to round `last`: its looks taken and those the
        resume plans (plan_looks, as study.pace.plan_design plans them), each new one seeing more of
        it. A resume adds at least one look, so the intervals of what goes on are wider than the
        study's own (memory-life resumed after its one look at 95 % looks again at 97.9 %): what a
        forecast of the rounds to decide must assume. A fixed number of runs keeps its level."""
        if not self.adaptive:
            return self.confidence
        resumed = replace(self, looks=plan_looks(max(last, 1), self.min_runs, self.looks, self.max_looks))
        return resumed.level(rounds, ran)

    def last_look(self, rounds_done: int) -> int | None:
        """The latest look at or before this many finished rounds, if any."""
        return max((x for x in self.planned_looks if x <= rounds_done), default=None)

    def to_json(self) -> dict:
        """plan.json's "design" (without the looks: rounds.json holds them as planned and taken)."""
        d = asdict(self)
        d.pop("looks")
        return d

    @classmethod
    def from_plan(cls, plan: dict, schedule: dict | None = None) -> Design:
        """From a plan's JSON (plan.json) and its rounds.json (the looks it planned), so that a
        report decides as the study did. Folders from before plan.json held "design" are read
        from the plan's own keys (margin_pct, ...): the one place that upgrade lives."""
        sched = schedule or {}
        looks = taken_looks(sched.get("design") or {}, sched.get("stop"), len(sched.get("rounds") or ()))
        if isinstance(plan.get("design"), dict):
            d = plan["design"]
            return cls(**{**d, "questions": tuple(d["questions"]), "profiles": tuple(d["profiles"]),
                          "decide_on": tuple(d.get("decide_on") or ()),
                          "margins": tuple((str(k), float(v)) for k, v in d.get("margins") or ()),
                          "between": tuple((str(k), float(v)) for k, v in d.get("between") or ()),
                          "between_own": tuple((str(k), float(v), int(n)) for k, v, n in d.get("between_own") or ()),
                          "looks": looks})
        allocs = [a["name"] if isinstance(a, dict) else a.name for a in plan.get("allocators", [])]
        engines = list(plan.get("engines", []))
        return cls(questions=tuple(plan.get("questions") or default_questions(allocs, engines)),
                   baseline=plan.get("baseline") or fallback_baseline(allocs),
                   baseline_engine=plan.get("baseline_engine") or (engines[0] if engines else ""),
                   margin=float(plan["margin_pct"]) / 100 if "margin_pct" in plan else DEFAULT_MARGIN,
                   target_ci=float(plan["target_ci_pct"]) / 100 if "target_ci_pct" in plan else DEFAULT_TARGET_CI,
                   min_runs=int(plan.get("min_runs") or DEFAULT_MIN_RUNS),
                   max_rounds=int(plan.get("max_rounds") or DEFAULT_MAX_ROUNDS),
                   adaptive=plan.get("runs") is None,
                   profiles=tuple(plan.get("profiles") or ()),
                   looks=looks)
