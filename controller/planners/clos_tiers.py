"""Equitable edge colouring tier by tier: the exact two-tier colouring carried to planes,
bundles and three tiers.

1. Planes: the multigraph between groups of hosts that share their leaves (one group per
   leaf in a rail-aligned fabric) coloured equitably with P colours (de Werra): every group
   spreads its flows over the P planes as evenly as possible; edges are taken host by host, so
   a host's flows mostly fall into one copy of its group and get distinct planes (NIC ports).
   Flows pinned to a plane (``ClosProblem.pin``: running connections) stay there; only the
   free flows are coloured, among themselves (the local search of ``clos_auto`` evens out).
2. Leaf tier, per plane: the leaf-to-leaf multigraph of the plane's flows coloured equitably
   with A colours, A the aggregation switches per pod (spines on two tiers): colour x is the
   slot, so every leaf puts floor(d/A) or ceil(d/A) of its d flows on each of its uplinks (and
   downlinks). A flow between pods goes up to slot x of its pod and down from slot x of the
   other pod, through a core of group x.
3. Core tier, per plane and group x: the pod-to-pod multigraph of the flows between pods that
   took slot x, coloured equitably with the group's C cores.
4. Bundles: every hop takes its least loaded alive member, so a bundle of n links carrying m
   flows has ceil(m/n) on its busiest member.

On a full-bisection fabric with nothing down and permutation traffic (every host sends and
receives at most its share: rings, pairings) every link then carries at most one flow per
unit, the optimum; elsewhere the colouring is a construction that ``clos_auto`` improves and
compares with the lower bound. A flow whose coloured option is not alive (failures) is placed
by the greedy at the end.

Cost: three colourings, O(E x alternating path length) each (``planners.equitable``); the
rest numpy over flows (members in batch when there are no bundles, else O(F x hops)).
"""
from __future__ import annotations

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting
from controller.planners.clos_greedy import place
from controller.planners.clos_loads import ClosLoads, empty_routing, hop_rows, paths_of
from controller.planners.equitable import equitable_edge_colouring


def tier_colouring(problem: ClosProblem) -> ClosRouting:
    L, fab = problem.links, problem.fabric
    n = len(problem)
    planes = np.zeros(n, dtype=np.int64)
    if len(fab.planes) > 1:
        group: dict[tuple, int] = {}
        key = [group.setdefault(fab.host_leaves[h], len(group)) for h in L.hosts]
        free = np.arange(n) if problem.pin is None else np.flatnonzero(problem.pin < 0)
        src, dst = np.asarray(problem.src)[free].tolist(), np.asarray(problem.dst)[free].tolist()
        order = np.lexsort((dst, src)).tolist()
        colour = equitable_edge_colouring([(key[src[i]], key[dst[i]]) for i in order],
                                          len(fab.planes))
        planes[free[order]] = colour
        if problem.pin is not None:  # pinned flows keep their plane; the free ones share out
            planes[problem.pin >= 0] = problem.pin[problem.pin >= 0]
    middle = np.full(n, -1, dtype=np.int64)
    for q in range(len(fab.planes)):
        mine = np.flatnonzero(planes == q)
        a, b, p, r = (e[mine] for e in problem.end_arrays(q))
        slots = np.array(equitable_edge_colouring(list(zip(a.tolist(), b.tolist())),
                                                  L.up1[q].shape[1]), dtype=np.int64)
        inter = p != r
        middle[mine[~inter]] = slots[~inter]
        groups = L.group_of_core[q]
        for x in np.unique(slots[inter]).tolist():
            at = inter & (slots == x)
            cores = np.flatnonzero(groups == x)
            colour = equitable_edge_colouring(list(zip(p[at].tolist(), r[at].tolist())),
                                              len(cores))
            middle[mine[at]] = cores[colour]
    ok = middle >= 0
    for q in range(len(fab.planes)):
        mine = np.flatnonzero(ok & (planes == q))
        ok[mine] = problem.usable_at(q, mine, middle[mine])
    r = empty_routing(n, {"construction": "equitable colouring per tier"})
    r.plane, r.middle = planes.tolist(), middle.tolist()
    later = np.flatnonzero(~ok).tolist()
    for i in later:
        r.plane[i], r.middle[i] = -1, -1
    if L.cells().width == 1:  # no bundles: the middle fixes every member
        member0 = L.cells().members[:, 0]
        for q in range(len(fab.planes)):
            mine = np.flatnonzero(ok & (planes == q))
            rows = hop_rows(problem, q, mine, middle[mine])
            for i, path in zip(mine.tolist(), paths_of(np.where(rows >= 0, member0[rows], -1))):
                r.path[i] = path
        loads = ClosLoads(problem, r) if later else None
    else:  # least loaded members, flow by flow
        loads = ClosLoads(problem)
        for i in np.flatnonzero(ok).tolist():
            r.path[i] = loads.pick(i, r.plane[i], r.middle[i])
            loads.add(i, r.plane[i], r.path[i])
    for i in later:
        place(loads, r, i)
    r.info["greedy_placed"] = len(later)
    return r
