"""How a report names a cell and writes a statistic: the labels its tables and charts share."""

from __future__ import annotations

from alloclab.answers import analyse, stats
from alloclab.answers.analyse import Metric


def params(cell: tuple) -> str:
    c = analyse.cell_dict(cell)
    prof = "" if c["profile"] == "default" else f" [{c['profile']}]"
    prof += "" if c.get("shape", "default") == "default" else f" <{c['shape']}>"
    if c["workload"] == "tpcc":
        mode = f" ({c['tpcc_mode']})" if c.get("tpcc_mode") else ""
        return f"tpcc w{c['warehouses']}{mode}{prof} vu{c['threads']}"
    if c["workload"] == "sysbench":
        client = "" if c.get("client") in ("", "sysbench") else f" ({c['client']})"
        return f"{c['pattern']}{client}{prof} t{c['threads']}"
    return f"{c['workload']} {c['pattern']} k{c['key_bytes']} v{c['value_bytes']} b{c['batch']}{prof} t{c['threads']}"


def fmt_ci(m: Metric, s: stats.CellStats) -> str:
    return f"[{m.fmt(s.ci_low)}, {m.fmt(s.ci_high)}]" if s.enough else "n<3"


def fmt_cmp(c: stats.Comparison | None) -> str:
    if c is None:
        return "no baseline"
    if c.ci_low is None:
        return f"{c.delta_pct:+.1f}% (n<3)"
    return f"{c.delta_pct:+.1f}% [{100 * (c.ci_low - 1):+.1f}, {100 * (c.ci_high - 1):+.1f}] {c.verdict}"
