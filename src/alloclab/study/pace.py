"""How many rounds a study's budget affords, at the pace of the rounds it ran: when it looks at its
comparisons (plan_design), when the last look moves later (extend_design), and what a round's
runs took (their wall times one after another, in turns, or side by side)."""

from __future__ import annotations

import statistics

from alloclab.core.units import fmt_duration
from alloclab.plan import Plan, side_by_side_groups
from alloclab.plan.design import PACE_SLACK, plan_looks
from alloclab.results.store import RunRow, rounds_ran


def plan_design(plan: Plan, rows: list[RunRow], elapsed_s: float, rounds_done: int,
                looks_done: tuple[int, ...] = (), pace: float = 0.0) -> dict:
    """When an adaptive study looks at its comparisons: the rounds its budget affords at the pace
    of its rounds so far (or max_rounds without a budget), and the looks up to that round. `pace`:
    seconds a round of the runs that go on will take (a resumed study's open units), else the last
    round's."""
    last, basis = _afforded(plan, rows, elapsed_s, rounds_done, pace=pace)
    looks = plan_looks(last, plan.design.min_runs, looks_done, plan.design.max_looks)
    return {"planned_rounds": looks[-1], "looks": list(looks), "basis": basis}


def _afforded(plan: Plan, rows: list[RunRow], elapsed_s: float, rounds_done: int,
              as_run: bool = False, pace: float = 0.0) -> tuple[int, str]:
    """The last round the budget affords at the pace of the last round run, and how it was reckoned;
    where the lives side by side end after `side_by_side_rounds`, the rounds after them at the pace
    of the runs that go on (the one rule for planning the looks and for moving the last one later).
    `as_run`: the last round's pace as its runs took it (a decided comparison's runs stopped), not
    every unit's runs at their median. `pace`: a round's seconds known otherwise (plan_design)."""
    last = plan.design.max_rounds
    basis = f"max_rounds {plan.design.max_rounds}"
    if plan.budget is not None and rounds_done:
        walls = [r.wall_s for r in rows if r.wall_s > 0 and r.repeat == rounds_done] or \
                [r.wall_s for r in rows if r.wall_s > 0]
        # side by side, the round's groups took what their longest runs took
        per_round = PACE_SLACK * (pace or ((as_run or plan.beside()) and _round_wall(plan, rows, rounds_done)) or
                           (_slots(plan) * statistics.median(walls) if walls else 0.0))
        if per_round > 0:
            last = max(rounds_done + 1, _affordable(plan, elapsed_s, rounds_done, per_round))
            pace, lives = fmt_duration(per_round), plan.side_by_side_rounds
            side = {c.key for c in plan.beside()}
            others = [r for r in rows if r.cell not in side and r.wall_s > 0]
            rest = PACE_SLACK * _round_wall(plan, others, rounds_ran(others))
            if lives and rounds_done <= lives <= last and rest > 0:  # after the lives' rounds, the rest at their pace
                left = elapsed_s + (lives - rounds_done) * per_round
                last = max(rounds_done + 1, min(plan.design.max_rounds, lives + _affordable(plan, left, 0, rest)))
                pace += f" a round for {lives} (side_by_side_rounds), then {fmt_duration(rest)}"
            basis = f"a budget of {fmt_duration(plan.budget)} at about {pace} a round affords {last} round(s)"
    return last, basis


def _affordable(plan: Plan, elapsed_s: float, rounds_done: int, per_round: float) -> int:
    """The last round the budget left affords at `per_round` seconds a round (at most max_rounds)."""
    return min(plan.design.max_rounds, rounds_done + int(max(0.0, plan.budget - elapsed_s) // per_round))


def _slots(plan: Plan) -> int:
    """How many runs' time a round takes: one after another, every run's; in turns (slice_s), a
    cell's runs are up together, so one per cell."""
    turns = plan.turns()
    return len(turns) + sum(1 for cell, _ in plan.units() if cell not in turns)


def _round_wall(plan: Plan, rows: list[RunRow], rnd: int) -> float:
    """How long round `rnd`'s runs took: one after another, the sum of their wall times; in turns,
    a cell's runs are up together, so the longest of each cell's; side by side, the longest of
    each group that ran at once (side_by_side_groups). A round may hold all three (a workload's
    own slice_s beside lives side by side)."""
    turns, beside = plan.turns(), {c.key for c in plan.beside()}

    def how(cell: str) -> str:  # a cell the plan does not know (rows of an older plan): the plan's own way
        if cell in beside or (cell not in turns and plan.side_by_side > 1 and not plan.slice_s):
            return "side"
        return "turns" if cell in turns or plan.slice_s else "alone"
    done = [r for r in rows if r.repeat == rnd]
    # side by side as they ran, a unit's more runs (in_their_places) too
    side = sorted((r for r in done if how(r.cell) == "side"), key=lambda r: r.index)
    wall = sum(max(side[i].wall_s for i in g)
               for g in side_by_side_groups([r.cell for r in side], plan.side_by_side, plan.whole_round))
    cells: dict[str, float] = {}
    for r in done:
        if how(r.cell) == "turns":
            cells[r.cell] = max(cells.get(r.cell, 0.0), r.wall_s)
    return wall + sum(cells.values()) + sum(r.wall_s for r in done if how(r.cell) == "alone")


def extend_design(plan: Plan, design: dict, rows: list[RunRow], elapsed_s: float, rounds_done: int) -> dict:
    """The last look moves later when rounds got faster (a decided comparison's runs stop): if the
    budget left affords more rounds at the pace of the last round than planned. The number of
    looks, and so each look's level, stays; it never moves earlier here (a budget stop may:
    design.taken_looks), and the looks' rounds depend on time alone, never on the ratios."""
    looks = list(design["looks"])
    if plan.budget is None or rounds_done >= looks[-1]:
        return design
    if not any(r.wall_s > 0 for r in rows if r.repeat == rounds_done):
        return design
    afford, basis = _afforded(plan, rows, elapsed_s, rounds_done, as_run=True)
    if afford <= looks[-1]:
        return design
    return {"planned_rounds": afford, "looks": looks[:-1] + [afford],
            "basis": f"after round {rounds_done}, with {fmt_duration(plan.budget - elapsed_s)} left: {basis}"}
