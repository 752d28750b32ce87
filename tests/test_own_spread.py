"""A machine's own spread between studies (answers.spread): read from the replication store's real
default studies of one machine, none from another machine's, a planted shift in one study moves
it, and a study started with between_studies_from carries it into plan.json and says so."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from alloclab.alloc.allocators import Allocator
from alloclab.answers import spread
from alloclab.plan import design, load, presets

STORE = Path(__file__).parents[1] / "bench" / "data" / "replication"
ONE_MACHINE = [f"machine-g-{n}" for n in (24, 25, 26, 27)]  # four default studies of one morning


def _plan(folder: Path):
    raw = {**presets.preset("kv-allocators", "quick"), "between_studies_from": str(folder)}
    return load(raw, found_allocators={n: Allocator(n, n, None if n == "glibc" else f"/usr/lib/lib{n}.so")
                                       for n in raw["allocators"]})


@pytest.fixture
def store(tmp_path) -> Path:
    for name in ONE_MACHINE:
        shutil.copytree(STORE / name, tmp_path / name)
    return tmp_path


def _machine(store: Path) -> dict:
    return json.loads((store / ONE_MACHINE[0] / "machine.json").read_text())


def _own(store: Path, machine: dict) -> dict:
    plan = _plan(store)
    return spread.own(store, machine, plan.design, {c.key for c in plan.cells()}, plan.slice_s)


def test_the_stored_studies_of_this_machine_give_each_variant_and_metric_its_own_spread(store):
    own = _own(store, _machine(store))
    assert {"jemalloc", "mimalloc", "tcmalloc", "p99_latency.tcmalloc", "peak_rss.jemalloc"} <= set(own)
    assert all(n == 4 and 0 <= sd < 0.2 for sd, n in own.values())


def test_another_machines_studies_say_nothing_nor_do_too_few(store):
    assert _own(store, {**_machine(store), "kernel": "6.1.0-other"}) == {}
    for name in ONE_MACHINE[2:]:
        shutil.rmtree(store / name)
    assert _own(store, _machine(store)) == {}  # two studies: under spread.MIN_STUDIES


def _edit(path: Path, change) -> None:
    rows = list(csv.DictReader(path.open()))
    for r in rows:
        change(r)
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    path.write_text(out.getvalue())


def test_a_planted_shift_in_one_study_raises_that_variants_spread_alone(store):
    before = _own(store, _machine(store))
    _edit(store / ONE_MACHINE[1] / "runs.csv", lambda r: r.update(ops_per_s=str(float(r["ops_per_s"]) * 0.85))
          if r["allocator"] == "tcmalloc" and r["status"] == "ok" else None)
    after = _own(store, _machine(store))
    assert after["tcmalloc"][0] > before["tcmalloc"][0] + 0.04
    assert after["jemalloc"] == pytest.approx(before["jemalloc"])


def test_a_study_carries_its_machines_own_spread_where_larger_and_says_so(store):
    plan = _plan(store)
    own = _own(store, _machine(store))
    carried, said = spread.floor(plan, _machine(store))
    for key, (sd, _) in own.items():
        metric, variant = design.between_parts(key)
        assert dict(carried.between)[key] == pytest.approx(max(sd, plan.design.between_sd(variant, metric)))
    assert {k: (pytest.approx(sd), n) for k, sd, n in carried.between_own} == own
    assert said.startswith(f"4 stored studies of this machine in {store}: its own spread between studies is larger "
                           "than the plan's for throughput: ")
    assert spread.floor(plan, {**_machine(store), "kernel": "x"}) == (plan.design, "")


def test_a_study_more_than_a_day_after_the_others_is_not_counted_with_them(store):
    """The claim is an hour later: a study two days on starts a group of its own (here of one, which
    gives no spread), and the spread is the other three's."""
    _edit(store / ONE_MACHINE[3] / "runs.csv", lambda r: r.update(started_at=r["started_at"].replace("-05T", "-07T")))
    assert {n for _, n in _own(store, _machine(store)).values()} == {3}
