"""`alloclab run`'s flags as one plan dictionary: a preset, a plan file or the flags, with the
flags laid over it (validated later, as a whole, by plan.load). Each workload applies its own."""

from __future__ import annotations

import math

from alloclab.core.errors import AlloclabError
from alloclab.core.units import parse_duration
from alloclab.plan import presets, workload
from alloclab.plan.design import DEFAULT_MIN_RUNS
from alloclab.plan.schema import read_toml


def plan_dict(a) -> dict:
    """Preset, plan file or flags -> one plan dictionary (validated later, as a whole)."""
    planned = None  # the budget of a preset whose side_by_side_rounds the plan keeps: another budget scales them
    if a.plan:
        raw = read_toml(a.plan)
        if "preset" in raw:
            base = presets.preset(raw["preset"], raw.get("scale", a.scale or "quick"))
            planned = None if "side_by_side_rounds" in raw else base.get("budget")
            raw = {**base, **raw}
    elif a.preset or not a.workloads or not all(_table_of(w) for w in a.workloads):
        # no preset named: the default one (parts of it may be picked with --workloads)
        raw = presets.preset(a.preset or "kv-allocators", a.scale or "quick")
        planned = raw.get("budget")
    else:
        # workloads by name (write, tpcc, ...), and what a workload knows by other names
        # (sysbench's tests: oltp_read_only, ...)
        raw = {"name": "custom", "workloads": [_table_of(w) for w in a.workloads]}
        a.workloads = None
    if a.scale and "preset" not in raw:  # a plan file or flags: --scale applies to them too
        raw["scale"] = a.scale
    for key in ("engines", "allocators", "runs", "seed", "baseline", "name"):
        v = getattr(a, key)
        if v is not None:
            raw[key] = v
    if a.engines is not None and isinstance(raw.get("workloads"), list):
        # a preset's table for engines --engines leaves out goes; one for several keeps those chosen
        kept = []
        for w in raw["workloads"]:
            if isinstance(w, dict) and isinstance(w.get("engines"), list):
                w = {**w, "engines": [e for e in w["engines"] if e in a.engines]}
                if not w["engines"]:
                    continue
            kept.append(w)
        raw["workloads"] = kept or raw["workloads"]
    if a.warmup is not None:
        raw["warmup_s"] = a.warmup
    if a.slice is not None:  # how every cell is measured: in turns of this long, or (0) one after another
        raw["slice_s"] = a.slice
        raw.pop("side_by_side", None)
        raw.pop("side_by_side_rounds", None)
        if isinstance(raw.get("workloads"), list):
            raw["workloads"] = [{k: v for k, v in w.items() if k != "slice_s"} if isinstance(w, dict) else w
                                for w in raw["workloads"]]
    if a.turn_warmup is not None:
        raw["turn_warmup_s"] = a.turn_warmup
    if a.profile is not None:
        raw["perf"] = a.profile
    if a.ray is not None:
        raw["executor"], raw["ray_address"] = "ray", a.ray
    if a.runs is not None:  # exactly N runs: the preset's adaptive settings do not apply
        for k in ("budget", "min_runs", "max_rounds", "target_ci_pct", "looks"):
            raw.pop(k, None)
    else:
        _scale_lives(raw, planned, raw.get("budget") if a.budget is None else a.budget)
    for flag, key in (("target_ci", "target_ci_pct"), ("margin", "margin_pct"), ("budget", "budget"),
                      ("max_rounds", "max_rounds")):
        if getattr(a, flag) is not None:
            raw[key] = getattr(a, flag)
    for flag, key in (("server_cpus", "server_cpus"), ("client_cpus", "client_cpus"),
                      ("server_memory", "server_memory_bytes")):
        if getattr(a, flag) is not None:
            raw[key] = getattr(a, flag)
    wls = raw.get("workloads")
    if isinstance(wls, list):
        if a.workloads:
            wanted = set(a.workloads)
            keep = [w for w in wls if isinstance(w, dict) and {w.get("workload"), w.get("part")} & wanted]
            if not keep:
                names = sorted({str(w.get("part", w.get("workload"))) for w in wls if isinstance(w, dict)})
                raise AlloclabError(f"--workloads {','.join(a.workloads)} matches nothing in the plan",
                                    "allowed values: " + ", ".join(names + list(workload.names())))
            wls = keep
        for wl in workload.every():  # a workload's own flags need a table of that workload
            own = [f"--{f}" for f in wl.flags if getattr(a, f) is not None]
            if own and not any(_of(w) is wl for w in wls):
                raise AlloclabError(f"{', '.join(own)} only apply to {wl.title}, and this study has no "
                                    f"{wl.names[0]} workload", wl.flags_hint)
        new = []
        for w in wls:
            if isinstance(w, dict):
                w = dict(w)
                if a.threads:
                    w["threads"] = a.threads
                if a.batch:
                    w["batch"] = a.batch
                if a.duration is not None:
                    w.pop("ops", None)
                    w["duration_s"] = a.duration
                if a.ops is not None:
                    w.pop("duration_s", None)
                    w["ops"] = a.ops
                if a.client is not None:  # refused by the plan where no client applies
                    w["client"] = a.client
                if _of(w) is not None:
                    _of(w).apply_flags(a, w)
            new.append(w)
        raw["workloads"] = new
    return raw


def _scale_lives(raw: dict, planned, budget) -> None:
    """A preset whose lives run side by side in its first rounds (side_by_side_rounds) sets them for
    its own budget (`planned`): another budget (--budget, or a plan file's) scales them with it, so
    that more time buys more rounds of lives, not only of what goes on after them (memory-life
    quick: 5 rounds at 60 minutes, 9 at 1h48m, 3 at 36m); never fewer than min_runs, the rounds a
    comparison needs."""
    if not raw.get("side_by_side_rounds") or planned is None or budget is None:
        return
    raw["side_by_side_rounds"] = lives_rounds(raw["side_by_side_rounds"], parse_duration(planned, "budget"),
                                              parse_duration(budget, "--budget"), raw.get("min_runs", DEFAULT_MIN_RUNS))


def lives_rounds(rounds: int, planned_s: float, budget_s: float, min_runs: int = DEFAULT_MIN_RUNS) -> int:
    """The rounds of lives a budget of `budget_s` affords where `planned_s` affords `rounds`."""
    return max(min_runs, math.floor(rounds * budget_s / planned_s + 1e-9))


def lives_follow_budget(plan: dict) -> bool:
    """Whether a stored plan's lives ran the rounds its preset gives them at its budget (_scale_lives),
    so that a new study of that preset with a larger --budget runs more of them."""
    try:
        base = presets.preset(plan["preset"], plan.get("scale") or "quick")
        planned, budget = parse_duration(base["budget"]), parse_duration(plan["budget"])
    except (AlloclabError, KeyError, TypeError):
        return False
    side, least = base.get("side_by_side_rounds"), plan.get("design", {}).get("min_runs", DEFAULT_MIN_RUNS)
    return bool(side) and lives_rounds(side, planned, budget, least) == plan.get("side_by_side_rounds")


def _table_of(word: str) -> dict | None:
    """The [[workloads]] table a word of --workloads names (a workload, or a name a workload knows)."""
    return next((t for wl in workload.every() if (t := wl.table_of(word))), None)


def _of(w) -> workload.Workload | None:
    """The workload of a [[workloads]] table, None where it names none (the plan refuses it)."""
    name = w.get("workload") if isinstance(w, dict) else None
    return next((wl for wl in workload.every() if name in wl.names), None)
