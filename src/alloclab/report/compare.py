"""Two or more result folders of the same plan.

Replication (any number of folders, machines may differ): per comparison, each study's verdict
and the ratio of their ratios, replicates / differs / not known (answers.replicate). Before/after
(two folders): the same cells' medians against each other, refused for folders from different
machines or settings unless forced, naming what differs.
"""

from __future__ import annotations

from alloclab.answers import analyse, metrics, stats
from alloclab.answers.metrics import METRICS
from alloclab.answers.replicate import replicate
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


def _ratio(v) -> str:
    if v is None:
        return "–"
    if v.ci_low is None:
        return f"{v.ratio:.3f} (no interval)" if v.ratio is not None else "–"
    return f"{v.ratio:.3f} [{v.ci_low:.3f}, {v.ci_high:.3f}] {v.verdict}"


def replication(studies: list[analyse.Study]) -> Table:
    """Each comparison the studies share: each one's verdict, and each later study's ratio ÷ the
    first's with its 95 % interval, at the first study's margin."""
    names = [s.root.name for s in studies]
    margin = studies[0].policy.margin
    reps = replicate([s.verdicts() for s in studies], margin)
    later = [f"{n} ÷ {names[0]} [95% CI]" for n in names[1:]]
    t = Table("replication", f"Replication: {', '.join(names)} (ratio of ratios within ±{100 * margin:g} %: "
              "replicates; excluding 1: differs; else not known)",
              ["metric", "comparison", "engine", "workload", "threads", "settings", "variant vs baseline", *names,
               *later, "outcome", "Q (p)", "I²"],
              raw_headers=["metric", "comparison", "engine", "workload", "threads", "settings", "baseline", "variant",
                           *[f"ratio_{i + 1}" for i in range(len(names))],
                           *[f"ratio_of_ratios_{i + 2}" for i in range(len(later))],
                           *[f"ci_low_{i + 2}" for i in range(len(later))],
                           *[f"ci_high_{i + 2}" for i in range(len(later))], "outcome", "q", "p", "i2"])
    for r in reps:
        metric, comparison, engine, workload, threads, settings, baseline, variant = r.key
        rr = list(r.against_first[1:])
        q = "–" if r.q is None else f"{r.q:.2f} ({r.p:.3f})"
        t.add([metrics.words(metric), comparison, engine, workload, str(threads), settings, f"{variant} vs {baseline}",
               *[_ratio(v) for v in r.verdicts],
               *["–" if x is None else (f"{x.ratio:.3f} [{x.ci_low:.3f}, {x.ci_high:.3f}] {x.outcome}"
                                        if x.ci_low is not None else f"{x.ratio:.3f} (no interval)") for x in rr],
               r.outcome, q, "–" if r.i2 is None else f"{100 * r.i2:.0f} %"],
              [metric, comparison, engine, workload, threads, settings, baseline, variant,
               *[None if v is None else v.ratio for v in r.verdicts],
               *[None if x is None else x.ratio for x in rr], *[None if x is None else x.ci_low for x in rr],
               *[None if x is None else x.ci_high for x in rr], r.outcome, r.q, r.p, r.i2])
    if not t.rows:
        raise AlloclabError("the folders share no comparison", "replicate studies of the same plan")
    return t


def machine_differences(studies: list[analyse.Study]) -> list[str]:
    """What differs between the folders' machines and versions, each against the first."""
    out = []
    for s in studies[1:]:
        out += [f"{s.root.name} vs {studies[0].root.name}: {d}" for d in differences(studies[0], s)]
    return out
