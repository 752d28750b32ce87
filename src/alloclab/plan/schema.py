"""The plan's schema: each key has a checker that returns the clean value or raises, naming the
key and what is allowed. Names come from the catalog; defaults of a study's design from design."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Callable

from alloclab.catalog import metrics, targets, tidesql
from alloclab.catalog.names import (
    COMPRESSION,
    ENGINES,
    PATTERNS,
    SYNC,
    SYSBENCH_CLIENTS,
    TPCC_CLIENTS,
)
from alloclab.core.errors import AlloclabError
from alloclab.core.units import parse_duration, parse_size
from alloclab.host.placement import parse_cpus
from alloclab.plan import design, workload
from alloclab.plan.presets import SCALES

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

MAX_RUNS = 100_000
MAX_THREADS = 100_000
MAX_BYTES = 1 << 50


def whole(lo: int = 0, hi: int = 2**62) -> Callable[[str, Any], int]:
    def check(key, v):
        if isinstance(v, bool) or not isinstance(v, int):
            raise AlloclabError(f"{key}: expected an integer >= {lo}, got {v!r}")
        if v < lo:
            raise AlloclabError(f"{key}: must be >= {lo}, got {v}")
        if v > hi:
            raise AlloclabError(f"{key}: must be <= {hi}, got {v}")
        return v
    return check


def size(lo: int = 1) -> Callable[[str, Any], int]:
    def check(key, v):
        n = parse_size(v, key)
        if n < lo or n > MAX_BYTES:
            raise AlloclabError(f"{key}: must be between {lo} bytes and 1 PiB, got {v!r}")
        return n
    return check


def seconds(lo: float = 0.0, strict: bool = False) -> Callable[[str, Any], float]:
    def check(key, v):
        s = parse_duration(v, key)
        if not math.isfinite(s) or s < lo or (strict and s <= lo):
            raise AlloclabError(f"{key}: must be a duration {'>' if strict else '>='} {lo}s, got {v!r}")
        return s
    return check


def choice(options: tuple[str, ...]) -> Callable[[str, Any], str]:
    def check(key, v):
        if v not in options:
            raise AlloclabError(f"{key}: {v!r} is not allowed", "allowed values: " + ", ".join(options))
        return v
    return check


def percent(lo: float, hi: float) -> Callable[[str, Any], float]:
    def check(key, v):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise AlloclabError(f"{key}: expected a percentage between {lo:g} and {hi:g}, got {v!r}")
        if not lo < v <= hi:
            raise AlloclabError(f"{key}: must be above {lo:g} and at most {hi:g} (a percentage), got {v!r}")
        return float(v)
    return check


def spread_pct(key, v) -> float:
    """A spread in percent: 0 (none) up to 100."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= 100:
        raise AlloclabError(f"{key}: expected a percentage from 0 to 100, got {v!r}")
    return float(v)


def spreads(key, v) -> dict[str, float]:
    """Allocator = percent (throughput's), and a metric's own table of them ({p99_latency =
    {tcmalloc = 1.8}}): flat, a metric's entries as design.between_key names them."""
    if not isinstance(v, dict):
        raise AlloclabError(f"{key}: expected a table of allocator = percent, got {v!r}")
    out = {}
    for k, x in v.items():
        if isinstance(x, dict):
            if k not in {m.name for m in metrics.verdicts()}:
                raise AlloclabError(f"{key}.{k}: a table here must be a metric's", "allowed metrics: " + ", ".join(
                    m.name for m in metrics.verdicts()))
            out |= {design.between_key(k, str(a)): spread_pct(f"{key}.{k}.{a}", y) for a, y in x.items()}
        else:
            out[str(k)] = spread_pct(f"{key}.{k}", x)
    return out


def boolean(key, v):
    if not isinstance(v, bool):
        raise AlloclabError(f"{key}: expected true or false, got {v!r}")
    return v


def _engine(key, v):
    """An embedded engine, or a server target (mariadb-innodb, mariadb-myrocks, postgres,
    mariadb:ENGINE=plugin.so)."""
    if v in ENGINES:
        return v
    if isinstance(v, str):
        try:
            return targets.parse(v).name
        except AlloclabError as e:
            if v.startswith("mariadb11-tidesdb@"):  # a build it does not know: say which it knows
                raise AlloclabError(f"{key}: {e.message}", e.hint) from None
    others = ", ".join(b for b in tidesql.BUILDS if b != tidesql.DEFAULT_BUILD)
    raise AlloclabError(f"{key}: {v!r} is not allowed",
                        "allowed values: " + ", ".join(ENGINES + tuple(server_names())) +
                        f", mariadb11-tidesdb@BUILD ({others}), mariadb:ENGINE=plugin.so")


def server_names() -> list[str]:
    return list(targets.BUILTIN)


def _cpus(key, v):
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise AlloclabError(f"{key}: expected a CPU list such as \"0-3\", got {v!r}")
    parse_cpus(str(v), key)
    return str(v)


def text(key, v):
    if not isinstance(v, str) or not v.strip():
        raise AlloclabError(f"{key}: expected a non-empty string, got {v!r}")
    return v


def list_of(check: Callable, allow_scalar: bool = True) -> Callable[[str, Any], list]:
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


def check_table(where: str, table: Any, schema: dict[str, Callable]) -> dict:
    if not isinstance(table, dict):
        raise AlloclabError(f"{where}: expected a table, got {table!r}")
    unknown = sorted(set(map(str, table)) - set(schema))
    if unknown:
        raise AlloclabError(f"{where}: unknown key(s) {', '.join(unknown)}",
                            "allowed keys: " + ", ".join(sorted(schema)))
    return {k: schema[k](f"{where}.{k}" if where else k, v) for k, v in table.items()}


ENGINE_OPTIONS = {
    "memtable_bytes": size(4096),
    "block_cache_bytes": size(0),
    "sync": choice(SYNC),
    "compression": choice(COMPRESSION),
    "flush_threads": whole(1),
    "compaction_threads": whole(1),
    "null_latency_ns": whole(0),
}

# the keys every [[workloads]] table may hold; each workload adds its own (Workload.schema:
# TPC-C's warehouses, sysbench's tests, a life's phases), and `workload_schema` joins them
WORKLOAD_SCHEMA = {
    "part": text,
    "workload": lambda key, v: choice(workload.names())(key, v),  # the registered workloads' names
    # the plan's engines this workload runs on (default: all of them)
    "engines": list_of(_engine),
    "pattern": list_of(choice(PATTERNS)),
    "key_bytes": list_of(size(8)),
    "value_bytes": list_of(size(1)),
    "batch": list_of(whole(1)),
    "threads": list_of(whole(1, MAX_THREADS)),
    "ops": whole(1),
    "duration_s": seconds(0.0, strict=True),
    "keyspace": whole(1),
    "range_len": whole(1),
    # the client of a server workload: sysbench's tests: sysbench or native; TPC-C: native or hammerdb
    "client": list_of(choice(SYSBENCH_CLIENTS + TPCC_CLIENTS[1:])),
    # measured runs of each allocator on this workload's cells in every round (default 1), a
    # round's value of an allocator being their mean: more pairs a round where one run's spread
    # is wide and the machine has room (side_by_side counts each)
    "runs_per_round": whole(1, 16),
    # this workload's cells take turns of this many seconds, whatever the plan's slice_s (0: none):
    # beside lives side by side, the steady load alone in turns, to price them in speed
    "slice_s": seconds(0.0),
    # the server settings profile of this workload's cells (a name under profiles/), where the plan
    # names none: another workload's, to measure its server as that one runs it
    "profile": text,
}


def workload_schema() -> dict[str, Callable]:
    """The keys a [[workloads]] table may hold: the common ones and every workload's own."""
    out = dict(WORKLOAD_SCHEMA)
    for wl in workload.every():
        out.update(wl.schema)
    return out


SHAPE_SCHEMA = {"server_cpus": _cpus, "client_cpus": _cpus, "server_memory_bytes": size(1 << 24)}


def _named_tables(key, v, schema):
    if not isinstance(v, dict) or not v:
        raise AlloclabError(f"{key}: expected a table of named settings, e.g. [{key}.small]")
    for name in v:
        if not re.match(r"^[A-Za-z0-9_-]+$", str(name)):
            raise AlloclabError(f"{key}: name {name!r} may hold only letters, digits, '_' and '-'")
    return {name: check_table(f"{key}.{name}", table, schema) for name, table in v.items()}


def _workloads(key, v):
    if not isinstance(v, list) or not v:
        raise AlloclabError(f"{key}: expected a non-empty array of tables ([[workloads]])")
    schema = workload_schema()
    return [check_table(f"{key}[{i}]", w, schema) for i, w in enumerate(v)]


EXECUTORS = ("local", "ray")

TOP_SCHEMA = {
    "name": text,
    "preset": text,
    "scale": choice(SCALES),
    "seed": whole(0),
    "runs": whole(1, 10_000),
    # adaptive rounds (when `runs` is not given): see design.py
    "target_ci_pct": percent(0, 100),
    "margin_pct": percent(0, 100),
    # a metric's own equivalence margin, over margin_pct and the metric's default: {overhead = 5,
    # given_back = 10}; a share compared in percentage points (given_back) takes points, a metric
    # compared as a difference in its own unit takes that unit (creep: MiB a cycle)
    "margins_pct": lambda key, v: check_table(key, v, {m.name: percent(0, 100) for m in metrics.verdicts()}),
    # a variant's throughput ratio's spread between studies on one machine, an hour apart (SD of the
    # log ratio, %), added to its verdict's own error: {jemalloc = 0.6, other = 2.0} (design.py)
    "between_studies_pct": spreads,
    # a folder of stored studies (each a folder `alloclab run` wrote): those of this machine and
    # cell give each variant's own spread between studies, which floors between_studies_pct
    "between_studies_from": text,
    "budget": seconds(0.0, strict=True),
    "min_runs": whole(2, 1000),
    "max_rounds": whole(2, 1000),
    # the most times the study looks at its comparisons (default: from round 4, each look about 1.5
    # times the last); 1: once, at its last round, at the plain 95 % (design.py)
    "looks": whole(1, 100),
    "min_window_s": seconds(0.0),
    "questions": list_of(choice(design.QUESTIONS)),
    # the metrics whose undecided comparisons keep a (cell, allocator) running; default: throughput
    # and a life's memory metrics (memory-life: its memory metrics only)
    "decide_on": lambda key, v: list_of(choice(metrics.goals()))(key, v),
    "baseline_engine": text,
    "engines": list_of(_engine),
    "allocators": list_of(text),
    "baseline": text,
    "warmup_s": seconds(0.0),
    # measure a cell's allocators in turns of this many seconds (interleave.py); 0: one after another
    "slice_s": seconds(0.0),
    # before each turn is timed, its run works this long unmeasured (interleave.py: the caches the
    # others' turns took, pages an allocator handed back while it was stopped, are its own again)
    "turn_warmup_s": seconds(0.0),
    # run a cell's measured runs of a round this many at a time, side by side (interleave.py); at
    # least the round's runs: the whole round at once, every cell's together; 1: one after another.
    # For lives, whose memory is the question: each shares the machine alike
    "side_by_side": whole(1, 64),
    # the runs side by side (lives) run in the first this many rounds only; the rest of the study's
    # cells (a workload's turns: the lives' price in speed) go on in the rounds the budget leaves
    "side_by_side_rounds": whole(2, 1000),
    # one unmeasured run of each cell (baseline allocator) before round 1: the first run on a
    # cold machine (page cache, fresh files, CPU clocks) is slower than the rest
    "warmup_round": boolean,
    "interval_ms": whole(10),
    "run_timeout_s": seconds(0.0, strict=True),
    "hang_timeout_s": seconds(0.0, strict=True),
    "engine_options": lambda k, v: check_table(k, v, ENGINE_OPTIONS),
    "profiles": lambda k, v: _named_tables(k, v, ENGINE_OPTIONS),
    "shapes": lambda k, v: _named_tables(k, v, SHAPE_SCHEMA),
    "server_cpus": _cpus,
    "client_cpus": _cpus,
    "server_memory_bytes": size(1 << 24),
    "workloads": _workloads,
    # profiled runs beside the measured ones: perf CPU samples and context switches of the
    # measured window, and a short run counting the allocator's calls (uprobes)
    "perf": boolean,
    "profile_runs": whole(1, 100),
    # where runs execute: this machine, or the nodes of a Ray cluster (fleet.py), one run per node
    "executor": choice(EXECUTORS),
    "ray_address": text,
}

WORKLOAD_DEFAULTS = {"pattern": ["random"], "key_bytes": [16], "value_bytes": [100], "batch": [1],
                     "threads": [1], "range_len": 100}


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
