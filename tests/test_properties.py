"""Property tests on fabrics where every leaf sees the same alive spines."""
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.model.clos import Clos
from controller.model.jobs import Flow, Job
from controller.model.loads import link_loads
from controller.planners.edge_coloring import bipartite_edge_colouring
from controller.planners.plan import make_plan
from tests.helpers import property_twins, two_tier_view


@st.composite
def instances(draw):
    spines = draw(st.integers(1, 6))
    failed = draw(st.integers(0, spines - 1))
    leaves = draw(st.integers(2, 7))
    hosts = draw(st.integers(1, 4))
    fabric = Clos.generate(spines, leaves, hosts, 100.0, failed).as_leaf_spine()
    names = list(fabric.hosts)
    n = draw(st.integers(1, 40))
    pairs = draw(st.lists(st.tuples(st.sampled_from(names), st.sampled_from(names))
                          .filter(lambda p: p[0] != p[1]), min_size=1, max_size=n))
    job = Job("j", explicit=[Flow("j", s, d, 1.0) for s, d in pairs])
    return fabric, [job]


def _alpha(plan):
    up, down = link_loads(*two_tier_view(plan))
    return max(up.max(initial=0), down.max(initial=0))


def greedy_within_twice_the_lower_bound(inst):
    fabric, jobs = inst
    plan = make_plan(fabric, jobs, "greedy")
    lb = two_tier_view(plan)[0].lower_bound()
    assert _alpha(plan) <= 2 * lb
    # the sharper bound of paper.md 5.1: floor((2 Delta - 2) / S') + 1
    out, inn = two_tier_view(plan)[0].degrees()
    delta, alive = max(out + inn), len(fabric.alive_spines())
    if delta:
        assert _alpha(plan) <= (2 * delta - 2) // alive + 1


def edge_coloring_reaches_the_lower_bound(inst):
    fabric, jobs = inst
    plan = make_plan(fabric, jobs, "edge-coloring")
    assert _alpha(plan) == two_tier_view(plan)[0].lower_bound()


def split_reaches_the_fractional_bound(inst):
    fabric, jobs = inst
    plan = make_plan(fabric, jobs, "split", max_parts=None)  # the bound needs any number of parts
    out, inn = two_tier_view(plan)[0].degrees()
    delta, alive = max(out + inn), len(fabric.alive_spines())
    if delta:
        assert _alpha(plan) <= max(delta / alive, 1) + 1e-9


# 30 examples of each property of a planner in the fast tier, the counts of before in the slow
# tier (issue 60)
test_greedy_within_twice_the_lower_bound, test_greedy_within_twice_the_lower_bound_in_full = \
    property_twins((instances(),), 30, 150, deadline=None)(greedy_within_twice_the_lower_bound)
test_edge_coloring_reaches_the_lower_bound, test_edge_coloring_reaches_the_lower_bound_in_full = \
    property_twins((instances(),), 30, 150, deadline=None)(edge_coloring_reaches_the_lower_bound)
test_split_reaches_the_fractional_bound, test_split_reaches_the_fractional_bound_in_full = \
    property_twins((instances(),), 30, 100, deadline=None)(split_reaches_the_fractional_bound)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=60))
def test_colouring_uses_max_degree_colours(edges):
    colours = bipartite_edge_colouring(edges)
    if not edges:
        return
    delta = max(max(sum(1 for e in edges if e[0] == u) for u, _ in edges),
                max(sum(1 for e in edges if e[1] == v) for _, v in edges))
    assert all(0 <= c < delta for c in colours)
    assert len({(u, c) for (u, _), c in zip(edges, colours)}) == len(edges)
    assert len({(v, c) for (_, v), c in zip(edges, colours)}) == len(edges)
