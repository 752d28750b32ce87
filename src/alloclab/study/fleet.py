"""Runs on the nodes of a Ray cluster (`alloclab run --ray ADDRESS`, plan key executor = "ray").

Each node that may measure offers one `alloclab_slot`; the study places one worker (a Ray
actor that holds that slot) on each, so two measurements never share a machine. A worker
checks its machine as the local preflight does, keeps its own scratch folder and the golden
data it prepares there, and executes one run at a time from the run's description (a RunSpec,
JSON): started, proved and sampled exactly as on the study's own machine (run.node.Node). It
returns the run's row and files; the head writes them into the one study folder, so a run
whose node is lost leaves nothing behind and is simply run again elsewhere.

The head dispatches a round in its seeded order, a cell's runs (its allocators, back to back)
as one block to one node, so that comparisons pair runs measured on the same machine; every
row carries its `node` and `machine_fingerprint`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from datetime import datetime, timezone
from pathlib import Path

from alloclab.core.errors import AlloclabError
from alloclab.host.machine import LABEL_ENV
from alloclab.host.processes import kill_group, stop_groups
from alloclab.plan import Plan, RunSpec
from alloclab.results.store import RunRow, Store, atomic_write, write_json
from alloclab.run.execute import failed_row
from alloclab.run.node import Node, make_scratch
from alloclab.run.preflight import preflight
from alloclab.study.progress import Progress

SLOT = "alloclab_slot"
# a worker node's machine label: ray start --resources='{"alloclab_slot": 1, "alloclab_label_rack-a": 1}'
LABEL_RESOURCE = "alloclab_label_"
NAMESPACE = "alloclab"
WORKER_START_S = 1800.0  # a worker's preflight may build the studies' stack (minutes)
NO_NODE_WAIT_S = 300.0  # every worker lost: how long to wait for a node to come back
LOST = "lost.json"


def _ray():
    try:
        import ray
    except ImportError:
        raise AlloclabError("the Ray executor needs the ray package, which is not installed here",
                            "install it: .venv/bin/pip install 'ray==2.60.0' (./setup.sh test installs it)") from None
    return ray


class NodeWorker:
    """One node's executor of runs (a Ray actor holding the node's alloclab_slot)."""

    def __init__(self, plan_json: dict, study: str):
        import ray

        self.node_id = ray.get_runtime_context().get_node_id()
        self.error = None
        # a node's machine label comes as a resource (Ray's workers do not see `ray start`'s env)
        for n in ray.nodes():
            for k in (n.get("Resources") or {}) if n.get("NodeID") == self.node_id else ():
                if k.startswith(LABEL_RESOURCE):
                    os.environ[LABEL_ENV] = k[len(LABEL_RESOURCE):]
        self.root = make_scratch(kind=_NODE_KIND)
        try:
            exe = preflight(Plan.from_json(plan_json), None)
            self.node = Node(exe, self.root / "scratch", self.root / "study", study, name=self.node_id[:12])
            (self.root / "scratch").mkdir()
        except AlloclabError as e:
            self.error = f"{e.message}{f' ({e.hint})' if e.hint else ''}"

    def describe(self) -> dict:
        out = {"node": self.node_id[:12], "node_id": self.node_id, "hostname": socket.gethostname(), "pid": os.getpid(),
               "error": self.error}
        if not self.error:
            out |= {"machine_fingerprint": self.node.fingerprint, "machine": self.node.described}
        return out

    def run(self, spec_json: dict) -> tuple[RunRow, dict[str, bytes]]:
        spec = RunSpec.from_json(spec_json)
        run_dir = self.root / "runs" / spec.run_id
        shutil.rmtree(run_dir, ignore_errors=True)
        row = self.node.run(spec, run_dir)
        files = _files(run_dir)
        shutil.rmtree(run_dir, ignore_errors=True)
        return row, files

    def loads(self) -> dict[str, bytes]:
        """The logs of the data this node prepared (loads/<key>/...)."""
        return _files(self.root / "study" / "loads")

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


_NODE_KIND = "node-"  # a Ray worker's scratch folder: alloclab-node-HOST-PID-...


def _files(folder: Path) -> dict[str, bytes]:
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Ray:
    """The executor of a study on a Ray cluster."""

    scratch = None  # every node has its own

    def __init__(self, plan: Plan, store: Store, progress: Progress):
        ray = self.ray = _ray()
        self.store, self.progress, self.plan = store, progress, plan
        self.address = plan.ray_address or os.environ.get("RAY_ADDRESS") or "auto"
        _reachable(self.address)
        try:
            ray.init(address=self.address, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.WARNING)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise AlloclabError(f"cannot reach the Ray cluster at {self.address}: {e}",
                                "start it (ray start --head ...) and give its address: --ray HOST:PORT") from e
        self.workers: dict = {}  # actor -> describe() of its node
        self.pending: dict = {}  # describe() ref -> actor not yet answered
        self.lost: list[dict] = []
        self.current: Path | None = None
        try:
            nodes = self._slot_nodes()
            for _ in nodes:
                self._spawn()
            self._await_workers()
        except BaseException:
            self.abandon()
            ray.shutdown()
            raise
        self.recording = False  # set by the first round: from then on, the study folder is ours

    # --- the cluster ------------------------------------------------------------------------
    def _slot_nodes(self) -> list[dict]:
        nodes = [n for n in self.ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(SLOT, 0) > 0]
        if not nodes:
            raise AlloclabError(f"the Ray cluster at {self.address} has no node offering the resource {SLOT}",
                                "start each machine that may measure with: ray start --address=HEAD:PORT "
                                "--resources='{\"alloclab_slot\": 1}'")
        many = [n for n in nodes if n["Resources"][SLOT] != 1]
        if many:
            n = many[0]
            raise AlloclabError(f"node {n['NodeID'][:12]} ({n.get('NodeManagerAddress')}) offers "
                                f"{n['Resources'][SLOT]:g} {SLOT}: two measurements would share that machine",
                                "start every node with --resources='{\"alloclab_slot\": 1}'")
        return nodes

    def _spawn(self) -> None:
        cls = self.ray.remote(num_cpus=0, resources={SLOT: 1}, max_restarts=0, max_task_retries=0)(NodeWorker)
        actor = cls.remote(self.plan.to_json(), self.plan.name)
        self.pending[actor.describe.remote()] = actor

    def _await_workers(self) -> None:
        deadline = time.monotonic() + WORKER_START_S
        errors = []
        while self.pending and time.monotonic() < deadline:
            for ref in self.ray.wait(list(self.pending), num_returns=1, timeout=1.0)[0]:
                self._answered(ref, errors)
        if not self.workers:
            raise AlloclabError("no node of the Ray cluster can run this study: "
                                + ("; ".join(errors) or f"no worker started within {WORKER_START_S:g} s"),
                                "fix the nodes (./setup.sh on each), then run again")
        names = ", ".join(f"{d['node']} ({d['hostname']}, machine {d['machine_fingerprint']})"
                          for d in self.workers.values())
        self.progress.message(f"Ray cluster at {self.address}: {len(self.workers)} node(s) measure, one run "
                              f"each at a time: {names}")

    def _answered(self, ref, errors: list[str]):
        """A worker answered its describe(): the actor, usable; or None, dropped with its reason."""
        actor = self.pending.pop(ref)
        try:
            d = self.ray.get(ref)
        except self.ray.exceptions.RayError as e:
            errors.append(f"a worker did not start: {_first_line(e)}")
            self._kill(actor)
            return None
        if d.get("error"):
            errors.append(f"node {d['node']} ({d['hostname']}): {d['error']}")
            self.progress.message(f"node {d['node']} cannot run this study: {d['error']}")
            self._kill(actor)
            return None
        self.workers[actor] = d
        return actor

    def _kill(self, actor) -> None:
        try:
            self.ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - the actor may be gone with its node; nothing is left to kill
            pass

    def describe(self) -> dict:
        nodes = list(self.workers.values())
        base = dict(nodes[0].get("machine") or {})
        return base | {"executor": "ray", "ray_address": self.address, "nodes": [dict(d) for d in nodes]}

    # --- a round -----------------------------------------------------------------------------
    def run_round(self, todo: list[RunSpec], may_start, finished) -> None:
        """Every run of `todo`, a cell's runs as one block on one node, blocks in the round's order;
        returns when all ran, or when may_start refused one and the runs under way ended."""
        blocks: deque[list[RunSpec]] = deque()
        for spec in todo:
            if blocks and blocks[-1][0].cell.key == spec.cell.key:
                blocks[-1].append(spec)
            else:
                blocks.append([spec])
        self.recording = True
        idle = list(self.workers)
        inflight: dict = {}  # run() ref -> (actor, block)
        stopped = False
        lost_all_since = None

        def start(actor, block) -> bool:
            if stopped or not may_start(block[0]):
                return False
            self.progress.start(block[0])
            inflight[actor.run.remote(block[0].to_json())] = (actor, block)
            return True

        while blocks or inflight:
            while idle and blocks and not stopped:
                if not start(idle[0], blocks[0]):
                    stopped = True
                    break
                idle.pop(0)
                blocks.popleft()
            if not inflight and (stopped or not blocks):
                break
            if not inflight and not idle:
                # every node is lost: wait a while for one to come back (a replacement worker)
                lost_all_since = lost_all_since or time.monotonic()
                if time.monotonic() - lost_all_since > NO_NODE_WAIT_S:
                    raise AlloclabError(f"every node of the Ray cluster at {self.address} was lost and none came "
                                        f"back within {NO_NODE_WAIT_S:g} s; finished runs are kept",
                                        f"start the nodes again, then: alloclab run --resume {self.store.root} "
                                        f"--ray {self.address}")
            else:
                lost_all_since = None
            waiting = list(inflight) + list(self.pending)
            ready = self.ray.wait(waiting, num_returns=1, timeout=1.0)[0] if waiting else time.sleep(1.0) or []
            for ref in ready:
                if ref in self.pending:
                    back = self._answered(ref, [])
                    if back is not None:  # a replacement worker on a free slot
                        idle.append(back)
                    continue
                actor, block = inflight.pop(ref)
                spec = block[0]
                try:
                    row, files = self.ray.get(ref)
                except self.ray.exceptions.RayTaskError as e:  # a bug on the node: the run fails, visibly
                    row, files = failed_row(spec, self.plan.name, f"node {self.workers[actor]['node']}: "
                                                                  f"{_first_line(e)}"), {}
                except self.ray.exceptions.RayError as e:  # the worker, its node or the result is gone
                    self._lose(actor, spec, e)
                    blocks.appendleft(block)  # the whole rest of the block, on another node
                    continue
                self._record(spec, row, files, finished)
                rest = block[1:]
                if rest and start(actor, rest):  # the cell's next allocator on the same node
                    continue
                if rest:
                    stopped = True
                idle.append(actor)

    def _record(self, spec: RunSpec, row: RunRow, files: dict[str, bytes], finished) -> None:
        self.current = self.store.run_dir(spec.run_id)
        for rel, data in files.items():
            atomic_write(self.current / rel, data)
        finished(spec, row)
        self.current = None

    def _lose(self, actor, spec: RunSpec, e: Exception) -> None:
        """A node was lost mid-run: that run is failed there and queued again; nothing of it is
        kept (its files never arrived). A replacement worker waits for a free slot."""
        d = self.workers.pop(actor, {})
        self._kill(actor)
        self.lost.append({"run_id": spec.run_id, "node": d.get("node"), "hostname": d.get("hostname"),
                          "at": _now(), "error": _first_line(e)})
        write_json(self.store.root / LOST, {"version": 1, "lost": self.lost})
        self.progress.message(f"node {d.get('node')} was lost during {spec.run_id} ({_first_line(e)}): "
                              "that run is queued again on another node")
        self._spawn()

    def abandon(self) -> None:
        """Ctrl-C: every worker is killed with its runs (their process trees die with them);
        a run whose files were being written is removed."""
        for actor in list(self.workers) + list(self.pending.values()):
            self._kill(actor)
        self.workers.clear()
        self.pending.clear()
        self.store.discard_unrecorded(self.current)
        self.current = None

    def close(self) -> None:
        """The logs of the data each node prepared land in loads/<node>/ (and in the manifest);
        the workers remove their folders and give their slots back."""
        fetched = False
        for actor, d in list(self.workers.items() if self.recording else ()):
            try:
                for rel, data in self.ray.get(actor.loads.remote(), timeout=60).items():
                    atomic_write(self.store.root / "loads" / d["node"] / rel, data)
                    fetched = True
                self.ray.get(actor.close.remote(), timeout=60)
            except Exception as e:  # noqa: BLE001 - a node lost at the end: its load logs are lost, said
                self.progress.message(f"node {d.get('node')}: its load logs could not be fetched ({_first_line(e)})")
        if fetched:
            self.store.write_manifest()
        self.abandon()
        self.ray.shutdown()


def _reachable(address: str, timeout_s: float = 5.0) -> None:
    """A head that does not answer is said at once (ray.init would retry for minutes)."""
    if ":" not in address or address.startswith(("ray://", "auto")):
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except (OSError, ValueError) as e:
        raise AlloclabError(f"cannot reach the Ray cluster at {address}: {getattr(e, 'strerror', None) or e}",
                            "start it (ray start --head --port=PORT ...), then give its address: --ray HOST:PORT") \
            from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


class LocalCluster:
    """A Ray cluster on this machine: a head that measures nothing and `workers` nodes with one
    alloclab_slot each, every node in its own process group (so that one can be killed alone, as
    a lost machine), stopped by its group: TERM, then KILL after 5 s. For trying the Ray executor
    on one machine, for the tests and for bench/ray_dispatch.py; a real cluster starts the same
    commands on its machines."""

    def __init__(self, workers: int = 2, port: int | None = None, log_dir: Path | None = None,
                 labels: list[str] | None = None):
        if port is None:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        self.address = f"127.0.0.1:{port}"
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="alloclab-ray-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.groups: dict[str, int] = {}  # "head" or a worker's node id (12 hex) -> process group
        self.ray_bin = str(Path(sys.executable).parent / "ray")
        try:
            self._start(["--head", f"--port={port}", "--include-dashboard=false"], "head")
            for i in range(workers):  # a label per worker makes it another machine (host.machine.LABEL_ENV)
                res = {SLOT: 1, **({LABEL_RESOURCE + labels[i]: 1} if labels else {})}
                self._start([f"--address={self.address}", f"--resources={json.dumps(res)}"], f"worker{i}")
        except BaseException:
            self.stop()
            raise

    def _alive(self) -> set[str]:
        code = (f"import ray; ray.init(address={self.address!r}, log_to_driver=False, logging_level=40); "
                "print(' '.join(n['NodeID'] for n in ray.nodes() if n['Alive']))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        return set(out.stdout.split())

    def _start(self, args: list[str], name: str, deadline_s: float = 120, env: dict | None = None) -> None:
        """One node, started and waited for (nodes start one after another: two raylets starting at
        once on one machine can collide on their sockets)."""
        before = self._alive() if self.groups else set()
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", **(env or {}))
        with open(self.log_dir / f"{name}.log", "wb") as log:
            p = subprocess.Popen([self.ray_bin, "start", "--block", "--node-ip-address=127.0.0.1", "--num-cpus=1",
                                        "--object-store-memory=80000000", "--disable-usage-stats", *args],
                                       start_new_session=True, env=env, stdout=log, stderr=log)
        self.groups[name] = p.pid
        t0 = time.monotonic()
        while time.monotonic() - t0 < deadline_s:
            if p.poll() is not None:
                raise AlloclabError(f"ray start ({name}) exited with code {p.returncode}",
                                    f"see {self.log_dir / (name + '.log')}")
            new = self._alive() - before
            if new:
                if name != "head":
                    del self.groups[name]
                    self.groups[new.pop()[:12]] = p.pid
                return
            time.sleep(0.5)
        raise AlloclabError(f"the Ray node {name} did not join within {deadline_s:g} s",
                            f"see {self.log_dir / (name + '.log')}")

    @property
    def nodes(self) -> list[str]:
        return [n for n in self.groups if n != "head"]

    def kill(self, node: str) -> None:
        """A machine lost: the node's whole process group, by SIGKILL."""
        kill_group(self.groups.pop(node))

    def stop(self) -> None:
        stop_groups(list(self.groups.values()))
        self.groups.clear()
