"""Parsing sizes and durations the way a user writes them."""

from __future__ import annotations

import argparse
import re

from alloclab.core.errors import AlloclabError

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)(i?B?)?\s*$", re.I)
_DUR = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h)?\s*$", re.I)
# a compound duration, as fmt_duration writes it and as the report's "--budget 1h40m" asks for:
# units from the largest down, each at most once ("1h40m", "57m31s", "2m30s", "1h 5m")
_DUR_PARTS = re.compile(r"^\s*(?:([0-9]+(?:\.[0-9]+)?)\s*h)?\s*(?:([0-9]+(?:\.[0-9]+)?)\s*m(?!s))?"
                        r"\s*(?:([0-9]+(?:\.[0-9]+)?)\s*s)?\s*$", re.I)


def parse_size(value, key: str = "size") -> int:
    """64, "64MiB", "64M", "1.5GiB" -> bytes (binary multiples)."""
    if isinstance(value, bool):
        raise AlloclabError(f"{key}: expected a size, got {value!r}", "write e.g. 67108864 or \"64MiB\"")
    if isinstance(value, int):
        return value
    m = _SIZE.match(str(value))
    if not m:
        raise AlloclabError(f"{key}: {value!r} is not a size", "write e.g. 67108864 or \"64MiB\"")
    mult = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[m.group(2).upper()]
    return int(float(m.group(1)) * mult)


def parse_duration(value, key: str = "duration") -> float:
    """10, "10s", "500ms", "2m", "1h", "1h40m", "57m31s" -> seconds."""
    if isinstance(value, bool):
        raise AlloclabError(f"{key}: expected a duration, got {value!r}", "write e.g. 10, \"10s\" or \"2m\"")
    if isinstance(value, (int, float)):
        return float(value)
    m = _DUR.match(str(value))
    if not m:
        parts = _DUR_PARTS.match(str(value))
        if parts and any(parts.groups()):
            h, mi, sec = (float(x) if x else 0.0 for x in parts.groups())
            return h * 3600 + mi * 60 + sec
        raise AlloclabError(f"{key}: {value!r} is not a duration",
                            "write e.g. 10, \"10s\", \"500ms\", \"2m\" or \"1h40m\"")
    mult = {None: 1, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}[m.group(2).lower() if m.group(2) else None]
    return float(m.group(1)) * mult


def fmt_duration(s: float) -> str:
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def fmt_rate(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e3:
        return f"{x / 1e3:.1f}k"
    return f"{x:.0f}"


def fmt_latency(ns: float) -> str:
    """A latency as people read it: µs under 0.1 ms (a memtable read's p99 is not "0.00 ms")."""
    return f"{ns / 1e3:.1f} µs" if ns < 100_000 else f"{ns / 1e6:.2f} ms"


def csv_list(kind):
    """A flag's parser of a comma-separated list (of `int` or `str`), for argparse."""
    def parse(text: str):
        items = [t.strip() for t in text.split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError("expected a comma-separated list")
        if kind is int:
            try:
                return [int(t) for t in items]
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
        return items
    return parse
