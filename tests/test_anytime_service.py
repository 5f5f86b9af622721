"""Anytime planning (issue 23): a POST is answered with auto's layer-1 stage only (the max
link load at its lower bound, about the greedy's time); the layer-2 chains, the jobs search
and the ILP follow off the request path (``service/anytime.py``) and are installed through
``decide.improved`` only when worth the moved flows."""
import numpy as np
import pytest

from controller.model.loads import link_flows as loads
from controller.model.problem import Problem
from controller.planners.auto import lower_bound
from controller.planners.churn import plan_rank, replan, worth_moving
from controller.planners.clos_offpath import clos_off_path
from controller.service import api
from simulation.placement import cluster
from simulation.workloads import all_to_all, byte_mix, hybrid, pipeline
from tests.helpers import leaf_spine_routing
from tests.test_control_plane import post, ring, start, tables_match, wired


def routes_of(svc):
    return {(r.job.id, k): p for r in svc.state.jobs.values() for k, p in r.routes.items()}


def current(svc):
    """The installed routes as the two-tier planners see them (the service keeps paths)."""
    return leaf_spine_routing(svc.state.fabric, svc.state.jobs.values())


def max_link_load(svc):
    return api.handle(svc, "GET", "/v1/links")[1]["summary"]["max_link_load"]


def test_post_answers_layer1_optimal_and_the_jobs_search_follows_off_path():
    # 2 spines, 4 NICs per leaf: every leaf puts two flows on each link. Posted one by one,
    # the two 8 GB rings land on one spine and the two 100 MB rings on the other
    f = wired(2, 2, 4)
    sw, svc = start(f)
    assert svc.settings.objective == "jobs" and svc.settings.ilp_budget == 0
    for jid, i, size, compute in (("A", 0, 8e9, 1.2), ("B", 1, 1e8, 1.0), ("C", 2, 8e9, 1.2),
                                  ("D", 3, 1e8, 1.0)):
        status, view = post(svc, ring(jid, [f"h0_{i}", f"h1_{i}"], size=size, dport=i + 1,
                                      compute_s=compute))
        assert status == 201 and view["moved_flows"] == 0
        # the answer is layer-1 optimal: the max link load at the lower bound
        problem, _ = current(svc)
        assert max_link_load(svc) == lower_bound(problem)
    assert svc.unproven == {("auto", "jobs")}  # the later stages wait off the request path
    assert not any(e["cause"].startswith("off-path") for e in svc.state.events)
    before = routes_of(svc)
    problem, assignment = current(svc)
    rank_before = plan_rank(problem, assignment.spines(), "jobs")

    result = svc.improve()  # what the shell's tick runs within a second, without the lock
    assert result["improved"] and result["moved_flows"] >= 1
    assert result["mean_slowdown_after"] < result["mean_slowdown_before"] * 0.9
    assert result["worst_slowdown_after"] <= result["worst_slowdown_before"]
    assert max_link_load(svc) == 2  # no link above the layer-1 optimum
    event = svc.state.events[-1]
    assert event["cause"] == "off-path planning found a better routing"
    assert event["moved_flows"] == result["moved_flows"] == sum(
        1 for k, p in routes_of(svc).items() if before[k] != p)
    problem, assignment = current(svc)
    assert plan_rank(problem, assignment.spines(), "jobs") < rank_before
    tables_match(f, sw, svc)
    assert svc.unproven == set() and svc.improve() is None

    # nothing left to gain: asked again, the off-path stage moves nothing
    svc.unproven.add(("auto", "jobs"))
    after = routes_of(svc)
    assert svc.improve()["improved"] is False and routes_of(svc) == after


def test_flows_objective_leaves_layer2_off_the_request_path():
    f = wired(2, 4, 4)
    sw, svc = start(f, objective="flows")
    status, _ = post(svc, ring("a", [f"h{leaf}_{i}" for i in range(4) for leaf in range(4)]))
    assert status == 201 and max_link_load(svc) >= 2
    assert max_link_load(svc) == lower_bound(current(svc)[0])
    assert svc.unproven == {("auto", "flows")}
    svc.improve()  # improved or not, never worse on (max load, links at it)
    problem, _ = current(svc)
    assert max_link_load(svc) == lower_bound(problem)
    tables_match(f, sw, svc)


def test_a_change_during_the_off_path_stage_makes_it_stale():
    f = wired(2, 2, 4)
    sw, svc = start(f)
    for jid, i, size in (("A", 0, 8e9), ("B", 1, 1e8), ("C", 2, 8e9)):
        assert post(svc, ring(jid, [f"h0_{i}", f"h1_{i}"], size=size, dport=i + 1))[0] == 201
    before = routes_of(svc)

    def slow(problem, previous, objective, budget):  # the jobs group: the Clos stages
        assert objective == "jobs"
        assert api.handle(svc, "DELETE", "/v1/jobs/B")[0] == 200
        return clos_off_path(problem, previous, objective)
    assert svc.improve(slow)["stale"]
    assert all(routes_of(svc)[k] == p for k, p in routes_of(svc).items() if k in before)
    tables_match(f, sw, svc)


def patterns():
    for links, spines in ((0, 0), (3, 0), (0, 1), (2, 1)):
        f = cluster(8, 16, 8, np.random.default_rng(links + 10 * spines), links, spines)
        used: set = set()
        yield f, all_to_all(f, [12, 12, 8], seed=1)
        yield f, pipeline(f, [8] * 8, seed=2)
        yield f, hybrid(f, 4, 2, 4, seed=3, used=used)
        yield f, byte_mix(f, 4, 32, seed=4)


@pytest.mark.parametrize("case", range(16))
def test_layer1_stage_meets_the_lower_bound_on_every_pattern(case):
    f, jobs = list(patterns())[case]
    problem = Problem.build(f.as_leaf_spine(), jobs)  # the cluster's two-tier view
    # all new, then the last job new on top of the others' routes
    for cut in (0, sum(len(j.flows()) for j in jobs[:-1])):
        full = replan(problem, [None] * len(problem.flows), "flows", layer1_only=False)
        parts = [None] * len(problem.flows)
        for k, pos in enumerate(problem.inter):
            if pos < cut:
                parts[pos] = full.parts[k]
        a = replan(problem, parts, "jobs", layer1_only=True)
        assert a.info["optimal"] and a.info["stage"] == "churn-layer1"
        assert max(loads(problem, a.spines())) == a.info["max_link_load"] == lower_bound(problem)
        assert "job_moves" not in a.info  # no jobs search on the request path
        assert a.info["moved_flows"] <= a.info["new_flows"]  # chains only where needed


def test_worth_moving_asks_a_real_gain_for_the_jobs_objective():
    assert worth_moving((3, 10), (3, 9)) and not worth_moving((3, 10), (3, 10))
    # jobs: (mean, worst, max load, links at it): the mean first, the worst never worse
    assert worth_moving((1.5, 2.0, 3, 10), (1.4, 2.0, 3, 12), "jobs")
    assert not worth_moving((1.5, 2.0, 3, 10), (1.0, 2.1, 2, 1), "jobs")
    assert not worth_moving((1.5, 2.0, 3, 10), (1.4999, 2.0, 3, 10), "jobs")  # noise
    assert worth_moving((1.5, 2.0, 3, 10), (1.5, 1.9, 3, 10), "jobs")
    assert worth_moving((1.5, 2.0, 3, 10), (1.5, 2.0, 2, 10), "jobs")  # layer 1 then
    assert not worth_moving((1.5, 2.0, 3, 10), (1.5, 2.0, 3, 8), "jobs")  # no job faster
    assert not worth_moving((1.5, 2.0, 3, 10), (1.6, 1.0, 2, 1), "jobs")


def test_a_running_flow_moves_only_for_a_gain_that_grows_with_the_flows_moved():
    """Issue 74: off the request path the gain must pay for every running flow moved."""
    from controller.planners.churn import JOB_GAIN_PER_MOVE, JOB_MIN_GAIN, MOVES_PER_LINK
    # flow counts: a lower max is worth its moves; at the same max a link fewer at it is
    # worth MOVES_PER_LINK moved flows
    assert worth_moving((10, 3), (9, 300), "flows", moved=60)
    assert worth_moving((9, 20), (9, 10), "flows", moved=10 * MOVES_PER_LINK)
    assert not worth_moving((9, 20), (9, 10), "flows", moved=10 * MOVES_PER_LINK + 1)
    # jobs: the mean lower by JOB_MIN_GAIN plus JOB_GAIN_PER_MOVE per moved flow (relative)
    gain = JOB_MIN_GAIN + JOB_GAIN_PER_MOVE * 50
    before = (2.0, 3.0, 9, 10)
    assert worth_moving(before, (2.0 * (1 - gain * 1.01), 3.0, 9, 10), "jobs", moved=50)
    assert not worth_moving(before, (2.0 * (1 - gain * 0.99), 3.0, 9, 10), "jobs", moved=50)
    assert worth_moving(before, (2.0 * (1 - gain * 0.99), 3.0, 9, 10), "jobs", moved=40)


def test_the_off_path_ilp_runs_auto_in_a_child_process():
    """``offpath.plan_in_subprocess`` (the two-tier ILP stage, off the controller's thread):
    the child plans the problem's jobs on its fabric with auto's ILP and gives back a routing
    of the same flows, at auto's max link load here."""
    from controller.planners.auto import auto
    from controller.planners.offpath import plan_in_subprocess
    f, jobs = list(patterns())[1]
    problem = Problem.build(f.as_leaf_spine(), jobs)
    got = plan_in_subprocess(problem, 5.0, "flows")
    assert len(got.spines()) == len(problem.inter)
    here = auto(problem, ilp_time_limit=5.0)
    assert max(loads(problem, got.spines())) == max(loads(problem, here.spines()))
    assert got.info["max_link_load"] == here.info["max_link_load"]
