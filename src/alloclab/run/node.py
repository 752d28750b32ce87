"""Where runs execute: a node. A node holds what its runs need that is worth keeping between
them (the driver it found, its scratch folder, the golden data it prepared) and executes one
run at a time from the run's serialisable description (a RunSpec), writing the run's files
into the folder it is given and returning its row. The study's own machine is a node; so is
every machine of a Ray cluster (fleet.py), each preparing and caching its own data."""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Callable

from alloclab.clients import driver
from alloclab.core import events
from alloclab.core.errors import AlloclabError
from alloclab.host import machine
from alloclab.host.machine import fingerprint
from alloclab.plan import RunSpec
from alloclab.results.store import RunRow
from alloclab.run import execute, golden, kinds
from alloclab.run.datasets import Datasets
from alloclab.run.execute import failed_row

SCRATCH = "alloclab-"  # every scratch folder alloclab makes: alloclab-[KIND-]HOST-PID-RANDOM


def make_scratch(parent: Path | None = None, kind: str = "") -> Path:
    """A node's own scratch folder under `parent` (default $ALLOCLAB_SCRATCH, else /tmp), mode
    0711: servers' own users (postgres) may pass, not list. Named after this host and process,
    so that the next one sweeps it away if this process dies without closing it (kill -9)."""
    parent = parent or Path(os.environ.get("ALLOCLAB_SCRATCH") or tempfile.gettempdir())
    parent.mkdir(parents=True, exist_ok=True)
    sweep_scratch(parent)
    d = Path(tempfile.mkdtemp(prefix=f"{SCRATCH}{kind}{socket.gethostname()}-{os.getpid()}-", dir=parent))
    os.chmod(d, 0o711)
    return d


def sweep_scratch(parent: Path) -> None:
    """Remove the scratch folders under `parent` whose process is gone: a study killed with -9, a
    lost Ray worker. Nothing measured is in them (a run's files are in its study's folder), only
    data copies. Only this host's (the scratch place may be shared), never a live process's."""
    mine = re.compile(rf"{re.escape(SCRATCH)}(?:[a-z]+-)?{re.escape(socket.gethostname())}-(\d+)-")
    for d in parent.glob(f"{SCRATCH}*"):
        m = mine.match(d.name)
        if m and d.is_dir() and not Path(f"/proc/{m.group(1)}").exists():
            shutil.rmtree(d, ignore_errors=True)


class Node:
    """One machine's executor of runs. `name` is empty on the study's own machine and the Ray
    node's id on a cluster; every row carries it and the machine's fingerprint."""

    def __init__(self, exe: Path, scratch: Path, study_root: Path, study: str, name: str = "",
                 notify: Callable[[str], None] | None = None):
        self.exe, self.scratch, self.study, self.name = exe, scratch, study, name
        self.described = machine.describe(scratch, driver.info(str(exe)))
        self.fingerprint = fingerprint(self.described)
        self.datasets = Datasets(exe, scratch, study_root, notify=notify)
        self.golden = golden.Golden(scratch, study_root, exe, notify=notify)

    def run(self, spec: RunSpec, run_dir: Path, on_event: Callable[[events.Event], None] | None = None,
            gate=None) -> RunRow:
        """Execute one run into `run_dir`; a run that cannot start is a failed row, never an exception
        (except Ctrl-C, a full disk, or a bug). `gate`: see interleave.py."""
        return replace(self._run(spec, run_dir, on_event, gate), node=self.name, machine_fingerprint=self.fingerprint)

    def _run(self, spec: RunSpec, run_dir: Path, on_event, gate) -> RunRow:
        kind = kinds.of(spec.cell)
        try:
            data = kind.data(spec, self)
        except AlloclabError as e:  # the runs needing that data fail with its reason
            return failed_row(spec, self.study, str(e))
        return execute.run(spec, run_dir, self, data, on_event=on_event, kind=kind, gate=gate)
