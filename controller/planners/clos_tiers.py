"""Edge colouring tier by tier on any Clos fabric: the planner of the name ``edge-coloring``
(``edge_colouring``, on every shape: issue 60) and the construction ``clos_auto`` and
``clos_jobs`` start from (``tier_colouring``).

1. Planes: the multigraph between groups of hosts that share their leaves (one group per
   leaf in a rail-aligned fabric) coloured equitably with P colours (de Werra): every group
   spreads its flows over the P planes as evenly as possible; edges are taken host by host, so
   a host's flows mostly fall into one copy of its group and get distinct planes (NIC ports).
   Flows pinned to a plane (``ClosProblem.pin``: running connections) stay there; only the
   free flows are coloured, among themselves (the local search of ``clos_auto`` evens out).
2. Leaf tier, per plane: the leaf-to-leaf multigraph of the plane's flows coloured with the
   plane's A slots (aggregation switches per pod; spines on two tiers): colour x is the slot.
   Equitably (de Werra), every leaf puts floor(d/A) or ceil(d/A) of its d flows on each of its
   uplinks (and downlinks); by Koenig with Delta colours, colour c on slot c mod A (the paper's
   edge colouring: every link at most ceil(Delta/A)). A flow between pods goes up to slot x
   of its pod and down from slot x of the other pod, through a core of group x.
3. Core tier, per plane and group x: the pod-to-pod multigraph of the flows between pods that
   took slot x, coloured likewise with the group's C cores.
4. Bundles: every hop takes its least loaded alive member, so a bundle of n links carrying m
   flows has ceil(m/n) on its busiest member.

With ``alive`` only the slots (cores) with an alive link are colours: a whole spine (core)
down then costs the colouring nothing (``tier_colouring`` colours with every slot, as
``clos_auto`` has always started). A flow whose coloured option is not alive (links down) is
placed by the greedy at the end.

On a full-bisection fabric with nothing down and permutation traffic (every host sends and
receives at most its share: rings, pairings) every link then carries at most one flow per
unit, the optimum; with whole spines down too (``alive``), and on a single two-tier plane
every layer of the sorted load vector (``planners.equitable``).

``edge_colouring`` (the name ``edge-coloring`` on every shape, a single two-tier plane too:
``leaf_spine.clos_planner``): both colourings on the alive slots, each followed by the local
search (``clos_greedy.improve``: flows off the links at the max while that lowers the max or
the links at it), the better kept (max link load, then links at it; the equitable one on
ties). Its plans are never behind the two-tier Koenig colouring it replaced (that is its
Koenig candidate on a single plane, flow for flow) nor behind the equitable colouring the
name ran on Clos fabrics before (issue 60; docs/explanation/algorithms.md gives the
comparison).

Cost: three colourings per construction, O(E x alternating path length) each
(``planners.equitable``); the rest numpy over flows (members in batch when there are no
bundles, else O(F x hops)); ``edge_colouring`` two constructions and two local searches.
"""
from __future__ import annotations

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting
from controller.planners.clos_greedy import improve, place
from controller.planners.clos_loads import ClosLoads, empty_routing, hop_rows, paths_of, score
from controller.planners.edge_coloring import bipartite_edge_colouring
from controller.planners.equitable import equitable_colours

COLOURINGS = ("equitable", "koenig")


def edge_colouring(problem: ClosProblem) -> ClosRouting:
    """The planner of ``edge-coloring`` (module docstring). ``info``: the colouring kept,
    each candidate's (max link load, links at it), the flows the greedy placed.

    >>> from controller.model.clos import Clos
    >>> from controller.model.jobs import Flow, Job
    >>> fab = Clos.generate(3, 4, 3, failed_spines=1)   # 3 flows a leaf, 2 spines alive
    >>> job = Job("j", explicit=[Flow("j", f"h{a}_{k}", f"h{(a + 1) % 4}_{k}", 1)
    ...                          for a in range(4) for k in range(3)])
    >>> r = edge_colouring(ClosProblem.build(fab, [job]))
    >>> r.info["colouring"], score(ClosProblem.build(fab, [job]), r)
    ('equitable', (2.0, 8))
    """
    best = None
    tried = {}
    for colours in COLOURINGS:
        r = improve(problem, tier_colouring(problem, colours, alive=True))
        key = score(problem, r)
        tried[colours] = list(key)
        if best is None or key < best[0]:
            best = (key, colours, r)
    _, colours, r = best
    r.info.update(colouring=colours, tried=tried)
    return r


def tier_colouring(problem: ClosProblem, colours: str = "equitable",
                   alive: bool = False) -> ClosRouting:
    """The colouring of the module docstring: ``colours`` "equitable" (de Werra) or "koenig"
    (Delta colours, colour c on slot c mod A) at the leaf and core tiers; ``alive``: only
    the slots and cores with an alive link are colours."""
    if colours not in COLOURINGS:
        raise ValueError(f"unknown colouring {colours!r} (choose from {', '.join(COLOURINGS)})")
    L, fab = problem.links, problem.fabric
    n = len(problem)
    planes = np.zeros(n, dtype=np.int64)
    if len(fab.planes) > 1:
        key = fab.derived("clos_leaf_groups", _leaf_groups)
        free = np.arange(n) if problem.pin is None else np.flatnonzero(problem.pin < 0)
        src, dst = np.asarray(problem.src)[free], np.asarray(problem.dst)[free]
        order = np.lexsort((dst, src))
        planes[free[order]] = equitable_colours(key[src[order]], key[dst[order]],
                                                len(fab.planes))
        if problem.pin is not None:  # pinned flows keep their plane; the free ones share out
            planes[problem.pin >= 0] = problem.pin[problem.pin >= 0]
    middle = np.full(n, -1, dtype=np.int64)
    for q in range(len(fab.planes)):
        u1, d1, u2, d2 = L.ok(q)
        slot_ids = np.arange(L.up1[q].shape[1])
        groups = L.group_of_core[q]
        core_ok = np.ones(len(groups), dtype=bool)
        if alive:
            slot_ids = np.flatnonzero(u1.any(axis=0) | d1.any(axis=0))
            core_ok = (u2.any(axis=0) | d2.any(axis=0)) if len(groups) else core_ok
        mine = np.flatnonzero(planes == q)
        if not len(mine) or not len(slot_ids):
            continue
        a, b, p, r = (e[mine] for e in problem.end_arrays(q))
        slots = slot_ids[_colour(a, b, len(slot_ids), colours)]
        inter = p != r
        middle[mine[~inter]] = slots[~inter]
        middle[mine[inter]] = _core_tier(p[inter], r[inter], slots[inter], groups, core_ok,
                                         colours)
    ok = middle >= 0
    for q in range(len(fab.planes)):
        mine = np.flatnonzero(ok & (planes == q))
        ok[mine] = problem.usable_at(q, mine, middle[mine])
    r = empty_routing(n, {"construction": f"{colours} colouring per tier"})
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


def _leaf_groups(fab) -> np.ndarray:
    """Per host (``ClosLinks.hosts`` order) its group of hosts on the same leaves, numbered
    in order of first host; once per fabric."""
    group: dict[tuple, int] = {}
    return np.array([group.setdefault(fab.host_leaves[h], len(group)) for h in fab.host_leaves],
                    dtype=np.int64)


def _core_tier(p: np.ndarray, r: np.ndarray, slots: np.ndarray, groups: np.ndarray,
               core_ok: np.ndarray, colours: str) -> np.ndarray:
    """Per flow between pods ``p`` and ``r`` that took slot ``slots``: its core, the colouring
    of the pod-to-pod multigraph of each slot's flows with the slot's usable cores (-1 where
    a slot has none). Equitably, the slots with as many cores are coloured at once, as one
    graph (a disjoint union, every pod once per slot); Koenig's colours (the maximum degree)
    are the slot's own, slot by slot."""
    out = np.full(len(p), -1, dtype=np.int64)
    n_pods = int(max(p.max(), r.max())) + 1 if len(p) else 0
    cores_of = {x: np.flatnonzero((groups == x) & core_ok) for x in np.unique(slots).tolist()}
    batches = ([[x] for x, c in cores_of.items() if len(c)] if colours == "koenig" else
               [[x for x, c in cores_of.items() if len(c) == count]
                for count in sorted({len(c) for c in cores_of.values()} - {0})])
    for xs in batches:
        count = len(cores_of[xs[0]])
        at = np.flatnonzero(np.isin(slots, xs))
        colour = _colour(slots[at] * n_pods + p[at], slots[at] * n_pods + r[at], count, colours)
        table = np.zeros((max(xs) + 1, count), dtype=np.int64)
        for x in xs:
            table[x] = cores_of[x]
        out[at] = table[slots[at], colour]
    return out


def _colour(left: np.ndarray, right: np.ndarray, k: int, colours: str) -> np.ndarray:
    """Colours in [0, k) of a bipartite multigraph's edges (left[e], right[e]): equitable, or
    Koenig's Delta colours modulo k."""
    if colours == "equitable":
        return equitable_colours(left, right, k)
    edges = list(zip(left.tolist(), right.tolist()))
    return np.array(bipartite_edge_colouring(edges), dtype=np.int64) % k
