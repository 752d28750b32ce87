"""Data for runs against a database server: golden data prepared once per (target, dataset,
profile) and kept as a stopped datadir, of which every run starts from a copy (kinds.OnServer
starts the server with the run's allocator preloaded; the one runner, execute.py, does the rest)."""

from __future__ import annotations

import hashlib
import json
import resource
import shutil
import subprocess
import time
from pathlib import Path

from alloclab.catalog import targets
from alloclab.clients import hammerdb, sysbench
from alloclab.core import environment
from alloclab.core.errors import AlloclabError
from alloclab.host.processes import die_with_parent
from alloclab.plan import RunSpec
from alloclab.results.store import write_json
from alloclab.run.datasets import Prepared
from alloclab.servers import correctness
from alloclab.servers.server import Server


def copy_datadir(src: Path, dst: Path) -> None:
    """A run's own copy of a golden datadir."""
    shutil.rmtree(dst, ignore_errors=True)
    dst.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)  # keeps ownership (postgres)


def profile_settings(spec: RunSpec) -> dict[str, str]:
    """The server settings of a run: its named profile, else "small" for TPC-C (study 1) and
    "sysbench" for sysbench (studies 3 and 5)."""
    t = targets.parse(spec.cell.engine)
    default = "small" if spec.cell.workload == "tpcc" else "sysbench"
    return targets.load_profile(t, spec.cell.profile if spec.cell.profile != "default" else default)


class Golden:
    """Prepared datadirs, stopped, one per (target, dataset, profile)."""

    def __init__(self, scratch: Path, study_root: Path, exe: Path, notify=None):
        self.exe = exe
        self.cache = Prepared(scratch / "golden")
        self.study_root = study_root
        self.notify = notify or (lambda _t: None)

    @staticmethod
    def key(spec: RunSpec) -> str:
        c = spec.cell
        if c.workload == "tpcc":
            ident = {"target": c.engine, "warehouses": c.warehouses, "loaders": c.loaders, "seed": spec.study_seed,
                     "settings": profile_settings(spec)}
            what = f"tpcc-w{c.warehouses}"
            if c.client == "hammerdb":  # HammerDB's own schema, built by HammerDB
                ident["client"] = "hammerdb"
                what = f"hammerdb-w{c.warehouses}"
        else:
            ident = {"target": c.engine, "tables": c.tables, "table_size": c.table_size,
                     "settings": profile_settings(spec)}
            what = f"sb{c.tables}x{c.table_size}"
        digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
        return f"{c.engine.replace(':', '_')}-{what}-{digest}"

    def datadir(self, spec: RunSpec) -> Path:
        key = self.key(spec)
        return self.cache.get(key, lambda path: self._prepare(spec, key, path))

    def _prepare(self, spec: RunSpec, key: str, path: Path) -> None:
        c = spec.cell
        t = targets.parse(c.engine)
        logs = self.study_root / "loads" / key
        logs.mkdir(parents=True, exist_ok=True)
        what = (f"{c.warehouses} TPC-C warehouse(s)" if c.workload == "tpcc"
                else f"{c.tables} x {c.table_size} sysbench rows")
        self.notify(f"preparing {what} in {c.engine} ({key}), unmeasured")
        srv = Server(t, path, logs / "server.log", settings=profile_settings(spec))
        t0 = time.monotonic()
        srv.initialise()
        srv.start(environment.clean())
        notes = []
        try:
            if c.workload == "tpcc" and t.kind == "mariadb":
                # TPC-C finds customers by last name through a string index: an engine that gets
                # that wrong fails the runs of this target, with why, before anything is loaded
                wrong, notes = correctness.check(srv)
                if wrong:
                    raise AlloclabError(wrong)
            if c.workload == "tpcc" and c.client == "hammerdb":
                # one building virtual user on an optimistic engine: HammerDB's loader does not retry
                build_vus = 1 if t.tidesql else max(1, min(c.loaders, c.warehouses))
                argv = hammerdb.command("build", "--socket", str(srv.socket),
                        "--warehouses", str(c.warehouses), "--engine", t.engine, "--tmp", str(path / "hammerdb"),
                        "--build-vus", str(build_vus))
            elif c.workload == "tpcc":
                srv.sql(f"CREATE DATABASE {TPCC_DATABASE}")
                argv = [str(self.exe), "tpcc-load", *client_target(srv), "--warehouses", str(c.warehouses),
                        "--loaders", str(c.loaders), "--seed", str(spec.study_seed), "--events",
                        str(logs / "events.jsonl")]
            else:
                srv.sql(f"CREATE DATABASE {sysbench.DATABASE}")
                argv = sysbench.prepare_argv(srv, c.tables, c.table_size)
            cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t_load = time.monotonic()
            with open(logs / "prepare.log", "wb") as log:
                p = subprocess.run(argv, stdout=log, stderr=log, timeout=spec.timeout_s, preexec_fn=die_with_parent,
                                   env=environment.clean())
            load_s = time.monotonic() - t_load
            cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            load = {"client": c.client if c.workload == "tpcc" else "sysbench", "load_s": round(load_s, 2),
                    "client_cpu_s": round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 2)}
            if p.returncode != 0:
                raise AlloclabError(f"preparing {key} failed: "
                                    f"{(logs / 'prepare.log').read_text(errors='replace').strip()[-300:]}")
            shutil.rmtree(path / "hammerdb", ignore_errors=True)
        finally:
            clean = srv.stop()
        if not clean:
            raise AlloclabError(f"{c.engine} did not shut down cleanly after prepare: {srv.log_tail()}")
        write_json(logs / "prepare.json", {"key": key, "target": c.engine, "tables": c.tables,
                                           "table_size": c.table_size, "warehouses": c.warehouses,
                                           "seconds": time.monotonic() - t0, **load, "engine_notes": notes})
        self.notify(f"prepared {key} in {time.monotonic() - t0:.1f}s")


TPCC_DATABASE = "tpcc"


def client_target(srv: Server) -> list[str]:
    """How the driver, as a client, reaches a server alloclab started."""
    engine = "postgres" if srv.target.kind == "postgres" else "mariadb"
    return ["--engine", engine, "--socket", str(srv.socket), "--database", TPCC_DATABASE,
            "--table-engine", srv.target.engine]
