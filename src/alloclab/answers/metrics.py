"""The one registry of metrics: what verdicts compare, what tables show and how sentences name
them. A metric reads one runs.csv column; a verdict's throughput is the workload's headline
column (NOPM for TPC-C, as HammerDB reports it; plan.workloads)."""

from __future__ import annotations

from dataclasses import dataclass

from alloclab.plan import workloads
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
BY_NAME = {m.name: m for m in METRICS}


def value(r: RunRow, m: Metric) -> float | None:
    """The row's value of a verdict's metric, None where the run has none (e.g. a client that
    printed no percentile). Throughput is the workload's headline column."""
    v = getattr(r, workloads.of(r.workload).headline if m is THROUGHPUT else m.column)
    if m.scale != 1:
        v = v / m.scale
    return float(v) if v and v > 0 else None


def words(name: str) -> str:
    """A verdict's metric as a sentence names it."""
    return BY_NAME[name].words if name in BY_NAME else name
