"""The greedy of Cohen et al. on any Clos fabric: every flow, in the paper's group order, on
the option (plane, middle, members) whose busiest link is least loaded.

On a single-plane two-tier fabric it makes the choices of ``planners.greedy`` up to its
tie-breaks (tests/test_clos.py compares the max link loads). ``improve`` is the local search
``clos_auto`` runs after any construction: a flow on a link at the maximum load moves to an
option whose busiest link stays below that maximum, until none can. ``place_all`` is the
greedy's rule on top of loads already there (``planners.clos_churn``: the flows kept).

Cost: greedy O(F x P x middles) numpy, a few calls per flow and plane (``ClosLoads``);
improve O(passes x F x P x middles).

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

import math
import time

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting
from controller.planners.clos_loads import ClosLoads, empty_routing, group_order


def clos_greedy(problem: ClosProblem) -> ClosRouting:
    loads = ClosLoads(problem)
    r = empty_routing(len(problem), {"order": "groups, largest first"})
    place_all(loads, r, group_order(problem))
    return r


def place_all(loads: ClosLoads, r: ClosRouting, order: list[int]) -> None:
    """``place`` every flow of ``order`` in turn on top of what ``loads`` holds (empty for
    the greedy; the flows kept for ``clos_churn``)."""
    if loads.planes == 1 and loads.single and (loads.views[0][4] or not len(loads.groups[0])):
        _one_plane(loads, r, order)
    else:
        for i in order:
            place(loads, r, i)


def _one_plane(loads: ClosLoads, r: ClosRouting, order: list[int]) -> None:
    """``place`` for every flow of ``order`` inlined, for one plane without bundles and with
    core groups of equal size (every fat-tree, every single-plane leaf-spine): the same
    choices, four numpy calls per flow."""
    u1, d1, u2, d2, _ = loads.views[0]
    (A, C), (bu1, bd1, bu2, bd2) = loads.cells.shape[0], loads.cells.base[0]
    per_group = C // A if C else 1
    ends, member0, cell_of = loads.ends[0], loads.member0, loads.cell_of
    load, load_l, step, cost = loads.load, loads.load_l, loads.step_l, loads.cost
    mx = np.maximum
    for i in order:
        a, b, p, s = ends[i]
        slot = mx(u1[a], d1[b])
        if p == s:
            m = int(slot.argmin())
            if slot.item(m) == math.inf:
                continue
            rows = (bu1 + a * A + m, bd1 + b * A + m)
        else:
            c = mx(u2[p], d2[s])
            mx(c, slot, out=c)
            m = int(c.argmin())
            if c.item(m) == math.inf:
                continue
            g = m // per_group
            rows = (bu1 + a * A + g, bu2 + p * C + m, bd2 + s * C + m, bd1 + b * A + g)
        path = tuple([member0[x] for x in rows])
        for x in path:
            v = load_l[x] + step[x]
            load_l[x] = v
            load[x] = v
            cost[cell_of[x]] = v + step[x]
        r.plane[i], r.middle[i], r.path[i] = 0, m, path


def place(loads: ClosLoads, r: ClosRouting, i: int) -> bool:
    """Put flow i on its cheapest option; False (left unplaced) when it has none."""
    cost, q, m, path = loads.best(i)
    if not math.isfinite(cost):
        return False
    r.plane[i], r.middle[i], r.path[i] = q, m, path
    loads.add(i, q, path)
    return True


def improve(problem: ClosProblem, r: ClosRouting, deadline: float | None = None,
            max_passes: int = 50) -> ClosRouting:
    """Move flows off the most loaded links while that lowers the maximum or the number of
    links at it; stops at ``deadline`` (time.perf_counter) or after ``max_passes``."""
    loads = ClosLoads(problem, r)
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
            cost, q, m, new = loads.best(i, hosts=False)  # the objective: fabric links
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
