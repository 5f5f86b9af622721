"""Euler partitions (planners/euler_partition.py) and the equitable colouring built on them
(planners/equitable.py): every vertex spreads its edges over the colours as evenly as
possible, on random multigraphs, odd degrees and colour counts that are not powers of two."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.planners.equitable import equitable_colours
from controller.planners.euler_partition import euler_colouring, euler_halves


def _spread(side: np.ndarray, colour: np.ndarray, k: int) -> bool:
    """Every vertex of ``side`` uses each of k colours floor(d/k) or ceil(d/k) times."""
    for v in np.unique(side):
        d = int((side == v).sum())
        used = np.bincount(colour[side == v], minlength=k)
        if len(used) > k or used.max() > -(-d // k) or used.min() < d // k:
            return False
    return True


edges = st.integers(1, 300).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 40), min_size=n, max_size=n),
    st.lists(st.integers(0, 40), min_size=n, max_size=n)))


@settings(max_examples=60, deadline=None)
@given(edges, st.integers(0, 5))
def test_euler_colouring_is_equitable(pair, levels):
    left, right = (np.array(x) for x in pair)
    colour = euler_colouring(left, right, levels)
    k = 1 << levels
    assert _spread(left, colour, k) and _spread(right, colour, k)


@settings(max_examples=60, deadline=None)
@given(edges, st.integers(1, 40))
def test_equitable_colours_with_any_number_of_colours(pair, k):
    left, right = (np.array(x) for x in pair)
    colour = equitable_colours(left, right, k)
    assert colour.min() >= 0 and colour.max() < k
    assert _spread(left, colour, k) and _spread(right, colour, k)


def test_a_vertexs_first_k_edges_take_distinct_colours():
    """The split into copies (input order, k edges a copy): a host's flows, listed together,
    get distinct colours (planes, NIC ports) as long as they fit."""
    rng = np.random.default_rng(3)
    left = np.repeat(np.arange(8), 7)
    right = rng.integers(0, 8, len(left))
    colour = equitable_colours(left, right, 3)
    for u in range(8):
        c = colour[left == u]
        assert len(set(c[:3].tolist())) == 3 and len(set(c[3:6].tolist())) == 3


def test_odd_leftovers_on_both_sides_meet_at_the_dummy_edge():
    """Three edges: every vertex odd, the spare edges paired through the dummy; still each
    vertex of degree 2 has one edge in each half."""
    half = euler_halves(np.array([0, 0, 1]), np.array([0, 1, 1]))
    assert half[0] != half[1] and half[1] != half[2]


def test_a_permutation_of_8192_hosts_is_coloured_properly_with_16_colours():
    """The request path's largest case (bench/request_path.json): degree 16 at every leaf."""
    rng = np.random.default_rng(1)
    left = np.repeat(np.arange(512), 16)
    right = rng.permutation(left)
    colour = equitable_colours(left, right, 16)
    for side in (left, right):
        assert (np.bincount(side * 16 + colour, minlength=512 * 16) == 1).all()
