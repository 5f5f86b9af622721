"""The fewest moved flows at a given max link load (HiGHS through scipy's milp): churn's
answer when the routes in force cannot be repaired by local moves.

Why: after a link failure on a loaded fat-tree the flows that lost their route, put back by
the greedy, can leave links one flow above the bound that no chain of moves lowers, while a
fresh plan meets it (``clos_churn``). A fresh plan is one of many optimal routings, chosen
without regard to the routes in force: on a k = 8 fat-tree with 1,120 flows it moved about
860 of them where about 30 moves reach the same max. This MILP asks for that max and, among
the routings that meet it, the one that keeps the most flows on their route in force.

Model: the path ILP's (``clos_ilp``): a binary per flow and usable option (plane, middle),
one option per flow, every hop cell at most ``floor(cap x alpha)`` flows (cap: alive
members x their capacity units); maximise the flows left on their option in force. A flow
kept keeps its members too; the others take the least loaded members (``ClosLoads.pick``).
The routing is checked against ``alpha`` on the fabric links before it is returned (with
faster links in bundles the cell's count is a relaxation).

Cost: a binary per usable option; exponential at worst, so churn runs it on instances of at
most ``clos_auto.LAYER2_MILP_OPTIONS`` options (``clos_auto.option_count``, counted before
anything is built) within a time limit (k = 8 fat-tree: 0.3 to
2 s here). HiGHS is C code that holds the thread for that time, as the layer-2 MILP inside
``clos_auto`` does.

>>> from controller.model.clos import Clos
>>> from controller.model.clospaths import ClosProblem
>>> from controller.model.jobs import Job
>>> from controller.planners.clos_auto import clos_auto
>>> f = Clos.fat_tree(4)
>>> p = ClosProblem.build(f, [Job("r", rings=[list(f.host_leaves)], ring_bytes=1)])
>>> r = fewest_moves(p, clos_auto(p), 1.0, 10.0)
>>> r.info["status"], r.info["kept"] == len(p)
('optimal', True)
"""
from __future__ import annotations

import time

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting
from controller.planners.clos_ilp_layer2 import path_options
from controller.planners.clos_loads import ClosLoads, empty_routing, score
from controller.planners.ilp import check_time_limit, run_milp


def fewest_moves(problem: ClosProblem, previous: ClosRouting, alpha: float,
                 time_limit: float, free=None) -> ClosRouting | None:
    """The routing of ``problem`` with max fabric-link load at most ``alpha`` that keeps the
    most flows of ``previous`` (the routes in force, ``inter`` order, plane -1 for none) on
    their option, found within ``time_limit`` seconds; None when HiGHS found none in time
    (or none exists). ``free``: a boolean per flow, the flows that may move (a
    neighbourhood of a failure: the others keep the option in force, a far smaller MILP);
    None: every flow. ``info``: status ("optimal": proven fewest), kept, wall_ms."""
    from scipy.sparse import coo_matrix
    check_time_limit(time_limit)
    t0 = time.perf_counter()
    L = problem.links
    cells = L.cells()
    alive = L.alive[cells.members]
    cap = alive.sum(axis=1) * L.units[np.where(alive, cells.members, 0)].max(axis=1, initial=0)
    flow, middle, plane, rows = path_options(problem)
    n = len(problem)
    if not n:
        return None
    home = (np.asarray(previous.plane)[flow] == plane) & (np.asarray(previous.middle)[flow] == middle)
    if free is not None:  # the others on their option in force (if they still have it)
        has = np.zeros(n, dtype=bool)
        has[flow[home]] = True
        keep = np.asarray(free, dtype=bool)[flow] | ~has[flow] | home
        flow, middle, plane, rows, home = flow[keep], middle[keep], plane[keep], rows[keep], \
            home[keep]
    nx = len(flow)
    used, inv = np.unique(rows[rows >= 0], return_inverse=True)
    var = np.repeat(np.arange(nx), 4)[(rows >= 0).ravel()]
    a = coo_matrix((np.ones(nx + len(var)), (np.concatenate([flow, n + inv]),
                                             np.concatenate([np.arange(nx), var]))),
                   shape=(n + len(used), nx)).tocsr()
    lb = np.concatenate([np.ones(n), np.zeros(len(used))])
    ub = np.concatenate([np.ones(n), np.floor(cap[used] * alpha + 1e-9)])
    res, status, _ = run_milp(-home.astype(float), a, lb, ub, np.ones(nx), np.zeros(nx),
                              np.ones(nx), time_limit, t0)
    if res.x is None:
        return None
    chosen = np.flatnonzero(res.x > 0.5)
    r = _routing(problem, previous, flow[chosen], plane[chosen], middle[chosen])
    if score(problem, r)[0] > alpha + 1e-9:
        return None
    kept = sum(q >= 0 for q in previous.plane) - len(moved_flows(r, previous))
    r.info.update(status=status, kept=kept, wall_ms=round((time.perf_counter() - t0) * 1e3, 3))
    return r


def neighbourhood(problem: ClosProblem, r: ClosRouting, previous: ClosRouting,
                  level: float) -> np.ndarray:
    """The flows ``fewest_moves`` may move after a local search left ``r``: those it moved
    from ``previous``, and those over a link that a moved flow left or took and that is at
    ``level`` or above in ``r`` (where room must be made). On the scale benchmark's k = 8
    fat-tree a failed core link gives about 300-600 of 1,120 flows: the MILP proves the
    fewest moves there in 0.06-1 s instead of 0.4-2 s on every flow. O(F x hops)."""
    moved = moved_flows(r, previous)
    loads = ClosLoads(problem, r)
    L = problem.links
    hot = loads.load[:L.count] >= level - 1e-9
    touched = {x for i in moved for x in (*previous.path[i], *r.path[i]) if x < L.count and hot[x]}
    free = np.zeros(len(problem), dtype=bool)
    free[moved] = True
    for i, path in enumerate(r.path):
        if not free[i] and not touched.isdisjoint(path):
            free[i] = True
    return free


def moved_flows(r: ClosRouting, previous: ClosRouting) -> list[int]:
    """The flows (``inter`` order) with a route in force in ``previous`` that ``r`` moves
    (member ids name the plane too)."""
    return [i for i, q in enumerate(previous.plane)
            if q >= 0 and tuple(r.path[i]) != tuple(previous.path[i])]


def _routing(problem: ClosProblem, previous: ClosRouting, flow, plane, middle) -> ClosRouting:
    """The chosen options as a routing: a flow on its option in force keeps its members
    (placed first), the others take the least loaded ones."""
    r = empty_routing(len(problem), {})
    loads = ClosLoads(problem)
    alive = problem.links.alive
    rest = []
    for i, q, m in zip(flow.tolist(), plane.tolist(), middle.tolist()):
        r.plane[i], r.middle[i] = q, m
        if previous.plane[i] == q and previous.middle[i] == m and previous.path[i] \
                and alive[list(previous.path[i])].all():
            r.path[i] = tuple(previous.path[i])
            loads.add(i, q, r.path[i])
        else:
            rest.append(i)
    for i in rest:
        r.path[i] = loads.pick(i, r.plane[i], r.middle[i])
        loads.add(i, r.plane[i], r.path[i])
    return r
