"""The greedy of Cohen et al. on any Clos fabric: every flow, in the paper's group order, on
the option (plane, middle, members) whose busiest link is least loaded.

On a single-plane two-tier fabric it makes the choices of ``planners.greedy`` up to its
tie-breaks (tests/test_clos.py compares the max link loads). ``improve`` is the local search
``clos_auto`` runs after any construction: a flow on a link at the maximum load moves to an
option whose busiest link stays below that maximum, until none can.

Cost: greedy O(F x P x middles x members) with numpy per flow; improve O(passes x F x ...).

>>> from controller.model.clos import Clos
>>> from controller.model.clospaths import ClosProblem, link_loads
>>> from controller.model.jobs import parse_job
>>> fab = Clos.fat_tree(4)
>>> hosts = list(fab.host_leaves)
>>> job = parse_job({"id": "r", "collective": "ring_allreduce", "ranks": hosts, "bytes": 1e6}, fab)
>>> p = ClosProblem.build(fab, [job])
>>> float(link_loads(p, clos_greedy(p)).max())
1.0
"""
from __future__ import annotations

import time

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting
from controller.planners.clos_loads import ClosLoads, empty_routing, group_order


def clos_greedy(problem: ClosProblem) -> ClosRouting:
    loads = ClosLoads(problem)
    r = empty_routing(len(problem), {"order": "groups, largest first"})
    for i in group_order(problem):
        place(loads, r, i)
    return r


def place(loads: ClosLoads, r: ClosRouting, i: int) -> bool:
    """Put flow i on its cheapest option; False (left unplaced) when it has none."""
    cost, q, m, path = loads.best(i)
    if not np.isfinite(cost):
        return False
    r.plane[i], r.middle[i], r.path[i] = q, m, path
    loads.add(i, q, path)
    return True


def improve(problem: ClosProblem, r: ClosRouting, deadline: float | None = None,
            max_passes: int = 50) -> ClosRouting:
    """Move flows off the most loaded links while that lowers the maximum or the number of
    links at it; stops at ``deadline`` (time.perf_counter) or after ``max_passes``."""
    loads = ClosLoads(problem)
    for i, path in enumerate(r.path):
        loads.add(i, r.plane[i], path)
    fab = np.zeros(problem.links.count + 1, dtype=bool)
    fab[:problem.links.count] = problem.links.tier > 0
    moves = 0
    for _ in range(max_passes):
        alpha = loads.fabric_max()
        if alpha <= 0:
            break
        hot = fab & (loads.load >= alpha - 1e-9) & np.isfinite(loads.load)
        moved = False
        for i, path in enumerate(r.path):
            if deadline is not None and time.perf_counter() > deadline:
                return _done(r, moves, "deadline")
            if not path or not hot[list(path)].any():
                continue
            loads.add(i, r.plane[i], path, -1.0)
            cost, q, m, new = loads.best(i)
            if cost < alpha - 1e-9 and new != path:
                r.plane[i], r.middle[i], r.path[i] = q, m, new
                loads.add(i, q, new)
                moves += 1
                moved = True
                hot = fab & (loads.load >= alpha - 1e-9) & np.isfinite(loads.load)
                if not hot.any():
                    break
            else:
                loads.add(i, r.plane[i], path)
        if not moved:
            break
    return _done(r, moves, "local optimum")


def _done(r: ClosRouting, moves: int, why: str) -> ClosRouting:
    r.info["improve"] = {"moves": moves, "stopped": why}
    return r
