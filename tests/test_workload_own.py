"""A workload owns its parameters (a typed record on the cell) and its columns (runs.csv has them
only where the study has that workload); old folders and plans still read."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, fields
from pathlib import Path

import pytest

import alloclab.workloads
from alloclab.core.errors import AlloclabError
from alloclab.plan import Cell, RunSpec, load, workload
from alloclab.results import columns
from alloclab.results.store import RunRow, Store
from alloclab.workloads.kv import KVParams
from alloclab.workloads.life_runs import LifeColumns, LifeParams
from alloclab.workloads.tpcc import TPCCColumns, TPCCParams

ROOT = Path(__file__).resolve().parents[1]


def _row(workload_name: str, **own) -> RunRow:
    base = dict.fromkeys(RunRow.columns(), 0) | dict(
        run_id=f"r-{workload_name}", study="s", cell=f"c-{workload_name}", engine="rocksdb", allocator="glibc",
        allocator_base="glibc", allocator_verified=True, workload=workload_name, part=workload_name, pattern="random",
        status="ok", reason="", started_at="", profile="default", shape="default", client="", node="",
        machine_fingerprint="", purpose="measure", allocator_version="", allocator_source="")
    return RunRow.of(**base, **own)


def test_each_workload_declares_its_parameters_and_columns():
    for wl in alloclab.workloads.ALL:
        assert all(f.default is not None or f.type for f in fields(wl.Params)), wl.names
        shared = set(RunRow.columns())
        assert not {f.name for f in fields(wl.Columns)} & shared, wl.names
        assert columns.of(wl.names[0]) is wl.Columns
    assert {f.name for f in fields(TPCCParams)} == {"warehouses", "loaders", "rampup_s", "mix", "all_warehouses",
                                                    "think", "mode"}
    assert {f.name for f in fields(LifeParams)} >= {"cycles", "phases", "value_bytes_min"}
    # a cell keeps what every measurement shares, and its workload's record
    assert not {f.name for f in fields(Cell)} & {"warehouses", "cycles", "phases", "tables", "test", "mode"}


def test_a_cell_carries_its_workloads_params_and_a_plan_expands_them():
    p = load({"engines": ["tidesdb"], "workloads": [{"workload": "tpcc", "warehouses": [1, 2], "threads": 2}],
              "runs": 1})
    cells = p.cells()
    assert [type(c.params) for c in cells] == [TPCCParams, TPCCParams]
    assert [c.params.warehouses for c in cells] == [1, 2] and [c.key.split("/")[3] for c in cells] == ["w1", "w2"]
    kv = load({"engines": ["tidesdb"], "workloads": [{"workload": "read", "threads": 1}], "runs": 1}).cells()[0]
    assert type(kv.params) is KVParams and kv.params.value_bytes_min == 0  # every value value_bytes long
    assert kv.key == "tidesdb/read/read/random/k16/v100/b1/t1"  # the key of cells from before the parameter
    mixed = load({"engines": ["rocksdb"], "workloads": [{"workload": "mixed", "value_bytes": [4096],
                                                        "value_bytes_min": 128}], "runs": 1}).cells()[0]
    assert mixed.params.value_bytes_min == 128 and "/v128-4096/" in mixed.key


def test_a_run_spec_round_trips_and_a_plan_stored_before_params_still_reads():
    spec = load({"engines": ["rocksdb"], "workloads": [{"workload": "tpcc", "warehouses": 3, "threads": 2,
                                                        "rampup_s": 4.0}], "runs": 1}).round_specs(1, None, 1)[0]
    d = json.loads(json.dumps(spec.to_json()))
    assert d["cell"]["params"]["warehouses"] == 3
    assert RunSpec.from_json(d) == spec and spec.warmup_s == 4.0  # its own ramp-up is the run's warm-up
    # a plan.json from before: the workload's keys beside the shared ones (and other workloads' too)
    old = dict(d, cell={k: v for k, v in d["cell"].items() if k != "params"} | {
        "warehouses": 3, "loaders": 1, "rampup_s": 4.0, "mix": "spec", "all_warehouses": False, "think": False,
        "mode": spec.cell.params.mode, "test": "", "tables": 10, "table_size": 100000, "cycles": 0, "phases": "",
        "value_bytes_min": 0})
    assert RunSpec.from_json(old).cell == spec.cell


def test_runs_csv_has_a_workloads_columns_only_where_the_study_has_that_workload(tmp_path):
    s = Store(tmp_path / "study")
    s.create({"name": "x"}, {})
    s.append(_row("read"))
    header = (tmp_path / "study" / "runs.csv").read_text().splitlines()[0].split(",")
    # a key-value study: its values' smallest size, no NOPM, no warehouses, no life
    assert header == RunRow.columns() + ["value_bytes_min"]
    s.append(_row("tpcc", warehouses=4, nopm=123.0, tpcc_mode="rows"))
    s.append(_row("life", settled_rss_bytes=5 << 20, oom_killed=True, oom_cycle=2))
    with open(tmp_path / "study" / "runs.csv") as f:
        recs = list(csv.DictReader(f))
    assert list(recs[0])[-len(fields(LifeColumns)):] == [f.name for f in fields(LifeColumns)]
    assert {k for k in recs[0] if k not in RunRow.columns()} == {f.name for f in fields(TPCCColumns)} | {
        f.name for f in fields(LifeColumns)} | {"value_bytes_min"}
    assert recs[0]["nopm"] == "" and recs[0]["oom_killed"] == ""  # a read row leaves the others' empty
    rows = s.rows()
    assert rows[1].own.nopm == 123.0 and rows[1].value("warehouses") == 4 and rows[1].value("oom_killed") is None
    assert rows[2].own.oom_killed is True and rows[2].own.oom_cycle == 2
    assert rows[0].value("nopm") is None and rows[0].own.value_bytes_min == 0


def test_a_row_refuses_a_column_its_workload_does_not_have():
    with pytest.raises(AlloclabError, match="a read row has no column.s. nopm"):
        _row("read", nopm=1.0)


def test_a_workload_whose_column_is_a_shared_one_is_refused():
    @dataclass(frozen=True)
    class Bad:
        ops_per_s: float = 0.0

    class Clash(workload.Workload):
        names = ("clash",)
        Columns = Bad

    with pytest.raises(AlloclabError, match="ops_per_s are shared columns of every run"):
        workload.register(Clash())


def test_an_old_folder_with_every_column_reads_each_row_as_its_workloads():
    rows = Store(ROOT / "tests/fixtures/replication/machine-a").rows()
    header = (ROOT / "tests/fixtures/replication/machine-a/runs.csv").read_text().splitlines()[0].split(",")
    assert "nopm" in header and "warehouses" in header  # written when every row had every column
    assert rows and all(r.value("nopm") is None and r.value("warehouses") is None for r in rows)


def test_a_workloads_own_metric_that_is_not_a_lifes_memory_is_said_beside_its_throughput(monkeypatch):
    """Only a life's memory metrics (Metric.life) make a life's answer (leanest, price, limit);
    another workload's own verdict metric gets its line under its cell, beside throughput."""
    from alloclab.answers import decide, metrics, sentences
    from alloclab.catalog import metrics as cm

    rows_per_s = cm.Metric("rows_per_s", "Rows scanned a second", "rows/s", 1, True, "scan_rows",
                           "rows scanned a second")
    monkeypatch.setattr(cm, "_OWN", [*cm.own(), rows_per_s])
    assert rows_per_s not in metrics.life() and {m.name for m in metrics.life()} == {"creep", "given_back",
                                                                                     "overhead"}

    def v(metric: str) -> decide.Verdict:
        return decide.Verdict("allocators", "rocksdb", "scan", 1, "scan r50", metric, "glibc", "jemalloc", 8, 8, 8,
                              1.10, 1.05, 1.15, "faster" if metric == "throughput" else "higher", None, 0.95, "",
                              ("c", "glibc"), ("c", "jemalloc"), margin=0.04)

    vs = [v("throughput"), v("scan_rows")]
    out = sentences._cells(vs, vs[:1], {}, [], 4.0, set(), {})
    assert not out.lives and [label for label, _ in out.groups] == ["rocksdb scan (scan r50, 1 thread)"]
    lines = out.groups[0][1]
    assert lines[0].startswith("throughput vs glibc: jemalloc +10.0 %")
    assert lines[1].startswith("rows scanned a second vs glibc: jemalloc +10.0 %")
