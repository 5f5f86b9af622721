"""Clos plans in the controller's intent format, and back.

The controller keeps a route per flow (``model.intent``): on a two-tier fabric a part names a
spine by index; on a Clos fabric (``model.clos``) a part names its switches, source leaf to
destination leaf, ``(("l0", "a0_1", "c1_0", "a2_1", "l5"), 1.0)``: readable in the state file
and in the views, and stable whatever the planner's internal numbering. On a fabric with
bundles the path is a ``model.intent.MemberPath``: it also names the member each hop takes.
``clos_route_parts`` plans jobs and returns those parts; ``installed_clos_plan`` rebuilds a
``Plan`` from parts in force (``plan.routing_of``), for loads and predictions. A flow that ``split`` cut gets
one part per (plane, middle) option, largest share first, ``((path, share), ...)`` as on a
two-tier fabric: each part is a sub-connection of its own source port (``rules.part_sport``);
parts of a share below ``MIN_SHARE`` are dropped.

>>> from controller.model.clos import Clos
>>> from controller.model.jobs import Flow, Job
>>> f = Clos.fat_tree(4, 2)
>>> job = Job("j", explicit=[Flow("j", "h0_0", "h4_0", 1.0), Flow("j", "h0_0", "h0_1", 1.0)])
>>> parts, _, _ = clos_route_parts(f, [job], "greedy")
>>> len(parts[0][0][0]), parts[1]  # across pods: 5 switches; within a leaf: no route
(5, None)
>>> installed_clos_plan(f, [(job, parts)]).to_dict()["max_link_load"]
1.0
"""
from __future__ import annotations

import time
from functools import partial

from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem, ClosRouting
from controller.model.intent import UNROUTABLE
from controller.model.jobs import Job
from controller.planners.clos_churn import clos_replan, previous_routes
from controller.planners.clos_split import ClosSplitRouting
from controller.planners.plan import Plan, part_path, routing_of
from controller.planners.registry import CLOS, clos_options, planner_for
from controller.planners.split import MAX_PARTS

CHURN = ("auto",)  # the planners that re-plan from the routes in force (``previous``)
# a split part below this share is not worth a sub-connection and its entries: the LP's slack
# leaves a few near 1e-9; the flow's other parts take it, in proportion
MIN_SHARE = 1e-6


def clos_route_parts(fabric: Clos, jobs: list[Job], algorithm: str, salt: int = 0,
                     pins=None, max_parts: int | None = MAX_PARTS, previous=None,
                     **options) -> tuple[list, float, list[int]]:
    """(parts per flow of ``jobs`` in order, planner ms, positions whose pin was dropped):
    ``((path, 1.0),)`` for a flow that leaves its leaf (``split``: one ``(path, share)`` per
    part), None for one that does not, ``()`` for one with no alive path. ``salt``: the ECMP
    planners' hash salt; ``pins``: per flow the plane it must stay in, -1 free
    (``ClosProblem.build``; a split flow's parts all stay there); ``max_parts``: split's
    bound on parts per flow (None: no bound); ``options`` (seed, time_limit): to the planners
    that take them. The planner is the registry's (``registry.planner_for``: an InputError
    names what it refuses). ``previous``: per flow its parts in force (or None); ``auto``
    then re-plans from them (``planners.clos_churn``: few moved flows), the others ignore it.
    """
    fn = planner_for(algorithm, CLOS)
    problem = ClosProblem.build(fabric, jobs, skip_unroutable=True, pins=pins)
    t0 = time.perf_counter()
    if not len(problem):
        routing = ClosRouting([], [], [])
    elif previous is not None and algorithm in CHURN:
        routing = clos_replan(problem, previous_routes(problem, previous))
    else:
        routing = fn(problem, **clos_options(algorithm, salt=salt, max_parts=max_parts,
                                             **options))
    ms = (time.perf_counter() - t0) * 1e3
    parts: list = [None] * len(problem.flows)
    for pos in problem.unroutable:
        parts[pos] = UNROUTABLE
    split = routing.parts if isinstance(routing, ClosSplitRouting) else None
    named = partial(part_path, problem)
    for i, pos in enumerate(problem.inter):
        kept = [x for x in split[i] if x[3] >= MIN_SHARE] if split is not None else []
        if len(kept) > 1:
            total = sum(w for *_, w in kept)
            parts[pos] = tuple((named(i, q, m, links), float(w) / total)
                               for q, m, links, w in kept)
        elif kept:
            parts[pos] = ((named(i, *kept[0][:3]), 1.0),)
        else:
            parts[pos] = ((named(i, routing.plane[i], routing.middle[i], routing.path[i]), 1.0),)
    return parts, ms, problem.unpinned


def installed_clos_plan(fabric: Clos, jobs_parts: list[tuple[Job, list]],
                        algorithm: str = "installed") -> Plan | None:
    """The plan of ``(job, parts per flow)`` pairs as routed now; flows without a route in
    force (none yet, or no alive path) are left out (``plan.routing_of``). None without flows
    to route."""
    jobs = [job for job, _ in jobs_parts]
    if not jobs:
        return None
    problem = ClosProblem.build(fabric, jobs, skip_unroutable=True)
    routing = routing_of(problem, [p for _, parts in jobs_parts for p in parts])
    return Plan(algorithm, problem, routing, 0.0)
