"""Analysis from stored files only: cells, their statistics, comparisons against the baseline
allocator, spreads, engine ratios and thread scaling (what deserves a warning: answers.cautions)."""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from alloclab.answers import causes, decide, dependence, stats, together
from alloclab.answers.decide import cell_of
from alloclab.answers.metrics import THROUGHPUT, Metric
from alloclab.answers.replicate import DIFFERS, Replication, key, replicate
from alloclab.host import machine
from alloclab.plan.design import Design
from alloclab.results.store import RunRow, Store, limit_checks, rounds_ran

NOISY_CV = 0.10  # a cell whose coefficient of variation is above this is flagged


@dataclass
class Study:
    root: Path
    rows: list[RunRow]
    plan: dict
    machine: dict
    schedule: dict = field(default_factory=dict)  # rounds.json: rounds, wall time, why it stopped
    # summaries per metric: each holds a bootstrap per cell, wanted by several tables
    _summaries: dict = field(default_factory=dict, repr=False)
    _verdicts: list | None = field(default=None, repr=False)
    _per_machine: dict | None = field(default=None, repr=False)
    _findings: list | None = field(default=None, repr=False)
    _own: list | None = field(default=None, repr=False)
    problems: set = field(default_factory=set)  # stored files that could not be read
    # profiled runs (perf) and runs counting the allocator's calls (uprobes): separate runs,
    # slowed by their instruments, never in `rows` and so never in the statistics
    aux: list[RunRow] = field(default_factory=list)
    # the lives that checked the limit the study found (alloclab limits): level ("at", "below") ->
    # (cell key, allocator) -> their rows, from the folders limits/<level>
    checks: dict = field(default_factory=dict)

    @property
    def design(self) -> Design:
        """How the study decided (plan.json's design, with the looks rounds.json took). A round the
        budget stopped before any of its runs began is not one: the last look is the last round run."""
        ran = rounds_ran(self.rows)
        sched = self.schedule
        if sched and ran and len(sched.get("rounds") or ()) > ran:
            sched = {**sched, "rounds": sched["rounds"][:ran]}
        return Design.from_plan(self.plan, sched)

    def verdicts(self) -> list[decide.Verdict]:
        """Every comparison the study asks, decided as the study decided while it ran. On machines
        that differ (a Ray cluster), a comparison whose machines disagree (answers.replicate) is
        answered per machine, never pooled; the others are pooled over the machines."""
        if self._verdicts is None:
            vs = decide.verdicts(self.rows, self.design)
            if self.machine.get("cpu_model"):  # rows from before fingerprints: the study's machine
                fp = machine.fingerprint(self.machine)
                vs = [v if v.machine_fingerprint else replace(v, machine_fingerprint=fp) for v in vs]
            differ = {r.key for r in self.between_machines() if r.outcome == DIFFERS}
            if differ:
                vs = [v for v in vs if key(v) not in differ] + [
                    v for per in self.per_machine().values() for v in per if key(v) in differ]
            self._verdicts = vs
        return self._verdicts

    def findings(self) -> list[dependence.Finding]:
        """Each allocator comparison's dependence on the host's state, and its drift."""
        if self._findings is None:
            self._findings = dependence.findings(self.rows, self.baseline, self.design.margin)
        return self._findings

    def own_slopes(self) -> list[causes.OwnSlopes]:
        """Per cell, each allocator's own speed against the host's state: whether the comparisons'
        dependence is one fact about the baseline (answers.causes)."""
        if self._own is None:
            self._own = causes.own_slopes(self.rows, self.baseline)
        return self._own

    def fingerprints(self) -> list[str]:
        """The machines whose runs count, by fingerprint."""
        return sorted({r.machine_fingerprint for r in self.valid() if r.machine_fingerprint})

    def machine_words(self, fingerprint: str) -> str:
        """A machine of this study in a few words (its fingerprint where nothing else is known): a
        cluster's node, or a sitting's machine on one machine, with the alloclab it ran (a sitting
        resumed after alloclab changed has a fingerprint of its own)."""
        for n in self.machine.get("nodes") or []:
            if n.get("machine_fingerprint") == fingerprint and n.get("machine"):
                return f"{machine.in_words(n['machine'])} ({fingerprint})"
        sat = [s["machine"] for s in (self.schedule or {}).get("sittings") or ()
               if s.get("machine_fingerprint") == fingerprint and s.get("machine")]
        if self.machine.get("cpu_model") and machine.fingerprint(self.machine) == fingerprint:
            sat.append(self.machine)  # the first sitting's, from before sittings recorded theirs
        return f"{machine.in_words_alloclab(sat[0])} ({fingerprint})" if sat else fingerprint

    def per_machine(self) -> dict[str, list[decide.Verdict]]:
        """Every comparison decided on each machine's runs alone (none where there is one machine)."""
        if self._per_machine is None:
            fps = self.fingerprints()
            self._per_machine = {} if len(fps) < 2 else {
                fp: [replace(v, machine=self.machine_words(fp)) for v in
                     decide.verdicts([r for r in self.rows if r.machine_fingerprint == fp], self.design)]
                for fp in fps}
        return self._per_machine

    def between_machines(self) -> list[Replication]:
        """Each comparison across the study's machines: replicates, differs or not known."""
        per = self.per_machine()
        return replicate(list(per.values()), self.design.margin) if per else []

    def where(self) -> str:
        """Where the answers hold: the machine(s) in a few words, and how the runs were measured."""
        nodes = [n.get("machine") or {} for n in self.machine.get("nodes") or []] or [self.machine]
        words = sorted({machine.in_words(n) for n in nodes})
        on = words[0] if len(words) == 1 else f"{len(words)} machines ({'; '.join(words)})"
        turn, own = self.turns_taken()
        side = self.side_by_side
        together = (f"a round's runs {side} at a time, side by side (a cell's together)" if self.whole_round
                    else f"a cell's runs {side} at a time, side by side")
        places = decide.places(self.rows)  # runs_per_round
        # per engine, or "engine (part)" where its parts differ (memory-life: MariaDB's one life beside two servers)
        more = {(r.engine, r.part): n for r in self.rows if (n := places.get(r.cell, 1)) > 1}
        parts = Counter(e for e, _ in {(r.engine, r.part) for r in self.rows})
        return f"{on}, " + (f"runs in turns of {turn:g} s" if turn else together if side > 1
                            else "runs one after another") + "".join(
            f", {n} runs of each allocator a round on {e if parts[e] == 1 else f'{e} ({p})'}"
            for (e, p), n in more.items()) + (
            f", the steady loads alone in turns of {own} s" if own else "") + (
            f" (the lives in round{f's 1–{n}' if n > 1 else ' 1'} only)" if (n := self.side_rounds()) else "")

    def turns_taken(self) -> tuple[float, str]:
        """How the measured runs took turns: (the turn every cell took, 0 for none; the workloads' own
        turns, as "0.5" or "0.5/3", taken beside runs side by side, "" for none). A study whose only
        cells took their workload's own turns took those."""
        turn = float(self.plan.get("slice_s") or 0)
        own = sorted(set(self.turns().values())) if not turn else []
        if own and self.side_by_side <= 1:
            return own[0], ""
        return turn, "/".join(f"{t:g}" for t in own)

    def on(self) -> str:
        """The machine(s) in the fewest words a headline can carry: CPU model and cores."""
        nodes = [n.get("machine") or {} for n in self.machine.get("nodes") or []] or [self.machine]
        words = sorted({machine.in_words(n).split(", kernel ")[0] for n in nodes})
        return words[0] if len(words) == 1 else f"{len(words)} machines"

    def _ran(self) -> dict[str, dict]:
        """cell key -> how its measured runs ran, as rounds.json recorded them: its engine, the
        turns it took (slice_s) and how many ran side by side."""
        out: dict[str, dict] = {}
        for rnd in self.schedule.get("rounds") or []:
            for s in rnd.get("runs") or []:
                if s.get("purpose", "measure") == "measure" and s.get("cell_key"):
                    out.setdefault(s["cell_key"], {"engine": (s.get("cell") or {}).get("engine", ""),
                                                   "slice_s": float(s.get("slice_s") or 0),
                                                   "side_by_side": int(s.get("side_by_side") or 1)})
        return out

    def side_cells(self) -> set[str]:  # the cells whose runs ran side by side (rounds.json)
        return {k for k, r in self._ran().items() if r["side_by_side"] > 1}

    def side_rounds(self) -> int:
        """The rounds the lives (side by side) ran in, where they ended before the others; else 0."""
        side = self.side_cells()
        lives, rest = ([r.repeat for r in self.rows if (r.cell in side) == s] for s in (True, False))
        return max(lives) if lives and rest and max(lives) < max(rest) else 0

    def turns(self) -> dict[str, float]:
        """cell key -> the turns its runs took, for the cells that took turns."""
        return {k: r["slice_s"] for k, r in self._ran().items() if r["slice_s"]}

    def told(self) -> frozenset[str]:
        """The cells whose throughput is told, never decided on (Plan.told): they ran side by side
        where the same engine's speed was measured in turns."""
        ran = self._ran()
        priced = {r["engine"] for r in ran.values() if r["slice_s"]}
        return frozenset(k for k, r in ran.items() if r["side_by_side"] > 1 and r["engine"] in priced)

    def unit_walls(self) -> dict:
        """(cell key, allocator) -> the time a round of it takes (together.unit_walls)."""
        return together.unit_walls(self.rows, self.turns())

    @property
    def baseline(self) -> str:
        return self.design.baseline

    @property
    def allocators(self) -> list[str]:
        names = [a["name"] for a in self.plan.get("allocators", [])]
        return names + sorted({r.allocator for r in self.rows} - set(names))

    @property
    def side_by_side(self) -> int:
        """How many runs of a round ran at once: the plan's side_by_side, at most a cell's
        allocators (3 allocators with side_by_side = 6 ran 3 at a time) times its runs of each in a
        round (runs_per_round), or where cells ran together (whole_round) at most the round's runs."""
        n, per_cell = int(self.plan.get("side_by_side") or 1), len(self.allocators) or 1
        ran = self._ran()
        if ran:  # what the rounds recorded: a study of only the cells that take turns ran none side by side
            n = min(n, max(r["side_by_side"] for r in ran.values()))
        places = decide.places(self.rows)
        if self.whole_round:
            return max(1, min(n, per_cell * sum(places.get(c, 1) for c in {r.cell for r in self.rows})))
        return max(1, min(n, per_cell * max(places.values(), default=1)))

    @property
    def whole_round(self) -> bool:
        """Whether a round's runs of every cell ran side by side together: Plan.whole_round, and in
        a plan stored before that key, what the runs' own clocks say (cells_overlapped)."""
        if int(self.plan.get("side_by_side") or 1) <= 1:
            return False
        return bool(self.plan["whole_round"]) if "whole_round" in self.plan else cells_overlapped(self.rows)

    @property
    def engines(self) -> list[str]:
        names = list(self.plan.get("engines", []))
        return names + sorted({r.engine for r in self.rows} - set(names))

    def valid(self) -> list[RunRow]:
        """Rows that count: finished, and the allocator proved."""
        return [r for r in self.rows if r.status == "ok" and r.allocator_verified]

    def rows_of(self, names: tuple[str, ...]) -> list[RunRow]:
        """The rows of a workload (by its names)."""
        return [r for r in self.rows if r.workload in names]

    def valid_of(self, names: tuple[str, ...]) -> list[RunRow]:
        """The valid rows of a workload (by its names)."""
        return [r for r in self.valid() if r.workload in names]

    def profiled(self, purpose: str = "profile") -> list[RunRow]:
        """The valid runs of a purpose other than measuring: "profile" or "calls"."""
        return [r for r in self.aux if r.purpose == purpose and r.status == "ok" and r.allocator_verified]

    def not_valid(self) -> list[RunRow]:
        return [r for r in self.rows if not (r.status == "ok" and r.allocator_verified)]

    def run_json(self, run_id: str) -> dict:
        """A finished run's run.json; a missing or damaged one is noted in `problems` (and so
        in the report's warnings) and reads as empty, so that the rest still reports."""
        p = self.root / "runs" / run_id / "run.json"
        try:
            return json.loads(p.read_text())
        except (OSError, json.JSONDecodeError) as e:
            self.problems.add(f"{p.relative_to(self.root)} cannot be read ({e.__class__.__name__}): its "
                              "per-transaction numbers and allocator proof are missing from this report; "
                              "alloclab verify names what changed")
            return {}

    def samples(self, run_id: str, name: str = "samples.csv") -> list[dict]:
        """A run's stored timeline: samples.csv, or another of its CSV files with t_s and rss_bytes
        (a pooled life's pool.csv)."""
        p = self.root / "runs" / run_id / name
        try:
            with open(p, newline="") as f:
                return list(csv.DictReader(f))
        except OSError as e:
            self.problems.add(f"{p.relative_to(self.root)} cannot be read ({e.__class__.__name__}): its RSS "
                              "timeline is missing from this report")
            return []


def load(root: Path) -> Study:
    s = Store(root)
    sched = s.read_json("rounds.json") if (Path(root) / "rounds.json").exists() else {}
    rows = s.rows()
    return Study(root=Path(root), rows=[r for r in rows if r.purpose == "measure"], plan=s.read_json("plan.json"),
                 machine=s.read_json("machine.json"), schedule=sched,
                 aux=[r for r in rows if r.purpose != "measure"], checks=limit_checks(Path(root)))


def sort_key(cell: tuple) -> tuple:
    """Cells in order: numbers as numbers, a workload's own keys after the shared fields."""
    return tuple(sort_key(x) if isinstance(x, tuple) else f"{x:012d}" if isinstance(x, int) else str(x)
                 for x in cell)


def by_cell(rows: list[RunRow], metric: str) -> dict[tuple, dict[str, list[float]]]:
    """cell -> allocator -> values of `metric` over the rounds, in run order (a round's more runs
    of a unit, together.in_their_places, as their mean: decide.per_round)."""
    got = decide.per_round(sorted(rows, key=lambda r: r.index), lambda r: float(r.value(metric)))
    out: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for c, by in got.items():
        for a, per in by.items():
            out[c][a] = list(per.values())
    return out


@dataclass(frozen=True)
class CellSummary:
    cell: tuple
    allocator: str
    metric: Metric
    values: tuple[float, ...]
    stats: stats.CellStats


def summaries(study: Study, metric: Metric) -> list[CellSummary]:
    if metric.column in study._summaries:
        return study._summaries[metric.column]
    out = []
    groups = by_cell(study.valid(), metric.column)
    for cell in sorted(groups, key=sort_key):
        for a in study.allocators:
            vals = groups[cell].get(a)
            if vals:
                out.append(CellSummary(cell, a, metric, tuple(vals), stats.describe(vals)))
    study._summaries[metric.column] = out
    return out


@dataclass(frozen=True)
class VsBaseline:
    cell: tuple
    allocator: str
    metric: Metric
    comparison: stats.Comparison | None  # None where the baseline has no valid run or a zero median


def cells_overlapped(rows: list[RunRow]) -> bool:
    """Whether runs of different cells of a round were up at the same time: in the first round
    with two cells, two of their runs shared more than half of the shorter one's wall time (a
    cell's groups one after another share at most the second of their clocks' rounding)."""
    rounds: dict[int, list[tuple[str, float, float]]] = defaultdict(list)
    for r in rows:
        if r.purpose == "measure" and r.wall_s > 0 and r.started_at:
            t = datetime.fromisoformat(r.started_at).timestamp()
            rounds[r.repeat].append((r.cell, t, t + r.wall_s))
    for rnd in sorted(rounds):
        runs = rounds[rnd]
        if len({c for c, _, _ in runs}) > 1:
            return any(min(e1, e2) - max(s1, s2) > 0.5 * min(e1 - s1, e2 - s2)
                       for c1, s1, e1 in runs for c2, s2, e2 in runs if c1 < c2)
    return False


def by_cell_rounds(rows: list[RunRow], metric: str) -> dict[tuple, dict[str, dict[int, float]]]:
    """cell -> allocator -> (round, node) -> value of `metric` (positive values only; decide.per_round)."""
    return decide.per_round(rows, lambda r: float(r.value(metric)) if float(r.value(metric)) > 0 else None)


def paired(study: Study, base: dict[int, float] | None, var: dict[int, float] | None,
           higher_is_better: bool) -> stats.Comparison | None:
    """variant/baseline paired by round, at the study's confidence, with its verdict word."""
    if not base or not var:
        return None
    iv, word = decide.ratio_verdict(base, var, higher_is_better, study.design)
    return stats.Comparison(iv.ratio, iv.ci_low, iv.ci_high, word, (iv.ratio - 1) * 100)


def comparisons(study: Study, metric: Metric) -> list[VsBaseline]:
    out = []
    groups = by_cell_rounds(study.valid(), metric.column)
    base = study.baseline
    for cell in sorted(groups, key=sort_key):
        b = groups[cell].get(base)
        for a in study.allocators:
            v = groups[cell].get(a)
            if a == base or not v:
                continue
            out.append(VsBaseline(cell, a, metric, paired(study, b, v, metric.higher_is_better)))
    return out


def spreads(study: Study, metric: Metric = THROUGHPUT) -> list[tuple[tuple, str, str, float]]:
    """Per cell: best allocator, worst allocator, best-to-worst spread in % (of the worst)."""
    out = []
    groups = by_cell(study.valid(), metric.column)
    for cell in sorted(groups, key=sort_key):
        medians = {a: stats.median(v) for a, v in groups[cell].items()}
        if len(medians) < 2 or min(medians.values()) <= 0:
            continue
        if not metric.higher_is_better:
            medians = {a: 1.0 / m for a, m in medians.items()}
        best, worst, pct = stats.spread_pct(medians)
        out.append((cell, best, worst, pct))
    return out


def profile_gains(study: Study, metric: Metric) -> list[tuple[tuple, str, str, str, stats.Comparison]]:
    """Each profile against the plan's first profile, same engine, workload cell and allocator."""
    names = list(study.plan.get("profiles") or {})
    if len(names) < 2:
        return []
    pi = decide.CELL.index("profile")
    groups = by_cell_rounds(study.valid(), metric.column)
    out = []
    for cell in sorted(groups, key=sort_key):
        if cell[pi] != names[0]:
            continue
        for other in names[1:]:
            ocell = cell[:pi] + (other,) + cell[pi + 1:]
            for a in study.allocators:
                c = paired(study, groups[cell].get(a), groups.get(ocell, {}).get(a), True)
                if c:
                    out.append((cell, a, other, names[0], c))
    return out


def engine_ratios(study: Study, metric: Metric = THROUGHPUT) -> list[tuple[tuple, str, str, str, stats.Comparison]]:
    """Each engine against the plan's baseline engine (the first unless named), same cell and allocator."""
    engines = study.engines
    if len(engines) < 2:
        return []
    ref = study.design.baseline_engine or engines[0]
    groups = by_cell_rounds(study.valid(), metric.column)
    out = []
    for cell in sorted(groups, key=sort_key):
        if cell[0] != ref:
            continue
        for other in [e for e in engines if e != ref]:
            ocell = (other, *cell[1:])
            if ocell not in groups:
                continue
            for a in study.allocators:
                c = paired(study, groups[cell].get(a), groups[ocell].get(a), True)
                if c:
                    out.append((cell[1:], a, other, ref, c))
    return out


def scalings(study: Study, metric: Metric = THROUGHPUT) -> list[tuple[tuple, str, stats.Scaling]]:
    """Thread sweeps (cells equal but for threads, two points or more) per allocator."""
    sweeps: dict[tuple, dict[str, dict[int, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for r in study.valid():
        key = cell_of(r)[:-1]
        sweeps[key][r.allocator][r.threads].append(float(r.value(metric.column)))
    out = []
    for key in sorted(sweeps, key=sort_key):
        for a in study.allocators:
            pts = sweeps[key].get(a)
            if pts and len(pts) >= 2:
                out.append((key, a, stats.scaling({t: stats.median(v) for t, v in pts.items()})))
    return out
