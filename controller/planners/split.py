"""Minimal flow splitting (after Ethereal): reach the fractional optimum Delta / S' by splitting
only the flows of a few matchings. This is our reconstruction (paper.md section 9.1), not
Ethereal's published algorithm.

Write Delta = q * S' + r. Pad the leaf multigraph to Delta-regular and colour it with Delta
colours: each colour class is then a perfect matching. q * S' classes go whole to the spines, q
per spine. The r classes with the fewest real flows are laid end to end on [0, r) and cut into S'
pieces of length r / S' (McNaughton's wrap-around); piece j goes to spine j. Only flows in a
class that straddles a cut are split, at that byte fraction. Every directed link then carries at
most Delta / S' flow units. When Delta <= S' nothing is split: one flow per link is already
reached unsplit, and a link share below one flow cannot make a flow faster than its own NIC.

The construction needs every leaf to see the same alive spines. With single links down it falls
back to the unsplit greedy and says so in ``info``.
"""
from __future__ import annotations

from fractions import Fraction

from controller.planners.edge_coloring import bipartite_edge_colouring
from controller.planners.greedy import greedy
from controller.problem import Assignment, Problem


def split(problem: Problem) -> Assignment:
    fabric = problem.fabric
    if not fabric.uniform():
        result = greedy(problem)
        result.info.update(fallback="greedy", reason="single leaf-spine links down")
        return result
    alive = fabric.alive_spines()
    n_alive = len(alive)
    out, inn = problem.degrees()
    delta = max(out + inn, default=0)
    if delta == 0:
        return Assignment([], {"split_flows": 0})
    edges = list(zip(problem.src_leaf, problem.dst_leaf))
    real = len(edges)
    edges += _padding(out, inn, delta)
    colours = bipartite_edge_colouring(edges)
    q, r = divmod(delta, n_alive)
    if q == 0:  # Delta <= S': one flow per link at most, no faster than a flow's own NIC
        r = 0
    real_per_class = [0] * delta
    for c in colours[:real]:
        real_per_class[c] += 1
    # the r classes carrying the fewest real flows are the ones that get split
    by_load = sorted(range(delta), key=lambda c: (real_per_class[c], c))
    leftover = sorted(by_load[:r])
    whole = sorted(by_load[r:])
    pieces: dict[int, tuple] = {}
    for rank, c in enumerate(whole):
        pieces[c] = ((alive[rank % n_alive], 1.0),)
    width = Fraction(r, n_alive)
    for pos, c in enumerate(leftover):
        parts = []
        lo, hi = Fraction(pos), Fraction(pos + 1)
        for j in range(n_alive):
            a, b = max(lo, j * width), min(hi, (j + 1) * width)
            if b > a:
                parts.append((alive[j], float(b - a)))
        pieces[c] = tuple(parts)
    assignment = [pieces[c] for c in colours[:real]]
    split_flows = sum(1 for p in assignment if len(p) > 1)
    return Assignment(assignment, {"split_flows": split_flows,
                                   "subflows": sum(len(p) for p in assignment),
                                   "fractional_optimum": delta / n_alive})


def _padding(out: list[int], inn: list[int], delta: int) -> list[tuple[int, int]]:
    """Dummy edges that make every left (out) and right (in) degree equal to delta."""
    lefts = [i for i, d in enumerate(out) for _ in range(delta - d)]
    rights = [i for i, d in enumerate(inn) for _ in range(delta - d)]
    return list(zip(lefts, rights))
