"""Routes of one planner group on a single two-tier plane, by the two-tier planners (the fast
path, ``planners.leaf_spine``), in the controller's intent format: the counterpart of
``clos_routes.clos_route_parts``, so the service plans either shape by one call and builds no
planner instance of its own.

``auto`` re-plans from the routes in force (churn's layer 1: it moves only the flows that must
move or that lower the loads; its ILP and layer 2 run off the request path), every other name
plans afresh with its options. Parts come back as Clos paths (source leaf, spine, destination
leaf); None within a leaf; ``model.intent.UNROUTABLE`` where no alive spine serves the flow.
O(the planner's cost).

>>> from controller.model.clos import Clos
>>> from controller.model.jobs import Flow, Job
>>> two = Clos.leaf_spine(2, 2, 2).wire().as_leaf_spine()
>>> job = Job("j", explicit=[Flow("j", "h0_0", "h1_0", 1.0), Flow("j", "h0_0", "h0_1", 1.0)])
>>> parts, ms, info = leaf_spine_route_parts(two, [job], "auto", "flows", [None, None])
>>> parts[0][0][0][::2], parts[1], info["moved_flows"]
(('l0', 'l1'), None, 0)
"""
from __future__ import annotations

import time

from controller.model.fabric import Fabric
from controller.model.intent import UNROUTABLE
from controller.model.jobs import Job
from controller.model.problem import Problem
from controller.planners.churn import replan
from controller.planners.leaf_spine import flow_spine_parts, path_parts, spine_parts
from controller.planners.plan import run_planner


def leaf_spine_route_parts(two: Fabric, jobs: list[Job], algorithm: str, objective: str,
                           before: list, options: dict | None = None
                           ) -> tuple[list, float, dict]:
    """(per flow of ``jobs``, in order, its parts as Clos paths; the planner's milliseconds;
    its info, with ``split``: whether it cut a flow). ``before``: the routes in force per
    flow (Clos paths or spine indices; None: none yet), read by ``auto`` only; ``options``:
    the planner's (``plan.planner_options``), ignored by ``auto``."""
    problem = Problem.build(two, jobs, skip_unroutable=True)
    if algorithm == "auto":  # from the routes in force: move only what must or helps
        previous = [spine_parts(two, p) for p in before]
        t0 = time.perf_counter()
        assignment = replan(problem, previous, objective, ilp_time_limit=0, layer1_only=True)
        ms = (time.perf_counter() - t0) * 1e3
    else:
        assignment, ms = run_planner(problem, algorithm, **(options or {}))
    parts = flow_spine_parts(problem, assignment)
    for pos in problem.unroutable:
        parts[pos] = UNROUTABLE
    return ([path_parts(two, f, p) for f, p in zip(problem.flows, parts)], ms,
            {**assignment.info, "split": assignment.is_split()})
