"""How a report names a cell and writes a statistic: the labels its tables and charts share."""

from __future__ import annotations

from alloclab.answers import analyse, stats
from alloclab.answers.metrics import Metric
from alloclab.plan import workload


def params(cell: tuple) -> str:
    c = analyse.cell_dict(cell)
    return workload.of(c["workload"]).params(c)


def fmt_ci(m: Metric, s: stats.CellStats) -> str:
    return f"[{m.fmt(s.ci_low)}, {m.fmt(s.ci_high)}]" if s.enough else "n<3"


def fmt_cmp(c: stats.Comparison | None) -> str:
    if c is None:
        return "no baseline"
    if c.ci_low is None:
        return f"{c.delta_pct:+.1f}% (n<3)"
    return f"{c.delta_pct:+.1f}% [{100 * (c.ci_low - 1):+.1f}, {100 * (c.ci_high - 1):+.1f}] {c.verdict}"


def fmt_num(x: float | None, fmt: str, unit: str = "") -> str:
    """`x` in `fmt` with `unit`, – where unknown; never "-0" (a share of −0.3 % shown as 0 is 0)."""
    if x is None:
        return "–"
    s = format(x, fmt)
    return (s.lstrip("-").replace("+", "") if s.lstrip("+-").strip("0.") == "" else s) + unit
