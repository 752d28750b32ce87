"""The real `sysbench` binary as a client of a server target: its command lines and a parser
for what it prints (totals, latency, and the per-second series of --report-interval)."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field

from alloclab.catalog.names import SYSBENCH_TESTS
from alloclab.core.errors import AlloclabError
from alloclab.servers.server import Server

DATABASE = "sbtest"


def binary() -> str:
    exe = shutil.which("sysbench")
    if not exe:
        raise AlloclabError("sysbench is not installed", "install with: sudo apt-get install -y sysbench")
    return exe


def connection(server: Server) -> list[str]:
    if server.target.kind == "mariadb":
        a = ["--db-driver=mysql", f"--mysql-socket={server.socket}", "--mysql-user=root", f"--mysql-db={DATABASE}"]
        if server.target.engine.lower() != "innodb":
            a.append(f"--mysql-storage-engine={server.target.engine.lower()}")
        if server.target.tidesql:
            # TideSQL reports write conflicts at COMMIT as error 1180 (handler error 149,
            # deadlock): retried like sysbench's default deadlock/lock-wait errors
            a.append("--mysql-ignore-errors=1213,1020,1205,1180")
        return a
    return ["--db-driver=pgsql", f"--pgsql-host={server.socket_dir}", "--pgsql-user=root", f"--pgsql-db={DATABASE}"]


def prepare_argv(server: Server, tables: int, table_size: int, threads: int = 2) -> list[str]:
    return [binary(), "oltp_read_write", *connection(server), f"--tables={tables}", f"--table-size={table_size}",
            f"--threads={min(threads, tables)}", "prepare"]


def run_argv(server: Server, test: str, threads: int, duration_s: float | None, tables: int, table_size: int,
             seed: int, events: int | None = None) -> list[str]:
    """A measured sysbench run of `duration_s` seconds, or of `events` transactions when the
    run is planned by count (duration_s None)."""
    if test not in SYSBENCH_TESTS:
        raise AlloclabError(f"unknown sysbench test '{test}'", "use one of: " + ", ".join(SYSBENCH_TESTS))
    if duration_s is None and not events:
        raise AlloclabError("a sysbench run needs a duration or a number of transactions (ops)")
    amount = ([f"--time={max(1, round(duration_s))}", "--events=0"] if duration_s is not None
              else ["--time=0", f"--events={events}"])
    return [binary(), test, *connection(server), f"--tables={tables}", f"--table-size={table_size}",
            f"--threads={threads}", *amount, "--percentile=99", "--histogram=on",
            "--report-interval=1", "--rand-type=uniform", "--db-ps-mode=auto", f"--rand-seed={seed % 2**31}", "run"]


@dataclass
class Result:
    tps: float
    qps: float
    transactions: int
    queries: int
    errors: int
    reconnects: int
    total_time_s: float
    latency_ms: dict[str, float]
    intervals: list[dict] = field(default_factory=list)


_INTERVAL = re.compile(
    r"\[\s*(\d+)s\s*\]\s*thds:\s*(\d+)\s*tps:\s*([\d.]+)\s*qps:\s*([\d.]+).*?lat \(ms,(\d+)%\):\s*([\d.]+)"
    r"\s*err/s:\s*([\d.]+)\s*reconn/s:\s*([\d.]+)")


def _num(pattern: str, text: str, cast=float, default=None):
    m = re.search(pattern, text)
    if not m:
        if default is not None:
            return default
        raise AlloclabError(f"sysbench output lacks {pattern!r}")
    return cast(m.group(1))


_HIST_LINE = re.compile(r"^\s*([\d.]+)\s+\|[* ]*?\s(\d+)\s*$", re.M)


def histogram_percentiles(text: str, quantiles=(0.50, 0.95, 0.99, 0.999)) -> dict[str, float]:
    """Latency percentiles (ms) from the histogram sysbench prints with --histogram=on: the
    value of the first bucket whose cumulative count reaches the quantile. {} without one."""
    start = text.find("Latency histogram")
    if start < 0:
        return {}
    buckets = [(float(v), int(n)) for v, n in _HIST_LINE.findall(text[start:text.find("SQL statistics", start)
                                                                       if "SQL statistics" in text[start:] else None])]
    total = sum(n for _, n in buckets)
    if not total:
        return {}
    out, cum, i = {}, 0, 0
    for q in sorted(quantiles):
        while i < len(buckets) and cum + buckets[i][1] < q * total:
            cum += buckets[i][1]
            i += 1
        out[f"p{q * 100:g}"] = buckets[min(i, len(buckets) - 1)][0]
    return out


def parse(text: str) -> Result:
    """What `sysbench ... run` printed -> numbers. Raises if the summary is missing."""
    if "SQL statistics" not in text:
        raise AlloclabError("sysbench did not finish (no 'SQL statistics' in its output)")
    intervals = [
        {"t_s": int(m.group(1)), "threads": int(m.group(2)), "tps": float(m.group(3)), "qps": float(m.group(4)),
         f"lat_ms_p{m.group(5)}": float(m.group(6)), "err_per_s": float(m.group(7)),
         "reconn_per_s": float(m.group(8))}
        for m in _INTERVAL.finditer(text)]
    latency = {**histogram_percentiles(text),
               "min": _num(r"min:\s+([\d.]+)", text), "avg": _num(r"avg:\s+([\d.]+)", text),
               "max": _num(r"max:\s+([\d.]+)", text),
               "p99": _num(r"\d+th percentile:\s+([\d.]+)", text)}
    # sysbench's percentiles are its histogram's bucket values, which can lie above the largest
    # latency it measured (its exact max): no percentile is above the max
    latency |= {k: min(v, latency["max"]) for k, v in latency.items() if k.startswith("p")}
    return Result(
        tps=_num(r"transactions:\s+\d+\s+\(([\d.]+) per sec", text),
        qps=_num(r"queries:\s+\d+\s+\(([\d.]+) per sec", text),
        transactions=_num(r"transactions:\s+(\d+)", text, int),
        queries=_num(r"queries:\s+(\d+)\s+\(", text, int),
        errors=_num(r"ignored errors:\s+(\d+)", text, int, 0),
        reconnects=_num(r"reconnects:\s+(\d+)", text, int, 0),
        total_time_s=_num(r"total time:\s+([\d.]+)s", text),
        latency_ms=latency,
        intervals=intervals,
    )
