"""A study: plan -> rounds of runs -> store each run as it finishes. Resumable.

A study runs in rounds. Each round runs every (cell, allocator) that still needs runs once, in
a fresh order drawn from the round's seed (rounds.json records each round: its seed and its
runs in order). A study with a fixed `runs` runs exactly that many rounds of everything; an
adaptive one (no `runs`) asks decide.active_units after every round which units still need
runs, and stops when none does, at max_rounds, or when its budget of wall time would be
exceeded by the next run. Wall time is counted over every sitting (rounds.json keeps it), so
`--resume DIR --budget LARGER` continues the same rounds.

A finished run is in runs.csv (whatever its status) and is never run again. Anything else
under runs/ is a run that was cut short: `resume` removes it and runs it again.
"""

from __future__ import annotations

import errno
import os
import shutil
import statistics
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from alloclab.answers import decide, metrics, spread, together
from alloclab.core.errors import AlloclabError
from alloclab.core.units import fmt_duration
from alloclab.plan import Plan, RunSpec
from alloclab.plan.design import Design, taken_looks
from alloclab.results.store import RunRow, Store, rounds_ran, write_json
from alloclab.study.fleet import Ray
from alloclab.study.local import Local
from alloclab.study.pace import extend_design, plan_design
from alloclab.study.progress import Progress

DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
ROUNDS = "rounds.json"


@dataclass
class StudyResult:
    out: Path
    total: int
    ok: int
    failed: int
    invalid: int
    rounds: int = 0
    stop: str = ""


class Interrupted(Exception):
    """The user stopped the study (Ctrl-C or SIGTERM); finished runs are kept."""

    def __init__(self, out: Path, done: int):
        super().__init__(f"interrupted after {done} finished run(s)")
        self.out, self.done = out, done


@dataclass
class Schedule:
    """rounds.json: the rounds as they were drawn, the wall time spent, why the study stopped."""

    rounds: list[dict] = field(default_factory=list)  # {round, seed, runs: [spec json], started_at}
    elapsed_s: float = 0.0
    sittings: list[dict] = field(default_factory=list)  # {started_at, budget_s[, machine_fingerprint, machine]}
    stop: dict | None = None  # {reason: decided|budget|planned|max_rounds|runs|side_by_side_rounds, text, at}
    design: dict | None = None  # {planned_rounds, looks, basis}: when an adaptive study looks

    @classmethod
    def load(cls, store: Store) -> Schedule | None:
        if not (store.root / ROUNDS).exists():
            return None
        d = store.read_json(ROUNDS)
        return cls(rounds=d.get("rounds", []), elapsed_s=float(d.get("elapsed_s", 0.0)),
                   sittings=d.get("sittings", []), stop=d.get("stop"), design=d.get("design"))

    def save(self, store: Store) -> None:
        write_json(store.root / ROUNDS, {"version": 1, "rounds": self.rounds, "elapsed_s": round(self.elapsed_s, 3),
                                         "sittings": self.sittings, "stop": self.stop, "design": self.design})

    def design_of(self, plan: Plan) -> Design:
        """The plan's design with the looks this schedule planned."""
        return Design.from_plan(plan.to_json(), {"design": self.design})

    def specs(self) -> list[RunSpec]:
        return [RunSpec.from_json(d) for r in self.rounds for d in r["runs"]]

    @property
    def budget_s(self) -> float | None:
        return self.sittings[-1].get("budget_s") if self.sittings else None


def default_out(name: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"{stamp}-{name}"


def _executor(plan: Plan, store: Store, progress: Progress, scratch_root: Path | None):
    if plan.executor == "ray":
        return Ray(plan, store, progress)
    return Local(plan, store, progress, scratch_root)


def run(plan: Plan, out: Path, progress: Progress | None = None, scratch_root: Path | None = None) -> StudyResult:
    progress = progress or Progress(0)
    os.umask(0o022)  # results are never world-writable
    store = Store(out)
    executor = _executor(plan, store, progress, scratch_root)
    try:
        described = executor.describe()
        floored, said = spread.floor(plan, described)
        plan = replace(plan, design=floored)
        if said:
            progress.message(said)
        store.create(plan.to_json() | {"scratch_dir": str(executor.scratch or "")}, described)
        sched = Schedule()
        sched.sittings.append(_sitting(plan, executor))
        sched.save(store)
    except BaseException:
        executor.close()
        raise
    return _run_rounds(store, plan, sched, [], executor, progress)


def resume(out: Path, progress: Progress | None = None, scratch_root: Path | None = None,
           budget: float | None = None, ray_address: str | None = None) -> StudyResult:
    """Finish a study that was cut short: keep finished runs, redo partial ones, then go on with
    the rounds (with a new budget of total wall time, if given)."""
    store = Store(out)
    if not (store.root / "plan.json").exists():
        raise AlloclabError(f"{out} holds no study (no plan.json)", "pass the folder `alloclab run` wrote")
    plan_json = store.read_json("plan.json")
    try:
        plan = Plan.from_json(plan_json)
    except (KeyError, TypeError, ValueError) as e:
        raise AlloclabError(f"{out}/plan.json is damaged ({e})", "this folder cannot be resumed") from e
    sched = Schedule.load(store) or _legacy_schedule(plan_json)
    try:
        specs = sched.specs()
    except (KeyError, TypeError, ValueError) as e:
        raise AlloclabError(f"{out}/{ROUNDS} is damaged ({e})", "this folder cannot be resumed") from e
    if budget is not None:
        if budget <= sched.elapsed_s:
            raise AlloclabError(f"--budget {fmt_duration(budget)} is already spent: this study has used "
                                f"{fmt_duration(sched.elapsed_s)}",
                                "give a larger --budget (it counts the whole study)")
        plan.budget = budget
    else:
        plan.budget = sched.budget_s if sched.sittings else plan.budget
    if ray_address is not None:  # the same study, finished on this cluster
        if plan.turns():
            raise AlloclabError("this study measures in turns (slice_s); runs that take turns share one machine, "
                                "and a Ray cluster runs each run on a node of its own",
                                f"resume it on this machine: alloclab run --resume {out}")
        plan.executor, plan.ray_address = "ray", ray_address
    progress = progress or Progress(0)
    missing = sorted({a.path for a in plan.allocators if a.path and not os.path.exists(a.path)})
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
    executor = _executor(plan, store, progress, scratch_root)
    if budget is not None and sched.design and plan.adaptive:
        sched.design = resumed_design(plan, sched, rows)
    sched.stop = None
    sched.sittings.append(_sitting(plan, executor))
    sched.save(store)
    store.write_manifest()
    left = sum(1 for s in specs if s.run_id not in done)
    progress.message(f"resuming {out}: {len(done)} finished run(s) kept, {len(partial)} partial run(s) removed"
                     f"{f', {dropped} damaged line(s) of runs.csv dropped' if dropped else ''}; "
                     f"{left} run(s) left in round {len(sched.rounds)}, then "
                     + ("the rounds go on until decided" if plan.adaptive else f"up to {plan.runs} round(s)"))
    return _run_rounds(store, plan, sched, rows, executor, progress)


def _sitting(plan: Plan, executor) -> dict:
    """A sitting's record: when it began, its budget, and on one machine the machine and alloclab
    it ran on (its rows' fingerprint), so that a report can say what differs between sittings (a
    study resumed after alloclab changed reads as two machines: host.machine.fingerprint)."""
    out = {"started_at": _now(), "budget_s": plan.budget}
    node = getattr(executor, "node", None)
    if node is not None:
        out |= {"machine_fingerprint": node.fingerprint, "machine": node.described}
    return out


def _legacy_schedule(plan_json: dict) -> Schedule:
    """A folder from before rounds.json: its runs_in_order, one round per repeat."""
    rounds: dict[int, list] = {}
    for d in plan_json.get("runs_in_order", []):
        rounds.setdefault(int(d["repeat"]), []).append(d)
    return Schedule(rounds=[{"round": r, "seed": None, "runs": rounds[r]} for r in sorted(rounds)])


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _estimate(spec: RunSpec, rows: list[RunRow]) -> float:
    """Expected wall time of a run: the median of this cell's earlier runs, else of the study's
    (0 before the first run)."""
    walls = [r.wall_s for r in rows if r.cell == spec.cell.key and r.wall_s > 0]
    walls = walls or [r.wall_s for r in rows if r.wall_s > 0]
    return statistics.median(walls) if walls else 0.0


def resumed_design(plan: Plan, sched: Schedule, rows: list[RunRow]) -> dict:
    """The looks of a study resumed with more budget (plan.budget): more rounds, at the pace of the
    runs that go on, as the report's forecast reckons it (answers.context.to_decide): those open at
    the level of the look to come (a resume looks once more, so a few decided may open again); the
    looks already taken stay."""
    done_rounds = rounds_ran(rows)
    kept = tuple(x for x in taken_looks(sched.design, sched.stop, len(sched.rounds)) if x <= done_rounds)
    measured = [r for r in rows if r.purpose == "measure"]
    ahead = replace(plan.design, looks=kept).ahead(done_rounds)
    return plan_design(plan, measured, sched.elapsed_s, done_rounds, kept,
                       pace=_open_pace(plan, measured, ahead, done_rounds + 1))


def _open_pace(plan: Plan, rows: list[RunRow], design: Design, rnd: int) -> float:
    """Seconds round `rnd` of the units still open (and their company) would take, each at its
    share of a round so far (together.unit_walls); 0 when none is open."""
    active, _ = decide.active_units(plan.units(), rows, design, plan.told())
    units = active & plan.in_round(rnd)
    if not units:
        return 0.0
    turns = plan.turns()
    return together.round_wall(units, together.unit_walls(rows, turns), plan.side_by_side, plan.whole_round, turns)


def _next_round(plan: Plan, sched: Schedule, rows: list[RunRow], progress: Progress) -> list[RunSpec] | None:
    """Draw the next round, or record why there is none and return None."""
    rnd = len(sched.rounds) + 1
    active, beside, more = None, set(), {}
    if not plan.adaptive:
        if rnd > (plan.runs or 0):
            sched.stop = {"reason": "runs", "text": f"all {plan.runs} round(s) ran", "at": _now()}
            return None
    else:
        measured = [r for r in rows if r.purpose == "measure"]
        if sched.design is None and rnd >= 2:  # the first round's pace plans the looks
            sched.design = plan_design(plan, measured, sched.elapsed_s, rnd - 1)
            progress.message(f"looks at the comparisons after round{'s' if len(sched.design['looks']) > 1 else ''} "
                             f"{', '.join(map(str, sched.design['looks']))} "
                             f"({sched.design['basis']})")
        elif sched.design is not None:
            grown = extend_design(plan, sched.design, measured, sched.elapsed_s, rnd - 1)
            if grown is not sched.design:
                sched.design = grown
                progress.message(f"the last look moves to round {grown['looks'][-1]} ({grown['basis']})")
        if sched.design and rnd > sched.design["planned_rounds"]:
            sched.stop = {"reason": "planned", "at": _now(),
                          "text": f"the {sched.design['planned_rounds']} planned round(s) ran "
                                  f"({sched.design['basis']})"}
            return None
        if rnd > plan.design.max_rounds:
            sched.stop = {"reason": "max_rounds", "text": f"max_rounds ({plan.design.max_rounds}) reached",
                          "at": _now()}
            return None
        active, why = decide.active_units(plan.units(), measured, sched.design_of(plan), plan.told())
        if active and not active & plan.in_round(rnd):
            sched.stop = {"reason": "side_by_side_rounds", "at": _now(),
                          "text": f"every comparison still open is of the runs side by side, which ran their "
                                  f"{plan.side_by_side_rounds} rounds (side_by_side_rounds)"}
            return None
        if not active:
            goals = plan.design.decide_on
            sched.stop = {"reason": "decided", "at": _now(),
                          "text": "every comparison " + (f"of {', '.join(map(metrics.words, goals))} " if goals else "")
                          + "is decided"}
            return None
        # side by side, the decided keep their cell's lives company, or the round's where the
        # whole round runs at once (together.company)
        # whole_round: every unit of the study runs while any is active (together.company); the
        # company of an open comparison's cell gives its places to more runs of it (in_their_places)
        side = {c.key for c in plan.beside()}
        if side:  # the runs side by side, not a workload's that take turns beside them
            units = [u for u in plan.units() if u[0] in side]
            beside = together.company(units, active & set(units), why, whole_round=plan.whole_round)
            more, beside = together.in_their_places(units, active, beside)
    # the decided ones' places an open unit took (in_their_places), as runs: a place is its cell's
    # runs_per_round (plan.places)
    places, allowed = plan.places(), plan.in_round(rnd)  # side_by_side_rounds: the lives' rounds are over
    more = {u: n * places[u] for u, n in more.items() if u in allowed}
    taken = sum(more.values())
    first = 1 + max((s.index for s in sched.specs()), default=0)
    specs = plan.round_specs(rnd, allowed if active is None else (active | beside) & allowed, first, more)
    sched.rounds.append({"round": rnd, "seed": plan.round_seed(rnd), "started_at": _now(),
                         "runs": [s.to_json() for s in specs]})
    n_units = len(plan.units())
    progress.message(f"round {rnd}: {len(specs)} run(s)"
                     + (f" ({len(active)} of {n_units} cell x allocator still undecided"
                        + (f", {taken} more run(s) of them in decided ones' places" if taken else "")
                        + (f", {len(beside)} decided beside them as company" if beside else "")
                        + ("; the runs side by side ran their rounds" if len(allowed) < n_units else "") + ")"
                        if active is not None else ""))
    return specs


def _run_rounds(store: Store, plan: Plan, sched: Schedule, rows: list[RunRow], executor,
                progress: Progress) -> StudyResult:
    rows = list(rows)
    done = {r.run_id for r in rows}
    t0, spent_before = time.monotonic(), sched.elapsed_s

    def elapsed() -> float:
        return spent_before + time.monotonic() - t0

    def may_start(spec: RunSpec) -> bool:
        """Whether the budget leaves room for this run (when not, the study stops: recorded)."""
        need = _estimate(spec, rows)
        if sched.stop is None and plan.budget is not None and elapsed() + need > plan.budget:
            sched.stop = {"reason": "budget", "at": _now(),
                          "text": f"the budget of {fmt_duration(plan.budget)} is spent "
                                  f"({fmt_duration(elapsed())} used; the next run needs about "
                                  f"{fmt_duration(need)})"}
        return sched.stop is None

    def finished(spec: RunSpec, row: RunRow) -> None:
        """A run is over (whatever its status): recorded at once, never run again."""
        store.append(row)
        rows.append(row)
        done.add(spec.run_id)
        sched.elapsed_s = elapsed()
        sched.save(store)
        store.write_manifest()
        progress.finish(spec, row)
        if row.status == "ok" and 0 < row.duration_s < plan.min_window_s:
            progress.message(f"  warning: the measured window was {row.duration_s:.2f} s, shorter than the "
                             f"{plan.min_window_s:g} s floor of scale {plan.scale}: give the cell a "
                             "duration (--duration) or more operations")

    try:
        while sched.stop is None:
            todo = [s for s in (RunSpec.from_json(d) for d in sched.rounds[-1]["runs"])
                    if s.run_id not in done] if sched.rounds else []
            if not todo:
                todo = _next_round(plan, sched, rows, progress)
                if todo is None:
                    break
                sched.save(store)
            progress.total = progress.done + len(todo)
            executor.run_round(todo, may_start, finished)
        sched.elapsed_s = elapsed()
        sched.save(store)
        store.write_manifest()
    except KeyboardInterrupt:
        sched.elapsed_s = elapsed()
        executor.abandon()
        _discard(store, sched)
        raise Interrupted(store.root, len(done)) from None
    except OSError as e:
        if e.errno not in DISK_FULL:
            raise
        executor.abandon()
        _discard(store, sched)
        raise AlloclabError(f"no space left for the results in {store.root} ({e.strerror}); the run in progress "
                            "was discarded, finished runs are kept",
                            f"free some space, then: alloclab run --resume {store.root}") from e
    finally:
        executor.close()
    total = {"ok": 0, "failed": 0, "invalid": 0}
    for r in rows:
        total[r.status] = total.get(r.status, 0) + 1
    return StudyResult(out=store.root, total=len(rows), ok=total["ok"], failed=total["failed"],
                       invalid=total["invalid"], rounds=rounds_ran(rows),
                       stop=(sched.stop or {}).get("text", ""))


def _discard(store: Store, sched: Schedule) -> None:
    """After the executor removed the runs that did not finish: bring the manifest back in line."""
    try:
        sched.save(store)
    except OSError:
        pass  # the disk may still be full: rounds.json stays as it was, which the manifest lists
    try:
        store.write_manifest()
    except OSError:
        pass  # the disk may still be full: resume rebuilds the manifest
