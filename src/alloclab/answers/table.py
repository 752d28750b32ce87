"""A table of the analysis (what the report shows, with the numbers behind it as CSV), and how
a table or chart names a cell and writes a statistic: the labels they share. Tables are built in
answers (answers.tables, the workloads' own); report/ only renders them."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from dataclasses import dataclass, field

from alloclab.answers import decide
from alloclab.answers.metrics import Metric
from alloclab.plan import workload


@dataclass
class Table:
    name: str
    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    raw: list[list] = field(default_factory=list)  # the numbers behind `rows`, for the CSV
    raw_headers: list[str] | None = None
    note: str = ""

    def add(self, shown: list[str], raw: list | None = None) -> None:
        """A row as shown (one cell per heading) and its numbers for the CSV (one per raw heading):
        a row of another width would shift every column after it."""
        raw = raw if raw is not None else shown
        if len(shown) != len(self.headers) or len(raw) != len(self.raw_headers or self.headers):
            raise ValueError(f"table {self.name}: a row of {len(shown)} cells and {len(raw)} numbers, for "
                             f"{len(self.headers)} headings and {len(self.raw_headers or self.headers)} raw ones")
        self.rows.append([str(x) for x in shown])
        self.raw.append(raw)


def to_csv(t: Table) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(t.raw_headers or t.headers)
    w.writerows(t.raw)
    return buf.getvalue()


def caption(spec_title: str, rows: list) -> str:
    """A chart's caption: what it shows, over how many runs per point."""
    counts: dict = defaultdict(int)
    for r in rows:
        counts[(decide.cell_of(r), r.allocator)] += 1
    n = sorted(counts.values()) or [0]
    return (f"{spec_title}: median of n runs per point (n = {n[0]}–{n[-1]}), error bars = 95 % bootstrap CI of the "
            "median (none where n < 3); y axis starts at 0.")


def params(cell: tuple) -> str:
    c = decide.cell_dict(cell)
    return workload.of(c["workload"]).params(c)


def fmt_ci(m: Metric, s) -> str:
    """A cell's interval (stats.CellStats) in the metric's unit."""
    return f"[{m.fmt(s.ci_low)}, {m.fmt(s.ci_high)}]" if s.enough else "n<3"


def fmt_cmp(c) -> str:
    """A comparison (stats.Comparison, or None) as Δ% [CI] verdict."""
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
