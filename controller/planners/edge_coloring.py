"""Edge colouring (König): Delta colours for the leaf-to-leaf bipartite multigraph, colour c on
alive spine c mod S'. Every directed link then carries at most ceil(Delta / S') flows, the lower
bound, whenever every leaf sees the same alive spines.

The colouring uses alternating paths (paper.md section 6.2 (iii)), which never leaves an edge
uncoloured, unlike repeated maximum matchings.
"""
from __future__ import annotations

from controller.planners.greedy import LoadCounters
from controller.problem import Assignment, Problem


def bipartite_edge_colouring(edges: list[tuple[int, int]]) -> list[int]:
    """Colour multigraph edges (left u, right v) with max-degree colours, none repeated at a vertex.

    For edge (u, v): c = smallest colour free at u, d = smallest free at v. If c is taken at v,
    swap c and d along the path from v that alternates c, d, c, ...; in a bipartite graph it never
    reaches u, so afterwards c is free at both ends.
    """
    at_left: dict[int, dict[int, int]] = {}  # vertex -> colour -> edge
    at_right: dict[int, dict[int, int]] = {}
    colour = [-1] * len(edges)
    for e, (u, v) in enumerate(edges):
        cu = at_left.setdefault(u, {})
        cv = at_right.setdefault(v, {})
        c = _smallest_free(cu)
        if c in cv:
            d = _smallest_free(cv)
            _swap_along_path(edges, colour, at_left, at_right, v, c, d)
        colour[e] = c
        cu[c] = e
        cv[c] = e
    return colour


def _smallest_free(used: dict[int, int]) -> int:
    c = 0
    while c in used:
        c += 1
    return c


def _swap_along_path(edges, colour, at_left, at_right, start_right: int, c: int, d: int) -> None:
    path = []
    vertex, on_right, want = start_right, True, c
    while True:
        table = at_right[vertex] if on_right else at_left[vertex]
        e = table.get(want)
        if e is None:
            break
        path.append(e)
        u, v = edges[e]
        vertex, on_right = (u, False) if on_right else (v, True)
        want = d if want == c else c
    for e in path:
        u, v = edges[e]
        del at_left[u][colour[e]]
        del at_right[v][colour[e]]
    for e in path:
        colour[e] = d if colour[e] == c else c
        u, v = edges[e]
        at_left[u][colour[e]] = e
        at_right[v][colour[e]] = e


def edge_coloring(problem: Problem) -> Assignment:
    alive = problem.fabric.alive_spines()
    edges = list(zip(problem.src_leaf, problem.dst_leaf))
    colours = bipartite_edge_colouring(edges)
    counters = LoadCounters(len(problem.fabric.leaves), len(problem.fabric.spines))
    spines = [0] * len(edges)
    repair = []
    for k, c in enumerate(colours):
        s = alive[c % len(alive)]
        if problem.usable[k] >> s & 1:
            spines[k] = s
            counters.add(edges[k][0], s, edges[k][1])
        else:
            repair.append(k)
    for k in repair:  # flows whose spine has a dead link on their path: greedy rule, input order
        a, b = edges[k]
        s = counters.best(a, b, problem.usable[k])
        counters.add(a, s, b)
        spines[k] = s
    return Assignment.unsplit(spines, {"colours": max(colours, default=-1) + 1,
                                       "repaired": len(repair)})
