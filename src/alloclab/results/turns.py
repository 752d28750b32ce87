"""A run measured in turns, as its folder stores it: the place of each of its turns in its group's
sequence (run.json's turn_places, written by the interleaver) and what each turn measured (its
driver's measured intervals in events.jsonl, one a turn)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from alloclab.core import events
from alloclab.core.errors import AlloclabError


def measured(run_dir: Path) -> tuple[list[int], list[tuple[int, float]]] | None:
    """(places, (ops, seconds) of each turn) of a run in turns; None for a run not in turns, one
    whose folder lacks either file or holds an event the driver's schema refuses, or whose
    intervals are not one a place or measured nothing."""
    try:
        places = json.loads((run_dir / "run.json").read_text()).get("turn_places")
        stored = list(events.parse_lines((run_dir / "events.jsonl").read_text().splitlines()))
    except (OSError, ValueError, AlloclabError):
        return None
    if not places:
        return None
    out, before = [], 0.0
    for e in stored:
        if e.type != "interval" or e.data.get("phase") != "measure":
            continue
        ops = sum(int(v.get("ops") or 0) for v in (e.data.get("ops") or {}).values())
        elapsed = float(e.data.get("elapsed_s") or 0.0)
        took, before = elapsed - before, elapsed
        if ops <= 0 or took <= 0:
            return None
        out.append((ops, took))
    return (list(places), out) if len(out) == len(places) else None


def of_run(run_dir: Path) -> tuple[list[int], list[float]] | None:
    """(places, log throughput of each turn) of a run in turns (`measured`'s turns as log ops/s)."""
    got = measured(run_dir)
    return (got[0], [math.log(ops / took) for ops, took in got[1]]) if got else None
