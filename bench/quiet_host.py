#!/usr/bin/env python3
"""An answer for a quiet host, replayed on stored results folders (not a test; issue 37, item 3).

For each folder and each allocator comparison on throughput:
  1. the looks replayed: at each look the study planned (plan.json's design with rounds.json's
     looks: Design.from_plan), on the rounds up to it, decide's rule at the design's per-look
     confidence and margin; the round at which the comparison is first decided
       plain      the paired log ratios as they are (what the study did: it should agree with it)
       adj@mean   adjusted for the measured state, read at the rounds' mean state: the same
                  question as plain with the state's share of the spread removed
       adj@quiet  adjusted for the measured state, read at the quiet state (the regression's
                  residuals plus its value there: dependence.ratio_at_state, interval on n - 2)
     Where a comparison is not decided within its stored rounds: the rounds a projection says it
     would need (stats.rounds_to_decide on the last look's spread), marked "~". Below 6 rounds
     there is no line: the adjusted columns are the plain one. The letter after an adjusted
     decision: the state it was adjusted for at that look (s: the other runs' speed, b: the busy
     share, =: no line yet, the plain ratio).
  2. the ratio at the average and at the quiet state, the slope, and whether the dependence is
     the baseline's (each allocator's own speed against the state: causes.own_slopes);
  3. across the two replication machines (the first two folders): per comparison, the second's
     ratio ÷ the first's with its 95 % interval (answers.replicate.ratio_of_ratios) for the
     averages and for the adjusted ratios. (The first ÷ the second is its reciprocal.)

    .venv/bin/python bench/quiet_host.py [FOLDER ...]

Without folders: tests/fixtures/replication/machine-a and machine-b, then tests/fixtures/study-v1.
Folders whose runs.csv is the same file as one already read are named and skipped.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import alloclab.workloads  # noqa: E402, F401  (registers the workloads, as every entry point does)
from alloclab.answers import causes, decide, dependence, stats  # noqa: E402
from alloclab.answers.metrics import THROUGHPUT  # noqa: E402
from alloclab.answers.replicate import ratio_of_ratios  # noqa: E402
from alloclab.plan.design import UNDECIDED, Design  # noqa: E402
from alloclab.results.store import Store, rounds_ran  # noqa: E402

DEFAULT_FOLDERS = (ROOT / "tests/fixtures/replication/machine-a", ROOT / "tests/fixtures/replication/machine-b",
                   ROOT / "tests/fixtures/study-v1")
PROJECTION_LIMIT = 1000


def load(folder: Path) -> tuple[list, Design]:
    """The folder's measured rows and its design, as the study decided (Design.from_plan)."""
    store = Store(folder)
    plan = json.loads((folder / "plan.json").read_text())
    rounds = json.loads((folder / "rounds.json").read_text()) if (folder / "rounds.json").exists() else None
    rows = [r for r in store.rows() if r.purpose == "measure"]
    return rows, Design.from_plan(plan, rounds)


def _label(f: dependence.Finding) -> str:
    c = dict(zip(decide.CELL_FIELDS, f.cell))
    return f"{c['engine']}/{c['part']}/t{c['threads']} {f.variant}"


def _pct(r: float | None) -> str:
    return "-" if r is None else f"{100 * (r - 1):+.1f}"


def _iv(x) -> str:
    return "-" if x is None else f"{_pct(x.ratio)} [{_pct(x.ci_low)}, {_pct(x.ci_high)}]"


def _word(x, design: Design) -> str:
    return UNDECIDED if x is None or x.ci_low is None else stats.verdict_word(x.ci_low, x.ci_high, True,
                                                                           design.margin)


def _points(rows: list, design: Design, f0: dependence.Finding) -> dependence.Finding | None:
    fs = dependence.findings(rows, design.baseline, design.margin, design.confidence)
    return next((f for f in fs if f.cell == f0.cell and f.variant == f0.variant), None)


def _verdict(rows: list, design: Design, f0: dependence.Finding) -> decide.Verdict | None:
    return next((v for v in decide.verdicts(rows, design, (THROUGHPUT,))
                 if causes.for_verdict([f0], v) is not None), None)


def replay(rows: list, design: Design, f0: dependence.Finding) -> dict[str, str]:
    """The round at which each way first decides the comparison, and its verdict there."""
    last = max(r.repeat for r in rows if r.cell == f0.cell_key and r.allocator == f0.variant)
    looks = [x for x in design.planned_looks if x <= last] or [last]
    out: dict[str, str] = {}
    final: dict[str, object] = {}
    for look in looks:
        upto = [r for r in rows if r.repeat <= look]
        v = _verdict(upto, design, f0)
        f = _points(upto, design, f0)
        ways = {"plain": v}
        for at in ("mean", "quiet"):
            a = _at(f, at, design.confidence)
            ways[f"adj@{at}"] = a if a is not None else v
        for way, x in ways.items():
            if way in out:
                continue
            final[way] = x
            word = v.verdict if way == "plain" and v is not None else _word(x, design)
            if word != UNDECIDED:
                out[way] = f"{look} {word}" + ("" if way == "plain" else f" {_state(f)[0]}")
    for way, x in final.items():
        if way not in out:
            out[way] = _projection(x, design)
    return out


def _projection(x, design: Design) -> str:
    """'~N' rounds in all that a projection needs, from the last look's spread."""
    if x is None or x.mean_log is None or x.se_log is None:
        return "never?"
    n = x.n_pairs if isinstance(x, decide.Verdict) else x.n
    more = stats.rounds_to_decide(x.mean_log, x.se_log * math.sqrt(n), n, confidence=design.confidence,
                                  margin=design.margin, limit=PROJECTION_LIMIT)
    return "never?" if more is None else f"~{n + more}" + ("+" if more >= PROJECTION_LIMIT else "")


def folder_table(name: str, rows: list, design: Design) -> dict:
    """Print the folder's table; return its findings by (cell, variant) for the replication."""
    fs = dependence.findings(rows, design.baseline, design.margin)
    own = causes.own_slopes(rows, design.baseline)
    rounds = rounds_ran(rows)
    looks = f"looks {list(design.planned_looks)}" if design.adaptive else "one look at the end"
    print(f"\n== {name}: {rounds} rounds, {looks}, margin ±{design.margin_pct:g} %, "
          f"per-look confidence {100 * design.confidence:.2f} %")
    print(f"{'comparison':34} {'n':>3} {'state':6} {'slope [95 %]':22} {'average % [95 %]':22} "
          f"{'at quiet % [95 %]':22} {'decided at: plain':18} {'adj@mean':15} {'adj@quiet':15}")
    for f in fs:
        s = f.slope
        sl = "-" if s is None else f"{s.slope:+.2f} [{s.ci_low:+.2f}, {s.ci_high:+.2f}]" + ("*" if s.depends else "")
        st = "-" if s is None else ("speed" if s.state == dependence.SPEED else "busy")
        q = dependence.at_quiet_state(f)
        r = replay(rows, design, f)
        print(f"{_label(f):34} {len(f.points):>3} {st:6} {sl:22} {_iv(f.average):22} {_iv(q):22} "
              f"{r['plain']:18} {r['adj@mean']:15} {r['adj@quiet']:15}")
    for o in own:
        parts = ", ".join(f"{a} {s.slope:+.2f} [{s.ci_low:+.2f}, {s.ci_high:+.2f}] (n {s.n})" if s else f"{a} -"
                          for a, s in o.slopes.items())
        extra = ""
        if o.pooled is not None:
            extra = f"; variants pooled {o.pooled.slope:+.2f}" + (f", Q p = {o.p:.3f}" if o.p is not None else "")
        if o.difference is not None:
            extra += f"; pooled − {o.baseline} {o.difference.slope:+.2f} [{o.difference.ci_low:+.2f}, " \
                     f"{o.difference.ci_high:+.2f}]"
        print(f"   own speed on the {o.state} ({o.cell_key}): {parts}{extra} -> {o.cause}")
    return {(f.cell, f.variant): f for f in fs}


def replication(a: dict, b: dict, names: tuple[str, str], margin: float) -> None:
    """Each comparison both folders make: the second's ratio ÷ the first's, average vs adjusted."""
    print(f"\n== replication: {names[1]} ÷ {names[0]} (ratio of ratios, 95 %; 1 = the machines agree; "
          f"the other way round is its reciprocal)")
    print(f"{'comparison':34} {'way':10} {'first % [95 %]':22} {'st':5} {'second % [95 %]':22} {'st':5} "
          f"{'ratio of ratios [95 %]':24} {'|log|':>6} outcome")
    for k in sorted(set(a) & set(b), key=lambda k: [str(x) for x in k]):
        fa, fb = a[k], b[k]
        ways = {"average": (fa.average, fb.average)}
        for at in ("mean", "quiet"):
            ways[f"adj@{at}"] = (_at(fa, at) or fa.average, _at(fb, at) or fb.average)
        for way, (xa, xb) in ways.items():
            rr = ratio_of_ratios(xa, xb, margin) if xa is not None and xb is not None else None
            rtxt = "-" if rr is None or rr.ci_low is None else f"{rr.ratio:.3f} [{rr.ci_low:.3f}, {rr.ci_high:.3f}]"
            dist = "-" if rr is None else f"{abs(math.log(rr.ratio)):.3f}"
            print(f"{_label(fa) if way == 'average' else '':34} {way:10} {_iv(xa):22} {_state(fa, way):5} "
                  f"{_iv(xb):22} {_state(fb, way):5} {rtxt:24} {dist:>6} {rr.outcome if rr else '-'}")


def _at(f: dependence.Finding | None, at: str, confidence: float = 0.95) -> dependence.RatioAtState | None:
    """A comparison's ratio adjusted for the measured state, read at the rounds' mean state
    (at="mean") or at their quiet state (at="quiet"); None where there is no line (< 6 rounds)."""
    if f is None or f.slope is None:
        return None
    xs = [x for x, _r in f.points]
    ys = [math.log(r) for _x, r in f.points]
    x0 = sum(xs) / len(xs) if at == "mean" else dependence.quiet_state_value(xs, f.slope.state)
    return dependence.ratio_at_state(ys, xs, x0, f.slope.state, confidence)


def _state(f: dependence.Finding | None, way: str = "") -> str:
    """The state a ratio was adjusted for: speed, busy, or =avg where there is no line."""
    if way == "average":
        return ""
    if f is None or f.slope is None:
        return "=avg"
    return "speed" if f.slope.state == dependence.SPEED else "busy"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="*", type=Path, default=list(DEFAULT_FOLDERS))
    args = ap.parse_args()
    seen: dict[str, str] = {}
    tables = []
    for folder in args.folders:
        digest = hashlib.sha256((folder / "runs.csv").read_bytes()).hexdigest()
        if digest in seen:
            print(f"\n== {folder}: the same runs.csv as {seen[digest]}, skipped")
            continue
        seen[digest] = str(folder)
        rows, design = load(folder)
        tables.append((str(folder), folder_table(str(folder), rows, design), design))
    if len(tables) >= 2:
        (na, ta, da), (nb, tb, _db) = tables[:2]
        replication(ta, tb, (na, nb), da.margin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
