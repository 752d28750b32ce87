"""The lives that check the memory limit a study of lives found (`alloclab limits STUDY`).

Each (life, allocator) of the study needs the highest unreclaimable charge its lives reached
(answers.lives.needed). Its lives run again under a cgroup limit of exactly that, and of a share
less, the same lives side by side as in the study: where the limit holds they live at it, and the
share killed below it shows how sharp the edge is. (A host with swap lets a life under a limit
swap before it is killed; the limit here is on memory only.) Each level is a study of its own in
the study's folder (limits/at, limits/below, with the plan's per-unit limits in unit_memory); the
study's answers and its limit table then tell their outcomes (results.store.limit_checks reads
them back)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from alloclab.answers import analyse
from alloclab.answers.lives import needed
from alloclab.core.errors import AlloclabError
from alloclab.plan import Plan
from alloclab.results.store import Store
from alloclab.study import rounds
from alloclab.study.progress import Progress

MIB = 1 << 20


def plans(root: Path, below_pct: float, lives: int) -> dict[str, Plan]:
    """The two studies that check the limits of the study in `root`: level -> its plan (its life
    cells only, each allocator under its own limit, `lives` rounds)."""
    if not 0 < below_pct < 100:
        raise AlloclabError(f"--below: {below_pct:g} % is not a share between 0 and 100 %", "give e.g. --below 10")
    if not 1 <= lives <= 20:
        raise AlloclabError(f"--lives: {lives} is not between 1 and 20", "give e.g. --lives 2")
    if not (Path(root) / "plan.json").is_file():
        raise AlloclabError(f"{root} holds no study (no plan.json)", "pass the folder `alloclab run` wrote")
    study = analyse.load(Path(root))
    need = needed(study.valid())
    if not need:
        raise AlloclabError(f"no life of {root} read its cgroup's charge, so it found no limit to check",
                            "run a study of lives first: alloclab run --preset memory-life")
    base = Plan.from_json(study.plan)
    cells = {cell for cell, _ in need}
    tables = [w for w in base.workloads if any(c.key in cells for c in replace(base, workloads=[w]).cells())]
    allocators = [a for a in base.allocators if any(alloc == a.name for _, alloc in need)]
    out = {}
    for level, share in (("at", 1.0), ("below", 1 - below_pct / 100)):
        out[level] = replace(
            base, name=f"{base.name}-limits-{level}", runs=lives, budget=None, perf=False, warmup_round=False,
            side_by_side_rounds=0,
            workloads=tables, allocators=allocators, slice_s=0.0,
            unit_memory={f"{cell}|{alloc}": math.ceil(b * share / MIB) * MIB for (cell, alloc), b in need.items()})
    return out


def check(root: Path, below_pct: float = 10.0, lives: int = 2, progress: Progress | None = None) -> dict:
    """Run (or finish) both levels' lives into root/limits/<level>; level -> its StudyResult."""
    progress = progress or Progress(0)
    done = {}
    for level, plan in plans(root, below_pct, lives).items():
        out = Path(root) / "limits" / level
        started = (out / "plan.json").is_file()
        if started:  # finished with what it started with, if that is the same
            was = Store(out).read_json("plan.json")
            if was.get("unit_memory") != plan.unit_memory or was.get("runs") != plan.runs:
                raise AlloclabError(f"{out} holds lives checked at other limits or another number of rounds "
                                    f"({was.get('runs')} round(s))", "give the same --below and --lives as before, "
                                    f"or move {out} aside to check again")
        progress.message(f"lives under the limit {'found' if level == 'at' else f'less {below_pct:g} %'} "
                         f"({len(plan.units())} (life, allocator) each under its own, {lives} round(s)): {out}")
        done[level] = rounds.resume(out, progress) if started else rounds.run(plan, out, progress)
    Store(Path(root)).write_manifest()  # the study's manifest covers its checking lives too (alloclab verify)
    return done
