"""bench/turns_bias.py's store and analysis on synthetic stored rounds: no real runs."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from helpers import bench

ROOT = Path(__file__).resolve().parents[1]


tb = bench("turns_bias")


def run(allocator, tp, share=0.99, busy=0.0, threads=2, dur=6.0):
    return {"allocator": allocator, "cell_key": "tidesdb/read_random/read/random/k16/v100/b1/t2", "status": "ok",
            "reason": "", "metric": "ops_per_s", "throughput": tp, "duration_s": dur, "threads": threads,
            "cpu_user_s": share * threads * dur, "cpu_sys_s": 0.0, "client_cpu_s": None, "other_busy_cores": busy,
            "wall_s": 20.0, "started_at": "", "machine_fingerprint": "f"}


def record(machine, ratios, seed=1, cell="default", share=0.99, busy=0.0, drawn=True):
    """A stored round: `ratios` design -> allocator -> throughput ratio vs glibc."""
    results = {}
    for d, per in ratios.items():
        slice_s = 0.0 if d == "alone" else tb.SLICES.get(d, 0.5)
        alone = d == "alone"
        runs = [run("glibc", 1e6, share if alone else 0.99, busy if alone else 0.0)]
        runs += [run(x, 1e6 * r, share if alone else 0.99, busy if alone else 0.0) for x, r in per.items()]
        results[d] = [{"allocators": ["glibc", *per], "slice_s": slice_s, "rc": 0, "error": None, "runs": runs,
                       "seconds": 60.0}]
    return {"format": tb.FORMAT, "round": f"{machine}-{seed}-{random.random():.12f}", "seed": seed, "cell": cell,
            "cell_args": tb.CELLS[cell], "designs": list(ratios), "order": list(ratios), "results": results,
            "machine": {"key": machine, "words": f"machine {machine}, 2 cores", "cores": 2, "fingerprint": machine},
            "alloclab": {"commit": "abc", "dirty": False}, "started_at": "", "ended_at": "",
            **({"order_drawn": True} if drawn else {})}


def planted(machine, bias, rounds, rng, noise=0.01, alone_sd=0.2):
    """Rounds whose alone ratios wander widely and whose turns ratio sits `bias` (log) above them."""
    out = []
    for i in range(rounds):
        alone = {x: math.exp(rng.gauss(0, alone_sd)) for x in tb.COMPARED}
        turns = {x: alone[x] * math.exp(bias + rng.gauss(0, noise)) for x in tb.COMPARED}
        out.append(record(machine, {"alone": alone, "t0.5": turns}, seed=i))
    return out


def test_a_planted_bias_is_found_within_its_interval():
    rng = random.Random(7)
    bias = math.log(1.04)
    recs = [r for m in ("a", "b", "c") for r in planted(m, bias, 8, rng)]
    est = tb.pool(tb.paired(recs, "t0.5", "alone")[("default", "jemalloc")])
    assert est.n == 24 and est.k == 3
    assert est.lo < bias < est.hi and est.lo > 0  # found, and told apart from no bias
    assert est.half_pct <= tb.TARGET_PCT
    table = tb.report(recs)
    assert "| default | jemalloc | drawn | +4." in table and "✓" in table and "| 24 | 3 |" in table
    # one machine alone: its t interval
    one = tb.pool(tb.paired(recs[:8], "t0.5", "alone")[("default", "mimalloc")])
    assert one.k == 1 and one.tau is None and one.lo < bias < one.hi


def test_two_machines_with_different_biases_give_tau_above_zero():
    rng = random.Random(3)
    recs = planted("a", math.log(1.06), 6, rng) + planted("b", math.log(0.94), 6, rng)
    est = tb.pool(tb.paired(recs, "t0.5", "alone")[("default", "tcmalloc")])
    assert est.k == 2 and est.tau > 0.03
    assert est.lo < 0 < est.hi  # the machines disagree: the pooled interval is wide
    # the same bias on both machines, exactly: τ = 0
    same = planted("a", 0.02, 5, random.Random(1)) + planted("b", 0.02, 5, random.Random(1))
    assert tb.pool(tb.paired(same, "t0.5", "alone")[("default", "tcmalloc")]).tau == 0.0


def test_the_order_is_drawn_per_round_and_rounds_of_the_fixed_order_are_shown_not_judged():
    """Rounds stored before the order was drawn ran glibc first and tcmalloc last: they stand
    beside the drawn ones, never in the target's estimate."""
    orders = {tuple(tb.design_studies("alone", random.Random(seed))[0][0]) for seed in range(40)}
    assert all(sorted(o) == sorted(tb.FOUR) for o in orders) and len(orders) > 10
    assert tb.design_studies("t0.5", random.Random(1))[0][1] == 0.5
    rng = random.Random(5)
    old = [{k: v for k, v in r.items() if k != "order_drawn"} for r in planted("a", math.log(1.08), 10, rng)]
    new = planted("a", 0.0, 10, rng)
    table = tb.report(old + new)
    drawn = next(line for line in table.splitlines() if line.startswith("| default | tcmalloc | drawn |"))
    fixed = next(line for line in table.splitlines() if line.startswith("| default | tcmalloc | fixed (old) |"))
    def mean(line):
        return float(line.split(" | ")[3].split(" ")[0].replace("−", "-"))
    assert abs(mean(drawn)) < 1.5 and "✓" in drawn and "| 10 |" in drawn
    assert abs(mean(fixed) - 8.0) < 1.5 and "| 10 |" in fixed
    assert "20 counted (10 of them in a drawn order)" in table
    only_fixed = tb.report(old)
    assert "| default | tcmalloc | drawn | – | 0 |" in only_fixed and "| +8." in only_fixed


def test_every_design_draws_its_order_and_the_record_says_so(monkeypatch):
    """measure_round with one_study stubbed (no runs): every design's allocators come in an order
    drawn from the round's seed, p2's pairs and p13's catalog too, and the record says order_drawn."""
    seen = []

    def fake(cell, allocators, slice_s, seed, cores, warm_s=tb.TURN_WARMUP_S):
        seen.append((tuple(allocators), slice_s))
        return {"allocators": list(allocators), "slice_s": slice_s, "rc": 0, "error": None, "runs": []}, {}
    monkeypatch.setattr(tb, "one_study", fake)
    monkeypatch.setattr(tb, "machine_block", lambda described: {"key": "m"})
    firsts = set()
    for seed in range(12):
        seen.clear()
        rec = tb.measure_round("default", ["alone", "t0.5", "p2"], seed)
        assert rec["order_drawn"] is True
        firsts |= {a[0] for a, s in seen if len(a) == 4}
        pairs = [a for a, s in seen if len(a) == 2]
        assert len(pairs) == 3 and all(tb.BASELINE in a for a in pairs)
        firsts |= {("p2", a[0]) for a in pairs}
    assert set(tb.FOUR) <= firsts  # each of the four went first in some design of some round
    assert ("p2", tb.BASELINE) in firsts and any(f[0] == "p2" and f[1] != tb.BASELINE for f in firsts if len(f) == 2)


def test_dersimonian_laird_by_hand():
    mean, se, tau2 = tb.dersimonian_laird([0.0, 0.1], [0.001, 0.001])
    # Q = 5, c = 1000: tau² = (5 - 1) / 1000
    assert tau2 == pytest.approx(0.004) and mean == pytest.approx(0.05) and se == pytest.approx(math.sqrt(0.0025))


def test_the_gate_removes_a_round_with_a_starved_run_and_one_on_a_busy_host():
    rng = random.Random(5)
    recs = planted("a", math.log(1.02), 6, rng)
    wild = {x: 1.0 for x in tb.COMPARED}
    starved = record("a", {"alone": wild, "t0.5": {x: 1.5 for x in tb.COMPARED}}, seed=90, share=0.5)
    busy = record("a", {"alone": wild, "t0.5": {x: 1.5 for x in tb.COMPARED}}, seed=91, busy=0.5)
    assert tb.gate(starved) and tb.gate(starved)[0].startswith("starved")
    assert tb.gate(busy)[0].startswith("busy")
    assert tb.gate(recs[0]) == []
    table = tb.report(recs + [starved, busy])
    kept = [r for r in recs + [starved, busy] if not tb.gate(r)]
    est = tb.pool(tb.paired(kept, "t0.5", "alone")[("default", "jemalloc")])
    assert est.n == 6 and est.hi < math.log(1.1)  # the +50 % rounds did not count
    assert "| default | jemalloc |" in table and "| 6 | 1 | – | 2 |" in table
    assert "| 8 | 2 (1 starved, 1 busy) |" in table  # per machine: 8 stored, 2 removed, why
    # a round with no alone design is not gated
    assert tb.gate(record("a", {"t0.5": wild})) == []


def test_the_cpu_share_of_a_real_runs_csv():
    runs = tb.runs_from_csv(ROOT / "tests/fixtures/replication/machine-b/runs.csv", "ops_per_s", 2)
    assert runs and all(r["throughput"] > 0 for r in runs if r["status"] == "ok")
    assert all(0.9 < r["cpu_share"] < 1.1 for r in runs if r["status"] == "ok")


def test_the_slope_on_the_slice():
    recs = []
    for i in range(6):
        base = math.exp(random.Random(i).gauss(0, 0.1))
        recs.append(record("a", {d: {x: base * math.exp(0.02 * math.log10(s) + 0.001 * (i % 2))
                                     for x in tb.COMPARED} for d, s in tb.SLICES.items()}, seed=i))
    est = tb.pool(tb.slice_slopes(recs)[("default", "mimalloc")])
    assert est.mean == pytest.approx(0.02, abs=1e-6)


def test_append_refuses_without_the_flag_and_adds_whole_lines(tmp_path, monkeypatch, capsys):
    store = tmp_path / "store"
    tb.append_record(store, record("a", {"alone": {"jemalloc": 1.0}, "t0.5": {"jemalloc": 1.01}}))
    before = tb.store_file(store).read_bytes()

    def never(*a, **k):
        raise AssertionError("measured")
    monkeypatch.setattr(tb, "measure_round", never)
    assert tb.main(["--store", str(store), "--rounds", "1", "--designs", "alone,t0.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"turns_bias: {store} already holds 1 round(s); add --append to add rounds to it, "
                   "or name a new folder with --store.")
    monkeypatch.setattr(tb, "measure_round", lambda cell, designs, seed: record(
        "b", {"alone": {"jemalloc": 1.0}, "t0.5": {"jemalloc": 0.99}}, seed=seed))
    assert tb.main(["--store", str(store), "--append", "--rounds", "2", "--designs", "alone,t0.5", "--seed", "4"]) == 0
    after = tb.store_file(store).read_bytes()
    assert after.startswith(before) and after.count(b"\n") == 3  # appended, never rewritten
    assert [r["seed"] for r in tb.read_store(store)[0]] == [1, 4, 5]
    assert "Gate (fixed before the data)" in capsys.readouterr().out


def test_a_torn_last_line_is_left_out_and_closed_before_the_next(tmp_path):
    store = tmp_path / "s"
    tb.append_record(store, record("a", {"alone": {"jemalloc": 1.0}}))
    with open(tb.store_file(store), "a") as f:
        f.write('{"format": "alloclab-turns-bias/1", "rou')
    tb.append_record(store, record("a", {"alone": {"jemalloc": 1.0}}, seed=2))
    recs, bad = tb.read_store(store)
    assert [r["seed"] for r in recs] == [1, 2] and bad == 1
    assert all(json.loads(x) for x in tb.store_file(store).read_text().splitlines()[::2])


def test_report_of_an_empty_store_is_one_sentence(tmp_path, capsys):
    assert tb.main(["--store", str(tmp_path / "none"), "--report"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert tb.main(["--store", str(tmp_path), "--designs", "alone,t7", "--rounds", "1"]) == 2


def test_ops_per_cpu_second_is_read_beside_throughput_and_paired_against_throughput_alone():
    """A server cell whose variant does 10 % fewer operations per CPU-second and, alone, loses 10 %
    of its throughput: in turns its throughput is moved by the others' turns (here +5 % over
    alone) while its ops per CPU-second still read the −10 % of runs alone; the table shows both."""
    def server_run(allocator, tp, cpu_per_op):
        r = run(allocator, tp, threads=16)
        r.update(cpu_user_s=tp * 6.0 * cpu_per_op * 0.7, cpu_sys_s=0.0, client_cpu_s=tp * 6.0 * cpu_per_op * 0.3)
        return r

    recs = []
    for i in range(6):
        rec = record("a", {"alone": {"jemalloc": 1.0}, "t0.5": {"jemalloc": 1.0}}, seed=i, cell="life-mariadb")
        base = 500.0 * (1 + 0.05 * i)
        rec["results"]["alone"][0]["runs"] = [server_run("glibc", base, 4e-3),
                                              server_run("jemalloc", base * 0.9, 4e-3 / 0.9)]
        rec["results"]["t0.5"][0]["runs"] = [server_run("glibc", base, 4e-3),
                                             server_run("jemalloc", base * 0.9 * 1.05, 4e-3 / 0.9)]
        recs.append(rec)
    assert tb.per_cpu(rec["results"]["alone"][0]["runs"][0]) == pytest.approx(250.0)
    tp = tb.pool(tb.paired(recs, "t0.5", "alone")[("life-mariadb", "jemalloc")])
    cpu = tb.pool(tb.paired(recs, "t0.5", "alone", "per_cpu", "throughput")[("life-mariadb", "jemalloc")])
    assert tb.pct(tp.mean) == pytest.approx(5.0, abs=1e-6)  # throughput in turns: the others moved it
    assert tb.pct(cpu.mean) == pytest.approx(0.0, abs=1e-6)  # ops per CPU-second: what runs alone read
    table = tb.report(recs)
    assert "Ops per CPU-second" in table and "| life-mariadb | jemalloc |" in table


def test_an_allocators_several_runs_in_a_design_are_one_ratio_their_logs_mean():
    """memory-life quick measures MariaDB on two servers of each allocator a round: the round's
    ratio is the mean of their logs against glibc's, neither run dropped."""
    rec = record("m", {"t0.5": {"jemalloc": 1.0}})
    runs = rec["results"]["t0.5"][0]["runs"]
    runs += [run("glibc", 4e6), run("jemalloc", 1e6)]  # glibc's two: 1e6 and 4e6; jemalloc's: 1e6 and 1e6
    assert tb.log_ratios(rec, "t0.5")["jemalloc"] == pytest.approx(-math.log(2))
