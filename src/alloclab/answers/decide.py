"""Verdicts: every comparison a study asks, from its finished runs, paired by round.

A study's questions are comparisons of two groups of runs that differ in one thing only:
`allocators` (each allocator against the baseline allocator, same engine and cell),
`engines` (each engine against the baseline engine, same cell and allocator) and `profiles`
(each engine-settings profile against the first one). Each comparison is made on three
metrics: throughput (NOPM for TPC-C), p99 latency per call and peak RSS, and for a server's
life also creep, given back and overhead (a workload's own: metrics.own()). The ratio
variant / baseline gets an interval that pairs runs of the same round (see
stats.ratio_interval) and one verdict word (stats.verdict_word).

The study runner uses the same comparisons to decide which cells still need runs
(`active_units`), and the report uses them for its answers: one rule for both.
Pure: rows in, verdicts out; no I/O.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from alloclab.answers import stats
from alloclab.answers.metrics import (
    THROUGHPUT,
    Metric,
    by_name,
    delta,
    delta_unit,
    for_rows,
    margin_of,
    own,
    value,
)
from alloclab.catalog.allocators import short_name
from alloclab.plan import workload
from alloclab.plan.design import FASTER, HIGHER, LOWER, SLOWER, UNDECIDED, Design
from alloclab.results.store import CELL_FIELDS, RunRow, rounds_ran

# a cell's tuple: the shared fields, then the values of its workload's own that tell its cells
# apart (plan.workload's cell_keys, as one tuple), then threads (last: sweeps drop it)
OWN = "own"
CELL = CELL_FIELDS[:-1] + (OWN,) + CELL_FIELDS[-1:]


def cell_of(r: RunRow) -> tuple:
    """The row's cell: the common fields and the workload's own keys, as its workload identifies
    them (plan.workload)."""
    wl = workload.of(r.workload)
    over = wl.identity(r)
    shared = tuple(over[f] if f in over else getattr(r, f) for f in CELL_FIELDS)
    # a row made without its workload's columns (NoColumns) has its cell's default of each
    own = tuple(over[k] if k in over else getattr(r.own, k, getattr(wl.Params(), k, None)) for k in wl.cell_keys)
    return shared[:-1] + (own,) + shared[-1:]


def cell_dict(cell: tuple) -> dict:
    """A cell's fields by name, its workload's own keys among them."""
    c = dict(zip(CELL, cell))
    return c | dict(zip(workload.of(c["workload"]).cell_keys, c.pop(OWN)))


def settings_of(cell: tuple) -> str:
    """The cell's parameters other than engine, part and threads, as a short label."""
    c = cell_dict(cell)
    return workload.of(c["workload"]).settings(c)


Unit = tuple  # (cell key as in runs.csv's `cell`, allocator): what one run of a round measures


@dataclass(frozen=True)
class Verdict:
    comparison: str  # allocators | engines | profiles
    engine: str
    workload: str
    threads: int
    settings: str
    metric: str
    baseline: str
    variant: str
    n_baseline: int
    n_variant: int
    n_pairs: int
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str
    rounds_to_decide: int | None
    confidence: float
    allocator: str
    base_unit: Unit
    var_unit: Unit
    machine_fingerprint: str = ""  # of the machine(s) whose runs made it ("a+b": pooled over machines)
    # the mean log ratio, its standard error and degrees of freedom (what replications combine)
    mean_log: float | None = None
    se_log: float | None = None
    df: int = 0
    machine: str = ""  # the machine in a few words where it holds on one machine of several ("": all of them)
    margin: float | None = None  # the equivalence margin its word was decided at (metrics.margin_of)
    between_sd: float = 0.0  # the spread between studies its interval carries (Design.between_sd; 0: none)

    def margin_or(self, study_margin: float) -> float:
        """The margin its word was decided at; for a verdict made without one (built by hand), the
        metric's by metrics.margin_of."""
        return self.margin if self.margin is not None else margin_of(self.metric, study_margin)

    @property
    def delta_pct(self) -> float | None:
        """The difference as it is said: percent, percentage points for a share, or a difference in
        its own unit (`unit`)."""
        return None if self.ratio is None else delta(self.metric, self.ratio)

    @property
    def ci_delta(self) -> tuple[float, float] | None:
        """The interval in the unit of delta_pct."""
        return None if self.ci_low is None else (delta(self.metric, self.ci_low), delta(self.metric, self.ci_high))

    @property
    def unit(self) -> str:
        return delta_unit(self.metric)

    def to_json(self) -> dict:
        d = asdict(self)
        d["base_unit"], d["var_unit"] = list(self.base_unit), list(self.var_unit)
        return d


# ratio: variant ÷ baseline; for a metric compared as a difference, exp(difference): delta_pct is then
# the difference in percentage points (unit "points") or in its own unit, else the ratio's change in percent
CSV_COLUMNS = ("engine", "workload", "threads", "settings", "metric", "baseline", "variant", "n_baseline", "n_variant",
               "ratio", "ci_low", "ci_high", "verdict", "rounds_to_decide", "comparison", "allocator", "n_pairs",
               "confidence", "machine_fingerprint", "delta_pct", "unit")


def pair_key(r: RunRow) -> tuple[int, str]:
    """Runs pair when they ran in the same round on the same node (a cell's runs of a round run
    back to back on one machine); on one machine, that is the round."""
    return (r.repeat, r.node)


def mixed_machines(rows: Iterable[RunRow]) -> dict[str, dict[str, list[str]]]:
    """cell -> machine fingerprint -> its nodes, for the cells whose valid runs came from machines
    that differ (host.machine.FINGERPRINT_KEYS): their ratios pair runs within a node, and pool over
    those machines, which the report says."""
    by: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for r in rows:
        if r.status == "ok" and r.allocator_verified and r.purpose == "measure":
            by[r.cell][r.machine_fingerprint].add(r.node or "this machine")
    return {c: {f: sorted(n) for f, n in fps.items()} for c, fps in by.items() if len(fps) > 1}


def per_round(rows: Iterable[RunRow], get: Callable[[RunRow], float | None]) -> dict[tuple, dict[str, dict]]:
    """cell tuple -> allocator -> (round, node) -> `get` of its runs there (None: left out): where
    a unit ran more than once in a round (in_their_places), their mean, so each round is one pair."""
    got: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for r in rows:
        v = get(r)
        if v is not None:
            got[cell_of(r)][r.allocator][pair_key(r)].append(v)
    out: dict = defaultdict(lambda: defaultdict(dict))
    for c, by in got.items():
        for a, per in by.items():
            out[c][a] = {k: sum(vs) / len(vs) for k, vs in per.items()}
    return out


def _groups(rows: Iterable[RunRow], m: Metric) -> dict[tuple, dict[str, dict[int, float]]]:
    """cell tuple -> allocator -> (round, node) -> value, valid runs only (per_round)."""
    return per_round(rows, lambda r: value(r, m) if r.status == "ok" and r.allocator_verified else None)


def places(rows: Iterable[RunRow]) -> dict[str, int]:
    """cell -> the measured runs each of its allocators had in a round (plan key runs_per_round),
    as the runs say: the most of a unit in its cell's first round, where every unit runs and none
    has taken a decided one's place yet (in_their_places starts at the first look)."""
    first: dict[str, int] = {}
    count: dict[tuple, int] = defaultdict(int)
    for r in rows:
        if r.purpose == "measure":
            first[r.cell] = min(first.get(r.cell, r.repeat), r.repeat)
            count[(r.cell, r.allocator, r.repeat)] += 1
    out: dict[str, int] = {}
    for (cell, _, rnd), n in count.items():
        if rnd == first[cell]:
            out[cell] = max(out.get(cell, 1), n)
    return out


def more_runs(rows: Iterable[RunRow]) -> int:
    """How many measured runs took a decided allocator's place in a round (in_their_places): a
    unit's valid runs in a round beyond its places there (places: runs_per_round, mostly 1)."""
    measured = [r for r in rows if r.purpose == "measure"]
    n = places(measured)
    count: dict[tuple, int] = defaultdict(int)
    for r in measured:
        if r.status == "ok" and r.allocator_verified:
            count[(r.cell, r.allocator, pair_key(r))] += 1
    return sum(max(0, k - n.get(u[0], 1)) for u, k in count.items())


def _cell_keys(rows: Iterable[RunRow]) -> dict[tuple, str]:
    return {cell_of(r): r.cell for r in rows}


def _pairs_to_compare(policy: Design, cells: Iterable[tuple], allocators_of: dict) -> list[tuple]:
    """(kind, base cell, base allocator, variant cell, variant allocator) for every question."""
    cells = sorted(set(cells), key=lambda c: tuple(str(x) for x in c))
    cellset = set(cells)
    ei, pi = CELL.index("engine"), CELL.index("profile")
    out = []
    if "allocators" in policy.questions:
        for c in cells:
            if policy.baseline in allocators_of[c]:
                out += [("allocators", c, policy.baseline, c, a) for a in allocators_of[c] if a != policy.baseline]
    if "engines" in policy.questions:
        for c in cells:
            if c[ei] == policy.baseline_engine:
                continue
            ref = c[:ei] + (policy.baseline_engine,) + c[ei + 1:]
            if ref in cellset:
                out += [("engines", ref, a, c, a) for a in allocators_of[c] if a in allocators_of[ref]]
    if "profiles" in policy.questions and len(policy.profiles) > 1:
        first = policy.profiles[0]
        for c in cells:
            if c[pi] == first:
                continue
            ref = c[:pi] + (first,) + c[pi + 1:]
            if ref in cellset:
                out += [("profiles", ref, a, c, a) for a in allocators_of[c] if a in allocators_of[ref]]
    return out


def ratio_verdict(base: dict, var: dict, higher_is_better: bool, policy: Design,
                  metric: Metric | None = None, between_sd: float = 0.0,
                  confidence: float | None = None) -> tuple[stats.RatioInterval, str]:
    """The one rule for a comparison: variant / baseline, paired by round, at the policy's
    confidence, and its verdict word (faster, slower, equivalent or undecided), within the
    metric's own margin where it has one. A metric compared as a difference (a share in points,
    metric.points, or creep in its unit, metric.difference) runs on exp(value less a constant both
    sides share, so that no value overflows): the log ratio is then the difference, equivalent
    within ±margin; a share's paired differences take the signed-rank interval (Metric.points says
    why), a difference in its unit the t interval.
    `between_sd`: the ratio's spread between studies on one machine (Design.between_sd);
    `confidence`: the comparison's own level (Design.level), else the policy's."""
    if metric is not None and metric.by_difference:
        both = sorted([*base.values(), *var.values()])
        mid = both[len(both) // 2] if both else 0.0
        base, var = ({k: math.exp(v - mid) for k, v in d.items()} for d in (base, var))
    iv = stats.ratio_interval(base, var, confidence=confidence or policy.confidence,
                              robust=metric is not None and metric.points,
                              between_sd=between_sd)
    if iv.ci_low is None:
        return iv, UNDECIDED
    if metric is None:
        return iv, stats.verdict_word(iv.ci_low, iv.ci_high, higher_is_better, policy.margin)
    return iv, interval_word(metric.name, iv.ci_low, iv.ci_high, policy.margin, policy.margins)


def interval_word(name: str, lo: float, hi: float, study_margin: float,
                  margins: Iterable[tuple[str, float]] = ()) -> str:
    """The verdict word of an interval of a metric's ratio (a share's: of exp(difference)): its
    direction (higher/lower for memory and latency), equivalent within the metric's margin, or
    undecided; the one reading of an interval for verdicts and for predictions over machines."""
    m = by_name(name)
    higher = m.higher_is_better if m is not None else True
    if m is not None and m.by_difference:
        lo, hi = 1 + math.log(lo), 1 + math.log(hi)
    word = stats.verdict_word(lo, hi, higher, margin_of(name, study_margin, margins))
    if higher and m is not None and m is not THROUGHPUT:  # more given back is higher, not faster
        word = {FASTER: HIGHER, SLOWER: LOWER}.get(word, word)
    return word


def verdicts(rows: list[RunRow], policy: Design, metrics: Iterable[Metric] | None = None) -> list[Verdict]:
    """Every comparison the policy asks, on every metric (by default: those the rows measured,
    metrics.for_rows), from the rows as they stand."""
    metrics = for_rows(rows) if metrics is None else metrics
    keys = _cell_keys(rows)
    machines: dict[tuple, set[str]] = defaultdict(set)
    for r in rows:
        if r.status == "ok" and r.allocator_verified and r.machine_fingerprint:
            machines[cell_of(r)].add(r.machine_fingerprint)
    out = []
    ran = rounds_ran(rows)
    for m in metrics:
        groups = _groups(rows, m)
        allocators_of = {c: list(g) for c, g in groups.items()}
        for kind, bc, ba, vc, va in _pairs_to_compare(policy, groups, allocators_of):
            # an allocator against the baseline carries the spread between studies the plan gives
            # its ratio on this metric (none given: the interval is of this study's rounds alone)
            between = policy.between_sd(va, m.name) if kind == "allocators" else 0.0
            # its level: the looks at which its pairs grew (a life that ended before a look keeps its own)
            pairs = {rnd for rnd, _ in set(groups[bc][ba]) & set(groups[vc][va])}  # keys: (round, node)
            conf = policy.level(pairs, ran)
            iv, word = ratio_verdict(groups[bc][ba], groups[vc][va], m.higher_is_better, policy, m, between, conf)
            todo, margin = None, margin_of(m.name, policy.margin, policy.margins)
            if word == UNDECIDED:
                todo = stats.rounds_to_decide(
                    iv.mean_log, iv.sd_log, iv.n, confidence=conf, between_sd=between,
                    margin=math.expm1(margin) if m.by_difference else margin,
                    confidence_at=lambda more, pairs=pairs: policy.resumed_confidence(ran + more, pairs, ran))
            c = cell_dict(vc)
            base_label = {"allocators": short_name(ba), "engines": bc[0], "profiles": bc[CELL.index("profile")]}[kind]
            var_label = {"allocators": short_name(va), "engines": vc[0], "profiles": c["profile"]}[kind]
            out.append(Verdict(
                comparison=kind, engine=c["engine"], workload=c["part"], threads=int(c["threads"]),
                settings=settings_of(vc), metric=m.name, baseline=base_label, variant=var_label,
                n_baseline=iv.n_baseline, n_variant=iv.n_variant, n_pairs=iv.n_pairs, ratio=iv.ratio,
                ci_low=iv.ci_low, ci_high=iv.ci_high, verdict=word, rounds_to_decide=todo, confidence=conf,
                allocator=short_name(va), base_unit=(keys.get(bc, ""), ba), var_unit=(keys.get(vc, ""), va),
                machine_fingerprint="+".join(sorted(machines[bc] | machines[vc])), mean_log=iv.mean_log,
                se_log=iv.se_log, df=iv.df, margin=margin, between_sd=between))
    return out


@dataclass(frozen=True)
class UnitState:
    n_valid: int  # rounds with a valid run
    attempts: int  # rounds it ran in
    failing: bool  # its last two rounds' runs failed or were not proved: it gets no more runs
    half_width: float | None  # own 95 % interval of the mean throughput, relative


def unit_states(rows: list[RunRow]) -> dict[Unit, UnitState]:
    """Per unit, counted in rounds (a unit's more runs in a round, in_their_places, are one
    round): rounds with a valid run, rounds tried, whether its last two rounds had none, and the
    interval of its rounds' mean throughput."""
    by: dict[Unit, dict[tuple, list[RunRow]]] = defaultdict(lambda: defaultdict(list))
    for r in sorted(rows, key=lambda r: r.index):
        by[(r.cell, r.allocator)][pair_key(r)].append(r)
    out = {}
    for u, rounds in by.items():
        ok = {k: [r for r in rs if r.status == "ok" and r.allocator_verified] for k, rs in rounds.items()}
        vals = [sum(vs) / len(vs) for vs in ([v for v in (value(r, THROUGHPUT) for r in got) if v is not None]
                                             for got in ok.values()) if vs]
        last2 = list(ok.values())[-2:]
        failing = len(last2) == 2 and not any(last2)
        out[u] = UnitState(sum(1 for got in ok.values() if got), len(rounds), failing,
                           stats.mean_ci_half_width(vals) if len(vals) >= 2 else None)
    return out


def stopping(rows: list[RunRow], policy: Design) -> tuple[Metric, ...]:
    """The metrics whose comparisons must be decided before a unit stops: the plan's decide_on;
    by default throughput, and a life's memory metrics where the rows measured them."""
    if policy.decide_on:
        return tuple(by_name(n) for n in policy.decide_on)
    return (THROUGHPUT,) + tuple(m for m in for_rows(rows) if m in own())


FAILING = "its last two runs failed or were not proved"


def told_apart(v: Verdict, told: frozenset[str]) -> bool:
    """A throughput verdict of a cell whose throughput is told, never decided on (Plan.told,
    Study.told): it neither keeps rounds going nor counts as an open question."""
    return v.metric == THROUGHPUT.name and v.base_unit[0] in told


def active_units(units: Iterable[Unit], rows: list[RunRow], policy: Design,
                 told: frozenset[str] = frozenset()) -> tuple[set, dict[Unit, str]]:
    """The units that get a run in the next round, and why each other unit does not.

    Comparisons are decided only at the policy's looks: until the first, every unit runs; after
    it, a unit runs while any comparison it takes part in (on `stopping`'s metrics: throughput,
    and a life's memory metrics, unless the plan's decide_on says which) was undecided at the
    latest look; but never throughput's of the cells in `told` (Plan.told: side by side where the same
    engine's speed is measured in turns). Stopping and deciding agree: a unit stops for its
    comparisons' verdicts (equivalent included), never for its own precision alone. A unit with no comparison runs
    until its own interval is within the target. A unit whose last two attempts failed gets no
    more runs."""
    units = list(units)
    states = unit_states(rows)
    empty = UnitState(0, 0, False, None)
    done = rounds_ran(rows)
    look = policy.last_look(done) if policy.adaptive else done
    if look is None:  # before the first look: everyone runs (but a unit that keeps failing)
        why = {u: FAILING for u in units if states.get(u, empty).failing}
        return {u for u in units if u not in why}, why
    # throughput's comparisons, and a life's memory comparisons where the study has lives
    vs = [v for v in verdicts([r for r in rows if r.repeat <= look], policy, stopping(rows, policy))
          if not told_apart(v, told)]

    def precise(u: Unit) -> bool:
        hw = states.get(u, empty).half_width
        return hw is not None and hw <= policy.target_ci

    involved: dict[Unit, list[Verdict]] = defaultdict(list)
    for v in vs:
        involved[v.base_unit].append(v)
        involved[v.var_unit].append(v)
    active, why = set(), {}
    for u in units:
        st = states.get(u, empty)
        if st.failing:
            why[u] = FAILING
            continue
        if st.n_valid < policy.min_runs:
            active.add(u)
            continue
        comps = involved.get(u, [])
        if not comps:
            if policy.decide_on and "throughput" not in policy.decide_on:
                why[u] = f"it is in no comparison of {', '.join(policy.decide_on)} (decide_on)"
            elif precise(u):
                why[u] = f"its own interval is within ±{100 * policy.target_ci:g} %"
            else:
                active.add(u)
            continue
        if any(v.verdict == UNDECIDED for v in comps):
            active.add(u)
        else:
            why[u] = f"every comparison it takes part in was decided at the look after round {look}"
    # a comparison needs both sides in the same round: keep the partner of an active unit running
    for v in vs:
        if v.var_unit in active and v.base_unit in set(units) and not states.get(v.base_unit, empty).failing:
            if v.verdict == UNDECIDED or states.get(v.base_unit, empty).n_valid < policy.min_runs:
                active.add(v.base_unit)
                why.pop(v.base_unit, None)
    return active, why
