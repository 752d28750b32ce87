"""What a workload is (go-tpc's `Workloader`), and the registry of the workloads there are.

The workloads themselves are `alloclab.workloads`, one module each (key-value, TPC-C, sysbench's
OLTP), at the layer above the runner and the report: each owns its plan keys and their
validation, how its cells expand, its cell key and labels, its driver arguments, its run kinds,
its CLI flags, its headline metric and its report section. They register here when
`alloclab.workloads` is imported (every entry point does); the layers below ask `of(name)` and
never compare a workload's name. An unknown name is refused, never taken for another workload.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from alloclab.catalog import metrics as cm
from alloclab.catalog.metrics import Metric
from alloclab.core.errors import AlloclabError
from alloclab.results import columns
from alloclab.results.columns import NoColumns
from alloclab.results.store import RunRow


@dataclass(frozen=True)
class NoParams:
    """A workload with no parameters of its own (the key-value suite's are every cell's)."""


def profile_suffix(c: dict, brackets: tuple[str, str] = ("[", "]")) -> str:
    """A cell's settings profile and shape as labels add them ("" for the defaults)."""
    out = "" if c["profile"] == "default" else f" {brackets[0]}{c['profile']}{brackets[1]}"
    return out + ("" if c.get("shape", "default") == "default" else f" <{c['shape']}>")


def extra_settings(c: dict) -> str:
    """A verdict's settings for a profile and shape other than the defaults."""
    extra = "" if c["profile"] == "default" else f" profile={c['profile']}"
    return extra + ("" if c["shape"] == "default" else f" shape={c['shape']}")


class Workload:
    """The questions every workload answers. The plan's, the verdicts' and the report's are
    asked by the layers below `alloclab.workloads`; the run's (`run_kind`, `driver_args`) by the
    runner, whose kind of run (run.kinds.RunKind) reads the workload's own measures from the
    driver's summary (`summary_fields`); the CLI's (`add_flags`, `apply_flags`) by the CLI."""

    names: tuple[str, ...] = ()  # the plan's `workload` values it answers to
    # its own parameters (go-tpc's `Config`): a frozen dataclass, a cell's `params`, with every field
    # defaulted; its own columns of runs.csv (results.columns), a row's `own`; and those of its
    # columns that tell its cells apart (decide.cell_of), each also a field of Params
    Params: type = NoParams
    Columns: type = NoColumns
    cell_keys: tuple[str, ...] = ()
    title = ""  # its name in a sentence
    schema: dict = {}  # the plan keys it adds to a [[workloads]] table, each with its check (plan.schema)
    keys: frozenset[str] = frozenset()  # plan keys of its own (beside the common ones)
    only: frozenset[str] = frozenset()  # keys no other workload accepts (named when misplaced)
    headline = "ops_per_s"  # runs.csv's column its throughput verdicts compare
    headline_words = "throughput"
    metrics: tuple[Metric, ...] = ()  # its own verdict metrics beside throughput (a life's memory: catalog.metrics)
    headline_unit = ""  # its throughput's unit where a chart names it ("": the metric's)
    server_profile = ""  # a server's settings profile when the plan names none
    unit_of_work = "transaction"  # what a run's CPU is divided by (report: CPU per transaction)
    mode_label = ""  # its runs' mode where a row has none ("": none applies)
    flags: tuple[str, ...] = ()  # its own `alloclab run` flags (argparse dests)
    flags_hint = ""  # what to do when its flags are given to a study without it

    # --- the plan ------------------------------------------------------------------------
    def check(self, i: int, w: dict, engines: list[str]) -> None:
        """Raise, naming the key, if the table cannot run on these engines."""

    def variants(self, w: dict, engine: str) -> list[tuple[str, Any]]:
        """What a table sweeps of its own on an engine, besides the common keys: (client, Params)
        for each of its cells there, in the order they are planned."""
        return [(c, self.Params()) for c in w.get("client", [""])]

    def rampup_s(self, c) -> float | None:
        """Its own ramp-up before the measured window (None: the plan's warmup_s)."""
        return None

    def row_own(self, c) -> dict[str, Any]:
        """Its own columns that a row copies from its cell (those that tell its cells apart)."""
        return {k: getattr(c.params, k) for k in self.cell_keys if k in {f.name for f in fields(self.Params)}}

    def table_of(self, word: str) -> dict | None:
        """The [[workloads]] table a word of --workloads names, if it names this workload."""
        return {"workload": word, "part": word} if word in self.names else None

    # --- naming a cell ---------------------------------------------------------------------
    def key(self, c) -> str:
        """The plan's cell key (runs.csv's `cell`)."""
        raise NotImplementedError

    def identity(self, r) -> dict[str, Any]:
        """What identifies a row's cell beside the common fields (decide.cell_of)."""
        return {}

    def settings(self, c: dict) -> str:
        """A verdict's settings: the cell's parameters other than engine, part and threads."""
        raise NotImplementedError

    def params(self, c: dict) -> str:
        """A cell as the report's tables and charts name it."""
        raise NotImplementedError

    def describe(self, c) -> str:
        """A cell as the progress line names it."""
        raise NotImplementedError

    def mode(self, c) -> str:
        """How the client drives the cell ("" but for TPC-C)."""
        return ""

    def row_mode(self, r) -> str:
        """How the client drove a row's run, as the report's tables say it ("": none applies)."""
        return self.mode_label

    def external_client(self, c) -> str:
        """The client that drives the cell when it is not alloclab's own ("": the driver)."""
        return ""

    # --- what its runs did ------------------------------------------------------------------
    def outcome(self, r) -> str:
        """A finished run as the progress line says it."""
        raise NotImplementedError

    def work_done(self, r) -> float:
        """How many units of work the run's window did."""
        return r.ops

    # --- the run (alloclab.run asks these) ---------------------------------------------------
    def run_kind(self, cell):  # -> run.kinds.RunKind
        """The kind of run of a cell (run.kinds.RunKind): what it starts, reads and records."""
        raise NotImplementedError

    def driver_command(self, c) -> str:
        """The driver's subcommand for a cell's run (`life`: one engine through a life's phases)."""
        return "run"

    def driver_workload(self, c) -> str:
        """The driver's `--workload` of a cell."""
        return c.workload

    def driver_args(self, c) -> list[str]:
        """The driver's `run` arguments of its own (after the common ones)."""
        return []

    def driver_reach(self, c, srv) -> list[str]:
        """How the driver, as this workload's client, reaches the server `srv` (its database)."""
        raise AlloclabError(f"workload {c.workload} has no client for a server", "run it on an embedded engine")

    # --- its analysis and report (alloclab.answers and alloclab.report ask these) -------------
    def section_data(self, study, rows: list) -> dict:
        """The statistics of its own report section over its valid rows (built once, with the
        folder's analysis: answers.analysis)."""
        return {}

    def report_tables(self, a, rows: list) -> list:
        """Its own tables (answers.table.Table) over its valid rows, built with the analysis `a`
        (answers.tables.build)."""
        return []

    def first_charts(self, a, out) -> list:
        """Charts that answer its study first, in place of the throughput forest plot (a life's
        memory: RSS over the life and the forest plots of its memory verdicts); [] for a speed
        workload."""
        return []

    def report_charts(self, a, out) -> list:
        """Its own charts: (png, svg, caption), from the analysis `a` (its section_data)."""
        return []

    def environment_lines(self, rows: list) -> list[str]:
        """Lines of its own for the report's Environment (the clients its runs used)."""
        return []

    # --- the CLI (alloclab.cli asks these) ---------------------------------------------------
    def add_flags(self, parser) -> None:
        """Add its own `alloclab run` flags (named in `flags`)."""

    def apply_flags(self, a, w: dict) -> None:
        """Its own flags' values into one of its [[workloads]] tables."""


_REGISTRY: dict[str, Workload] = {}
_ORDER: list[Workload] = []


def register(w: Workload) -> Workload:
    """Make a workload known by each of its names, and its own columns readable in runs.csv
    (alloclab.workloads registers them all). Its columns are no shared column's names."""
    clash = sorted({f.name for f in fields(w.Columns)} & set(RunRow.columns()))
    if clash:
        raise AlloclabError(f"workload {w.names[0]}: {', '.join(clash)} are shared columns of every run")
    columns.register(w.names, w.Columns)
    cm.register(*w.metrics)
    for n in w.names:
        if n in _REGISTRY and _REGISTRY[n] is not w:
            raise AlloclabError(f"workload name {n!r} is registered twice")
        _REGISTRY[n] = w
    if w not in _ORDER:
        _ORDER.append(w)
    return w


def of(name: str) -> Workload:
    """The workload object of a workload name (a plan's `workload`, a row's `workload`)."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    if not _REGISTRY:
        raise AlloclabError(f"no workloads are registered to answer for workload {name!r}",
                            "import alloclab.workloads first (every entry point does)")
    raise AlloclabError(f"unknown workload {name!r}", "allowed values: " + ", ".join(_REGISTRY))


def names() -> tuple[str, ...]:
    """Every name a plan's `workload` may have: the registered workloads'."""
    return tuple(_REGISTRY)


def every() -> tuple[Workload, ...]:
    """The registered workloads, in the order they registered."""
    return tuple(_ORDER)


def check(i: int, w: dict, engines: list[str]) -> None:
    """A [[workloads]] table against the plan's engines: a key that belongs to another workload
    is refused, naming the workload it belongs to, and the workload checks its own keys, in the
    order the workloads registered."""
    this = of(w["workload"])
    for other in _ORDER:
        if other is this:
            this.check(i, w, engines)
            continue
        bad = (other.only - this.keys) & set(w)
        if bad:
            raise AlloclabError(f"workloads[{i}]: {', '.join(sorted(bad))} only apply to "
                                f"workload = \"{other.names[0]}\"")
