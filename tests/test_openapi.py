"""The OpenAPI document matches the real routes, and fuzzing a running controller (real
ryu-manager, no switches needed) with schemathesis gets no server error."""
import json
import os

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from controller.service import api
from emulation.harness.controller_proc import ControllerProcess
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
            # no server error but a documented one (GET /v1/ready's 503: not ready yet)
            documented = doc["paths"][case.operation.path][case.method.lower()]["responses"]
            assert response.status_code < 500 or str(response.status_code) in documented, (
                case.method, case.path, case.body, response.text[:500])
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


# ---- schema and code accept the same documents -----------------------------------------------
import jsonschema_rs  # noqa: E402

from controller.model.clos import Clos  # noqa: E402
from controller.service.route_service import RouteService  # noqa: E402
from emulation.harness.fake_switch import FakeSwitches  # noqa: E402
from tests.helpers import FakeClock  # noqa: E402


def _validator(name: str):
    doc = api.openapi()
    return jsonschema_rs.Draft4Validator({"$ref": f"#/components/schemas/{name}",
                                          "components": doc["components"]})


def _service(declared=True):
    f = Clos.generate(2, 4, 2, 10.0, wiring=True)
    clock = FakeClock()
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, f if declared else None, clock=clock, sleep=clock.sleep)
    for name, dpid in f.dpids.items():
        svc.switch_connected(dpid, {p: True for p in f.ports[name].values()})
    return svc


def _examples():
    """(method, path, schema name, example name, body) of every request body example."""
    out = []
    for path, item in api.openapi()["paths"].items():
        for method, op in item.items():
            if method not in ("put", "post"):
                continue
            content = (op.get("requestBody") or {}).get("content", {}).get("application/json")
            if not content:
                continue
            name = content["schema"]["$ref"].rsplit("/", 1)[1]
            for ex, body in (content.get("examples") or {}).items():
                out.append((method.upper(), path, name, ex, body["value"]))
    return out


@pytest.mark.parametrize("method, path, schema, example, body", _examples(),
                         ids=[f"{m} {p} {e}" for m, p, _s, e, _b in _examples()])
def test_the_schemas_own_examples_are_valid_and_accepted(method, path, schema, example, body):
    assert _validator(schema).is_valid(body), example
    svc = _service(declared=path != "/v1/fabric")
    status, doc = api.handle(svc, method, path, json.dumps(body).encode())
    assert status < 300, (example, status, doc)


def test_every_write_operation_has_examples():
    names = {(m, p) for m, p, _s, _e, _b in _examples()}
    assert names >= {("POST", "/v1/jobs"), ("POST", "/v1/advise"), ("PUT", "/v1/fabric")}
    assert len({e for m, p, _s, e, _b in _examples() if p == "/v1/jobs"}) >= 4


# documents the schema used to accept and the code refuses (400): the schema now refuses them
REFUSED_BY_BOTH = [
    ("Fabric", {"spines": ["s0"], "leaves": ["l0"], "hosts": {"h0_0": "l0"}}),  # not wired
    ("Job", {"id": "j"}),  # neither flows, nor a collective, nor members
    ("Job", {"id": "j", "collective": "ring_allreduce", "ranks": ["h0_0", "h1_0"]}),  # bytes
    ("Job", {"id": "j", "ranks": ["h0_0", "h1_0"], "rings": [["h0_0", "h1_0"]], "bytes": 1}),
    ("Job", {"id": "j", "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1}],
             "ranks": ["h0_0", "h1_0"], "bytes": 1}),
    ("Job", {"id": "a b", "ranks": ["h0_0", "h1_0"], "bytes": 1}),  # not usable in a URL
    ("Job", {"id": "j", "ranks": ["h0_0", "h0_0"], "bytes": 1}),  # a host twice
    ("Job", {"id": "j", "ranks": ["h0_0", "h1_0"], "bytes": 1, "objective": "jobs",
             "algorithm": "greedy"}),  # objective jobs needs auto
    ("Job", {"id": "j", "ranks": ["h0_0", "h1_0"], "bytes": 1, "max_parts": 2,
             "algorithm": "auto"}),  # max_parts needs split
    ("Job", {"id": "j", "ranks": ["h0_0", "h1_0"], "bytes": 1, "max_parts": -1,
             "algorithm": "split"}),
    ("Job", {"id": "j", "ranks": ["h0_0", "h1_0"], "bytes": 1, "max_parts": 2.5,
             "algorithm": "split"}),
    ("Job", {"id": "j", "ranks": ["h0_0", "h1_0"], "bytes": 1, "max_parts": "4",
             "algorithm": "split"}),
    ("Job", {"id": "j", "ranks": ["h0_0", "h1_0"], "bytes": 1, "max_parts": True,
             "algorithm": "split"}),
    ("Job", {"id": "j", "ranks": ["h0_0", "h1_0"], "bytes": 1, "mode": "host",
             "proto": "udp", "dport": 53}),  # host mode steers TCP and RoCEv2 only
    ("Job", {"id": "j", "members": ["h0_0", "h1_0"], "sport": 5}),
    ("Job", {"id": "j", "members": ["h0_0"]}),
]


@pytest.mark.parametrize("schema, body", REFUSED_BY_BOTH)
def test_what_the_code_refuses_the_schema_refuses(schema, body):
    assert not _validator(schema).is_valid(body)
    svc = _service(declared=schema == "Job")
    path, method = ("/v1/jobs", "POST") if schema == "Job" else ("/v1/fabric", "PUT")
    status, doc = api.handle(svc, method, path, json.dumps(body).encode())
    assert status == 400 and isinstance(doc["error"], str), (status, doc)


@pytest.mark.parametrize("field", ["rings", "ranks", "flows", "members"])
def test_a_null_list_is_a_400_not_a_500(field):
    """Regression: "rings": null got a 500 (TypeError while looking for IPv4 addresses)."""
    svc = _service()
    body = {"id": "n", "collective": "ring_allreduce", field: None, "bytes": 1}
    if field in ("flows", "members"):
        del body["collective"]
    status, doc = api.handle(svc, "POST", "/v1/jobs", json.dumps(body).encode())
    assert status == 400 and isinstance(doc["error"], str), doc
    assert "Traceback" not in doc["error"] and "internal error" not in doc["error"]
    assert not _validator("Job").is_valid(body)


def _set(doc, path, value):
    *where, last = path
    for k in where:
        doc = doc[k]
    doc[last] = value


@pytest.mark.parametrize("path, value, key", [
    (("host_mac", "x"), {}, "host_mac"),  # a host the fabric does not have
    (("host_ip", "h0_0"), ["10.0.0.1"], "IPv4"),  # one plane: one address, not a list
    (("dpids", "l1"), {"a": 1}, "dpids"),
    (("dpids",), [1, 2], "dpids"),
    (("ports", "a0_0"), 3, "ports"),
    (("ports", "a0_0", "l1"), "2", "ports"),
    (("host_mac", "h0_0"), 5, "host_mac")])
def test_a_three_tier_fabric_with_values_of_the_wrong_type_is_a_400_not_a_500(path, value, key):
    """Regression: the Clos loader read the wiring tables before it checked them: a list as
    'dpids' or a dict as a datapath id got a 500, the MAC address of an unknown host was
    kept. Each is a 400 naming the table, and the fabric served before is kept."""
    doc = json.loads(json.dumps(Clos.fat_tree(4, 1).wire().to_dict()))
    _set(doc, path, value)
    svc = _service()
    before = api.handle(svc, "GET", "/v1/fabric")
    status, answer = api.handle(svc, "PUT", "/v1/fabric", json.dumps(doc).encode())
    assert status == 400 and key in answer["error"], answer
    assert api.handle(svc, "GET", "/v1/fabric") == before


@pytest.mark.parametrize("key, value", [
    ("host_mac", {"h0_0": "02:00:00:00:00:01", "h1_0": "02:00:00:00:01:01", "x": {}}),
    ("host_ip", {"h0_0": ["10.0.0.1"], "h1_0": "10.0.1.1"}),
    ("dpids", {"s0": 65536, "l0": 131072, "l1": {"a": 1}}),
    ("ports", {"s0": {"l0": 1, "l1": [2]}, "l0": {"s0": 1, "h0_0": 2},
               "l1": {"s0": 1, "h1_0": 2}})])
def test_a_fabric_with_values_of_the_wrong_type_is_a_400_not_a_500(key, value):
    """Found by Schemathesis: a dict as a MAC address got a 500 (unhashable type)."""
    doc = dict(next(b for _m, p, _s, _e, b in _examples() if p == "/v1/fabric"), **{key: value})
    status, answer = api.handle(_service(declared=False), "PUT", "/v1/fabric",
                                json.dumps(doc).encode())
    assert status == 400 and key in answer["error"], answer
    assert not _validator("Fabric").is_valid(doc)
