"""Link loads while a Clos routing is built: what every path planner on ``model.clospaths``
shares (the greedy, the tier colouring's member choice, the local search).

A load is flows per unit of capacity; a dead link (and the sentinel id of a missing bundle
member) has an infinite load, so no option through it is ever cheapest. The cost of a middle
is the load its busiest hop would have with the flow added, each hop taking its least loaded
alive member: the greedy's rule of Cohen et al. (each flow on the path whose busiest link is
least loaded), with bundles and capacities. Host links count when a flow can choose a plane.
"""
from __future__ import annotations

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting


class ClosLoads:
    def __init__(self, problem: ClosProblem):
        self.problem = problem
        L = problem.links
        self.load = np.zeros(L.count + 1)
        self.load[~L.alive] = np.inf
        self.step = np.append(1.0 / L.units, 1.0)  # a flow's load on a link of that capacity
        self.planes = len(problem.fabric.planes)

    def costs(self, i: int, q: int) -> tuple[np.ndarray, list[np.ndarray]]:
        """(cost per middle, per hop the member ids with -1 replaced by the sentinel)."""
        hops, _ = self.problem.options(i, q)
        ids = [self.problem.links.sentinel(h) for h in hops]
        cost = None
        for h in ids:
            c = (self.load[h] + self.step[h]).min(axis=1)
            cost = c if cost is None else np.maximum(cost, c)
        if self.planes > 1:
            up, down = self.problem.host_links(i, q)
            cost = np.maximum(cost, max(self.load[up] + self.step[up],
                                        self.load[down] + self.step[down]))
        return cost, ids

    def best(self, i: int) -> tuple[float, int, int, tuple[int, ...]]:
        """(cost, plane, middle, members) of flow i's cheapest option: lowest plane, then
        lowest middle, on ties; cost inf when it has none."""
        best = (np.inf, -1, -1, ())
        for q in range(self.planes):
            cost, ids = self.costs(i, q)
            m = int(np.argmin(cost))
            if cost[m] < best[0]:
                best = (float(cost[m]), q, m, self.members(ids, m))
        return best

    def members(self, ids: list[np.ndarray], m: int) -> tuple[int, ...]:
        """The least loaded member of every hop of middle m (lowest member on ties)."""
        return tuple(int(h[m][np.argmin(self.load[h[m]] + self.step[h[m]])]) for h in ids)

    def add(self, i: int, q: int, path: tuple[int, ...], sign: float = 1.0) -> None:
        ids = list(path)
        if self.planes > 1:
            ids += self.problem.host_links(i, q)
        self.load[ids] += sign * self.step[ids]

    def fabric_max(self) -> float:
        L = self.problem.links
        fab = self.load[:L.count][(L.tier > 0) & L.alive[:L.count]]
        return float(fab.max()) if fab.size else 0.0


def empty_routing(n: int, info: dict | None = None) -> ClosRouting:
    return ClosRouting([-1] * n, [-1] * n, [()] * n, info or {})


def group_order(problem: ClosProblem) -> list[int]:
    """Flows in the paper's greedy order (``planners.greedy.group_order``): groups of one
    source leaf (or one destination leaf), largest first, source groups before destination
    groups, then leaf id; input order within a group."""
    f, L = problem.fabric, problem.links

    def leaves(host: int) -> tuple[int, ...]:
        return tuple(L.leaf_at[q][leaf] for q, leaf in enumerate(f.host_leaves[L.hosts[host]]))
    groups: dict[tuple, list[int]] = {}
    for i in range(len(problem)):
        groups.setdefault((0, leaves(problem.src[i])), []).append(i)
        groups.setdefault((1, leaves(problem.dst[i])), []).append(i)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    seen = bytearray(len(problem))
    out = []
    for _, members in ordered:
        for i in members:
            if not seen[i]:
                seen[i] = 1
                out.append(i)
    return out
