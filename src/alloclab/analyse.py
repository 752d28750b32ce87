"""Analysis from stored files only: group runs into cells, take medians, compare allocators."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from alloclab.store import RunRow, Store

# What identifies a cell apart from the allocator and the repeat.
CELL_FIELDS = ("engine", "part", "workload", "pattern", "key_bytes", "value_bytes", "batch", "threads")


@dataclass
class Study:
    root: Path
    rows: list[RunRow]
    plan: dict
    machine: dict

    @property
    def baseline(self) -> str:
        return self.plan.get("baseline", "glibc")

    @property
    def allocators(self) -> list[str]:
        """In the plan's order."""
        names = [a["name"] for a in self.plan.get("allocators", [])]
        extra = sorted({r.allocator for r in self.rows} - set(names))
        return names + extra

    def valid(self) -> list[RunRow]:
        """Rows that count: finished, and the allocator proved."""
        return [r for r in self.rows if r.status == "ok" and r.allocator_verified]

    def not_valid(self) -> list[RunRow]:
        return [r for r in self.rows if not (r.status == "ok" and r.allocator_verified)]


def load(root: Path) -> Study:
    s = Store(root)
    return Study(root=Path(root), rows=s.rows(), plan=s.read_json("plan.json"), machine=s.read_json("machine.json"))


def cell_of(r: RunRow) -> tuple:
    return tuple(getattr(r, f) for f in CELL_FIELDS)


def by_cell(rows: list[RunRow], metric: str) -> dict[tuple, dict[str, list[float]]]:
    """cell -> allocator -> values of `metric` over the repeats."""
    out: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        out[cell_of(r)][r.allocator].append(float(getattr(r, metric)))
    return out


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def delta_pct(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base == 0:
        return None
    return 100.0 * (value - base) / base
