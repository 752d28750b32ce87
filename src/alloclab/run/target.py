"""What a run starts: the processes under test, the client that drives them, how each is proved,
frozen while it waits for its turn, and stopped. `InProcess`: the driver with its embedded engine;
`OnServer`: a server alloclab started, from a copy of its golden datadir, and its client."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path

from alloclab.alloc import account, allocators, environment
from alloclab.catalog import targets, tidesql
from alloclab.clients import driver
from alloclab.core.errors import AlloclabError
from alloclab.host.placement import MemoryLimit, parse_cpus
from alloclab.host.processes import child_setup, kill_group
from alloclab.plan import RunSpec
from alloclab.run.datasets import Datasets
from alloclab.run.golden import copy_datadir, profile_settings
from alloclab.servers import root
from alloclab.servers.server import Server, check_reachable

_FREEZING = threading.Lock()


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:  # gone: its run says why
        pass


class Target:
    """What one run starts: the processes under test and the client whose end ends the run (for
    an embedded run, the same process). Made by a kind; driven by the runner."""

    client: subprocess.Popen | None = None
    log_name = "driver.log"  # the client's output, in the run's folder
    client_name = "driver"
    separate_client = False  # the client is not under test: sampled apart (client_samples.csv)

    def start(self) -> None:
        raise NotImplementedError

    def under_test(self) -> list[int]:
        """The processes under test now, the tree's root first (sampled, profiled)."""
        raise NotImplementedError

    def settled(self, watch) -> bool:
        """The processes under test have loaded their libraries (uprobes may be placed)."""
        return True

    def proving(self, watch, elapsed_s: float) -> None:
        """Called every sample: prove what can be proved now (PostgreSQL's backends appear late)."""

    def failure(self) -> str | None:
        """Why the run cannot go on (the server died), or None."""
        return None

    def account(self, watch, timeline) -> tuple[dict | None, int | None]:
        """The allocator's own account at the window's end, and the RSS at that moment."""
        return None, None

    def kill(self) -> None:
        if self.client is not None:
            kill_group(self.client.pid)

    def stop(self) -> str | None:
        """After the client ended: stop what is under test; why it did not stop cleanly, or None."""
        return None

    frozen: tuple[int, ...] = ()  # the processes under test stopped while the client waits for its turn
    freezes = 0
    releasing = False

    def freeze(self) -> None:
        """Its client waits for its turn (interleave.py): every process under test stops (SIGSTOP),
        so that none of its work (a server's purge, page cleaner, flushes and compactions; an
        embedded engine's background threads) runs in another run's turn."""
        with _FREEZING:
            if self.releasing or self.frozen:
                return
            self.frozen = tuple(self.under_test())
            self.freezes += 1
            for p in self.frozen:
                _signal(p, signal.SIGSTOP)

    def thaw(self) -> None:
        """Its turn comes, or the run ends: what freeze() stopped goes on."""
        with _FREEZING:
            for p in self.frozen:
                _signal(p, signal.SIGCONT)
            self.frozen = ()

    def release(self) -> None:
        """The run is stopping: thawed, and never frozen again."""
        with _FREEZING:
            self.releasing = True
        self.thaw()

    def proof(self, watch) -> tuple[bool, str, dict]:
        """(verified, reason if not, run.json's account of the proof)."""
        raise NotImplementedError

    def run_json(self) -> dict:
        return {}

    own_log = ""  # the log (in the run's folder) of the process under test's own output

    def own_log_text(self) -> str:
        """What the process under test wrote on its own (an allocator's complaints land there)."""
        try:
            return (self.run_dir / self.own_log).read_text(errors="replace") if self.own_log else ""
        except OSError:
            return ""


class InProcess(Target):
    """The driver runs the engine inside itself, with the run's allocator preloaded or linked."""

    own_log = "driver.log"
    gate = None  # an interleave.Member: the driver measures in turns it is given (spec.slice_s)
    join = None  # run in the started driver before it executes (joins a cgroup)

    def __init__(self, spec: RunSpec, run_dir: Path, scratch: Path, exe: Path, seed_data: Path | None,
                 events: Path):
        self.spec, self.run_dir, self.exe, self.seed_data, self.events = spec, run_dir, exe, seed_data, events
        self.db_path = scratch / spec.run_id

    def start(self) -> None:
        shutil.rmtree(self.db_path, ignore_errors=True)
        if self.seed_data is not None:
            Datasets.copy_to(self.seed_data, self.db_path)
        else:
            self.db_path.mkdir(parents=True)
        cpus = parse_cpus(self.spec.server_cpus) if self.spec.server_cpus else None
        gated = self.gate is not None
        with open(self.run_dir / self.log_name, "wb") as log:
            try:
                self.client = subprocess.Popen(
                    driver.argv(self.exe, self.spec, self.events, db_path=self.db_path, gate=gated),
                    env=self.spec.allocator.target_env(dict(os.environ)),
                    stdin=subprocess.PIPE if gated else subprocess.DEVNULL, stdout=subprocess.PIPE if gated else log,
                    stderr=log, start_new_session=True, preexec_fn=child_setup(cpus, self.join))
            except OSError as e:
                raise AlloclabError(f"cannot start the driver {self.exe}: {e.strerror}", "rebuild it: ./setup.sh") \
                    from e
        if gated:
            self.gate.attach(self.client, self)

    def under_test(self) -> list[int]:
        return [self.client.pid] if self.client is not None else []

    def settled(self, watch) -> bool:
        return watch.start is not None

    def stop(self) -> str | None:
        self.release()
        shutil.rmtree(self.db_path, ignore_errors=True)
        return None

    def account(self, watch, timeline):
        summary = watch.summary or {}
        return account.own(summary.get("alloc_account"), self.spec.allocator.base), summary.get("rss_bytes")

    def proof(self, watch):
        # the parent's own read of /proc/PID/maps; the driver's self-report only if the process
        # was gone before the parent could look
        # (a read that lacks libc caught the process while it exited, unmapping: a short run)
        # (a read that does not map the driver's binary was of another process holding the PID)
        files, source = watch.maps_at_start, "parent read /proc/PID/maps at start"
        if not allocators.whole(files, self.exe) and allocators.whole(watch.maps_at_summary, self.exe):
            files, source = watch.maps_at_summary, "parent read /proc/PID/maps at summary"
        if not allocators.whole(files, self.exe) and watch.start and watch.start.get("mapped_files"):
            files, source = watch.start["mapped_files"], "driver's own /proc/self/maps at start"
        pid = watch.pid or (self.client.pid if self.client else 0)
        p = allocators.prove(self.spec.allocator, files, pid)
        if self.spec.allocator.link:
            # mapped is not enough for a linked allocator: its calls must bind to it
            bound = driver.link_proof(self.exe, self.spec.allocator.base)
            p = allocators.Proof(p.verified and bound.verified, p.reason if not p.verified else bound.reason,
                                 p.mapped)
            source += "; LD_DEBUG=bindings of a short start of the same binary"
        return p.verified, p.reason, p.to_json() | {"source": source, "pid": pid}

    def run_json(self) -> dict:
        return {"driver_binary": str(self.exe), "seed_data": str(self.seed_data) if self.seed_data else None}


class OnServer(Target):
    """A server started with the run's allocator preloaded, from a copy of its golden datadir,
    and a client (the driver or the real sysbench) on its unix socket."""

    separate_client = True
    log_name = "client.log"
    own_log = "server.log"
    gate = None  # an interleave.Member: the client measures in turns it is given (spec.slice_s)

    def __init__(self, spec: RunSpec, run_dir: Path, scratch: Path, golden: Path, client_argv, client_name: str):
        self.spec, self.run_dir, self.scratch, self.golden = spec, run_dir, scratch, golden
        self.client_argv, self.client_name = client_argv, client_name
        self.t = targets.parse(spec.cell.engine)
        # named by the run's index, not its id: a unix socket's path holds at most 107 bytes, and a
        # run id holds its allocator's label (a tuned jemalloc's made MariaDB refuse its socket)
        self.datadir = scratch / f"server-{spec.index:04d}"
        self.srv = Server(self.t, self.datadir, run_dir / "server.log", settings=profile_settings(spec))
        self.server_cpus = parse_cpus(spec.server_cpus, "server_cpus") if spec.server_cpus else None
        self.client_cpus = parse_cpus(spec.client_cpus, "client_cpus") if spec.client_cpus else None
        self.limit = MemoryLimit(f"alloclab-{os.getpid()}-{spec.index}", spec.server_memory_bytes) \
            if spec.server_memory_bytes else None
        self.alloc = spec.allocator
        self.proofs: dict = {}
        self.server_version = None
        self.plugin: dict | None = None
        helper = driver.account_library()
        if helper and self.t.stack:
            helper = root.place(helper)
        # the allocator's own account, read by a helper inside every server process at the window's end
        self.mem = account.ServerAccount(self.datadir / "alloc-account" if self.t.stack
                                         else scratch / f"{spec.run_id}.account", helper)
        self.clean = False

    def start(self) -> None:
        copy_datadir(self.golden, self.datadir)
        if self.t.kind == "postgres":
            check_reachable(self.scratch)
        if self.t.stack:
            self.alloc = root.allocator(self.spec.allocator)  # the root's own library of that allocator
        self.srv.start(self.mem.env(self.alloc.target_env(dict(os.environ))), cpus=self.server_cpus,
                       preexec=self.limit.attach if self.limit else None)
        self.proofs["server"] = allocators.prove(self.alloc, allocators.read_maps(self.srv.pid), self.srv.pid)
        self.server_version = self.srv.sql("SELECT @@version" if self.t.kind == "mariadb"
                                           else "SHOW server_version").strip()
        if self.t.plugin:  # the engine the plugin gave the server, as the server reports it
            got = self.srv.sql("SELECT PLUGIN_NAME, PLUGIN_VERSION, PLUGIN_LIBRARY FROM information_schema.PLUGINS "
                               f"WHERE PLUGIN_LIBRARY = '{self.t.plugin}' AND PLUGIN_TYPE = 'STORAGE ENGINE'").split()
            self.plugin = dict(zip(("name", "version", "library"), got))
            if self.t.tidesql:
                self.plugin |= tidesql.build(self.t.tidesql).to_json()
                # row locks or pure optimistic transactions: each build's own default, recorded
                self.plugin["pessimistic_locking"] = self.srv.sql("SELECT @@tidesdb_pessimistic_locking").strip()
        gated = self.gate is not None  # the client measures in turns: its stdin and stdout are the gate's
        own_env, fds = self.mem.client_env()  # a life's client opens the allocator account's phase gates
        with open(self.run_dir / self.log_name, "wb") as out:
            self.client = subprocess.Popen(self.client_argv(self.srv) + (["--gate"] if gated else []),
                                           stdin=subprocess.PIPE if gated else subprocess.DEVNULL,
                                           stdout=subprocess.PIPE if gated else out, stderr=out if gated else
                                           subprocess.STDOUT, start_new_session=True,
                                           preexec_fn=child_setup(self.client_cpus),
                                           env=environment.clean() | own_env, pass_fds=fds)
        if gated:
            self.gate.attach(self.client, self)

    def under_test(self) -> list[int]:
        return self.srv.pids()

    def proving(self, watch, elapsed_s: float) -> None:
        if self.t.kind == "postgres" and "backends" not in self.proofs and elapsed_s > 1.0:
            # the processes that served the run; one that exited between the listing and the read
            # (a short connection's backend, an autovacuum worker) or was caught exiting proves
            # nothing either way
            read = [(p, allocators.read_maps(p)) for p in self.srv.pids() if p != self.srv.pid]
            alive = [(p, files) for p, files in read if allocators.whole(files)][:8]
            if alive:  # none readable: tried again at the next sample
                self.proofs["backends"] = [allocators.prove(self.alloc, files, p) for p, files in alive]

    def failure(self) -> str | None:
        if self.srv.proc is not None and self.srv.proc.poll() is not None:
            return f"the server exited (code {self.srv.proc.returncode}) during the run: {self.srv.log_tail()}"
        return None

    def account(self, watch, timeline):
        """The window is over: the allocator's account of every server process, and their RSS at
        the same moment."""
        pids = self.srv.pids()
        acc = account.own(self.mem.read(pids), self.spec.allocator.base)
        end = timeline.take_tree(pids, "end") if pids else None
        return acc, end.rss_bytes if end else None

    def stop(self) -> str | None:
        self.release()
        if self.client is not None and self.client.poll() is None:
            self.client.kill()
            self.client.wait()
        self.clean = self.srv.stop()
        why = None if self.clean else f"the server did not shut down cleanly: {self.srv.log_tail()}"
        if self.limit:
            self.limit.remove()
            self.limit = None
        self.mem.close()
        shutil.rmtree(self.datadir, ignore_errors=True)
        return why

    def proof(self, watch):
        all_proofs = [self.proofs["server"]] if "server" in self.proofs else []
        all_proofs += self.proofs.get("backends", [])
        verified = bool(all_proofs) and all(p.verified for p in all_proofs)
        if self.t.kind == "postgres" and "backends" not in self.proofs and "server" in self.proofs:
            verified = False
            all_proofs.append(allocators.Proof(False, "no backend process was seen to prove"))
        reason = next((p.reason for p in all_proofs if not p.verified), all_proofs[0].reason if all_proofs
                      else "no proof")
        return verified, reason, {
            "verified": verified, "server": self.proofs["server"].to_json() if "server" in self.proofs else None,
            "backends": [p.to_json() for p in self.proofs.get("backends", [])],
            "reason": all_proofs[0].reason if all_proofs else "no proof"}

    def run_json(self) -> dict:
        return {"target": self.t.name, "server_version": self.server_version, "engine_plugin": self.plugin,
                "allocator_used": self.alloc.to_json(),
                "server_settings": self.srv.settings, "clean_shutdown": self.clean,
                "alloc_account_missing": self.mem.missing,
                "placement": {"server_cpus": sorted(self.server_cpus) if self.server_cpus else None,
                              "client_cpus": sorted(self.client_cpus) if self.client_cpus else None,
                              "server_memory_bytes": self.spec.server_memory_bytes or None}}
