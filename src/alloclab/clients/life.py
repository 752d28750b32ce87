"""A server's life as alloclab's client: `python -m alloclab.clients.life --plan PLAN
--events EVENTS` runs the phases of every cycle one after another against one server that stays
up throughout, and tells the runner what it did through alloclab's events. The runner samples the
server's memory at 20 Hz the whole time; this client marks the phases on the same clock
(CLOCK_MONOTONIC, which every process shares) and reads the engine's own account.

The plan (written by workloads/life.py for one run) lists every phase of every cycle, resolved:

    steady  a load: the driver's native sysbench test (its whole command line) for duration_s
    burst   dump: mariadb-dump of the database to /dev/null; storm: `connections` short
            connections at once, each a GROUP BY with a sort over one table; groupby: one GROUP BY
            over every table; with a load beside it for duration_s where the phase names one, and
            at least duration_s long where it gives one
    idle    nothing, for duration_s

The engine's own account is read at the life's start and at the end of every phase (MariaDB:
`Memory_used`, which counts what the server reserved, its caches whole; so its caches are counted
at what they hold instead: the buffer pool's data, the key cache's and Aria's used blocks), and
right after it the allocator's own account, which the helper preloaded into the server writes when
this client opens the phase's gate (alloc/account.py; the runner passes the gates).

Events: `start`; phase `measure` begins (the life, the runner's window); per phase of the life a
`phase` event at its begin and end (named "c1 oltp", with `life`: cycle, name, kind, mono_s); an
`interval` every second (the running load's, forwarded); `measure` ends; `summary` (the steady
phases' operations and latencies, and `life`: phases and readings on CLOCK_MONOTONIC); `end`.

A server that goes away (the runner finds out why, from its cgroup's OOM counter) ends the life
where it is: the phase under way is recorded as cut and the client ends ok. Anything else that
fails (a load with errors, a burst's connection refused while the server answers) ends the life
with an error in its own words.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from alloclab.alloc import account
from alloclab.clients.pglife import PostgreSQL
from alloclab.core import events
from alloclab.core.errors import AlloclabError

MODULE = "alloclab.clients.life"  # run as python -m MODULE
INTERVAL_S = 1.0
STATUS = ("Memory_used", "Innodb_buffer_pool_bytes_data", "Key_blocks_used", "Aria_pagecache_blocks_used")
CACHES = ("innodb_buffer_pool_size", "key_buffer_size", "key_cache_block_size", "aria_pagecache_buffer_size",
          "aria_block_size")


def command(plan: Path, events_path: Path) -> list[str]:
    """The command line of a life (`python -m alloclab.clients.life ...`)."""
    return [sys.executable, "-m", MODULE, "--plan", str(plan), "--events", str(events_path)]


class Stop(threading.Event):
    """Set when the life must end where it is, with why."""

    why = ""

    def stop(self, why: str) -> None:
        self.why = self.why or why
        self.set()


class MariaDB:
    """The server, through its unix socket: its bursts, its account and whether it still answers."""

    def __init__(self, p: dict):
        self.socket, self.database, self.tables = p["socket"], p["database"], int(p["tables"])
        self.cli = [p["client"], "--no-defaults", f"--socket={p['socket']}", "--user=root"]
        self.dump_argv = [p["dump"], "--no-defaults", f"--socket={p['socket']}", "--user=root", "--single-transaction",
                          p["database"]]

    def alive(self) -> bool:
        """The server answers on its socket with a handshake (protocol version 10)."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(2.0)
                s.connect(self.socket)
                head = s.recv(5)
                return len(head) == 5 and head[4] == 10
        except OSError:
            return False

    def rows(self, sql: str) -> list[list[str]]:
        p = subprocess.run(self.cli + ["-N", "-B", "-e", sql], capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            raise AlloclabError(f"reading the server failed: {p.stderr.strip()[-300:]}")
        return [line.split("\t") for line in p.stdout.splitlines() if line]

    def account(self) -> dict:
        """Memory_used, and the engine's account with its caches at what they hold (bytes)."""
        rows = self.rows("SHOW GLOBAL STATUS WHERE Variable_name IN (" + ", ".join(f"'{s}'" for s in STATUS) + "); "
                         "SELECT " + ", ".join(f"@@{v}" for v in CACHES))
        status = {r[0]: int(r[1]) for r in rows if len(r) == 2}
        sizes = dict(zip(CACHES, map(int, next(r for r in rows if len(r) == len(CACHES)))))
        used = (status.get("Innodb_buffer_pool_bytes_data", 0)
                + status.get("Key_blocks_used", 0) * sizes["key_cache_block_size"]
                + status.get("Aria_pagecache_blocks_used", 0) * sizes["aria_block_size"])
        reserved = sizes["innodb_buffer_pool_size"] + sizes["key_buffer_size"] + sizes["aria_pagecache_buffer_size"]
        mu = status["Memory_used"]
        return {"memory_used_bytes": mu, "caches_reserved_bytes": reserved, "caches_used_bytes": used,
                "buffer_pool_data_bytes": status.get("Innodb_buffer_pool_bytes_data", 0),
                "engine_bytes": mu - reserved + used}

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    def load(self, ph: dict) -> Load | None:
        return Load(ph["load_argv"], Path(ph["load_events"])) if ph.get("load_argv") else None

    def reset_seen(self, error: str) -> dict | None:
        return None  # a MariaDB server that lost a thread to the OOM killer went away whole

    def burst(self, what: str, connections: int, ph: dict) -> list[subprocess.Popen]:
        """Start a burst's processes (each one connection), output to nowhere."""
        if what == "dump":
            argvs = [self.dump_argv]
        elif what == "storm":
            argvs = [self.cli + ["-e", f"SELECT c, COUNT(*) AS n FROM sbtest{i % self.tables + 1} GROUP BY c "
                                 "ORDER BY n DESC, c LIMIT 10", self.database] for i in range(connections)]
        else:  # groupby: one query over every table
            union = " UNION ALL ".join(f"SELECT pad FROM sbtest{i + 1}" for i in range(self.tables))
            argvs = [self.cli + ["-e", f"SELECT pad, COUNT(*) AS n FROM ({union}) u GROUP BY pad ORDER BY n DESC, "
                                 "pad LIMIT 10", self.database]]
        return [subprocess.Popen(a, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                for a in argvs]


class Load:
    """The driver running a sysbench test through one phase, its events in a file of its own."""

    def __init__(self, argv: list[str], events_path: Path):
        self.events_path = events_path
        sys.stdout.flush()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sys.stdout.fileno(),
                                     stderr=sys.stdout.fileno())

    def result(self) -> tuple[dict | None, str | None]:
        """Its summary, and what went wrong (None if nothing did)."""
        summary, end = None, None
        try:
            for ev in events.parse_lines(self.events_path.read_text(errors="replace").splitlines()):
                summary = ev.data if ev.type == "summary" else summary
                end = ev.data if ev.type == "end" else end
        except (OSError, AlloclabError) as e:
            return None, f"the load's events cannot be read: {e}"
        code = self.proc.returncode
        if code != 0 or not end or end.get("status") != "ok":
            return summary, f"the load (driver) exited with code {code}: {(end or {}).get('error') or 'no end event'}"
        if not summary:
            return None, "the load (driver) sent no summary"
        if summary.get("total_errors"):
            return summary, f"the load had {summary['total_errors']} failed calls; first: {summary.get('first_error')}"
        return summary, None


class Beat(threading.Thread):
    """An interval event every second: the running load's latest, else an empty one (a life that
    idles is not hung)."""

    def __init__(self, ev: events.Channel):
        super().__init__(daemon=True)
        self.ev, self.done = ev, threading.Event()
        self.path: Path | None = None
        self.offset, self.label = 0, ""

    def follow(self, path: Path | None, label: str) -> None:
        self.path, self.offset, self.label = path, 0, label

    def _latest(self) -> dict:
        path, ops = self.path, {}
        if path is None or not path.exists():
            return ops
        with open(path, "rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        whole = chunk[:chunk.rfind(b"\n") + 1]
        self.offset += len(whole)
        for line in whole.decode(errors="replace").splitlines():
            if '"interval"' in line:
                try:
                    ops = json.loads(line).get("ops") or ops
                except json.JSONDecodeError:
                    continue
        return ops

    def run(self) -> None:
        while not self.done.wait(INTERVAL_S):
            self.ev.emit("interval", ops=self._latest(), life_phase=self.label)


def _wait(procs: list[subprocess.Popen], stop: Stop, until: float | None = None) -> None:
    """Until every process has ended and `until` (monotonic) has passed, or the life stops (then
    what still runs is killed)."""
    while not stop.is_set():
        if all(p.poll() is not None for p in procs) and (until is None or time.monotonic() >= until):
            return
        stop.wait(0.05)
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


# a burst's connection that the server dropped while it was still connecting never ran its query:
# under 29 other lives, 1 of MariaDB's 60 storm connections once lost the server "at 'sending
# authentication information'" (ERROR 2013, EPIPE), which failed the whole life
CONNECT_LOST = ("at 'sending authentication information'", "at 'reading initial communication packet'",
                "ERROR 2002 (HY000)", "ERROR 2003 (HY000)")


def _said(p: subprocess.Popen) -> str:
    """What a burst's process wrote to stderr (read once, kept on it)."""
    if not hasattr(p, "said"):
        p.said = (p.stderr.read() if p.stderr else b"").decode(errors="replace").strip()
    return p.said


def _connect_again(procs: list[subprocess.Popen], stop: Stop) -> tuple[list[subprocess.Popen], int]:
    """The burst's connections that failed before their query (CONNECT_LOST) started again, once
    each, as a pool's client would connect again; the others as they ended. Returns the burst's
    processes and how many connected again."""
    lost = [i for i, p in enumerate(procs)
            if p.returncode not in (0, None) and any(t in _said(p) for t in CONNECT_LOST)]
    if not lost or stop.is_set():
        return procs, 0
    again = {i: subprocess.Popen(procs[i].args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE) for i in lost}
    _wait(list(again.values()), stop)
    return [again.get(i, p) for i, p in enumerate(procs)], len(lost)


def _burst_error(procs: list[subprocess.Popen], what: str) -> str | None:
    bad = [p for p in procs if p.returncode != 0]
    if not bad:
        return None
    said = _said(bad[0])
    return f"{len(bad)} of {len(procs)} {what} connection(s) failed; first: {said[-300:] or bad[0].returncode}"


def run_phase(ph: dict, db: MariaDB, ev: events.Channel, stop: Stop, beat: Beat,
              gate: Callable[[], dict | None] = lambda: None) -> tuple[dict, dict | None]:
    """One phase of the life: its record (on CLOCK_MONOTONIC) and its load's summary; `gate` reads
    the allocator's own account at its end (the phase's gate, account.PhaseGates)."""
    label = f"c{ph['cycle']} {ph['name']}"
    rec = {k: ph.get(k) for k in ("cycle", "name", "kind", "burst", "load", "threads", "connections")}
    rec["mono_start"] = time.monotonic()
    ev.emit("phase", phase=label, state="begin", life={**rec, "mono_s": rec["mono_start"]})
    load = db.load(ph)
    beat.follow(load.events_path if load else None, label)
    errors = []
    if ph.get("burst"):
        procs = db.burst(ph["burst"], int(ph.get("connections") or 1), ph)
        _wait(procs, stop)
        procs, again = _connect_again(procs, stop)
        if again:
            rec["connected_again"] = again
        rec["burst_s"] = round(time.monotonic() - rec["mono_start"], 3)
        errors.append(None if stop.is_set() else _burst_error(procs, ph["burst"]))
    summary = None
    if load:
        _wait([load.proc], stop)
        summary, why = load.result()
        errors.append(None if stop.is_set() else why)
    if ph.get("duration_s") and not load:  # idle, or a burst that lasts at least this long
        _wait([], stop, rec["mono_start"] + float(ph["duration_s"]))
    error = next((e for e in errors if e), None)
    if error is None and not stop.is_set():
        try:
            rec["engine"] = {**db.account(), "mono_s": time.monotonic()}
            if (own := gate()) is not None:  # read right after the engine's, inside the phase
                rec["engine"]["allocator"] = own
        except AlloclabError as e:
            error = str(e)
    if error and not db.alive():
        stop.stop("the server went away")
    elif error and (reset := db.reset_seen(error)):
        rec["reset"] = reset
        stop.stop(f"the server reset {reset['sessions_lost']} of the pool's {reset['pool']} sessions")
    elif error:
        raise AlloclabError(f"phase {ph['name']!r} of cycle {ph['cycle']}: {error}")
    rec["mono_end"] = time.monotonic()
    rec["cut"] = stop.is_set()
    if summary:
        rec |= {"ops": summary.get("total_ops", 0), "window_s": summary.get("duration_s", 0.0),
                "ops_per_s": summary.get("ops_per_s", 0.0)}
    ev.emit("phase", phase=label, state="end", life={**rec, "mono_s": rec["mono_end"]})
    return rec, summary


def _summed(steady: list[tuple[dict, dict]]) -> dict:
    """The steady phases' loads as one summary: operations and window summed, each phase's
    operations under its own name (their histograms merge where latencies are read)."""
    ops, window_s, total = {}, 0.0, 0
    errors = retries = 0
    cpu = {"cpu_user_s": 0.0, "cpu_sys_s": 0.0}
    for rec, s in steady:
        total += int(s.get("total_ops", 0))
        window_s += float(s.get("duration_s", 0.0))
        errors += int(s.get("total_errors", 0))
        retries += int(s.get("total_retries", 0))
        for k in cpu:
            cpu[k] += float((s.get("usage_window") or {}).get(k, 0.0))
        for name, op in (s.get("ops") or {}).items():
            ops[f"{name} c{rec['cycle']} {rec['name']}"] = op
    return {"total_ops": total, "duration_s": window_s, "ops_per_s": total / window_s if window_s else 0.0,
            "total_errors": errors, "total_retries": retries, "first_error": None, "ops": ops, "usage_window": cpu}


def live(plan: dict, ev: events.Channel, stop: Stop) -> None:
    """The whole life, phase after phase."""
    db = PostgreSQL(plan) if plan.get("engine") == "postgres" else MariaDB(plan)
    ev.emit("start", pid=os.getpid(), client="life", phases=len(plan["phases"]))
    db.start()
    beat = Beat(ev)
    beat.start()
    first = {**db.account(), "mono_s": time.monotonic()}
    ev.emit("phase", phase="measure", state="begin")
    done: list[dict] = []
    steady: list[tuple[dict, dict]] = []
    try:
        gates = account.PhaseGates(os.environ.get(account.PHASE_GATES_ENV))
        for k, ph in enumerate(plan["phases"], 1):
            if stop.is_set():
                break
            rec, summary = run_phase(ph, db, ev, stop, beat, lambda k=k: gates.read(k))
            done.append(rec)
            if summary and rec["kind"] == "steady" and not rec["cut"]:
                steady.append((rec, summary))
    finally:
        beat.done.set()
        db.close()
    ev.emit("phase", phase="measure", state="end")
    ev.emit("summary", **_summed(steady), life={"phases": done, "engine_at_start": first, "stopped": stop.why or None,
                                                 "engine": plan.get("engine", "mariadb")})
    ev.emit("end", status="ok")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=f"python -m {MODULE}", description="a server's life as alloclab's client")
    ap.add_argument("--plan", required=True, help="the life's phases, resolved (JSON)")
    ap.add_argument("--events", required=True)
    a = ap.parse_args(argv)
    ev = events.Channel(Path(a.events))
    stop = Stop()
    signal.signal(signal.SIGTERM, lambda *_: stop.stop("stopped by alloclab (SIGTERM)"))
    try:
        live(json.loads(Path(a.plan).read_text()), ev, stop)
        return 0
    except (AlloclabError, OSError, ValueError, KeyError) as e:
        ev.emit("end", status="error", error=str(e))
        print(f"alloclab life: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
