"""The ``auto`` name's function: ``clos_auto`` by flow counts, ``clos_jobs`` by the jobs'
predicted slowdowns (issue 60).

Why a module of its own: the jobs search starts from ``clos_auto``'s routing, so the choice
between the two objectives sits above both, and ``clos_auto`` imports nothing of the jobs
planner (before, it loaded ``clos_jobs`` lazily: a cycle the import graph did not show).
The registry's ``auto`` and ``jobs`` run this function; the controller's request path runs
``clos_auto``'s layer 1 for both objectives (``clos_churn``), the jobs search following off
the path (``clos_offpath``).

>>> from controller.model.clos import Clos
>>> from controller.model.clospaths import ClosProblem
>>> from controller.model.jobs import Job
>>> f = Clos.fat_tree(4)
>>> p = ClosProblem.build(f, [Job("r", rings=[["h0_0", "h2_0", "h4_0"]], ring_bytes=1e6)])
>>> "mean_slowdown" in auto_by_objective(p, objective="jobs").info   # the jobs planner's
True
>>> "mean_slowdown" in auto_by_objective(p).info                       # clos_auto's
False
"""
from __future__ import annotations

from controller.model.clospaths import ClosProblem, ClosRouting
from controller.planners.auto import check_options
from controller.planners.clos_auto import clos_auto
from controller.planners.clos_jobs import clos_jobs


def auto_by_objective(problem: ClosProblem, time_limit: float = 1.0, objective: str = "flows",
                      ilp_time_limit: float = 0.0, layer1_only: bool = False) -> ClosRouting:
    """``objective`` "flows": ``clos_auto`` (``time_limit``, ``ilp_time_limit``,
    ``layer1_only`` as it takes them; its job-aware tie-break but with ``layer1_only``);
    "jobs": ``clos_jobs`` (its two-tier kernel with the ILP stage within
    ``ilp_time_limit``), or with ``layer1_only`` ``clos_auto``'s layer 1,
    which the jobs search follows off the request path. An unknown objective or a negative
    limit is an InputError (``auto.check_options``)."""
    check_options(ilp_time_limit, objective)
    if objective == "jobs" and not layer1_only:
        return clos_jobs(problem, ilp_time_limit=ilp_time_limit)
    return clos_auto(problem, time_limit=time_limit, ilp_time_limit=ilp_time_limit,
                     layer1_only=layer1_only, tiebreak=not layer1_only)
