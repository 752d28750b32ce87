"""A plan from a preset, a TOML file or flags: all three become the same dictionary, which `load`
checks key by key (unknown keys rejected, each message naming the key and the allowed values)
and turns into a `Plan`. Validation reads the plan alone, never the machine (that is the
preflight's, run.preflight)."""

from __future__ import annotations

import random
from pathlib import Path

from alloclab.alloc import allocators as alloc_mod
from alloclab.catalog import metrics as catalog_metrics
from alloclab.catalog import targets, tidesql
from alloclab.catalog.allocators import BY_NAME, DEFAULT_SET
from alloclab.catalog.names import (
    DEFAULT_ENGINES,
    ENGINES,
)
from alloclab.core.errors import AlloclabError
from alloclab.plan import design, workload
from alloclab.plan.cell import TURN_WARMUP_S
from alloclab.plan.presets import MIN_WINDOW_S
from alloclab.plan.schema import MAX_RUNS, TOP_SCHEMA, check_table
from alloclab.plan.spec import MIN_SLICE_S, Plan


def _in_unit(metric: str, v: float) -> float:
    """A plan's percent (or points) as a fraction; a metric compared as a difference in its own
    unit (creep, MiB a cycle) keeps that unit."""
    m = catalog_metrics.by_name().get(metric)
    return v / (m.said_scale if m is not None else 100)


def _check_slices(plan: Plan) -> None:
    """Turns (interleave.py) need alloclab's own client, which waits at a gate while the processes
    under test are stopped, and windows in seconds."""
    turns = [c for c in plan.cells() if plan.slice_of(c)]
    for t in sorted({plan.slice_of(c) for c in turns}):
        if t < MIN_SLICE_S:
            raise AlloclabError(f"slice_s: a turn of {t:g} s is shorter than {MIN_SLICE_S:g} s, where the "
                                "cost of handing over turns would show in the throughput",
                                f"use 0 (no turns) or at least {MIN_SLICE_S * 1000:g}ms")
    if turns and plan.executor == "ray":
        raise AlloclabError("slice_s: runs that take turns share one machine; a Ray cluster runs each run on a node "
                            "of its own", "leave out --ray, or set slice_s = 0 (--slice 0)")
    for c in turns:
        slice_s = plan.slice_of(c)
        client = workload.of(c.workload).external_client(c)
        if client:
            raise AlloclabError(f"slice_s: turns need alloclab's own client, which waits for its turn; the cell "
                                f"{c.key} is driven by {client}",
                                "set slice_s = 0 (--slice 0), or use client = native")
        if c.duration_s is None:
            raise AlloclabError(f"slice_s: turns cut a window in seconds; the cell {c.key} counts operations",
                                "give its workload duration_s (--duration), or set slice_s = 0 (--slice 0)")
        if slice_s > c.duration_s:
            raise AlloclabError(f"slice_s: a turn of {slice_s:g} s is longer than the {c.duration_s:g} s "
                                f"window of {c.key}", f"use a slice of at most {c.duration_s:g} s")


def _check_windows_fit(d: dict) -> None:
    """A measured window (with its warm-up) longer than the study's budget, or than a run's
    timeout, could never end as a measurement: refused before any work."""
    budget, timeout = d.get("budget"), d.get("run_timeout_s", Plan.run_timeout_s)
    for i, w in enumerate(d["workloads"]):
        if w.get("duration_s") is None:
            continue
        need = w["duration_s"] + w.get("rampup_s", d.get("warmup_s", 0.0))
        if budget is not None and need > budget:
            raise AlloclabError(f"workloads[{i}].duration_s: a run of {need:g} s (window and warm-up) does not fit the "
                                f"study's budget of {budget:g} s", "use a shorter --duration, or a larger --budget")
        if need > timeout:
            raise AlloclabError(f"workloads[{i}].duration_s: a run of {need:g} s (window and warm-up) is longer than "
                                f"run_timeout_s ({timeout:g} s), after which a run is stopped",
                                "use a shorter --duration, or raise run_timeout_s")


def _check_goals(d: dict) -> None:
    """decide_on without throughput leaves a workload that is not a life (no memory verdicts)
    nothing to decide: refused, naming it."""
    goals = d.get("decide_on")
    if not goals or "throughput" in goals:
        return
    for i, w in enumerate(d["workloads"]):
        if not workload.of(w["workload"]).metrics:
            raise AlloclabError(f"decide_on names only a life's memory metrics ({', '.join(goals)}), and "
                                f"workloads[{i}] ({w['workload']}) is not a life: its comparisons are on throughput",
                                "add \"throughput\" to decide_on, or leave decide_on out")


def load(raw: dict, found_allocators: dict | None = None, default_seed: int | None = None) -> Plan:
    """Validate a plan dictionary completely and build the Plan. Raises AlloclabError."""
    d = check_table("", raw, TOP_SCHEMA)
    if "workloads" not in d:
        raise AlloclabError("the plan has no workloads",
                            "add [[workloads]] tables, name a --preset, or pass --workloads")
    found = alloc_mod.discover() if found_allocators is None else found_allocators
    names = d.get("allocators") or [n for n in DEFAULT_SET if n in found]
    allocs = [alloc_mod.parse(n, found) for n in names]
    labels = [a.name for a in allocs]
    if len(set(labels)) != len(labels):
        raise AlloclabError(f"allocators: duplicate allocator in {labels}")
    baseline = d.get("baseline", design.fallback_baseline(labels))
    if baseline not in labels:
        raise AlloclabError(f"baseline: '{baseline}' is not among the plan's allocators",
                            "allowed values: " + ", ".join(labels))
    for i, w in enumerate(d["workloads"]):
        if "workload" not in w:
            raise AlloclabError(f"workloads[{i}]: missing key 'workload'",
                                "allowed values: " + ", ".join(workload.names()))
        if "ops" in w and "duration_s" in w:
            raise AlloclabError(f"workloads[{i}]: give either ops or duration_s, not both")
        plan_engines = d.get("engines", list(DEFAULT_ENGINES))
        alien = [e for e in w.get("engines", ()) if e not in plan_engines]
        if alien:
            raise AlloclabError(f"workloads[{i}].engines: {', '.join(alien)} is not among the plan's engines",
                                "allowed values: " + ", ".join(plan_engines))
        workload.check(i, w, w.get("engines") or plan_engines)
    alien = sorted({design.between_parts(k)[1] for k in d.get("between_studies_pct", {})} - set(labels)
                   - set(BY_NAME) - {design.OTHER})
    if alien:
        raise AlloclabError(f"between_studies_pct: {', '.join(alien)} is neither one of the plan's allocators nor "
                            "in the catalog", "allowed keys: " + ", ".join([*labels, design.OTHER]))
    if "between_studies_from" in d and not Path(d["between_studies_from"]).is_dir():
        raise AlloclabError(f"between_studies_from: {d['between_studies_from']} is not a folder",
                            "name a folder of stored studies (folders `alloclab run` wrote), or leave the key out")
    scale = d.get("scale", "quick")
    floor = d.get("min_window_s", MIN_WINDOW_S[scale])
    for i, w in enumerate(d["workloads"]):
        if "duration_s" in w and w["duration_s"] < floor:
            raise AlloclabError(
                f"workloads[{i}].duration_s: {w['duration_s']:g} s is shorter than the {floor:g} s floor of a measured "
                f"window at scale {scale} (shorter windows measure noise)",
                f"use --duration {floor:g}s or more, --scale smoke for a quick check, or set min_window_s")
    _check_windows_fit(d)
    engines_all = d.get("engines", list(DEFAULT_ENGINES))
    if "baseline_engine" in d and d["baseline_engine"] not in engines_all:
        raise AlloclabError(f"baseline_engine: '{d['baseline_engine']}' is not among the plan's engines",
                            "allowed values: " + ", ".join(engines_all))
    rounds_only = sorted({"target_ci_pct", "min_runs", "max_rounds", "looks"} & set(d))
    if "runs" in d and rounds_only:
        given = ", ".join(rounds_only)
        raise AlloclabError(f"runs = {d['runs']} fixes the number of runs; {given} only apply to a study that runs "
                            "rounds until it is decided", "drop runs (or --runs) for adaptive rounds, or drop " + given)
    _check_goals(d)
    if d.get("min_runs", 0) > d.get("max_rounds", design.DEFAULT_MAX_ROUNDS):
        raise AlloclabError(f"min_runs ({d['min_runs']}) is more than max_rounds "
                            f"({d.get('max_rounds', design.DEFAULT_MAX_ROUNDS)})", "raise max_rounds or lower min_runs")
    seed = d.get("seed", default_seed if default_seed is not None else random.SystemRandom().randrange(1 << 31))
    plan = Plan(
        name=d.get("name", d.get("preset", "study")),
        preset=d.get("preset"),
        scale=scale,
        seed=seed,
        runs=d.get("runs"),
        engines=d.get("engines", list(DEFAULT_ENGINES)),
        allocators=allocs,
        design=design.Design(
            questions=tuple(d.get("questions") or design.default_questions(labels, engines_all)),
            baseline=baseline, baseline_engine=d.get("baseline_engine", engines_all[0]),
            margin=d["margin_pct"] / 100 if "margin_pct" in d else design.DEFAULT_MARGIN,  # the plan's keys are %
            target_ci=d["target_ci_pct"] / 100 if "target_ci_pct" in d else design.DEFAULT_TARGET_CI,
            min_runs=d.get("min_runs", design.DEFAULT_MIN_RUNS),
            max_rounds=d.get("max_rounds", design.DEFAULT_MAX_ROUNDS), max_looks=d.get("looks", 0),
            adaptive="runs" not in d, profiles=tuple(d.get("profiles", {})),
            decide_on=tuple(d.get("decide_on", ())),
            # a metric compared as a difference in its own unit takes its margin and spread in that unit
            # (creep: MiB a cycle)
            margins=tuple(sorted((k, _in_unit(k, v)) for k, v in d.get("margins_pct", {}).items())),
            between=tuple(sorted((k, _in_unit(design.between_parts(k)[0], v))
                                 for k, v in d.get("between_studies_pct", {}).items())),
            between_from=d.get("between_studies_from", "")),
        workloads=d["workloads"],
        engine_options=d.get("engine_options", {}),
        profiles=d.get("profiles", {}),
        shapes=d.get("shapes", {}),
        server_cpus=d.get("server_cpus", ""),
        client_cpus=d.get("client_cpus", ""),
        server_memory_bytes=d.get("server_memory_bytes", 0),
        warmup_s=d.get("warmup_s", 0.0),
        interval_ms=d.get("interval_ms", 1000),
        run_timeout_s=d.get("run_timeout_s", 1800.0),
        hang_timeout_s=d.get("hang_timeout_s", 300.0),
        budget=d.get("budget"),
        min_window_s=floor,
        perf=d.get("perf", False),
        profile_runs=d.get("profile_runs", 2),
        warmup_round=d.get("warmup_round", False),
        slice_s=d.get("slice_s", 0.0),
        turn_warmup_s=d.get("turn_warmup_s", TURN_WARMUP_S),
        side_by_side=d.get("side_by_side", 1),
        side_by_side_rounds=d.get("side_by_side_rounds", 0),
        executor=d.get("executor", "ray" if d.get("ray_address") else "local"),
        ray_address=d.get("ray_address", ""),
    )
    _check_slices(plan)
    if plan.side_by_side > 1 and (plan.slice_s or plan.executor == "ray"):
        raise AlloclabError("side_by_side: runs side by side share one machine at the same time; turns (slice_s) "
                            "and a Ray cluster's nodes are other ways to run them",
                            "leave out side_by_side, or slice_s and --ray")
    if not (plan.beside() and len(plan.beside()) < len(plan.cells())):
        plan.side_by_side_rounds = 0  # no runs side by side, or nothing else to go on after them: every round as is
    if 0 < plan.side_by_side_rounds < plan.design.min_runs:
        raise AlloclabError(f"side_by_side_rounds: {plan.side_by_side_rounds} is fewer than min_runs "
                            f"({plan.design.min_runs}), the rounds a comparison needs before it is decided",
                            f"use at least {plan.design.min_runs}, or lower min_runs")
    # side by side, N at least the round's runs runs the whole round at once, every cell's together
    beside = {c.key for c in plan.beside()}
    plan.whole_round = (len(beside) > 1 and plan.side_by_side >= sum(n for (cell, _), n in plan.places().items()
                                                                      if cell in beside))
    servers = [e for e in plan.engines if e not in ENGINES]
    if servers:
        linked = [a.name for a in allocs if a.link]
        for e in servers:
            t = targets.parse(e)
            if linked:
                why = "a server loads the allocator it is started with (preload)"
                if t.tidesql:
                    why = tidesql.LINKED_IN_PLUGIN + "; preload is the only effective way for a plugin"
                raise AlloclabError(f"allocators {', '.join(linked)} are link-time builds of the embedded driver; "
                                    f"they do not apply to {e}: {why}",
                                    "use preloaded allocators (jemalloc, mimalloc, ...) for servers, or run "
                                    "@link allocators on tidesdb, rocksdb, sqlite in a separate study")
            defaults = {w.server_profile: {} for w in workload.every() if w.server_profile}
            for prof in plan.profiles or defaults:
                targets.load_profile(t, prof)
            for c in plan.cells():  # a workload's own profile (profile): one the server has
                if c.engine == e and c.profile != "default" and not plan.profiles:
                    targets.load_profile(t, c.profile)
    for i, w in enumerate(d["workloads"]):
        if "profile" in w and plan.profiles:
            raise AlloclabError(f"workloads[{i}].profile: the plan names its own profiles "
                                f"({', '.join(plan.profiles)}), which every workload runs in",
                                "leave out the workload's profile, or the plan's")
    # duplicate cells are an error here too
    n_runs = len(plan.cells()) * len(allocs) * (plan.runs or plan.design.max_rounds)
    if n_runs > MAX_RUNS:
        raise AlloclabError(f"the plan expands to {n_runs} runs, more than {MAX_RUNS}",
                            "split it into several studies, or use fewer parameters, allocators or repeats")
    return plan
