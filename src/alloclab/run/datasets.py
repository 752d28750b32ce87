"""Data a run starts from. TPC-C is loaded once per (engine, warehouses, loaders, settings,
seed), kept pristine, and every run starts from a fresh copy of it, never from data an
earlier run changed. Loads run without any preload: they are not measured."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from pathlib import Path

from alloclab.alloc import environment
from alloclab.clients import driver
from alloclab.core import events
from alloclab.core.errors import AlloclabError
from alloclab.plan import RunSpec
from alloclab.results.store import write_json


class DatasetError(AlloclabError):
    """A dataset could not be prepared; the runs that need it fail with this reason."""


class Prepared:
    """Data prepared once and reused: a folder per key, marked complete beside it. A failure is
    remembered, so that the other runs needing that data fail at once with the same reason."""

    def __init__(self, root: Path):
        self.root = root
        self.failed: dict[str, str] = {}

    def get(self, key: str, prepare) -> Path:
        if key in self.failed:
            raise DatasetError(self.failed[key])
        path, marker = self.root / key, self.root / f"{key}.complete"
        if marker.exists():
            return path
        shutil.rmtree(path, ignore_errors=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            prepare(path)
        except AlloclabError as e:
            self.failed[key] = e.message
            raise DatasetError(e.message, e.hint) from e
        marker.write_text(key)
        return path


class Datasets:
    def __init__(self, exe: Path, scratch: Path, study_root: Path, notify=None):
        self.notify = notify or (lambda _text: None)
        self.exe = exe
        self.cache = Prepared(scratch / "pristine")
        self.study_root = study_root

    @staticmethod
    def key(spec: RunSpec) -> str:
        c = spec.cell
        ident = {"engine": c.engine, "warehouses": c.params.warehouses, "loaders": c.params.loaders,
                 "options": spec.engine_options, "seed": spec.study_seed}
        digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
        return f"tpcc-{c.engine}-w{c.params.warehouses}-{digest}"

    def pristine(self, spec: RunSpec) -> Path:
        """The pristine copy of its TPC-C warehouses this run starts from (loaded the first time)."""
        key = self.key(spec)
        return self.cache.get(key, lambda path: self._load(spec, key, path))

    def _load(self, spec: RunSpec, key: str, path: Path) -> None:
        c = spec.cell
        path.mkdir(parents=True)
        log_dir = self.study_root / "loads" / key
        log_dir.mkdir(parents=True, exist_ok=True)
        ev_path = log_dir / "events.jsonl"
        self.notify(f"loading {c.params.warehouses} TPC-C warehouse(s) into {c.engine} ({key}), unmeasured")
        argv = driver.load_argv(self.exe, spec, ev_path, db_path=path)
        t0 = time.monotonic()
        with open(log_dir / "driver.log", "wb") as log:
            try:
                p = subprocess.run(argv, env=environment.clean(), stdout=log, stderr=log, timeout=spec.timeout_s)
            except subprocess.TimeoutExpired:
                raise DatasetError(f"loading {key} ran past {spec.timeout_s:g}s") from None
        wall = time.monotonic() - t0
        end = {}
        try:
            for ev in events.parse_lines(ev_path.read_text().splitlines()):
                if ev.type == "phase" and ev.data.get("phase") == "load" and ev.data.get("state") == "end":
                    end = ev.data
        except (OSError, AlloclabError) as e:
            raise DatasetError(f"loading {key}: unreadable events ({e})") from e
        write_json(log_dir / "load.json", {"key": key, "engine": c.engine, "warehouses": c.params.warehouses,
                                           "loaders": c.params.loaders, "engine_options": spec.engine_options,
                                           "seed": spec.study_seed, "exit_code": p.returncode, "wall_s": wall,
                                           "load_s": end.get("duration_s"),
                                           "warehouses_per_min": end.get("warehouses_per_min")})
        if p.returncode != 0 or not end:
            tail = (log_dir / "driver.log").read_text(errors="replace").strip().splitlines()[-3:]
            raise DatasetError(f"loading {key} failed (exit {p.returncode}): {' | '.join(tail)}")
        self.notify(f"loaded {key} in {wall:.1f}s ({end.get('warehouses_per_min', 0):.1f} warehouses/min)")

    @staticmethod
    def copy_to(pristine: Path, db_path: Path) -> None:
        shutil.rmtree(db_path, ignore_errors=True)
        shutil.copytree(pristine, db_path)
