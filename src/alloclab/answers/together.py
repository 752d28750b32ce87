"""Side by side: the runs of a round that share the machine at the same time (plan key
side_by_side), whose company is part of what each measures: who keeps whom company, who takes a
decided unit's places, and how long a round of them takes."""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from alloclab.answers.decide import FAILING, Unit
from alloclab.plan import side_by_side_groups


def company(units: Iterable[Unit], active: set, why: dict[Unit, str], whole_round: bool = False) -> set:
    """Side by side, a cell's runs of a round run at the same time, so a run's company is part of
    what it measures: every unit of a cell runs while any of `active` does (but one that keeps
    failing), so that the company stays the same in every round; where the whole round runs at
    once (`whole_round`: side_by_side at least the study's units), every unit of the study runs
    while any is active. The units this adds to `active`. Dropping the decided ones changed what
    the rest measured: RocksDB's glibc gave back about 2 % of a burst beside five other lives and
    17 % beside two, and a study pooled rounds of both (docs/results.md)."""
    units = list(units)
    running = {u[0] for u in units} if whole_round and active else {cell for cell, _ in active}
    return {u for u in units if u not in active and u[0] in running and why.get(u) != FAILING}


def in_their_places(units: Iterable[Unit], active: set, beside: set) -> tuple[dict[Unit, int], set]:
    """Side by side, the company of a cell whose comparisons are decided (`beside`, from company)
    measures nothing more that anyone asks: its places in the round go to more runs of the cell's
    undecided units (`active`), as many to each (the rest stay company), so the cell runs as many
    lives at once as before and the open comparisons get more runs a round (their round's value
    is the mean of its runs, _groups). Returns (unit -> the decided units' places it takes, the
    company left); a place is as many runs as the cell's runs_per_round (Plan.places), the same
    for each of its units. A decided comparison keeps the pairs it was decided on. A cell with no
    open unit keeps its company, where the whole round runs at once."""
    units, extra, left = list(units), {}, set(beside)
    for cell in dict.fromkeys(u[0] for u in units):
        open_ = [u for u in units if u[0] == cell and u in active]
        spare = [u for u in units if u[0] == cell and u in beside]
        each = len(spare) // len(open_) if open_ else 0
        if each:
            extra.update({u: each for u in open_})
            left -= set(spare[:each * len(open_)])
    return extra, left


def unit_walls(rows: Iterable, turns: Iterable[str] = ()) -> dict[Unit, float]:
    """(cell key, allocator) -> the time one round of it takes, the median over its rounds: a run's
    wall time, or in turns (the cells in `turns`) its share of its cell's round, what the round's
    turns took (its longest run) over the runs that took them (a cell's turns take its runs' windows
    one after another: twelve MariaDB servers took 100 s a round, the six of a round after half of
    them were decided 48 s), for each of its runs of the round."""
    turns = set(turns)
    rows = [r for r in rows if r.wall_s > 0]
    in_cell: dict[tuple, list[float]] = {}
    for r in rows:
        in_cell.setdefault((r.cell, r.repeat), []).append(r.wall_s)
    share = {k: max(took) / len(took) for k, took in in_cell.items()}  # one run's share of its cell's round
    shares: dict[Unit, dict[int, float]] = {}
    plain: dict[Unit, list[float]] = {}
    for r in rows:
        if r.cell in turns:
            per = shares.setdefault((r.cell, r.allocator), {})
            per[r.repeat] = per.get(r.repeat, 0.0) + share[(r.cell, r.repeat)]
        else:
            plain.setdefault((r.cell, r.allocator), []).append(r.wall_s)
    return {**{u: statistics.median(w) for u, w in plain.items()},
            **{u: statistics.median(per.values()) for u, per in shares.items()}}


def round_wall(units: Iterable[Unit], walls: dict[Unit, float], side_by_side: int, whole_round: bool,
               turns: Iterable[str] = ()) -> float:
    """One round's wall time of `units` (`walls`: each unit's run time): one after another, each
    run's; side by side, each group's longest (plan.side_by_side_groups), with the company that
    runs beside them (`company`: their cells' units, or where the whole round runs at once, all);
    in turns (the cells in `turns`, after the runs side by side), the shares of its units that take
    turns (unit_walls: in turns, `walls` holds each unit's share of its cell's round)."""
    turns = set(turns)
    units = set(units)
    taking = {u for u in units if u[0] in turns}
    units -= taking
    if side_by_side > 1 and units:  # company beside open runs side by side; turns alone have none
        cells = {u[0] for u in units}
        units |= {u for u in walls if u[0] not in turns and (whole_round or u[0] in cells)}
    ordered = sorted(units)
    cells: dict[str, float] = {}
    for u in taking:
        cells[u[0]] = cells.get(u[0], 0.0) + walls.get(u, 0.0)
    return sum(cells.values()) + sum(max(walls.get(ordered[i], 0.0) for i in g)
                                     for g in side_by_side_groups([u[0] for u in ordered], side_by_side, whole_round))
