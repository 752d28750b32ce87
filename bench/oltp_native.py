#!/usr/bin/env python3
"""The driver's native OLTP client against the real sysbench, measured side by side in one run
(not a test): per server (MariaDB InnoDB, PostgreSQL) and per test (oltp_point_select,
oltp_read_only, oltp_read_write), interleaved runs of both clients against the same server and
socket, the same tables, threads and seconds. Prints TPS, client CPU per transaction (the
client process's whole user + system time, from wait4) and the server's CPU per transaction
while each client ran, and their ratios native ÷ sysbench.

    .venv/bin/python bench/oltp_native.py [--servers mariadb-innodb,postgres] [--threads 2]
                                          [--seconds 20] [--repeats 3] [--tables 4] [--table-size 10000]
"""

from __future__ import annotations

import functools
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from _common import arguments, started_server  # noqa: E402

from alloclab.answers import stats  # noqa: E402
from alloclab.catalog import targets  # noqa: E402
from alloclab.catalog.names import SYSBENCH_TESTS  # noqa: E402
from alloclab.clients import driver, sysbench  # noqa: E402
from alloclab.core import events  # noqa: E402
from alloclab.host import sampler  # noqa: E402
from alloclab.servers.server import Server, children  # noqa: E402


def wait_usage(argv: list[str], log: Path) -> tuple[int, float]:
    """Run a client to its end: its exit code and its own CPU seconds (user + system)."""
    with open(log, "wb") as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(p.pid, 0)
    return os.waitstatus_to_exitcode(status), ru.ru_utime + ru.ru_stime


def native(exe: Path, srv: Server, test: str, a, work: Path) -> dict:
    ev = work / "native.jsonl"
    engine = "postgres" if srv.target.kind == "postgres" else "mariadb"
    argv = [str(exe), "run", "--workload", test, "--engine", engine, "--socket", str(srv.socket), "--database",
            sysbench.DATABASE, "--tables", str(a.tables), "--table-size", str(a.table_size), "--threads",
            str(a.threads), "--seed", "5", "--warmup-s", "0", "--duration-s", str(a.seconds), "--events", str(ev)]
    code, cpu = wait_usage(argv, work / "native.log")
    found = {e.type: e.data for e in events.parse_lines(ev.read_text().splitlines())} if ev.exists() else {}
    if code != 0 or "summary" not in found:
        raise SystemExit(f"native {test} failed: {(work / 'native.log').read_text()[-400:]}")
    s = found["summary"]
    if s.get("total_errors"):
        raise SystemExit(f"native {test}: {s['total_errors']} errors, first {s.get('first_error')}")
    return {"tps": s["ops_per_s"], "cpu_us": 1e6 * cpu / max(s["total_ops"], 1), "txns": s["total_ops"]}


def real(srv: Server, test: str, a, work: Path) -> dict:
    argv = sysbench.run_argv(srv, test, a.threads, a.seconds, a.tables, a.table_size, seed=5)
    code, cpu = wait_usage(argv, work / "sysbench.log")
    text = (work / "sysbench.log").read_text(errors="replace")
    if code != 0:
        raise SystemExit(f"sysbench {test} failed: {text[-400:]}")
    r = sysbench.parse(text)
    return {"tps": r.tps, "cpu_us": 1e6 * cpu / max(r.transactions, 1), "txns": r.transactions}


def server_cpu_s(srv: Server) -> float:
    """The server's CPU seconds so far: all its processes and threads, and the workers it waited
    for (PostgreSQL's backends)."""
    s = sampler.Timeline().take_tree(children(srv.pid), "bench")
    return s.cpu_user_s + s.cpu_sys_s if s else 0.0


def measured(client, srv: Server) -> dict:
    """One client run, with the server's CPU per transaction during it (the backends of a
    PostgreSQL client that just left are given a moment to be waited for)."""
    before = server_cpu_s(srv)
    got = client()
    time.sleep(0.2)
    got["server_us"] = 1e6 * (server_cpu_s(srv) - before) / max(got["txns"], 1)
    return got


def paired(got: dict[str, list[dict]], metric: str) -> str:
    """native ÷ sysbench of one metric, each repeat's two runs paired: the geometric mean of the
    per-repeat ratios and its 95 % interval (too few repeats: the ratio alone)."""
    r = stats.ratio_interval(dict(enumerate(x[metric] for x in got["sysbench"])),
                             dict(enumerate(x[metric] for x in got["native"])))
    if r.ratio is None:
        return "–"
    if r.ci_low is None or not r.paired:
        return f"{r.ratio:.3f}×"
    return f"{r.ratio:.3f}× ({r.ci_low:.3f}–{r.ci_high:.3f})"


def main() -> int:
    a = arguments(__doc__, servers="mariadb-innodb,postgres", tests=",".join(SYSBENCH_TESTS), threads=2, seconds=20,
                  repeats=3, tables=4, table_size=10000).parse_args()
    exe = driver.locate()
    lines = []
    for name in a.servers.split(","):
        with started_server(targets.parse(name), "sysbench") as (srv, work):
            srv.sql(f"CREATE DATABASE {sysbench.DATABASE}")
            t0 = time.monotonic()
            subprocess.run(sysbench.prepare_argv(srv, a.tables, a.table_size), check=True, capture_output=True)
            print(f"{name}: prepared {a.tables} x {a.table_size} rows in {time.monotonic() - t0:.1f}s", flush=True)
            for test in a.tests.split(","):
                got: dict[str, list[dict]] = {"native": [], "sysbench": []}
                for r in range(a.repeats):
                    order = ["native", "sysbench"] if r % 2 == 0 else ["sysbench", "native"]  # interleaved
                    for client in order:
                        run = (functools.partial(native, exe, srv, test, a, work) if client == "native"
                               else functools.partial(real, srv, test, a, work))
                        got[client].append(measured(run, srv))
                        print(f"  {name} {test} {client} #{r + 1}: tps {got[client][-1]['tps']:.0f}, "
                              f"client CPU {got[client][-1]['cpu_us']:.2f} µs/txn, "
                              f"server CPU {got[client][-1]['server_us']:.2f} µs/txn", flush=True)
                med = {k: {m: statistics.median(x[m] for x in v) for m in ("tps", "cpu_us", "server_us")}
                       for k, v in got.items()}
                n, s = med["native"], med["sysbench"]
                lines.append(f"| {name} | {test} | {n['tps']:.0f} | {s['tps']:.0f} | {n['tps'] / s['tps']:.3f}× | "
                             f"{paired(got, 'tps')} | {n['cpu_us']:.2f} | {s['cpu_us']:.2f} | "
                             f"{n['cpu_us'] / s['cpu_us']:.3f}× | {paired(got, 'cpu_us')} | {n['server_us']:.2f} | "
                             f"{s['server_us']:.2f} | {paired(got, 'server_us')} |")
    print(f"\nmedians of {a.repeats} interleaved runs, {a.threads} threads, {a.seconds} s each, "
          f"{a.tables} x {a.table_size} rows")
    print("ratio: of the medians; paired: geometric mean of the per-repeat ratios (native ÷ the sysbench run beside it)"
          " with its 95 % t interval")
    print("| server | test | native TPS | sysbench TPS | ratio | paired | native µs CPU/txn | sysbench µs CPU/txn "
          "| ratio | paired | server µs CPU/txn, native | server, sysbench | paired |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
