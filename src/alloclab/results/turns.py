"""A run measured in turns, as its folder stores it: the place of each of its turns in its group's
sequence (run.json's turn_places, written by the interleaver) and what each turn measured (its
driver's measured intervals in events.jsonl, one a turn)."""

from __future__ import annotations

import json
import math
from pathlib import Path


def of_run(run_dir: Path) -> tuple[list[int], list[float]] | None:
    """(places, log throughput of each turn) of a run in turns; None for a run not in turns, one
    whose folder lacks either file, or whose intervals are not one a place."""
    try:
        places = json.loads((run_dir / "run.json").read_text()).get("turn_places")
        lines = (run_dir / "events.jsonl").read_text().splitlines()
    except (OSError, ValueError):
        return None
    if not places:
        return None
    logs, before = [], 0.0
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            return None
        if e.get("type") != "interval" or e.get("phase") != "measure":
            continue
        ops = sum(int(v.get("ops") or 0) for v in (e.get("ops") or {}).values())
        took, before = float(e.get("elapsed_s") or 0.0) - before, float(e.get("elapsed_s") or 0.0)
        if ops <= 0 or took <= 0:
            return None
        logs.append(math.log(ops / took))
    return (list(places), logs) if len(logs) == len(places) else None
