#!/usr/bin/env python3
"""How many rounds a study needed (not a test): what a stored study would have decided had it
looked at its comparisons once, after round k, for every k, and how long it had run by then.

A single look needs no sequential correction: the rows of rounds 1..k, decided by
`answers.decide.verdicts` with the study's own design and one look at k (the plain 95 %), are
what a study of that many rounds and the same runs would have answered. So one long study gives
the decided comparisons against the budget, per metric of its `decide_on` (for a life study:
creep, given back, RSS over the engine's account, and speed), and the budget a bar needs.

    .venv/bin/python bench/rounds_curve.py RESULTS [--open K]

--open K also lists the comparisons still open after round K, with their intervals.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import alloclab.workloads  # noqa: E402,F401  (registers the workloads' own metrics)
from alloclab.answers import analyse, decide  # noqa: E402
from alloclab.answers.metrics import delta, delta_unit, words  # noqa: E402
from alloclab.core.units import fmt_duration  # noqa: E402
from alloclab.plan.design import UNDECIDED  # noqa: E402


def _when(r) -> float:
    """When a run ended, in seconds since the epoch (started_at + wall_s)."""
    return datetime.datetime.fromisoformat(r.started_at).timestamp() + r.wall_s


def curve(root: Path) -> tuple[list[str], list[tuple[int, float, dict[str, tuple[int, int]]]], dict]:
    """The metrics decided on, and per round k: the time by its end, and per metric (decided,
    asked) of the allocators' comparisons decided after a single look at k; the verdicts per k."""
    st = analyse.load(root)
    rows = [r for r in st.rows if r.started_at]
    start = min(datetime.datetime.fromisoformat(r.started_at).timestamp() for r in rows)
    names = list(st.design.decide_on) or ["throughput"]
    out, every = [], {}
    told = st.told()  # a life's throughput side by side: told, never decided on
    for k in range(2, max(r.repeat for r in rows) + 1):
        upto = [r for r in st.rows if r.repeat <= k]
        vs = [v for v in decide.verdicts(upto, dataclasses.replace(st.design, looks=(k,)))
              if v.comparison == "allocators" and v.metric in names and not decide.told_apart(v, told)]
        asked, done = Counter(v.metric for v in vs), Counter(v.metric for v in vs if v.verdict != UNDECIDED)
        out.append((k, max(_when(r) for r in upto) - start, {m: (done[m], asked[m]) for m in names}))
        every[k] = vs
    return names, out, every


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path)
    ap.add_argument("--open", type=int, default=0, help="list the comparisons still open after this round")
    a = ap.parse_args()
    names, out, every = curve(a.results)
    print("| after round | elapsed | " + " | ".join(words(m) for m in names) + " |")
    print("|---" * (2 + len(names)) + "|")
    for k, took, got in out:
        print(f"| {k} | {fmt_duration(took)} | " + " | ".join(f"{d} of {n}" for d, n in got.values()) + " |")
    if a.open:
        for v in every.get(a.open, []):
            if v.verdict == UNDECIDED and v.ci_low is not None:
                lo, hi, u = delta(v.metric, v.ci_low), delta(v.metric, v.ci_high), delta_unit(v.metric)
                print(f"open after {a.open}: {v.engine} {v.workload} {words(v.metric)} {v.variant}: "
                      f"{delta(v.metric, v.ratio):+.1f} [{lo:+.1f}, {hi:+.1f}] {u}")


if __name__ == "__main__":
    main()
