"""Kinds of run: what differs between them and nothing else. The kinds here are the shapes every
workload's runs take; each workload (alloclab.workloads) makes its own from them:

    EmbeddedKind    operations on an engine inside the driver (tidesdb, rocksdb, ...)
    ServerKind      a server alloclab started from a golden datadir, and the client that drives it

A kind owns its data preparation (`data`), what it starts for a run (`target`: the processes
under test, the client that drives them and how each is proved and stopped), its measured window
and the fields its row adds (`row_fields`, and `outcome` from what the run stored); a server
kind also its golden data (`golden_identity`, `prepare`). The one runner (execute.run) starts,
proves, samples, stops and records every kind the same way; `of(cell)` asks the cell's workload
for its kind.
"""

from __future__ import annotations

from pathlib import Path

from alloclab.clients import driver
from alloclab.core.errors import AlloclabError
from alloclab.plan import Cell, RunSpec, workload
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
        """The cell's fields as its rows record them (results.store.CELL_FIELDS): the client only
        where it is not alloclab's own."""
        c = spec.cell
        return {"pattern": c.pattern, "batch": c.batch, "key_bytes": c.key_bytes, "value_bytes": c.value_bytes,
                "client": ""}

    def summary_fields(self, summary: dict) -> dict:
        """Row fields from the driver's summary that only its workload has (TPC-C's rates)."""
        return {}

    def outcome(self, target: Target, watch, timeline, run_dir: Path) -> tuple[dict, dict]:
        """What the kind measures after its run from what the run stored (its samples.csv is
        written by then): row fields, and entries of run.json (a server's life: its memory)."""
        return {}, {}


class EmbeddedKind(RunKind):
    """The driver with its engine inside, from nothing (or from the data `data` prepares)."""

    def data(self, spec, node):
        return None

    def target(self, spec, run_dir, node, data, events):
        return InProcess(spec, run_dir, node.scratch, driver.for_allocator(spec.allocator, node.exe), data, events)


class ServerKind(RunKind):
    """A server alloclab started from a copy of its golden datadir, driven by a client."""

    client_label = "driver client"  # the client process, as its errors name it
    prepare_scratch = ""  # a folder the client's preparation leaves in the datadir, removed

    def data(self, spec, node):
        return node.golden.datadir(spec, self)

    # --- its golden data (run.golden): what defines it, and how it is prepared ---------------
    def golden_identity(self, spec: RunSpec) -> tuple[dict, str]:
        raise NotImplementedError

    def golden_words(self, c: Cell) -> str:
        raise NotImplementedError

    def load_client(self, c: Cell) -> str:
        return c.client

    def prepare(self, srv, spec: RunSpec, path: Path, logs: Path, exe: Path) -> tuple[list[str], list[str]]:
        """Make the data in the started server: the loader's command line, and notes about the engine."""
        raise NotImplementedError

    @staticmethod
    def engine_correct(srv) -> list[str]:
        """Finding rows by a string index: an engine that gets that wrong fails the runs of this
        target, with why, before anything is loaded."""
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
        return {"pattern": "", "batch": 1, "key_bytes": 0, "value_bytes": 0, "client": ""}


def of(cell: Cell) -> RunKind:
    """The kind of a cell's runs: its workload's (alloclab.workloads)."""
    return workload.of(cell.workload).run_kind(cell)
