"""sysbench's OLTP tests against a server: the real sysbench, or alloclab's driver natively.
Its plan keys, cells and labels, its driver arguments, and its kind of run with its golden
data (the sysbench tables)."""

from __future__ import annotations

from dataclasses import dataclass

from alloclab.catalog import targets
from alloclab.catalog.names import ENGINES, NATIVE, SYSBENCH, SYSBENCH_CLIENTS, SYSBENCH_TESTS
from alloclab.clients import driver, sysbench
from alloclab.core.errors import AlloclabError
from alloclab.core.units import fmt_latency
from alloclab.plan.schema import choice, list_of, whole
from alloclab.plan.workload import Workload, extra_settings, profile_suffix
from alloclab.run.kinds import ServerKind


@dataclass(frozen=True)
class OLTPParams:
    """A sysbench cell's own parameters: its test and its tables (plan keys of the same names)."""

    test: str = ""
    tables: int = 10
    table_size: int = 100_000


class ServerOLTP(ServerKind):
    name = "server OLTP"

    def __init__(self, native: bool):
        self.driver_client = native
        self.client_label = "driver client" if native else SYSBENCH

    def golden_identity(self, spec):
        c = spec.cell.params
        return {"tables": c.tables, "table_size": c.table_size}, f"sb{c.tables}x{c.table_size}"

    def golden_words(self, c):
        return f"{c.params.tables} x {c.params.table_size} sysbench rows"

    def load_client(self, c):
        return SYSBENCH

    def prepare(self, srv, spec, path, logs, exe):
        srv.sql(f"CREATE DATABASE {sysbench.DATABASE}")
        return sysbench.prepare_argv(srv, spec.cell.params.tables, spec.cell.params.table_size), []

    SYSBENCH_CONNECTED_S = 1.0  # sysbench has connected every thread by then
    SYSBENCH_END_MARGIN_S = 0.5  # the window's end is read this long before sysbench's --time is up

    def client_argv(self, spec, exe, events):
        c = spec.cell
        if not self.driver_client:
            p = c.params
            return lambda srv: sysbench.run_argv(srv, p.test, c.threads, c.duration_s, p.tables, p.table_size,
                                                 spec.seed, events=c.ops)
        return super().client_argv(spec, exe, events)

    def window(self, spec, watch, since_client_s):
        """sysbench counts transactions over its whole run: its window is its run once its threads
        have connected, until just before its time is up (its connections, and PostgreSQL's
        backends, are still there)."""
        if self.driver_client:
            return super().window(spec, watch, since_client_s)
        d = spec.cell.duration_s
        return since_client_s >= self.SYSBENCH_CONNECTED_S, bool(d) and since_client_s >= d - self.SYSBENCH_END_MARGIN_S

    def row_fields(self, spec):
        return {"pattern": spec.cell.params.test or "", "batch": 1, "key_bytes": 0, "value_bytes": 0,
                "client": spec.cell.client}


class OLTPWorkload(Workload):
    """sysbench's OLTP tests against a server: the real sysbench, or alloclab's driver natively."""

    names = (SYSBENCH,)
    title = "sysbench's OLTP tests"
    Params = OLTPParams
    schema = {
        "test": list_of(choice(SYSBENCH_TESTS)),
        "tables": whole(1, 10_000),
        "table_size": whole(1),
    }
    only = frozenset(schema) | {"client"}
    keys = only
    server_profile = "sysbench"  # studies 3 and 5

    def check(self, i: int, w: dict, engines: list[str]) -> None:
        if "test" not in w:
            raise AlloclabError(f"workloads[{i}]: sysbench needs a test", "allowed values: "
                                + ", ".join(SYSBENCH_TESTS))
        bad = [c for c in w.get("client", []) if c not in SYSBENCH_CLIENTS]
        if bad:
            raise AlloclabError(f"workloads[{i}].client: {bad[0]!r} does not run sysbench's tests",
                                "allowed values for sysbench: sysbench, native")
        bad = [e for e in engines if e in ENGINES]
        if bad:
            raise AlloclabError(f"workloads[{i}]: sysbench runs against a server, not {', '.join(bad)}",
                                "allowed engines for sysbench: " + ", ".join(targets.BUILTIN)
                                + ", mariadb:ENGINE=plugin.so")

    def variants(self, w: dict, engine: str) -> list[tuple[str, OLTPParams]]:
        return [(client, OLTPParams(test=test, tables=w.get("tables", OLTPParams.tables),
                                    table_size=w.get("table_size", OLTPParams.table_size)))
                for test in w.get("test", [""]) for client in w.get("client", [SYSBENCH])]

    def table_of(self, word: str) -> dict | None:
        """sysbench's tests by their own names (oltp_read_only, ...) in --workloads."""
        return {"workload": SYSBENCH, "test": word, "part": word} if word in SYSBENCH_TESTS else None

    def key(self, c) -> str:
        prof = "" if c.profile == "default" else f"/{c.profile}"
        shape = "" if c.shape == "default" else f"/{c.shape}"
        client = "" if c.client == SYSBENCH else f"/{c.client}"
        p = c.params
        return f"{c.engine}/{c.part}/{c.workload}/{p.test}{client}/{p.tables}x{p.table_size}/t{c.threads}{prof}{shape}"

    def settings(self, c: dict) -> str:
        client = "" if c["client"] in ("", SYSBENCH) else f" client={c['client']}"
        return f"{c['pattern']}{client}{extra_settings(c)}"

    def params(self, c: dict) -> str:
        client = "" if c.get("client") in ("", SYSBENCH) else f" ({c['client']})"
        return f"{c['pattern']}{client}{profile_suffix(c)} t{c['threads']}"

    def describe(self, c) -> str:
        return c.params.test + ("" if c.client == SYSBENCH else f" ({c.client})") + f" t{c.threads}"

    def external_client(self, c) -> str:
        return SYSBENCH if c.client == SYSBENCH else ""

    def outcome(self, r) -> str:
        return (f"{r.ops_per_s:,.0f} tps  p99 {fmt_latency(r.p99_ns)}  server peak RSS "
                f"{r.peak_rss_bytes / 2**20:.0f} MiB  ({r.wall_s:.1f}s)")

    # --- the run ---------------------------------------------------------------------------
    def run_kind(self, cell):
        return ServerOLTP(native=cell.client == NATIVE)

    def driver_workload(self, c) -> str:
        return c.params.test

    def driver_reach(self, c, srv) -> list[str]:
        return driver.reach(srv, sysbench.DATABASE) + ["--tables", str(c.params.tables), "--table-size",
                                                        str(c.params.table_size)]


OLTP_WORKLOAD = OLTPWorkload()
