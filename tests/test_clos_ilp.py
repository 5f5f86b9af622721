"""The exact path ILP on Clos fabrics (planners.clos_ilp) against clos_auto and the bound."""
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem, link_loads, lower_bound
from controller.model.jobs import parse_job
from controller.planners.clos_auto import clos_auto, score
from controller.planners.clos_ilp import clos_ilp


def instance(seed, k, planes=1, bundle=1, failures=None, core_gbps=100):
    """A k-ary fat-tree with random failed links and random traffic (1 to 3 flows per host)."""
    rnd = random.Random(seed)
    doc = Clos.fat_tree(k, planes=planes).to_dict()
    doc["bundle"] = {"leaf": bundle, "core": bundle}
    doc["link_gbps"] = {"host": 100, "leaf": 100, "core": core_gbps}
    fab = Clos.from_dict(doc)
    links = [[l, a] for p in fab.planes for i, l in enumerate(p.leaves)
             for a in p.aggs[p.pod_of_leaf[i]]]
    links += [[p.aggs[pod][g], c] for p in fab.planes for pod in range(len(p.pods))
              for g, grp in enumerate(p.cores) for c in grp]
    doc["down"] = rnd.sample(links, rnd.randint(0, 4) if failures is None else failures)
    fab = Clos.from_dict(doc)
    hosts = list(fab.host_leaves)
    pairs = [(rnd.choice(hosts), rnd.choice(hosts)) for _ in range(rnd.randint(1, 3) * len(hosts))]
    job = parse_job({"id": "j", "flows": [{"src": a, "dst": b, "bytes": 1e6, "sport": i}
                                          for i, (a, b) in enumerate(pairs) if a != b]}, fab)
    return ClosProblem.build(fab, [job], skip_unroutable=True)


def check(problem, r):
    """Every flow placed on alive links; the info's loads are the routing's."""
    L = problem.links
    assert all(q >= 0 and all(L.alive[x] for x in path) for q, path in zip(r.plane, r.path))
    assert r.info["max_link_load"] == score(problem, r)[0]
    if r.info["exact"]:
        assert r.info["objective"] == r.info["max_link_load"]
    assert r.info["bound"] <= r.info["objective"] + 1e-9


@pytest.mark.parametrize("k", [4, 6])
@pytest.mark.parametrize("bundle", [1, 2])
def test_ilp_agrees_with_auto_on_small_fat_trees(k, bundle):
    """One plane, random traffic, failed links: auto is optimal on every instance here, and
    the ILP proves it (by the bound or by the solver)."""
    for seed in range(6):
        p = instance(seed, k, bundle=bundle)
        r = clos_ilp(p, 30)
        check(p, r)
        assert r.info["proved"] and r.info["status"] == "optimal" and r.info["exact"]
        assert r.info["objective"] == score(p, clos_auto(p))[0] >= lower_bound(p)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from([4, 6]), st.integers(1, 2), st.integers(1, 2), st.integers(0, 10**6))
def test_auto_never_below_the_proven_optimum_nor_the_bound(k, planes, bundle, seed):
    p = instance(seed, k, planes, bundle)
    r = clos_ilp(p, 30)
    check(p, r)
    auto = clos_auto(p)
    alpha = score(p, auto)[0]
    assert alpha >= lower_bound(p) - 1e-9
    if r.info["proved"]:
        assert alpha >= r.info["objective"] - 1e-9
        assert auto.info["optimal"] <= (alpha == r.info["objective"])  # optimal claims hold
    assert r.info["max_link_load"] <= alpha + 1e-9  # never worse than its incumbent


def test_ilp_closes_a_gap_auto_reports():
    """Two planes, random traffic: auto's local search stops at 3 where 2 is optimal; the
    ILP finds 2 and proves it, auto reports its gap to the bound honestly."""
    p = instance(48, 4, planes=2, bundle=1)
    auto = clos_auto(p)
    r = clos_ilp(p, 30)
    check(p, r)
    assert not auto.info["optimal"] and score(p, auto)[0] == 3.0 and auto.info["gap"] == 1.0
    assert r.info["proved"] and r.info["objective"] == 2.0 == lower_bound(p)
    assert r.info["incumbent_from"] == "solver"
    assert (link_loads(p, r)[p.links.tier > 0]).max() == 2.0


def test_pooled_bundles_of_faster_links_are_a_stated_relaxation():
    p = instance(3, 4, bundle=2, core_gbps=200, failures=0)
    r = clos_ilp(p, 30)
    check(p, r)
    assert not r.info["exact"] and r.info["objective"] <= r.info["max_link_load"]


@pytest.mark.parametrize("bad", [0, -1, float("nan"), True, "5"])
def test_bad_time_limits_are_refused(bad):
    with pytest.raises(InputError, match="time limit"):
        clos_ilp(instance(0, 4), bad)
