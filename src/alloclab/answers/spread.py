"""A machine's own spread between studies: how far each allocator's ratio moved between the
stored studies of this machine and cell, which floors the spread a plan carries
(plan keys between_studies_pct and between_studies_from; plan.design.Design.floored).

The plan's spread is pooled over the machines the store held when it was set; a machine whose
ratios move more than theirs gets intervals too narrow for it (bench/estimand.py: on the
machine whose tcmalloc moved most, 86 % of intervals held the other studies' ratio where 95 %
was stated). Its own spread, once it has stored studies, closes that gap.

The studies read: every folder under the given one (a study folder `alloclab run` wrote) whose
machine is this one (host.machine.comparable) and whose plan took the same
turns, each decided on its own rounds alone (no spread carried). Per variant and metric, the
studies' mean log ratios against the baseline, of a cell this plan has, give τ by DerSimonian–
Laird's moments summed over groups of studies within a day of the group's first (the claim is an
hour later, not after days), with at least MIN_STUDIES - 1 degrees of freedom, or nothing is said."""

from __future__ import annotations

import datetime
import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from alloclab.answers import analyse, decide, metrics
from alloclab.answers.replicate import moments
from alloclab.core.errors import AlloclabError
from alloclab.host.machine import comparable as machine_of
from alloclab.plan import Plan
from alloclab.plan.design import Design, between_key, between_parts

MIN_STUDIES = 3  # of one group: fewer give τ under two degrees of freedom, and the plan's own spread stands
DAY_S = 24 * 3600


def own(folder: Path, machine: dict, design: Design, cells: set[str], slice_s: float
        ) -> dict[str, tuple[float, int]]:
    """between_key -> (τ, studies) of this machine's stored studies under `folder`: the variants
    against design.baseline, on the cells (runs.csv's cell keys) of this plan; only keys with at
    least MIN_STUDIES studies."""
    studies = []
    for entry in sorted(p for p in Path(folder).iterdir() if (p / "runs.csv").is_file()
                        and (p / "plan.json").is_file()):
        try:
            if machine_of(json.loads((entry / "machine.json").read_text())) != machine_of(machine):
                continue
            study = analyse.load(entry)
            policy = replace(study.design, between=(), between_own=())
            rows = [r for r in study.rows if r.status == "ok" and r.cell in cells and r.started_at]
            if rows and float(study.plan.get("slice_s") or 0) == float(slice_s or 0):
                at = min(datetime.datetime.fromisoformat(r.started_at) for r in rows)
                studies.append((at, entry.name, decide.verdicts(rows, policy)))
        except (OSError, ValueError, KeyError, TypeError, AlloclabError):  # a folder this version cannot
            continue  # read as a study: no evidence about this machine
    per: dict[tuple[str, str], dict[tuple, list[tuple[str, float, float]]]] = defaultdict(lambda: defaultdict(list))
    start = None  # the first study of the group of studies within a day of it
    for at, name, verdicts in sorted(studies, key=lambda s: s[0]):
        start = at if start is None or (at - start).total_seconds() > DAY_S else start
        for v in verdicts:
            base, variant = v.base_unit[1], v.var_unit[1]  # the allocators' names, as the plan's
            if v.comparison == "allocators" and base == design.baseline and v.mean_log is not None and v.se_log:
                per[(v.metric, variant)][(start, v.engine, v.workload, v.threads, v.settings)].append(
                    (name, v.mean_log, v.se_log))
    out = {}
    for (metric, variant), groups in per.items():
        have = [g for g in groups.values() if len(g) >= 2]
        tau2, df = moments([[(m, se) for _, m, se in g] for g in have]) if have else (0.0, 0)
        if df >= MIN_STUDIES - 1:
            out[between_key(metric, variant)] = (tau2 ** 0.5, len({n for g in have for n, _, _ in g}))
    return out


def floor(plan: Plan, machine: dict) -> tuple[Design, str]:
    """The plan's design with this machine's own spreads between studies under its own (plan key
    between_studies_from), for the plan's allocators; and what a study says of them ("": the plan
    reads no stored studies, or none of this machine)."""
    d = plan.design
    if not d.between_from:
        return d, ""
    names = {a.name for a in plan.allocators}
    mine = {k: x for k, x in own(Path(d.between_from), machine, d, {c.key for c in plan.cells()}, plan.slice_s).items()
            if between_parts(k)[1] in names}
    if not mine:
        return d, ""
    raised = metrics.spreads_words((*between_parts(k), sd) for k, (sd, _) in mine.items()
                                   if sd > d.between_sd(*reversed(between_parts(k))))
    return d.floored(mine), (
        f"{max(n for _, n in mine.values())} stored studies of this machine in {d.between_from}: its own spread "
        "between studies is " + (f"larger than the plan's for {raised}; the verdicts carry that" if raised
                                 else "within the plan's"))
