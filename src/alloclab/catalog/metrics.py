"""Every metric's one definition: the runs.csv column it reads, its heading, unit and scale,
its direction, the name its verdicts carry, its words in a sentence, and how it is compared (a
ratio, a share in points or a difference in its unit, a margin of its own). Every study's are
here; a workload adds its own (a life's memory: workloads.life_runs) when it registers
(plan.workload.register), and the
plan's keys (decide_on, margins_pct), the verdicts, the answers and the report iterate over
`verdicts()` and `own()`."""

from __future__ import annotations

from dataclasses import dataclass

from alloclab.core.errors import AlloclabError


@dataclass(frozen=True)
class Metric:
    column: str  # runs.csv's column
    title: str  # a table's heading
    unit: str
    scale: float  # the column's value / scale is in `unit`
    higher_is_better: bool
    name: str = ""  # verdicts.csv's `metric` ("": never a verdict)
    words: str = ""  # in a sentence
    # a share compared as a difference in percentage points, not a ratio (a ratio of two shares near
    # 0 swings without bound): the verdict's "ratio" is exp(difference) (decide runs on exp(share)),
    # so that its log is the difference and pooling, looks and rounds to decide work unchanged.
    # Its paired differences take the signed-rank interval of their Hodges-Lehmann shift (the
    # median difference; stats.signed_rank_interval) once there are pairs enough for it: a life's
    # share given back has a heavy tail (now and then an idle phase trims most of one burst: two
    # arenas' lives gave back 2-10 % and, in about one life in eight, 35-64 %), which widened the t
    # interval past deciding and left its 95 % unkept (tests/test_stats.py measures both)
    points: bool = False
    # compared as a difference in its own unit, not a ratio, by the same rule as a share (exp(value)),
    # with the t interval: a quantity near 0 that may go either way (a life's creep, MiB a cycle).
    # A ratio of two such needs a floor to stay positive, and a floor biases it: a slope that reads
    # -3 in one life and +3 in the next averages none, but floored at 1 it reads 1 and 3, "creeps
    # more" than a flat one's 1 and 1 (PostgreSQL's pool under jemalloc, 14 lives averaging -0.3 MiB
    # a cycle, read +43 % [-7, +120] against glibc's flat pool and moving up with the rounds)
    difference: bool = False
    margin: float | None = None  # its own equivalence margin (in its unit), else the study's
    # memory over a server's life (creep, given back, overhead): the answer says its leanest setting,
    # its price in speed and the memory it needs; any other workload's own metric is said beside its
    # throughput
    life: bool = False

    @property
    def by_difference(self) -> bool:
        """Compared as a difference (a share's in points, or in its own unit), not a ratio."""
        return self.points or self.difference

    @property
    def said_scale(self) -> float:
        """How a fraction of it (a ratio's change, a share, a margin or spread) is said and given in a
        plan: ×100 (percent, points), or as it is for a difference in its own unit."""
        return 1.0 if self.difference else 100.0

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
NOPM = Metric("nopm", "TPC-C NOPM (from d_next_o_id)", "new orders/min", 1, True)  # TPC-C's throughput

_OWN: list[Metric] = []  # the verdict metrics workloads add, in the order they registered


def register(*metrics: Metric) -> None:
    """A workload's own verdict metrics (a life's memory): each named once."""
    taken = {m.name for m in (*METRICS, *_OWN)}
    for m in metrics:
        if m in _OWN:
            continue
        if not m.name or m.name in taken:
            raise AlloclabError(f"metric {m.column}: its verdict name {m.name!r} is empty or taken")
        _OWN.append(m)
        taken.add(m.name)


def own() -> tuple[Metric, ...]:
    """The verdict metrics the registered workloads add."""
    return tuple(_OWN)


def verdicts() -> tuple[Metric, ...]:
    """Every metric a verdict may be made on (plan key margins_pct names them)."""
    return METRICS + own()


def by_name() -> dict[str, Metric]:
    return {m.name: m for m in verdicts()}


def goals() -> tuple[str, ...]:
    """What a study's rounds may go on for (plan key decide_on): throughput and the workloads' own."""
    return (THROUGHPUT.name,) + tuple(m.name for m in own())
