"""The hosts' traffic reports (``POST /v1/hosts/{host}/traffic``, ``service/hostcounts.py``)
and the agent's side (``agent/traffic.py``): a members-only job learned where the routers
export no sFlow, and the reports a host may not make."""
import json
from types import SimpleNamespace

import pytest

from controller.agent.main import Agent
from controller.agent.traffic import SentBytes
from controller.measurement.learner import TrafficLearner
from controller.model.clos import Clos
from controller.service import api
from controller.service.route_service import RouteService
from controller.shell.static import StaticSwitches
from tests.helpers import FakeClock
from tests.test_learning_service import get, interleaved, post


def srv6_service(gbps=0.02):
    f = Clos.generate(2, 4, 2, gbps, wiring=True)
    clock = FakeClock(100.0)
    switches = StaticSwitches(f)
    svc = RouteService(switches, f, mode="srv6", clock=clock, sleep=clock.sleep,
                       learn_window=1.0)
    svc.note_switches(switches.connected_now())
    svc.sync_queued()
    return f, svc, clock


def send(svc, host, pairs, interval=0.5):
    body = {"interval_s": interval, "pairs": [{"src": s, "dst": d, "bytes": b, "packets": n}
                                              for s, d, b, n in pairs]}
    return api.handle(svc, "POST", f"/v1/hosts/{host}/traffic", json.dumps(body).encode())


def test_a_members_only_ring_is_learned_from_the_agents_reports_alone():
    f, svc, clock = srv6_service()
    ring = interleaved(f)
    assert post(svc, {"id": "m", "members": [f.host_ip[h] for h in ring]})[0] == 201
    for _ in range(8):  # 4 s of 0.5 s reports: each rank sends to the next, nothing back
        for i, h in enumerate(ring):
            peer = ring[(i + 1) % len(ring)]
            status, doc = send(svc, h, [(f.host_ip[h], f.host_ip[peer], 4e5, 300)])
            assert status == 200 and doc == {"host": h, "pairs": 1, "ignored": 0}
        clock.sleep(0.5)
        svc.tick(probe=False)
    view = get(svc, "m")[1]
    want = {(h, ring[(i + 1) % len(ring)]) for i, h in enumerate(ring)}
    assert view["matrix"] == "learned", view["learning"]
    assert {(r["src"], r["dst"]) for r in view["routes"]} == want
    # and the hosts' agents get the learned flows to steer
    seg = api.handle(svc, "GET", f"/v1/hosts/{ring[0]}/segments")[1]
    assert [x["dst_ip"] for x in seg["flows"] if not x.get("reverse")] == [f.host_ip[ring[1]]]


def test_a_counting_host_is_no_longer_sampled_and_counts_exactly():
    learner = TrafficLearner(1.0)
    sample = SimpleNamespace(src="a", dst="b", frame_length=1500, sampling_rate=100)
    learner.count([("a", "b", 5000.0, 4)], now=0.2)
    learner.observe([sample, SimpleNamespace(src="c", dst="b", frame_length=1500,
                                             sampling_rate=100)], now=0.4)
    assert learner.window_pairs(1.1) == {("a", "b"): 5000.0, ("c", "b"): 150000.0}
    assert learner.counted == 1 and learner.observed == 1


@pytest.mark.parametrize("pair, why", [
    (("10.0.1.1", "10.0.2.1", 1e3, 1), "is h1_0's address, not h0_0's"),
    (("10.0.0.1", "10.0.2.1", -1, 1), "'bytes' must be a finite number >= 0"),
    (("10.0.0.1", "10.0.2.1", 1e9, 1), "more than h0_0's 1 link(s) carry"),
])
def test_a_report_a_host_cannot_make_is_refused_and_counts_nothing(pair, why):
    f, svc, clock = srv6_service()
    before = svc.learning.learner.counted
    good = ("10.0.0.1", "10.0.1.1", 1e3, 1)
    status, doc = send(svc, "h0_0", [good, pair])
    assert status == 400 and why in doc["error"]
    assert svc.learning.learner.counted == before  # nothing of the report counted


def test_addresses_of_no_host_are_ignored_and_bad_documents_refused():
    f, svc, clock = srv6_service()
    status, doc = send(svc, "h0_0", [("10.0.0.1", "172.30.255.254", 1e3, 1),
                                     ("10.0.0.1", "10.0.1.1", 1e3, 1)])
    assert (status, doc["pairs"], doc["ignored"]) == (200, 1, 1)
    assert send(svc, "nobody", [])[0] == 404
    for body in (b"[]", b'{"pairs": []}', b'{"interval_s": 0, "pairs": []}',
                 b'{"interval_s": 1, "pairs": [{"src": "10.0.0.1"}]}'):
        status, doc = api.handle(svc, "POST", "/v1/hosts/h0_0/traffic", body)
        assert status == 400 and doc["error"].startswith("traffic report"), body


def test_the_agent_reports_what_its_host_sent_since_its_last_read():
    reads = iter([[(1, "10.0.0.1", "10.0.1.1", 1000, 1)],
                  [(1, "10.0.0.1", "10.0.1.1", 6000, 5),
                   (2, "172.30.0.1", "172.30.255.254", 700, 2)]])
    sent = []

    class Client:
        def report_traffic(self, host, doc, timeout=None):
            sent.append((host, doc))
            agent.stopping.set()

    agent = Agent(Client(), "h0_0", "h0_0-eth0", apply=lambda lines: None,
                  read=lambda: {}, sockets=lambda: next(reads))
    agent.src_ip = "10.0.0.1"
    agent.traffic_loop(every=0.01)
    assert sent[0][0] == "h0_0"
    assert sent[0][1]["pairs"] == [{"src": "10.0.0.1", "dst": "10.0.1.1", "bytes": 5000,
                                    "packets": 4}]  # not the controller connection


def test_a_socket_that_restarts_its_count_is_not_a_negative_delta():
    sent = SentBytes()
    sent.delta([(1, "a", "b", 100, 1)])
    assert sent.delta([(1, "a", "b", 50, 1)]) == {}


def report_ring(svc, f, ring, clock, seconds):
    """Every host reports 0.5 s of its ring pair (400 kB) every 0.5 s."""
    for _ in range(int(seconds * 2)):
        for i, h in enumerate(ring):
            peer = ring[(i + 1) % len(ring)]
            assert send(svc, h, [(f.host_ip[h], f.host_ip[peer], 4e5, 300)])[0] == 200
        clock.sleep(0.5)
        svc.tick(probe=False)


def test_one_report_claiming_a_minute_at_line_rate_does_not_freeze_the_job():
    """Issue 74, item 6: half a second after its previous report, a host reports 60 s at
    its line rate (the bound of the interval it claims). Accepted, it was 23 windows of the
    job's bytes in one and every window after it was "quiet"; it is refused, naming the
    time that passed, and the job's windows keep counting."""
    f, svc, clock = srv6_service()
    ring = interleaved(f)
    assert post(svc, {"id": "m", "members": [f.host_ip[h] for h in ring]})[0] == 201
    report_ring(svc, f, ring, clock, 3)
    line = f.link_bps("host") * 60
    h, peer = ring[0], ring[1]
    status, doc = send(svc, h, [(f.host_ip[h], f.host_ip[peer], line, 10 ** 6)], interval=60)
    assert status == 400 and "at most since its previous report" in doc["error"], doc
    report_ring(svc, f, ring, clock, 3)
    recent = get(svc, "m")[1]["learning"]["recent"]
    assert [w["counted"] for w in recent] == ["active"] * 4, recent


def test_a_host_quiet_for_a_while_and_a_late_report_are_believed():
    """What a host really sends still counts whole: its first report, a report after a
    minute of silence, and one that arrives early after a late one, each at line rate
    over the second it claims."""
    f, svc, clock = srv6_service()
    a, b = f.host_ip["h0_0"], f.host_ip["h1_0"]
    second = f.link_bps("host")  # bytes a second at line rate
    assert send(svc, "h0_0", [(a, b, second, 1000)], interval=1.0)[0] == 200
    clock.sleep(60)
    assert send(svc, "h0_0", [(a, b, second, 1000)], interval=1.0)[0] == 200
    clock.sleep(1.4)  # late
    assert send(svc, "h0_0", [(a, b, second, 1000)], interval=1.0)[0] == 200
    clock.sleep(0.6)  # early: the read was on time
    assert send(svc, "h0_0", [(a, b, second, 1000)], interval=1.0)[0] == 200
    clock.sleep(0.2)  # a second report within 0.2 s: only 0.2 s passed
    status, doc = send(svc, "h0_0", [(a, b, second, 1000)], interval=1.0)
    assert status == 400 and "more than h0_0's 1 link(s) carry" in doc["error"]
