"""Layer 2 on Clos fabrics (issue 60 item 2): ``clos_auto`` leaves the fewest directed fabric
links at the max load that the layer-2 MILP (``clos_ilp_layer2``) proves, on three-tier and
two-plane fabrics with links and switches down; the chains (``clos_layer2``) never raise the
max load nor the links at it, and their bound is never above the MILP's optimum."""
import random

import pytest

from benchmarks.fabrics import with_failures
from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem
from controller.model.jobs import parse_job
from controller.planners import clos_auto as auto_module
from controller.planners.clos_auto import clos_auto, score
from controller.planners.clos_greedy import clos_greedy
from controller.planners.clos_ilp import clos_ilp_layer2
from controller.planners.clos_layer2 import fewer_at_max, fewer_below, layer2_bound

MILP_SECONDS = 30.0  # these instances prove in well under a second

FABRICS = {
    "fat-tree k=4": lambda: Clos.fat_tree(4),
    "fat-tree k=4, 2 planes": lambda: Clos.fat_tree(4, planes=2),
    "leaf-spine 4x8x4, 2 planes": lambda: Clos.leaf_spine(4, 8, 4, planes=2),
}


def instance(fabric: str, seed: int) -> ClosProblem:
    """Random traffic (1 to 3 flows per host) with 1% of the fabric links (at least 2) and a
    core (or a spine) down."""
    rnd = random.Random(seed)
    fab, _ = with_failures(FABRICS[fabric](), seed)
    hosts = list(fab.host_leaves)
    pairs = [(rnd.choice(hosts), rnd.choice(hosts)) for _ in range(rnd.randint(1, 3) * len(hosts))]
    job = parse_job({"id": "j", "flows": [{"src": a, "dst": b, "bytes": 1e6, "sport": i}
                                          for i, (a, b) in enumerate(pairs) if a != b]}, fab)
    return ClosProblem.build(fab, [job], skip_unroutable=True)


CASES = [(f, seed) for f in FABRICS for seed in range(4)]


@pytest.fixture
def exact_budget(monkeypatch):
    """The layer-2 MILP inside auto with the test's time limit: the result must not depend
    on the load of the machine."""
    monkeypatch.setattr(auto_module, "LAYER2_MILP_S", MILP_SECONDS, raising=False)


@pytest.mark.parametrize("fabric, seed", CASES)
def test_auto_leaves_the_milp_optimum_at_the_max(fabric, seed, exact_budget):
    p = instance(fabric, seed)
    r = clos_auto(p, time_limit=MILP_SECONDS)
    alpha, count = score(p, r)
    milp = clos_ilp_layer2(p, alpha, MILP_SECONDS, incumbent=clos_greedy_at(p, r)).info
    assert milp["status"] == "optimal"
    assert count == milp["links_at_max"], (fabric, seed, count, milp["links_at_max"])
    assert r.info["links_at_max"] == count
    assert r.info["optimal_layers"]["links_at_max"] == r.info["optimal"]


def clos_greedy_at(p, r):
    """A second incumbent for the MILP, not auto's own routing when the greedy's max is the
    same (the MILP then proves the optimum from elsewhere), else auto's."""
    g = clos_greedy(p)
    return g if score(p, g)[0] == score(p, r)[0] else r


@pytest.mark.parametrize("fabric, seed", CASES)
def test_chains_never_worse_and_the_bound_holds(fabric, seed):
    p = instance(fabric, seed)
    g = clos_greedy(p)
    alpha, count = score(p, g)
    better = fewer_at_max(p, g)
    new_alpha, new_count = score(p, better)
    assert new_alpha < alpha or (new_alpha == alpha and new_count <= count)
    assert new_alpha < alpha or count - new_count == better.info["layer2"]["cleared"]
    assert g.path == clos_greedy(p).path  # the input is not changed
    milp = clos_ilp_layer2(p, new_alpha, MILP_SECONDS, incumbent=better).info
    assert layer2_bound(p, new_alpha) <= milp["links_at_max"] <= new_count


def test_a_gap_the_chains_leave_is_closed_by_the_milp(exact_budget):
    """A two-plane fat-tree where moving one flow needs two others moved (no single chain):
    the MILP inside auto reaches the optimum and proves it."""
    found = None
    for seed in range(40):
        p = instance("fat-tree k=4, 2 planes", seed)
        g = clos_auto(p)
        if "layer2_ilp" in g.info and g.info["layer2_ilp"]["status"] == "optimal":
            found = g
            break
    assert found is not None
    assert found.info["optimal_layers"]["links_at_max"] == found.info["optimal"]
    assert found.info["links_at_max"] == found.info["links_at_max_lower_bound"]


def test_leaf_spine_as_a_clos_matches_the_two_tier_layer_2():
    """The parity instances' leaf-spine with a spine down: Clos auto has the two-tier auto's
    links at the max (tests/test_parity.py checks all 27)."""
    from tests.test_parity import INSTANCES, layer, loads
    for inst in INSTANCES[9:18]:  # the spine-down fabric
        two, clos = loads(*inst, "auto")
        assert layer("links_at_max", two) == layer("links_at_max", clos), inst


@pytest.mark.parametrize("fabric, seed", CASES)
def test_chains_below_the_max_keep_the_top_and_never_worsen_the_vector(fabric, seed):
    """``fewer_below``: the max stays, no more links at it (bundles' members rebalanced may
    leave fewer), the sorted load vector gets no worse."""
    from controller.model.clospaths import link_loads
    p = instance(fabric, seed)
    g = clos_greedy(p)
    alpha = score(p, g)[0]

    def vector(r):
        v = link_loads(p, r)[p.links.tier > 0]
        return sorted((round(float(x), 9) for x in v if x > 1e-9), reverse=True)

    out = fewer_below(p, g, alpha)
    report = out.info["layer2_below"]
    assert score(p, out)[0] == alpha and score(p, out)[1] <= score(p, g)[1]
    assert g.path == clos_greedy(p).path  # the input is not changed
    before, after = vector(g), vector(out)
    width = max(len(before), len(after))
    assert after + [0.0] * (width - len(after)) <= before + [0.0] * (width - len(before))
    assert all(level < alpha for level in report["levels"])
