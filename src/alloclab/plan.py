"""Plan: a study's matrix, validated whole before the first run, expanded in interleaved order.

A plan comes from a preset, a TOML file or flags; all three become the same dictionary,
which `load` checks key by key (unknown keys rejected, each message naming the key and the
allowed values) and turns into a `Plan`.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
import re
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable

from alloclab import allocators as alloc_mod
from alloclab import decide
from alloclab.errors import AlloclabError
from alloclab.presets import MIN_WINDOW_S, SCALES
from alloclab.profiling import CALLS_WINDOW_S
from alloclab.units import parse_duration, parse_size

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

ENGINES = ("tidesdb", "rocksdb", "sqlite", "null")
WORKLOADS = ("write", "read", "mixed", "delete", "seek", "range", "tpcc", "sysbench")
SYSBENCH_TESTS = ("oltp_point_select", "oltp_read_only", "oltp_read_write")
TPCC_ENGINES = ("tidesdb", "rocksdb", "sqlite")
TPCC_MIXES = ("spec", "hammerdb")
# how the client drives TPC-C: one CALL per transaction (servers' default, as HammerDB),
# prepared set-based statements (SQL engines), or row at a time (every engine)
TPCC_MODES = ("procedures", "statements", "rows")


def default_tpcc_mode(engine: str) -> str:
    return "rows" if engine in ENGINES else "procedures"
PATTERNS = ("seq", "random", "zipfian", "uniform")
SYNC = ("none", "full")
COMPRESSION = ("none", "lz4", "zstd")


# Bounds that keep a typo from expanding into a matrix nobody meant to run.
MAX_RUNS = 100_000
MAX_THREADS = 100_000
MAX_BYTES = 1 << 50


# --- a tiny schema: each key has a checker that returns the clean value or raises ---------

def _int(lo: int = 0, hi: int = 2**62) -> Callable[[str, Any], int]:
    def check(key, v):
        if isinstance(v, bool) or not isinstance(v, int):
            raise AlloclabError(f"{key}: expected an integer >= {lo}, got {v!r}")
        if v < lo:
            raise AlloclabError(f"{key}: must be >= {lo}, got {v}")
        if v > hi:
            raise AlloclabError(f"{key}: must be <= {hi}, got {v}")
        return v
    return check


def _size(lo: int = 1) -> Callable[[str, Any], int]:
    def check(key, v):
        n = parse_size(v, key)
        if n < lo or n > MAX_BYTES:
            raise AlloclabError(f"{key}: must be between {lo} bytes and 1 PiB, got {v!r}")
        return n
    return check


def _seconds(lo: float = 0.0, strict: bool = False) -> Callable[[str, Any], float]:
    def check(key, v):
        s = parse_duration(v, key)
        if not math.isfinite(s) or s < lo or (strict and s <= lo):
            raise AlloclabError(f"{key}: must be a duration {'>' if strict else '>='} {lo}s, got {v!r}")
        return s
    return check


def _choice(options: tuple[str, ...]) -> Callable[[str, Any], str]:
    def check(key, v):
        if v not in options:
            raise AlloclabError(f"{key}: {v!r} is not allowed", "allowed values: " + ", ".join(options))
        return v
    return check


def _pct(lo: float, hi: float) -> Callable[[str, Any], float]:
    def check(key, v):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise AlloclabError(f"{key}: expected a percentage between {lo:g} and {hi:g}, got {v!r}")
        if not lo < v <= hi:
            raise AlloclabError(f"{key}: must be above {lo:g} and at most {hi:g} (a percentage), got {v!r}")
        return float(v)
    return check


def _bool(key, v):
    if not isinstance(v, bool):
        raise AlloclabError(f"{key}: expected true or false, got {v!r}")
    return v


def _engine(key, v):
    """An embedded engine, or a server target (mariadb-innodb, mariadb-myrocks, postgres,
    mariadb:ENGINE=plugin.so)."""
    if v in ENGINES:
        return v
    from alloclab import targets
    if isinstance(v, str):
        try:
            return targets.parse(v).name
        except AlloclabError as e:
            if v.startswith("mariadb11-tidesdb@"):  # a build it does not know: say which it knows
                raise AlloclabError(f"{key}: {e.message}", e.hint) from None
    raise AlloclabError(f"{key}: {v!r} is not allowed",
                        "allowed values: " + ", ".join(ENGINES + tuple(_server_names())) +
                        ", mariadb11-tidesdb@BUILD (4.2.5, seed000, seed003), mariadb:ENGINE=plugin.so")


def _server_names() -> list[str]:
    from alloclab import targets
    return list(targets.BUILTIN)


def _cpus(key, v):
    from alloclab.placement import parse_cpus
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise AlloclabError(f"{key}: expected a CPU list such as \"0-3\", got {v!r}")
    parse_cpus(str(v), key)
    return str(v)


def _text(key, v):
    if not isinstance(v, str) or not v.strip():
        raise AlloclabError(f"{key}: expected a non-empty string, got {v!r}")
    return v


def _list_of(check: Callable, allow_scalar: bool = True) -> Callable[[str, Any], list]:
    def run(key, v):
        if not isinstance(v, list):
            if not allow_scalar:
                raise AlloclabError(f"{key}: expected a list, got {v!r}")
            v = [v]
        if not v:
            raise AlloclabError(f"{key}: the list is empty")
        out = [check(f"{key}[{i}]", x) for i, x in enumerate(v)]
        if len(set(map(str, out))) != len(out):
            raise AlloclabError(f"{key}: duplicate values in {v!r}")
        return out
    return run


def _check_table(where: str, table: Any, schema: dict[str, Callable]) -> dict:
    if not isinstance(table, dict):
        raise AlloclabError(f"{where}: expected a table, got {table!r}")
    unknown = sorted(set(map(str, table)) - set(schema))
    if unknown:
        raise AlloclabError(f"{where}: unknown key(s) {', '.join(unknown)}",
                            "allowed keys: " + ", ".join(sorted(schema)))
    return {k: schema[k](f"{where}.{k}" if where else k, v) for k, v in table.items()}


ENGINE_OPTIONS = {
    "memtable_bytes": _size(4096),
    "block_cache_bytes": _size(0),
    "sync": _choice(SYNC),
    "compression": _choice(COMPRESSION),
    "flush_threads": _int(1),
    "compaction_threads": _int(1),
    "null_latency_ns": _int(0),
}

WORKLOAD_SCHEMA = {
    "part": _text,
    "workload": _choice(WORKLOADS),
    "pattern": _list_of(_choice(PATTERNS)),
    "key_bytes": _list_of(_size(8)),
    "value_bytes": _list_of(_size(1)),
    "batch": _list_of(_int(1)),
    "threads": _list_of(_int(1, MAX_THREADS)),
    "ops": _int(1),
    "duration_s": _seconds(0.0, strict=True),
    "keyspace": _int(1),
    "range_len": _int(1),
    # TPC-C
    "warehouses": _list_of(_int(1)),
    "loaders": _int(1),
    "rampup_s": _seconds(0.0),
    "mix": _choice(TPCC_MIXES),
    "mode": _list_of(_choice(TPCC_MODES)),
    "all_warehouses": _bool,
    "think": _bool,
    # sysbench against a server target
    "test": _list_of(_choice(SYSBENCH_TESTS)),
    # the client: sysbench's tests: sysbench or native; TPC-C: native (alloclab's) or hammerdb
    "client": _list_of(_choice(("sysbench", "native", "hammerdb"))),
    "tables": _int(1, 10_000),
    "table_size": _int(1),
}

SHAPE_SCHEMA = {"server_cpus": _cpus, "client_cpus": _cpus, "server_memory_bytes": _size(1 << 24)}


def _named_tables(key, v, schema):
    if not isinstance(v, dict) or not v:
        raise AlloclabError(f"{key}: expected a table of named settings, e.g. [{key}.small]")
    for name in v:
        if not re.match(r"^[A-Za-z0-9_-]+$", str(name)):
            raise AlloclabError(f"{key}: name {name!r} may hold only letters, digits, '_' and '-'")
    return {name: _check_table(f"{key}.{name}", table, schema) for name, table in v.items()}


def _workloads(key, v):
    if not isinstance(v, list) or not v:
        raise AlloclabError(f"{key}: expected a non-empty array of tables ([[workloads]])")
    return [_check_table(f"{key}[{i}]", w, WORKLOAD_SCHEMA) for i, w in enumerate(v)]


EXECUTORS = ("local", "ray")

TOP_SCHEMA = {
    "name": _text,
    "preset": _text,
    "scale": _choice(SCALES),
    "seed": _int(0),
    "runs": _int(1, 10_000),
    # adaptive rounds (when `runs` is not given): see decide.py
    "target_ci_pct": _pct(0, 100),
    "margin_pct": _pct(0, 100),
    "budget": _seconds(0.0, strict=True),
    "min_runs": _int(2, 1000),
    "max_rounds": _int(2, 1000),
    "min_window_s": _seconds(0.0),
    "questions": _list_of(_choice(decide.QUESTIONS)),
    "baseline_engine": _text,
    "engines": _list_of(_engine),
    "allocators": _list_of(_text),
    "baseline": _text,
    "warmup_s": _seconds(0.0),
    # measure a cell's allocators in turns of this many seconds (interleave.py); 0: one after another
    "slice_s": _seconds(0.0),
    # one unmeasured run of each cell (baseline allocator) before round 1: the first run on a
    # cold machine (page cache, fresh files, CPU clocks) is slower than the rest
    "warmup_round": _bool,
    "interval_ms": _int(10),
    "run_timeout_s": _seconds(0.0, strict=True),
    "hang_timeout_s": _seconds(0.0, strict=True),
    "engine_options": lambda k, v: _check_table(k, v, ENGINE_OPTIONS),
    "profiles": lambda k, v: _named_tables(k, v, ENGINE_OPTIONS),
    "shapes": lambda k, v: _named_tables(k, v, SHAPE_SCHEMA),
    "server_cpus": _cpus,
    "client_cpus": _cpus,
    "server_memory_bytes": _size(1 << 24),
    "workloads": _workloads,
    # profiled runs beside the measured ones: perf CPU samples and context switches of the
    # measured window, and a short run counting the allocator's calls (uprobes)
    "perf": _bool,
    "profile_runs": _int(1, 100),
    # where runs execute: this machine, or the nodes of a Ray cluster (fleet.py), one run per node
    "executor": _choice(EXECUTORS),
    "ray_address": _text,
}

WORKLOAD_DEFAULTS = {"pattern": ["random"], "key_bytes": [16], "value_bytes": [100], "batch": [1],
                     "threads": [1], "range_len": 100}


# --- the plan --------------------------------------------------------------------------

@dataclass(frozen=True)
class Cell:
    """Everything that defines a measurement except the allocator and the repeat."""

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
    # TPC-C only
    warehouses: int = 0
    loaders: int = 1
    rampup_s: float | None = None
    mix: str = "spec"
    all_warehouses: bool = False
    think: bool = False
    # sysbench only
    test: str = ""
    client: str = "sysbench"
    tables: int = 0
    table_size: int = 0
    shape: str = "default"
    mode: str = ""  # TPC-C: procedures or rows ("" in folders from before modes: rows)

    @property
    def tpcc_mode(self) -> str:
        """How the client drives TPC-C: the cell's mode, else the engine's default (cells from
        before modes); HammerDB runs its own procedures; "" for other workloads."""
        if self.workload != "tpcc":
            return ""
        return "procedures" if self.client == "hammerdb" else (self.mode or default_tpcc_mode(self.engine))

    @property
    def key(self) -> str:
        base = f"{self.engine}/{self.part}/{self.workload}"
        prof = "" if self.profile == "default" else f"/{self.profile}"
        if self.workload == "tpcc":
            mode = f"/{self.mode}" if self.mode and self.mode != default_tpcc_mode(self.engine) else ""
            client = "/hammerdb" if self.client == "hammerdb" else ""
            return f"{base}/w{self.warehouses}/vu{self.threads}{client}{mode}{prof}"
        if self.workload == "sysbench":
            shape = "" if self.shape == "default" else f"/{self.shape}"
            client = "" if self.client == "sysbench" else f"/{self.client}"
            return f"{base}/{self.test}{client}/{self.tables}x{self.table_size}/t{self.threads}{prof}{shape}"
        return f"{base}/{self.pattern}/k{self.key_bytes}/v{self.value_bytes}/b{self.batch}/t{self.threads}{prof}"


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

    def to_json(self) -> dict:
        d = asdict(self)
        d["allocator"] = self.allocator.to_json()
        d["cell_key"] = self.cell.key
        return d

    @classmethod
    def from_json(cls, d: dict) -> RunSpec:
        """The inverse of to_json, for --resume: plan.json holds every run spec."""
        alloc = alloc_mod.Allocator.from_json(d["allocator"])
        cell_names = {f.name for f in fields(Cell)}
        spec = {k: v for k, v in d.items() if k in {f.name for f in fields(cls)}}
        spec["cell"] = Cell(**{k: v for k, v in d["cell"].items() if k in cell_names})
        spec["allocator"] = alloc
        return cls(**spec)


@dataclass
class Plan:
    name: str
    preset: str | None
    scale: str
    seed: int
    runs: int | None  # exactly this many rounds; None: rounds until decided or out of budget
    engines: list[str]
    allocators: list[alloc_mod.Allocator]
    baseline: str
    workloads: list[dict]
    engine_options: dict = field(default_factory=dict)
    profiles: dict = field(default_factory=dict)
    shapes: dict = field(default_factory=dict)
    server_cpus: str = ""
    client_cpus: str = ""
    server_memory_bytes: int = 0
    warmup_s: float = 0.0
    interval_ms: int = 1000
    run_timeout_s: float = 1800.0
    hang_timeout_s: float = 300.0
    target_ci_pct: float = 100 * decide.DEFAULT_TARGET_CI
    margin_pct: float = 2.0
    budget: float | None = None  # seconds of wall time for the whole study, over every sitting
    min_runs: int = decide.DEFAULT_MIN_RUNS
    max_rounds: int = decide.DEFAULT_MAX_ROUNDS
    min_window_s: float = 0.0
    questions: list[str] = field(default_factory=lambda: ["allocators"])
    baseline_engine: str = ""
    perf: bool = False  # add profiled runs beside the measured ones (--profile)
    profile_runs: int = 2  # profiled runs of each cell x allocator (in the first rounds)
    warmup_round: bool = False  # one unmeasured run per cell before round 1
    slice_s: float = 0.0  # > 0: a cell's measured runs of a round take turns of this length
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
                    w = {**WORKLOAD_DEFAULTS, **w}
                    tpcc = w["workload"] == "tpcc"
                    modes = w.get("mode") or [default_tpcc_mode(engine)] if tpcc else [""]
                    for pattern, kb, vb, batch, threads, wh, test, client, mode in itertools.product(
                            w["pattern"], w["key_bytes"], w["value_bytes"], w["batch"], w["threads"],
                            w.get("warehouses", [1 if tpcc else 0]), w.get("test", [""]),
                            w.get("client", ["native" if tpcc else "sysbench"]),
                            modes if not (tpcc and "hammerdb" in w.get("client", [])) else [""]):
                        ops = w.get("ops")
                        if ops is None and "duration_s" not in w:
                            ops = 100_000
                        out.append(Cell(
                            engine=engine, part=w.get("part", w["workload"]), workload=w["workload"],
                            pattern=pattern, key_bytes=kb, value_bytes=vb, batch=batch, threads=threads,
                            ops=ops if "duration_s" not in w else None, duration_s=w.get("duration_s"),
                            keyspace=w.get("keyspace"), range_len=w["range_len"], profile=profile,
                            warehouses=wh if tpcc else 0, loaders=w.get("loaders", 1), rampup_s=w.get("rampup_s"),
                            mix=w.get("mix", "hammerdb" if client == "hammerdb" else "spec"),
                            all_warehouses=w.get("all_warehouses", False),
                            think=w.get("think", False), test=test, client=client, tables=w.get("tables", 10),
                            table_size=w.get("table_size", 100_000), shape=shape, mode=mode))
        seen = set()
        for c in out:
            if c.key in seen:
                raise AlloclabError(f"the plan has the cell {c.key} twice",
                                    "give each [[workloads]] entry its own 'part' name or different parameters")
            seen.add(c.key)
        return out

    def expand(self) -> list[RunSpec]:
        """Every run of a fixed study (`runs` rounds of every unit), in the order they run."""
        specs: list[RunSpec] = []
        for rnd in range(1, (self.runs or self.min_runs) + 1):
            specs += self.round_specs(rnd, None, len(specs) + 1)
        return specs

    def round_seed(self, rnd: int) -> int:
        return _derive_seed(self.seed, "round", rnd)

    def round_specs(self, rnd: int, active: set | None, first_index: int) -> list[RunSpec]:
        """One round: every active (cell, allocator) once. Cells in a fresh order drawn from the
        round's seed; on each cell its allocators back to back (A B C), starting from a different
        allocator each round, so that drift and warm caches do not favour one allocator."""
        rng = random.Random(self.round_seed(rnd))
        order = self.cells()
        rng.shuffle(order)
        specs: list[RunSpec] = []
        for ci, cell in enumerate(order):
            k = (rnd - 1 + ci) % len(self.allocators)
            turn = self.allocators[k:] + self.allocators[:k]
            runs = [(a, "measure") for a in turn if active is None or (cell.key, a.name) in active]
            if rnd == 1 and self.warmup_round:  # never measured: warms the machine for this cell
                runs.insert(0, (self.baseline_allocator(), "warmup"))
            if self.perf and rnd <= self.profile_runs:
                # separate runs, right after the measured ones of the same cell: a profile
                # never costs a measured run its throughput
                runs += [(a, "profile") for a in turn]
                if rnd == 1:
                    runs.append((self.baseline_allocator(), "calls"))
            for alloc, purpose in runs:
                i = first_index + len(specs)
                run_cell = cell
                if purpose == "calls" and cell.duration_s:
                    # short: uprobes slow every call (the cell's key stays the same)
                    run_cell = replace(cell, duration_s=min(cell.duration_s, CALLS_WINDOW_S))
                tag = {"measure": "", "profile": "-prof", "calls": "-calls", "warmup": "-warm"}[purpose]
                specs.append(RunSpec(
                    index=i,
                    run_id=(f"{i:04d}-{cell.engine}-{cell.part}-t{cell.threads}-b{cell.batch}"
                            f"-{_safe(alloc.name)}-r{rnd}{tag}"),
                    cell=run_cell, allocator=alloc, repeat=rnd,
                    seed=_derive_seed(self.seed, cell.key, rnd - 1),
                    warmup_s=cell.rampup_s if cell.rampup_s is not None else self.warmup_s,
                    interval_ms=self.interval_ms,
                    engine_options={**self.engine_options, **self.profiles.get(cell.profile, {})},
                    timeout_s=self.run_timeout_s, hang_timeout_s=self.hang_timeout_s, study_seed=self.seed,
                    purpose=purpose, slice_s=self.slice_s if purpose == "measure" else 0.0,
                    **self.placement(cell.shape)))
        return specs

    def baseline_allocator(self) -> alloc_mod.Allocator:
        return next((a for a in self.allocators if a.name == self.baseline), self.allocators[0])

    def placement(self, shape: str) -> dict:
        s = {"server_cpus": self.server_cpus, "client_cpus": self.client_cpus,
             "server_memory_bytes": self.server_memory_bytes}
        return {**s, **self.shapes.get(shape, {})}

    def to_json(self) -> dict:
        d = asdict(self)
        d["allocators"] = [a.to_json() for a in self.allocators]
        return d

    @classmethod
    def from_json(cls, d: dict) -> Plan:
        """The inverse of to_json, for --resume: the stored plan makes the next rounds."""
        allocs = [alloc_mod.Allocator.from_json(a) for a in d["allocators"]]
        names = {f.name for f in fields(cls)}
        return cls(**{**{k: v for k, v in d.items() if k in names}, "allocators": allocs})


MIN_SLICE_S = 0.05


def _check_slices(plan: Plan) -> None:
    """Turns (interleave.py) need alloclab's own client, which waits at a gate while the processes
    under test are stopped, and windows in seconds."""
    if plan.slice_s < MIN_SLICE_S:
        raise AlloclabError(f"slice_s: a turn of {plan.slice_s:g} s is shorter than {MIN_SLICE_S:g} s, where the "
                            "cost of handing over turns would show in the throughput",
                            f"use 0 (no turns) or at least {MIN_SLICE_S * 1000:g}ms")
    if plan.executor == "ray":
        raise AlloclabError("slice_s: runs that take turns share one machine; a Ray cluster runs each run on a node "
                            "of its own", "leave out --ray, or set slice_s = 0 (--slice 0)")
    for c in plan.cells():
        client = "sysbench" if c.workload == "sysbench" and c.client == "sysbench" else (
            "HammerDB" if c.workload == "tpcc" and c.client == "hammerdb" else "")
        if client:
            raise AlloclabError(f"slice_s: turns need alloclab's own client, which waits for its turn; the cell "
                                f"{c.key} is driven by {client}",
                                "set slice_s = 0 (--slice 0), or use client = native")
        if c.duration_s is None:
            raise AlloclabError(f"slice_s: turns cut a window in seconds; the cell {c.key} counts operations",
                                "give its workload duration_s (--duration), or set slice_s = 0 (--slice 0)")
        if plan.slice_s > c.duration_s:
            raise AlloclabError(f"slice_s: a turn of {plan.slice_s:g} s is longer than the {c.duration_s:g} s "
                                f"window of {c.key}", f"use a slice of at most {c.duration_s:g} s")


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s)[:60]


def _derive_seed(seed: int, cell_key: str, rep: int) -> int:
    """The same for every allocator of a cell and repeat, so they see the same keys."""
    h = hashlib.sha256(f"{seed}/{cell_key}/{rep}".encode()).digest()
    return int.from_bytes(h[:8], "big") >> 1


def read_toml(path: str | Path) -> dict:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise AlloclabError(f"cannot read plan file {path}: {e.strerror}") from e
    except tomllib.TOMLDecodeError as e:
        raise AlloclabError(f"plan file {path} is not valid TOML: {e}") from e
    except UnicodeDecodeError as e:
        raise AlloclabError(f"plan file {path} is not UTF-8 text (byte {e.start})", "save it as UTF-8") from e


def load(raw: dict, found_allocators: dict | None = None, default_seed: int | None = None) -> Plan:
    """Validate a plan dictionary completely and build the Plan. Raises AlloclabError."""
    d = _check_table("", raw, TOP_SCHEMA)
    if "workloads" not in d:
        raise AlloclabError("the plan has no workloads",
                            "add [[workloads]] tables, name a --preset, or pass --workloads")
    found = alloc_mod.discover() if found_allocators is None else found_allocators
    names = d.get("allocators") or list(found)
    allocs = [alloc_mod.parse(n, found) for n in names]
    labels = [a.name for a in allocs]
    if len(set(labels)) != len(labels):
        raise AlloclabError(f"allocators: duplicate allocator in {labels}")
    baseline = d.get("baseline", "glibc" if "glibc" in labels else labels[0])
    if baseline not in labels:
        raise AlloclabError(f"baseline: '{baseline}' is not among the plan's allocators",
                            "allowed values: " + ", ".join(labels))
    for i, w in enumerate(d["workloads"]):
        if "workload" not in w:
            raise AlloclabError(f"workloads[{i}]: missing key 'workload'", "allowed values: " + ", ".join(WORKLOADS))
        if "ops" in w and "duration_s" in w:
            raise AlloclabError(f"workloads[{i}]: give either ops or duration_s, not both")
        tpcc_keys = {"warehouses", "loaders", "rampup_s", "mix", "mode", "all_warehouses", "think"}
        if w["workload"] != "tpcc" and tpcc_keys & set(w):
            raise AlloclabError(f"workloads[{i}]: {', '.join(sorted(tpcc_keys & set(w)))} only apply to "
                                "workload = \"tpcc\"")
        engines = d.get("engines", ["tidesdb", "rocksdb", "sqlite"])
        if w["workload"] == "tpcc":
            bad = [e for e in engines if e not in TPCC_ENGINES and e in ENGINES]
            if bad:
                raise AlloclabError(f"workloads[{i}]: TPC-C does not run on {', '.join(bad)}",
                                    "allowed engines for tpcc: " + ", ".join(TPCC_ENGINES) + " and the servers")
            embedded = [e for e in engines if e in ENGINES]
            kv = [e for e in engines if e in ENGINES and e != "sqlite"]
            if "procedures" in w.get("mode", []) and embedded:
                raise AlloclabError(f"workloads[{i}].mode: procedures run inside a server, not in "
                                    f"{', '.join(embedded)}",
                                    "use mode = [\"rows\"] for embedded engines, or leave mode out (each engine "
                                    "gets its default: procedures on servers, rows embedded)")
            if "statements" in w.get("mode", []) and kv:
                raise AlloclabError(f"workloads[{i}].mode: statements are SQL, which {', '.join(kv)} do not speak",
                                    "statements run on the servers and sqlite; key-value engines run mode = "
                                    "[\"rows\"]")
        if w["workload"] == "tpcc" and "client" in w:
            bad = [c for c in w["client"] if c not in ("native", "hammerdb")]
            if bad:
                raise AlloclabError(f"workloads[{i}].client: {bad[0]!r} does not run TPC-C",
                                    "allowed values for tpcc: native (alloclab's client), hammerdb")
            if "hammerdb" in w["client"]:
                from alloclab import targets
                not_maria = [e for e in engines if e in ENGINES or targets.parse(e).kind != "mariadb"]
                if not_maria:
                    raise AlloclabError(f"workloads[{i}].client: HammerDB's TPROC-C runs here against MariaDB only, "
                                        f"not {', '.join(not_maria)}",
                                        "use mariadb-innodb, mariadb-myrocks, mariadb11-* or mariadb:ENGINE=plugin.so")
                if w.get("mode"):
                    raise AlloclabError(f"workloads[{i}].mode: HammerDB runs its own stored procedures; mode is for "
                                        "the native client", "drop mode, or run client = [\"native\"]")
                if "ops" in w:
                    raise AlloclabError(f"workloads[{i}].ops: HammerDB runs for a time, not a count",
                                        "give duration_s (HammerDB counts in steps of 6 s)")
                w.setdefault("duration_s", 30.0)  # HammerDB's timed test (it has no count of transactions)
                if w.get("mix", "hammerdb") != "hammerdb":
                    raise AlloclabError(f"workloads[{i}].mix: HammerDB's mix is its own (10/10/1/1/1 of 23)",
                                        "set mix = \"hammerdb\" (or leave it out) with client = \"hammerdb\"")
        sb_keys = {"test", "tables", "table_size"} | ({"client"} if w["workload"] != "tpcc" else set())
        if w["workload"] != "sysbench" and sb_keys & set(w):
            raise AlloclabError(f"workloads[{i}]: {', '.join(sorted(sb_keys & set(w)))} only apply to "
                                "workload = \"sysbench\"")
        if w["workload"] == "sysbench":
            if "test" not in w:
                raise AlloclabError(f"workloads[{i}]: sysbench needs a test", "allowed values: "
                                    + ", ".join(SYSBENCH_TESTS))
            bad = [c for c in w.get("client", []) if c not in ("sysbench", "native")]
            if bad:
                raise AlloclabError(f"workloads[{i}].client: {bad[0]!r} does not run sysbench's tests",
                                    "allowed values for sysbench: sysbench, native")
            bad = [e for e in engines if e in ENGINES]
            if bad:
                raise AlloclabError(f"workloads[{i}]: sysbench runs against a server, not {', '.join(bad)}",
                                    "allowed engines for sysbench: " + ", ".join(_server_names())
                                    + ", mariadb:ENGINE=plugin.so")
        elif w["workload"] != "tpcc" and any(e not in ENGINES for e in engines):
            servers = [e for e in engines if e not in ENGINES]
            raise AlloclabError(f"workloads[{i}]: {w['workload']} runs in-process on an embedded engine, not on "
                                f"{', '.join(servers)} (yet)", "use workload = \"sysbench\" against servers")
    scale = d.get("scale", "quick")
    floor = d.get("min_window_s", MIN_WINDOW_S[scale])
    for i, w in enumerate(d["workloads"]):
        if "duration_s" in w and w["duration_s"] < floor:
            raise AlloclabError(
                f"workloads[{i}].duration_s: {w['duration_s']:g} s is shorter than the {floor:g} s floor of a measured "
                f"window at scale {scale} (shorter windows measure noise)",
                f"use --duration {floor:g}s or more, --scale smoke for a quick check, or set min_window_s")
    engines_all = d.get("engines", ["tidesdb", "rocksdb", "sqlite"])
    if "baseline_engine" in d and d["baseline_engine"] not in engines_all:
        raise AlloclabError(f"baseline_engine: '{d['baseline_engine']}' is not among the plan's engines",
                            "allowed values: " + ", ".join(engines_all))
    if "runs" in d and {"target_ci_pct", "min_runs", "max_rounds"} & set(d):
        given = ", ".join(sorted({"target_ci_pct", "min_runs", "max_rounds"} & set(d)))
        raise AlloclabError(f"runs = {d['runs']} fixes the number of runs; {given} only apply to a study that runs "
                            "rounds until it is decided", "drop runs (or --runs) for adaptive rounds, or drop " + given)
    if d.get("min_runs", 0) > d.get("max_rounds", decide.DEFAULT_MAX_ROUNDS):
        raise AlloclabError(f"min_runs ({d['min_runs']}) is more than max_rounds "
                            f"({d.get('max_rounds', decide.DEFAULT_MAX_ROUNDS)})", "raise max_rounds or lower min_runs")
    seed = d.get("seed", default_seed if default_seed is not None else random.SystemRandom().randrange(1 << 31))
    plan = Plan(
        name=d.get("name", d.get("preset", "study")),
        preset=d.get("preset"),
        scale=scale,
        seed=seed,
        runs=d.get("runs"),
        engines=d.get("engines", ["tidesdb", "rocksdb", "sqlite"]),
        allocators=allocs,
        baseline=baseline,
        workloads=d["workloads"],
        engine_options=d.get("engine_options", {}),
        profiles=d.get("profiles", {}),
        shapes=d.get("shapes", {}),
        server_cpus=d.get("server_cpus", ""),
        client_cpus=d.get("client_cpus", ""),
        server_memory_bytes=d.get("server_memory_bytes", 0),
        warmup_s=d.get("warmup_s", 0.0),
        interval_ms=d.get("interval_ms", 1000),
        run_timeout_s=d.get("run_timeout_s", 1800.0),
        hang_timeout_s=d.get("hang_timeout_s", 300.0),
        target_ci_pct=d.get("target_ci_pct", 100 * decide.DEFAULT_TARGET_CI),
        margin_pct=d.get("margin_pct", 2.0),
        budget=d.get("budget"),
        min_runs=d.get("min_runs", decide.DEFAULT_MIN_RUNS),
        max_rounds=d.get("max_rounds", decide.DEFAULT_MAX_ROUNDS),
        min_window_s=floor,
        questions=d.get("questions") or decide.default_questions(labels, engines_all),
        baseline_engine=d.get("baseline_engine", engines_all[0]),
        perf=d.get("perf", False),
        profile_runs=d.get("profile_runs", 2),
        warmup_round=d.get("warmup_round", False),
        slice_s=d.get("slice_s", 0.0),
        executor=d.get("executor", "ray" if d.get("ray_address") else "local"),
        ray_address=d.get("ray_address", ""),
    )
    if plan.slice_s:
        _check_slices(plan)
    servers = [e for e in plan.engines if e not in ENGINES]
    if servers:
        from alloclab import targets
        linked = [a.name for a in allocs if a.link]
        for e in servers:
            t = targets.parse(e)
            if linked:
                why = "a server loads the allocator it is started with (preload)"
                if t.tidesql:
                    from alloclab import stack
                    why = (stack.state().get("steps", {}).get("check", {}).get("link", {}).get("mimalloc", {})
                           .get("reason") or why) + "; preload is the only effective way for a plugin"
                raise AlloclabError(f"allocators {', '.join(linked)} are link-time builds of the embedded driver; "
                                    f"they do not apply to {e}: {why}",
                                    "use preloaded allocators (jemalloc, mimalloc, ...) for servers, or run "
                                    "@link allocators on tidesdb, rocksdb, sqlite in a separate study")
            for prof in plan.profiles or {"small": {}, "sysbench": {}}:
                targets.load_profile(t, prof)
    n_runs = len(plan.cells()) * len(allocs) * (plan.runs or plan.max_rounds)  # duplicate cells are an error here too
    if n_runs > MAX_RUNS:
        raise AlloclabError(f"the plan expands to {n_runs} runs, more than {MAX_RUNS}",
                            "split it into several studies, or use fewer parameters, allocators or repeats")
    return plan
