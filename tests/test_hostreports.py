"""Host mode on fabrics without OpenFlow (``service/hostreports.py``): a host-mode job is
accepted on routers, the segments document names each part's path and the routers, the
agents' ports (``POST /v1/hosts/{host}/ports``) are checked all or nothing and served as host
mode serves its own, and a re-plan that moves a part drops its port, as does the agent's
withdrawal (``"sport": null``)."""
import json

import pytest

from controller.model.clos import Clos
from controller.service import api
from controller.service.route_service import RouteService
from controller.shell.static import StaticSwitches


def service():
    f = Clos.leaf_spine(2, 2, 2).wire()
    switches = StaticSwitches(f)
    svc = RouteService(switches, f, mode="srv6", algorithm="greedy")
    svc.note_switches(switches.connected_now())
    svc.sync_queued()
    return f, svc


def call(svc, method, path, doc=None):
    return api.handle(svc, method, path, json.dumps(doc).encode() if doc is not None else b"")


JOB = {"id": "p", "mode": "host", "flows": [
    {"src": "h0_0", "dst": "h1_0", "bytes": 2e6, "dport": 5201},
    {"src": "h0_0", "dst": "h1_0", "bytes": 2e6, "dport": 5202}]}


@pytest.fixture
def posted():
    f, svc = service()
    status, view = call(svc, "POST", "/v1/jobs", JOB)
    assert status == 201, view
    return f, svc, view


def entry(e, sport, **over):
    return {"job": e["job"], "flow": e["flow"], "part": e["part"], "path": e["path"],
            "sport": sport, **over}


def doc_of(svc, host="h0_0"):
    status, doc = call(svc, "GET", f"/v1/hosts/{host}/segments")
    assert status == 200
    return doc


def test_a_host_mode_job_is_accepted_on_routers_and_its_parts_reach_the_agent(posted):
    f, svc, view = posted
    assert view["mode"] == "host" and [r["sport"] for r in view["routes"]] == [None, None]
    spines = sorted(r["path"][1] for r in view["routes"])
    assert spines == ["s0", "s1"]
    doc = doc_of(svc)
    assert [(e["flow"]["dport"], e["part"], e["sport"], e["dst_ip"], e["proto"], e["dport"])
            for e in doc["ports"]] == [(5201, 0, None, "10.0.1.1", 6, 5201),
                                       (5202, 0, None, "10.0.1.1", 6, 5202)]
    assert sorted(e["path"][1] for e in doc["ports"]) == ["s0", "s1"]
    assert doc["routers"]["100.64.0.3"] == "s0" and len(doc["routers"]) == 4
    assert doc["flows"] == []  # nothing for the srv6 steering
    assert doc_of(svc, "h1_0")["ports"] == []  # the destination chooses nothing
    assert svc.fabric_view()["host_mode"]["learned_by"] == "hosts"


def test_reported_ports_are_served_as_host_mode_serves_its_own(posted):
    f, svc, _ = posted
    doc = doc_of(svc)
    ports = [entry(e, 49160 + i) for i, e in enumerate(doc["ports"])]
    status, answer = call(svc, "POST", "/v1/hosts/h0_0/ports", {"ports": ports})
    assert (status, answer) == (200, {"host": "h0_0", "ports": 2})
    after = doc_of(svc)
    assert after["version"] != doc["version"]  # the watches see it
    assert [e["sport"] for e in after["ports"]] == [49160, 49161]
    routes = call(svc, "GET", "/v1/jobs/p")[1]["routes"]
    assert {r["dport"]: r["sport"] for r in routes} == {5201: 49160, 5202: 49161}
    text = call(svc, "GET", "/v1/jobs/p/ports")[1]
    assert text.splitlines()[1:] == ["10.0.0.1 10.0.1.1 tcp 49160 5201",
                                     "10.0.0.1 10.0.1.1 tcp 49161 5202"]
    # reported again (the agent's re-check): the same ports, accepted, nothing else moves
    assert call(svc, "POST", "/v1/hosts/h0_0/ports", {"ports": ports})[0] == 200
    assert svc.tx.refresh_host_ports() == {}  # kept: nothing to refresh
    # another job's change keeps them (their paths are unchanged)
    assert call(svc, "POST", "/v1/jobs", {"id": "q", "flows": [
        {"src": "h0_1", "dst": "h1_1", "bytes": 1e6}]})[0] == 201
    assert [e["sport"] for e in doc_of(svc)["ports"]] == [49160, 49161]


@pytest.mark.parametrize("change, status, words", [
    (lambda e: dict(e, flow=dict(e["flow"], dport=9)), 400, "has no flow h0_0 -> h1_0"),
    (lambda e: dict(e, part=1), 400, "the flow has 1 part(s)"),
    (lambda e: dict(e, sport=0), 400, "'sport' must be a port, 1 to 65535"),
    (lambda e: dict(e, sport=65536), 400, "'sport' must be a port"),
    (lambda e: dict(e, sport="49152"), 400, "'sport' must be a port"),
    (lambda e: dict(e, path="l0"), 400, "'path' must be a list"),
    (lambda e: dict(e, job="gone"), 409, "no job 'gone'"),
    (lambda e: dict(e, path=[e["path"][0], "s1" if e["path"][1] == "s0" else "s0",
                             e["path"][2]]), 409, "is planned on"),
])
def test_a_wrong_entry_is_refused_and_nothing_is_kept(posted, change, status, words):
    f, svc, _ = posted
    doc = doc_of(svc)
    good, other = doc["ports"]
    code, answer = call(svc, "POST", "/v1/hosts/h0_0/ports",
                        {"ports": [entry(other, 49170), change(entry(good, 49171))]})
    assert code == status and words in answer["error"], answer
    assert "entry 1" in answer["error"]
    assert [e["sport"] for e in doc_of(svc)["ports"]] == [None, None]  # all or nothing
    assert doc_of(svc)["version"] == doc["version"]


def test_ports_are_unique_per_host_and_protocol_and_a_host_reports_its_own(posted):
    f, svc, _ = posted
    a, b = doc_of(svc)["ports"]
    code, answer = call(svc, "POST", "/v1/hosts/h0_0/ports",
                        {"ports": [entry(a, 49152), entry(b, 49152)]})
    assert code == 400 and "entry 1" in answer["error"] and answer["error"].endswith(
        "tcp source port 49152 is already job p's flow h0_0 -> h1_0 dport 5201 part 0's"), answer
    assert call(svc, "POST", "/v1/hosts/h0_0/ports", {"ports": [entry(a, 49152)]})[0] == 200
    code, answer = call(svc, "POST", "/v1/hosts/h0_0/ports", {"ports": [entry(b, 49152)]})
    assert code == 400 and "already" in answer["error"]
    # the same part moving to a new port frees its old one
    assert call(svc, "POST", "/v1/hosts/h0_0/ports", {"ports": [entry(a, 49153),
                                                                entry(b, 49152)]})[0] == 200
    # a flow of another mode holds its own source port
    assert call(svc, "POST", "/v1/jobs", {"id": "fixed", "flows": [
        {"src": "h0_0", "dst": "h1_1", "bytes": 1e6, "sport": 49999, "dport": 80}]})[0] == 201
    code, answer = call(svc, "POST", "/v1/hosts/h0_0/ports", {"ports": [entry(a, 49999)]})
    assert code == 400 and "job fixed's flow h0_0 -> h1_1 sport 49999 dport 80 part 0" in answer["error"]
    # another host cannot report h0_0's flows; an unknown host is 404
    code, answer = call(svc, "POST", "/v1/hosts/h1_0/ports", {"ports": [entry(a, 49154)]})
    assert code == 400 and "from h1_0" in answer["error"]
    assert call(svc, "POST", "/v1/hosts/nobody/ports", {"ports": []})[0] == 404
    for bad in ({}, {"ports": "x"}, {"ports": [1]}, {"ports": [entry(a, 1, flow={})]}):
        assert call(svc, "POST", "/v1/hosts/h0_0/ports", bad)[0] == 400


def test_a_tcp_flow_without_its_destination_port_is_refused_on_routers():
    f, svc = service()
    code, answer = call(svc, "POST", "/v1/jobs", {"id": "n", "mode": "host", "flows": [
        {"src": "h0_0", "dst": "h1_0", "bytes": 1e6}]})
    assert code == 400 and answer["error"] == (
        "job n: flow h0_0 -> h1_0 (tcp) has no 'dport': host mode on routers needs the "
        "destination port (the routers' ECMP hash covers it)")
    assert call(svc, "GET", "/v1/jobs")[1]["jobs"] == []


def test_a_part_moved_by_a_re_plan_loses_its_port_and_the_other_keeps_its_own(posted):
    f, svc, _ = posted
    ports = doc_of(svc)["ports"]
    call(svc, "POST", "/v1/hosts/h0_0/ports",
         {"ports": [entry(e, 49160 + i) for i, e in enumerate(ports)]})
    on_s0 = next(e for e in ports if e["path"][1] == "s0")
    svc.ports_changed([(f.dpids["l0"], p, False, None) for p in f.ports_to("l0", "s0")])
    after = {e["flow"]["dport"]: e for e in doc_of(svc)["ports"]}
    moved = after[on_s0["flow"]["dport"]]
    assert moved["path"][1] == "s1" and moved["sport"] is None
    kept = next(e for d, e in after.items() if d != on_s0["flow"]["dport"])
    assert kept["sport"] == 49160 + ports.index(next(e for e in ports if e is not on_s0))
    event = svc.state.events[-1]
    assert [(c["old_sport"], c["sport"]) for c in event["port_changes"]] == \
        [(49160 + ports.index(on_s0), None)]
    # the agent learns a port for the new path: accepted
    assert call(svc, "POST", "/v1/hosts/h0_0/ports", {"ports": [entry(moved, 49170)]})[0] == 200


def test_an_openflow_controller_takes_no_port_report():
    f = Clos.leaf_spine(2, 2, 2).wire()
    svc = RouteService(object(), f, mode="host")
    code, answer = call(svc, "POST", "/v1/hosts/h0_0/ports", {"ports": []})
    assert code == 409 and "probes through its OpenFlow switches" in answer["error"]


def test_a_withdrawn_port_is_dropped_and_served_as_null_and_learned_again(posted):
    f, svc, _ = posted
    a, b = doc_of(svc)["ports"]
    assert call(svc, "POST", "/v1/hosts/h0_0/ports",
                {"ports": [entry(a, 49160), entry(b, 49161)]})[0] == 200
    before, events = doc_of(svc), len(svc.state.events)
    status, answer = call(svc, "POST", "/v1/hosts/h0_0/ports", {"ports": [entry(a, None)]})
    assert (status, answer) == (200, {"host": "h0_0", "ports": 1}), answer
    after = doc_of(svc)
    assert after["version"] != before["version"]  # the agent learns it again from this one
    assert [e["sport"] for e in after["ports"]] == [None, 49161]
    routes = call(svc, "GET", "/v1/jobs/p")[1]["routes"]
    assert {r["dport"]: r["sport"] for r in routes} == {5201: None, 5202: 49161}
    assert call(svc, "GET", "/v1/jobs/p/ports")[1].splitlines()[1:] == [
        "10.0.0.1 10.0.1.1 tcp 49161 5202"]
    assert len(svc.state.events) == events + 1
    [change] = svc.state.events[-1]["port_changes"]
    assert (change["job"], change["src"], change["dst"], change["part"], change["old_sport"],
            change["sport"]) == ("p", "h0_0", "h1_0", 0, 49160, None)
    assert "1 withdrawn" in svc.state.events[-1]["cause"]
    assert svc.tx.refresh_host_ports() == {}  # dropped: nothing for the controller to do
    # a part without a port withdrawn again: a no-op, no event
    assert call(svc, "POST", "/v1/hosts/h0_0/ports", {"ports": [entry(a, None)]})[0] == 200
    assert [e["sport"] for e in doc_of(svc)["ports"]] == [None, 49161]
    assert len(svc.state.events) == events + 1
    # its freed port can be another part's; the part takes a new one
    assert call(svc, "POST", "/v1/hosts/h0_0/ports",
                {"ports": [entry(a, 49162), entry(b, 49160)]})[0] == 200
    assert [e["sport"] for e in doc_of(svc)["ports"]] == [49162, 49160]
    assert [(c["old_sport"], c["sport"]) for c in svc.state.events[-1]["port_changes"]] == \
        [(49161, 49160)]  # a kept port replaced is a change too; a new one is not


@pytest.mark.parametrize("change, status, words", [
    (lambda e: dict(e, flow=dict(e["flow"], dport=9)), 400, "has no flow h0_0 -> h1_0"),
    (lambda e: dict(e, part=1), 400, "the flow has 1 part(s)"),
    (lambda e: dict(e, sport=False), 400, "or null (withdrawn)"),
    (lambda e: dict(e, path=[e["path"][0], "s1" if e["path"][1] == "s0" else "s0",
                             e["path"][2]]), 409, "is planned on"),
])
def test_a_wrong_withdrawal_is_refused_with_the_rest_of_its_report(posted, change, status,
                                                                   words):
    f, svc, _ = posted
    a, b = doc_of(svc)["ports"]
    assert call(svc, "POST", "/v1/hosts/h0_0/ports", {"ports": [entry(a, 49160)]})[0] == 200
    before = doc_of(svc)
    code, answer = call(svc, "POST", "/v1/hosts/h0_0/ports",
                        {"ports": [entry(b, 49161), change(entry(a, None))]})
    assert code == status and words in answer["error"] and "entry 1" in answer["error"], answer
    assert doc_of(svc) == before  # all or none: b's port not kept, a's not dropped


def test_a_withdrawal_and_a_new_port_in_one_report_are_kept_together(posted):
    f, svc, _ = posted
    a, b = doc_of(svc)["ports"]
    assert call(svc, "POST", "/v1/hosts/h0_0/ports", {"ports": [entry(a, 49160)]})[0] == 200
    # another host withdrawing h0_0's part: 400, nothing changes
    code, answer = call(svc, "POST", "/v1/hosts/h1_0/ports", {"ports": [entry(a, None)]})
    assert code == 400 and "from h1_0" in answer["error"], answer
    assert [e["sport"] for e in doc_of(svc)["ports"]] == [49160, None]
    # a part named twice: 400 (which one would hold?)
    code, answer = call(svc, "POST", "/v1/hosts/h0_0/ports",
                        {"ports": [entry(a, None), entry(a, 49163)]})
    assert code == 400 and "is entry 0 already" in answer["error"], answer
    # b takes a's old port while a withdraws it: both kept
    assert call(svc, "POST", "/v1/hosts/h0_0/ports",
                {"ports": [entry(b, 49160), entry(a, None)]})[0] == 200
    assert [e["sport"] for e in doc_of(svc)["ports"]] == [None, 49160]
    assert [(c["part"], c["old_sport"], c["sport"])
            for c in svc.state.events[-1]["port_changes"]] == [(0, 49160, None)]
