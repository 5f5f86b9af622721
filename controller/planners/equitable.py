"""Equitable edge colouring (de Werra): every leaf side spreads its flows as evenly as possible.

Why: Koenig's colouring with Delta colours mapped onto S' spines (colour c on spine c mod S')
meets the max load ceil(Delta / S') but says nothing about the other links: a leaf of degree
d < Delta may put two flows on one spine while another spine of the same leaf is empty. An
*equitable* colouring with k = S' colours uses every colour floor(d/k) or ceil(d/k) times at a
vertex of degree d, for every vertex at once (de Werra 1971 for bipartite multigraphs).

Construction: split every vertex of degree d into ceil(d/k) copies, the first ones taking k of
its edges each (input order) and the last the remainder; the split graph is bipartite with
maximum degree <= k, so it has a proper colouring with k colours (Koenig): Euler partitions
(``euler_partition``) give one with 2^m >= k colours in numpy, and when k is not a power of
two alternating paths move the edges of the colours k and above into [0, k)
(``edge_coloring.complete_colouring``). A full copy then uses every colour once and the last
copy each colour at most once.

Optimality (when every flow may use the same S' spines): each leaf side's S' link loads are
balanced, which is the lexicographically smallest sorted vector that side can have, and the
sides have disjoint links, so the whole sorted load vector is lexicographically minimal: the
max load (layer 1), the number of links at it (layer 2) and every later entry are optimal.

Cost: the splitting O(E log E) in numpy, the Euler partitions O(E log E log k), and an
alternating path per edge moved into [0, k) (none when k is a power of two).
"""
from __future__ import annotations

import numpy as np

from controller.model.problem import Assignment, Problem
from controller.planners.edge_coloring import complete_colouring
from controller.planners.euler_partition import euler_colouring, ranks_in_groups
from controller.planners.repair import NO_SPINE, bits


def equitable_edge_colouring(edges: list[tuple[int, int]], k: int) -> list[int]:
    """Colours in [0, k) for multigraph edges (left u, right v) such that every vertex of
    degree d uses each colour floor(d/k) or ceil(d/k) times (``equitable_colours``).

    >>> col = equitable_edge_colouring([(0, 0), (0, 1), (0, 1), (1, 0), (0, 2)], 2)
    >>> sorted(col[e] for e in (0, 1, 2, 4))    # vertex 0 on the left: 4 edges, 2 colours
    [0, 0, 1, 1]
    >>> col[1] != col[2]                        # right vertex 1 has two edges
    True
    """
    left, right = np.array(edges, dtype=np.int64).reshape(-1, 2).T
    return equitable_colours(left, right, k).tolist()


def equitable_colours(left: np.ndarray, right: np.ndarray, k: int) -> np.ndarray:
    """``equitable_edge_colouring`` of the edges (left[e], right[e]), as an array. The split
    graph (module docstring) is coloured by Euler partitions with 2^m >= k colours
    (``euler_partition``, numpy); when k is not a power of two the edges of colours k and
    above are then inserted into [0, k) by alternating paths
    (``edge_coloring.complete_colouring``): fewer than half of them.

    Cost: O(E log E log k) array work, plus O(path length) per inserted edge."""
    if k < 1:
        raise ValueError(f"need at least one colour, got {k}")
    left, right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
    if not len(left):
        return np.zeros(0, dtype=np.int64)
    cl, cr = _copies(left, k), _copies(right, k)
    levels = (k - 1).bit_length()
    colour = euler_colouring(cl, cr, levels)
    if k < 1 << levels:
        over = colour >= k
        if over.any():
            colour = np.array(complete_colouring(list(zip(cl.tolist(), cr.tolist())),
                                                 np.where(over, -1, colour).tolist(), k),
                              dtype=np.int64)
    return colour


def _copies(vertex: np.ndarray, k: int) -> np.ndarray:
    """Per edge its copy of its vertex: a vertex's edges, in input order, k to a copy."""
    order, ranks, counts = ranks_in_groups(vertex)
    rank = np.empty(len(vertex), dtype=np.int64)
    rank[order] = ranks
    base = np.cumsum(-(-counts // k)) - -(-counts // k)  # first copy of every vertex
    return base[vertex] + rank // k


def equitable_spines(problem: Problem, spines: list[int] | None = None) -> list[int]:
    """Per flow its spine: the equitable colouring onto ``spines`` (default: the alive spines);
    NO_SPINE for a flow whose colour's spine is not usable for it (a failed link on its path).

    >>> from controller.model.clos import Clos
    >>> from controller.model.jobs import Flow, Job
    >>> f = Clos.generate(2, 3, 3).as_leaf_spine()
    >>> job = Job("j", explicit=[Flow("j", f"h0_{i}", f"h{1 + i % 2}_{i}", 1) for i in range(3)])
    >>> equitable_spines(Problem.build(f, [job]))    # leaf l0: 3 flows, 2 and 1 per spine
    [1, 0, 0]
    """
    if spines is None:
        spines = problem.fabric.alive_spines()
    if not len(problem) or not spines:
        return [NO_SPINE] * len(problem)
    edges = list(zip(problem.src_leaf, problem.dst_leaf))
    out = []
    for f, c in enumerate(equitable_edge_colouring(edges, len(spines))):
        s = spines[c]
        out.append(s if problem.usable[f] >> s & 1 else NO_SPINE)
    return out


def common_spines(problem: Problem) -> list[int] | None:
    """The usable spines when every flow has the same ones (only whole spines down), else None."""
    masks = set(problem.usable)
    if len(masks) != 1:
        return None
    return list(bits(masks.pop()))


def equitable(problem: Problem) -> Assignment:
    """The equitable colouring as a planner. Exact for every layer when every flow may use the
    same spines (``info["exact"]``); otherwise flows on a failed link are placed by the greedy
    rule (least-loaded usable spine), like ``edge_coloring``'s repair."""
    common = common_spines(problem)
    spines = equitable_spines(problem, common)
    S = len(problem.fabric.spines)
    L = len(problem.fabric.leaves)
    up, down = [0] * (L * S), [0] * (L * S)
    for a, b, s in zip(problem.src_leaf, problem.dst_leaf, spines):
        if s != NO_SPINE:
            up[a * S + s] += 1
            down[b * S + s] += 1
    repaired = 0
    for f, s in enumerate(spines):
        if s == NO_SPINE:
            a, b = problem.src_leaf[f], problem.dst_leaf[f]
            s = min(bits(problem.usable[f]),
                    key=lambda t: (max(up[a * S + t], down[b * S + t]), t))
            spines[f] = s
            up[a * S + s] += 1
            down[b * S + s] += 1
            repaired += 1
    return Assignment.unsplit(spines, {"exact": common is not None, "repaired": repaired})
