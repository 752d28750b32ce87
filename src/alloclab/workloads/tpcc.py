"""TPC-C: alloclab's own client (procedures, statements or rows) on an embedded engine or a
server, or HammerDB's TPROC-C against MariaDB (the seeds' client). Its plan keys and flags, its
cells and labels, its driver arguments, its kinds of run and golden data, its rates (NOPM, TPM)
and its report section (the tables of answers.tpcc, its charts, its clients in Environment)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alloclab.answers import analysis, tpcc
from alloclab.answers.table import caption
from alloclab.catalog import targets
from alloclab.catalog.names import (
    ENGINES,
    HAMMERDB,
    HAMMERDB_VERSION,
    NATIVE,
    TPCC,
    TPCC_CLIENTS,
    TPCC_ENGINES,
    TPCC_MIXES,
    TPCC_MODES,
    default_tpcc_mode,
)
from alloclab.clients import driver, hammerdb
from alloclab.core.errors import AlloclabError
from alloclab.core.units import csv_list
from alloclab.plan.schema import boolean, choice, list_of, seconds, whole
from alloclab.plan.workload import Workload, extra_settings, profile_suffix
from alloclab.report import charts
from alloclab.run.kinds import EmbeddedKind, ServerKind

DATABASE = TPCC  # the database of TPC-C's tables on a server


@dataclass(frozen=True)
class TPCCParams:
    """A TPC-C cell's own parameters (plan keys of the same names; mode: how alloclab's client
    drives it, "" for the engine's default or HammerDB)."""

    warehouses: int = 1
    loaders: int = 1
    rampup_s: float | None = None
    mix: str = "spec"
    all_warehouses: bool = False
    think: bool = False
    mode: str = ""


@dataclass(frozen=True)
class TPCCColumns:
    """TPC-C's own columns: the warehouses and the client's mode that tell its cells apart, and
    its rates (NOPM as HammerDB counts it, the client's own count, TPM; the server's TPM where
    HammerDB read it)."""

    warehouses: int = 0
    tpcc_mode: str = ""
    nopm: float = 0.0
    client_nopm: float = 0.0
    tpm: float = 0.0
    server_tpm: float = 0.0


class EmbeddedTPCC(EmbeddedKind):
    name = "embedded TPC-C"
    tpcc = True

    def data(self, spec, node):
        return node.datasets.pristine(spec)

    def summary_fields(self, summary):
        return rates(summary)


class ServerTPCC(ServerKind):
    name = "server TPC-C"
    tpcc = True

    def golden_identity(self, spec):
        c = spec.cell.params
        return {"warehouses": c.warehouses, "loaders": c.loaders, "seed": spec.study_seed}, f"tpcc-w{c.warehouses}"

    def golden_words(self, c):
        return f"{c.params.warehouses} TPC-C warehouse(s)"

    def prepare(self, srv, spec, path, logs, exe):
        notes = self.engine_correct(srv)  # TPC-C finds customers by last name through a string index
        srv.sql(f"CREATE DATABASE {DATABASE}")
        return driver.load_argv(exe, spec, logs / "events.jsonl", srv=srv), notes

    def summary_fields(self, summary):
        return rates(summary)


class ServerHammerDB(ServerTPCC):
    """TPC-C against a MariaDB server with HammerDB as the client (the seeds' client): HammerDB's
    own schema as golden data, its timed test as the window, through hammerdb.py's adapter,
    which speaks alloclab's events."""

    name = "server TPC-C (HammerDB)"
    client_label = "HammerDB"
    prepare_scratch = HAMMERDB  # its scratch folder inside the datadir

    def golden_identity(self, spec):  # HammerDB's own schema, built by HammerDB
        ident, _ = super().golden_identity(spec)
        return {**ident, "client": HAMMERDB}, f"hammerdb-w{spec.cell.params.warehouses}"

    def prepare(self, srv, spec, path, logs, exe):
        notes = self.engine_correct(srv)
        c = spec.cell.params
        # one building virtual user on an optimistic engine: HammerDB's loader does not retry
        build_vus = 1 if srv.target.tidesql else max(1, min(c.loaders, c.warehouses))
        argv = hammerdb.command("build", "--socket", str(srv.socket), "--warehouses", str(c.warehouses), "--engine",
                                srv.target.engine, "--tmp", str(path / self.prepare_scratch), "--build-vus",
                                str(build_vus))
        return argv, notes

    def client_argv(self, spec, exe: Path, events: Path):
        c = spec.cell

        def argv(srv):
            return hammerdb.command("run", "--socket", str(srv.socket), "--warehouses",
                    str(c.params.warehouses), "--engine", srv.target.engine, "--threads", str(c.threads), "--rampup-s",
                    repr(c.params.rampup_s or 0.0), "--duration-s", repr(c.duration_s or 0.0), "--events", str(events),
                    "--tmp", str(srv.datadir / self.prepare_scratch))
        return argv

    def row_fields(self, spec):
        return {**super().row_fields(spec), "client": HAMMERDB}


def rates(summary: dict) -> dict[str, float]:
    """NOPM as HammerDB counts it (from the database's d_next_o_id), the client's own count
    of committed New-Orders per minute, and TPM (committed plus rolled-back transactions)."""
    minutes = float(summary.get("duration_s") or 0) / 60
    wl = summary.get("workload") or {}
    server = {"server_tpm": round(float(wl.get("server_tpm") or 0), 1)}
    if not minutes:
        return {"nopm": 0.0, "client_nopm": 0.0, "tpm": 0.0} | server
    if wl.get("client") == HAMMERDB:  # HammerDB's own result line is the client's count
        return {"nopm": round(float(wl.get("nopm", 0.0)), 1), "client_nopm": round(float(wl["client_nopm"]), 1),
                "tpm": round(float(wl["tpm"]), 1)} | server
    ops = summary.get("ops", {})
    no = ops.get("neword", {})
    committed_no = no.get("calls", 0) - no.get("errors", 0) - no.get("rollbacks", 0)
    done = sum(o.get("calls", 0) - o.get("errors", 0) for o in ops.values())
    return {"nopm": round(float(wl.get("nopm", 0.0)), 1), "client_nopm": round(committed_no / minutes, 1),
            "tpm": round(done / minutes, 1)} | server


class TPCCWorkload(Workload):
    """TPC-C: alloclab's own client (procedures, statements or rows) or HammerDB's TPROC-C."""

    names = (TPCC,)
    title = "TPC-C"
    Params = TPCCParams
    Columns = TPCCColumns
    cell_keys = ("warehouses", "tpcc_mode")
    schema = {
        "warehouses": list_of(whole(1)),
        "loaders": whole(1),
        "rampup_s": seconds(0.0),
        "mix": choice(TPCC_MIXES),
        "mode": list_of(choice(TPCC_MODES)),
        "all_warehouses": boolean,
        "think": boolean,
    }
    only = frozenset(schema)
    keys = only | {"client"}
    headline = "nopm"
    headline_words = "NOPM"
    headline_unit = "NOPM"
    server_profile = "small"  # study 1's settings
    unit_of_work = "New-Order"
    mode_label = "rows"  # folders from before modes
    flags = ("warehouses", "loaders", "rampup")

    # --- the plan ------------------------------------------------------------------------
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
        if "client" in w:
            self._check_client(i, w, engines)

    @staticmethod
    def _check_client(i: int, w: dict, engines: list[str]) -> None:
        bad = [c for c in w["client"] if c not in TPCC_CLIENTS]
        if bad:
            raise AlloclabError(f"workloads[{i}].client: {bad[0]!r} does not run TPC-C",
                                "allowed values for tpcc: native (alloclab's client), hammerdb")
        if HAMMERDB not in w["client"]:
            return
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

    def variants(self, w: dict, engine: str) -> list[tuple[str, Any]]:
        clients = w.get("client", [NATIVE])
        modes = [""] if HAMMERDB in clients else (w.get("mode") or [default_tpcc_mode(engine)])
        return [(client, TPCCParams(warehouses=wh, loaders=w.get("loaders", 1), rampup_s=w.get("rampup_s"),
                                    mix=w.get("mix", HAMMERDB if client == HAMMERDB else "spec"),
                                    all_warehouses=w.get("all_warehouses", False), think=w.get("think", False),
                                    mode=mode))
                for wh in w.get("warehouses", [1]) for client in clients for mode in modes]

    def rampup_s(self, c) -> float | None:
        return c.params.rampup_s

    def row_own(self, c) -> dict[str, Any]:
        return {"warehouses": c.params.warehouses, "tpcc_mode": self.mode(c)}

    # --- naming a cell ---------------------------------------------------------------------
    def key(self, c) -> str:
        prof = "" if c.profile == "default" else f"/{c.profile}"
        p = c.params
        mode = f"/{p.mode}" if p.mode and p.mode != default_tpcc_mode(c.engine) else ""
        client = f"/{HAMMERDB}" if c.client == HAMMERDB else ""
        return f"{c.engine}/{c.part}/{c.workload}/w{p.warehouses}/vu{c.threads}{client}{mode}{prof}"

    def identity(self, r) -> dict[str, Any]:
        """TPC-C cells are the same cell whichever engine ran them: the key-value columns, which
        embedded and server runs fill differently, do not apply, and each engine's own default
        mode (procedures on servers, rows embedded) is the same cell; a mode other than the
        engine's default is a cell of its own."""
        mode = "" if r.own.tpcc_mode in ("", default_tpcc_mode(r.engine)) else r.own.tpcc_mode
        client = HAMMERDB if r.client == HAMMERDB else ""  # alloclab's own client, whatever the mode, is ""
        return {"pattern": "", "key_bytes": "", "value_bytes": "", "batch": "", "client": client, "tpcc_mode": mode}

    def settings(self, c: dict) -> str:
        mode = f" mode={c['tpcc_mode']}" if c.get("tpcc_mode") else ""
        return f"w{c['warehouses']}{mode}{extra_settings(c)}"

    def params(self, c: dict) -> str:
        mode = f" ({c['tpcc_mode']})" if c.get("tpcc_mode") else ""
        return f"{TPCC} w{c['warehouses']}{mode}{profile_suffix(c)} vu{c['threads']}"

    def describe(self, c) -> str:
        return f"w{c.params.warehouses} vu{c.threads}"

    def mode(self, c) -> str:
        """The cell's mode, else the engine's default (cells from before modes); HammerDB runs its
        own procedures."""
        return "procedures" if c.client == HAMMERDB else (c.params.mode or default_tpcc_mode(c.engine))

    def row_mode(self, r) -> str:
        return r.own.tpcc_mode or self.mode_label

    def external_client(self, c) -> str:
        return "HammerDB" if c.client == HAMMERDB else ""

    def outcome(self, r) -> str:
        return (f"NOPM {r.own.nopm:,.0f} (client {r.own.client_nopm:,.0f})  TPM {r.own.tpm:,.0f}  "
                f"peak RSS {r.peak_rss_bytes / 2**20:.0f} MiB  ({r.wall_s:.1f}s)")

    def work_done(self, r) -> float:
        return r.own.client_nopm * r.duration_s / 60

    # --- the run ---------------------------------------------------------------------------
    def run_kind(self, cell):
        if cell.engine in ENGINES:
            return EmbeddedTPCC()
        return ServerHammerDB() if cell.client == HAMMERDB else ServerTPCC()

    def driver_args(self, c) -> list[str]:
        p = c.params
        a = ["--warehouses", str(p.warehouses), "--tpcc-mix", p.mix, "--tpcc-mode", self.mode(c), "--check"]
        return a + (["--all-warehouses"] if p.all_warehouses else []) + (["--think"] if p.think else [])

    def driver_reach(self, c, srv) -> list[str]:
        """The driver's TPC-C client reaching a server: its database and the ENGINE= of its tables."""
        return driver.reach(srv, DATABASE) + ["--table-engine", srv.target.engine]

    # --- the report ------------------------------------------------------------------------
    def section_data(self, study, rows):
        """NOPM and NEW-ORDER's mean latency per engine (and profile) and allocator."""
        def latency_ms(st, r):
            return st.run_json(r.run_id).get("ops", {}).get("neword", {}).get("mean_ns", 0) / 1e6
        return {"nopm": analysis.grouped(study, rows, tpcc.group_label, lambda st, r: r.own.nopm),
                "latency": analysis.grouped(study, rows, tpcc.group_label, latency_ms),
                "captions": {key: caption(cap, rows) for key, _n, _t, _y, cap in self.CHARTS}}

    def report_tables(self, a, rows):
        """Its runs, transactions and ratios (where it has valid runs), the published figures of
        the study a preset reproduces, and its loads."""
        study = a.study
        own = [tpcc.tpcc_runs_table(study, rows), tpcc.tpcc_txn_table(study, rows),
               tpcc.tpcc_ratio_table(a)] if rows else []
        return own + [t for t in (tpcc.published_table(study, rows), tpcc.loads_table(study)) if t]

    CHARTS = (("nopm", "tpcc_nopm_by_allocator", "TPC-C NOPM by allocator", "NOPM",
               "TPC-C NOPM by allocator, per engine"),
              ("latency", "tpcc_latency_by_allocator", "TPC-C NEW-ORDER average latency by allocator",
               "NEW-ORDER average (ms)", "TPC-C NEW-ORDER average latency (ms)"))

    def report_charts(self, a, out):
        data = a.sections[self.names[0]]
        drawn = [(c, key) for key, name, title, ylabel, _cap in self.CHARTS
                 if (c := charts.draw_grouped_bars(data.get(key), out, name, title, ylabel))]
        return [(png, svg, data["captions"][key]) for (png, svg), key in drawn]

    def environment_lines(self, rows) -> list[str]:
        """The TPC-C clients the study's runs used."""
        clients = {(f"HammerDB {HAMMERDB_VERSION} (its TPROC-C stored procedures and 10/10/1/1/1 mix, as the "
                    "seeds ran it)" if r.client == HAMMERDB else f"alloclab's own ({r.own.tpcc_mode} mode)")
                   for r in rows}
        return ["TPC-C client: " + "; ".join(sorted(clients))] if clients else []

    # --- the CLI ---------------------------------------------------------------------------
    def add_flags(self, parser) -> None:
        parser.add_argument("--warehouses", type=csv_list(int), help="TPC-C warehouses, e.g. 40 or 10,40")
        parser.add_argument("--loaders", type=int, help="TPC-C loader threads")
        parser.add_argument("--rampup", help="TPC-C ramp-up before the measured window, e.g. 1m")

    flags_hint = "add --workloads tpcc (or --preset tpcc-allocators), or drop them"

    def apply_flags(self, a, w: dict) -> None:
        for flag, key in (("warehouses", "warehouses"), ("loaders", "loaders"), ("rampup", "rampup_s")):
            if getattr(a, flag) is not None:
                w[key] = getattr(a, flag)
        if a.client == HAMMERDB:
            w["mix"] = HAMMERDB  # HammerDB's own mix and procedures: as the seeds ran it
            w.pop("mode", None)


TPCC_WORKLOAD = TPCCWorkload()
