"""A study: plan -> execute every run -> store each as it finishes. Resumable.

A finished run is in runs.csv (whatever its status) and is never run again. Anything else
under runs/ is a run that was cut short: `resume` removes it and runs it again.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from alloclab import driver, machine, servers
from alloclab.datasets import DatasetError, Datasets
from alloclab.errors import AlloclabError
from alloclab.execute import execute, failed_row
from alloclab.plan import ENGINES, Plan, RunSpec
from alloclab.progress import Progress
from alloclab.store import Store

DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


@dataclass
class StudyResult:
    out: Path
    total: int
    ok: int
    failed: int
    invalid: int


class Interrupted(Exception):
    """The user stopped the study (Ctrl-C or SIGTERM); finished runs are kept."""

    def __init__(self, out: Path, done: int, total: int):
        super().__init__(f"interrupted after {done} of {total} runs")
        self.out, self.done, self.total = out, done, total


def default_out(name: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"{stamp}-{name}"


def check_plan_against_driver(engines: list[str], info: dict) -> None:
    from alloclab.plan import ENGINES
    have = set(info.get("engines", {}))
    missing = [e for e in engines if e in ENGINES and e not in have]  # servers are not in the driver
    if missing:
        raise AlloclabError(f"the driver has no engine {', '.join(missing)}",
                            "rebuild the driver from this checkout: ./setup.sh")


def _scratch(scratch_root: Path | None) -> Path:
    parent = scratch_root or Path(os.environ.get("ALLOCLAB_SCRATCH", tempfile.gettempdir()))
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="alloclab-", dir=parent))


def run(plan: Plan, out: Path, progress: Progress | None = None, scratch_root: Path | None = None) -> StudyResult:
    exe = driver.locate()
    info = driver.info(str(exe))
    check_plan_against_driver(plan.engines, info)
    specs = plan.expand()
    os.umask(0o022)  # results are never world-writable
    scratch = _scratch(scratch_root)
    store = Store(out)
    plan_json = plan.to_json() | {"runs_in_order": [s.to_json() for s in specs], "scratch_dir": str(scratch)}
    store.create(plan_json, machine.describe(scratch, info))
    return _run_all(store, plan.name, specs, set(), exe, scratch, progress or Progress(len(specs)))


def resume(out: Path, progress: Progress | None = None, scratch_root: Path | None = None) -> StudyResult:
    """Finish a study that was cut short: keep finished runs, redo partial ones."""
    store = Store(out)
    if not (store.root / "plan.json").exists():
        raise AlloclabError(f"{out} holds no study (no plan.json)", "pass the folder `alloclab run` wrote")
    plan_json = store.read_json("plan.json")
    try:
        specs = [RunSpec.from_json(d) for d in plan_json["runs_in_order"]]
    except (KeyError, TypeError, ValueError) as e:
        raise AlloclabError(f"{out}/plan.json is damaged ({e})", "this folder cannot be resumed") from e
    exe = driver.locate()
    check_plan_against_driver(sorted({s.cell.engine for s in specs}), driver.info(str(exe)))
    missing = sorted({s.allocator.path for s in specs if s.allocator.path and not os.path.exists(s.allocator.path)})
    if missing:
        raise AlloclabError(f"allocator libraries of this study are gone: {', '.join(missing)}",
                            "reinstall them, then resume")
    os.umask(0o022)
    rows, dropped = store.rows_repaired()
    done = {r.run_id for r in rows}
    runs_dir = store.root / "runs"
    partial = [d for d in (runs_dir.iterdir() if runs_dir.exists() else []) if d.name not in done]
    for d in partial:
        shutil.rmtree(d)
    old = plan_json.get("scratch_dir")
    if old and Path(old).name.startswith("alloclab-"):
        shutil.rmtree(old, ignore_errors=True)
    store.write_manifest()
    scratch = _scratch(scratch_root)
    remaining = [s for s in specs if s.run_id not in done]
    progress = progress or Progress(len(remaining))
    progress.total = len(remaining)
    progress.message(f"resuming {out}: {len(done)} finished run(s) kept, {len(partial)} partial run(s) removed"
                     f"{f', {dropped} damaged line(s) of runs.csv dropped' if dropped else ''}; "
                     f"{len(remaining)} to run")
    result = _run_all(store, plan_json.get("name", "study"), remaining, done, exe, scratch, progress)
    # count every run of the study, not only this sitting's
    for r in rows:
        setattr(result, r.status, getattr(result, r.status, 0) + 1)
    result.total = len(specs)
    return result


def _run_all(store: Store, study: str, specs: list[RunSpec], done: set[str], exe: Path, scratch: Path,
             progress: Progress) -> StudyResult:
    counts = {"ok": 0, "failed": 0, "invalid": 0}
    datasets = Datasets(exe, scratch, store.root, notify=progress.message)
    golden = servers.Golden(scratch, store.root, exe, notify=progress.message)
    current: Path | None = None
    try:
        for spec in specs:
            progress.start(spec)
            current = store.run_dir(spec.run_id)
            if spec.cell.workload == "sysbench" or spec.cell.engine not in ENGINES:
                try:
                    data = golden.datadir(spec)
                except AlloclabError as e:
                    row = failed_row(spec, study, str(e))
                else:
                    row = servers.execute_server(spec, current, scratch, study, data, exe)
            else:
                try:
                    seed_data = datasets.pristine(spec)
                except DatasetError as e:
                    row = failed_row(spec, study, str(e))
                else:
                    row = execute(spec, current, scratch, exe, study, on_event=progress.event, seed_data=seed_data)
            store.append(row)
            current = None
            store.write_manifest()
            counts[row.status] = counts.get(row.status, 0) + 1
            progress.finish(spec, row)
    except KeyboardInterrupt:
        _discard(store, current)
        raise Interrupted(store.root, sum(counts.values()) + len(done), len(specs) + len(done)) from None
    except OSError as e:
        if e.errno not in DISK_FULL:
            raise
        _discard(store, current)
        raise AlloclabError(f"no space left for the results in {store.root} ({e.strerror}); the run in progress "
                            "was discarded, finished runs are kept",
                            f"free some space, then: alloclab run --resume {store.root}") from e
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return StudyResult(out=store.root, total=len(specs), ok=counts["ok"], failed=counts["failed"],
                       invalid=counts["invalid"])


def _discard(store: Store, run_dir: Path | None) -> None:
    """Remove a run that did not finish, and bring the manifest back in line."""
    if run_dir is not None:
        shutil.rmtree(run_dir, ignore_errors=True)
    try:
        store.write_manifest()
    except OSError:
        pass  # the disk may still be full: resume rebuilds the manifest
