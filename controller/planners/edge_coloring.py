"""Edge colouring (König): Delta colours for the leaf-to-leaf bipartite multigraph, colour c on
alive spine c mod S'. Every directed link then carries at most ceil(Delta / S') flows, the lower
bound, whenever every leaf sees the same alive spines.

The colouring uses alternating paths (paper.md section 6.2 (iii)), which never leaves an edge
uncoloured, unlike repeated maximum matchings.

Private since issue 60: the planner name ``edge-coloring`` runs ``clos_tiers.edge_colouring`` on
every shape (this colouring, on a single plane flow for flow, is one of its two candidates).
``bipartite_edge_colouring`` is the colouring of ``auto``'s repair (``koenig_partial``) and
``split``'s McNaughton, ``complete_colouring`` moves ``equitable``'s colours beyond k into
[0, k) (its colouring is by Euler partitions); ``edge_coloring`` is the baseline routing
``auto``'s and churn's jobs searches and ``split``'s LP start from.
"""
from __future__ import annotations

from controller.model.problem import Assignment, Problem
from controller.planners.greedy import LoadCounters


def bipartite_edge_colouring(edges: list[tuple[int, int]], common_first: bool = False) -> list[int]:
    """Colour multigraph edges (left u, right v) with max-degree colours, none repeated at a vertex.

    For edge (u, v): c = smallest colour free at u, d = smallest free at v. If c is taken at v,
    swap c and d along the path from v that alternates c, d, c, ...; in a bipartite graph it never
    reaches u, so afterwards c is free at both ends. With ``common_first`` the smallest colour
    free at both ends is taken when there is one, which avoids most swaps (auto's construction).

    Colours used at a vertex are a bit mask and the edge of each (vertex, colour) sits in a flat
    array, so a step is a few integer operations plus the swapped path: O(E * path length),
    in practice a few ms for 2,000 flows.

    >>> bipartite_edge_colouring([(0, 0), (0, 1), (1, 0)])  # (1, 0) swaps the path 0-0-1
    [1, 0, 0]
    >>> bipartite_edge_colouring([(0, 0), (0, 1), (1, 0)], common_first=True)
    [0, 1, 1]
    """
    if not edges:
        return []
    deg_l, deg_r = vertex_degrees(edges)
    D = max(max(deg_l), max(deg_r))
    return complete_colouring(edges, [-1] * len(edges), D, common_first)


def complete_colouring(edges: list[tuple[int, int]], colour: list[int], D: int,
                       common_first: bool = False) -> list[int]:
    """``colour`` (a proper partial colouring with colours in [0, D), -1 for an uncoloured
    edge) completed with colours in [0, D) by the insertion of ``bipartite_edge_colouring``,
    edge by edge in input order. D must be at least the maximum degree.

    >>> complete_colouring([(0, 0), (0, 1), (1, 0)], [1, -1, -1], 2)
    [1, 0, 0]
    """
    n_left = max(u for u, _ in edges) + 1
    n_right = max(v for _, v in edges) + 1
    at_l, at_r = [-1] * (n_left * D), [-1] * (n_right * D)  # (vertex, colour) -> edge
    used_l, used_r = [0] * n_left, [0] * n_right  # colours in use, bit masks
    colour = list(colour)
    todo = []
    for e, (u, v) in enumerate(edges):
        c = colour[e]
        if c < 0:
            todo.append(e)
            continue
        at_l[u * D + c] = at_r[v * D + c] = e
        used_l[u] |= 1 << c
        used_r[v] |= 1 << c
    for e in todo:
        u, v = edges[e]
        x, y = used_l[u], used_r[v]
        c = D
        if common_first:
            z = x | y
            c = (~z & (z + 1)).bit_length() - 1  # lowest colour free at both ends
        if c >= D:
            c = (~x & (x + 1)).bit_length() - 1
            if y >> c & 1:
                d = (~y & (y + 1)).bit_length() - 1
                _swap_along_path(edges, colour, at_l, at_r, used_l, used_r, D, v, c, d)
        colour[e] = c
        at_l[u * D + c] = e
        at_r[v * D + c] = e
        used_l[u] |= 1 << c
        used_r[v] |= 1 << c
    return colour


def _swap_along_path(edges, colour, at_l, at_r, used_l, used_r, D, start_right, c, d) -> None:
    path = []
    vertex, on_right, want, other = start_right, True, c, d
    while True:
        e = at_r[vertex * D + want] if on_right else at_l[vertex * D + want]
        if e < 0:
            break
        path.append(e)
        vertex = edges[e][0] if on_right else edges[e][1]
        on_right = not on_right
        want, other = other, want
    for e in path:
        u, v = edges[e]
        k = colour[e]
        at_l[u * D + k] = at_r[v * D + k] = -1
        used_l[u] &= ~(1 << k)
        used_r[v] &= ~(1 << k)
    for e in path:
        u, v = edges[e]
        k = d if colour[e] == c else c
        colour[e] = k
        at_l[u * D + k] = at_r[v * D + k] = e
        used_l[u] |= 1 << k
        used_r[v] |= 1 << k


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


def vertex_degrees(edges: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """Degrees of the left and right vertices (0 .. largest id) of a bipartite multigraph.

    >>> vertex_degrees([(0, 1), (0, 0), (2, 1)])
    ([2, 0, 1], [1, 2])
    """
    deg_l = [0] * (max(u for u, _ in edges) + 1)
    deg_r = [0] * (max(v for _, v in edges) + 1)
    for u, v in edges:
        deg_l[u] += 1
        deg_r[v] += 1
    return deg_l, deg_r
