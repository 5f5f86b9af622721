"""A declared fabric that disagrees with what the switches show speaks up (issue 61), in
process on fake switches: ``/v1/ready`` says what disagrees, the log says it once per change,
and a job whose flows cross a switch or port that disagrees is refused with a 409 naming it
(one that crosses none is admitted)."""
from __future__ import annotations

import json
import logging

from controller.model.clos import Clos
from controller.service import api
from controller.service.route_service import RouteService
from emulation.harness.fake_switch import FakeSwitches
from tests.helpers import FakeClock
from tests.test_zero_config import deliver, hosts_speak

HOST_MOVED = "host h0_0 (02:00:00:00:00:01) is declared on leaf l0 port 5, seen on leaf l0 port 3"


def run(truth: Clos, declared: Clos, wiring=None):
    """A controller given ``declared`` over fake switches cabled as ``truth`` (``wiring``
    overrides cables: (switch, port) -> (peer, peer port)): they connect, probes cross, hosts
    speak, and discovery's quiet period passes."""
    clock = FakeClock()
    sw = FakeSwitches(truth.dpids.values())
    svc = RouteService(sw, declared, clock=clock, sleep=clock.sleep, algorithm="greedy")
    for name, dpid in truth.dpids.items():
        svc.switch_connected(dpid, {p: True for p in truth.ports[name].values()})
    for _ in range(2):
        svc.tick()
        deliver(truth, svc, sw, wiring)
    hosts_speak(truth, svc)
    clock.now += 3
    svc.tick()
    deliver(truth, svc, sw, wiring)
    return clock, sw, svc


def post(svc, jid, ranks):
    return api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": jid, "collective": "ring_allreduce", "ranks": ranks, "bytes": 1e6}).encode())


def disagreements(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "mlroute"
            and r.getMessage().startswith("mlroute: the declared fabric disagrees")]


def test_a_larger_declared_fabric_than_the_one_running_speaks_up(caplog):
    """The issue's case: --mlroute-fabric from 4 spines x 8 leaves, the switches 2 x 4."""
    caplog.set_level(logging.INFO, logger="mlroute")
    truth = Clos.generate(2, 4, 2, 0.01, wiring=True)
    declared = Clos.generate(4, 8, 2, 0.01, wiring=True)
    clock, sw, svc = run(truth, declared)
    code, ready = api.handle(svc, "GET", "/v1/ready")
    assert code == 503 and not ready["ready"]
    assert ready["error"].startswith("not ready: 6 of 12 switches connected, 6 synchronised; "
                                     "the declared fabric disagrees with what is seen (14 "
                                     "problems): wrong_port: " + HOST_MOVED)
    assert ready["wiring_problems"] == 14  # 6 switches missing, 8 hosts elsewhere
    assert f"wrong_port: {HOST_MOVED}" in ready["disagrees"]
    logged = disagreements(caplog)
    assert len(logged) == 1 and HOST_MOVED in logged[0], logged
    assert caplog.records[[r.getMessage() for r in caplog.records].index(logged[0])].levelno \
        == logging.WARNING
    # the POST that answered 201 while every ping failed
    code, doc = post(svc, "a", ["h0_0", "h1_0"])
    assert code == 409, doc
    assert "job a: its flows cross switches or ports where the declared fabric disagrees" \
        in doc["error"] and HOST_MOVED in doc["error"]
    assert "a" not in svc.jobs
    assert any(r.getMessage().startswith("mlroute: job a refused (409): ")
               for r in caplog.records)
    # said once per change: more rounds with nothing new say nothing more
    for _ in range(3):
        clock.now += 3
        svc.tick()
        deliver(truth, svc, sw)
    assert len(disagreements(caplog)) == 1
    listed = api.handle(svc, "GET", "/v1/fabric")[1]["discovery"]["wiring_problems"]
    assert len(listed) == 14 and {p["kind"] for p in listed} == {"switch_missing", "wrong_port"}


def test_swapped_cables_refuse_only_the_jobs_that_cross_them(caplog):
    caplog.set_level(logging.INFO, logger="mlroute")
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    p0, p1 = f.port("l2", "s0"), f.port("l2", "s1")
    wiring = {("l2", p0): ("s1", f.port("s1", "l2")), ("l2", p1): ("s0", f.port("s0", "l2")),
              ("s0", f.port("s0", "l2")): ("l2", p1), ("s1", f.port("s1", "l2")): ("l2", p0)}
    _, _, svc = run(f, f, wiring)
    code, ready = api.handle(svc, "GET", "/v1/ready")
    # every switch connected and synchronised, yet not ready: two cables are swapped
    assert code == 503 and ready["connected"] == ready["synchronised"] == 6
    assert ready["error"].startswith("not ready: 6 of 6 switches connected, 6 synchronised; "
                                     "the declared fabric disagrees with what is seen (2 "
                                     f"problems): wrong_port: leaf l2 port {p0}: expected spine")
    assert len(disagreements(caplog)) == 1
    code, doc = post(svc, "fine", ["h0_0", "h1_0"])  # l0 and l1 only
    assert code == 201, doc
    code, doc = post(svc, "crossing", ["h0_1", "h2_0"])  # through l2's uplinks
    assert code == 409 and "wrong_port: leaf l2 port " in doc["error"], doc
    assert "crossing" not in svc.jobs and "fine" in svc.jobs


def test_a_matching_declared_fabric_is_ready_and_says_so_once(caplog):
    caplog.set_level(logging.INFO, logger="mlroute")
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    _, _, svc = run(f, f)
    code, ready = api.handle(svc, "GET", "/v1/ready")
    assert code == 200 and "wiring_problems" not in ready
    said = [r.getMessage() for r in caplog.records if "declared fabric" in r.getMessage()]
    assert said == ["mlroute: the declared fabric matches what is seen"]


def test_a_switch_connected_since_the_last_check_is_not_held_against_a_job():
    """Discovery checks the declared fabric once the topology is quiet: a switch it last saw
    missing that is connected now does not refuse a job (a POST right after the switches
    connected was answered 409)."""
    from controller.model.clos import Clos
    from controller.model.intent import JobRecord
    from controller.model.jobs import parse_job
    from controller.service import wiring
    f = Clos.generate(2, 2, 1, 10.0, wiring=True)
    job = parse_job({"id": "j", "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1e6}]}, f)
    record = JobRecord(job, 1, "greedy", "flow", 0.0)
    problem = {"kind": "switch_missing", "switch": "l0", "port": None,
               "detail": "leaf l0 (0x20000) is declared but not connected", "dpid": f.dpids["l0"]}
    seen = wiring.Wiring(True, (problem,))
    assert wiring.crossed(f, seen, record) == [problem]
    assert wiring.crossed(f, seen, record, frozenset({f.dpids["l0"]})) == []
