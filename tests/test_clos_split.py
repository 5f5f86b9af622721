"""``clos_split``'s second layer (the gap tests/test_parity.py shows): at the fractional optimum of
the max link load the path LP leaves at the max only the links that every optimum leaves there,
so never more than the two-tier kernel on a single two-tier plane; and when the bound on parts
loses the optimum, never a higher max than the former objective (the shares on preferred
options alone)."""
import random
from unittest import mock

import numpy as np
import pytest
from scipy.optimize import linprog
from scipy.sparse import coo_matrix, hstack, identity

from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem
from controller.model.loads import AT_MAX_TOL, links_at_max
from controller.planners import clos_split as cs
from controller.planners.clos_split_routing import split_link_loads, split_score
from tests.clos_checks import flows_job
from tests.test_parity import INSTANCES, layer, loads


def random_pairs(fabric, seed, factor):
    rnd = random.Random(seed)
    hosts = list(fabric.host_leaves)
    pairs = [(rnd.choice(hosts), rnd.choice(hosts)) for _ in range(int(factor * len(hosts)))]
    return ClosProblem.build(fabric, [flows_job(fabric, pairs)], skip_unroutable=True)


def fabric_loads(problem, routing) -> np.ndarray:
    return split_link_loads(problem, routing)[problem.links.tier > 0]


def held_at_the_max(problem) -> int:
    """The cells at the fractional optimum in every optimum, found apart: LPs that maximise the
    room (at most 1) under alpha of the cells not yet seen below it, until none gains room."""
    com, first = cs.commodities(problem)
    opts = cs._Options(problem, first)
    demand = np.bincount(com, minlength=len(first)).astype(float)
    cap = cs.cell_capacity(problem)
    alpha = cs.fractional_optimum(problem)
    V = len(opts.owner)
    var, cell = np.repeat(np.arange(V), 4), opts.rows.ravel()
    used, row = np.unique(cell[cell >= 0], return_inverse=True)
    K = len(used)
    a = coo_matrix((1.0 / cap[cell[cell >= 0]], (row, var[cell >= 0])), shape=(K, V))
    a_ub = hstack([a, identity(K)]).tocsr()
    a_eq = coo_matrix((np.ones(V), (opts.owner, np.arange(V))), shape=(len(demand), V + K))
    maybe = np.ones(K, dtype=bool)
    while True:
        res = linprog(np.concatenate([np.zeros(V), -maybe.astype(float)]), A_ub=a_ub,
                      b_ub=np.full(K, alpha + 1e-9), A_eq=a_eq, b_eq=demand,
                      bounds=[(0, None)] * V + [(0, 1.0 if m else 0.0) for m in maybe],
                      method="highs-ds")
        below = maybe & (res.x[V:] > 1e-7)
        if not below.any():
            return int(maybe.sum())
        maybe &= ~below


def test_no_more_links_at_the_max_than_the_two_tier_kernel():
    """tests/test_parity.py's instances, the kernel withheld from the planner: the same max,
    and at most the kernel's links at it (the same wherever the kernel has the fewest)."""
    more = []
    for instance in INSTANCES:
        two, clos = loads(*instance, "split")
        (a, n), (b, m) = layer("links_at_max", two), layer("links_at_max", clos)
        assert a == b, instance
        if m > n:
            more.append((*instance, n, m))
    assert not more


@pytest.mark.parametrize("name, fabric, factor", [
    ("fat-tree", Clos.fat_tree(4, hosts_per_leaf=4), 2),
    ("fat-tree k=8, links down",
     Clos.fat_tree(8).with_down({("l0", "a0_0"), ("l9", "a2_3"), ("l20", "a5_1")}), 2),
    ("two planes", Clos.leaf_spine(4, 16, 6, planes=2), 1.5)])
@pytest.mark.parametrize("seed", [0, 1])
def test_only_the_links_every_optimum_holds_stay_at_the_max(name, fabric, factor, seed):
    p = random_pairs(fabric, seed, factor)
    r = cs.clos_split(p, max_parts=None)
    fab = fabric_loads(p, r)
    assert np.isclose(fab.max(), cs.fractional_optimum(p), atol=1e-6)
    held = held_at_the_max(p)
    assert links_at_max(fab, AT_MAX_TOL) == r.info["cells_held_at_max"] == held


def test_at_the_floor_nothing_is_held_and_nothing_split():
    """One flow per link at most: a link at the max carries a flow at its NIC's rate."""
    fab = Clos.fat_tree(4, hosts_per_leaf=2)
    hosts = list(fab.host_leaves)
    p = ClosProblem.build(fab, [flows_job(fab, list(zip(hosts, hosts[4:] + hosts[:4])))])
    r = cs.clos_split(p)
    assert r.info["fractional_optimum"] == 1.0 and r.info["cells_held_at_max"] is None
    assert r.info["split_flows"] == 0


@pytest.mark.parametrize("seed", [1, 6, 8])
def test_when_the_parts_bound_loses_the_optimum_the_former_objective_is_a_floor(seed):
    """Two planes of 4 spines, at most 2 parts: the bounded plans miss the optimum, and the
    plan is never behind the former algorithm's (no bounds per cell, the shares on preferred
    options), which is one of its candidates, on the max and then the links at it."""
    p = random_pairs(Clos.leaf_spine(4, 16, 6, planes=2), seed, 1.5)
    r = cs.clos_split(p, max_parts=2)
    lp = cs._lp
    with mock.patch.object(cs, "_below_max", lambda *a: (a[4] + cs._SLACK, None)), \
            mock.patch.object(cs, "_lp", lambda *a, **k: lp(*a, **{**k, "stay": False})):
        former = cs.clos_split(p, max_parts=2)
    assert not former.info["optimal"] and max(len(x) for x in r.parts) <= 2
    assert split_score(p, r) <= split_score(p, former)
