#!/usr/bin/env python3
"""TPC-C rates of the driver on each embedded engine, measured in one run (not a test):
load rate in warehouses per minute, and driver CPU seconds per committed New-Order.

    .venv/bin/python bench/tpcc_rates.py [--warehouses 2] [--loaders 2] [--vus 4] [--seconds 20]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _common import arguments  # noqa: E402

from alloclab.clients import driver  # noqa: E402
from alloclab.core import events  # noqa: E402


def run(cmd: list[str]) -> None:
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} failed: {p.stderr.strip()}")


def main() -> int:
    a = arguments(__doc__, engines="tidesdb,rocksdb,sqlite", warehouses=2, loaders=2, vus=4, seconds=20.0).parse_args()
    exe = str(driver.locate())
    print(f"{'engine':10s} {'load WH/min':>12s} {'NOPM':>10s} {'CPU s / new order':>18s} {'CPU ms / txn':>13s}")
    for engine in a.engines.split(","):
        work = Path(tempfile.mkdtemp(prefix=f"tpcc-bench-{engine}-"))
        try:
            db = work / "db"
            run([exe, "tpcc-load", "--engine", engine, "--db-path", str(db), "--warehouses", str(a.warehouses),
                 "--loaders", str(a.loaders), "--events", str(work / "load.jsonl")])
            load = [e.data for e in events.parse_lines((work / "load.jsonl").read_text().splitlines())
                    if e.type == "phase" and e.data.get("phase") == "load" and e.data.get("state") == "end"][0]
            run([exe, "run", "--workload", "tpcc", "--engine", engine, "--db-path", str(db), "--threads", str(a.vus),
                 "--warmup-s", "2", "--duration-s", str(a.seconds), "--events", str(work / "run.jsonl")])
            s = [e.data for e in events.parse_lines((work / "run.jsonl").read_text().splitlines())
                 if e.type == "summary"][0]
            cpu = s["usage_window"]["cpu_user_s"] + s["usage_window"]["cpu_sys_s"]
            no = s["ops"]["neword"]
            new_orders = no["calls"] - no["errors"] - no["rollbacks"]
            txns = sum(o["calls"] for o in s["ops"].values())
            print(f"{engine:10s} {load['warehouses_per_min']:12.1f} {s['workload']['nopm']:10.0f} "
                  f"{cpu / max(new_orders, 1):18.6f} {1000 * cpu / max(txns, 1):13.3f}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"warehouses": a.warehouses, "loaders": a.loaders, "vus": a.vus, "seconds": a.seconds}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
