"""Before/after: the same cells in two result folders, with the same verdicts as a report.

Refuses folders from different machines or settings unless forced, naming what differs.
"""

from __future__ import annotations

from alloclab.answers import analyse, stats
from alloclab.answers.metrics import METRICS
from alloclab.core.errors import AlloclabError
from alloclab.host.machine import MACHINE_KEYS
from alloclab.report import Table, fmt_cmp, params


def _driver_engines(m: dict) -> dict:
    return (m.get("driver") or {}).get("engines", {})


def differences(a: analyse.Study, b: analyse.Study) -> list[str]:
    out = []
    for k in MACHINE_KEYS:
        if a.machine.get(k) != b.machine.get(k):
            out.append(f"machine {k}: {a.machine.get(k)!r} vs {b.machine.get(k)!r}")
    fa, fb = a.machine.get("data_filesystem", {}).get("type"), b.machine.get("data_filesystem", {}).get("type")
    if fa != fb:
        out.append(f"data filesystem: {fa!r} vs {fb!r}")
    ea, eb = _driver_engines(a.machine), _driver_engines(b.machine)
    for e in sorted(set(a.engines) & set(b.engines)):
        if ea.get(e) != eb.get(e):
            out.append(f"{e} version: {ea.get(e)!r} vs {eb.get(e)!r}")
    for k in ("engine_options", "warmup_s"):
        if a.plan.get(k) != b.plan.get(k):
            out.append(f"plan {k}: {a.plan.get(k)!r} vs {b.plan.get(k)!r}")
    return out


def compare(a: analyse.Study, b: analyse.Study, force: bool = False) -> list[Table]:
    diff = differences(a, b)
    if diff and not force:
        raise AlloclabError("the two folders differ in machine or settings:\n    " + "\n    ".join(diff),
                            "compare like with like, or pass --force to compare anyway")
    tables = []
    for m in METRICS:
        ga = analyse.by_cell(a.valid(), m.column)
        gb = analyse.by_cell(b.valid(), m.column)
        t = Table(f"compare_{m.column}", f"{m.title}: {b.root.name} against {a.root.name}",
                  ["engine", "part", "parameters", "allocator", f"before ({m.unit})", f"after ({m.unit})",
                   "Δ% [95% CI] verdict"],
                  raw_headers=["engine", "part", "parameters", "allocator", "before_median", "after_median",
                               "ratio", "ci_low", "ci_high", "verdict"])
        for cell in sorted(set(ga) & set(gb), key=analyse.sort_key):
            for alloc in sorted(set(ga[cell]) & set(gb[cell])):
                va, vb = ga[cell][alloc], gb[cell][alloc]
                ma, mb = stats.median(va), stats.median(vb)
                cmp = stats.compare(va, vb, higher_is_better=m.higher_is_better) if ma > 0 else None
                t.add([cell[0], cell[1], params(cell), alloc, m.fmt(ma), m.fmt(mb), fmt_cmp(cmp)],
                      [cell[0], cell[1], params(cell), alloc, ma, mb] +
                      ([cmp.ratio, cmp.ci_low, cmp.ci_high, cmp.verdict] if cmp else [None] * 4))
        if not t.rows:
            raise AlloclabError("the two folders have no cell and allocator in common",
                                "compare two runs of the same plan")
        tables.append(t)
    return tables
