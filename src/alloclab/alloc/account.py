"""The allocator's own account of memory at the end of the measured window, and fragmentation
(RSS ÷ live bytes at the same moment).

Embedded engines: the driver reads it inside its own process (driver/src/alloc_account.rs)
and sends it with its summary. Servers: the same code, preloaded as liballoclab_account.so,
waits in each server process (and, through fork, each PostgreSQL backend) on a lock that
alloclab holds until the client's measured window ends; then each process writes its account
and alloclab sums them. The server is never stopped or signalled for it. A server's life (one
MariaDB process) reads it at every phase's end too: two more locks, held from before the server
starts, that take turns (phase K: gate-1 for K odd, gate-2 for K even); the life's client lets go
of one at a phase's end and takes it again once the account is written (PhaseGates)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from pathlib import Path

ENV = "ALLOCLAB_ACCOUNT_DIR"
PHASE_GATES_ENV = "ALLOCLAB_PHASE_GATES"  # a life's client: "FOLDER:fd1,fd2,..." (ServerAccount.client_env)
WAIT_S = 3.0  # for every process to write its account once a gate opens


def own(account: dict | None, allocator_base: str) -> dict | None:
    """The account if it is the run's allocator's own: an allocator without any interface alloclab
    reads (a custom library) leaves glibc's mallinfo2 to answer, which counts glibc's heap, not
    that allocator's, so it is replaced by a note saying the allocator offers no account."""
    if account and account.get("allocator") == "glibc" and allocator_base != "glibc":
        return {"allocator": allocator_base, "source": "none", "live_bytes": None, "resident_bytes": None,
                "note": f"{allocator_base} offers none of the interfaces alloclab reads (jemalloc mallctl, "
                        "tcmalloc MallocExtension, mimalloc mi_process_info); glibc's mallinfo2 would count "
                        "glibc's own heap"}
    return account


def row_fields(account: dict | None, rss_bytes: int | None) -> dict:
    """runs.csv's columns: live and resident bytes as the allocator counts them (empty where it
    offers no such number), and RSS ÷ live."""
    acc = account or {}
    live, resident = acc.get("live_bytes"), acc.get("resident_bytes")
    return {"alloc_live_bytes": live, "alloc_resident_bytes": resident,
            "fragmentation": round(rss_bytes / live, 4) if live and rss_bytes else None}


def _written(folder: Path, pattern: str) -> list[dict]:
    """The accounts the helper has written in `folder` under `pattern`: written by rename, so whole
    once there; a stray file is skipped."""
    out = []
    for p in folder.glob(pattern):
        try:
            out.append(json.loads(p.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    return out


def _held(path: Path):
    """`path` made and held exclusively (the helper's threads wait on it until it is let go)."""
    path.touch(mode=0o644)
    f = open(path)
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


class ServerAccount:
    """The gate and the accounts of one server run, in a folder the server can reach; a life's
    (`life`) also the two phase gates, which its client opens at each phase's end (PhaseGates)."""

    def __init__(self, folder: Path, helper: Path | None, life: bool = False):
        self.folder = folder
        self.helper = helper
        self.life = life
        self._gate = None
        self._phase_gates: list = []
        self.missing = None if helper else ("the helper liballoclab_account.so is not built: run ./setup.sh "
                                            "(it builds it beside the driver)")

    def env(self, env: dict[str, str]) -> dict[str, str]:
        """The server's environment with the helper preloaded after the allocator; its gates made
        and held (the window's, and a life's one per phase)."""
        if self.helper is None:
            return env
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o777)  # PostgreSQL writes as its own user; alloclab's own folder
        self._phase_gates = [_held(self.folder / f"gate-{k}") for k in ((1, 2) if self.life else ())]
        self._gate = _held(self.folder / "gate")
        helper = str(self.helper)
        preload = " ".join(x for x in (env.get("LD_PRELOAD", ""), helper) if x)
        return {**env, "LD_PRELOAD": preload, ENV: str(self.folder)}

    def client_env(self) -> tuple[dict[str, str], tuple[int, ...]]:
        """What a life's client needs to open the phase gates itself: the variable naming the folder
        and the gates' descriptors (passed to it: letting go through any of them opens the gate)."""
        if not self._phase_gates:
            return {}, ()
        fds = tuple(f.fileno() for f in self._phase_gates)
        return {PHASE_GATES_ENV: f"{self.folder}:{','.join(map(str, fds))}"}, fds

    def read(self, pids: list[int]) -> dict | None:
        """Open the gate and gather the accounts of `pids` (the server's processes at the end of
        the window), summed; None where none came. Phase gates a life left shut (it ended early)
        are opened first: the helper passes them in turn before it reaches the last."""
        if self._gate is None:
            return None
        # the phase gates go first: the helper, waiting on one, passes it, finds the next gone and
        # waits on the window's gate
        for k in range(1, len(self._phase_gates) + 1):
            (self.folder / f"gate-{k}").unlink(missing_ok=True)
        for f in self._phase_gates:
            fcntl.flock(f, fcntl.LOCK_UN)
            f.close()
        self._phase_gates = []
        fcntl.flock(self._gate, fcntl.LOCK_UN)
        self._gate.close()
        self._gate = None
        want = set(pids)
        deadline = time.monotonic() + WAIT_S
        found: dict[int, dict] = {}
        while time.monotonic() < deadline:
            for d in _written(self.folder, "account-*.json"):
                found[int(d.get("pid", 0))] = d
            if want and want <= set(found):
                break
            time.sleep(0.05)
        # a process that ended meanwhile (PostgreSQL's autovacuum workers come and go) is not missed
        want = {p for p in want if p in found or os.path.exists(f"/proc/{p}")}
        got = [found[p] for p in sorted(found) if not want or p in want]
        if not got:
            self.missing = (f"no server process wrote its account within {WAIT_S:g} s of the window's end "
                            "(the helper did not load: see the server log)")
            return None
        return summed(got, len(want))

    def close(self) -> None:
        for f in [*self._phase_gates, *([self._gate] if self._gate is not None else [])]:
            f.close()
        self._gate, self._phase_gates = None, []
        shutil.rmtree(self.folder, ignore_errors=True)


class PhaseGates:
    """A life's client's side of the phase gates (from PHASE_GATES_ENV): at the end of phase k it
    lets go of gate k and gathers what the server wrote then. For a server of one process (a
    server's life runs on MariaDB only): the first account written is the whole."""

    def __init__(self, value: str | None):
        self.folder, self.fds = None, []
        self.silent = False  # no account came once: the helper is not in the server
        if value:
            folder, _, fds = value.rpartition(":")
            self.folder, self.fds = Path(folder), [int(x) for x in fds.split(",") if x]

    def read(self, k: int) -> dict | None:
        """At the end of phase k (1-based): open its gate, gather the account written for it and
        take the gate again for phase k + 2. None without gates, or where none came within WAIT_S
        (then at once for every later phase: no phase is made longer waiting for a helper that did
        not load)."""
        if self.folder is None or self.silent or len(self.fds) != 2:
            return None
        fd = self.fds[(k - 1) % 2]
        got: list[dict] = []
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
            deadline = time.monotonic() + WAIT_S
            while not got and time.monotonic() < deadline:
                time.sleep(0.005)
                got = _written(self.folder, f"phase-{k}-*.json")
            # the helper lets go of the gate right after writing: take it back before it comes round
            while got:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline + WAIT_S:
                        got = []  # the helper holds on to it: stop reading, never wait on it
                    time.sleep(0.001)
        except OSError:
            got = []
        if not got:
            self.silent = True
            return None
        return summed(got, len(got))


def summed(accounts: list[dict], expected: int) -> dict:
    """One account for a server of several processes (PostgreSQL): byte counts added up, a yes/no
    (e.g. Google TCMalloc's per-CPU caches active) true only where every process says so."""
    first = accounts[0]
    out = {"allocator": first.get("allocator"), "source": first.get("source"), "processes": len(accounts),
           "processes_expected": expected}
    if first.get("note"):
        out["note"] = first["note"]
    for k in first:
        if k in ("allocator", "source", "note", "pid"):
            continue
        vals = [a.get(k) for a in accounts]
        if all(isinstance(x, bool) for x in vals):
            out[k] = all(vals)
            continue
        out[k] = sum(vals) if all(isinstance(x, int) for x in vals) else None
    return out
