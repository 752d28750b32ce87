#!/usr/bin/env python3
"""HammerDB 4.12 (the seeds' TPC-C client) against alloclab's own client in procedures mode with
HammerDB's 10/10/1/1/1 mix, in one run (not a test): the same server target, warehouses,
virtual users and socket, each client's own golden data (HammerDB's buildschema, alloclab's
loader), interleaved rounds (a study: each round runs both, in a seeded order). Prints NOPM
(from the server: growth of sum(d_next_o_id) over the same window), client CPU per New-Order
and server CPU per New-Order, each as HammerDB ÷ alloclab with the 95 % interval of the paired
rounds, and the two load times.

    .venv/bin/python bench/hammerdb_vs_native.py [--target mariadb-innodb] [--warehouses 4]
                                                 [--threads 2] [--seconds 30] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from alloclab import plan, study  # noqa: E402
from alloclab.answers import stats  # noqa: E402
from alloclab.results.store import Store  # noqa: E402
from alloclab.study.progress import Progress  # noqa: E402


def per_new_order(r, cpu: float) -> float:
    """µs of CPU per New-Order committed in the window (NOPM from the server)."""
    new_orders = r.nopm * r.duration_s / 60
    return 1e6 * cpu / new_orders if new_orders else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="mariadb-innodb")
    ap.add_argument("--warehouses", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2, help="virtual users")
    ap.add_argument("--seconds", type=float, default=30.0, help="measured window (HammerDB counts 6 s steps)")
    ap.add_argument("--rampup", type=float, default=6.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", help="keep the study here (default: a temporary folder)")
    a = ap.parse_args()
    common = {"workload": "tpcc", "warehouses": a.warehouses, "threads": a.threads, "loaders": 1,
              "rampup_s": a.rampup, "duration_s": a.seconds, "mix": "hammerdb"}
    raw = {"name": "hammerdb-vs-native", "engines": [a.target], "allocators": ["glibc"], "runs": a.rounds,
           "scale": "quick", "workloads": [{**common, "part": "alloclab", "client": ["native"], "mode": ["procedures"]},
                                           {**common, "part": "hammerdb", "client": ["hammerdb"]}]}
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="alloclab-hdb-bench-")) / "study"
    res = study.run(plan.load(raw, default_seed=11), out, Progress(0, stream=sys.stderr, live=False))
    rows = [r for r in Store(out).rows() if r.status == "ok"]
    if res.failed or res.invalid:
        for r in Store(out).rows():
            if r.status != "ok":
                print(f"{r.run_id}: {r.reason}", file=sys.stderr)
        return 1
    by = {(r.part, r.repeat): r for r in rows}
    metrics = {
        "NOPM (server)": lambda r: r.own.nopm,
        "NOPM (client's own count)": lambda r: r.own.client_nopm,
        "client CPU µs per New-Order":
            lambda r: per_new_order(r, (r.client_cpu_user_s or 0) + (r.client_cpu_sys_s or 0)),
        "server CPU µs per New-Order": lambda r: per_new_order(r, r.cpu_user_s + r.cpu_sys_s),
    }
    print(f"\n{a.target}, {a.warehouses} warehouses, {a.threads} virtual users, {a.seconds:g} s windows, "
          f"{a.rounds} interleaved rounds; ratios HammerDB ÷ alloclab, paired by round, 95 % CI\n")
    print("| metric | alloclab (median) | HammerDB (median) | HammerDB ÷ alloclab | 95 % CI |")
    print("|---|---|---|---|---|")
    for name, f in metrics.items():
        nat = {k: f(r) for (p, k), r in by.items() if p == "alloclab"}
        hdb = {k: f(r) for (p, k), r in by.items() if p == "hammerdb"}
        iv = stats.ratio_interval(nat, hdb)
        ci = f"{iv.ci_low:.3f}–{iv.ci_high:.3f}" if iv.ci_low is not None else "–"
        print(f"| {name} | {statistics.median(nat.values()):,.1f} | {statistics.median(hdb.values()):,.1f} | "
              f"{iv.ratio:.3f}× | {ci} |")
    print("\n| load | seconds | warehouses/min | client CPU s |")
    print("|---|---|---|---|")
    for f in sorted((out / "loads").glob("*/prepare.json")):
        j = json.loads(f.read_text())
        who = "HammerDB buildschema" if j.get("client") == "hammerdb" else "alloclab tpcc-load"
        print(f"| {who} ({j['warehouses']} WH) | {j['load_s']:.1f} | {60 * j['warehouses'] / j['load_s']:.1f} | "
              f"{j['client_cpu_s']:.1f} |")
    print(f"\nstudy folder: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
