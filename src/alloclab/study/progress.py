"""What a person watching a study sees: the current run, runs done of the total, an ETA.

On a terminal one line updates in place; with --quiet or when output is not a terminal,
plain lines, one per finished run.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from alloclab.core.events import Event
from alloclab.core.units import fmt_duration, fmt_rate
from alloclab.plan import RunSpec, workload
from alloclab.results.store import RunRow


def describe(spec: RunSpec) -> str:
    c = spec.cell
    prof = "" if c.profile == "default" else f" ({c.profile})"
    prof += "" if c.shape == "default" else f" <{c.shape}>"
    what = workload.of(c.workload).describe(c)
    return f"{c.engine} {c.part} {what}{prof} [{spec.allocator.name}] r{spec.repeat}"


class Progress:
    def __init__(self, total: int, stream: TextIO = sys.stderr, live: bool | None = None):
        self.total = total
        self.stream = stream
        self.live = stream.isatty() if live is None else live
        self.done = 0
        self.t0 = time.monotonic()
        self.current: RunSpec | None = None
        self.rate = ""
        self._last_draw = 0.0

    def eta(self) -> str:
        if not self.done:
            return "?"
        per_run = (time.monotonic() - self.t0) / self.done
        return fmt_duration(per_run * (self.total - self.done))

    def start(self, spec: RunSpec) -> None:
        self.current = spec
        self.rate = ""
        self._draw(force=True)

    def event(self, ev: Event) -> None:
        if ev.type == "interval":
            ops = sum(o.get("ops", 0) for o in ev.data.get("ops", {}).values())
            self.rate = f"{fmt_rate(ops)} ops/s"
        elif ev.type == "phase" and ev.data.get("state") == "begin":
            self.rate = ev.data.get("phase", "")
        self._draw()

    def finish(self, spec: RunSpec, row: RunRow) -> None:
        self.done += 1
        if self.live:
            self.stream.write("\r\033[K")
        mark = {"ok": "ok", "failed": "FAILED", "invalid": "INVALID"}.get(row.status, row.status)
        if row.status == "ok":
            detail = workload.of(row.workload).outcome(row)
        else:
            detail = row.reason
        self.stream.write(f"[{self.done}/{self.total}] {mark:7s} {describe(spec)}: {detail}  ETA {self.eta()}\n")
        self.stream.flush()
        self.current = None

    def _draw(self, force: bool = False) -> None:
        if not self.live or self.current is None:
            return
        now = time.monotonic()
        if not force and now - self._last_draw < 0.2:
            return
        self._last_draw = now
        pct = 100 * self.done / max(self.total, 1)
        line = (f"[{self.done}/{self.total} {pct:3.0f}%] running {describe(self.current)}"
                f"{'  ' + self.rate if self.rate else ''}  ETA {self.eta()}")
        self.stream.write("\r\033[K" + line[:200])
        self.stream.flush()

    def message(self, text: str) -> None:
        if self.live:
            self.stream.write("\r\033[K")
        self.stream.write(text + "\n")
        self.stream.flush()
