"""What verdicts, tables and sentences do with the metrics (each defined once: catalog.metrics):
a row's value of one, its difference as said, its margin and its words. A metric reads one
runs.csv column; a verdict's throughput is the workload's headline column (NOPM for TPC-C, as
HammerDB reports it; plan.workload). A workload's own metrics (a server's life: creep, given
back, overhead) are compared only in studies whose rows have them (`for_rows`)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from alloclab.catalog import metrics as cm
from alloclab.catalog.metrics import Metric
from alloclab.plan import workload
from alloclab.results.store import RunRow

THROUGHPUT, P99, PEAK_RSS, METRICS, NOPM = cm.THROUGHPUT, cm.P99, cm.PEAK_RSS, cm.METRICS, cm.NOPM
BY_COLUMN = {m.column: m for m in (*METRICS, NOPM)}  # a workload's headline column -> its metric


def own() -> tuple[Metric, ...]:
    """The verdict metrics the workloads add (a life's memory), in the order they registered."""
    return cm.own()


def life() -> tuple[Metric, ...]:
    """The workloads' own metrics of memory over a server's life (creep, given back, overhead)."""
    return tuple(m for m in cm.own() if m.life)


def by_name(name: str) -> Metric | None:
    return cm.by_name().get(name)


def value(r: RunRow, m: Metric) -> float | None:
    """The row's value of a verdict's metric, None where the run has none (e.g. a client that
    printed no percentile). Throughput is the workload's headline column."""
    v = r.value(workload.of(r.workload).headline if m is THROUGHPUT else m.column)
    if v is None:
        return None
    if m.scale != 1:
        v = v / m.scale
    if m.by_difference:
        return float(v) if math.isfinite(v) else None
    return float(v) if v and v > 0 else None


def for_rows(rows: Iterable[RunRow]) -> tuple[Metric, ...]:
    """The metrics a study's verdicts are made on: every study's, and a life's where its rows
    measured one (a study without lives keeps its verdicts as they were)."""
    rows = list(rows)
    return METRICS + tuple(m for m in own() if any(r.value(m.column) is not None for r in rows))


def delta(name: str, ratio: float) -> float:
    """A verdict's ratio (or a bound of it) as its difference is said: percent, or for a share
    compared in points (`points`) the difference in percentage points, or for a metric compared as
    a difference (`difference`) the difference in its unit."""
    m = by_name(name)
    if m is not None and m.by_difference:
        return m.said_scale * math.log(ratio)
    return (ratio - 1) * 100


def delta_unit(name: str) -> str:
    m = by_name(name)
    return "%" if m is None or not m.by_difference else "points" if m.points else m.unit


def differs(name: str) -> bool:
    """Whether a metric is compared as a difference (its verdict's ratio is exp(difference))."""
    m = by_name(name)
    return m is not None and m.by_difference


def said_margin(name: str, margin: float) -> float:
    """A margin (as margin_of gives it) as the metric's difference is said (delta_unit): percent or
    points, or for a difference in its own unit, in that unit."""
    m = by_name(name)
    return margin * (m.said_scale if m is not None else 100)


def shown_margin(name: str, study_margin: float, margins: Iterable[tuple[str, float]] = ()) -> float:
    """A metric's equivalence margin as its difference is said (said_margin)."""
    return said_margin(name, margin_of(name, study_margin, margins))


def margin_of(name: str, study_margin: float, margins: Iterable[tuple[str, float]] = ()) -> float:
    """The equivalence margin a metric's verdicts use (a fraction; a share's: points / 100; a
    difference in its own unit's: in that unit): the
    plan's for it (`margins`, Design.margins: plan key margins_pct), else its own, else the study's."""
    given = dict(margins)
    if name in given:
        return given[name]
    m = by_name(name)
    return m.margin if m is not None and m.margin is not None else study_margin


def within(name: str, lo: float, hi: float, study_margin: float, margins: Iterable[tuple[str, float]] = ()) -> bool:
    """Whether an interval of a ratio (for a share in points: of exp(difference)) lies within the
    metric's equivalence margin."""
    m, margin = by_name(name), margin_of(name, study_margin, margins)
    if m is not None and m.by_difference:
        return -margin <= math.log(lo) and math.log(hi) <= margin
    return 1 - margin <= lo and hi <= 1 + margin


def _said_apart(name: str, study_margin: float, margins: tuple[tuple[str, float], ...]) -> bool:
    """Whether a metric's margin is said beside the study's: a share compared in points, or a
    margin that is not the study's."""
    m = by_name(name)
    return m is not None and (m.by_difference or margin_of(name, study_margin, margins) != study_margin)


def margin_words(names, study_margin: float, workloads: Iterable[str] = (),
                 margins: Iterable[tuple[str, float]] = ()) -> str:
    """The equivalence margins of the metrics `names` (verdict names: the plan's decide_on) as the
    start line says them: "±2 %", and each metric with a margin of its own (its default or the
    plan's, `margins`) after it ("; share of a burst given back: ±5 points"). No names: the
    default, a life's memory metrics among them where `workloads` holds a life."""
    names = names or tuple(dict.fromkeys(m.name for n in workloads for m in workload.of(n).metrics))
    margins = tuple(margins)
    own = [(words(n), shown_margin(n, study_margin, margins), delta_unit(n)) for n in names
           if _said_apart(n, study_margin, margins)]
    return f"±{100 * study_margin:g} %" + "".join(f"; {w}: ±{m:g} {u}" for w, m, u in own)


def own_margins(names: Iterable[str], study_margin: float, margins: Iterable[tuple[str, float]] = (),
                robust_from: int | None = None) -> str:
    """What a verdict note says of the metrics among `names` whose margin is not the study's: a
    share compared in points ("... equivalent within ±5 points.", with the rounds from which its
    interval is the signed-rank one, `robust_from`), and a metric the plan gives a margin of its
    own (margins_pct)."""
    margins, out = tuple(margins), ""
    robust = (f"the median of the rounds' differences (Hodges-Lehmann) with the signed-rank interval from "
              f"{robust_from} rounds on (before, the mean with its t interval), " if robust_from else "")
    for n in (n for n in dict.fromkeys(names) if _said_apart(n, study_margin, margins)):
        m, margin = by_name(n), shown_margin(n, study_margin, margins)
        said = m.words[:1].upper() + m.words[1:]
        if m.points:
            out += (f" {said}: a difference in percentage points, {robust}decided when its interval excludes 0, "
                    f"equivalent within ±{margin:g} points.")
        elif m.difference:
            out += (f" {said}: a difference in {m.unit}, decided when its interval excludes 0, equivalent within "
                    f"±{margin:g} {m.unit}.")
        else:
            out += f" {said}: equivalent within ±{margin:g} %."
    return out


def words(name: str) -> str:
    """A verdict's metric as a sentence names it."""
    m = by_name(name)
    return m.words if m is not None else name


def spreads_words(spreads: Iterable[tuple[str, str, float]]) -> str:
    """(metric, variant, SD) as a sentence lists them, throughput's first: "throughput: jemalloc
    0.8 %, tcmalloc 2.2 %; p99 latency: tcmalloc 1.7 %"."""
    per: dict[str, list[str]] = {}
    for metric, said, sd in sorted(set(spreads), key=lambda c: (c[0] != THROUGHPUT.name, c)):
        per.setdefault(metric, []).append(f"{said} {said_margin(metric, sd):.1f} {delta_unit(metric)}")
    return "; ".join(f"{words(m)}: {', '.join(x)}" for m, x in per.items())


def between_words(verdicts: Iterable, own: Iterable = ()) -> str:
    """What a verdict note says of the spread between studies the verdicts' intervals carried
    (Verdict.between_sd: the plan's between_studies_pct, per metric), and of this machine's own
    spreads that floored it (Design.between_own: key, SD, studies); "" where none carried any."""
    carried = [v for v in verdicts if v.between_sd]
    each = spreads_words((v.metric, v.variant, v.between_sd) for v in carried)
    if not each:
        return ""
    own = list(own)
    mine = (f"; on this machine at least its own, from {max(n for _, _, n in own)} of its stored studies "
            "(plan key between_studies_from)") if own else ""
    sd = "SD of the log ratio" + (", or of a difference" if any(differs(v.metric) for v in carried) else "")
    return (f" The allocators' intervals also carry how far each ratio moves between studies on one machine an "
            f"hour apart ({sd}, {each}; the plan's between_studies_pct, from "
            f"stored studies{mine}), so that they cover what another study here would read, not only this "
            "study's rounds.")
