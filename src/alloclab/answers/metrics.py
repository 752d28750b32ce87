"""The one registry of metrics: what verdicts compare, what tables show and how sentences name
them. A metric reads one runs.csv column; a verdict's throughput is the workload's headline
column (NOPM for TPC-C, as HammerDB reports it; plan.workload). A server's life adds
creep, given back and overhead, compared only in studies whose rows have them (`for_rows`)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from alloclab.plan import workload
from alloclab.results.store import RunRow


@dataclass(frozen=True)
class Metric:
    column: str  # runs.csv's column
    title: str  # a table's heading
    unit: str
    scale: float  # the column's value / scale is in `unit`
    higher_is_better: bool
    name: str = ""  # verdicts.csv's `metric` ("": never a verdict)
    words: str = ""  # in a sentence
    # a ratio needs positive values: below `floor` (in `unit`) a value is taken as `floor`, the
    # measurement's resolution, so that two runs with none of it compare as equal and one that
    # went the other way is not dropped; without a floor a value of 0 or less is no value
    floor: float | None = None
    # a share compared as a difference in percentage points, not a ratio (a ratio of two shares near
    # 0 swings without bound): the verdict's "ratio" is exp(difference) (decide runs on exp(share)),
    # so that its log is the difference and pooling, looks and rounds to decide work unchanged.
    # Its paired differences take the signed-rank interval of their Hodges-Lehmann shift (the
    # median difference; stats.signed_rank_interval) once there are pairs enough for it: a life's
    # share given back has a heavy tail (now and then an idle phase trims most of one burst: two
    # arenas' lives gave back 2-10 % and, in about one life in eight, 35-64 %), which widened the t
    # interval past deciding and left its 95 % unkept (tests/test_stats.py measures both)
    points: bool = False
    margin: float | None = None  # its own equivalence margin (in its unit), else the study's

    def fmt(self, v: float | None) -> str:
        if v is None:
            return "–"
        x = v / self.scale
        if self.column == "ops_per_s":
            return f"{x / 1e6:.3f}M" if x >= 1e6 else f"{x / 1e3:.1f}k" if x >= 1e3 else f"{x:.0f}"
        # three figures under 0.1 (a few-µs p99 in ms is 0.00412, not 0.00)
        return f"{x:.3g}" if 0 < x < 0.1 else f"{x:.2f}" if x < 100 else f"{x:.0f}"


THROUGHPUT = Metric("ops_per_s", "Throughput", "ops/s", 1, True, "throughput", "throughput")
P99 = Metric("p99_ns", "p99 latency per call", "ms", 1e6, False, "p99_latency", "p99 latency")
PEAK_RSS = Metric("peak_rss_bytes", "Peak RSS (VmHWM)", "MiB", 2**20, False, "peak_rss", "peak RSS")
METRICS = (THROUGHPUT, P99, PEAK_RSS)  # what every comparison is made on
NOPM = Metric("nopm", "TPC-C NOPM (from d_next_o_id)", "new orders/min", 1, True)
# a server's life: settled RSS's slope over cycles (under 1 MiB per cycle: none), the share of a
# burst's excess given back while idle (a difference under 5 points: none), RSS over the engine's
# own account at the last idle end (none where the account is larger: it counts what it reserved)
CREEP = Metric("creep_mib_per_cycle", "Creep (settled RSS per cycle)", "MiB/cycle", 1, False, "creep",
               "creep of settled RSS", floor=1.0)
GIVEN_BACK = Metric("given_back_share", "Given back after a burst", "share", 1, True, "given_back",
                    "share of a burst given back", points=True, margin=0.05)
OVERHEAD = Metric("overhead_bytes", "RSS over the engine's account", "MiB", 2**20, False, "overhead",
                  "RSS over the engine's own account")
LIFE = (CREEP, GIVEN_BACK, OVERHEAD)
BY_NAME = {m.name: m for m in (*METRICS, *LIFE)}
BY_COLUMN = {m.column: m for m in (*METRICS, NOPM)}  # a workload's headline column -> its metric


def value(r: RunRow, m: Metric) -> float | None:
    """The row's value of a verdict's metric, None where the run has none (e.g. a client that
    printed no percentile). Throughput is the workload's headline column."""
    v = r.value(workload.of(r.workload).headline if m is THROUGHPUT else m.column)
    if v is None:
        return None
    if m.scale != 1:
        v = v / m.scale
    if m.points:
        return float(v) if math.isfinite(v) else None
    if m.floor is not None:
        return float(max(v, m.floor))
    return float(v) if v and v > 0 else None


def for_rows(rows: Iterable[RunRow]) -> tuple[Metric, ...]:
    """The metrics a study's verdicts are made on: every study's, and a life's where its rows
    measured one (a study without lives keeps its verdicts as they were)."""
    rows = list(rows)
    return METRICS + tuple(m for m in LIFE if any(r.value(m.column) is not None for r in rows))


def delta(name: str, ratio: float) -> float:
    """A verdict's ratio (or a bound of it) as its difference is said: percent, or for a share
    compared in points (`points`) the difference in percentage points."""
    m = BY_NAME.get(name)
    return 100 * math.log(ratio) if m is not None and m.points else (ratio - 1) * 100


def delta_unit(name: str) -> str:
    m = BY_NAME.get(name)
    return "points" if m is not None and m.points else "%"


def margin_of(name: str, study_margin: float, margins: Iterable[tuple[str, float]] = ()) -> float:
    """The equivalence margin a metric's verdicts use (a fraction; a share's: points / 100): the
    plan's for it (`margins`, Design.margins: plan key margins_pct), else its own, else the study's."""
    given = dict(margins)
    if name in given:
        return given[name]
    m = BY_NAME.get(name)
    return m.margin if m is not None and m.margin is not None else study_margin


def within(name: str, lo: float, hi: float, study_margin: float, margins: Iterable[tuple[str, float]] = ()) -> bool:
    """Whether an interval of a ratio (for a share in points: of exp(difference)) lies within the
    metric's equivalence margin."""
    m, margin = BY_NAME.get(name), margin_of(name, study_margin, margins)
    if m is not None and m.points:
        return -margin <= math.log(lo) and math.log(hi) <= margin
    return 1 - margin <= lo and hi <= 1 + margin


def _said_apart(name: str, study_margin: float, margins: tuple[tuple[str, float], ...]) -> bool:
    """Whether a metric's margin is said beside the study's: a share compared in points, or a
    margin that is not the study's."""
    m = BY_NAME.get(name)
    return m is not None and (m.points or margin_of(name, study_margin, margins) != study_margin)


def margin_words(names, study_margin: float, workloads: Iterable[str] = (),
                 margins: Iterable[tuple[str, float]] = ()) -> str:
    """The equivalence margins of the metrics `names` (verdict names: the plan's decide_on) as the
    start line says them: "±2 %", and each metric with a margin of its own (its default or the
    plan's, `margins`) after it ("; share of a burst given back: ±5 points"). No names: the
    default, a life's memory metrics among them where `workloads` holds a life."""
    names = names or tuple(dict.fromkeys(m for n in workloads for m in workload.of(n).memory_metrics))
    margins = tuple(margins)
    own = [(words(n), 100 * margin_of(n, study_margin, margins), delta_unit(n)) for n in names
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
        m, margin = BY_NAME[n], 100 * margin_of(n, study_margin, margins)
        said = m.words[:1].upper() + m.words[1:]
        out += (f" {said}: a difference in percentage points, {robust}decided when its interval excludes 0, "
                f"equivalent within ±{margin:g} points." if m.points else f" {said}: equivalent within ±{margin:g} %.")
    return out


def words(name: str) -> str:
    """A verdict's metric as a sentence names it."""
    return BY_NAME[name].words if name in BY_NAME else name
