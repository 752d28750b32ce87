"""Reading the driver's versioned JSON-lines events, and its encoded HDR histograms."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, Iterator

from hdrh.histogram import HdrHistogram

from alloclab.errors import AlloclabError

SCHEMA_VERSION = 1
EVENT_TYPES = {"start", "phase", "interval", "summary", "end"}


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


def percentiles_ns(h: HdrHistogram | None) -> dict[str, float]:
    if h is None or h.get_total_count() == 0:
        return {k: 0 for k in ("p50_ns", "p95_ns", "p99_ns", "p999_ns", "max_ns", "mean_ns")}
    return {
        "p50_ns": h.get_value_at_percentile(50),
        "p95_ns": h.get_value_at_percentile(95),
        "p99_ns": h.get_value_at_percentile(99),
        "p999_ns": h.get_value_at_percentile(99.9),
        "max_ns": h.get_max_value(),
        "mean_ns": round(h.get_mean_value(), 1),
    }
