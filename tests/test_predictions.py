"""The job view's prediction (controller.service.predictions) is the planner's: the shared
iteration model on the installed routes, within its tolerance of the fluid model, computed
once per state version with a cooperative yield per event."""
import pytest

from controller.enforcement.desired import installed_plan
from controller.model.fluid import predict_allreduce
from controller.model.iteration import TOLERANCE
from controller.service import api
from controller.service.predictions import plan_times, predict_all
from tests.test_control_plane import post, ring, start, wired

JOBS = [ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"], 8e6, compute_s=0.5),
        ring("b", ["h0_1", "h2_1", "h1_1"], 4e6),
        {"id": "c", "flows": [{"src": "h3_1", "dst": "h0_1", "bytes": 3e6},
                              {"src": "h3_1", "dst": "h1_0", "bytes": 1e6}]}]


def running(**kw):
    f = wired()
    sw, svc = start(f, **kw)
    for doc in JOBS:
        assert post(svc, doc)[0] == 201
    return svc


def test_the_job_view_shows_the_shared_prediction_of_the_installed_routes():
    svc = running()
    plan = installed_plan(svc.state.fabric, svc.state.jobs.values())  # a Plan: paths
    shared = plan_times(plan)
    fluid = predict_allreduce(plan)
    for jid in ("a", "b", "c"):
        view = api.handle(svc, "GET", f"/v1/jobs/{jid}")[1]
        assert view["predicted_allreduce_s"] == shared[jid]  # the planner's own figure
        assert view["predicted_allreduce_s"] == pytest.approx(fluid[jid], rel=TOLERANCE)
        assert view["predicted_allreduce_s"] >= view["ideal_s"] > 0


def test_predictions_are_computed_once_per_state_version_and_yield_per_event():
    calls = []
    svc = running(on_progress=lambda: calls.append(1))
    svc.state.version += 1  # past the POST answers' predictions
    calls.clear()
    first = api.handle(svc, "GET", "/v1/jobs/a")[1]["predicted_allreduce_s"]
    n = len(calls)
    assert 0 < n <= 4  # one event per ring or explicit flow at most: 2 rings + 2 flows
    assert api.handle(svc, "GET", "/v1/jobs/b")[0] == 200
    assert api.handle(svc, "GET", "/v1/jobs/a")[1]["predicted_allreduce_s"] == first
    assert len(calls) == n  # same version: from the cache
    assert api.handle(svc, "DELETE", "/v1/jobs/c")[0] == 200
    api.handle(svc, "GET", "/v1/jobs/a")
    assert len(calls) > n


def test_a_model_that_cannot_progress_reports_why(monkeypatch):
    svc = running()

    def stuck(*_args, **_kw):
        raise ValueError("an entity cannot progress")
    monkeypatch.setattr("controller.planners.plan.predict_clos_split_times", stuck)
    out = predict_all(svc.state)
    assert out["a"] == {"seconds": None, "error": "prediction failed: an entity cannot progress"}
