import random
import subprocess
import sys

import pytest

from controller.errors import InputError
from controller.model.fabric import spine_list
from controller.model.loads import link_loads, sorted_load_vector
from controller.model.problem import Problem
from controller.planners.auto import auto
from controller.planners.ecmp import flow_hash
from controller.planners.edge_coloring import bipartite_edge_colouring
from controller.planners.greedy import group_order
from controller.planners.ilp import ilp
from controller.planners.plan import make_plan
from controller.planners.registry import names
from tests.helpers import fabric, flows_job, ring_job, two_tier_view

ALL = names()  # every name of the registry: each runs on a single two-tier plane


def permutation_job(f, shift=1, jid="p"):
    """Host k of leaf i sends to host k of leaf i+shift: full leaves talk to one leaf each."""
    n = len(f.leaves)
    hosts_per_leaf = len(f.hosts) // n
    pairs = [(f"h{i}_{k}", f"h{(i + shift) % n}_{k}") for i in range(n)
             for k in range(hosts_per_leaf)]
    return flows_job(pairs, jid=jid)


def check_valid(problem, assignment):
    assert len(assignment.parts) == len(problem)
    for k, parts in enumerate(assignment.parts):
        assert sum(share for _, share in parts) == pytest.approx(1.0)
        for s, share in parts:
            assert share > 0
            assert problem.usable[k] >> s & 1, "flow placed on a spine with a dead link"


@pytest.mark.parametrize("algorithm", ALL)
def test_valid_and_deterministic(algorithm):
    f = fabric(4, 6, 4)
    jobs = [permutation_job(f, 1, "a"), permutation_job(f, 2, "b")]
    p1 = make_plan(f, jobs, algorithm)
    p2 = make_plan(f, jobs, algorithm)
    check_valid(*two_tier_view(p1))
    assert two_tier_view(p1)[1].parts == two_tier_view(p2)[1].parts


@pytest.mark.parametrize("algorithm", ALL)
def test_failed_links_and_spines_respected(algorithm):
    f = fabric(4, 6, 4, failed_spines=1, down=[("l0", "s0"), ("l3", "s1")])
    jobs = [permutation_job(f, 1, "a"), permutation_job(f, 3, "b")]
    plan = make_plan(f, jobs, algorithm)
    check_valid(*two_tier_view(plan))
    used = {s for parts in two_tier_view(plan)[1].parts for s, _ in parts}
    assert 3 not in used


@pytest.mark.parametrize("algorithm", ALL)
def test_unreachable_pair_names_it(algorithm):
    f = fabric(2, 3, 1, down=[("l0", "s0"), ("l1", "s1")])
    with pytest.raises(InputError, match=r"no alive path from h0_0 to h1_0 \(job j; leaves l0 "
                                         "and l1\\)"):
        make_plan(f, [flows_job([("h0_0", "h1_0")])], algorithm)


def test_all_spines_down_is_an_error():
    f = fabric(2, 2, 1, failed_spines=2)
    with pytest.raises(InputError, match="no alive path from h0_0 to h1_0"):
        make_plan(f, [flows_job([("h0_0", "h1_0")])], "greedy")


def test_intra_leaf_flows_left_out():
    f = fabric(2, 2, 2)
    plan = make_plan(f, [flows_job([("h0_0", "h0_1"), ("h0_0", "h1_0")])], "greedy")
    routes = plan.routes()
    assert routes[0]["spine"] is None
    assert routes[1]["spine"] in f.spines
    assert len(plan.problem) == 1


def test_greedy_group_order_and_tie_break():
    f = fabric(3, 4, 3)
    # leaf 0 sends three flows (largest group), leaf 1 one; ties go to the lowest spine
    job = flows_job([("h1_0", "h2_0"), ("h0_0", "h2_1"), ("h0_1", "h3_0"), ("h0_2", "h3_1")])
    problem = Problem.build(f, [job])
    assert group_order(problem) == [1, 2, 3, 0]
    plan = make_plan(f, [job], "greedy")
    # U_l0 first: s0, s1, s2 in turn; then h1_0 -> h2_0 meets down[s0][l2] = 1 -> s1 is free
    assert two_tier_view(plan)[1].spines() == [1, 0, 1, 2]


def test_greedy_hand_case_loads():
    f = fabric(2, 3, 4)
    job = flows_job([(f"h0_{k}", f"h1_{k}") for k in range(4)])
    plan = make_plan(f, [job], "greedy")
    up, down = link_loads(*two_tier_view(plan))
    assert up[0].tolist() == [2, 2] and down[1].tolist() == [2, 2]
    assert plan.to_dict()["max_link_load"] == 2


def test_ecmp_hash_is_stable_across_processes():
    code = ("from controller.planners.ecmp import flow_hash;"
            "print(flow_hash('10.0.0.1','10.0.0.2',17,49152,4791,3))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={"PYTHONHASHSEED": "random", "PYTHONPATH": "."})
    assert int(out.stdout) == flow_hash("10.0.0.1", "10.0.0.2", 17, 49152, 4791, 3)


def test_ecmp_salt_and_ports_change_the_draw():
    f = fabric(8, 8, 4)
    job = permutation_job(f)
    a = two_tier_view(make_plan(f, [job], "ecmp", salt=0))[1].spines()
    b = two_tier_view(make_plan(f, [job], "ecmp", salt=1))[1].spines()
    assert a != b
    assert set(a) <= set(range(8))


def test_edge_colouring_is_proper_on_multigraph():
    edges = [(0, 0), (0, 0), (0, 1), (1, 0), (1, 1), (2, 1), (2, 2), (0, 2), (1, 2), (2, 0)]
    colours = bipartite_edge_colouring(edges)
    delta = 4  # left vertex 0 has 4 edges
    assert all(0 <= c < delta for c in colours)
    for side in (0, 1):
        seen = set()
        for (e, c) in zip(edges, colours):
            assert (e[side], c) not in seen
            seen.add((e[side], c))


def test_edge_coloring_reaches_lower_bound_with_failed_spines():
    f = fabric(4, 4, 7, failed_spines=1)
    jobs = [permutation_job(f, 1, "a")]
    plan = make_plan(f, jobs, "edge-coloring")
    assert plan.to_dict()["max_link_load"] == two_tier_view(plan)[0].lower_bound() == 3


def test_ilp_reports_status_and_beats_or_ties_greedy():
    f = fabric(3, 5, 4, down=[("l0", "s0")])
    jobs = [permutation_job(f, 1, "a"), permutation_job(f, 2, "b")]
    greedy = make_plan(f, jobs, "greedy").to_dict()["max_link_load"]
    plan = make_plan(f, jobs, "ilp", time_limit=30)  # clos_ilp on the plane's Clos
    info, doc = plan.routing.info, plan.to_dict()
    assert info["status"] in {"optimal", "time_limit"}
    assert info["objective"] == doc["max_link_load"] <= greedy
    assert info["bound"] <= info["objective"]
    if info["status"] == "optimal":
        assert info["gap"] == 0 and info["optimal_layers"]["max_link_load"]
    layer2 = info["layer2"]  # then the fewest links at that max, reported alike
    assert layer2["status"] in {"optimal", "time_limit"}
    assert layer2["bound"] <= layer2["links_at_max"] == info["links_at_max"] == doc["links_at_max"]
    assert info["optimal_layers"]["links_at_max"] == (info["proved"] and layer2["proved"])


def test_ilp_solver_path_finds_optimum_below_greedy():
    # a case where greedy is not optimal: the ILP must solve it, not stop at the bound
    f = fabric(2, 4, 3)
    pairs = [("h0_1", "h1_1"), ("h0_2", "h3_0"), ("h2_0", "h1_0"), ("h1_2", "h1_1"),
             ("h2_0", "h0_0"), ("h1_0", "h0_0"), ("h1_2", "h1_0"), ("h1_2", "h2_1")]
    job = flows_job(pairs)
    assert make_plan(f, [job], "greedy").to_dict()["max_link_load"] == 2
    plan = make_plan(f, [job], "ilp", time_limit=30)
    info = plan.routing.info
    assert info["status"] == "optimal" and info["proved"]
    assert plan.to_dict()["max_link_load"] == 1 == two_tier_view(plan)[0].lower_bound()
    kernel = ilp(two_tier_view(plan)[0], 30)  # auto's two-tier ILP stage, from the greedy
    assert kernel.info["status"] == "optimal" and kernel.info["incumbent_from"] == "solver"
    assert kernel.info["incumbent"] == 1


def test_split_reaches_fractional_optimum_and_splits_few():
    f = fabric(4, 4, 5)  # Delta = 5, S' = 4: unsplit optimum 2, fractional 1.25
    job = permutation_job(f)
    plan = make_plan(f, [job], "split")
    check_valid(*two_tier_view(plan))
    assert plan.to_dict()["max_link_load"] == pytest.approx(1.25)
    assert make_plan(f, [job], "edge-coloring").to_dict()["max_link_load"] == 2
    info = plan.routing.info
    # only the one leftover matching (one flow per leaf, 4 leaves) is split, in 4 parts of 1/4
    assert info["split_flows"] == 4
    assert all(len(p) == 4 for p in two_tier_view(plan)[1].parts if len(p) > 1)
    route = next(r for r in plan.routes() if "split" in r)
    assert [x["share"] for x in route["split"]] == pytest.approx([0.25] * 4)


def test_split_does_not_split_when_unsplit_is_one_per_link():
    f = fabric(4, 4, 3)
    plan = make_plan(f, [permutation_job(f)], "split")
    assert not two_tier_view(plan)[1].is_split()
    assert plan.to_dict()["max_link_load"] == 1


def test_split_with_a_single_link_down_beats_the_unsplit_optimum():
    f = fabric(4, 4, 5, down=[("l0", "s0")])
    plan = make_plan(f, [permutation_job(f)], "split")
    check_valid(*two_tier_view(plan))
    unsplit = make_plan(f, [permutation_job(f)], "auto").routing.info
    assert unsplit["optimal"] and unsplit["max_link_load"] == 2
    # l0 sends 5 flows over its 3 remaining up links: no routing goes below 5/3
    assert 5 / 3 - 1e-6 <= plan.to_dict()["max_link_load"] < 2


def test_annealing_seed_matters_and_never_worse_than_start():
    f = fabric(4, 8, 4)
    hosts = [f"h{i}_{k}" for k in range(4) for i in range(8)]
    rnd = random.Random(0)  # 156 random pairs: the rail-like start is not the best state
    job = flows_job([(x, y) for x in hosts for y in hosts if x != y and rnd.random() < 0.15])
    a = make_plan(f, [job], "annealing", seed=1)
    b = make_plan(f, [job], "annealing", seed=2)
    (_, ta), (_, tb) = two_tier_view(a), two_tier_view(b)
    assert ta.info["steps"] == 917  # the Clos annealing (issue 37), on the plane's Clos
    assert (ta.info["max_link_load"], ta.info["links_at_max"]) < (
        ta.info["start_max_link_load"], ta.info["start_links_at_max"])
    assert ta.parts != tb.parts


def test_load_vector_sorted_and_routes_shape():
    f = fabric()
    plan = make_plan(f, [ring_job([f"h{i}_0" for i in range(8)])], "greedy")
    vec = sorted_load_vector(*two_tier_view(plan))
    assert vec == sorted(vec, reverse=True) and len(vec) == 2 * 8 * 4
    doc = plan.to_dict()
    assert [(r["src"], r["dst"]) for r in doc["routes"]][:2] == [("h0_0", "h1_0"), ("h1_0", "h2_0")]
    assert set(doc) >= {"algorithm", "routes", "max_link_load", "links_at_max", "runtime_ms"}
    assert all(spine_list(1 << f.spine_index[r["spine"]]) for r in doc["routes"])


def test_ilp_cutoff_proves_a_given_incumbent_optimal():
    from tests.test_auto import confined_case
    problem = confined_case()  # optimum 2, every cheap bound 1
    best = auto(problem, ilp_time_limit=0)
    result = ilp(problem, time_limit=10, incumbent=best.spines())
    info = result.info
    assert info["status"] == "optimal" and info["proved_by"] == "solver_cutoff"
    assert info["incumbent_from"] == "given" and info["bound"] == info["incumbent"] == 2
    assert result.spines() == best.spines()
    with pytest.raises(InputError, match="positive number of seconds"):
        ilp(problem, time_limit=-1)
