"""Equitable edge colouring tier by tier: the exact two-tier colouring carried to planes,
bundles and three tiers.

1. Planes: the multigraph between groups of hosts that share their leaves (one group per
   leaf in a rail-aligned fabric) coloured equitably with P colours (de Werra): every group
   spreads its flows over the P planes as evenly as possible; edges are taken host by host, so
   a host's flows mostly fall into one copy of its group and get distinct planes (NIC ports).
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

Cost: three colourings, O(E x alternating path length) each (``planners.equitable``).
"""
from __future__ import annotations

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting
from controller.planners.clos_greedy import place
from controller.planners.clos_loads import ClosLoads, empty_routing
from controller.planners.equitable import equitable_edge_colouring


def tier_colouring(problem: ClosProblem) -> ClosRouting:
    L, fab = problem.links, problem.fabric
    n = len(problem)
    planes = [0] * n
    if len(fab.planes) > 1:
        group: dict[tuple, int] = {}
        key = [group.setdefault(fab.host_leaves[L.hosts[h]], len(group)) for h in range(len(L.hosts))]
        order = sorted(range(n), key=lambda i: (problem.src[i], problem.dst[i]))
        colour = equitable_edge_colouring([(key[problem.src[i]], key[problem.dst[i]])
                                           for i in order], len(fab.planes))
        for i, c in zip(order, colour):
            planes[i] = c
    middle = [-1] * n
    for q, plane in enumerate(fab.planes):
        mine = [i for i in range(n) if planes[i] == q]
        ends = {i: problem.ends(i, q) for i in mine}
        A = L.up1[q].shape[1]
        slots = equitable_edge_colouring([ends[i][:2] for i in mine], A)
        by_slot: dict[int, list[int]] = {}
        for i, x in zip(mine, slots):
            a, b, p, s = ends[i]
            if p == s:
                middle[i] = x
            else:
                by_slot.setdefault(x, []).append(i)
        groups = L.group_of_core[q]
        for x, flows in by_slot.items():
            cores = np.flatnonzero(groups == x)
            colour = equitable_edge_colouring([ends[i][2:] for i in flows], len(cores))
            for i, c in zip(flows, colour):
                middle[i] = int(cores[c])
    loads = ClosLoads(problem)
    r = empty_routing(n, {"construction": "equitable colouring per tier"})
    later = []
    for i in range(n):
        q, m = planes[i], middle[i]
        hops, ok = problem.options(i, q)
        if m < 0 or not ok[m]:
            later.append(i)
            continue
        path = loads.members([L.sentinel(h) for h in hops], m)
        r.plane[i], r.middle[i], r.path[i] = q, m, path
        loads.add(i, q, path)
    for i in later:
        place(loads, r, i)
    r.info["greedy_placed"] = len(later)
    return r
