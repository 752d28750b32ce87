"""Run a study: rounds drawn from the plan, handed to an executor (this machine, or the nodes of
a Ray cluster), decided at planned looks, every finished run kept in the study's folder. The
workloads register here for every study (alloclab.workloads), on every node."""

import alloclab.workloads  # noqa: F401  (registers the workloads the runs ask for)
from alloclab.study.rounds import (
    Interrupted,
    StudyResult,
    default_out,
    extend_design,
    plan_design,
    resume,
    run,
)

__all__ = ["Interrupted", "StudyResult", "default_out", "extend_design", "plan_design", "resume", "run"]
