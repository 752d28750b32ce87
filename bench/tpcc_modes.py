#!/usr/bin/env python3
"""TPC-C on servers, the way HammerDB drives them, against the driver of an earlier commit (default
d84df70, row at a time; --base 1176525 --base-mode statements: statements mode on PostgreSQL through
the `postgres` crate, before libpq), measured side by side in one run (not a test): per server
(MariaDB InnoDB, PostgreSQL) the load (warehouses per minute, client CPU per warehouse; each load on
a fresh server) and, in interleaved runs, NOPM, client and server CPU per New-Order and Stock-Level
p50, for each mode against today's. Prints a table of the figures and their ratios to today's.

    .venv/bin/python bench/tpcc_modes.py [--warehouses 4] [--vus 2] [--seconds 60] [--repeats 2]
                                         [--load-repeats 2] [--modes statements,procedures]
                                         [--base COMMIT] [--base-mode MODE]

The baseline driver is built once from the checkout's history (git archive of the commit) into
~/.cache/alloclab/bench (a few minutes the first time).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from _common import arguments, started_server  # noqa: E402

from alloclab.answers import stats  # noqa: E402
from alloclab.catalog import targets  # noqa: E402
from alloclab.clients import driver  # noqa: E402
from alloclab.core import events  # noqa: E402
from alloclab.servers.server import Server  # noqa: E402

BASE = "d84df70"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "alloclab" / "bench"


def baseline_driver(base: str = BASE) -> Path:
    """The driver of an earlier commit, built once."""
    exe = CACHE / f"target-{base}" / "release" / "alloclab-driver"
    if exe.exists():
        return exe
    src = CACHE / f"src-{base}"
    if not (src / "driver" / "Cargo.toml").exists():
        src.mkdir(parents=True, exist_ok=True)
        # the driver's sources at that commit, copied out of the history (the checkout is untouched)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", base, "driver"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    print(f"building the driver of {base} (once, a few minutes)", flush=True)
    env = {**os.environ, "ROCKSDB_LIB_DIR": os.environ.get("ROCKSDB_LIB_DIR", "/usr/lib/x86_64-linux-gnu"),
           "CARGO_TARGET_DIR": str(CACHE / f"target-{base}")}
    subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", str(src / "driver" / "Cargo.toml")],
                   check=True, env=env)
    return exe


def child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _stat(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()


def server_cpu(srv: Server) -> float:
    """CPU seconds of the server's live processes, plus what its exited children used
    (PostgreSQL's backends end with their connection; the postmaster reaps them)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for p in srv.pids():
        try:
            f = _stat(p)
        except OSError:
            continue
        total += (int(f[11]) + int(f[12]) + (int(f[13]) + int(f[14]) if p == srv.pid else 0)) / tick
    return total


def target_args(srv: Server, db: str) -> list[str]:
    engine = "postgres" if srv.target.kind == "postgres" else "mariadb"
    return ["--engine", engine, "--socket", str(srv.socket), "--database", db, "--table-engine", srv.target.engine]


def load(exe: Path, srv: Server, db: str, warehouses: int, loaders: int) -> dict:
    srv.sql(f"CREATE DATABASE {db}")
    c0, t0 = child_cpu(), time.monotonic()
    log = Path(tempfile.mkstemp(suffix=".jsonl")[1])
    p = subprocess.run([str(exe), "tpcc-load", *target_args(srv, db), "--warehouses", str(warehouses), "--loaders",
                        str(loaders), "--seed", "7", "--events", str(log)], capture_output=True, text=True)
    log.unlink()
    if p.returncode != 0:
        raise SystemExit(f"load with {exe} failed: {p.stderr.strip()[-400:]}")
    secs = time.monotonic() - t0
    return {"wh_per_min": warehouses * 60 / secs, "client_cpu_per_wh": (child_cpu() - c0) / warehouses}


def fresh_load(exe: Path, t: targets.ServerTarget, a) -> dict:
    """A load timed on a server of its own (nothing else in its buffer pool or its logs)."""
    with started_server(t, "small", prefix="alloclab-bench-load-") as (srv, _):
        return load(exe, srv, "tpcc", a.warehouses, a.loaders)


def run(exe: Path, srv: Server, db: str, mode: str | None, a) -> dict:
    out = Path(tempfile.mkstemp(suffix=".jsonl")[1])
    argv = [str(exe), "run", "--workload", "tpcc", *target_args(srv, db), "--threads", str(a.vus), "--warehouses",
            str(a.warehouses), "--duration-s", str(a.seconds), "--seed", "11", "--events", str(out)]
    argv += ["--tpcc-mode", mode] if mode else []
    s0 = server_cpu(srv)
    p = subprocess.run(argv, capture_output=True, text=True)
    s1 = server_cpu(srv)
    evs = {e.type: e.data for e in events.parse_lines(out.read_text().splitlines())}
    out.unlink()
    if p.returncode != 0 or "summary" not in evs:
        raise SystemExit(f"{mode or 'rows'} run failed: {p.stderr.strip()[-400:]}")
    s = evs["summary"]
    no = s["ops"]["neword"]
    new_orders = max(no["calls"] - no.get("errors", 0) - no.get("rollbacks", 0), 1)
    use = s["usage_window"]
    return {"nopm": s["workload"]["nopm"], "client_ms": 1e3 * (use["cpu_user_s"] + use["cpu_sys_s"]) / new_orders,
            "server_ms": 1e3 * (s1 - s0) / new_orders, "slev_p50_ms": s["ops"]["slev"]["p50_ns"] / 1e6,
            "errors": s.get("total_errors", 0)}


def main() -> int:
    ap = arguments(__doc__, servers="mariadb-innodb,postgres", warehouses=4, loaders=2, vus=2, seconds=60.0, repeats=2,
                   load_repeats=2)
    ap.add_argument("--modes", default="statements,procedures", help="the new driver's modes beside today's")
    ap.add_argument("--base", default=BASE, help="the commit whose driver is the baseline")
    ap.add_argument("--base-mode", default="", help="the baseline driver's --tpcc-mode (none: its default)")
    a = ap.parse_args()
    old, new = baseline_driver(a.base), driver.locate()
    modes = [(f"base ({a.base}, {a.base_mode or 'default'})", old, a.base_mode or None)] + \
        [(m, new, m) for m in a.modes.split(",") if m]
    for name in a.servers.split(","):
        t = targets.parse(name)
        with started_server(t, "small") as (srv, _):
            # the loads timed, each on a fresh server, alternating which goes first
            timed: dict[str, list[dict]] = {"today": [], "bulk": []}
            for r in range(a.load_repeats):
                for label in (["today", "bulk"] if r % 2 == 0 else ["bulk", "today"]):
                    timed[label].append(fresh_load(old if label == "today" else new, t, a))
                    print(f"  {name} load {label} #{r + 1}: {timed[label][-1]}", flush=True)
            loads = {k: {f: stats.median([x[f] for x in v]) for f in v[0]} for k, v in timed.items()}
            # the databases the runs use
            load(old, srv, "tpcc_old", a.warehouses, a.loaders)
            load(new, srv, "tpcc_new", a.warehouses, a.loaders)
            got: dict[str, list[dict]] = {m[0]: [] for m in modes}
            for r in range(a.repeats):
                for label, exe, mode in modes[r % len(modes):] + modes[:r % len(modes)]:  # interleaved, rotating
                    got[label].append(run(exe, srv, "tpcc_old" if exe == old else "tpcc_new", mode, a))
                    print(f"  {name} {label} #{r + 1}: {got[label][-1]}", flush=True)
        lt, lb = loads["today"], loads["bulk"]
        print(f"\n{name}: load {a.warehouses} WH with {a.loaders} loaders: today {lt['wh_per_min']:.1f} WH/min, "
              f"{lt['client_cpu_per_wh']:.2f} s client CPU/WH; bulk {lb['wh_per_min']:.1f} WH/min "
              f"({lb['wh_per_min'] / lt['wh_per_min']:.2f}x), {lb['client_cpu_per_wh']:.2f} s/WH "
              f"({lb['client_cpu_per_wh'] / lt['client_cpu_per_wh']:.2f}x)")
        med = {k: {f: stats.median([x[f] for x in v]) for f in v[0]} for k, v in got.items()}
        base = med[modes[0][0]]
        print(f"{'mode':24s} {'NOPM':>8s} {'client ms/NO':>13s} {'server ms/NO':>13s} {'SLEV p50 ms':>12s}   "
              "ratios to today (NOPM, client, server, SLEV)")
        for label, m in med.items():
            print(f"{label:24s} {m['nopm']:8.0f} {m['client_ms']:13.3f} {m['server_ms']:13.3f} "
                  f"{m['slev_p50_ms']:12.2f}   "
                  f"{m['nopm'] / base['nopm']:.2f}x {m['client_ms'] / base['client_ms']:.2f}x "
                  f"{m['server_ms'] / base['server_ms']:.2f}x {m['slev_p50_ms'] / base['slev_p50_ms']:.2f}x")
        print(json.dumps({"server": name, "load": loads, "medians": med}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
