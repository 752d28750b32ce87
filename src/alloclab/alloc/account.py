"""The allocator's own account of memory at the end of the measured window, and fragmentation
(RSS ÷ live bytes at the same moment).

Embedded engines: the driver reads it inside its own process (driver/src/alloc_account.rs)
and sends it with its summary. Servers: the same code, preloaded as liballoclab_account.so,
waits in each server process (and, through fork, each PostgreSQL backend) on a lock that
alloclab holds until the client's measured window ends; then each process writes its account
and alloclab sums them. The server is never stopped or signalled for it."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from pathlib import Path

ENV = "ALLOCLAB_ACCOUNT_DIR"
WAIT_S = 3.0  # for every process to write its account once the gate opens


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


class ServerAccount:
    """The gate and the accounts of one server run, in a folder the server can reach."""

    def __init__(self, folder: Path, helper: Path | None):
        self.folder = folder
        self.helper = helper
        self._gate = None
        self.missing = None if helper else ("the helper liballoclab_account.so is not built: run ./setup.sh "
                                            "(it builds it beside the driver)")

    def env(self, env: dict[str, str]) -> dict[str, str]:
        """The server's environment with the helper preloaded after the allocator."""
        if self.helper is None:
            return env
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o777)  # PostgreSQL writes as its own user; alloclab's own folder
        gate = self.folder / "gate"
        gate.touch(mode=0o644)
        self._gate = open(gate)
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        helper = str(self.helper)
        preload = " ".join(x for x in (env.get("LD_PRELOAD", ""), helper) if x)
        return {**env, "LD_PRELOAD": preload, ENV: str(self.folder)}

    def read(self, pids: list[int]) -> dict | None:
        """Open the gate and gather the accounts of `pids` (the server's processes at the end of
        the window), summed; None where none came."""
        if self._gate is None:
            return None
        fcntl.flock(self._gate, fcntl.LOCK_UN)
        self._gate.close()
        self._gate = None
        want = set(pids)
        deadline = time.monotonic() + WAIT_S
        found: dict[int, dict] = {}
        while time.monotonic() < deadline:
            for p in self.folder.glob("account-*.json"):
                try:
                    d = json.loads(p.read_text())
                except (OSError, json.JSONDecodeError):
                    continue  # written by rename, so whole once there; a stray file is skipped
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
        if self._gate is not None:
            self._gate.close()
            self._gate = None
        shutil.rmtree(self.folder, ignore_errors=True)


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
