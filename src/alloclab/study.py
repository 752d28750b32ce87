"""A study: plan -> execute every run -> store each as it finishes."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from alloclab import driver, machine
from alloclab.datasets import DatasetError, Datasets
from alloclab.errors import AlloclabError
from alloclab.execute import execute, failed_row
from alloclab.plan import Plan
from alloclab.progress import Progress
from alloclab.store import Store


@dataclass
class StudyResult:
    out: Path
    total: int
    ok: int
    failed: int
    invalid: int


def default_out(name: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"{stamp}-{name}"


def check_plan_against_driver(plan: Plan, info: dict) -> None:
    have = set(info.get("engines", {}))
    missing = [e for e in plan.engines if e not in have]
    if missing:
        raise AlloclabError(f"the driver has no engine {', '.join(missing)}",
                            "rebuild the driver from this checkout: ./setup.sh")


def run(plan: Plan, out: Path, progress: Progress | None = None, scratch_root: Path | None = None) -> StudyResult:
    exe = driver.locate()
    info = driver.info(str(exe))
    check_plan_against_driver(plan, info)
    specs = plan.expand()
    scratch_parent = scratch_root or Path(os.environ.get("ALLOCLAB_SCRATCH", tempfile.gettempdir()))
    scratch_parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="alloclab-", dir=scratch_parent))
    store = Store(out)
    plan_json = plan.to_json() | {"runs_in_order": [s.to_json() for s in specs], "scratch_dir": str(scratch)}
    store.create(plan_json, machine.describe(scratch, info))
    progress = progress or Progress(len(specs))
    counts = {"ok": 0, "failed": 0, "invalid": 0}
    datasets = Datasets(exe, scratch, out, notify=progress.message)
    try:
        for spec in specs:
            progress.start(spec)
            try:
                seed_data = datasets.pristine(spec)
            except DatasetError as e:
                row = failed_row(spec, plan.name, str(e))
            else:
                row = execute(spec, store.run_dir(spec.run_id), scratch, exe, plan.name, on_event=progress.event,
                              seed_data=seed_data)
            store.append(row)
            store.write_manifest()
            counts[row.status] = counts.get(row.status, 0) + 1
            progress.finish(spec, row)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return StudyResult(out=out, total=len(specs), ok=counts["ok"], failed=counts["failed"], invalid=counts["invalid"])
