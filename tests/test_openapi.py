"""The OpenAPI document matches the real routes, and fuzzing a running controller (real
ryu-manager, no switches needed) with schemathesis gets no server error."""
import json
import os

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from controller.service import api
from emulation.controller_proc import ControllerProcess
from topologies.clos import clos_fabric


def test_document_lists_exactly_the_served_routes():
    doc = api.openapi()
    documented = {(m.upper(), p) for p, item in doc["paths"].items() for m in item
                  if m in ("get", "put", "post", "delete", "patch")}
    served = {(m, p) for m, p in api.routes()} | {("GET", "/metrics")}
    assert documented == served


def test_document_is_served():
    assert api.handle(None, "GET", "/v1/openapi.json") == (200, api.openapi())


@pytest.fixture(scope="module")
def controller(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    path = os.path.join(tmp, "fabric.json")
    with open(path, "w") as fh:
        json.dump(clos_fabric(2, 4, 2).to_dict(), fh)
    ctl = ControllerProcess(path, os.path.join(tmp, "controller.log"), rest_port=8089,
                            of_port=6689).start()
    try:
        yield ctl
    finally:
        ctl.stop()
        log = open(os.path.join(tmp, "controller.log")).read()
        assert "Traceback" not in log, log[-3000:]


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_fuzz_no_server_errors(controller):
    status, doc = controller.rest("GET", "/v1/openapi.json")
    assert status == 200
    schema = schemathesis.openapi.from_dict(doc)
    calls = []
    for result in schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(max_examples=40, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def run(case):
            response = case.call(base_url=controller.url, timeout=30)
            calls.append(response.status_code)
            assert response.status_code < 500, (case.method, case.path, case.body,
                                                response.text[:500])
            if response.status_code >= 400:
                assert isinstance(response.json().get("error"), str)
        run()
    assert len(calls) >= 100 and any(c < 300 for c in calls) and any(c >= 400 for c in calls)


@pytest.mark.integration
def test_odd_paths_get_json_errors(controller):
    assert controller.rest("POST", "/v1/jobs", {"id": "€ x", "flows": [
        {"src": "h0_0", "dst": "h1_0", "bytes": 1}]})[0] == 400  # not usable in a URL
    assert controller.rest("POST", "/v1/jobs", {"id": "x", "flows": [
        {"src": "h0_0", "dst": "h1_0", "bytes": 1}]})[0] == 409  # valid, no switch connected
    for path, status in [("/v1/jobs/a%0Ab", 404), ("/v1/jobs/%E2%82%AC", 404),
                         ("/v1/jobs/x%00y", 404), ("/v1/nothing/here", 404)]:
        code, doc = controller.rest("GET", path)
        assert code == status and "error" in doc and "<html>" not in doc["error"]
    assert "no job '€'" in controller.rest("GET", "/v1/jobs/%E2%82%AC")[1]["error"]
