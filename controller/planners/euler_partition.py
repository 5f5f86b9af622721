"""Equitable bipartite edge colouring with 2^m colours by Euler partitions, in numpy.

Why: ``auto``'s construction colours every tier of the fabric on the request path, and the
alternating-path colouring (``edge_coloring.bipartite_edge_colouring``) walks one Kempe path
per conflicting edge in Python: most of a k = 32 fat-tree's request before (issue 60,
bench/request_path.json). Halving needs no search. Pair the edges at every vertex (left and
right); each edge then has one partner at each end, so the pairs chain the edges into cycles
that alternate left and right pairs, of even length, and alternate edges of a cycle form the
two halves: every vertex of degree d keeps floor(d/2) or ceil(d/2) edges in each (Gabow's
Euler partition). Halving each half again, m times, gives 2^m colours with every vertex
using each floor(d/2^m) or ceil(d/2^m) times (ceil(ceil(d/2)/2) = ceil(d/4)): an equitable
colouring, proper when every degree is at most 2^m.

The cycles are found without walking them: sigma = (right partner) o (left partner) moves two
steps along a cycle, its orbits are the two halves of each cycle, and pointer jumping
labels every edge with the least edge of its orbit (O(log E) array steps). The edges left
unpaired at odd-degree vertices are paired with each other per side (as at one extra vertex,
whose balance does not matter), through one dummy edge when their count is odd.

Cost: O(E log E) numpy work per halving (two stable sorts, pointer jumping), m halvings.

References: H. N. Gabow, "Using Euler partitions to edge color bipartite multigraphs",
Int. J. Comput. Inf. Sci. 5 (1976) 345-355; R. Cole, J. Hopcroft, "On edge coloring bipartite
graphs", SIAM J. Comput. 11 (1982) 540-546.
"""
from __future__ import annotations

import numpy as np


def euler_colouring(left: np.ndarray, right: np.ndarray, levels: int) -> np.ndarray:
    """Colours in [0, 2^levels) for the edges (left[e], right[e]) of a bipartite multigraph
    (vertex ids >= 0), every vertex of degree d using each colour floor(d / 2^levels) or
    ceil(d / 2^levels) times (module docstring).

    >>> left = np.array([0, 0, 0, 0, 1, 1]); right = np.array([0, 1, 1, 2, 0, 2])
    >>> col = euler_colouring(left, right, 1)
    >>> [int((col[left == 0] == c).sum()) for c in (0, 1)]   # left vertex 0: 4 edges
    [2, 2]
    >>> bool(col[1] != col[2])                               # right vertex 1: 2 edges
    True
    """
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    colour = np.zeros(len(left), dtype=np.int64)
    if not len(left):
        return colour
    n_left, n_right = int(left.max()) + 1, int(right.max()) + 1
    for _ in range(levels):
        half = euler_halves(colour * n_left + left, colour * n_right + right)
        colour = 2 * colour + half
    return colour


def euler_halves(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """One halving: per edge 0 or 1, every vertex of degree d having floor(d/2) or
    ceil(d/2) edges of each (module docstring).

    >>> euler_halves(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])).tolist()
    [1, 0, 0, 1]
    """
    n = len(left)
    pl, pr = _partners(left, n), _partners(right, n)
    if pl[n] == n and pr[n] != n or pr[n] == n and pl[n] != n:  # pragma: no cover
        raise AssertionError("odd leftovers on one side only: the sides' edge counts differ")
    sigma = pr.take(pl)
    least = np.arange(n + 1)
    step = sigma
    while True:  # least[e]: the least edge within 2, 4, 8 ... steps of sigma from e
        np.minimum(least, least.take(step), out=least)
        if (least.take(sigma) == least).all():
            break
        step = step.take(step)
    return (least < least.take(pl))[:n].astype(np.int64)


def ranks_in_groups(vertex: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The edges in order of ``vertex`` (index order within a vertex), each one's rank at its
    vertex in that order, and the vertices' degrees. A radix sort where ids fit 16 bits.

    >>> [a.tolist() for a in ranks_in_groups(np.array([1, 0, 1, 1]))]
    [[1, 0, 2, 3], [0, 0, 1, 2], [1, 3]]
    """
    counts = np.bincount(vertex)
    key = vertex.astype(np.uint16) if len(counts) <= 1 << 16 else vertex
    order = np.argsort(key, kind="stable")
    rank = np.arange(len(vertex)) - (np.cumsum(counts) - counts).take(vertex.take(order))
    return order, rank, counts


def _partners(vertex: np.ndarray, n: int) -> np.ndarray:
    """Per edge (and a dummy edge n) the edge paired with it at its end ``vertex``: edges of a
    vertex in index order, two by two; the ones left over paired among themselves, the last
    with the dummy when their count is odd (else the dummy with itself)."""
    order, pos, counts = ranks_in_groups(vertex)
    even = (pos & 1) == 0
    paired = pos + 1 < counts.take(vertex.take(order))
    partner = np.empty(n + 1, dtype=np.int64)
    partner[n] = n
    i = np.flatnonzero(even & paired)
    partner[order[i]] = order[i + 1]
    partner[order[i + 1]] = order[i]
    spare = order[even & ~paired]
    if len(spare) % 2:
        spare = np.append(spare, n)
    partner[spare[0::2]] = spare[1::2]
    partner[spare[1::2]] = spare[0::2]
    return partner
