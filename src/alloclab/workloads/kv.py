"""The key-value suite of TidesDB's benchtool (write, read, mixed, delete, seek, range) on an
engine inside the driver: its plan, its cells, its labels, its driver arguments and its runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from alloclab.catalog.names import ENGINES, KV_WORKLOADS, SYSBENCH
from alloclab.core.errors import AlloclabError
from alloclab.core.units import fmt_latency, fmt_rate
from alloclab.plan.schema import size
from alloclab.plan.workload import Workload, extra_settings, profile_suffix
from alloclab.run.kinds import EmbeddedKind


class EmbeddedKV(EmbeddedKind):
    name = "embedded key-value"


@dataclass(frozen=True)
class KVParams:
    """A key-value cell's own parameter: values of mixed sizes, each put's uniform in
    [value_bytes_min, value_bytes] (0: every value value_bytes long), as a life's."""

    value_bytes_min: int = 0


@dataclass(frozen=True)
class KVColumns:
    """A key-value run's own column: its cell's smallest value (0: every value value_bytes long),
    which tells two cells of the same value_bytes apart."""

    value_bytes_min: int = 0


def values(c: dict) -> str:
    """A cell's values as its labels say them: v4096, or v128-4096 where they are of mixed sizes."""
    low = c.get("value_bytes_min") or 0
    return f"v{f'{low}-' if low else ''}{c['value_bytes']}"


class KeyValue(Workload):
    names = KV_WORKLOADS
    Params, Columns = KVParams, KVColumns
    cell_keys = ("value_bytes_min",)
    schema = {"value_bytes_min": size(1)}
    keys = frozenset(schema)

    # --- the plan ------------------------------------------------------------------------
    def check(self, i: int, w: dict, engines: list[str]) -> None:
        servers = [e for e in engines if e not in ENGINES]
        if servers:
            raise AlloclabError(f"workloads[{i}]: {w['workload']} runs in-process on an embedded engine, not on "
                                f"{', '.join(servers)} (yet)", "use workload = \"sysbench\" against servers")
        if w.get("value_bytes_min", 1) > min(w.get("value_bytes", [100])):
            raise AlloclabError(f"workloads[{i}].value_bytes_min: {w['value_bytes_min']} is above value_bytes",
                                "give value_bytes_min at most the smallest value_bytes")

    def variants(self, w: dict, engine: str) -> list[tuple[str, Any]]:
        return [(client, KVParams(w.get("value_bytes_min", 0))) for client in w.get("client", [SYSBENCH])]

    # --- naming a cell ---------------------------------------------------------------------
    def key(self, c) -> str:
        prof = "" if c.profile == "default" else f"/{c.profile}"
        low = c.params.value_bytes_min
        return (f"{c.engine}/{c.part}/{c.workload}/{c.pattern}/k{c.key_bytes}/v{f'{low}-' if low else ''}"
                f"{c.value_bytes}/b{c.batch}/t{c.threads}{prof}")

    def settings(self, c: dict) -> str:
        return f"{c['workload']} {c['pattern']} k{c['key_bytes']} {values(c)} b{c['batch']}{extra_settings(c)}"

    def params(self, c: dict) -> str:
        return (f"{c['workload']} {c['pattern']} k{c['key_bytes']} {values(c)} b{c['batch']}"
                f"{profile_suffix(c)} t{c['threads']}")

    def describe(self, c) -> str:
        return f"t{c.threads} b{c.batch}"

    def outcome(self, r) -> str:
        return (f"{fmt_rate(r.ops_per_s)} ops/s  p99 {fmt_latency(r.p99_ns)}  "
                f"peak RSS {r.peak_rss_bytes / 2**20:.0f} MiB  ({r.wall_s:.1f}s)")

    # --- the run ---------------------------------------------------------------------------
    def run_kind(self, cell):
        return EmbeddedKV()

    def driver_args(self, c) -> list[str]:
        a = ["--pattern", c.pattern, "--key-bytes", str(c.key_bytes), "--value-bytes", str(c.value_bytes),
             "--batch", str(c.batch), "--range-len", str(c.range_len)]
        a += ["--value-bytes-min", str(c.params.value_bytes_min)] if c.params.value_bytes_min else []
        return a + (["--keyspace", str(c.keyspace)] if c.keyspace is not None else [])


KV = KeyValue()
