"""Per-switch rule budget (--mlroute-max-flow-rules) on the fake switch tables: a flow or sr
job over it is refused naming the switch and the counts and changes nothing, or is planned in
host mode when the operator asked for that; counts per switch in the fabric view and metrics."""
import json
import re

import pytest

from controller.enforcement.openflow import COOKIE_STATIC
from controller.errors import InputError
from controller.model.clos import Clos
from controller.service import api
from controller.service.metrics import exposition
from controller.service.route_service import RouteService
from emulation.harness.fake_switch import FakeSwitches, trace


def start(budget, over="refuse", mode="flow", spines=2, leaves=4, hosts=2):
    f = Clos.generate(spines, leaves, hosts, 0.01, wiring=True)
    sw = FakeSwitches(f.dpids.values(), fabric=f)
    svc = RouteService(sw, f, mode=mode, algorithm="greedy", max_flow_rules=budget,
                       over_budget=over)
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    return f, sw, svc


def post(svc, doc):
    return api.handle(svc, "POST", "/v1/jobs", json.dumps(doc).encode())


def fan_out(jid, n, src="h0_0", **extra):
    """n UDP 4791 flows out of ``src`` (n entries at its leaf in flow mode)."""
    return {"id": jid, "flows": [{"src": src, "dst": "h1_0", "bytes": 1e6, "proto": "udp",
                                  "dport": 4791, "sport": 50000 + k} for k in range(n)], **extra}


def leaf_entries(f, sw, leaf="l0"):
    return len(sw.rules[f.dpids[leaf]])


def test_a_job_over_the_budget_is_refused_naming_the_switch_and_counts():
    f, sw, svc = start(0)
    static = leaf_entries(f, sw)
    f, sw, svc = start(static + 5)
    assert post(svc, fan_out("ok", 5))[0] == 201  # exactly at the budget
    before, jobs = sw.snapshot(), list(svc.jobs)
    for mode in ("flow", "sr"):
        status, doc = post(svc, fan_out("big", 1, src="h0_1", mode=mode))
        assert status == 409
        # the first sr job brings the leaf's own label entry and, per host port, a drop of
        # MPLS (source_check: a host's own leaf label must not carry a forged packet in)
        held = static + 3 * (mode == "sr")
        assert (f"switch l0 would hold {held + 6} flow entries (6 of jobs, {held} static), "
                f"over its budget of {static + 5}") in doc["error"]
        assert "host" in doc["error"]  # says what would fit
        assert sw.snapshot() == before and list(svc.jobs) == jobs
    # a job on other leaves still fits
    assert post(svc, fan_out("elsewhere", 5, src="h2_0"))[0] == 201


def test_deleting_is_never_refused_and_frees_the_budget():
    f, sw, svc = start(0)
    budget = leaf_entries(f, sw) + 3
    f, sw, svc = start(budget)
    assert post(svc, fan_out("a", 3))[0] == 201
    assert post(svc, fan_out("b", 1, src="h0_1"))[0] == 409
    assert api.handle(svc, "DELETE", "/v1/jobs/a")[0] == 200
    assert post(svc, fan_out("b", 1, src="h0_1"))[0] == 201


def test_over_budget_host_plans_the_job_in_host_mode():
    f, sw, svc = start(0)
    budget = leaf_entries(f, sw) + 10  # room for the host pipeline, not for 40 flow entries
    f, sw, svc = start(budget, over="host")
    status, doc = post(svc, fan_out("big", 40))
    assert status == 201, doc
    assert doc["mode"] == "host" and "planned in host mode instead" in doc["mode_reason"]
    assert doc["over_budget"]["switch"] == "l0" and doc["over_budget"]["job_rules"] == 40
    assert all(r.cookie == COOKIE_STATIC for t in sw.rules.values() for r in t.values())
    for r in doc["routes"]:
        path, reached, _ = trace(f, sw, r["src"], r["dst"], 17, r["sport"], 4791)
        assert reached == r["dst"] and path[1] == r["spine"]
    # within the budget a job keeps its mode
    status, doc = post(svc, fan_out("small", 2, src="h2_0"))
    assert status == 201 and doc["mode"] == "flow" and "mode_reason" not in doc


def test_host_mode_needs_room_for_its_static_pipeline():
    f, sw, svc = start(0)
    f, sw, svc = start(leaf_entries(f, sw) + 1, over="host")
    status, doc = post(svc, fan_out("big", 10))
    assert status == 409 and "static" in doc["error"] and not svc.jobs


def test_counts_per_switch_in_the_fabric_view_and_metrics():
    f, sw, svc = start(100)
    assert post(svc, fan_out("a", 7))[0] == 201
    view = api.handle(svc, "GET", "/v1/fabric")[1]
    assert view["seen"]["l0"]["job_rules"] == 7
    assert view["seen"]["l0"]["rules"] == leaf_entries(f, sw)
    assert view["rule_budget"]["max_flow_rules"] == 100
    assert view["rule_budget"]["fullest_switch"] == "l0" and not view["rule_budget"]["switches_over"]
    text = exposition(svc)[0].decode()
    got = dict(re.findall(r'mlroute_switch_flow_rules\{owner="jobs",switch="(\w+)"\} (\S+)', text))
    assert float(got["l0"]) == 7 and float(got["l1"]) == 0 and len(got) == len(f.dpids)
    static = dict(re.findall(r'mlroute_switch_flow_rules\{owner="static",switch="(\w+)"\} (\S+)',
                             text))
    assert float(static["l0"]) == leaf_entries(f, sw) - 7
    assert re.search(r"^mlroute_max_flow_rules 100\.0$", text, re.M)


def test_no_budget_by_default_and_bad_settings_are_errors():
    f, sw, svc = start(0)
    assert post(svc, fan_out("a", 300))[0] == 201
    assert api.handle(svc, "GET", "/v1/fabric")[1]["rule_budget"]["max_flow_rules"] is None
    with pytest.raises(InputError):
        RouteService(sw, f, max_flow_rules=-1)
    with pytest.raises(InputError):
        RouteService(sw, f, over_budget="drop")
