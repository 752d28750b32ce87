"""The executor of a study on its own machine."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from alloclab.host.processes import stop_groups
from alloclab.plan import Plan, RunSpec
from alloclab.results.store import Store
from alloclab.run import interleave, kinds
from alloclab.run.node import Node, make_scratch
from alloclab.run.preflight import preflight
from alloclab.servers.server import children
from alloclab.study.progress import Progress


class Local:
    """The executor of a study on its own machine: one node, one run at a time (a cell's runs of a
    round together where they take turns or run side by side, or the whole round's), in the
    round's order, its files written straight into the study's folder."""

    def __init__(self, plan: Plan, store: Store, progress: Progress, scratch_root: Path | None):
        exe = preflight(plan, progress)
        self.scratch = make_scratch(scratch_root)
        self.store, self.progress = store, progress
        self.node = Node(exe, self.scratch, store.root, plan.name, notify=progress.message)
        self.current: list[Path] = []  # the runs in progress (several when interleaved)

    def describe(self) -> dict:
        return self.node.described

    def run_round(self, todo: list[RunSpec], may_start, finished) -> None:
        for group in interleave.groups(todo):
            if not may_start(group[0]):
                return
            self.progress.start(group[0])
            self.current = [self.store.run_dir(s.run_id) for s in group]
            lock = threading.Lock()

            def on_event(ev, lock=lock):
                with lock:
                    self.progress.event(ev)

            if len(group) == 1 and not group[0].slice_s:
                rows = [self.node.run(group[0], self.current[0], on_event=self.progress.event)]
            elif not group[0].slice_s:  # side by side: each cell's data prepared once, then every run at once
                for first in {s.cell.key: s for s in reversed(group)}.values():
                    kinds.of(first.cell).data(first, self.node)
                rows = interleave.run_side_by_side(
                    group, lambda s: self.node.run(s, self.store.run_dir(s.run_id), on_event=on_event),
                    stop_all=lambda: stop_groups(children(os.getpid())[1:]))
            else:
                rows = interleave.run_group(
                    group, lambda s, m: self.node.run(s, self.store.run_dir(s.run_id), on_event=on_event, gate=m),
                    seed=group[0].seed)
                rows = interleave.with_drift(rows, [self.store.run_dir(s.run_id) for s in group])
            for spec, row in zip(group, rows):
                finished(spec, row)
            self.current = []

    def abandon(self) -> None:
        """Ctrl-C or a full disk: the runs in progress are removed (their process trees are already
        gone: the runner kills them before the exception leaves)."""
        for d in self.current:
            self.store.discard_unrecorded(d)
        self.current = []

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)
