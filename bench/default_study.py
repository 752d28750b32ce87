#!/usr/bin/env python3
"""The default study, run N times from a clean results folder each (not a test): per run, the
wall time, rounds, the share of wall time inside measured windows, decided and undecided
comparisons per metric, and the half-width of each throughput interval.

    .venv/bin/python bench/default_study.py [--times 3] [-- extra alloclab run flags]
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def summarise(out: Path, wall: float) -> dict:
    rounds = json.loads((out / "rounds.json").read_text())
    with open(out / "runs.csv", newline="") as f:
        runs = list(csv.DictReader(f))
    measured = sum(float(r["duration_s"] or 0) for r in runs if r["status"] == "ok")
    verdicts = json.loads((out / "report" / "verdicts.json").read_text())
    verdicts = verdicts["verdicts"] if isinstance(verdicts, dict) else verdicts
    per_metric: dict[str, Counter] = {}
    widths = []
    for v in verdicts:
        if v.get("comparison", "allocators") != "allocators":
            continue
        per_metric.setdefault(v["metric"], Counter())[
            "undecided" if v["verdict"] == "undecided" else "decided"] += 1
        if v["metric"] == "throughput" and v["ci_low"] is not None:
            half = 100 * (float(v["ci_high"]) - float(v["ci_low"])) / 2
            widths.append((f"{v['workload']} t{v['threads']} {v['variant']}", v["verdict"], float(v["ratio"]), half))
    return {"wall_s": wall, "rounds": len(rounds["rounds"]), "stop": rounds.get("stop", ""),
            "measured_share": measured / wall if wall else 0.0, "runs": len(runs),
            "failed": sum(r["status"] != "ok" for r in runs), "metrics": per_metric, "widths": widths}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--times", type=int, default=3)
    ap.add_argument("--first", type=int, default=1, help="number of the first run (its seed is 1000 + number)")
    ap.add_argument("extra", nargs="*", help="flags passed to alloclab run (after --)")
    a = ap.parse_args()
    exe = str(ROOT / ".venv" / "bin" / "alloclab")
    decided_all = 0
    for i in range(a.first, a.first + a.times):
        out = Path(tempfile.mkdtemp(prefix="alloclab-default-")) / "res"
        t0 = time.monotonic()
        p = subprocess.run([exe, "run", "--out", str(out), "--seed", str(1000 + i), *a.extra],
                           capture_output=True, text=True)
        wall = time.monotonic() - t0
        if p.returncode not in (0, 1):
            print(f"run {i}: alloclab exited {p.returncode}: {p.stderr.strip()[-500:]}")
            return 1
        s = summarise(out, wall)
        tp = s["metrics"].get("throughput", Counter())
        decided_all += tp["undecided"] == 0 and tp["decided"] > 0
        print(f"run {i}: {out}")
        print(f"  wall {s['wall_s'] / 60:.1f} min, {s['rounds']} rounds, {s['runs']} runs ({s['failed']} failed), "
              f"{100 * s['measured_share']:.0f} % of wall time in measured windows; stop: {s['stop']}")
        for m, c in s["metrics"].items():
            print(f"  {m:12s} decided {c['decided']}, undecided {c['undecided']}")
        for name, verdict, ratio, half in s["widths"]:
            print(f"    throughput {name:40s} {verdict:10s} ratio {ratio:.3f}  95 % CI ±{half:.1f} %")
        ans = json.loads((out / "report" / "verdicts.json").read_text())
        print("  answer: " + ans["headline"])
        for line in ans["answers"]:
            print("    " + line)
    print(f"throughput question decided in {decided_all} of {a.times} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
