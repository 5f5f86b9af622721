"""The fluid model always makes progress, is bounded in work, and predicts exactly the ideal
time of a job that shares no link with anything, whatever else runs and in which order."""
import itertools
import random

import numpy as np
import pytest
from hypothesis import HealthCheck
from hypothesis import strategies as st

from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.fabric import Fabric
from controller.model.fluid import (
    FluidSimulator,
    PredictionError,
    default_max_events,
    plan_max_events,
    predict_allreduce,
    route_options,
)
from controller.model.jobs import Flow, Job
from controller.model.problem import Assignment, Problem
from controller.planners.leaf_spine import flow_spine_parts
from controller.planners.plan import Plan, make_plan, planner_options, two_tier_plan
from controller.planners.registry import names
from tests.helpers import fabric, property_twins, two_tier_view


def fixed_plan(f: Fabric, jobs: list[Job], routes: dict[str, list]) -> Plan:
    """A plan with the given routes per job: per flow a spine, a parts tuple, or None."""
    flat = []
    for j in jobs:
        for r in routes[j.id]:
            flat.append(r if r is None or isinstance(r, tuple) else ((r, 1.0),))
    problem = Problem.build(f, jobs)
    return two_tier_plan("fixed", problem, Assignment([flat[i] for i in problem.inter]))


def service_plan(f: Fabric, jobs: list[Job], algorithms: dict[str, str]) -> Plan:
    """What the controller predicts on: each algorithm plans its own jobs, then all jobs' routes
    form one plan in submission order (as RouteService._current_plan does)."""
    routes = {}
    for alg in sorted({algorithms[j.id] for j in jobs}):
        group = [j for j in jobs if algorithms[j.id] == alg]
        parts = flow_spine_parts(*two_tier_view(make_plan(f, group, alg, **planner_options(alg))))
        offset = 0
        for j in group:
            n = len(j.flows())
            routes[j.id] = parts[offset:offset + n]
            offset += n
    return fixed_plan(f, jobs, routes)


def isolated_jobs(plan: Plan) -> set[str]:
    """Jobs none of whose flows shares a directed link (host links included) with another
    flow; the parts of one split flow may share their host links with each other."""
    users: dict[int, set] = {}
    for k, parts in enumerate(plan.parts_by_flow()):
        for links, share in parts or ():
            if share > 0:
                for link in links:
                    users.setdefault(link, set()).add(k)
    shared = {k for ks in users.values() if len(ks) > 1 for k in ks}
    out, k = set(), 0
    for j in plan.problem.jobs:
        n = len(j.flows())
        if not shared & set(range(k, k + n)):
            out.add(j.id)
        k += n
    return out


# ---- defect 1: split parts that finished stalled time -------------------------------------
@pytest.mark.timeout(10)
def test_split_part_ending_first_leaves_the_rate_computation():
    # flow a is split 1/4 on spine 0 (shared with flow b) and 3/4 on spine 1. All three get C/2
    # (a's parts share a's NIC; b shares l0->s0 with a's first part). a's first part ends at
    # 0.5e9/C; then a's second part and b run alone at C: a ends at 1e9/C, b at 1.25e9/C.
    f = fabric(2, 2, 2)
    job = Job("e", explicit=[Flow("e", "h0_0", "h1_0", 1e9), Flow("e", "h0_1", "h1_1", 1e9)])
    plan = fixed_plan(f, [job], {"e": [((0, 0.25), (1, 0.75)), 0]})
    c = f.link_bps()
    sim = FluidSimulator(f, [job], lambda _: plan)
    result = sim.run()
    assert result["jobs"]["e"]["allreduce_s"][0] == pytest.approx(1.25e9 / c, rel=1e-12)
    ends = sorted(end for _, _, _, end in sim.done)
    assert ends == pytest.approx([1e9 / c, 1.25e9 / c], rel=1e-12)


@pytest.mark.timeout(10)
def test_zero_share_part_carries_nothing_and_stalls_nothing():
    f = fabric(2, 2, 1)
    job = Job("z", rings=[["h0_0", "h1_0"]], ring_bytes=2e6)
    plan = fixed_plan(f, [job], {"z": [((0, 1.0), (1, 0.0)), ((1, 0.0), (0, 1.0))]})
    assert predict_allreduce(plan)["z"] == pytest.approx(job.ideal_allreduce_s(f.link_bps()),
                                                         rel=1e-9)


# The controller instance that hung (4 x 8 x 2, 4-rank 1 MB rings, six split jobs, one
# annealing, one greedy): the routes the controller had installed when the 8th POST hung.
HUNG = [
    (["h1_0", "h7_1", "h1_1", "h6_0"], [0, ((0, .5), (1, .5)), 2, 2]),
    (["h3_0", "h7_1", "h5_0", "h0_0"], [((0, .5), (1, .5)), 0, 2, 2]),
    (["h7_0", "h3_1", "h7_1", "h3_0"], [1, 1, 0, 0]),
    (["h7_1", "h4_1", "h1_1", "h3_0"], [3, 3, 3, 3]),
    (["h1_0", "h3_1", "h1_1", "h6_0"],
     [((0, .5), (1, .5)), 1, ((2, .5), (3, .5)), ((2, .5), (3, .5))]),
    (["h0_0", "h5_1", "h2_0", "h4_0"], [0, 0, 0, 0]),
    (["h6_1", "h3_1", "h3_0", "h5_1"], [1, None, 2, 1]),
    (["h1_1", "h5_0", "h2_0", "h0_1"], [1, 0, 0, 0]),
]


@pytest.mark.timeout(20)
def test_controller_instance_that_hung_finishes_in_any_order():
    f = fabric(4, 8, 2)
    jobs = [Job(f"j{k}", rings=[ranks], ring_bytes=1e6) for k, (ranks, _) in enumerate(HUNG)]
    routes = {f"j{k}": r for k, (_, r) in enumerate(HUNG)}
    base = predict_allreduce(fixed_plan(f, jobs, routes))
    for j in jobs:
        assert base[j.id] >= j.ideal_allreduce_s(f.link_bps()) * (1 - 1e-9)
    rng = random.Random(7)
    for _ in range(3):
        order = rng.sample(jobs, len(jobs))
        again = predict_allreduce(fixed_plan(f, order, routes))
        assert again == pytest.approx(base, rel=1e-9)


# ---- defect 2: routes were taken by position among the active jobs -------------------------
def test_each_job_keeps_its_own_routes_after_another_job_ends():
    # job a (one tiny flow) is first in the plan and ends first. Every directed link carries
    # one flow, so every job runs at its ideal; taking routes by position among the jobs still
    # running gave b the routes of a and b (two of b's flows on l0->s0) and slowed it down.
    f = fabric(4, 2, 4)
    a = Job("a", explicit=[Flow("a", "h0_0", "h1_0", 1e6)])
    b = Job("b", rings=[["h0_1", "h1_1", "h0_2", "h1_2"]], ring_bytes=8e9)
    c = Job("c", rings=[["h0_3", "h1_3"]], ring_bytes=8e9)
    routes = {"a": [0], "b": [1, 0, 2, 1], "c": [3, 2]}
    for order in itertools.permutations([a, b, c]):
        plan = fixed_plan(f, list(order), routes)
        assert isolated_jobs(plan) == {"a", "b", "c"}
        pred = predict_allreduce(plan)
        for j in order:
            assert pred[j.id] == pytest.approx(j.ideal_allreduce_s(f.link_bps()), rel=1e-9)


@pytest.mark.parametrize("order", list(itertools.permutations("abc")))
def test_controller_predicts_the_ideal_when_no_link_is_shared(order):
    # the same jobs through RouteService in every order: greedy puts one flow per directed
    # link and the jobs share no host, so every prediction must be the job's ideal
    from controller.service.route_service import RouteService
    from emulation.harness.fake_switch import FakeSwitches
    f = Clos.generate(4, 2, 4, 100.0, wiring=True).as_leaf_spine()
    docs = {"a": {"id": "a", "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1e6}]},
            "b": {"id": "b", "collective": "ring_allreduce",
                  "ranks": ["h0_1", "h1_1", "h0_2", "h1_2"], "bytes": 8e9},
            "c": {"id": "c", "collective": "ring_allreduce", "ranks": ["h0_3", "h1_3"],
                  "bytes": 8e9}}
    svc = RouteService(FakeSwitches(f.dpids.values()), f, algorithm="greedy")
    for d in f.dpids.values():
        svc.switch_connected(d, {})
    for jid in order:
        svc.post_job(dict(docs[jid]))
    assert svc.links_view()["summary"]["max_link_load"] == 1
    for jid in order:
        view = svc.job_view(jid)
        assert view["predicted_allreduce_s"] == pytest.approx(view["ideal_s"], rel=1e-9)


def test_simulator_rejects_a_plan_without_a_running_job():
    f = fabric(2, 2, 1)
    a = Job("a", rings=[["h0_0", "h1_0"]], ring_bytes=1e6)
    b = Job("b", rings=[["h1_0", "h0_0"]], ring_bytes=1e6)
    plan = fixed_plan(f, [a], {"a": [0, 1]})
    with pytest.raises(PredictionError, match="job b"):
        FluidSimulator(f, [a, b], lambda _: plan).run()


def test_an_inter_leaf_flow_without_a_spine_is_reported():
    # a plan that leaves an inter-leaf flow out (as the controller's installed plan does for
    # a flow with no route) must not be simulated as if the flow stayed within its leaf
    f = fabric(2, 2, 1)
    job = Job("r", rings=[["h0_0", "h1_0"]], ring_bytes=1e6)
    problem = Problem.build(f, [job])
    hole = Problem(f, [job], problem.flows, problem.inter[:1], problem.src_leaf[:1],
                   problem.dst_leaf[:1], problem.usable[:1])
    plan = two_tier_plan("hole", hole, Assignment([((0, 1.0),)]))
    with pytest.raises(PredictionError, match="h1_0 -> h0_0 of job r crosses leaves"):
        predict_allreduce(plan)


# ---- bounds, stalls, cooperative yield -----------------------------------------------------
def test_event_bound_raises_a_prediction_error():
    f = fabric(2, 4, 1)
    job = Job("r", rings=[[f"h{i}_0" for i in range(4)]], ring_bytes=4e6)
    plan = make_plan(f, [job], "greedy")
    assert predict_allreduce(plan)["r"] > 0  # the default bound is enough
    with pytest.raises(PredictionError, match="within 3 events"):
        predict_allreduce(plan, max_events=3)
    assert issubclass(PredictionError, InputError)


def test_a_flow_that_cannot_progress_is_reported_not_looped():
    f = fabric(2, 2, 1)
    job = Job("r", rings=[["h0_0", "h1_0"]], ring_bytes=1e6)
    plan = make_plan(f, [job], "greedy")
    sim = FluidSimulator(plan.problem.fabric, [job], lambda _: plan)  # the plan's links
    sim.capacity = np.zeros_like(sim.capacity)
    with pytest.raises(PredictionError, match="no flow can progress"):
        sim.run()


def test_on_event_is_called_once_per_event():
    f = fabric(2, 4, 2)
    jobs = [Job("x", rings=[[f"h{i}_0" for i in range(4)]], ring_bytes=4e6),
            Job("y", rings=[[f"h{i}_1" for i in range(4)]], ring_bytes=2e6)]
    plan = make_plan(f, jobs, "split")
    calls = []
    sim = FluidSimulator(f, jobs, lambda _: plan, on_event=lambda: calls.append(sim.now))
    result = sim.run()
    assert len(calls) == result["events"] > 0
    assert calls == sorted(calls)  # time never goes back
    assert result["events"] <= default_max_events(f, jobs)


# ---- properties -----------------------------------------------------------------------------
FAST = [a for a in names(distinct=True) if a != "ilp"] + ["random-split"]


def random_split_plan(f: Fabric, jobs: list[Job], rng: random.Random) -> dict:
    """Per job, routes with random splits over usable spines (shares may be tiny or zero)."""
    out = {}
    li = f.leaf_index
    for j in jobs:
        routes = []
        for fl in j.flows():
            a, b = li[f.leaf_of(fl.src)], li[f.leaf_of(fl.dst)]
            if a == b:
                routes.append(None)
                continue
            usable = [s for s in range(len(f.spines)) if f.usable_mask(a, b) >> s & 1]
            pick = rng.sample(usable, rng.randint(min(2, len(usable)), len(usable)))
            w = [rng.choice([0.0, 1e-6, 0.1, 0.5, 1.0, 3.0]) for _ in pick]
            if not sum(w):
                w[0] = 1.0
            routes.append(tuple((s, x / sum(w)) for s, x in zip(pick, w)))
        out[j.id] = routes
    return out


@st.composite
def mixes(draw):
    """A small fabric with some leaf-spine links down (spine 0 stays up, so every leaf pair
    is routable), ring and explicit jobs on shared or disjoint hosts, an algorithm per job."""
    spines = draw(st.sampled_from([2, 3, 4, 1]))
    f = Clos.generate(spines, draw(st.integers(2, 4)), draw(st.integers(1, 3)), 100.0).as_leaf_spine()
    if spines > 1:
        f = f.with_down(draw(st.sets(st.tuples(st.sampled_from(f.leaves),
                                               st.sampled_from(f.spines[1:])), max_size=3)))
    pool = draw(st.permutations(list(f.hosts)))
    disjoint = draw(st.booleans())  # jobs on hosts of their own: isolated jobs are likely

    def take(n):
        nonlocal pool
        if not disjoint:
            return draw(st.permutations(list(f.hosts)))[:n]
        got, pool = pool[:n], pool[n:]
        return got

    jobs = []
    for k in range(draw(st.integers(1, 5))):
        jid = f"j{k}"
        if draw(st.booleans()):
            rings = [take(draw(st.integers(2, 4))) for _ in range(draw(st.integers(1, 2)))]
            if any(len(r) < 2 for r in rings):
                break
            jobs.append(Job(jid, rings=rings, ring_bytes=draw(st.sampled_from([1e6, 3e6, 8e6]))))
        else:
            pairs = [take(2) for _ in range(draw(st.integers(1, 4)))]
            if any(len(p) < 2 for p in pairs):
                break
            jobs.append(Job(jid, explicit=[Flow(jid, s, d, draw(st.sampled_from([5e5, 1e6, 2e6])))
                                           for s, d in pairs]))
    algorithms = {j.id: draw(st.sampled_from(FAST + ["random-split"])) for j in jobs}
    return f, jobs, algorithms, draw(st.randoms(use_true_random=False))


def mixed_plan(f, jobs, algorithms, rng):
    rand = [j for j in jobs if algorithms[j.id] == "random-split"]
    rest = [j for j in jobs if j not in rand]
    planned = service_plan(f, rest, algorithms) if rest else None
    routes = random_split_plan(f, rand, rng)
    if planned is not None:
        parts, k = flow_spine_parts(*two_tier_view(planned)), 0
        for j in planned.problem.jobs:
            routes[j.id] = parts[k:k + len(j.flows())]
            k += len(j.flows())
    return routes


def fluid_terminates_and_isolated_jobs_get_their_ideal(inst):
    f, jobs, algorithms, rng = inst
    if not jobs:
        return
    routes = mixed_plan(f, jobs, algorithms, rng)
    bps = f.link_bps()
    first = None
    for order in (jobs, list(reversed(jobs)), rng.sample(jobs, len(jobs))):
        plan = fixed_plan(f, order, routes)
        events = []
        # every event starts jobs or ends a part: the run stays within plan_max_events
        pred = predict_allreduce(plan, on_event=lambda: events.append(1))  # raises past it
        assert len(events) <= plan_max_events(plan) <= default_max_events(f, order)
        for j in order:
            assert pred[j.id] >= j.ideal_allreduce_s(bps) * (1 - 1e-9)  # nothing beats line rate
        for jid in isolated_jobs(plan):
            ideal = next(j for j in order if j.id == jid).ideal_allreduce_s(bps)
            assert pred[jid] == pytest.approx(ideal, rel=1e-9), jid
        if first is None:
            first = pred
        else:  # max-min rates are unique: the order of jobs changes nothing
            assert pred == pytest.approx(first, rel=1e-6)


# 20 examples in the fast tier, the 100 of before in the slow one (issue 60)
test_fluid_terminates_and_isolated_jobs_get_their_ideal, \
    test_fluid_terminates_and_isolated_jobs_get_their_ideal_in_full = (
        pytest.mark.timeout(60)(t) for t in property_twins(
            (mixes(),), 20, 100, deadline=None,
            suppress_health_check=[HealthCheck.too_slow])(
                fluid_terminates_and_isolated_jobs_get_their_ideal))


def test_docstring_examples():
    import doctest

    import controller.model.fluid
    import controller.model.rates
    for module in (controller.model.fluid, controller.model.rates):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__



def test_default_event_bound_holds_split_plans_on_three_tiers():
    """A Clos plan may split a flow into a part per route option (``fluid.route_options``, what
    ``clos_split`` may use with no bound): the default bound counts them. 12 flows of a k = 4
    fat-tree, each in 4 parts that end at their own times, ran past the bound before (one part
    per flow on a Clos) and raised."""
    from types import SimpleNamespace

    from controller.model.clos import Clos
    fab = Clos.fat_tree(4)
    hosts = sorted(fab.hosts)
    job = Job("j", explicit=[Flow("j", hosts[k], hosts[(k + 4) % 16], 1e6 * (1 + 0.137 * k))
                             for k in range(12)])
    plan = make_plan(fab, [job], "greedy")
    m = route_options(fab)  # parts of unequal shares: each ends at its own time, an event each
    split = SimpleNamespace(problem=plan.problem, runtime_ms=0.0, parts_by_flow=lambda: [
        tuple((links, (i + 1) / (m * (m + 1) / 2)) for links, _ in p for i in range(m))
        for p in plan.parts_by_flow()])
    sim = FluidSimulator(fab, [job], lambda _: split, iterations=2)
    result = sim.run()
    assert sim.events > 3 * 2 * 12 + 2 + 16  # past the bound of one part per flow
    assert len(result["jobs"]["j"]["allreduce_s"]) == 2
