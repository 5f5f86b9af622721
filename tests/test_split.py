"""Flow splitting under any failure pattern: the LP optimum, few split flows, honest counts."""
import numpy as np
import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from controller.errors import ConflictError, InputError
from controller.model.clos import Clos
from controller.model.fabric import spine_list
from controller.model.jobs import Flow, Job
from controller.model.loads import link_loads
from controller.model.problem import Problem
from controller.planners.lp import fractional_lower_bound, fractional_optimum
from controller.planners.plan import make_plan
from controller.planners.split import split
from tests.helpers import fabric, flows_job, two_tier_view


def reference_lp(problem: Problem) -> float:
    """The fractional optimum written out densely: min alpha >= 1 over shares x[f, s]."""
    n_l, n_s = len(problem.fabric.leaves), len(problem.fabric.spines)
    var = [(k, s) for k in range(len(problem)) for s in spine_list(problem.usable[k])]
    nx = len(var)
    a_ub = np.zeros((2 * n_l * n_s, nx + 1))
    for i, (k, s) in enumerate(var):
        a_ub[problem.src_leaf[k] * n_s + s, i] = 1
        a_ub[n_l * n_s + problem.dst_leaf[k] * n_s + s, i] = 1
    a_ub[:, nx] = -1
    a_eq = np.zeros((len(problem), nx + 1))
    for i, (k, _) in enumerate(var):
        a_eq[k, i] = 1
    c = np.zeros(nx + 1)
    c[nx] = 1
    res = linprog(c, A_ub=a_ub, b_ub=np.zeros(2 * n_l * n_s), A_eq=a_eq,
                  b_eq=np.ones(len(problem)), bounds=[(0, None)] * nx + [(1, None)],
                  method="highs")
    assert res.status == 0
    return res.x[nx]


def max_load(problem, assignment) -> float:
    up, down = link_loads(problem, assignment)
    return float(max(up.max(initial=0), down.max(initial=0)))


def check_split(problem, assignment):
    """Shares positive, summing to 1, on usable spines; counts as reported."""
    for k, parts in enumerate(assignment.parts):
        assert parts, f"flow {k} has no part"
        assert sum(x for _, x in parts) == pytest.approx(1.0, abs=1e-9)
        assert all(x > 1e-9 for _, x in parts)
        assert len({s for s, _ in parts}) == len(parts)
        assert all(problem.usable[k] >> s & 1 for s, _ in parts), "part on an unusable spine"
    sizes = [len(p) for p in assignment.parts if len(p) > 1]
    info = assignment.info
    assert info["split_flows"] == len(sizes)
    assert info["subflows"] == sum(sizes)
    assert info["max_parts"] == max(sizes, default=1)


@st.composite
def failed_instances(draw):
    """Small fabrics with random failed spines and links, and flows that load leaves beyond their
    links (every host sends one or two flows), so that splitting matters."""
    spines = draw(st.integers(2, 5))
    leaves = draw(st.integers(2, 6))
    hosts = draw(st.integers(2, spines + 3))
    f = Clos.generate(spines, leaves, hosts, 100.0, draw(st.integers(0, spines - 1))).as_leaf_spine()
    links = [(l, s) for l in f.leaves for s in f.spines]
    down = draw(st.lists(st.sampled_from(links), min_size=1, max_size=max(1, len(links) // 3),
                         unique=True))
    f = f.with_down(f.down | set(down))
    names = list(f.hosts)
    flows = []
    for h in names:
        for _ in range(draw(st.integers(1, 2))):
            d = draw(st.sampled_from(names))
            if d != h:
                flows.append(Flow("j", h, d, 1.0))
    assume(flows)
    return f, [Job("j", explicit=flows)]


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(failed_instances())
def test_split_equals_the_lp_optimum_under_random_failures(inst):
    fab, jobs = inst
    try:
        problem = Problem.build(fab, jobs)
    except ConflictError:
        assume(False)  # some leaf pair has no common spine left
    assume(len(problem) > 0)
    a = split(problem, max_parts=None)
    event(f"{a.info['method']}, split: {a.info['split_flows'] > 0}, cheap bound below the "
          f"optimum: {a.info['fractional_lower_bound'] < a.info['fractional_optimum'] - 1e-9}")
    check_split(problem, a)
    opt = reference_lp(problem)
    assert max_load(problem, a) == pytest.approx(opt, abs=1e-6)
    assert a.info["fractional_optimum"] == pytest.approx(opt, abs=1e-6)
    assert fractional_optimum(problem) == pytest.approx(opt, abs=1e-6)
    assert fractional_lower_bound(problem) <= opt + 1e-9
    assert a.info["optimal"] is True


def test_single_link_down_reaches_the_fractional_optimum():
    # 4 flows out of l0, which has 3 links left: the unsplit optimum is 2, spraying 4/3
    f = fabric(4, 5, 4, down=[("l0", "s0")])
    job = flows_job([(f"h0_{k}", f"h{k + 1}_0") for k in range(4)])
    plan = make_plan(f, [job], "split")
    assert plan.to_dict()["max_link_load"] == pytest.approx(4 / 3)
    assert make_plan(f, [job], "edge-coloring").to_dict()["max_link_load"] == 2
    info = plan.routing.info
    assert info["method"] == "lp" and info["optimal"]
    check_split(*two_tier_view(plan))
    # l0's three links need a fractional part each: one flow in 3 parts of 1/3 is the least
    assert info["split_flows"] == 1 and info["subflows"] == 3


def test_cheap_bound_below_the_optimum_falls_back_to_the_min_load_lp():
    # l1 lacks s2, l2 lacks s0, l3 has only s2: x1, x2 (l0 -> l1) fill l0's s0 and s1, z
    # (l3 -> l2) takes s2 into l2, and y (l0 -> l2) must share: the LP gives 4/3 (y split 2/3 on
    # s1, 1/3 on s2) while every per-leaf bound is 1
    f = fabric(3, 4, 3, down=[("l1", "s2"), ("l2", "s0"), ("l3", "s0"), ("l3", "s1")])
    job = flows_job([("h0_0", "h1_0"), ("h0_1", "h1_1"), ("h0_2", "h2_0"), ("h3_0", "h2_1")])
    problem = Problem.build(f, [job])
    a = split(problem)
    check_split(problem, a)
    assert a.info["fractional_lower_bound"] == 1
    assert a.info["fractional_optimum"] == pytest.approx(4 / 3, abs=1e-6)
    assert max_load(problem, a) == pytest.approx(4 / 3, abs=1e-6) == reference_lp(problem)


def test_nothing_split_when_unsplit_meets_the_bound():
    f = fabric(4, 4, 2, down=[("l0", "s0")])
    job = flows_job([("h0_0", "h1_0"), ("h2_0", "h3_0"), ("h1_1", "h2_1")])
    a = split(Problem.build(f, [job]))
    assert not a.is_split() and a.info["split_flows"] == 0 and a.info["optimal"]
    assert a.info["lp_solves"] == 0 and a.info["split"] == "unsplit routing at the bound: no LP"


def test_uniform_fabric_keeps_mcnaughton():
    f = fabric(4, 4, 5)
    job = flows_job([(f"h{i}_{k}", f"h{(i + 1) % 4}_{k}") for i in range(4) for k in range(5)])
    a = split(Problem.build(f, [job]))
    assert a.info["method"] == "mcnaughton"
    assert max_load(Problem.build(f, [job]), a) == pytest.approx(1.25)


@pytest.mark.parametrize("k, expect", [(4, 1.25), (2, 1.5), (1, 2.0), (3, 4 / 3)])
def test_granularity_shares_in_multiples_of_one_over_k(k, expect):
    # 5 flows out of l0 over 4 usable spines (l0-s4 down): the LP gives 5/4
    f = fabric(5, 6, 5, down=[("l0", "s4")])
    job = flows_job([(f"h0_{i}", f"h{i + 1}_0") for i in range(5)])
    problem = Problem.build(f, [job])
    a = split(problem, granularity=k)
    check_split(problem, a)
    assert all(abs(x * k - round(x * k)) < 1e-9 for p in a.parts for _, x in p)
    assert max_load(problem, a) == pytest.approx(expect)
    assert a.info["granularity"] == k
    assert a.info["optimal"] is True


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_bad_granularity(bad):
    problem = Problem.build(fabric(4, 4, 2), [flows_job([("h0_0", "h1_0")])])
    with pytest.raises(InputError, match="granularity"):
        split(problem, granularity=bad)


def test_bad_time_limit():
    problem = Problem.build(fabric(4, 4, 2), [flows_job([("h0_0", "h1_0")])])
    with pytest.raises(InputError, match="time limit"):
        split(problem, time_limit=0)


def test_realistic_cluster_with_failed_links():
    from simulation.placement import realistic
    fab, jobs = realistic(8, 16, 0.9, 2, failed_links=3)
    problem = Problem.build(fab.as_leaf_spine(), jobs)
    a = split(problem)
    check_split(problem, a)
    assert max_load(problem, a) == pytest.approx(fractional_optimum(problem), abs=1e-6)
    assert a.info["split_flows"] < len(problem) // 4, "a vertex solution splits few flows"


def test_docstring_examples():
    import doctest
    import importlib

    # the package exports the function under the module's name: take the module itself
    module = importlib.import_module("controller.planners.split")
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
