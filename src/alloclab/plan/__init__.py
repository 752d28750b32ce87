"""Plan a study: its schema, cells, runs and rounds, its design (questions, defaults, looks) and
the presets. A plan is validated from the plan alone (plan.load), never from the machine."""

from alloclab.catalog.names import (
    COMPRESSION,
    ENGINES,
    PATTERNS,
    SYNC,
    SYSBENCH_TESTS,
    TPCC_MIXES,
    WORKLOADS,
)
from alloclab.plan.cell import Cell, RunSpec
from alloclab.plan.load import load
from alloclab.plan.schema import ENGINE_OPTIONS, MAX_RUNS, TOP_SCHEMA, WORKLOAD_SCHEMA, read_toml
from alloclab.plan.spec import CALLS_WINDOW_S, MIN_SLICE_S, Plan, side_by_side_groups

__all__ = ["CALLS_WINDOW_S", "COMPRESSION", "ENGINES", "ENGINE_OPTIONS", "MAX_RUNS", "MIN_SLICE_S", "PATTERNS", "SYNC",
           "SYSBENCH_TESTS", "TOP_SCHEMA", "TPCC_MIXES", "WORKLOADS", "WORKLOAD_SCHEMA", "Cell", "Plan", "RunSpec",
           "load", "read_toml", "side_by_side_groups"]
