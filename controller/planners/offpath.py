"""Slow planning off the request path: auto's later stages, and its ILP in a child process.

The controller installs a layer-1 plan at once (``churn.replan(layer1_only=True)``, on other
Clos fabrics ``clos_churn.clos_replan(layer1_only=True)``: about the greedy's time) and then
asks for a better routing (``group_instance``: the group's instance with the stages of its
shape and objective; on Clos fabrics, and for the jobs objective on every fabric,
``planners.clos_offpath``: layer 2 and the one jobs search in a child process). On two tiers
by flow counts, ``plan_off_path``: the churn planner's stages from the routes in force
(layer-2 chains), in this process (the chains have a deadline); then, when layer 1 is not
proven and the ILP has a budget, ``auto`` with its ILP stage. HiGHS is C code that would
hold the controller's only OS thread (and with it OpenFlow echo replies) for the whole
budget, so it runs as ``python -m controller plan`` in a subprocess; under eventlet the wait
is cooperative.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import NamedTuple

from controller.errors import InputError
from controller.model.problem import Assignment, Problem
from controller.planners.churn import Moving, moved_why
from controller.planners.clos_offpath import (
    clos_better_paths,
    clos_instance,
    clos_off_path,
    instance_doc,
)

GRACE_S = 30.0  # start-up and output on top of the ILP budget
CLOS_TIMEOUT_S = 120.0  # a Clos group's off-path stages in their child (0.8 s at k = 8)
LOG = logging.getLogger("mlroute")


class OffPath(NamedTuple):
    """One auto group's instance to improve off the request path, with its shape's stages."""
    problem: object  # a two-tier ``Problem``, or a ``ClosProblem`` on other Clos fabrics
    current: dict  # its load summary now: ``max_link_load``, ``links_at_max``
    previous: object  # the routes in force, as ``plan`` reads them
    # (problem, previous, objective, ilp_time_limit) -> a better routing of the problem, as
    # the controller runs the stages (on Clos fabrics in a child process)
    plan: Callable
    # (problem, better, previous, objective) -> a ``churn.Moving`` (position -> parts, the
    # ranks, the moved flows, why), or None when ``better`` is not worth its moved flows
    paths: Callable
    # (problem, previous, objective) -> the stages in this process (what ``plan`` runs):
    # what the benchmarks time
    stages: Callable


def group_instance(fabric, jobs: list, routes: list, objective: str = "flows"
                   ) -> OffPath | None:
    """The instance of one auto group to improve off the path. ``fabric``: the fabric
    served; ``routes``: the routes in force per flow of ``jobs`` (Clos paths); ``objective``:
    the group's. On a single two-tier plane (``leaf_spine.fast_path``) by flow counts the
    two-tier problem, the routes in force as spine parts, ``plan_off_path`` and
    ``better_paths`` (layer 2 and the ILP of the two-tier ``auto``); by the jobs objective and
    on other Clos fabrics ``clos_offpath``'s (layer 2 and the one jobs search,
    ``clos_jobs``). None when a flow has no route or a split one: nothing to start from."""
    from controller.model.loads import load_summary
    from controller.planners.leaf_spine import fast_path, spine_parts
    two = fast_path(fabric)
    if two is None or objective == "jobs":
        found = clos_instance(fabric, jobs, routes)
        return None if found is None else OffPath(*found, clos_in_subprocess, clos_better_paths,
                                                  clos_off_path)
    problem = Problem.build(two, jobs, skip_unroutable=True)
    previous = [spine_parts(two, r) for r in routes]
    before = [previous[pos] for pos in problem.inter]
    if any(p is None or len(p) != 1 for p in before):
        return None
    return OffPath(problem, load_summary(problem, Assignment(before)), previous,
                   plan_off_path, better_paths, plan_off_path)


def clos_in_subprocess(problem, previous, objective: str = "flows",
                       ilp_time_limit: float = 0.0):
    """``clos_offpath.clos_off_path`` in a child process, as ``OffPath.plan`` on Clos fabrics
    (no ILP stage there: ``ilp_time_limit`` is not used): its search would hold the
    controller's thread for up to a second (``clos_offpath``). The routing of ``problem``
    with the child's ``info``; an InputError when the child fails or takes more than
    ``CLOS_TIMEOUT_S`` (``_child``)."""
    from controller.model.clospaths import ClosRouting
    got = _child(["controller.planners.clos_offpath", "{instance}"],
                 {"instance": instance_doc(problem, previous, objective)}, CLOS_TIMEOUT_S)
    return ClosRouting(got["plane"], got["middle"], [tuple(p) for p in got["path"]],
                       got["info"])


def _child(args: list[str], files: dict, timeout: float) -> dict:
    """``python -m`` ``args`` run from the repository with ``files`` (name -> JSON document)
    written to a temporary directory, ``{name}`` in ``args`` standing for its path; its
    standard output as JSON. The child dies with this process (``planners.child``). Under
    eventlet the wait is cooperative. An InputError when the
    child fails or takes more than ``timeout`` s."""
    with tempfile.TemporaryDirectory(prefix="mlroute-offpath-") as tmp:
        paths = {name: os.path.join(tmp, f"{name}.json") for name in files}
        for name, doc in files.items():
            with open(paths[name], "w") as fh:
                json.dump(doc, fh)
        cmd = [sys.executable, "-m", "controller.planners.child", str(os.getpid()),
               *(a.format(**paths) for a in args)]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, cwd=_repo(),
                                 timeout=timeout)
        except subprocess.TimeoutExpired:
            raise InputError(f"off-path planning did not finish within {timeout:g} s") from None
    if out.returncode != 0:
        raise InputError(f"off-path planning failed: {out.stderr.strip()[-300:]}")
    return json.loads(out.stdout)


def better_paths(problem: Problem, better: Assignment, previous: list, objective: str = "flows"
                 ) -> Moving | None:
    """``better`` (an off-path routing of ``problem``) renamed to keep as many flows in
    place as possible (``churn.align_spines``), as a ``churn.Moving`` (its ``paths``: flow
    position -> its new parts as Clos paths; the ranks, ``churn.plan_rank``; the moved flows
    counted once, for the rule and its sentence) when ``churn.moving_gain`` finds it worth
    moving running flows for on ``objective``; None when it is not. ``previous``: the routes
    in force as ``group_instance`` read them (spine parts per flow of ``problem.flows``, one
    part for every inter-leaf flow)."""
    from controller.planners.churn import align_spines, moving_gain, plan_rank
    from controller.planners.leaf_spine import path_parts
    two = problem.fabric
    old = [previous[pos][0][0] for pos in problem.inter]
    spines = align_spines(problem, better.spines(), old)
    # renaming interchangeable spines changes no prediction: the planner's own is reused
    rank_before = plan_rank(problem, old, objective)
    rank_after = plan_rank(problem, spines, objective, better.info.get("predicted_slowdown"))
    moved = sum(1 for a, b in zip(old, spines) if a != b)
    why = moved_why(moved, moving_gain(rank_before, rank_after, objective, moved))
    if why is None:
        return None
    return Moving({pos: path_parts(two, problem.flows[pos], ((s, 1.0),))
                   for pos, s in zip(problem.inter, spines)}, rank_before, rank_after, moved,
                  why)


def plan_off_path(problem: Problem, previous: list, objective: str = "flows",
                  ilp_time_limit: float = 0.0, ilp=None) -> Assignment:
    """The best routing the two-tier off-path stages find from ``previous`` (the routes in
    force, per flow of ``problem.flows``) by flow counts (``churn.plan_rank``; the jobs
    objective's stages are ``clos_offpath``'s on every fabric: ``group_instance``);
    ``info["off_path"]`` says which stage found it ("planning" or "ilp").
    ``ilp(problem, ilp_time_limit, objective)``: the ILP runner (default
    ``plan_in_subprocess``). ``objective``: the group's, flows (anything else is a
    ValueError, ``churn.replan``)."""
    from controller.planners.churn import plan_rank, replan, worth_moving
    best = replan(problem, previous, objective, ilp_time_limit=0)
    best.info["off_path"] = "planning"
    if ilp_time_limit > 0 and not best.info.get("optimal"):
        try:
            found = (ilp or plan_in_subprocess)(problem, ilp_time_limit, objective)
        except InputError as e:
            LOG.error("mlroute: off-path ILP failed: %s", e)
            return best
        if worth_moving(plan_rank(problem, best.spines(), objective),
                        plan_rank(problem, found.spines(), objective), objective):
            found.info["off_path"] = "ilp"
            return found
    return best


def plan_in_subprocess(problem: Problem, ilp_time_limit: float, objective: str = "flows"
                       ) -> Assignment:
    """``auto`` on ``problem`` with the ILP stage, in a child process; the unsplit routing
    aligned with ``problem.inter`` and auto's ``info``. Raises InputError on failure."""
    fabric = problem.fabric
    jobs = {"jobs": [j.to_dict() for j in problem.jobs]}
    for doc in jobs["jobs"]:
        for k in ("algorithm", "mode", "objective"):
            doc.pop(k, None)
    doc = _child(["controller", "plan", "--algorithm", "auto", "--objective", objective,
                  "--ilp-time-limit", str(ilp_time_limit), "--fabric", "{fabric}",
                  "--jobs", "{jobs}"], {"fabric": fabric.to_dict(), "jobs": jobs},
                 ilp_time_limit + GRACE_S)
    index = fabric.spine_index
    spines = [index[doc["routes"][pos]["spine"]] for pos in problem.inter]
    return Assignment.unsplit(spines, doc.get("info", {}))


def _repo() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
