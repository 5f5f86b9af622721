"""The auto planner: exact on small instances, never worse than the greedy, honest info."""
import random

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from controller.errors import ConflictError, InputError
from controller.model.clos import Clos
from controller.model.jobs import Job
from controller.model.loads import link_loads
from controller.model.problem import Assignment, Problem
from controller.planners.auto import auto, lower_bound
from controller.planners.greedy import greedy
from controller.planners.ilp import ilp
from controller.planners.plan import make_plan, planner_options
from controller.planners.repair import Routing, reduce_to
from tests.helpers import fabric, flows_job, two_tier_view


def alpha(problem, assignment):
    up, down = link_loads(problem, assignment)
    return int(max(up.max(initial=0), down.max(initial=0)))


def check_honest(problem, assignment, optimum=None):
    info = assignment.info
    assert set(info) >= {"stage", "lower_bound", "max_link_load", "optimal", "ms"}
    assert info["stage"] in {"construction", "repair", "ilp"}
    assert info["max_link_load"] == alpha(problem, assignment)
    assert info["lower_bound"] <= info["max_link_load"]
    for k, s in enumerate(assignment.spines()):
        assert problem.usable[k] >> s & 1
    if optimum is not None:
        assert info["lower_bound"] <= optimum
        if info["optimal"]:
            assert info["max_link_load"] == optimum


@st.composite
def failed_link_instances(draw):
    spines = draw(st.integers(1, 4))
    leaves = draw(st.integers(2, 5))
    hosts = draw(st.integers(1, 3))
    f = Clos.generate(spines, leaves, hosts, 100.0, draw(st.integers(0, spines - 1))).as_leaf_spine()
    links = sorted((l, s) for l in f.leaves for s in f.spines)
    down = draw(st.sets(st.sampled_from(links), max_size=len(links) // 3))
    f = f.with_down(f.down | down)
    names = sorted(f.hosts)
    pairs = draw(st.lists(st.tuples(st.sampled_from(names), st.sampled_from(names))
                          .filter(lambda p: p[0] != p[1]), min_size=1, max_size=14))
    return f, [flows_job(pairs)]


@settings(max_examples=25, deadline=None)
@given(failed_link_instances())
def test_auto_equals_the_exact_ilp_with_failed_links(inst):
    f, jobs = inst
    try:
        problem = Problem.build(f, jobs)
    except ConflictError:
        assume(False)
    exact = ilp(problem, time_limit=30)
    assert exact.info["status"] == "optimal"
    optimum = exact.info["incumbent"]
    result = auto(problem, ilp_time_limit=30)
    check_honest(problem, result, optimum)
    assert result.info["max_link_load"] == optimum and result.info["optimal"]
    assert result.info["max_link_load"] <= alpha(problem, greedy(problem))
    fast = auto(problem, ilp_time_limit=0)  # without the ILP: honest, never worse than greedy
    check_honest(problem, fast, optimum)
    assert fast.info["max_link_load"] <= alpha(problem, greedy(problem))
    assert "ilp" not in fast.info and "ilp" not in fast.info["ms"]


def random_rings(leaves, spines, ring, seed, down_links=0):
    """Every NIC in one ring of random members: the placements where the greedy stops at 2x."""
    rng = random.Random(seed)
    f = Clos.generate(spines, leaves, spines).as_leaf_spine()
    hosts = sorted(f.hosts)
    rng.shuffle(hosts)
    rings = [hosts[i:i + ring] for i in range(0, len(hosts) - ring + 1, ring)]
    if down_links:
        links = sorted((l, s) for l in f.leaves for s in f.spines)
        f = f.with_down(set(rng.sample(links, down_links)))
    return f, [Job("j", rings=rings, ring_bytes=1e9)]


@pytest.mark.parametrize("leaves, spines", [(16, 8), (64, 32)])
def test_full_load_rings_reach_the_bound_without_the_ilp(leaves, spines):
    greedy_above = 0
    for seed in range(4):
        f, jobs = random_rings(leaves, spines, 4, seed)
        problem = Problem.build(f, jobs)
        result = auto(problem, ilp_time_limit=0)
        check_honest(problem, result)
        assert result.info["max_link_load"] == problem.lower_bound() == 1
        assert result.info["optimal"] and result.info["stage"] == "construction"
        greedy_above += alpha(problem, greedy(problem)) > 1
    assert greedy_above >= 1  # the case auto exists for: the greedy is not enough here


def test_repair_stage_fixes_greedy_with_failed_links():
    """Small full-load ring placements with single links down: where the greedy ends above the
    bound, auto (equitable colouring with chain insertion, else the greedy and chains) brings
    most of them down to it (never above the greedy)."""
    rng = random.Random(7)
    cases = repaired = 0
    for _ in range(150):
        spines, leaves = rng.randint(2, 5), rng.randint(3, 8)
        try:
            f, jobs = random_rings(leaves, spines, rng.choice([2, 4]), rng.randrange(10**6),
                                   down_links=rng.randint(1, leaves * spines // 4))
            problem = Problem.build(f, jobs)
        except ConflictError:
            continue
        g = alpha(problem, greedy(problem))
        result = auto(problem, ilp_time_limit=0)
        check_honest(problem, result)
        assert result.info["max_link_load"] <= g
        if g > result.info["lower_bound"]:
            cases += 1
            repaired += result.info["optimal"] and result.info["stage"] in ("construction",
                                                                            "repair")
    assert cases >= 5 and repaired >= 0.8 * cases


def test_chains_move_a_flow_off_an_overloaded_link():
    f = fabric(2, 3, 2)
    job = flows_job([("h0_0", "h1_0"), ("h0_1", "h2_0"), ("h2_1", "h1_1")])
    problem = Problem.build(f, [job])
    r = Routing(problem, [0, 0, 0])
    assert r.max_load() == 2
    assert reduce_to(r, 1) and r.max_load() == 1
    assert alpha(problem, Assignment.unsplit(r.spine)) == 1
    assert r.spine[0] != r.spine[1] and r.spine[0] != r.spine[2]  # the counts match the flows


def confined_case():
    """Optimum 2 above every bound auto computes (1): l2 reaches only s2, l3 only s0 and s2,
    so l3 -> l1 doubles either l3's uplink to s0 or l1's downlink from s2."""
    f = fabric(3, 4, 1, down=[("l0", "s2"), ("l2", "s0"), ("l2", "s1"), ("l3", "s1")])
    job = flows_job([("h1_0", "h3_0"), ("h3_0", "h0_0"), ("h1_0", "h2_0"), ("h2_0", "h1_0"),
                     ("h3_0", "h1_0")])
    return Problem.build(f, [job])


def test_only_the_ilp_proves_optimality_above_the_bounds():
    problem = confined_case()
    assert lower_bound(problem) == 1
    fast = auto(problem, ilp_time_limit=0)
    assert fast.info["max_link_load"] == 2 and not fast.info["optimal"]
    proved = auto(problem, ilp_time_limit=10)
    check_honest(problem, proved, 2)
    assert proved.info["optimal"] and proved.info["ilp"]["status"] == "optimal"
    assert proved.info["lower_bound"] == proved.info["max_link_load"] == 2
    assert proved.info["stage"] != "ilp"  # the solver found nothing better: incumbent kept


def test_ilp_stage_improves_when_the_solver_finds_better(monkeypatch):
    # force a bad construction and no repair, so only the ILP can reach the optimum
    import importlib
    auto_mod = importlib.import_module("controller.planners.auto")  # the module, not the function
    f = fabric(2, 3, 2)
    problem = Problem.build(f, [flows_job([("h0_0", "h1_0"), ("h0_1", "h2_0"),
                                           ("h2_1", "h1_1")])])
    monkeypatch.setattr(auto_mod, "construct", lambda p, lb: ([0] * len(p), None))
    monkeypatch.setattr(auto_mod, "repair_down", lambda p, s, lower, value, deadline=None:
                        (s, value))
    result = auto_mod.auto(problem, ilp_time_limit=10)
    assert result.info["stage"] == "ilp" and result.info["optimal"]
    assert result.info["max_link_load"] == alpha(problem, result) == 1


@pytest.mark.parametrize("options, message", [
    ({"objective": "fastest"}, "unknown objective 'fastest'"),
    ({"ilp_time_limit": -1}, "ilp_time_limit must be a number of seconds >= 0"),
    ({"ilp_time_limit": float("nan")}, "ilp_time_limit"),
    ({"ilp_time_limit": "10"}, "ilp_time_limit"),
])
def test_bad_options_are_clear_errors(options, message):
    with pytest.raises(InputError, match=message):
        auto(confined_case(), **options)


def test_ilp_budget_zero_means_no_ilp_stage_and_zero_is_an_error_for_ilp():
    result = auto(confined_case(), ilp_time_limit=0)
    assert "ilp" not in result.info and not result.info["optimal"]
    with pytest.raises(InputError, match="time limit must be a positive number"):
        ilp(confined_case(), time_limit=0)


def test_planner_options_route_the_objective_to_auto_only():
    assert planner_options("auto", ilp_time_limit=3, objective="jobs") == {
        "ilp_time_limit": 3, "objective": "jobs"}
    with pytest.raises(InputError, match="needs algorithm 'auto'"):
        planner_options("greedy", objective="jobs")
    with pytest.raises(InputError, match="unknown objective"):
        planner_options("auto", objective="bytes")


def test_auto_is_deterministic_and_registered():
    f = fabric(4, 6, 4, down=[("l1", "s2")])
    job = Job("r", rings=[[f"h{i}_{k}" for k in range(4) for i in range(6)]], ring_bytes=1e6)
    a, b = make_plan(f, [job], "auto"), make_plan(f, [job], "auto")
    assert two_tier_view(a)[1].parts == two_tier_view(b)[1].parts
    assert a.to_dict()["info"]["max_link_load"] == a.to_dict()["max_link_load"]


def test_repair_out_of_time_returns_a_valid_routing_no_worse():
    import time as _time

    from controller.model.loads import max_link_flows as max_load
    from controller.planners.auto import repair_down
    rng = random.Random(3)
    for _ in range(20):
        f, jobs = random_rings(rng.randint(4, 8), rng.randint(2, 4), 4, rng.randrange(10**6),
                               down_links=2)
        try:
            problem = Problem.build(f, jobs)
        except ConflictError:
            continue
        start = greedy(problem).spines()
        value = max_load(problem, start)
        spines, new = repair_down(problem, start, lower_bound(problem), value,
                                  deadline=_time.perf_counter() - 1)
        assert new == max_load(problem, spines) <= value
        assert all(problem.usable[k] >> s & 1 for k, s in enumerate(spines))
