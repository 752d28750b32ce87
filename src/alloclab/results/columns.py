"""A workload's own columns of runs.csv: what only its runs measure or are told apart by (TPC-C's
NOPM and warehouses, a life's memory over its cycles), declared by the workload as a dataclass
and registered here when `alloclab.workloads` is imported. A row carries the shared columns
(results.store.RunRow) and its workload's own (`RunRow.own`); runs.csv has a workload's columns
only where the study has that workload, after the shared ones."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields

from alloclab.core.errors import AlloclabError


@dataclass(frozen=True)
class NoColumns:
    """A workload with no columns of its own (the key-value suite)."""


_BY_NAME: dict[str, type] = {}
_ORDER: list[type] = []


def register(names: tuple[str, ...], cls: type) -> None:
    """Make `cls` (a dataclass whose every field has a default) the own columns of the workloads
    `names` (plan.workload.register checks that none is a shared column)."""
    if not dataclasses.is_dataclass(cls) or any(f.default is dataclasses.MISSING for f in fields(cls)):
        raise AlloclabError(f"{cls.__name__}: a workload's columns are a dataclass whose fields all have defaults")
    for n in names:
        _BY_NAME[n] = cls
    if cls not in _ORDER:
        _ORDER.append(cls)


def of(workload: str) -> type:
    """The own columns of a workload (NoColumns where it has none)."""
    if workload in _BY_NAME:
        return _BY_NAME[workload]
    if not _BY_NAME:
        raise AlloclabError(f"no workload's columns are registered to read a row of workload {workload!r}",
                            "import alloclab.workloads first (every entry point does)")
    raise AlloclabError(f"runs.csv has a row of workload {workload!r}, which this alloclab does not know",
                        "allowed workloads: " + ", ".join(_BY_NAME))


def names(workloads) -> list[str]:
    """The own columns of these workloads, in the order the workloads registered."""
    wanted = {of(w) for w in workloads}
    out: list[str] = []
    for cls in _ORDER:
        if cls in wanted:
            out += [f.name for f in fields(cls) if f.name not in out]
    return out
