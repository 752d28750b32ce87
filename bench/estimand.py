#!/usr/bin/env python3
"""Which ratio replicates on one machine (not a test): the default study's estimands checked on
stored rounds of real studies, by how well each one holds in another study an hour later.

A default study compares jemalloc, mimalloc and tcmalloc with glibc on one cell, its four runs
of a round in turns. The ratio can be read three ways (answers.dependence):
  average   the paired geometric mean of the rounds' ratios (what verdicts use today)
  adjusted  the least-squares line of the log ratio on the host's state (the other runs' speed
            against their medians), read at the rounds' mean state: the average with the part of
            its spread the state explains removed (CUPED's adjustment, the covariate one the
            allocator compared does not cause)
  quiet     the same line read at the quiet state (the quietest tenth of the study's rounds)
  between   the average, its standard error widened by the variant's spread between studies on one
            machine (Design.between, plan key between_studies_pct), that spread estimated from the
            OTHER machines' pseudo-studies alone (each machine left out in turn): what a study
            claims when its interval must cover the ratio a study an hour later reads
  floored   the same, the spread the larger of the other machines' and this machine's own from its
            OTHER pseudo-studies (where it has at least answers.spread.MIN_STUDIES of them): what the
            default study carries (plan key between_studies_from, answers.spread), a machine whose
            ratios move more than the others' having its own evidence of it

THE SPREAD BETWEEN STUDIES (τ). Per variant, DerSimonian–Laird's moments summed over every group
of pseudo-studies of one machine (and commit or design; the replication store's studies of one
machine within a day of each other: its claim is an hour later, not after days and new code):
τ² = (ΣQ − Σdf) / Σc. The script prints τ over all machines (what the default preset carries,
plan key between_studies_pct) and left out machine by machine (what the "between" row used).

THE DATA. The turns bench's stored rounds (bench/data/turns-bias, design t0.5 of the default
cell: the default study's design, 6 s windows in turns of 0.5 s) and the replication store's
default studies (bench/data/replication). A pseudo-study is a run of consecutive rounds of one
machine and one alloclab commit (a commit may change the driver): `--block` rounds, as many as a
ten-minute default study runs. Its rounds are a study's: the state is read against this
pseudo-study's own medians, as a study reads it.

WHAT IS COUNTED, per estimand, over every pseudo-study of a (machine, commit) with at least two:
  coverage   its 95 % interval holds the same estimand read on all the other rounds of that
             machine and commit (the "true" value an hour later, to within their own error);
             planted ratios (each of --plant times the variant's throughput) move the estimand
             and that value alike, so their coverage is this coverage (it is checked, not assumed)
  differs    pairs of pseudo-studies of one machine and commit whose ratio of ratios' 95 %
             interval excludes 1 (answers.replicate.ratio_of_ratios): alloclab compare's
             "differs"; 5 % is what a replicating estimand gives
  half-width the mean half-width of the 95 % interval, in %
  decided    the share of comparisons decided at the quick study's last look (its per-look level,
             the ±4 % margin), and the share of pseudo-studies that decide all three

THE LOOKS. A study stops a comparison at the first look that decides it; what it claims then is the
interval of that look, at the per-look level. Each design of --looks (rounds, `;` between designs)
is replayed on every pseudo-study of at least its last look's rounds, on the "between" reading:
  coverage   its interval at the look it stopped holds the average of all the other rounds of its
             machine and commit (as above)
  decided    the share of comparisons decided by the last look, and of pseudo-studies all three
  stopped    the mean round at which a comparison stopped
Early looks decide on few rounds, which cover a few minutes of the host's states: a comparison that
stops there carries the luck of those minutes (its estimate is the one that crossed the line).

What it drew (each pseudo-study's rounds, each estimand's value and interval) is appended to
--store as one JSON line per run of this script.

    .venv/bin/python bench/estimand.py [--block 20] [--store bench/data/estimand] [--plant 0.96,1.04]
        [--looks "4,6,9,14,20;12,20"]
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import itertools
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
from _common import ROOT, arguments

from alloclab.answers import dependence, stats
from alloclab.answers.replicate import DIFFERS, ratio_of_ratios
from alloclab.answers.spread import MIN_STUDIES
from alloclab.plan import design

TURNS = ROOT / "bench" / "data" / "turns-bias" / "rounds.jsonl"
REPLICATION = ROOT / "bench" / "data" / "replication"
BASE, VARIANTS = "glibc", ("jemalloc", "mimalloc", "tcmalloc")
ALLOCATORS = (BASE, *VARIANTS)
ESTIMANDS = ("average", "adjusted", "quiet", "between", "floored")
DAY_S = 24 * 3600  # the replication store's studies of one machine further apart than this: another group
MARGIN = 0.04  # the default study's


def turns_rounds() -> dict[tuple, list[dict]]:
    """(machine, commit) -> its rounds of the default cell in the default study's design, in time
    order: {allocator: throughput}."""
    out: dict[tuple, list[dict]] = defaultdict(list)
    for line in TURNS.read_text().splitlines():
        r = json.loads(line)
        res = r["results"].get("t0.5") if r.get("cell") == "default" else None
        if not res or len(res) != 1 or res[0].get("error"):
            continue
        thr = {x["allocator"]: x["throughput"] for x in res[0]["runs"] if x["status"] == "ok"}
        if set(thr) >= set(ALLOCATORS):
            m = r["machine"]
            out[(f"{m['kernel']}|{m['memory_bytes']}", r["alloclab"]["commit"][:7])].append(thr)
    return out


def study_rounds(column: str = "ops_per_s") -> dict[tuple, list[list[dict]]]:
    """(machine, its studies' design) -> the replication store's default studies of it, each its rounds
    in order (of whichever commit each ran), {allocator: the column}: a design is its turns' length;
    the studies whose runs carry drift factors (answers.drift) are read twice, as measured and with the
    drift taken out."""
    out: dict[tuple, list[list[dict]]] = defaultdict(list)
    first: dict[str, datetime.datetime] = {}  # a machine's group's first study (a group: within a day of it)
    days: dict[str, int] = {}  # a machine's groups before this one
    entries = [p for p in REPLICATION.iterdir() if (p / "runs.csv").is_file()]
    for entry in sorted(entries, key=lambda p: next(csv.DictReader((p / "runs.csv").open()))["started_at"]):
        m = json.loads((entry / "machine.json").read_text())
        rows = [r for r in csv.DictReader((entry / "runs.csv").open()) if r["status"] == "ok"
                and r.get("purpose", "measure") in ("", "measure")]
        design = f"default studies, turns of {json.loads((entry / 'plan.json').read_text()).get('slice_s')} s"
        at = min(datetime.datetime.fromisoformat(r["started_at"]) for r in rows)
        if (at - first.setdefault(m.get("kernel"), at)).total_seconds() > DAY_S:  # a new group of a day
            first[m.get("kernel")], days[m.get("kernel")] = at, days.get(m.get("kernel"), 0) + 1
        day = days.get(m.get("kernel"), 0)
        design += f", day {day + 1}" if day else ""
        drifted = any(r.get("drift_factor") for r in rows)
        for adjusted in (False, True) if drifted else (False,):
            by: dict[int, dict] = defaultdict(dict)
            for r in rows:
                f = float(r.get("drift_factor") or 1.0) if adjusted else 1.0
                by[int(r["repeat"])][r["allocator"]] = float(r[column]) * (f if column == "ops_per_s" else 1.0)
            rounds = [by[k] for k in sorted(by) if BASE in by[k] and len(by[k]) >= 3]
            words = design + (", drift taken out" if adjusted else ", as measured" if drifted else "")
            out[(f"{m.get('kernel')}|{m.get('memory_bytes')}", words)].append(rounds)
    return out


def spread(groups: dict[tuple, list[list[dict]]], variant: str, leave_out: str | None = None,
           only: str | None = None, without: tuple | None = None) -> float:
    """τ of the variant's log ratio between pseudo-studies of one group, DerSimonian–Laird's moments
    summed over the groups (but those of machine `leave_out`; or only machine `only`'s default studies,
    as a study reads its machine's stored ones; without the pseudo-study `without` = (group, index),
    in whichever reading of it is counted; and without the drift-taken-out second reading of studies
    already counted as measured)."""
    q = df = c = 0.0
    for key, blocks in groups.items():
        if key[0] == leave_out or "drift taken out" in key[1]:
            continue
        if only and (key[0] != only or not key[1].startswith("default studies")):
            continue
        if without and twin(without[0]) == key:
            blocks = [b for i, b in enumerate(blocks) if i != without[1]]
        vs = [v for v in (read(b, variant, "average") for b in blocks) if v is not None]
        if len(vs) < 2:
            continue
        m, w = np.array([v.mean_log for v in vs]), np.array([1 / v.se_log ** 2 for v in vs])
        q += float(np.sum(w * (m - np.sum(w * m) / np.sum(w)) ** 2))
        df += len(vs) - 1
        c += float(np.sum(w) - np.sum(w ** 2) / np.sum(w))
    return math.sqrt(max(0.0, (q - df) / c)) if c else 0.0


def twin(key: tuple) -> tuple:
    """The group a pseudo-study is counted in: a drift-taken-out reading's as-measured twin (the same
    studies in the same order), else itself."""
    return (key[0], key[1].replace("drift taken out", "as measured")) if "drift taken out" in key[1] else key


def widened(v, tau: float, confidence: float):
    """An average's interval with the spread between studies τ added to its standard error (as
    stats.ratio_interval adds Design.between): Satterthwaite's degrees of freedom."""
    se, df = stats.with_between(v.se_log, tau, v.df)
    half = dependence.t_quantile(confidence, df) * se
    return dataclasses.replace(v, ci_low=math.exp(v.mean_log - half), ci_high=math.exp(v.mean_log + half),
                               se_log=se, df=df, confidence=confidence)


def read(rounds: list[dict], variant: str, estimand: str, confidence: float = 0.95, plant: float = 1.0,
         tau: float = 0.0):
    """One estimand of variant vs glibc over the rounds where both ran (a study stops a decided
    allocator's runs): a dependence.RatioAtState. The state of a round is the mean of its other
    runs' log speed against their own medians, as answers.dependence reads it."""
    med = {a: float(np.median([math.log(r[a]) for r in rounds if a in r])) for a in ALLOCATORS
           if any(a in r for r in rounds)}
    x, y = [], []
    for r in rounds:
        others = [math.log(r[a]) - med[a] for a in VARIANTS if a != variant and a in r]
        if BASE in r and variant in r and others:
            x.append(float(np.mean(others)))
            y.append(math.log(r[variant] / r[BASE] * plant))
    if estimand in ("average", "between", "floored"):
        v = dependence.average_ratio(y, x, dependence.SPEED, confidence)
        return widened(v, tau, confidence) if v is not None and estimand != "average" else v
    x0 = float(np.mean(x)) if estimand == "adjusted" else dependence.quiet_state_value(x, dependence.SPEED)
    return dependence.ratio_at_state(y, x, x0, dependence.SPEED, confidence)


def decided(v) -> bool:
    return v.ci_low > 1 or v.ci_high < 1 or (v.ci_low > 1 - MARGIN and v.ci_high < 1 + MARGIN)


def main() -> None:
    ap = arguments(__doc__, block=20, store=str(ROOT / "bench" / "data" / "estimand"), plant="0.96,1.04",
                   looks="4,6,9,14,20;12,20")
    a = ap.parse_args()
    plants = [1.0] + [float(p) for p in a.plant.split(",") if p]
    looks = design.plan_looks(a.block)
    quick = 1 - design.look_alpha(len(looks), overall=design.OVERALL_ALPHA)
    groups: dict[tuple, list[list[dict]]] = defaultdict(list)
    for key, rounds in turns_rounds().items():
        for i in range(0, len(rounds) - a.block + 1, a.block):
            groups[key].append(rounds[i:i + a.block])
    studies = study_rounds()
    for key, ss in studies.items():
        groups[key] += [s for s in ss if len(s) >= 6]
    groups = {k: v for k, v in groups.items() if len(v) >= 2}
    machines = sorted({k[0] for k in groups})
    taus = {var: spread(groups, var) for var in VARIANTS}
    left_out = {(mach, var): spread(groups, var, mach) for mach in machines for var in VARIANTS}

    def floored(key: tuple, bi: int, var: str) -> float:
        """The other machines' τ, floored by this machine's own from its stored default studies but this
        pseudo-study (where they give τ at least answers.spread.MIN_STUDIES - 1 degrees of freedom): what a
        default study carries (plan key between_studies_from, answers.spread)."""
        counted = [(k, len(b) - (twin(key) == k)) for k, b in groups.items() if k[0] == key[0]
                   and k[1].startswith("default studies") and "drift taken out" not in k[1]]
        enough = sum(max(0, n - 1) for _, n in counted) >= MIN_STUDIES - 1
        own = spread(groups, var, only=key[0], without=(key, bi)) if enough else 0.0
        return max(left_out[(key[0], var)], own)

    print("spread between studies of one machine (τ, SD of the log ratio), over all machines: "
          + ", ".join(f"{var} {100 * t:.2f} %" for var, t in taus.items()) + "; each machine left out: "
          + "; ".join(f"{var} {100 * min(left_out[(m, var)] for m in machines):.2f}–"
                      f"{100 * max(left_out[(m, var)] for m in machines):.2f} %" for var in VARIANTS))
    p99 = {k: [s for s in v if len(s) >= 6] for k, v in study_rounds("p99_ns").items()}
    p99 = {k: v for k, v in p99.items() if len(v) >= 2}
    print("p99 latency's spread between the replication store's studies of one machine: " + ", ".join(
        f"{var} {100 * spread(p99, var):.2f} % (one machine's at most "
        f"{100 * max(spread(p99, var, only=m) for m in {k[0] for k in p99}):.2f} %)" for var in VARIANTS))
    drawn, by_group = [], []
    print(f"pseudo-studies of {a.block} rounds (the replication store's studies as they ran), per (machine, commit) "
          f"with two or more: {sum(len(v) for v in groups.values())} in {len(groups)} groups; quick level "
          f"{100 * quick:.1f} % ({len(looks)} looks)")
    print(f"{'estimand':<9} {'coverage':>9} {'planted':>8} {'differs':>9} {'half-width':>11} {'decided':>8} "
          f"{'all three':>10}")
    for est in ESTIMANDS:
        cov, planted, diff, width, dec, all3 = [], [], [], [], [], []
        for key, blocks in groups.items():
            per_variant = defaultdict(list)
            for bi, b in enumerate(blocks):
                rest = list(itertools.chain.from_iterable(bb for j, bb in enumerate(blocks) if j != bi))
                ok = 0
                for var in VARIANTS:
                    tau = (left_out[(key[0], var)] if est == "between" else floored(key, bi, var) if est == "floored"
                           else 0.0)
                    for k in plants:
                        v, truth = read(b, var, est, plant=k, tau=tau), read(rest, var, est, plant=k)
                        if v is None or truth is None:  # too few rounds of it (a study stopped its runs)
                            continue
                        (cov if k == 1.0 else planted).append(v.ci_low <= truth.ratio <= v.ci_high)
                        if k == 1.0:
                            width.append(100 * (v.ci_high - v.ci_low) / 2 / v.ratio)
                            per_variant[var].append(v)
                            q = read(b, var, est, confidence=quick, tau=tau)
                            if q is None:
                                continue
                            ok += decided(q)
                            dec.append(decided(q))
                            drawn.append({"machine": key[0], "commit": key[1], "block": bi, "rounds": len(b),
                                          "variant": var, "estimand": est, "ratio": v.ratio, "ci_low": v.ci_low,
                                          "ci_high": v.ci_high, "rest_ratio": truth.ratio, "quick_decided": decided(q)})
                all3.append(ok == 3)
            for vs in per_variant.values():
                for x, y in itertools.combinations(vs, 2):
                    rr = ratio_of_ratios(x, y, MARGIN)
                    diff.append(rr is not None and rr.outcome == DIFFERS)
        for key in (k for k in groups if k[1].startswith("default studies")):
            mine = [d for d in drawn if (d["machine"], d["commit"]) == key and d["estimand"] == est]
            if mine:
                by_group.append((est, key, mine))
        print(f"{est:<9} {np.mean(cov):>8.1%} {np.mean(planted) if planted else float('nan'):>8.1%} "
              f"{np.mean(diff):>8.1%} {np.mean(width):>10.2f}% {np.mean(dec):>8.0%} {np.mean(all3):>9.0%}   "
              f"(n {len(cov)}, pairs {len(diff)})")
    if by_group:
        print("\nthe default studies of one machine and design, each one's ratio against the others' pooled:")
    for est, key, mine in by_group:
        inside = sum(d["ci_low"] <= d["rest_ratio"] <= d["ci_high"] for d in mine)
        print(f"  {est:<9} {key[1]} ({key[0].split('|')[0]}): {inside} of {len(mine)} inside; quick decided "
              f"{sum(d['quick_decided'] for d in mine)} of {len(mine)}")
    print("\nthe looks, replayed on the \"floored\" reading (τ from the other machines, floored by this one's own):")
    print(f"{'looks':<16} {'level':>7} {'coverage':>9} {'decided':>8} {'all three':>10} {'stopped':>8}")
    replays = []
    for plan in (tuple(int(x) for x in d.split(",")) for d in a.looks.split(";") if d):
        level = 1 - design.look_alpha(len(plan), overall=design.OVERALL_ALPHA) if len(plan) > 1 else 0.95
        cov, dec, all3, stop = [], [], [], []
        for key, blocks in groups.items():
            for bi, b in enumerate(blocks):
                if len(b) < plan[-1]:
                    continue
                rest = list(itertools.chain.from_iterable(bb for j, bb in enumerate(blocks) if j != bi))
                ok = 0
                for var in VARIANTS:
                    truth = read(rest, var, "average")
                    if truth is None:
                        continue
                    for look in plan:
                        q = read(b[:look], var, "floored", confidence=level, tau=floored(key, bi, var))
                        if q is not None and decided(q):
                            break
                    if q is None:
                        continue
                    cov.append(q.ci_low <= truth.ratio <= q.ci_high)
                    dec.append(decided(q))
                    stop.append(look)
                    ok += decided(q)
                    replays.append({"looks": plan, "machine": key[0], "commit": key[1], "block": bi, "variant": var,
                                    "look": look, "ratio": q.ratio, "ci_low": q.ci_low, "ci_high": q.ci_high,
                                    "rest_ratio": truth.ratio, "decided": decided(q)})
                all3.append(ok == 3)
        print(f"{','.join(map(str, plan)):<16} {100 * level:>6.1f}% {np.mean(cov):>8.1%} {np.mean(dec):>8.0%} "
              f"{np.mean(all3):>9.0%} {np.mean(stop):>8.1f}   (n {len(cov)})")
    store = Path(a.store)
    store.mkdir(parents=True, exist_ok=True)
    with (store / "draws.jsonl").open("a") as f:
        f.write(json.dumps({"at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                            "block": a.block, "plants": plants, "quick_confidence": quick, "drawn": drawn,
                            "taus": taus, "replays": replays}) + "\n")


if __name__ == "__main__":
    main()
