"""The jobs of ``emulation/harness/router_jobs.py`` (real collectives on the k = 4 fat-tree of
routers) without root: what they declare, and that the controller's plan for each, alone on
the fabric, predicts its ideal step (every ring flow, every all-to-all port at line rate), so
that the live figures compare measurement with a prediction of the same plan."""
from __future__ import annotations

import json
import os

import pytest

from emulation.harness import router_jobs
from topologies.routers import fat_tree


@pytest.fixture(scope="module")
def fabric():
    return fat_tree(4)


def test_three_jobs_of_eight_ranks_one_per_leaf_neighbours_across_pods(fabric):
    jobs = {j["id"]: j for j in router_jobs.jobs(fabric)}
    assert list(jobs) == ["gloo-ring", "mpi-ring", "all-to-all"]
    for j in jobs.values():
        leaves = [fabric.hosts[h] for h in j["hosts"]]
        assert sorted(leaves) == sorted(fabric.leaves)  # one rank per leaf
        pod = {leaf: p for p, pod in enumerate(fabric.leaves_by_pod()) for leaf in pod}
        ring = j["hosts"] + j["hosts"][:1]
        assert all(pod[fabric.hosts[a]] != pod[fabric.hosts[b]] for a, b in zip(ring, ring[1:]))
    assert set(jobs["gloo-ring"]["hosts"]).isdisjoint(jobs["mpi-ring"]["hosts"])


def test_rings_are_declared_in_their_librarys_data_direction(fabric):
    gloo, mpi, _ = router_jobs.jobs(fabric)
    for job, step in ((gloo, -1), (mpi, +1)):
        doc = router_jobs.declaration(job)
        ranks, h = doc["ranks"], job["hosts"]
        declared = {(ranks[i], ranks[(i + 1) % len(ranks)]) for i in range(len(ranks))}
        assert declared == router_jobs.data_pairs(job)
        assert (h[0], h[step % len(h)]) in declared  # gloo: to rank - 1, Open MPI: rank + 1
        assert doc["bytes"] == 4 << 20


def test_the_all_to_all_declares_every_pair_with_its_block(fabric):
    a2a = router_jobs.jobs(fabric)[2]
    flows = router_jobs.declaration(a2a)["flows"]
    assert len(flows) == 56 == len(router_jobs.data_pairs(a2a))
    assert {f["bytes"] for f in flows} == {1 << 20}  # 8 MiB a rank, 1/8 to each rank
    # seven blocks through each port at 20 Mbit/s, as a ring's 2 x 7/8 of 4 MiB
    assert router_jobs.ideal_s(a2a, 20) == pytest.approx(7 * 8 * (1 << 20) / 20e6)
    assert router_jobs.ideal_s(router_jobs.jobs(fabric)[0], 20) == pytest.approx(
        router_jobs.ideal_s(a2a, 20))


def test_each_jobs_plan_alone_predicts_its_ideal_step(fabric):
    """In process, srv6 mode: each declaration posted alone, its view's prediction (the
    model the live benchmark compares with) equals its ideal at the fabric's line rate."""
    from controller.service import api
    from controller.service.route_service import RouteService
    from controller.shell.static import StaticSwitches
    switches = StaticSwitches(fabric)
    svc = RouteService(switches, fabric, mode="srv6", algorithm="auto")
    svc.note_switches(switches.connected_now())
    svc.sync_queued()
    for job in router_jobs.jobs(fabric):
        status, doc = api.handle(svc, "POST", "/v1/jobs",
                                 json.dumps(router_jobs.declaration(job)).encode())
        assert status == 201, doc
        view = api.handle(svc, "GET", f"/v1/jobs/{job['id']}")[1]
        assert view["unroutable_flows"] == 0
        assert view["predicted_allreduce_s"] == pytest.approx(view["ideal_s"], rel=1e-6), job
        status, _ = api.handle(svc, "DELETE", f"/v1/jobs/{job['id']}")
        assert status == 200


def test_the_slowest_job_is_the_one_ecmp_slows_most_and_targets_follow_the_figures():
    jobs = {"ring": {"ecmp_median_s": 6.0, "plan_median_s": 3.0, "ecmp_over_plan": 2.0,
                     "plan_over_prediction": 1.03},
            "a2a": {"ecmp_median_s": 4.5, "plan_median_s": 4.2, "ecmp_over_plan": 1.07,
                    "plan_over_prediction": 1.43}}
    s = router_jobs.summary(jobs)
    assert s["slowest"]["job"] == "ring" and s["slowest"]["ecmp_over_plan"] == 2.0
    assert s["longest"] == {"ecmp_median_s": 6.0, "plan_median_s": 4.2, "ecmp_over_plan": 1.43}
    assert s["targets"] == {"plan_within_10pct_of_prediction": False,
                            "plan_within_5pct_of_prediction": False,
                            "no_planned_flow_moved": True,
                            "slowest_ecmp_over_plan>=1.5": True}
    jobs["a2a"]["plan_over_prediction"] = 0.96
    assert router_jobs.summary(jobs)["targets"]["plan_within_5pct_of_prediction"]
    jobs["ring"]["learned_moved"] = 1  # a false failure in any launch under a plan
    assert not router_jobs.summary(jobs)["targets"]["no_planned_flow_moved"]


def test_open_mpis_ring_blocks_go_eagerly_at_any_size(fabric):
    """The eager limit covers one block of the ring (tensor / ranks) whatever the tensor."""
    _, mpi, _ = router_jobs.jobs(fabric)
    for mib in (1, 4, 64):
        args = router_jobs.mpi_eager_args({**mpi, "mib": mib})
        limits = {args[i + 1]: int(args[i + 2]) for i in range(0, len(args), 3)}
        assert set(limits) == {"btl_tcp_eager_limit", "btl_tcp_rndv_eager_limit",
                               "btl_tcp_max_send_size"}
        assert set(limits.values()) == {(mib << 20) // 8 + 65536}


class _Session:
    """What ``_launch`` asks of a ``RouterSession``: no agent log, no retransmission."""
    net, fabric, folder = None, None, "/nonexistent"

    def retransmits(self, hosts):
        return 0

    def uplink_bytes(self, fabric=None):
        return {}


def test_a_launch_passes_its_mpi_arguments_and_schedule_as_parameters(fabric, monkeypatch):
    """Open MPI's eager arguments and the all-to-all's schedule reach ``run_allreduce`` as
    its parameters, per launch: nothing global (``collectives.MPI_ARGS``, the environment)
    changes, so launches in other threads are not affected."""
    gloo, mpi, a2a = router_jobs.jobs(fabric)
    calls = []

    def fake(net, fab, library, hosts, mib, iters, logdir, **kw):
        calls.append({"library": library, **kw})
        return {"sums_ok": True, "times": [1.0] * iters}
    monkeypatch.setattr(router_jobs.co, "run_allreduce", fake)
    before, env = list(router_jobs.co.MPI_ARGS), dict(os.environ)
    router_jobs._launch(_Session(), mpi, 2, "/nonexistent/x")
    router_jobs._launch(_Session(), mpi, 2, "/nonexistent/x", eager=False)
    router_jobs._launch(_Session(), a2a, 2, "/nonexistent/x", schedule="pairwise")
    router_jobs._launch(_Session(), gloo, 2, "/nonexistent/x")
    assert calls[0]["mpi_args"] == router_jobs.mpi_eager_args(mpi) != []
    assert [c["mpi_args"] for c in calls[1:]] == [[], [], []]
    assert [c["a2a_schedule"] for c in calls] == ["all", "all", "pairwise", "all"]
    router_jobs._launch(_Session(), a2a, 2, "/nonexistent/x")  # the job's: receives first
    assert calls[-1]["a2a_schedule"] == router_jobs.A2A_SCHEDULE == "recvfirst"
    assert calls[2]["a2a_mib"] == router_jobs.A2A_MIB
    assert router_jobs.co.MPI_ARGS == before and dict(os.environ) == env


def test_step_windows_take_each_iterations_first_start_and_every_ranks_end():
    """``diagnose_job`` samples each counted iteration between the ranks' first start and
    last end, from the spans ``run_allreduce`` already parsed from the ranks' results."""
    spans = [[[0.0, 1.0], [2.0, 4.0], [5.0, 6.0]], [[0.5, 1.5], [1.9, 3.0], [5.2, 7.5]]]
    assert router_jobs.step_windows(spans, 1, 2) == [(1.9, [4.0, 3.0]), (5.0, [6.0, 7.5])]
    assert router_jobs.step_windows(spans, 0, 0) == []


def test_diagnose_needs_the_fattree_section(capsys):
    from benchmarks import srv6
    with pytest.raises(SystemExit) as e:
        srv6.main(["--diagnose", "--only", "scale"])
    assert e.value.code == 2 and "--diagnose goes with --only fattree" in capsys.readouterr().err


def test_every_diagnose_case_names_a_schedule_the_ranks_take():
    """``--diagnose``'s cases: a schedule ``collective_rank`` knows, and one case with the
    hosts' ports as one FIFO (the emulation before ``fair_tc``) beside gloo's at 20 Mbit/s."""
    from benchmarks import srv6
    from emulation.harness.collective_rank import SCHEDULES
    assert all(schedule in ("all", *SCHEDULES) for _bw, schedule, *_ in srv6.DIAGNOSE.values())
    assert srv6.DIAGNOSE["fifo_20"] == (20.0, "all", True, False, 0.01)
    assert srv6.DIAGNOSE["gloo_20"] == (20.0, "all", True, True, 0.01)
    assert {c[4] for c in srv6.DIAGNOSE.values()} == {0.01, 0.03}  # the agents' periods


def test_the_benchmarks_agents_probe_at_its_period_and_the_document_says_so(monkeypatch):
    """``benchmarks.srv6 --only fattree`` starts every agent with ``--probe-period 0.03``
    (``router_jobs.PROBE_PERIOD_S``) and records it; a run without probes records none."""
    from benchmarks import srv6
    from emulation.harness import routers
    seen = []

    class Session:
        def __init__(self, fabric, folder, **kw):
            seen.append(kw)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass
    monkeypatch.setattr(routers, "RouterSession", Session)
    monkeypatch.setattr(router_jobs, "measure_job", lambda s, job, *a: {
        "plan_over_prediction": 1.0})
    doc = srv6.fattree("/nonexistent", 1)
    assert seen[-1]["agent_args"] == ("--probe-period", "0.03") and seen[-1]["probes"]
    assert doc["probe_period_s"] == router_jobs.PROBE_PERIOD_S == 0.03
    assert router_jobs.run("/nonexistent", probes=False)["probe_period_s"] is None
