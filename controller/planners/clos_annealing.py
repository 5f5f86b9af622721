"""Simulated annealing on any Clos fabric: the paper simulator's schedule over the options
(plane, middle) of ``model.clospaths``, seeded, the best state visited kept.

Why: the paper's simulator (paper.md section 6.3) compares the greedy with annealing; this is
the same search on planes, bundles and three tiers, so ``compare`` on a Clos fabric lists it
beside the greedy and the colouring. It is the name's only implementation (issue 37): on a
single two-tier plane it runs on the plane's Clos (``leaf_spine.clos_planner``), where the
two-tier annealing of index swaps alone ended one flow per link above it on the benchmark's
realistic 64 x 32 cells (max load 4-5 against 3-4).

State: an index per inter-leaf flow, initially the destination host's position under its
(first-plane) leaf, a rail-like mapping as in the paper's simulator; between pods plus
(hosts per leaf) x the destination leaf's rank in its pod, so that with the options' order
below the hosts of a pod start on distinct cores and their leaf's distinct slots. A flow's option is its
index modulo the number of its usable options (plane, middle), taken in (plane, middle)
order; every hop takes its least loaded alive member when the flow is placed
(``ClosLoads.pick``). Moves, each with probability 1/3: swap the indices of two random flows,
or of two flows into the same destination leaf (the paper's two moves), or draw a new index
for one flow among its options. The third move is ours: between pods a flow has (k/2)^2
options but a leaf only k/2 host positions, so swaps alone never leave the first core group
of a fat-tree. Energy = alpha x (fabric links at alpha), alpha the max load on the
fabric links (flows per unit: ``clospaths.link_loads``). T0 = 1000, x0.99 per step, stop below
0.1 (917 steps), Metropolis acceptance on the energy. The state kept is the best visited by
(alpha, links at alpha), the order ``clos_auto.score`` ranks routings by, so the result is
never behind the start (the product alone can rank a higher alpha with fewer links first).
A pinned flow's options are in its plane only (``ClosProblem.options``).

Cost: options O(F x P x middles) numpy once; per step two removals and placements
O(hops x members) and the energy O(links): about 917 x O(links) in all.

Reference: Cohen et al., the paper's simulator (annealing baseline); Kirkpatrick, Gelatt and
Vecchi, Optimization by simulated annealing, Science 1983.

>>> from controller.model.clos import Clos
>>> from controller.model.clospaths import ClosProblem
>>> from controller.model.jobs import parse_job
>>> fab = Clos.fat_tree(4)
>>> hosts = list(fab.host_leaves)
>>> job = parse_job({"id": "r", "collective": "ring_allreduce", "ranks": hosts, "bytes": 1e6}, fab)
>>> r = clos_annealing(ClosProblem.build(fab, [job]))
>>> r.info["steps"], r.info["max_link_load"] <= r.info["start_max_link_load"]
(917, True)
"""
from __future__ import annotations

import math
import random
from typing import NamedTuple

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting
from controller.planners.clos_loads import ClosLoads, empty_routing


class Options(NamedTuple):
    """Every flow's usable (plane, middle) options in one flat list: flow k's are
    ``plane[start[k]:start[k] + count[k]]`` and ``middle[...]``, in ``ClosProblem.options``
    order by plane, then inside a pod by slot, between pods by the core's rank in its group,
    then its group (consecutive indices change the aggregation slot first)."""
    start: list[int]
    count: list[int]
    plane: list[int]
    middle: list[int]

    def of(self, k: int) -> list[tuple[int, int]]:
        s = self.start[k]
        return list(zip(self.plane[s:s + self.count[k]], self.middle[s:s + self.count[k]]))


def usable_options(problem: ClosProblem) -> Options:
    """The options of every flow, each plane's flows inside a pod and between pods at once:
    O(F x P x middles) numpy."""
    L = problem.links
    ks, qs, ms = [], [], []
    for q in range(len(problem.fabric.planes)):
        a, b, p, r = problem.end_arrays(q)
        u1, d1, u2, d2 = L.ok(q)
        g = L.group_of_core[q]
        rank = np.arange(len(g)) - np.searchsorted(g, g)  # a core's rank in its group
        order = np.lexsort((g, rank))  # the cores in the options' order
        between = p != r
        for idx in (np.flatnonzero(~between), np.flatnonzero(between)):
            if not len(idx):
                continue
            usable = u1[a[idx]] & d1[b[idx]]  # (flows, slots)
            cols = np.arange(usable.shape[1])
            if between[idx[0]]:
                usable = usable[:, g[order]] & u2[p[idx]][:, order] & d2[r[idx]][:, order]
                cols = order
            if problem.pin is not None:
                usable &= problem.open_in(q, idx)[:, None]
            rows, at = np.nonzero(usable)
            ks.append(idx[rows])
            qs.append(np.full(len(rows), q))
            ms.append(cols[at])
    k = np.concatenate(ks) if ks else np.zeros(0, dtype=np.int64)
    by_flow = np.argsort(k, kind="stable")  # a flow's options in the order found
    count = np.bincount(k, minlength=len(problem))
    start = np.concatenate([[0], np.cumsum(count)[:-1]])
    return Options(start.tolist(), count.tolist(), np.concatenate(qs)[by_flow].tolist() if ks
                   else [], np.concatenate(ms)[by_flow].tolist() if ks else [])


def clos_annealing(problem: ClosProblem, seed: int = 1234, t0: float = 1000.0,
                   cooling: float = 0.99, t_min: float = 0.1) -> ClosRouting:
    n = len(problem)
    r = empty_routing(n, {"seed": seed, "steps": 0})
    if n == 0:
        return r
    L = problem.links
    first, size, planes, middles = usable_options(problem)
    position: dict[int, int] = {}
    seen: dict[int, int] = {}
    for h, leaf in enumerate(L.host_leaf[0].tolist()):
        position[h] = seen.get(leaf, 0)
        seen[leaf] = position[h] + 1
    width = max(seen.values(), default=1)
    leaf_rank = np.zeros(len(L.pod_of_leaf[0]), dtype=np.int64)  # a leaf's rank in its pod
    for pod in np.unique(L.pod_of_leaf[0]):
        mine = np.flatnonzero(L.pod_of_leaf[0] == pod)
        leaf_rank[mine] = np.arange(len(mine))
    _, b0, p0, r0 = problem.end_arrays(0)
    index = [position[d] + (width * int(leaf_rank[b]) if p != r else 0)
             for d, b, p, r in zip(problem.dst, b0.tolist(), p0.tolist(), r0.tolist())]
    dst_leaf = L.host_leaf[0][np.asarray(problem.dst, dtype=np.int64)].tolist()
    by_dst_leaf: dict[int, list[int]] = {}
    for k, b in enumerate(dst_leaf):
        by_dst_leaf.setdefault(b, []).append(k)
    loads = ClosLoads(problem)
    fab = np.flatnonzero((L.tier > 0) & L.alive[:L.count])  # the alive fabric links

    def place(k: int) -> None:
        x = first[k] + index[k] % size[k]
        q, m = planes[x], middles[x]
        path = loads.pick(k, q, m)
        r.plane[k], r.middle[k], r.path[k] = q, m, path
        loads.add(k, q, path)

    def remove(k: int) -> None:
        loads.add(k, r.plane[k], r.path[k], -1.0)

    def energy() -> tuple[float, int, float]:
        v = loads.load.take(fab)
        if not v.size:
            return 0.0, 0, 0.0
        alpha = round(float(v.max()), 9)
        at = int(np.count_nonzero(v >= alpha - 1e-9))
        return alpha, at, alpha * at

    for k in range(n):
        place(k)
    alpha, at, current = energy()
    start = (alpha, at)
    best, best_state = start, (list(r.plane), list(r.middle), list(r.path))
    rng = random.Random(seed)
    temperature, steps = t0, 0
    while temperature >= t_min:
        i = rng.randrange(n)
        u = rng.random()
        if u < 1 / 3:
            j, redraw = rng.randrange(n), None
        elif u < 2 / 3:
            group = by_dst_leaf[dst_leaf[i]]
            j, redraw = group[rng.randrange(len(group))], None
        else:
            j, redraw = i, rng.randrange(size[i])
        if redraw is not None or (i != j and index[i] != index[j]):
            moved = (i,) if redraw is not None else (i, j)
            old = [(k, r.plane[k], r.middle[k], r.path[k], index[k]) for k in moved]
            for k in moved:
                remove(k)
            if redraw is None:
                index[i], index[j] = index[j], index[i]
            else:
                index[i] = redraw
            for k in moved:
                place(k)
            alpha, at, new = energy()
            if new <= current or rng.random() < math.exp((current - new) / temperature):
                current = new
                if (alpha, at) < best:
                    best, best_state = (alpha, at), (list(r.plane), list(r.middle), list(r.path))
            else:  # undo: the old options and members exactly
                for k in moved:
                    remove(k)
                for k, q, m, path, x in old:
                    r.plane[k], r.middle[k], r.path[k], index[k] = q, m, path, x
                    loads.add(k, q, path)
        temperature *= cooling
        steps += 1
    r.plane, r.middle, r.path = best_state
    r.info.update(steps=steps, max_link_load=best[0], links_at_max=best[1],
                  start_max_link_load=start[0], start_links_at_max=start[1])
    return r
