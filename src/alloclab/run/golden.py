"""Data for runs against a database server: golden data prepared once per (target, dataset,
profile) and kept as a stopped datadir, of which every run starts from a copy (target.OnServer
starts the server with the run's allocator preloaded; the one runner, execute.run, does the rest).
What defines the data and how it is made is the server kind's (run.kinds.ServerKind, made by each workload)."""

from __future__ import annotations

import hashlib
import json
import resource
import shutil
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

from alloclab.alloc import environment
from alloclab.catalog import targets
from alloclab.core.errors import AlloclabError
from alloclab.host.processes import die_with_parent
from alloclab.plan import RunSpec, workload
from alloclab.results.store import write_json
from alloclab.run.datasets import Prepared
from alloclab.servers.server import Server


def copy_datadir(src: Path, dst: Path) -> None:
    """A run's own copy of a golden datadir."""
    shutil.rmtree(dst, ignore_errors=True)
    dst.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)  # keeps ownership (postgres)


def profile_settings(spec: RunSpec) -> dict[str, str]:
    """The server settings of a run: its named profile, else its workload's (plan.workload)."""
    t = targets.parse(spec.cell.engine)
    default = workload.of(spec.cell.workload).server_profile
    return targets.load_profile(t, spec.cell.profile if spec.cell.profile != "default" else default)


class Golden:
    """Prepared datadirs, stopped, one per (target, dataset, profile)."""

    def __init__(self, scratch: Path, study_root: Path, exe: Path, notify=None):
        self.exe = exe
        self.cache = Prepared(scratch / "golden")
        self.study_root = study_root
        self.notify = notify or (lambda _t: None)

    @staticmethod
    def key(spec: RunSpec, kind) -> str:
        """What defines the data (the kind's identity of it, the target and its settings), hashed."""
        c = spec.cell
        ident, what = kind.golden_identity(spec)
        ident = {"target": c.engine, **ident, "settings": profile_settings(spec)}
        digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
        return f"{c.engine.replace(':', '_')}-{what}-{digest}"

    def datadir(self, spec: RunSpec, kind) -> Path:
        """The golden datadir of a run of this kind (a server kind of run.kinds), prepared once."""
        key = self.key(spec, kind)
        return self.cache.get(key, lambda path: self._prepare(spec, kind, key, path))

    def _prepare(self, spec: RunSpec, kind, key: str, path: Path) -> None:
        c = spec.cell
        t = targets.parse(c.engine)
        logs = self.study_root / "loads" / key
        logs.mkdir(parents=True, exist_ok=True)
        self.notify(f"preparing {kind.golden_words(c)} in {c.engine} ({key}), unmeasured")
        srv = Server(t, path, logs / "server.log", settings=profile_settings(spec))
        t0 = time.monotonic()
        srv.initialise()
        srv.start(environment.clean())
        notes: list[str] = []
        try:
            argv, notes = kind.prepare(srv, spec, path, logs, self.exe)
            cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t_load = time.monotonic()
            with open(logs / "prepare.log", "wb") as log:
                p = subprocess.run(argv, stdout=log, stderr=log, timeout=spec.timeout_s, preexec_fn=die_with_parent,
                                   env=environment.clean())
            load_s = time.monotonic() - t_load
            cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            load = {"client": kind.load_client(c), "load_s": round(load_s, 2),
                    "client_cpu_s": round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 2)}
            if p.returncode != 0:
                raise AlloclabError(f"preparing {key} failed: "
                                    f"{(logs / 'prepare.log').read_text(errors='replace').strip()[-300:]}")
            if kind.prepare_scratch:
                shutil.rmtree(path / kind.prepare_scratch, ignore_errors=True)
        finally:
            clean = srv.stop()
        if not clean:
            raise AlloclabError(f"{c.engine} did not shut down cleanly after prepare: {srv.log_tail()}")
        write_json(logs / "prepare.json", {"key": key, "target": c.engine, **asdict(c.params),
                                           "seconds": time.monotonic() - t0, **load, "engine_notes": notes})
        self.notify(f"prepared {key} in {time.monotonic() - t0:.1f}s")

