"""The paper's second layer: equitable colouring, chain moves to fewer links at the max, the
layer-2 bound and the exact layer-2 MILP; the bounded split; links at max with a tolerance;
the deterministic jobs objective."""
import random

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from controller.errors import ConflictError, InputError
from controller.model.clos import Clos
from controller.model.jobs import Flow, Job
from controller.model.loads import link_flows as loads
from controller.model.loads import links_at_max, load_summary
from controller.model.problem import Problem
from controller.planners.auto import auto
from controller.planners.equitable import equitable, equitable_edge_colouring
from controller.planners.greedy import greedy_spines
from controller.planners.ilp import ilp, ilp_layer2
from controller.planners.layer2 import fewer_at_max, layer2_lower_bound, links_at, vector_key
from controller.planners.objective import job_slowdowns
from controller.planners.split import split


def side_loads(problem, spines):
    """Per leaf side (uplinks of a leaf, downlinks of a leaf) its loads over the spines."""
    S = len(problem.fabric.spines)
    v = loads(problem, spines)
    return [v[i:i + S] for i in range(0, len(v), S)]


# ---- equitable colouring ---------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(st.integers(1, 6), st.integers(1, 8), st.lists(st.tuples(st.integers(0, 7),
                                                                  st.integers(0, 7)), max_size=80))
def test_equitable_colouring_is_balanced_at_every_vertex(k, _, edges):
    col = equitable_edge_colouring(edges, k)
    assert all(0 <= c < k for c in col)
    for side in (0, 1):
        by_vertex = {}
        for e, c in zip(edges, col):
            by_vertex.setdefault(e[side], [0] * k)[c] += 1
        for counts in by_vertex.values():
            assert max(counts) - min(counts) <= 1


@st.composite
def spine_failure_instances(draw):
    """Random flows on a fabric with only whole spines down: every flow has the same spines."""
    spines = draw(st.integers(2, 6))
    leaves = draw(st.integers(2, 6))
    hosts = draw(st.integers(1, 8))
    f = Clos.generate(spines, leaves, hosts, 100.0, draw(st.integers(0, spines - 1))).as_leaf_spine()
    names = sorted(f.hosts)
    pairs = draw(st.lists(st.tuples(st.sampled_from(names), st.sampled_from(names))
                          .filter(lambda p: p[0] != p[1]), min_size=1, max_size=60))
    return f, [Job("j", explicit=[Flow("j", s, d, 1e6) for s, d in pairs])]


@settings(max_examples=120, deadline=None)
@given(spine_failure_instances())
def test_auto_equals_the_equitable_colouring_with_whole_spines_down(inst):
    f, jobs = inst
    problem = Problem.build(f, jobs)
    assume(len(problem) > 0)
    a = auto(problem, ilp_time_limit=0)
    eq = equitable(problem)
    assert eq.info["exact"]
    assert vector_key(problem, a.spines()) == vector_key(problem, eq.spines())
    # every leaf side balanced over the alive spines: the lexicographic optimum
    alive = f.alive_spines()
    for row in side_loads(problem, a.spines()):
        vals = [row[s] for s in alive]
        assert max(vals) - min(vals) <= 1
    info = a.info
    assert info["optimal"] and info["optimal_layers"] == {"max_link_load": True,
                                                          "links_at_max": True}
    assert info["links_at_max"] == info["links_at_max_lower_bound"] == \
        links_at(problem, a.spines())


def test_auto_meets_the_layer_2_bound_by_hand():
    # l0 sends 5 flows over 4 spines (one link at 2), l1 receives 8 (all four at 2)
    f = Clos.generate(4, 3, 8).as_leaf_spine()
    pairs = [(f"h0_{i}", f"h1_{i}") for i in range(5)] + [(f"h2_{i}", f"h1_{5 + i % 3}")
                                                          for i in range(3)]
    problem = Problem.build(f, [Job("j", explicit=[Flow("j", s, d, 1) for s, d in pairs])])
    a = auto(problem, ilp_time_limit=0)
    assert a.info["max_link_load"] == 2
    assert a.info["links_at_max"] == layer2_lower_bound(problem, 2) == 1 + 4
    assert sorted(side_loads(problem, a.spines())[0]) == [1, 1, 1, 2]


# ---- layer-2 bound and chain moves against the exact MILP ----------------------------------
def random_instance(rng, spines, leaves, hosts, down_links):
    f = Clos.generate(spines, leaves, hosts).as_leaf_spine()
    links = [(l, s) for l in f.leaves for s in f.spines]
    f = f.with_down(set(rng.sample(links, down_links)))
    names = sorted(f.hosts)
    rng.shuffle(names)
    rings = [names[i:i + 4] for i in range(0, len(names) - 3, 4)]
    return Problem.build(f, [Job("r", rings=rings, ring_bytes=1e9)])


def test_layer2_bound_is_valid_and_auto_is_near_the_exact_layer2_optimum():
    """Small full-load ring placements with single links down: the layer-2 bound never exceeds
    the MILP's proven optimum, and auto (no ILP stage) is within max(2, 10%) of it."""
    rng = random.Random(16)
    checked = exact = 0
    for _ in range(60):
        try:
            problem = random_instance(rng, rng.randint(2, 4), rng.randint(3, 6),
                                      rng.randint(3, 6), rng.randint(1, 3))
        except ConflictError:
            continue
        a = auto(problem, ilp_time_limit=0)
        ref1 = ilp(problem, 20, incumbent=a.spines())
        if ref1.info["status"] != "optimal" or ref1.info["incumbent"] != a.info["max_link_load"]:
            continue
        value = a.info["max_link_load"]
        ref = ilp_layer2(problem, value, 20, incumbent=a.spines())
        if ref.info["status"] != "optimal":
            continue
        opt = ref.info["incumbent"]
        assert layer2_lower_bound(problem, value) <= opt
        assert opt <= a.info["links_at_max"] <= max(opt + 2, 1.1 * opt)
        checked += 1
        exact += a.info["links_at_max"] == opt
    assert checked >= 20 and exact >= 0.8 * checked


def test_chain_moves_never_worsen_the_vector_and_honour_usable_spines():
    rng = random.Random(5)
    improved = 0
    for _ in range(30):
        try:
            problem = random_instance(rng, 4, 6, 6, rng.randint(1, 4))
        except ConflictError:
            continue
        start = greedy_spines(problem)
        new = fewer_at_max(problem, start)
        assert vector_key(problem, new) <= vector_key(problem, start)
        assert all(problem.usable[k] >> s & 1 for k, s in enumerate(new))
        improved += vector_key(problem, new) < vector_key(problem, start)
    assert improved >= 5


def test_layer2_milp_finds_the_optimum_from_a_bad_incumbent():
    f = Clos.generate(2, 3, 4).as_leaf_spine()
    job = Job("j", explicit=[Flow("j", "h0_0", "h1_0", 1), Flow("j", "h0_1", "h1_1", 1),
                             Flow("j", "h0_2", "h2_0", 1)])
    p = Problem.build(f, [job])
    res = ilp_layer2(p, 2, 5, incumbent=[0, 0, 1])
    assert res.info["status"] == "optimal" and res.info["incumbent_from"] == "solver"
    assert res.info["incumbent"] == links_at(p, res.spines(), 2) == 1
    with pytest.raises(InputError, match="exceeds alpha"):
        ilp_layer2(p, 1, 5, incumbent=[0, 0, 1])


def test_auto_ilp_stage_proves_layer_2():
    rng = random.Random(3)
    proved = 0
    for _ in range(10):
        try:
            problem = random_instance(rng, 3, 5, 4, 2)
        except ConflictError:
            continue
        a = auto(problem, ilp_time_limit=10)
        if a.info["optimal"]:
            assert a.info["links_at_max_lower_bound"] <= a.info["links_at_max"]
            proved += a.info["optimal_layers"]["links_at_max"]
    assert proved >= 5


# ---- reporting -------------------------------------------------------------------------------
def test_links_at_max_counts_floating_point_ties():
    v = np.array([4 / 3, 4 / 3 - 3e-8, 1.0, 4 / 3 - 1e-3])
    assert links_at_max(v) == 2
    assert links_at_max(np.zeros(3)) == 0


def test_split_plan_reports_every_link_at_its_max():
    f = Clos.generate(4, 5, 4).as_leaf_spine().with_down({("l0", "s0")})
    job = Job("j", explicit=[Flow("j", f"h0_{k}", f"h{k + 1}_0", 1e6) for k in range(4)])
    problem = Problem.build(f, [job])
    a = split(problem, max_parts=None)
    assert load_summary(problem, a)["links_at_max"] == 3  # l0's three uplinks at 4/3


# ---- split with a bound on parts -------------------------------------------------------------
@pytest.mark.parametrize("failed", [0, 1])
def test_split_with_a_parts_bound(failed):
    f = Clos.generate(8, 6, 9, 100.0, failed).as_leaf_spine()  # 9 NICs per leaf in two rings each
    rng = random.Random(failed)
    rings = []
    for _ in range(2):
        names = sorted(f.hosts)
        rng.shuffle(names)
        rings += [names[i:i + 6] for i in range(0, len(names), 6)]
    job = Job("r", rings=rings, ring_bytes=1e9)
    problem = Problem.build(f, [job])
    by_parts = {}
    for p in (1, 2, 3, 4, None):
        a = split(problem, max_parts=p)
        assert all(len(parts) <= (p or 99) for parts in a.parts)
        assert all(abs(sum(x for _, x in parts) - 1) < 1e-9 for parts in a.parts)
        by_parts[p] = load_summary(problem, a)["max_link_load"]
    values = [by_parts[p] for p in (1, 2, 3, 4, None)]
    assert values == sorted(values, reverse=True)  # more parts never hurt
    assert by_parts[2] < by_parts[1]  # and the first extra part already pays
    with pytest.raises(InputError, match="max_parts"):
        split(problem, max_parts=0)


# ---- the jobs objective ------------------------------------------------------------------------
def mixed_jobs(seed):
    """A 16 x 8 fabric, one spine down, four ring jobs of different sizes on random hosts."""
    f = Clos.generate(8, 16, 8, 100.0, 1).as_leaf_spine()
    names = sorted(f.hosts)
    random.Random(seed).shuffle(names)
    jobs, start = [], 0
    for j, (n, size, compute) in enumerate([(32, 4e9, 1.0), (32, 2e9, 1.0), (16, 8e9, 0.5),
                                            (32, 1e9, 2.0)]):
        ranks = names[start:start + n]
        start += n
        jobs.append(Job(f"j{j}", rings=[ranks], ring_bytes=size, compute_s=compute))
    return Problem.build(f, jobs)


@pytest.mark.parametrize("seed", range(3))
def test_jobs_objective_is_deterministic_and_lowers_the_mean(seed):
    problem = mixed_jobs(seed)
    flows = auto(problem, ilp_time_limit=0)
    a = auto(problem, ilp_time_limit=0, objective="jobs")
    b = auto(problem, ilp_time_limit=0, objective="jobs")
    assert a.spines() == b.spines()  # an evaluation budget, no wall clock
    before = job_slowdowns(problem, flows.spines())
    after = job_slowdowns(problem, a.spines())
    assert max(after.values()) <= max(before.values()) + 1e-9
    assert sum(after.values()) <= sum(before.values()) + 1e-9
    assert a.info["max_link_load"] == flows.info["max_link_load"]  # layer 1 kept
    assert a.info["mean_slowdown"] == pytest.approx(sum(after.values()) / len(after))


def test_jobs_budget_zero_changes_nothing():
    problem = mixed_jobs(0)
    flows = auto(problem, ilp_time_limit=0)
    a = auto(problem, ilp_time_limit=0, objective="jobs", job_budget=0)
    assert a.spines() == flows.spines() and a.info["job_moves"] == 0
