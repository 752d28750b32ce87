"""A cell (everything that defines a measurement but the allocator and the repeat) with its one
label, and a run's full description (RunSpec): plain JSON, so any node can execute it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from alloclab.alloc import allocators as alloc_mod
from alloclab.catalog.names import SYSBENCH
from alloclab.plan import workload

# each turn's unmeasured start, in seconds, unless a plan says (turn_warmup_s)
TURN_WARMUP_S = 0.02


@dataclass(frozen=True)
class Cell:
    """Everything that defines a measurement except the allocator and the repeat: what every
    workload's cells share, and the workload's own parameters (`params`, its typed record:
    plan.workload.Workload.Params)."""

    engine: str
    part: str
    workload: str
    pattern: str
    key_bytes: int
    value_bytes: int
    batch: int
    threads: int
    ops: int | None
    duration_s: float | None
    keyspace: int | None
    range_len: int
    profile: str = "default"
    shape: str = "default"
    client: str = SYSBENCH  # who drives it where a workload has several clients (TPC-C's, sysbench's)
    # measured runs of each allocator in every round (plan key runs_per_round): not part of the key,
    # what one run measures; a round's value of a unit is its runs' mean (decide._groups)
    runs_per_round: int = 1
    # its runs take turns of this many seconds (its workload's slice_s); None: the plan's slice_s.
    # Not part of the key either: how its runs share the machine
    slice_s: float | None = None
    params: Any = field(default_factory=workload.NoParams)

    @property
    def key(self) -> str:
        return workload.of(self.workload).key(self)

    @classmethod
    def from_json(cls, d: dict) -> Cell:
        """A cell as plan.json stores it: its workload's parameters under `params`, or (plans
        stored before workloads owned them) beside the shared fields."""
        own = workload.of(d["workload"]).Params
        names = {f.name for f in fields(own)}
        got = d["params"] if isinstance(d.get("params"), dict) else {k: v for k, v in d.items() if k in names}
        shared = {f.name for f in fields(cls)} - {"params"}
        return cls(**{k: v for k, v in d.items() if k in shared}, params=own(**{k: v for k, v in got.items()
                                                                             if k in names}))


@dataclass(frozen=True)
class RunSpec:
    index: int
    run_id: str
    cell: Cell
    allocator: alloc_mod.Allocator
    repeat: int
    seed: int
    warmup_s: float
    interval_ms: int
    engine_options: dict
    timeout_s: float
    hang_timeout_s: float
    study_seed: int = 0
    server_cpus: str = ""
    client_cpus: str = ""
    server_memory_bytes: int = 0
    # "measure": enters the statistics; "profile": perf records its measured window (CPU
    # samples, context switches); "calls": uprobes count the allocator's calls and sizes.
    # Profiling costs throughput, so profiled runs never enter the throughput statistics.
    # "warmup": an unmeasured first run of a cell (plan key warmup_round).
    purpose: str = "measure"
    slice_s: float = 0.0  # > 0: measured in turns with the cell's other allocators (interleave.py)
    # each turn's unmeasured start: the caches and TLB the others' turns took are the run's own
    # again (docs/results.md, "Turns against runs alone": a turn that followed its own run's last
    # turn measured 1-4 % more than one after the others' turns, glibc the most, in turns of 0.1 s)
    turn_warmup_s: float = TURN_WARMUP_S
    side_by_side: int = 1  # > 1: run at the same time as up to this many of the cell's runs (interleave.py)
    whole_round: bool = False  # side by side with every measured run of its round (Plan.whole_round)
    # > 0: another measured run of its (cell, allocator) in the same round, in the place of a decided
    # allocator's (together.in_their_places); a round's value of a unit is its runs' mean (decide._groups)
    copy: int = 0

    def to_json(self) -> dict:
        d = asdict(self)
        d["allocator"] = self.allocator.to_json()
        d["cell_key"] = self.cell.key
        return d

    @classmethod
    def from_json(cls, d: dict) -> RunSpec:
        """The inverse of to_json, for --resume: plan.json holds every run spec."""
        alloc = alloc_mod.Allocator.from_json(d["allocator"])
        spec = {k: v for k, v in d.items() if k in {f.name for f in fields(cls)}}
        spec["cell"] = Cell.from_json(d["cell"])
        spec["allocator"] = alloc
        return cls(**spec)
