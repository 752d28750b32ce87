#!/usr/bin/env python3
"""The replication store (not a test): the default studies run on each machine, kept in
bench/data/replication/<entry>/ (runs.csv, rounds.json, machine.json, plan.json; the report, the run
logs and the manifest left out), and what they predict for a new machine of their kind.

  python3 bench/replication.py add DIR [--name NAME]   a finished default study joins the store
  python3 bench/replication.py                          the store's prediction (alloclab compare)

A study joins as it is: any default study (the quick `kv-allocators` preset), decided or not, never
dropped or edited afterwards. An entry's name says its machine; a second study of one machine is
an entry of its own (NAME-2, ...). The prediction pools one entry per machine (its kernel's build
and its memory to the byte), the study of the most rounds of each, so that τ, the spread between
machines, is never read from two studies of one machine; the others are listed beside it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from _common import ROOT, arguments

STORE = ROOT / "bench" / "data" / "replication"
KEPT = ("runs.csv", "rounds.json", "machine.json", "plan.json")


def fingerprint(entry: Path) -> str:
    """A machine of the store: its kernel's build and its memory to the byte (the guests of one kind
    share CPU, cores and hostname; each guest's kernel reserve differs)."""
    m = json.loads((entry / "machine.json").read_text())
    return f"{m.get('kernel')}|{m.get('memory_bytes')}"


def rounds_of(entry: Path) -> int:
    return len(json.loads((entry / "rounds.json").read_text()).get("rounds") or [])


def add(study: Path, name: str) -> Path:
    plan = json.loads((study / "plan.json").read_text())
    if plan.get("preset") not in ("kv-allocators", None) or plan.get("scale") != "quick" or \
            plan.get("name") != "kv-allocators":
        sys.exit(f"{study}: not a default study (plan {plan.get('name')!r}, scale {plan.get('scale')!r}); "
                 "the store keeps the default study (alloclab run alone, or ./setup.sh demo)")
    if not (study / "rounds.json").is_file():
        sys.exit(f"{study}: no rounds.json: not a finished study")
    dest, n = STORE / name, 2
    while dest.exists():
        dest, n = STORE / f"{name}-{n}", n + 1
    dest.mkdir(parents=True)
    for f in KEPT:
        shutil.copy2(study / f, dest / f)
    return dest


def main() -> None:
    ap = arguments(__doc__)
    ap.add_argument("action", nargs="?", choices=["add", "predict"], default="predict")
    ap.add_argument("dir", nargs="?", help="add: the finished default study's folder")
    ap.add_argument("--name", help="add: the entry's name (default: the study folder's)")
    a = ap.parse_args()
    if a.action == "add":
        if not a.dir:
            sys.exit("add needs the study's folder: bench/replication.py add DIR")
        print(f"joined the store: {add(Path(a.dir), a.name or Path(a.dir).name)}")
        return
    entries = sorted(p for p in STORE.iterdir() if (p / "runs.csv").is_file())
    best: dict[str, Path] = {}  # per machine, its study of the most measured rounds (the most precise)
    for e in entries:
        if fingerprint(e) not in best or rounds_of(e) > rounds_of(best[fingerprint(e)]):
            best[fingerprint(e)] = e
    pooled = sorted(best.values())
    print(f"{len(entries)} default studies in the store, {len(pooled)} machines: " + ", ".join(p.name for p in pooled)
          + "".join(f"; also {p.name} ({rounds_of(p)} rounds; its machine's study of more rounds is pooled)"
                    for p in entries if p not in pooled), flush=True)
    subprocess.run([sys.executable, "-m", "alloclab", "compare", *map(str, pooled)], cwd=ROOT,
                   env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}, check=False)


if __name__ == "__main__":
    main()
