"""PostgreSQL's life as the life client runs it (clients/life.py): a pool of persistent sessions
held for the whole life, as an application's pool or pgbouncer in session mode holds them, and
the private memory of its backends sampled at 20 Hz.

    the pool    `pool` sessions (libpq, through psycopg), opened before the life and held to its
                end; their backends never exit
    steady      sysbench's OLTP statements (oltp_common.lua's, as the driver runs them) on the
                pool's first `threads` sessions, each its own transactions, for duration_s
    report      every session of the pool at once: a hash aggregate and a sort with string
                aggregation over every table, at the phase's work_mem
    maintenance the pool's first session: CREATE INDEX on every table at the phase's
                maintenance_work_mem (work_mem), then DROP INDEX and VACUUM
    storm       `connections` short connections at once (psql), each a GROUP BY with a sort: their
                backends exit, and are counted apart from the pool

What is sampled (pool.csv beside the plan, on CLOCK_MONOTONIC): each backend's private memory,
RssAnon (its RSS counts the shared buffers it touched, and is not read), summed over the pool's
backends present at that sample; the postmaster's; the other client backends' (a storm's) and
their number; the auxiliary processes'; and the threads of the postmaster and of the busiest
pool backend (alloclab's account helper among them). PostgreSQL's own account of the pool is the
sum of its sessions' memory contexts (pg_backend_memory_contexts), read at every phase's end with
the names of the threads of the postmaster and of the pool's busiest backend, the helper's left
out: jemalloc's background thread shows there as `jemalloc_bg_thd`.

A backend the kernel kills (a cgroup's OOM killer) makes the postmaster end every session and
recover: the sessions the pool lost and the server log's lines of it are the life's outcome.
"""

from __future__ import annotations

import io
import os
import random
import re
import subprocess
import threading
import time

import psycopg
from hdrh.histogram import HdrHistogram

from alloclab.core.errors import AlloclabError
from alloclab.host.backends import Sampler, thread_names

RECOVERY_WAIT_S = 60.0  # for the server to take connections again after a reset
# the server log's lines of a backend's death and the reset of every session after it
RESET_LINES = re.compile(r"terminated by signal|terminating any other active server processes|"
                         r"all server processes terminated; reinitializing|database system was interrupted|"
                         r"database system is ready to accept connections")
KILLED = re.compile(r"server process \(PID (\d+)\) was terminated by signal (\d+)")
LOST = ("server closed the connection", "terminating connection because of crash", "connection is lost",
        "the connection is closed", "consuming input failed", "connection to server")


class Task:
    """Work on a thread that looks, to the life client, like a burst's process: poll, kill, wait,
    returncode, stderr (the first error, as bytes)."""

    def __init__(self, work, cancel=None):
        self.returncode: int | None = None
        self.stderr = io.BytesIO()
        self._cancel = cancel
        self.thread = threading.Thread(target=self._run, args=(work,), daemon=True)
        self.thread.start()

    def _run(self, work) -> None:
        try:
            work()
            self.returncode = 0
        except Exception as e:  # noqa: BLE001 - any failure of the session is the task's error
            self.stderr = io.BytesIO(str(e).encode())
            self.returncode = 1

    def poll(self) -> int | None:
        return self.returncode

    def kill(self) -> None:
        if self._cancel is not None:
            try:
                self._cancel()
            except Exception:  # noqa: BLE001 - a session already gone has nothing to cancel
                pass

    def wait(self, timeout: float | None = None) -> int | None:
        self.thread.join(timeout)
        return self.returncode


def _table(rng: random.Random, tables: int) -> str:
    return f"sbtest{rng.randint(1, tables)}"


def _c(rng: random.Random) -> str:
    return "-".join(f"{rng.randint(0, 10**11 - 1):011d}" for _ in range(10))


def oltp_transaction(cur, rng: random.Random, tables: int, size: int, write: bool) -> None:
    """One sysbench OLTP event (oltp_common.lua): 10 point selects, 4 range selects, and where
    `write`, an index update, a non-index update and a delete + insert of one row."""
    cur.execute("BEGIN")
    for _ in range(10):
        cur.execute(f"SELECT c FROM {_table(rng, tables)} WHERE id=%s", (rng.randint(1, size),))
        cur.fetchall()
    for sql in ("SELECT c FROM {t} WHERE id BETWEEN %s AND %s", "SELECT SUM(k) FROM {t} WHERE id BETWEEN %s AND %s",
                "SELECT c FROM {t} WHERE id BETWEEN %s AND %s ORDER BY c",
                "SELECT DISTINCT c FROM {t} WHERE id BETWEEN %s AND %s ORDER BY c"):
        lo = rng.randint(1, size)
        cur.execute(sql.format(t=_table(rng, tables)), (lo, lo + 99))
        cur.fetchall()
    if write:
        cur.execute(f"UPDATE {_table(rng, tables)} SET k=k+1 WHERE id=%s", (rng.randint(1, size),))
        cur.execute(f"UPDATE {_table(rng, tables)} SET c=%s WHERE id=%s", (_c(rng), rng.randint(1, size)))
        t, i = _table(rng, tables), rng.randint(1, size)
        cur.execute(f"DELETE FROM {t} WHERE id=%s", (i,))
        cur.execute(f"INSERT INTO {t} (id, k, c, pad) VALUES (%s, %s, %s, %s)",
                    (i, rng.randint(1, size), _c(rng), _c(rng)[:59]))
    cur.execute("COMMIT")


class PoolLoad:
    """A steady phase's load on the pool's first `threads` sessions: sysbench's OLTP events for
    duration_s, each session its own; a conflict (deadlock, a row another session inserted) is
    rolled back and retried, as sysbench's pgsql driver does. `result()` is the driver's summary
    shape (operations, window, latencies as HDR histograms)."""

    events_path = None

    def __init__(self, sessions: list, ph: dict, tables: int, size: int, seed: int):
        self.errors_retried = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure,
                               psycopg.errors.UniqueViolation)
        self.name, self.write = ph["load"], ph["load"] == "oltp_read_write"
        self.duration = float(ph["duration_s"])
        self.tables, self.size = tables, size
        self.hists = [HdrHistogram(1, 60_000_000_000, 3) for _ in sessions]
        self.counts = [[0, 0, 0] for _ in sessions]  # ops, retries, errors
        self.first_error: str | None = None
        self.t0 = time.monotonic()
        self.proc = _All([Task(lambda i=i, s=s: self._work(i, s, seed + 7919 * i), s.cancel)
                          for i, s in enumerate(sessions)])

    def _work(self, i: int, conn, seed: int) -> None:
        rng, end = random.Random(seed), self.t0 + self.duration
        with conn.cursor() as cur:
            while time.monotonic() < end:
                t = time.monotonic_ns()
                try:
                    oltp_transaction(cur, rng, self.tables, self.size, self.write)
                except self.errors_retried:
                    cur.execute("ROLLBACK")  # the pool's sessions are in autocommit: BEGIN opened it
                    self.counts[i][1] += 1
                    continue
                except Exception as e:
                    self.counts[i][2] += 1
                    self.first_error = self.first_error or f"{self.name}: {e}"
                    raise
                self.hists[i].record_value(max(1, time.monotonic_ns() - t))
                self.counts[i][0] += 1

    def result(self) -> tuple[dict | None, str | None]:
        window = max(1e-9, min(time.monotonic(), self.t0 + self.duration) - self.t0)
        merged = HdrHistogram(1, 60_000_000_000, 3)
        for h in self.hists:
            merged.add(h)
        ops, retries, errors = (sum(c[k] for c in self.counts) for k in range(3))
        summary = {"total_ops": ops, "total_calls": ops + errors, "duration_s": window, "ops_per_s": ops / window,
                   "total_errors": errors, "total_retries": retries, "first_error": self.first_error,
                   "ops": {self.name: {"ops": ops, "calls": ops + errors, "errors": errors, "retries": retries,
                                       "hist": merged.encode().decode()}}}
        if errors or any(t.returncode for t in self.proc.tasks):
            why = self.first_error or next(t.stderr.getvalue().decode() for t in self.proc.tasks if t.returncode)
            return summary, f"the load on the pool failed: {why}"
        return summary, None


class _All:
    """Tasks as one process: ended when all have, code 1 if any failed."""

    def __init__(self, tasks: list[Task]):
        self.tasks = tasks

    @property
    def returncode(self) -> int | None:
        codes = [t.returncode for t in self.tasks]
        return None if None in codes else max(codes, default=0)

    def poll(self) -> int | None:
        return self.returncode

    def kill(self) -> None:
        for t in self.tasks:
            t.kill()

    def wait(self, timeout: float | None = None) -> int | None:
        for t in self.tasks:
            t.wait(timeout)
        return self.returncode


def _kb(n: int) -> str:
    return f"{max(64, int(n) // 1024)}kB"


class PostgreSQL:
    """The server through its socket, and the pool of sessions the life holds: bursts, account,
    whether it answers, and what a reset took."""

    def __init__(self, p: dict):
        self.socket_dir, self.database, self.tables = p["socket_dir"], p["database"], int(p["tables"])
        self.size, self.seed, self.log = int(p["table_size"]), int(p.get("seed", 1)), p.get("log")
        self.psql = [p["client"], "-h", p["socket_dir"], "-U", "root", "-X", "-q", "-d", p["database"]]
        self.n, self.samples_path = int(p["pool"]), p["pool_samples"]
        self.sessions: list = []
        self.pids: set[int] = set()
        self.postmaster = 0
        self.sampler: Sampler | None = None
        self.log_start = 0

    def connect(self):
        return psycopg.connect(host=self.socket_dir, user="root", dbname=self.database, autocommit=True,
                               application_name="alloclab-pool")

    def start(self) -> None:
        """Open the pool and start sampling its backends."""
        try:
            self.log_start = os.path.getsize(self.log) if self.log else 0
        except OSError:
            self.log_start = 0
        try:
            self.sessions = [self.connect() for _ in range(self.n)]
            for s in self.sessions:
                self.pids.add(s.execute("SELECT pg_backend_pid()").fetchone()[0])
                s.execute("SET max_parallel_workers_per_gather = 0")  # a session's memory stays in its backend
        except Exception as e:  # noqa: BLE001 - psycopg's errors, said in the life's words
            raise AlloclabError(f"the pool's sessions cannot be opened: {e}") from e
        with open(f"/proc/{next(iter(self.pids))}/stat") as f:
            self.postmaster = int(f.read().rsplit(")", 1)[1].split()[1])
        self.sampler = Sampler(self.samples_path, self.postmaster, self.pids)
        self.sampler.start()

    def close(self) -> None:
        if self.sampler:
            self.sampler.done.set()
            self.sampler.join(5)
        for s in self.sessions:
            try:
                s.close()
            except Exception:  # noqa: BLE001 - a session the server ended is closed already
                pass

    def alive(self) -> bool:
        try:
            os.kill(self.postmaster, 0)
            return True
        except OSError:
            return False

    def account(self) -> dict:
        """The pool's memory contexts summed over its sessions (PostgreSQL's own account of the
        pool), and the threads of the postmaster and the busiest pool backend, as sampled last."""
        try:
            ctx = [s.execute("SELECT sum(total_bytes)::bigint, sum(used_bytes)::bigint FROM "
                             "pg_backend_memory_contexts").fetchone() for s in self.sessions]
        except Exception as e:  # noqa: BLE001 - psycopg's errors, said in the life's words
            raise AlloclabError(f"reading the pool's memory contexts failed: {e}") from e
        backends = [thread_names(p) for p in sorted(self.pids)]
        return {"engine_bytes": sum(int(t) for t, _ in ctx), "contexts_used_bytes": sum(int(u) for _, u in ctx),
                "pool_sessions": len(ctx), "postmaster_threads": thread_names(self.postmaster),
                "backend_threads": max(backends, key=len, default=[])}

    def load(self, ph: dict) -> PoolLoad | None:
        if "load" not in ph:
            return None
        n = int(ph.get("threads") or self.n)
        return PoolLoad(self.sessions[:n], ph, self.tables, self.size, self.seed + 1000 * int(ph["cycle"]))

    def _union(self, col: str) -> str:
        return " UNION ALL ".join(f"SELECT {col} FROM sbtest{i + 1}" for i in range(self.tables))

    def burst(self, what: str, connections: int, ph: dict) -> list:
        mem = _kb(ph.get("work_mem") or 64 * 2**20)
        if what == "storm":
            sql = [f"SELECT c, count(*) AS n FROM sbtest{i % self.tables + 1} GROUP BY c ORDER BY n DESC, c LIMIT 10"
                   for i in range(connections)]
            return [subprocess.Popen(self.psql + ["-c", s], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE) for s in sql]
        if what == "maintenance":
            s = self.sessions[0]

            def maintain():
                s.execute(f"SET maintenance_work_mem = '{mem}'")
                s.execute("SET max_parallel_maintenance_workers = 0")
                for i in range(1, self.tables + 1):
                    s.execute(f"CREATE INDEX life_c_{i} ON sbtest{i} (c, pad)")
                    s.execute(f"DROP INDEX life_c_{i}")
                    s.execute(f"VACUUM sbtest{i}")
                s.execute("RESET maintenance_work_mem")
            return [Task(maintain, s.cancel)]
        # report: every session at once, a hash aggregate, then a sort feeding a string aggregation
        queries = (f"SELECT c, count(*) FROM ({self._union('c')}) u GROUP BY c ORDER BY 2 DESC, 1 LIMIT 10",
                   f"SELECT length(string_agg(pad, ',' ORDER BY pad)) FROM ({self._union('pad')}) u")

        def report(s):
            s.execute(f"SET work_mem = '{mem}'")
            for q in queries:
                s.execute(q).fetchall()
            s.execute("RESET work_mem")
        return [Task(lambda s=s: report(s), s.cancel) for s in self.sessions]

    def reset_seen(self, error: str) -> dict | None:
        """Where the pool lost its sessions while the postmaster lives (a backend was killed and the
        server reset every session): how many the pool lost, the PID and signal of the killed one,
        and the server log's lines of it; else None."""
        if not _lost_text(error) and not any(s.broken or s.closed for s in self.sessions):
            return None
        lost = sum(1 for s in self.sessions if s.broken or s.closed or not _answers(s))
        t0, recovered = time.monotonic(), None
        while recovered is None and time.monotonic() - t0 < RECOVERY_WAIT_S and self.alive():
            try:
                self.connect().close()
                recovered = round(time.monotonic() - t0, 3)
            except Exception:  # noqa: BLE001 - still recovering: the server refuses connections
                time.sleep(0.1)
        lines = []
        try:
            with open(self.log, errors="replace") as f:
                f.seek(self.log_start)
                lines = [x.rstrip() for x in f if RESET_LINES.search(x)]
        except (OSError, TypeError):
            pass
        killed = next(filter(None, map(KILLED.search, lines)), None)
        pid = int(killed.group(1)) if killed else None
        return {"sessions_lost": lost, "pool": len(self.sessions), "recovered_after_s": recovered,
                "killed_pid": pid, "killed_pool_backend": pid in self.pids if pid else None,
                "signal": int(killed.group(2)) if killed else None,
                "log": lines[-12:]}


def _lost_text(error: str) -> bool:
    return any(x in error for x in LOST)


def _answers(s) -> bool:
    try:
        s.execute("SELECT 1").fetchone()
        return True
    except Exception:  # noqa: BLE001 - any error: the session is gone
        return False
