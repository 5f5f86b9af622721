"""``split``'s shortcut: where ``auto``'s unsplit routing already meets a bound no split beats
(the floor, the cut bound; by bytes the byte cut bound), the plan is that routing and no LP
is built; elsewhere the LP runs as before."""
import random
from unittest import mock

import numpy as np
import pytest

from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem, lower_bound
from controller.model.cuts import split_bound
from controller.model.loads import AT_MAX_TOL, links_at_max
from controller.planners import clos_split as cs
from controller.planners.clos_auto import clos_auto, score
from controller.planners.clos_split_bound import busiest
from controller.planners.clos_split_routing import split_link_loads, split_score
from controller.planners.objective import iteration_bytes
from tests.clos_checks import flows_job


def shift(fabric, per_leaf):
    """The first ``per_leaf`` hosts of every leaf send to the same hosts of the next leaf."""
    leaves = sorted({leaf for leaf in fabric.host_leaves.values()})
    by_leaf = {leaf: sorted(h for h, x in fabric.host_leaves.items() if x == leaf)
               for leaf in leaves}
    pairs = [(by_leaf[a][m], by_leaf[leaves[(i + 1) % len(leaves)]][m])
             for i, a in enumerate(leaves) for m in range(per_leaf)]
    return ClosProblem.build(fabric, [flows_job(fabric, pairs)])


def busiest_unsplit(p):
    """The busiest link's seconds of ``auto``'s unsplit routing, by the byte LP's weights."""
    weight = np.array(iteration_bytes(p)) / p.fabric.link_bps("leaf")
    return busiest(p, cs.clos_split(p), weight)


def no_lp(*_a, **_k):
    raise AssertionError("an LP was built")


@pytest.mark.parametrize("fabric, per_leaf, why", [
    (Clos.leaf_spine(8, 16, 8, planes=4), 8, "the floor"),       # 8 flows, 32 uplinks a leaf
    (Clos.leaf_spine(4, 8, 12, planes=2), 8, "the floor"),       # 8 flows, 8 uplinks
    (Clos.leaf_spine(2, 6, 8, planes=2), 8, "the cut bound"),    # 8 flows, 4 uplinks: 2.0
    (Clos.fat_tree(4, hosts_per_leaf=4), 4, "the cut bound")])   # 4 flows, 2 uplinks: 2.0
def test_at_the_bound_the_unsplit_routing_is_the_plan_without_any_lp(fabric, per_leaf, why):
    p = shift(fabric, per_leaf)
    optimum = cs.fractional_optimum(p)  # the LP itself, before the shortcut hides it
    start = clos_auto(p)
    with mock.patch.object(cs, "_lp", no_lp):
        r = cs.clos_split(p)
    assert r.info["split"] == f"unsplit routing at {why}: no LP"
    assert split_score(p, r)[0] == pytest.approx(optimum, abs=1e-6) == r.info["max_link_load"]
    assert r.info["fractional_optimum"] == pytest.approx(optimum, abs=1e-6)
    assert r.info["optimal"] and r.info["split_flows"] == 0
    assert all(len(x) == 1 for x in r.parts)
    assert (r.plane, r.middle, r.path) == (start.plane, start.middle, start.path)


def test_above_the_bound_the_lp_still_splits():
    """3 flows over 2 uplinks on two planes: the cut bound 1.5 is below ``auto``'s 2."""
    fab = Clos.leaf_spine(1, 4, 4, planes=2)
    p = ClosProblem.build(fab, [flows_job(fab, [(f"h0_{k}", f"h1_{k}") for k in range(3)])])
    assert score(p, clos_auto(p))[0] == 2.0 and split_bound(p) == 1.5
    with mock.patch.object(cs, "_lp", no_lp), pytest.raises(AssertionError, match="LP"):
        cs.clos_split(p)
    r = cs.clos_split(p)
    assert "split" not in r.info and r.info["split_flows"] == 1
    assert r.info["max_link_load"] == pytest.approx(1.5)


def test_a_dead_uplink_raises_the_bound_and_the_lp_runs():
    """8 flows out of a leaf with 7 alive uplinks: the cut bound 8/7 is above the floor."""
    p = shift(Clos.leaf_spine(4, 6, 8, planes=2).with_down({("l0_p0", "s0_p0")}), 8)
    assert split_bound(p) == pytest.approx(8 / 7)
    r = cs.clos_split(p, max_parts=None)
    assert "split" not in r.info and r.info["max_link_load"] == pytest.approx(8 / 7)


@pytest.mark.parametrize("fabric", [
    Clos.fat_tree(4, hosts_per_leaf=4), Clos.leaf_spine(4, 16, 6, planes=2),
    Clos.fat_tree(8).with_down({("l0", "a0_0"), ("l9", "a2_3")})])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_cut_bound_is_below_the_fractional_optimum_and_the_unsplit_bound(fabric, seed):
    rnd = random.Random(seed)
    hosts = list(fabric.host_leaves)
    pairs = [(rnd.choice(hosts), rnd.choice(hosts)) for _ in range(2 * len(hosts))]
    p = ClosProblem.build(fabric, [flows_job(fabric, pairs)], skip_unroutable=True)
    bound = split_bound(p)
    assert 0 < bound <= cs.fractional_optimum(p) + 1e-9
    assert bound <= lower_bound(p) + 1e-9 and lower_bound(p) < bound + 1  # rounded up


def test_by_bytes_at_the_byte_bound_no_lp():
    """Every host sends one flow of one size, as many flows as uplinks: one flow per uplink
    is the byte LP's optimum too, so no LP, and the prediction ranks what is left."""
    p = shift(Clos.leaf_spine(4, 6, 8, planes=2), 8)
    with mock.patch.object(cs, "_lp", no_lp):
        r = cs.clos_split(p, objective="jobs")
    assert r.info["split_bytes"] in ("flows at the byte cut bound: no LP",
                                     "jobs-unsplit at the byte cut bound: no LP")
    assert r.info["chosen"] in ("flows", "jobs-unsplit") and set(r.info["candidates_mean"]) == \
        {"flows", "jobs-unsplit"}
    assert r.info["max_link_load"] == 1.0 and r.info["worst_slowdown"] == pytest.approx(1.0)
    # the byte LP, forced, finds no lower max busy time than the bound taken
    with mock.patch.object(cs, "byte_bound_met", lambda *a: (None, 0.0)):
        full = cs.clos_split(p, objective="jobs")
    assert full.info["byte_fractional_optimum"] == pytest.approx(
        r.info["byte_fractional_optimum"], rel=1e-6)
    assert r.info["mean_slowdown"] <= full.info["mean_slowdown"] + 1e-9


def test_by_bytes_below_the_floor_the_byte_lp_still_runs():
    """Fewer flows than uplinks: the byte LP (no floor) spreads them, the bound is not met."""
    p = shift(Clos.leaf_spine(8, 6, 8, planes=2), 2)
    assert cs.clos_split(p).info["split"] == "unsplit routing at the floor: no LP"
    with mock.patch.object(cs, "_lp", no_lp), pytest.raises(AssertionError, match="LP"):
        cs.clos_split(p, objective="jobs")
    r = cs.clos_split(p, objective="jobs")
    assert "split_bytes" not in r.info and "bytes" in r.info["candidates_mean"]
    assert r.info["byte_fractional_optimum"] < busiest_unsplit(p)



def random_problem(fabric, seed, factor):
    rnd = random.Random(seed)
    hosts = list(fabric.host_leaves)
    pairs = [(rnd.choice(hosts), rnd.choice(hosts)) for _ in range(int(factor * len(hosts)))]
    return ClosProblem.build(fabric, [flows_job(fabric, pairs)], skip_unroutable=True)


def test_at_the_cut_bound_the_links_at_the_max_are_those_every_optimum_holds():
    """Above the floor the shortcut keeps the LP's second layer: ``auto`` at the cut bound
    with its links at the max all in cuts at the bound is the plan, as many cells held as the
    LPs find (the shortcut withheld), as many links at the max as the LPs' plan."""
    p = random_problem(Clos.leaf_spine(2, 8, 4, planes=2), 4, 1.5)
    with mock.patch.object(cs, "_lp", no_lp):
        r = cs.clos_split(p)
    assert r.info["split"] == "unsplit routing at the cut bound: no LP"
    with mock.patch.object(cs, "unsplit_at_bound", lambda *a: None):
        lp = cs.clos_split(p)
    assert lp.info["max_link_load"] == pytest.approx(r.info["max_link_load"])
    assert r.info["cells_held_at_max"] == lp.info["cells_held_at_max"] == \
        links_at_max(split_link_loads(p, r)[p.links.tier > 0], AT_MAX_TOL) == \
        links_at_max(split_link_loads(p, lp)[p.links.tier > 0], AT_MAX_TOL)


@pytest.mark.parametrize("fabric, seed, factor", [
    (Clos.fat_tree(4, hosts_per_leaf=4), 1, 1), (Clos.leaf_spine(2, 8, 4, planes=2), 2, 1)])
def test_at_the_cut_bound_with_more_links_at_the_max_the_lp_runs(fabric, seed, factor):
    """``auto`` at the cut bound but with links at the max outside the cuts at the bound:
    the LP runs and leaves fewer links there."""
    p = random_problem(fabric, seed, factor)
    start = clos_auto(p)
    key = score(p, start)
    assert key[0] == pytest.approx(split_bound(p)) and split_bound(p) > 1
    r = cs.clos_split(p)
    assert "split" not in r.info and r.info["max_link_load"] == pytest.approx(key[0])
    assert links_at_max(split_link_loads(p, r)[p.links.tier > 0], AT_MAX_TOL) < key[1]
