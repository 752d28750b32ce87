"""What a study's report warns of: engine defects its checks found, runs that failed or whose
allocator was not proved, cells too few or too noisy to tell, windows under the scale's floor,
machines mixed, and a machine busy with other work. From stored files only."""

from __future__ import annotations

import json

from alloclab.answers import analyse, decide
from alloclab.answers.metrics import THROUGHPUT
from alloclab.host.noise import BUSY_OTHER_CORES


def engine_notes(study: analyse.Study) -> list[str]:
    """What the correctness checks before a target's data found wrong but harmless to the
    workload (loads/*/prepare.json: engine_notes), each once."""
    out: list[str] = []
    for f in sorted((study.root / "loads").glob("*/prepare.json")):
        try:
            notes = json.loads(f.read_text()).get("engine_notes") or []
        except (OSError, ValueError):
            study.problems.add(str(f.relative_to(study.root)))
            continue
        out += [n for n in notes if n not in out]
    return out


def warnings(study: analyse.Study) -> list[str]:
    """What a report warns of about the study's runs (the files it could not read are the
    study's `problems`, added by the report after it has read them all)."""
    out = [f"engine defect: {n}" for n in engine_notes(study)]
    bad_aux = [r for r in study.aux if not (r.status == "ok" and r.allocator_verified)]
    if bad_aux:
        out.append(f"{len(bad_aux)} profiled or call-counting run(s) failed or were not proved; first: "
                   f"{bad_aux[0].run_id}: {bad_aux[0].reason}")
    bad = study.not_valid()
    unverified = [r for r in bad if not r.allocator_verified]
    failed = [r for r in bad if r.status == "failed"]
    if unverified:
        out.append(f"{len(unverified)} run(s) whose allocator was not proved are excluded from every table "
                   f"(e.g. {unverified[0].run_id}: {unverified[0].reason})")
    if failed:
        out.append(f"{len(failed)} run(s) failed and are excluded (e.g. {failed[0].run_id}: {failed[0].reason})")
    cells = analyse.summaries(study, THROUGHPUT)
    few = sum(1 for s in cells if not s.stats.enough)
    if few:
        out.append(f"{few} cell x allocator combination(s) have fewer than 3 valid runs: their numbers are single "
                   "measurements without an interval, and differences under ~10 % are within run-to-run noise")
    for s in cells:
        c = decide.cell_dict(s.cell)
        label = f"{c['engine']} {c['part']} t{c['threads']} b{c['batch']} [{s.allocator}]"
        if s.stats.cv is not None and s.stats.cv > analyse.NOISY_CV:
            out.append(f"noisy cell: {label} throughput CV {100 * s.stats.cv:.0f}% over {s.stats.n} runs")
        if s.stats.outliers:
            out.append(f"outlier run(s) in {label}: repeat(s) {', '.join(str(i + 1) for i in s.stats.outliers)} "
                       "(kept, marked here)")
    stop = (study.schedule.get("stop") or {})
    pol = study.design
    if pol.adaptive and stop.get("reason") in ("budget", None) and study.rows:
        states = decide.unit_states(study.rows)  # valid runs counted in rounds
        short = [u for u, st in states.items() if st.n_valid < pol.min_runs]
        if short:
            out.append(f"the budget could not afford {pol.min_runs} valid runs of {len(short)} cell x allocator "
                       f"combination(s) (e.g. {short[0][0]} [{short[0][1]}]): their comparisons stay undecided")
    floor = float(study.plan.get("min_window_s") or 0)
    shortw = [r for r in study.valid() if 0 < r.duration_s < floor]
    if shortw:
        w = min(shortw, key=lambda r: r.duration_s)
        out.append(f"{len(shortw)} run(s) measured a window shorter than the {floor:g} s floor of this scale "
                   f"(shortest {w.duration_s:.2f} s, {w.run_id}): give those cells a duration or more operations")
    for cell, fps in sorted(decide.mixed_machines(study.rows).items()):
        out.append(f"runs of {cell} came from {len(fps)} different machines ("
                   + "; ".join(f"fingerprint {f}: {', '.join(n)}" for f, n in sorted(fps.items()))
                   + "): its ratios pair runs within a node, then pool over those machines")
    busy = [r for r in study.rows if r.other_busy_cores > BUSY_OTHER_CORES]
    if busy:
        worst = max(busy, key=lambda r: r.other_busy_cores)
        out.append(f"the machine was busy during {len(busy)} run(s): other processes used up to "
                   f"{worst.other_busy_cores:.2f} cores (during {worst.run_id})")
    return out
