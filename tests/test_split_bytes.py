"""Byte-aware splitting (split, objective "jobs") and its bound on parts (issue 23)."""
from unittest import mock

import pytest

from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.jobs import Flow, Job
from controller.model.problem import Problem
from controller.planners.lp import weighted_split_lp
from controller.planners.objective import job_slowdowns, rank_key, worst_bound
from controller.planners.plan import make_plan, planner_options
from controller.planners.split import split
from simulation.workloads import byte_mix, pipeline
from tests.helpers import two_tier_view


def _mean(d):
    return sum(d.values()) / len(d)


def test_weighted_lp_balances_bytes_not_flows():
    """One 10 GB flow and four 100 MB flows out of l0 over 2 spines: by flow counts 2.5 flows
    per link, by bytes the big flow is split evenly and the small ones fill in."""
    f = Clos.generate(2, 2, 5).as_leaf_spine()
    flows = [Flow("j", "h0_0", "h1_0", 10e9)] + [Flow("j", f"h0_{k}", f"h1_{k}", 1e8)
                                                 for k in range(1, 5)]
    problem = Problem.build(f, [Job("j", explicit=flows)])
    w = [fl.bytes / f.link_bps() for fl in problem.flows]
    alpha, flow, spine, share = weighted_split_lp(problem, w)
    assert alpha == pytest.approx(sum(w) / 2)  # every byte counted, perfectly balanced
    per_flow = {}
    for k, x in zip(flow, share):
        per_flow[int(k)] = per_flow.get(int(k), 0.0) + x
    assert all(v == pytest.approx(1.0) for v in per_flow.values())
    assert sorted(per_flow) == list(range(5))


@pytest.mark.parametrize("seed", [5, 6])
def test_byte_split_with_4_parts_never_behind_the_jobs_objective(seed):
    f = Clos.generate(4, 8, 8, 100.0, 1).as_leaf_spine()
    jobs = byte_mix(f, 4, 16, seed=seed)
    a = make_plan(f, jobs, "split", max_parts=4, objective="jobs")
    b = make_plan(f, jobs, "auto", objective="jobs", ilp_time_limit=0)
    mine = job_slowdowns(two_tier_view(a)[0], two_tier_view(a)[1].parts)
    theirs = job_slowdowns(two_tier_view(b)[0], two_tier_view(b)[1].parts)
    assert max(len(p) for p in two_tier_view(a)[1].parts) <= 4
    # the objective's own order (objective.rank_key): the mean first, the worst held to the
    # worst of the routing with the lowest mean
    bound = worst_bound({"split": mine, "jobs": theirs})
    assert rank_key(mine.values(), bound)[:2] <= rank_key(theirs.values(), bound)[:2]
    assert _mean(mine) <= _mean(theirs) + 1e-9
    info = a.routing.info
    assert info["chosen"] in ("bytes", "flows", "jobs-unsplit")
    assert info["predicted_slowdown"] == pytest.approx(mine)
    flows_only = make_plan(f, jobs, "split", max_parts=4)
    assert _mean(mine) <= _mean(job_slowdowns(two_tier_view(flows_only)[0],
                                              two_tier_view(flows_only)[1].parts)) + 1e-9


def test_byte_split_beats_flow_count_split_on_pipelines():
    f = Clos.generate(4, 8, 8, 100.0, 1).as_leaf_spine()
    jobs = pipeline(f, [8, 8, 8, 8], seed=2)
    by_bytes = make_plan(f, jobs, "split", objective="jobs", max_parts=None)
    by_flows = make_plan(f, jobs, "split", max_parts=None)
    assert _mean(job_slowdowns(two_tier_view(by_bytes)[0], two_tier_view(by_bytes)[1].parts)) < \
        _mean(job_slowdowns(two_tier_view(by_flows)[0], two_tier_view(by_flows)[1].parts)) - 0.05


def test_max_parts_zero_lifts_the_bound_in_the_options():
    f = Clos.generate(4, 2, 5).as_leaf_spine()  # 5 flows out of l0 over 4 spines: 1.25 needs 4 quarters
    p = Problem.build(f, [Job("j", explicit=[Flow("j", f"h0_{k}", f"h1_{k}", 1)
                                              for k in range(5)])])
    unbounded = split(p, **planner_options("split", max_parts=0))
    assert unbounded.info["max_parts"] == split(p, max_parts=None).info["max_parts"] == 4
    assert split(p, **planner_options("split", max_parts=2)).info["max_parts"] <= 2
    assert planner_options("split", max_parts=0) == {"objective": "flows", "max_parts": None}
    assert planner_options("split", max_parts=3, objective="jobs") == {
        "objective": "jobs", "max_parts": 3}
    with pytest.raises(InputError, match="max_parts must be an integer >= 0"):
        planner_options("split", max_parts=-1)
    with pytest.raises(InputError, match="unknown objective"):
        split(p, objective="bytes")


def test_at_the_byte_bound_no_byte_lp():
    """Every host of a 2-spine fabric sends one flow of one size to the next leaf, two hosts a
    leaf: one flow per link is the byte LP's optimum, so it is not solved (``split_bytes``);
    one sender a leaf: the byte LP (no floor) spreads it over both spines, so it runs."""
    def shift(hpl, senders):
        f = Clos.generate(2, 4, hpl).as_leaf_spine()
        flows = [Flow("j", f"h{i}_{m}", f"h{(i + 1) % 4}_{m}", 1e8)
                 for i in range(4) for m in range(senders)]
        return Problem.build(f, [Job("j", explicit=flows)])

    def no_lp(*_a, **_k):
        raise AssertionError("an LP was built")

    p = shift(2, 2)
    with mock.patch("controller.planners.lp.weighted_split_lp", no_lp):
        a = split(p, objective="jobs")
    assert a.info["split_bytes"] in ("flows at the byte bound: no LP",
                                     "jobs-unsplit at the byte bound: no LP")
    assert set(a.info["candidates_mean"]) == {"flows", "jobs-unsplit"}
    assert a.info["worst_slowdown"] == pytest.approx(1.0) and a.info["split_flows"] == 0
    with mock.patch("controller.planners.lp.weighted_split_lp", no_lp), \
            pytest.raises(AssertionError, match="LP"):
        split(shift(2, 1), objective="jobs")
    b = split(shift(2, 1), objective="jobs")
    assert "split_bytes" not in b.info and "bytes" in b.info["candidates_mean"]
