"""What this machine must have for a plan, checked before any work: plan validation reads only
the plan; the preflight reads the machine (the driver and its engines, link-time builds, server
targets, sysbench and HammerDB, the studies' stack, perf)."""

from __future__ import annotations

from pathlib import Path

from alloclab.alloc import allocators
from alloclab.catalog import targets
from alloclab.catalog.names import ENGINES, HAMMERDB
from alloclab.clients import driver, hammerdb, sysbench
from alloclab.core.errors import AlloclabError
from alloclab.plan import Plan
from alloclab.run import profiling
from alloclab.servers import stack
from alloclab.servers.server import check_reachable
from alloclab.servers.stack import check_available


def check_plan_against_driver(engines: list[str], info: dict) -> None:
    have = set(info.get("engines", {}))
    missing = [e for e in engines if e in ENGINES and e not in have]  # servers are not in the driver
    if missing:
        raise AlloclabError(f"the driver has no engine {', '.join(missing)}",
                            "rebuild the driver from this checkout: ./setup.sh")


def preflight(plan: Plan, progress) -> Path:
    """What this machine must have for the plan, checked before any work (plan validation reads
    only the plan): the driver and its engines, link-time builds, every server target and the
    sysbench binary, the studies' stack (built once, resumable), perf. Returns the driver."""
    plan.allocators = [allocators.checked(a) for a in plan.allocators]
    exe = driver.locate()
    check_plan_against_driver(plan.engines, driver.info(str(exe)))
    driver.check_links(plan.allocators)
    servers = [targets.parse(e) for e in plan.engines if e not in ENGINES]
    for t in servers:
        check_available(t)
        if t.kind == "postgres":  # its backends load the preload as the user postgres
            for a in plan.allocators:
                if a.path and not a.link:
                    check_reachable(Path(a.path), "postgres", "move the allocator where other users can pass: for "
                                    "the source-built ones ALLOCLAB_ALLOCATORS=/opt/alloclab/allocators, then "
                                    "alloclab setup allocators")
    if servers:
        sysbench.binary()
        why = driver.ensure_account()
        if why:  # the allocator's own account is then absent from the servers' rows, as it says there
            (progress.message if progress else print)(f"servers run without the allocator's own account: {why}")
    if any(c.client == HAMMERDB for c in plan.cells()):
        if not hammerdb.installed():  # on its first use, from ../shared/vendor (checked)
            hammerdb.install(notify=progress.message if progress else print)
        hammerdb.check_available()
    if any(t.stack for t in servers):
        stack.ensure([t.tidesql for t in servers if t.tidesql], notify=progress.message if progress else print)
        for t in servers:  # what the stack has is known once it is built
            if t.stack:
                check_available(t)
    _say_if_no_profiles(plan, progress)
    return exe


def _say_if_no_profiles(plan: Plan, progress) -> None:
    """--profile where perf cannot record: said once, then the study runs without profiled runs
    (none would record anything), and the plan keeps why for the report."""
    why = profiling.unavailable() if plan.perf else None
    if why:
        (progress.message if progress else print)(f"profiles are absent from this study: {why}")
        plan.perf, plan.perf_absent = False, why
