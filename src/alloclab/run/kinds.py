"""Kinds of run, one object each: what differs between them and nothing else.

    EmbeddedKV      key-value operations on an engine inside the driver (tidesdb, rocksdb, ...)
    EmbeddedTPCC    TPC-C on an engine inside the driver, from a pristine loaded copy
    ServerTPCC      TPC-C against a server alloclab started (the driver is the client)
    ServerHammerDB  TPC-C against MariaDB with HammerDB as the client (the seeds' client)
    ServerOLTP      sysbench's OLTP against a server: the real sysbench, or the driver natively

A kind owns its data preparation (`data`), what it starts for a run (`target`: the processes
under test, the client that drives them and how each is proved and stopped) and the fields
its row adds (`row_fields`); a server kind also its golden data (`golden_identity`, `prepare`).
The one runner (execute.run) starts, proves, samples, stops and
records every kind the same way.
"""

from __future__ import annotations

from pathlib import Path

from alloclab.catalog.names import HAMMERDB, NATIVE, SYSBENCH, TPCC
from alloclab.clients import driver, hammerdb, sysbench
from alloclab.core.errors import AlloclabError
from alloclab.plan import ENGINES, Cell, RunSpec
from alloclab.run.target import InProcess, OnServer, Target
from alloclab.servers import correctness


class RunKind:
    name = ""
    driver_client = True  # the client sends the driver's events (else: the real sysbench)
    tpcc = False  # a TPC-C run: its consistency check must run and pass

    def data(self, spec: RunSpec, node) -> Path | None:
        """The data a run starts from, prepared once per node (raises DatasetError)."""
        raise NotImplementedError

    def target(self, spec: RunSpec, run_dir: Path, node, data: Path | None, events: Path) -> Target:
        raise NotImplementedError

    def window(self, spec: RunSpec, watch, since_client_s: float) -> tuple[bool, bool]:
        """Whether the measured window has begun and ended: the driver's `measure` phase."""
        return watch.measure_begun, watch.measure_ended

    def row_fields(self, spec: RunSpec) -> dict:
        c = spec.cell
        return {"pattern": c.pattern, "batch": c.batch, "key_bytes": c.key_bytes, "value_bytes": c.value_bytes}


class EmbeddedKV(RunKind):
    name = "embedded key-value"

    def data(self, spec, node):
        return None

    def target(self, spec, run_dir, node, data, events):
        return InProcess(spec, run_dir, node.scratch, driver.for_allocator(spec.allocator, node.exe), data, events)


class EmbeddedTPCC(EmbeddedKV):
    name = "embedded TPC-C"
    tpcc = True

    def data(self, spec, node):
        return node.datasets.pristine(spec)


class ServerTPCC(RunKind):
    name = "server TPC-C"
    tpcc = True
    client_label = "driver client"  # the client process, as its errors name it

    prepare_scratch = ""  # a folder the client's preparation leaves in the datadir, removed

    def data(self, spec, node):
        return node.golden.datadir(spec, self)

    # --- its golden data (run.golden): what defines it, and how it is prepared ---------------
    def golden_identity(self, spec: RunSpec) -> tuple[dict, str]:
        c = spec.cell
        return {"warehouses": c.warehouses, "loaders": c.loaders, "seed": spec.study_seed}, f"tpcc-w{c.warehouses}"

    def golden_words(self, c: Cell) -> str:
        return f"{c.warehouses} TPC-C warehouse(s)"

    def load_client(self, c: Cell) -> str:
        return c.client

    def prepare(self, srv, spec: RunSpec, path: Path, logs: Path, exe: Path) -> tuple[list[str], list[str]]:
        """Make the data in the started server: the loader's command line, and notes about the engine."""
        notes = self._engine_correct(srv)
        srv.sql(f"CREATE DATABASE {driver.TPCC_DATABASE}")
        return driver.load_argv(exe, spec, logs / "events.jsonl", srv=srv), notes

    @staticmethod
    def _engine_correct(srv) -> list[str]:
        """TPC-C finds customers by last name through a string index: an engine that gets that
        wrong fails the runs of this target, with why, before anything is loaded."""
        if srv.target.kind != "mariadb":
            return []
        wrong, notes = correctness.check(srv)
        if wrong:
            raise AlloclabError(wrong)
        return notes

    def client_argv(self, spec: RunSpec, exe: Path, events: Path):
        return lambda srv: driver.argv(exe, spec, events, srv=srv)

    def target(self, spec, run_dir, node, data, events):
        return OnServer(spec, run_dir, node.scratch, data, self.client_argv(spec, node.exe, events), self.client_label)

    def row_fields(self, spec):
        return {"pattern": "", "batch": 1, "key_bytes": 0, "value_bytes": 0}


class ServerHammerDB(ServerTPCC):
    """TPC-C against a MariaDB server with HammerDB as the client (the seeds' client): HammerDB's
    own schema as golden data, its timed test as the window, through hammerdb.py's adapter,
    which speaks alloclab's events."""

    name = "server TPC-C (HammerDB)"
    client_label = "HammerDB"
    prepare_scratch = HAMMERDB  # its scratch folder inside the datadir

    def golden_identity(self, spec):  # HammerDB's own schema, built by HammerDB
        ident, _ = super().golden_identity(spec)
        return {**ident, "client": HAMMERDB}, f"hammerdb-w{spec.cell.warehouses}"

    def prepare(self, srv, spec, path, logs, exe):
        notes = self._engine_correct(srv)
        c = spec.cell
        # one building virtual user on an optimistic engine: HammerDB's loader does not retry
        build_vus = 1 if srv.target.tidesql else max(1, min(c.loaders, c.warehouses))
        argv = hammerdb.command("build", "--socket", str(srv.socket), "--warehouses", str(c.warehouses), "--engine",
                                srv.target.engine, "--tmp", str(path / self.prepare_scratch), "--build-vus",
                                str(build_vus))
        return argv, notes

    def client_argv(self, spec: RunSpec, exe: Path, events: Path):
        c = spec.cell

        def argv(srv):
            return hammerdb.command("run", "--socket", str(srv.socket), "--warehouses",
                    str(c.warehouses), "--engine", srv.target.engine, "--threads", str(c.threads), "--rampup-s",
                    repr(c.rampup_s or 0.0), "--duration-s", repr(c.duration_s or 0.0), "--events", str(events),
                    "--tmp", str(srv.datadir / self.prepare_scratch))
        return argv

    def row_fields(self, spec):
        return {**super().row_fields(spec), "client": HAMMERDB}


class ServerOLTP(ServerTPCC):
    name = "server OLTP"
    tpcc = False

    def __init__(self, native: bool):
        self.driver_client = native
        self.client_label = "driver client" if native else SYSBENCH

    def golden_identity(self, spec):
        c = spec.cell
        return {"tables": c.tables, "table_size": c.table_size}, f"sb{c.tables}x{c.table_size}"

    def golden_words(self, c):
        return f"{c.tables} x {c.table_size} sysbench rows"

    def load_client(self, c):
        return SYSBENCH

    def prepare(self, srv, spec, path, logs, exe):
        srv.sql(f"CREATE DATABASE {sysbench.DATABASE}")
        return sysbench.prepare_argv(srv, spec.cell.tables, spec.cell.table_size), []

    SYSBENCH_CONNECTED_S = 1.0  # sysbench has connected every thread by then
    SYSBENCH_END_MARGIN_S = 0.5  # the window's end is read this long before sysbench's --time is up

    def client_argv(self, spec, exe, events):
        c = spec.cell
        if not self.driver_client:
            return lambda srv: sysbench.run_argv(srv, c.test, c.threads, c.duration_s, c.tables, c.table_size,
                                                 spec.seed, events=c.ops)

        return lambda srv: driver.argv(exe, spec, events, srv=srv)

    def window(self, spec, watch, since_client_s):
        """sysbench counts transactions over its whole run: its window is its run once its threads
        have connected, until just before its time is up (its connections, and PostgreSQL's
        backends, are still there)."""
        if self.driver_client:
            return super().window(spec, watch, since_client_s)
        d = spec.cell.duration_s
        return since_client_s >= self.SYSBENCH_CONNECTED_S, bool(d) and since_client_s >= d - self.SYSBENCH_END_MARGIN_S

    def row_fields(self, spec):
        return {"pattern": spec.cell.test or "", "batch": 1, "key_bytes": 0, "value_bytes": 0,
                "client": spec.cell.client}


def of(cell: Cell) -> RunKind:
    """The kind of a cell's runs."""
    if cell.workload == SYSBENCH:
        return ServerOLTP(native=cell.client == NATIVE)
    if cell.engine not in ENGINES:
        return ServerHammerDB() if cell.client == HAMMERDB else ServerTPCC()
    return EmbeddedTPCC() if cell.workload == TPCC else EmbeddedKV()
