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
>>> parts, _, _, _ = clos_route_parts(f, [job], "greedy")
>>> len(parts[0][0][0]), parts[1]  # across pods: 5 switches; within a leaf: no route
(5, None)
>>> installed_clos_plan(f, [(job, parts)]).to_dict()["max_link_load"]
1.0
"""
from __future__ import annotations

import time
from functools import partial

import numpy as np

from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem, ClosRouting
from controller.model.intent import UNROUTABLE, MemberPath
from controller.model.jobs import Job
from controller.planners.clos_churn import clos_replan, previous_routes
from controller.planners.clos_split_routing import ClosSplitRouting
from controller.planners.plan import Plan, part_path, routing_of
from controller.planners.registry import clos_options, planner_for
from controller.planners.split import MAX_PARTS

CHURN = ("auto",)  # the planners that re-plan from the routes in force (``previous``)
# a split part below this share is not worth a sub-connection and its entries: the LP's slack
# leaves a few near 1e-9; the flow's other parts take it, in proportion
MIN_SHARE = 1e-6


def clos_route_parts(fabric: Clos, jobs: list[Job], algorithm: str, salt: int = 0,
                     pins=None, max_parts: int | None = MAX_PARTS, previous=None,
                     layer1_only: bool = False, **options) -> tuple[list, float, list[int], dict]:
    """(parts per flow of ``jobs`` in order, planner ms, positions whose pin was dropped, the
    planner's info):
    ``((path, 1.0),)`` for a flow that leaves its leaf (``split``: one ``(path, share)`` per
    part), None for one that does not, ``()`` for one with no alive path. ``salt``: the ECMP
    planners' hash salt; ``pins``: per flow the plane it must stay in, -1 free
    (``ClosProblem.build``; a split flow's parts all stay there); ``max_parts``: split's
    bound on parts per flow (None: no bound); ``options`` (seed, time_limit): to the planners
    that take them. The planner is the registry's (``registry.planner_for``: an InputError
    names what it refuses). ``previous``: per flow its parts in force (or None); ``auto``
    then re-plans from them (``planners.clos_churn``: few moved flows; ``layer1_only``: the
    request path's stage, its info's ``deferred`` saying whether the off-path stages may
    gain), the others ignore it.
    """
    fn = planner_for(algorithm)
    problem = ClosProblem.build(fabric, jobs, skip_unroutable=True, pins=pins)
    t0 = time.perf_counter()
    if not len(problem):
        routing = ClosRouting([], [], [])
    elif previous is not None and algorithm in CHURN:
        routing = clos_replan(problem, previous_routes(problem, previous),
                              layer1_only=layer1_only)
    else:
        routing = fn(problem, **clos_options(algorithm, salt=salt, max_parts=max_parts,
                                             **options))
    ms = (time.perf_counter() - t0) * 1e3
    parts: list = [None] * len(problem.flows)
    for pos in problem.unroutable:
        parts[pos] = UNROUTABLE
    if not isinstance(routing, ClosSplitRouting):
        for pos, path in zip(problem.inter, route_paths(problem, routing)):
            parts[pos] = ((path, 1.0),)
        return parts, ms, problem.unpinned, routing.info
    split, named = routing.parts, partial(part_path, problem)
    for i, pos in enumerate(problem.inter):
        kept = [x for x in split[i] if x[3] >= MIN_SHARE]
        if len(kept) > 1:
            total = sum(w for *_, w in kept)
            parts[pos] = tuple((named(i, q, m, links), float(w) / total)
                               for q, m, links, w in kept)
        elif kept:
            parts[pos] = ((named(i, *kept[0][:3]), 1.0),)
        else:
            parts[pos] = ((named(i, routing.plane[i], routing.middle[i], routing.path[i]), 1.0),)
    return parts, ms, problem.unpinned, routing.info


def route_paths(problem: ClosProblem, routing: ClosRouting) -> list[tuple]:
    """Every flow's route as ``plan.part_path`` names it, numpy per plane over the flows
    (the request path names every flow of a group: O(F), no call per flow), a
    ``MemberPath`` on a fabric with bundles; a flow without a plane as ``part_path`` does."""
    fab = problem.fabric
    plane = np.asarray(routing.plane, dtype=np.int64)
    middle = np.asarray(routing.middle, dtype=np.int64)
    out: list = [None] * len(problem)
    for q in range(len(fab.planes)):
        idx = np.flatnonzero(plane == q)
        leaves, aggs, cores, groups = fab.derived("clos_route_names", _name_tables)[q]
        a, b, p, r = (e[idx] for e in problem.end_arrays(q))
        m = middle[idx]
        j = np.flatnonzero(p != r)  # between pods: five switches, the core's group's aggs
        g = m.copy()
        g[j] = groups[m[j]]
        names = list(zip(*(c.tolist() for c in (leaves[a], aggs[p, g], leaves[b]))))
        five = (leaves[a[j]], aggs[p[j], g[j]], cores[m[j]], aggs[r[j], g[j]], leaves[b[j]])
        for k, t in zip(j.tolist(), zip(*(c.tolist() for c in five))):
            names[k] = t
        for i, t in zip(idx.tolist(), names):
            out[i] = t
    if fab.bundled:
        member = problem.links.member_of.tolist()
        out = [None if o is None else MemberPath(o, (member[x] for x in path))
               for o, path in zip(out, routing.path)]
    for i in (i for i, o in enumerate(out) if o is None):  # unplaced: as ``part_path``
        out[i] = part_path(problem, i, routing.plane[i], routing.middle[i], routing.path[i])
    return out


def _name_tables(fab: Clos) -> list[tuple[np.ndarray, ...]]:
    """Per plane its leaves, aggregation switches (pods, slots), cores and their groups as
    arrays for ``route_paths``; once per fabric (names do not change with failures)."""
    out = []
    for plane in fab.planes:
        width = max(len(a) for a in plane.aggs)
        aggs = np.array([list(a) + [""] * (width - len(a)) for a in plane.aggs], dtype=object)
        cores = [c for grp in plane.cores for c in grp]
        groups = np.array([x for x, grp in enumerate(plane.cores) for _ in grp], dtype=np.int64)
        out.append((np.array(plane.leaves, dtype=object), aggs, np.array(cores, dtype=object),
                    groups))
    return out


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
