"""The driver's versioned JSON-lines events: reading them and their encoded HDR histograms, and
writing them from a client of alloclab's own that is not the driver (`Channel`)."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hdrh.histogram import HdrHistogram

from alloclab.core.errors import AlloclabError

SCHEMA_VERSION = 1
EVENT_TYPES = {"start", "phase", "interval", "summary", "check", "end"}


@dataclass
class Event:
    type: str
    data: dict


def parse_line(line: str) -> Event:
    """One event line -> Event. Refuses other schema versions and unknown types."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as e:
        raise AlloclabError(f"malformed driver event: {line[:120]!r} ({e})",
                            "the driver and this alloclab may not match: rebuild the driver") from e
    if not isinstance(data, dict):
        raise AlloclabError(f"malformed driver event (not an object): {line[:120]!r}")
    v = data.get("v")
    if v != SCHEMA_VERSION:
        raise AlloclabError(f"driver event schema version {v!r}, this alloclab reads version {SCHEMA_VERSION}",
                            "rebuild the driver from this checkout (cargo build --release in driver/)")
    kind = data.get("type")
    if kind not in EVENT_TYPES:
        raise AlloclabError(f"unknown driver event type {kind!r}")
    return Event(kind, data)


class Channel:
    """An event channel in the driver's schema (SCHEMA_VERSION), written line by line by a client
    alloclab adapts (HammerDB) or runs itself (a server's life); threads may share it."""

    def __init__(self, path: Path | str):
        self.f = open(path, "a", buffering=1)
        self.t0 = time.monotonic()
        self._lock = threading.Lock()

    def emit(self, kind: str, **fields) -> None:
        line = json.dumps({"v": SCHEMA_VERSION, "type": kind, "t_s": time.monotonic() - self.t0, **fields})
        with self._lock:
            self.f.write(line + "\n")


def parse_lines(lines: Iterable[str]) -> Iterator[Event]:
    for line in lines:
        if line.strip():
            yield parse_line(line)


def decode_histogram(encoded: str) -> HdrHistogram:
    h = HdrHistogram.decode(encoded)
    if h is None:
        raise AlloclabError("cannot decode an HDR histogram from the driver's summary")
    return h


def merged_histogram(summary: dict) -> HdrHistogram | None:
    """All operation types of a summary in one histogram (None if there were no samples)."""
    merged = None
    for op in summary.get("ops", {}).values():
        h = decode_histogram(op["hist"])
        if merged is None:
            merged = h
        else:
            merged.add(h)
    return merged


def value_at_quantile(h: HdrHistogram, q: float) -> int:
    """The driver's definition (the Rust hdrhistogram crate's): the highest value equivalent
    to the first bucket where the running count reaches ceil(q * total). HdrHistogram_py
    rounds the target count instead, which can pick a neighbouring bucket; one histogram
    type must give one answer, so alloclab uses this everywhere."""
    total = h.get_total_count()
    if total == 0:
        return 0
    target = max(1, math.ceil(min(q, 1.0) * total))
    cumulative = np.cumsum(np.ctypeslib.as_array(h.counts)[: h.counts_len], dtype=np.uint64)
    index = int(np.searchsorted(cumulative, target, side="left"))
    value = h.get_value_from_index(index)
    return h.get_lowest_equivalent_value(value) if q == 0 else h.get_highest_equivalent_value(value)


def percentiles_ns(h: HdrHistogram | None) -> dict[str, float]:
    if h is None or h.get_total_count() == 0:
        return {k: 0 for k in ("p50_ns", "p95_ns", "p99_ns", "p999_ns", "max_ns", "mean_ns")}
    return {
        "p50_ns": value_at_quantile(h, 0.50),
        "p95_ns": value_at_quantile(h, 0.95),
        "p99_ns": value_at_quantile(h, 0.99),
        "p999_ns": value_at_quantile(h, 0.999),
        "max_ns": h.get_highest_equivalent_value(h.get_max_value()),
        "mean_ns": round(h.get_mean_value(), 1),
    }
