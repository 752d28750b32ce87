"""Plan: a study's matrix, validated whole before the first run (plan.load), expanded in
interleaved, seeded rounds."""

from __future__ import annotations

import hashlib
import itertools
import random
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace

from alloclab.alloc import allocators as alloc_mod
from alloclab.core.errors import AlloclabError
from alloclab.plan import design, workload
from alloclab.plan.cell import TURN_WARMUP_S, Cell, RunSpec
from alloclab.plan.schema import WORKLOAD_DEFAULTS


def side_by_side_groups(cells: Sequence, n: int, whole_round: bool = False) -> list[list[int]]:
    """Which of a round's runs side by side run at the same time (plan key side_by_side = n), as
    positions of `cells` (each run's cell key, in the round's order; a cell's runs consecutive):
    a cell's runs n at a time, or where the whole round runs at once (Plan.whole_round: n at
    least the round's runs) all of them together. The one rule for running a round, for its wall
    time and for the time more rounds would take."""
    if whole_round:
        return [list(range(i, min(i + n, len(cells)))) for i in range(0, len(cells), max(1, n))]
    out: list[list[int]] = []
    for i, c in enumerate(cells):
        if out and cells[out[-1][-1]] == c and len(out[-1]) < n:
            out[-1].append(i)
        else:
            out.append([i])
    return out


@dataclass
class Plan:
    name: str
    preset: str | None
    scale: str
    seed: int
    runs: int | None  # exactly this many rounds; None: rounds until decided or out of budget
    engines: list[str]
    allocators: list[alloc_mod.Allocator]
    design: design.Design  # how it decides: questions, baseline, margin, target CI, rounds
    workloads: list[dict]
    engine_options: dict = field(default_factory=dict)
    profiles: dict = field(default_factory=dict)
    shapes: dict = field(default_factory=dict)
    server_cpus: str = ""
    client_cpus: str = ""
    server_memory_bytes: int = 0
    # a memory limit per (cell, allocator), "cell key|allocator" -> bytes, over server_memory_bytes:
    # the lives that check the limit a study found (study.limits)
    unit_memory: dict = field(default_factory=dict)
    warmup_s: float = 0.0
    interval_ms: int = 1000
    run_timeout_s: float = 1800.0
    hang_timeout_s: float = 300.0
    budget: float | None = None  # seconds of wall time for the whole study, over every sitting
    min_window_s: float = 0.0
    perf: bool = False  # add profiled runs beside the measured ones (--profile)
    profile_runs: int = 2  # profiled runs of each cell x allocator (in the first rounds)
    warmup_round: bool = False  # one unmeasured run per cell before round 1
    slice_s: float = 0.0  # > 0: a cell's measured runs of a round take turns of this length
    turn_warmup_s: float = TURN_WARMUP_S  # each turn's unmeasured start (interleave.py)
    side_by_side: int = 1  # > 1: a cell's measured runs of a round run this many at a time (side_by_side_groups)
    # side_by_side at least the round's runs, in a study of more than one cell: the whole round at
    # once, every cell's runs together (set by plan.load; False in plans stored before it existed)
    whole_round: bool = False
    # > 0: the cells side by side run in rounds 1..N only; the others (turns) go on after them
    side_by_side_rounds: int = 0
    perf_absent: str = ""  # why profiles were asked for and could not be recorded here (preflight)
    executor: str = "local"  # "ray": the runs go to the nodes of a Ray cluster (fleet.py)
    ray_address: str = ""  # the cluster's address (host:port); empty: Ray's own default (RAY_ADDRESS, "auto")

    @property
    def adaptive(self) -> bool:
        return self.runs is None

    def units(self) -> list[tuple[str, str]]:
        """(cell key, allocator): what one run of a round measures."""
        return [(c.key, a.name) for c in self.cells() for a in self.allocators]

    def cells(self) -> list[Cell]:
        out = []
        for engine in self.engines:
            for profile, shape in itertools.product(self.profiles or {"default": {}}, self.shapes or {"default": {}}):
                for w in self.workloads:
                    if engine not in w.get("engines", (engine,)):
                        continue
                    if "profile" in w and not self.profiles:  # the workload's own, where the plan names none
                        profile = w["profile"]
                    w = {**WORKLOAD_DEFAULTS, **w}
                    wl = workload.of(w["workload"])
                    for pattern, kb, vb, batch, threads, (client, params) in itertools.product(
                            w["pattern"], w["key_bytes"], w["value_bytes"], w["batch"], w["threads"],
                            wl.variants(w, engine)):
                        ops = w.get("ops")
                        if ops is None and "duration_s" not in w:
                            ops = 100_000
                        out.append(Cell(
                            engine=engine, part=w.get("part", w["workload"]), workload=w["workload"],
                            pattern=pattern, key_bytes=kb, value_bytes=vb, batch=batch, threads=threads,
                            ops=ops if "duration_s" not in w else None, duration_s=w.get("duration_s"),
                            keyspace=w.get("keyspace"), range_len=w["range_len"], profile=profile, shape=shape,
                            client=client, runs_per_round=w.get("runs_per_round", 1),
                            slice_s=w.get("slice_s"), params=params))
        seen = set()
        for c in out:
            if c.key in seen:
                raise AlloclabError(f"the plan has the cell {c.key} twice",
                                    "give each [[workloads]] entry its own 'part' name or different parameters")
            seen.add(c.key)
        return out

    def slice_of(self, cell: Cell) -> float:
        """The turns a cell's measured runs take: its workload's slice_s, else the plan's (0: none)."""
        return self.slice_s if cell.slice_s is None else cell.slice_s

    def side_of(self, cell: Cell) -> int:
        """How many of a round's runs a cell's run shares the machine with at once: the plan's
        side_by_side, but 1 for a cell that takes turns (its workload's slice_s)."""
        return 1 if self.slice_of(cell) else self.side_by_side

    def beside(self) -> list[Cell]:
        """The cells whose runs run side by side (plan key side_by_side > 1, no turns of their own)."""
        return [c for c in self.cells() if self.side_of(c) > 1]

    def in_round(self, rnd: int) -> set[tuple[str, str]]:
        """The units round `rnd` may run: all of them, but the cells side by side only in their first
        side_by_side_rounds rounds."""
        if not self.side_by_side_rounds or rnd <= self.side_by_side_rounds:
            return set(self.units())
        side = {c.key for c in self.beside()}
        return {u for u in self.units() if u[0] not in side}

    def turns(self) -> dict[str, float]:
        """cell key -> the turns its runs take, for the cells that take turns."""
        return {c.key: t for c in self.cells() if (t := self.slice_of(c))}

    def told(self) -> frozenset[str]:
        """The cells whose throughput is told, never decided on: side by side, a run's throughput is
        its share of a machine shared with the round's other runs; where cells of the same engine
        take turns in the study (a workload's slice_s), those measure its speed."""
        priced = {c.engine for c in self.cells() if self.slice_of(c)}
        return frozenset(c.key for c in self.beside() if c.engine in priced)

    def places(self) -> dict[tuple[str, str], int]:
        """(cell key, allocator) -> its measured runs in every round (plan key runs_per_round):
        its places in a round, which a decided one gives to the open ones (together.in_their_places)."""
        return {(c.key, a.name): c.runs_per_round for c in self.cells() for a in self.allocators}

    def round_seed(self, rnd: int) -> int:
        return _derive_seed(self.seed, "round", rnd)

    def round_specs(self, rnd: int, active: set | None, first_index: int,
                    more: dict | None = None) -> list[RunSpec]:
        """One round: every active (cell, allocator) as many times as its cell's runs_per_round
        (places), and `more` (unit -> n) n more times (together.in_their_places). Cells in a fresh
        order drawn from the round's seed; on each cell its allocators back to back (A B C),
        starting from a different allocator each round, so that drift and warm caches do not
        favour one allocator; a unit's further runs after all of the cell's first ones, each
        allocator's k-th run on the same keys (seed)."""
        more = {u: n - 1 + (more or {}).get(u, 0) for u, n in self.places().items()
                if active is None or u in active}
        rng = random.Random(self.round_seed(rnd))
        order = self.cells()
        rng.shuffle(order)
        specs: list[RunSpec] = []
        entries: list[tuple] = []
        for ci, cell in enumerate(order):
            k = (rnd - 1 + ci) % len(self.allocators)
            turn = self.allocators[k:] + self.allocators[:k]
            runs = [(a, "measure", 0) for a in turn if active is None or (cell.key, a.name) in active]
            runs += [(a, "measure", j) for j in range(1, 1 + max(more.values(), default=0))
                     for a in turn if more.get((cell.key, a.name), 0) >= j]
            if rnd == 1 and self.warmup_round:  # never measured: warms the machine for this cell
                runs.insert(0, (self.baseline_allocator(), "warmup", 0))
            if self.perf and rnd <= self.profile_runs:
                # separate runs, right after the measured ones of the same cell: a profile
                # never costs a measured run its throughput
                runs += [(a, "profile", 0) for a in turn]
                if rnd == 1:
                    runs.append((self.baseline_allocator(), "calls", 0))
            entries += [(cell, alloc, purpose, k) for alloc, purpose, k in runs]
        if self.whole_round:  # the round's runs side by side together, between its warm-ups and the rest
            entries.sort(key=lambda e: {"warmup": 0, "measure": 1 if self.side_of(e[0]) > 1 else 2}.get(e[2], 3))
        for cell, alloc, purpose, k in entries:
            i = first_index + len(specs)
            run_cell = cell
            if purpose == "calls" and cell.duration_s:
                # short: uprobes slow every call (the cell's key stays the same)
                run_cell = replace(cell, duration_s=min(cell.duration_s, CALLS_WINDOW_S))
            tag = {"measure": "", "profile": "-prof", "calls": "-calls", "warmup": "-warm"}[purpose]
            specs.append(RunSpec(
                index=i,
                run_id=(f"{i:04d}-{cell.engine}-{cell.part}-t{cell.threads}-b{cell.batch}"
                        f"-{_safe(alloc.name)}-r{rnd}{tag}{f'-c{k}' if k else ''}"),
                cell=run_cell, allocator=alloc, repeat=rnd, copy=k,
                seed=_derive_seed(self.seed, cell.key + (f"#{k}" if k else ""), rnd - 1),
                warmup_s=_or(workload.of(cell.workload).rampup_s(cell), self.warmup_s),
                interval_ms=self.interval_ms,
                engine_options={**self.engine_options, **self.profiles.get(cell.profile, {})},
                timeout_s=self.run_timeout_s, hang_timeout_s=self.hang_timeout_s, study_seed=self.seed,
                purpose=purpose, slice_s=self.slice_of(cell) if purpose == "measure" else 0.0,
                turn_warmup_s=self.turn_warmup_s,
                side_by_side=self.side_of(cell) if purpose == "measure" else 1,
                whole_round=self.whole_round and purpose == "measure" and self.side_of(cell) > 1,
                **{**self.placement(cell.shape), **({"server_memory_bytes": m} if (
                    m := self.unit_memory.get(f"{cell.key}|{alloc.name}")) else {})}))
        return specs

    @property
    def baseline(self) -> str:
        return self.design.baseline

    def baseline_allocator(self) -> alloc_mod.Allocator:
        return next((a for a in self.allocators if a.name == self.baseline), self.allocators[0])

    def placement(self, shape: str) -> dict:
        s = {"server_cpus": self.server_cpus, "client_cpus": self.client_cpus,
             "server_memory_bytes": self.server_memory_bytes}
        return {**s, **self.shapes.get(shape, {})}

    def to_json(self) -> dict:
        d = asdict(self)
        d["allocators"] = [a.to_json() for a in self.allocators]
        d["design"] = self.design.to_json()
        return d

    @classmethod
    def from_json(cls, d: dict) -> Plan:
        """The inverse of to_json, for --resume: the stored plan makes the next rounds (its design
        as design.Design.from_plan reads it, from folders of every version)."""
        allocs = [alloc_mod.Allocator.from_json(a) for a in d["allocators"]]
        names = {f.name for f in fields(cls)}
        return cls(**{**{k: v for k, v in d.items() if k in names}, "allocators": allocs,
                      "design": design.Design.from_plan(d)})


MIN_SLICE_S = 0.05
CALLS_WINDOW_S = 5.0  # a calls run measures at most this long: every call is a trap into the kernel


def _or(x, default):
    return default if x is None else x


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s)[:60]


def _derive_seed(seed: int, cell_key: str, rep: int) -> int:
    """The same for every allocator of a cell and repeat, so they see the same keys."""
    h = hashlib.sha256(f"{seed}/{cell_key}/{rep}".encode()).digest()
    return int.from_bytes(h[:8], "big") >> 1
