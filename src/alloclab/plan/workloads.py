"""One object per workload (go-tpc's `Workloader`): the key-value suite, TPC-C and sysbench's
OLTP tests. A workload owns its plan keys and their validation, how its cells are expanded from
a [[workloads]] table, how a cell is keyed and labelled (the plan's cell key, a verdict's
settings, a report's parameters, the progress line) and its headline metric. What a run of it
starts and measures is the run kind's (run.kinds).

Nothing else branches on a workload's name: ask `of(name)`.
"""

from __future__ import annotations

from typing import Any

from alloclab.catalog import targets
from alloclab.catalog.names import (
    ENGINES,
    HAMMERDB,
    KV_WORKLOADS,
    NATIVE,
    SYSBENCH,
    SYSBENCH_CLIENTS,
    SYSBENCH_TESTS,
    TPCC,
    TPCC_CLIENTS,
    TPCC_ENGINES,
    default_tpcc_mode,
)
from alloclab.core.errors import AlloclabError
from alloclab.core.units import fmt_latency, fmt_rate


def _prof(c: dict, brackets: tuple[str, str] = ("[", "]")) -> str:
    out = "" if c["profile"] == "default" else f" {brackets[0]}{c['profile']}{brackets[1]}"
    return out + ("" if c.get("shape", "default") == "default" else f" <{c['shape']}>")


class Workload:
    """The key-value suite of TidesDB's benchtool (write, read, mixed, delete, seek, range), on an
    engine inside the driver."""

    names: tuple[str, ...] = KV_WORKLOADS
    keys: frozenset[str] = frozenset()  # plan keys of its own (beside the common ones)
    only: frozenset[str] = frozenset()  # keys no other workload accepts (named when misplaced)
    headline = "ops_per_s"  # runs.csv's column its throughput verdicts compare
    headline_words = "throughput"
    headline_unit = ""  # its throughput's unit where a chart names it ("": the metric's)
    server_profile = ""  # a server's settings profile when the plan names none

    # --- the plan ------------------------------------------------------------------------
    def check(self, i: int, w: dict, engines: list[str]) -> None:
        """Raise, naming the key, if the table cannot run on these engines."""
        servers = [e for e in engines if e not in ENGINES]
        if servers:
            raise AlloclabError(f"workloads[{i}]: {w['workload']} runs in-process on an embedded engine, not on "
                                f"{', '.join(servers)} (yet)", "use workload = \"sysbench\" against servers")

    def axes(self, w: dict, engine: str) -> tuple[list, list, list, list]:
        """The values a table sweeps besides the common ones: warehouses, tests, clients, modes."""
        return [0], [""], w.get("client", [SYSBENCH]), [""]

    def fields(self, w: dict, client: str) -> dict[str, Any]:
        """A cell's fields that depend on the workload."""
        return {"mix": w.get("mix", "spec")}

    # --- naming a cell ---------------------------------------------------------------------
    def key(self, c) -> str:
        """The plan's cell key (runs.csv's `cell`)."""
        prof = "" if c.profile == "default" else f"/{c.profile}"
        return (f"{c.engine}/{c.part}/{c.workload}/{c.pattern}/k{c.key_bytes}/v{c.value_bytes}/b{c.batch}"
                f"/t{c.threads}{prof}")

    def identity(self, r) -> dict[str, Any]:
        """What identifies a row's cell beside the common fields (decide.cell_of)."""
        return {}

    def settings(self, c: dict) -> str:
        """A verdict's settings: the cell's parameters other than engine, part and threads."""
        extra = "" if c["profile"] == "default" else f" profile={c['profile']}"
        extra += "" if c["shape"] == "default" else f" shape={c['shape']}"
        return f"{c['workload']} {c['pattern']} k{c['key_bytes']} v{c['value_bytes']} b{c['batch']}{extra}"

    def params(self, c: dict) -> str:
        """A cell as the report's tables and charts name it."""
        return (f"{c['workload']} {c['pattern']} k{c['key_bytes']} v{c['value_bytes']} b{c['batch']}{_prof(c)} "
                f"t{c['threads']}")

    def describe(self, c) -> str:
        """A cell as the progress line names it."""
        return f"t{c.threads} b{c.batch}"

    def mode(self, c) -> str:
        """How the client drives the cell ("" but for TPC-C)."""
        return ""

    def external_client(self, c) -> str:
        """The client that drives the cell when it is not alloclab's own ("": the driver)."""
        return ""

    # --- what its runs did ------------------------------------------------------------------
    def outcome(self, r) -> str:
        """A finished run as the progress line says it."""
        return (f"{fmt_rate(r.ops_per_s)} ops/s  p99 {fmt_latency(r.p99_ns)}  "
                f"peak RSS {r.peak_rss_bytes / 2**20:.0f} MiB  ({r.wall_s:.1f}s)")

    unit_of_work = "transaction"  # what a run's CPU is divided by (report: CPU per transaction)
    mode_label = ""  # its runs' mode where a row has none ("": none applies)

    def work_done(self, r) -> float:
        """How many units of work the run's window did."""
        return r.ops


class TPCCWorkload(Workload):
    """TPC-C: alloclab's own client (procedures, statements or rows) or HammerDB's TPROC-C."""

    names = (TPCC,)
    only = frozenset({"warehouses", "loaders", "rampup_s", "mix", "mode", "all_warehouses", "think"})
    keys = only | {"client"}
    headline = "nopm"
    headline_words = "NOPM"
    headline_unit = "NOPM"
    server_profile = "small"  # study 1's settings

    def check(self, i: int, w: dict, engines: list[str]) -> None:
        bad = [e for e in engines if e not in TPCC_ENGINES and e in ENGINES]
        if bad:
            raise AlloclabError(f"workloads[{i}]: TPC-C does not run on {', '.join(bad)}",
                                "allowed engines for tpcc: " + ", ".join(TPCC_ENGINES) + " and the servers")
        embedded = [e for e in engines if e in ENGINES]
        kv = [e for e in engines if e in ENGINES and e != "sqlite"]
        if "procedures" in w.get("mode", []) and embedded:
            raise AlloclabError(f"workloads[{i}].mode: procedures run inside a server, not in "
                                f"{', '.join(embedded)}",
                                "use mode = [\"rows\"] for embedded engines, or leave mode out (each engine "
                                "gets its default: procedures on servers, rows embedded)")
        if "statements" in w.get("mode", []) and kv:
            raise AlloclabError(f"workloads[{i}].mode: statements are SQL, which {', '.join(kv)} do not speak",
                                "statements run on the servers and sqlite; key-value engines run mode = "
                                "[\"rows\"]")
        if "client" not in w:
            return
        bad = [c for c in w["client"] if c not in TPCC_CLIENTS]
        if bad:
            raise AlloclabError(f"workloads[{i}].client: {bad[0]!r} does not run TPC-C",
                                "allowed values for tpcc: native (alloclab's client), hammerdb")
        if HAMMERDB in w["client"]:
            not_maria = [e for e in engines if e in ENGINES or targets.parse(e).kind != "mariadb"]
            if not_maria:
                raise AlloclabError(f"workloads[{i}].client: HammerDB's TPROC-C runs here against MariaDB only, "
                                    f"not {', '.join(not_maria)}",
                                    "use mariadb-innodb, mariadb-myrocks, mariadb11-* or mariadb:ENGINE=plugin.so")
            if w.get("mode"):
                raise AlloclabError(f"workloads[{i}].mode: HammerDB runs its own stored procedures; mode is for "
                                    "the native client", "drop mode, or run client = [\"native\"]")
            if "ops" in w:
                raise AlloclabError(f"workloads[{i}].ops: HammerDB runs for a time, not a count",
                                    "give duration_s (HammerDB counts in steps of 6 s)")
            w.setdefault("duration_s", 30.0)  # HammerDB's timed test (it has no count of transactions)
            if w.get("mix", HAMMERDB) != HAMMERDB:
                raise AlloclabError(f"workloads[{i}].mix: HammerDB's mix is its own (10/10/1/1/1 of 23)",
                                    "set mix = \"hammerdb\" (or leave it out) with client = \"hammerdb\"")

    def axes(self, w: dict, engine: str) -> tuple[list, list, list, list]:
        clients = w.get("client", [NATIVE])
        modes = [""] if HAMMERDB in clients else (w.get("mode") or [default_tpcc_mode(engine)])
        return w.get("warehouses", [1]), [""], clients, modes

    def fields(self, w: dict, client: str) -> dict[str, Any]:
        return {"mix": w.get("mix", HAMMERDB if client == HAMMERDB else "spec")}

    def key(self, c) -> str:
        prof = "" if c.profile == "default" else f"/{c.profile}"
        mode = f"/{c.mode}" if c.mode and c.mode != default_tpcc_mode(c.engine) else ""
        client = f"/{HAMMERDB}" if c.client == HAMMERDB else ""
        return f"{c.engine}/{c.part}/{c.workload}/w{c.warehouses}/vu{c.threads}{client}{mode}{prof}"

    def identity(self, r) -> dict[str, Any]:
        """TPC-C cells are the same cell whichever engine ran them: the key-value columns, which
        embedded and server runs fill differently, do not apply, and each engine's own default
        mode (procedures on servers, rows embedded) is the same cell; a mode other than the
        engine's default is a cell of its own."""
        mode = "" if r.tpcc_mode in ("", default_tpcc_mode(r.engine)) else r.tpcc_mode
        client = HAMMERDB if r.client == HAMMERDB else ""  # alloclab's own client, whatever the mode, is ""
        return {"pattern": "", "key_bytes": "", "value_bytes": "", "batch": "", "client": client, "tpcc_mode": mode}

    def settings(self, c: dict) -> str:
        extra = "" if c["profile"] == "default" else f" profile={c['profile']}"
        extra += "" if c["shape"] == "default" else f" shape={c['shape']}"
        mode = f" mode={c['tpcc_mode']}" if c.get("tpcc_mode") else ""
        return f"w{c['warehouses']}{mode}{extra}"

    def params(self, c: dict) -> str:
        mode = f" ({c['tpcc_mode']})" if c.get("tpcc_mode") else ""
        return f"{TPCC} w{c['warehouses']}{mode}{_prof(c)} vu{c['threads']}"

    def describe(self, c) -> str:
        return f"w{c.warehouses} vu{c.threads}"

    def mode(self, c) -> str:
        """The cell's mode, else the engine's default (cells from before modes); HammerDB runs its
        own procedures."""
        return "procedures" if c.client == HAMMERDB else (c.mode or default_tpcc_mode(c.engine))

    def external_client(self, c) -> str:
        return "HammerDB" if c.client == HAMMERDB else ""

    def outcome(self, r) -> str:
        return (f"NOPM {r.nopm:,.0f} (client {r.client_nopm:,.0f})  TPM {r.tpm:,.0f}  "
                f"peak RSS {r.peak_rss_bytes / 2**20:.0f} MiB  ({r.wall_s:.1f}s)")

    unit_of_work = "New-Order"
    mode_label = "rows"  # folders from before modes

    def work_done(self, r) -> float:
        return r.client_nopm * r.duration_s / 60


class OLTPWorkload(Workload):
    """sysbench's OLTP tests against a server: the real sysbench, or alloclab's driver natively."""

    names = (SYSBENCH,)
    only = frozenset({"test", "tables", "table_size", "client"})
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

    def axes(self, w: dict, engine: str) -> tuple[list, list, list, list]:
        return [0], w.get("test", [""]), w.get("client", [SYSBENCH]), [""]

    def key(self, c) -> str:
        prof = "" if c.profile == "default" else f"/{c.profile}"
        shape = "" if c.shape == "default" else f"/{c.shape}"
        client = "" if c.client == SYSBENCH else f"/{c.client}"
        return f"{c.engine}/{c.part}/{c.workload}/{c.test}{client}/{c.tables}x{c.table_size}/t{c.threads}{prof}{shape}"

    def settings(self, c: dict) -> str:
        extra = "" if c["profile"] == "default" else f" profile={c['profile']}"
        extra += "" if c["shape"] == "default" else f" shape={c['shape']}"
        client = "" if c["client"] in ("", SYSBENCH) else f" client={c['client']}"
        return f"{c['pattern']}{client}{extra}"

    def params(self, c: dict) -> str:
        client = "" if c.get("client") in ("", SYSBENCH) else f" ({c['client']})"
        return f"{c['pattern']}{client}{_prof(c)} t{c['threads']}"

    def describe(self, c) -> str:
        return c.test + ("" if c.client == SYSBENCH else f" ({c.client})") + f" t{c.threads}"

    def external_client(self, c) -> str:
        return SYSBENCH if c.client == SYSBENCH else ""

    def outcome(self, r) -> str:
        return (f"{r.ops_per_s:,.0f} tps  p99 {fmt_latency(r.p99_ns)}  server peak RSS "
                f"{r.peak_rss_bytes / 2**20:.0f} MiB  ({r.wall_s:.1f}s)")


KV, TPCC_WORKLOAD, OLTP_WORKLOAD = Workload(), TPCCWorkload(), OLTPWorkload()
ALL = (KV, TPCC_WORKLOAD, OLTP_WORKLOAD)
_BY_NAME = {n: w for w in ALL for n in w.names}


def of(name: str) -> Workload:
    """The workload object of a workload name (a plan's `workload`, a row's `workload`)."""
    return _BY_NAME.get(name, KV)


def check(i: int, w: dict, engines: list[str]) -> None:
    """A [[workloads]] table against the plan's engines: a key that belongs to another workload
    is refused, naming the workload it belongs to, and the workload checks its own keys (in the
    order plan validation always had: TPC-C's keys, TPC-C, sysbench's keys, sysbench, then the
    key-value suite)."""
    this = of(w["workload"])
    for other in (TPCC_WORKLOAD, OLTP_WORKLOAD):
        if other is this:
            this.check(i, w, engines)
            continue
        bad = (other.only - this.keys) & set(w)
        if bad:
            raise AlloclabError(f"workloads[{i}]: {', '.join(sorted(bad))} only apply to "
                                f"workload = \"{other.names[0]}\"")
    if this is KV:
        this.check(i, w, engines)
