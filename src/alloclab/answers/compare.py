"""Two or more result folders of the same plan.

Replication (any number of folders, machines may differ): per comparison, each study's verdict
and the ratio of their ratios, replicates / differs / not known (answers.replicate). What to
expect on a new machine (two folders or more): per comparison, the random-effects pooled ratio,
τ and a 95 % prediction interval for one more machine, with its verdict. Before/after (two
folders): each cell and allocator of one folder against the other's, by decide's rule (runs of two
folders share no round: Welch's interval on the logs), refused for folders from different
machines or settings unless forced, naming what differs.
"""

from __future__ import annotations

from alloclab.answers import analyse, metrics, stats
from alloclab.answers.metrics import METRICS
from alloclab.answers.replicate import (
    NewMachine,
    between_folders,
    new_machine,
    new_machine_sentences,
    replicate,
    shared,
    shared_sentences,
)
from alloclab.answers.table import Table, fmt_cmp, params
from alloclab.core.errors import AlloclabError
from alloclab.host.machine import MACHINE_KEYS
from alloclab.plan.design import EQUIVALENT, UNDECIDED


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


def before_after(a: analyse.Study, b: analyse.Study, force: bool = False) -> list[Table]:
    """Per metric, each cell and allocator the two folders share: b ÷ a by decide's rule at 95 %
    and the first folder's margin."""
    diff = differences(a, b)
    if diff and not force:
        raise AlloclabError("the two folders differ in machine or settings:\n    " + "\n    ".join(diff),
                            "compare like with like, or pass --force to compare anyway")
    policy = a.design
    tables = []
    for m in METRICS:
        ga, gb = analyse.by_cell_rounds(a.valid(), m.column), analyse.by_cell_rounds(b.valid(), m.column)
        t = Table(f"compare_{m.column}", f"{m.title}: {b.root.name} against {a.root.name}",
                  ["engine", "part", "parameters", "allocator", f"before ({m.unit})", f"after ({m.unit})",
                   "Δ% [95% CI] verdict"],
                  raw_headers=["engine", "part", "parameters", "allocator", "before_median", "after_median",
                               "ratio", "ci_low", "ci_high", "verdict"],
                  note=f"after ÷ before by the verdicts' rule at 95 % and ±{100 * policy.margin:g} %: runs of two "
                       "folders share no round, so they do not pair (the ratio of the folders' geometric means, "
                       "Welch's interval on the logs); each "
                       "allocator against the baseline, paired within each folder, is the Replication table's "
                       "ratio of ratios")
        for cell in sorted(set(ga) & set(gb), key=analyse.sort_key):
            for alloc in sorted(set(ga[cell]) & set(gb[cell])):
                va, vb = ga[cell][alloc], gb[cell][alloc]
                ma, mb = stats.median(list(va.values())), stats.median(list(vb.values()))
                iv, word = between_folders(va, vb, m.higher_is_better, policy)
                cmp = stats.Comparison(iv.ratio, iv.ci_low, iv.ci_high, word, (iv.ratio - 1) * 100)
                shown = [cell[0], cell[1], params(cell), alloc]
                t.add(shown + [m.fmt(ma), m.fmt(mb), fmt_cmp(cmp)],
                      shown + [ma, mb, cmp.ratio, cmp.ci_low, cmp.ci_high, cmp.verdict])
        if not t.rows:
            raise AlloclabError("the two folders have no cell and allocator in common",
                                "compare two runs of the same plan")
        tables.append(t)
    return tables


def agreement(studies: list[analyse.Study]) -> list[str]:
    """Per metric, how the folders' verdicts agree over the comparisons all of them made: the same
    decided verdict in every folder, decided in some and undecided in others, undecided in all,
    decided in opposite directions, or decided in all but a direction in some and equivalent in
    others; and how many ratios of ratios exclude 1 ("differs"). Where
    effects are large (a life's memory: tens of percent), a ratio of ratios within a ±2 % margin is
    rarely shown, and this is the replication a reader asks for."""
    names = [s.root.name for s in studies]
    reps = [r for r in replicate([s.verdicts() for s in studies], studies[0].design.margin)
            if all(v is not None for v in r.verdicts)]
    out = []
    for metric in dict.fromkeys(r.key[0] for r in reps):
        mine = [r for r in reps if r.key[0] == metric]
        words = [{v.verdict for v in r.verdicts} for r in mine]
        same = sum(len(w) == 1 and UNDECIDED not in w for w in words)
        none = sum(w == {UNDECIDED} for w in words)
        opposite = sum(len(w - {UNDECIDED, EQUIVALENT}) > 1 for w in words)
        some = sum(UNDECIDED in w and len(w) > 1 and len(w - {UNDECIDED, EQUIVALENT}) < 2 for w in words)
        # decided in every folder, but a direction in some and equivalent in others
        apart = len(mine) - same - none - opposite - some
        differs = sum(any(x is not None and x.outcome == "differs" for x in r.against_first) for r in mine)
        out.append(f"Verdicts on {metrics.words(metric)} in {' and '.join(names)}: {same} of {len(mine)} the same and "
                   f"decided, {some} decided in some only, {none} undecided in all, {opposite} opposite, {apart} "
                   f"decided in all but a direction in some and equivalent in others; "
                   f"{differs} ratio(s) of ratios exclude 1.")
    return out


def _ratio(v, metric: str = "", word: str = "") -> str:
    """A ratio with its interval and word (a metric compared as a difference: the difference, in
    points or its unit)."""
    if v is None or v.ratio is None:
        return "–"
    differs = metrics.differs(metric)

    def f(r: float) -> str:
        return f"{metrics.delta(metric, r):+.1f}" if differs else f"{r:.3f}"
    if v.ci_low is None:
        return f"{f(v.ratio)} (no interval)"
    return f"{f(v.ratio)} [{f(v.ci_low)}, {f(v.ci_high)}]{_unit(metric)} {word or v.verdict}"


def replication(studies: list[analyse.Study]) -> Table:
    """Each comparison the studies share: each one's verdict, and each later study's ratio ÷ the
    first's with its 95 % interval, at the first study's margin."""
    names = [s.root.name for s in studies]
    margin = studies[0].design.margin
    reps = replicate([s.verdicts() for s in studies], margin)
    later = [f"{n} ÷ {names[0]} [95% CI]" for n in names[1:]]
    t = Table("replication", f"Replication: {', '.join(names)} (ratio of ratios within ±{100 * margin:g} %, a "
              "difference's (a share's, creep's) difference of differences within its own margin: replicates; "
              "excluding 1 (0): differs; else "
              "not known)",
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
               *[_ratio(v, metric) for v in r.verdicts], *[_ratio(x, metric, x.outcome) for x in rr],
               r.outcome, q, "–" if r.i2 is None else f"{100 * r.i2:.0f} %"],
              [metric, comparison, engine, workload, threads, settings, baseline, variant,
               *[None if v is None else v.ratio for v in r.verdicts],
               *[None if x is None else x.ratio for x in rr], *[None if x is None else x.ci_low for x in rr],
               *[None if x is None else x.ci_high for x in rr], r.outcome, r.q, r.p, r.i2])
    if not t.rows:
        raise AlloclabError("the folders share no comparison", "replicate studies of the same plan")
    return t


def machine_differences(studies: list[analyse.Study]) -> list[str]:
    """What differs between the folders' machines and versions, each against the first; the
    values in the order of the names ("a vs b: kernel: a's vs b's")."""
    out = []
    for s in studies[1:]:
        out += [f"{studies[0].root.name} vs {s.root.name}: {d}" for d in differences(studies[0], s)]
    return out


def _pct1(x: float, metric: str = "") -> str:
    """A ratio's change in percent (a share's: its difference in points)."""
    return f"{metrics.delta(metric, x):+.1f}".replace("-", "−")


def _unit(metric: str) -> str:
    return " " + metrics.delta_unit(metric) if metrics.differs(metric) else ""


ONE = {"machines": "machine", "studies": "study"}  # where()'s unit, one of it


def where(studies: list[analyse.Study]) -> tuple[str, str]:
    """Where a prediction over these folders holds, and what each folder is: a new machine where
    their machines differ, another study where they ran on one machine."""
    if machine_differences(studies):
        return "on a new machine of this kind", "machines"
    return "in another study on this machine", "studies"


def new_machine_table(preds: list[NewMachine], names: list[str], margin: float,
                      on: str = "on a new machine of this kind", unit: str = "machines") -> Table:
    """Per comparison: the pooled ratio over the folders (or machines) and the 95 % prediction
    interval `on`, with its verdict at ±margin."""
    rules = sorted({p.rule for p in preds if p.rule})
    t = Table("new_machine", f"What to expect {on}: {', '.join(names)} pooled (random effects), "
              f"95 % prediction interval, verdict within ±{100 * margin:g} %",
              ["metric", "comparison", "engine", "workload", "threads", "settings", "variant vs baseline", "k",
               "pooled Δ% [95% CI]", "τ (%)", f"{on}: Δ% [95% PI]", "verdict"],
              raw_headers=["metric", "comparison", "engine", "workload", "threads", "settings", "baseline", "variant",
                           "k", "ratio", "ci_low", "ci_high", "tau_log", "pi_low", "pi_high", "pi_df", "verdict"],
              note=f"pooled: DerSimonian–Laird on the log ratios; τ: the spread between {unit} (SD of the log "
                   "ratio); 95 % PI: μ ± t(k − 2)·√(τ² + SE²) (Higgins et al. 2009)"
                   + "".join(f"; {r}" for r in rules))
    for p in preds:
        metric, comparison, engine, workload, threads, settings, baseline, variant = p.key
        t.add([metrics.words(metric), comparison, engine, workload, str(threads), settings, f"{variant} vs {baseline}",
               str(p.k), f"{_pct1(p.ratio, metric)} [{_pct1(p.ci_low, metric)}, {_pct1(p.ci_high, metric)}]"
               + _unit(metric), f"{metrics.said_margin(metric, p.tau):.1f}{_unit(metric)}",
               f"[{_pct1(p.pi_low, metric)}, {_pct1(p.pi_high, metric)}]"
               + _unit(metric) + (f" (t, {p.df} df: k = 2)" if p.rule else ""), p.outcome],
              [metric, comparison, engine, workload, threads, settings, baseline, variant, p.k, p.ratio, p.ci_low,
               p.ci_high, p.tau, p.pi_low, p.pi_high, p.df, p.outcome])
    return t


def new_machine_of(studies: list[analyse.Study]) -> tuple[list[str], Table]:
    """Folders -> the lines on throughput (a heading and one bullet per comparison) and the table
    of every comparison, at the first folder's margin."""
    (on, unit), margin = where(studies), studies[0].design.margin
    verdicts = [s.verdicts() for s in studies]
    preds = new_machine(verdicts, margin)
    sh = shared(verdicts, "throughput", margin)  # three machines or more: τ shared by the comparisons
    lines = shared_sentences(sh, on, unit) if sh else new_machine_sentences(preds, on, unit)
    head = [f"What to expect, {metrics.words('throughput')} (95 % prediction interval; verdict within "
            f"±{100 * margin:g} %):"] if lines else []
    t = new_machine_table(preds, [s.root.name for s in studies], margin, on, unit)
    if sh:  # the lines read τ shared by the comparisons; the table each comparison alone
        t.note += (f". The lines above take τ shared by the {len(sh.preds)} throughput comparisons ({100 * sh.tau:.1f} "
                   f"%, t with {sh.df} degrees of freedom), each {ONE[unit]} left out in turn to calibrate it; this "
                   "table each comparison alone")
    return head + [f"- {x}" for x in lines], t
