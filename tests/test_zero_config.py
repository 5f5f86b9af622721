"""Zero configuration on the fake switches: the controller finds the leaf-spine from LLDP and
ARP, routes a ring named by IPv4 addresses, looks for unknown addresses with ARP probes and
reports a miswired declared fabric precisely."""
import json

import pytest

from controller.service import api

from controller.discovery import lldp
from controller.model.fabric import Fabric
from controller.service.route_service import RouteService
from tests.fake_switch import FakeSwitches, trace
from tests.helpers import FakeClock


def truth(spines=2, leaves=4, hosts=2):
    return Fabric.generate(spines, leaves, hosts, 0.01, wiring=True)


def deliver(f, svc, sw, wiring=None):
    """Every LLDP frame the controller sent reaches the peer port (``wiring`` overrides
    (switch, port) -> (peer, peer port))."""
    for dpid, port, frame in sw.packets_out:
        name = f.switch_of_dpid[dpid]
        if wiring and (name, port) in wiring:
            peer, peer_port = wiring[(name, port)]
        else:
            peer = f.peer(name, port)
            if peer is None or peer in f.hosts:
                continue
            peer_port = f.port(peer, name)
        svc.packet_in(f.dpids[peer], peer_port, frame)
    sw.packets_out.clear()


def hosts_speak(f, svc):
    for h, leaf in f.hosts.items():
        frame = lldp.arp_request(f.host_mac[h], "10.255.0.1", sender_ip=f.host_ip[h])
        svc.packet_in(f.dpids[leaf], f.port(leaf, h), frame)


def boot(f, declared=None, wiring=None):
    clock = FakeClock()
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, declared, clock=clock, sleep=clock.sleep, link_gbps=f.link_gbps)
    for name, dpid in f.dpids.items():
        svc.switch_connected(dpid, {p: True for p in f.ports[name].values()})
    for _ in range(2):
        svc.tick()
        deliver(f, svc, sw, wiring)
    hosts_speak(f, svc)
    clock.now += 3
    svc.tick()
    deliver(f, svc, sw, wiring)
    return clock, sw, svc


@pytest.mark.parametrize("shape", [(2, 4, 2), (4, 8, 2)])
def test_the_fabric_is_found_with_no_file(shape):
    f = truth(*shape)
    _, sw, svc = boot(f)
    view = api.handle(svc, "GET", "/v1/fabric")[1]
    assert view["declared"] == f.to_dict()
    assert view["ready"] and view["discovery"]["wiring_problems"] == []
    for name, dpid in f.dpids.items():  # every switch reconciled to its full table
        assert sw.rules[dpid] == svc.reconciler.installed[dpid].rules


def test_a_ring_named_by_addresses_is_routed_on_its_planned_spines():
    f = truth()
    _, sw, svc = boot(f)
    ranks = [f.host_ip[h] for h in ("h0_0", "h1_0", "h2_0", "h3_0")]
    code, doc = api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": "ip", "collective": "ring_allreduce", "ranks": ranks, "bytes": 1e6}).encode())
    assert code == 201, doc
    assert doc["job"]["rings"] == [["h0_0", "h1_0", "h2_0", "h3_0"]]
    for r in doc["routes"]:
        path, reached, _ = trace(f, sw, r["src"], r["dst"])
        assert reached == r["dst"] and path[1] == r["spine"]


def test_an_address_nobody_answers_is_a_400_after_bounded_probing():
    f = truth()
    clock, sw, svc = boot(f)
    t0 = clock.now
    code, doc = api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": "x", "collective": "ring_allreduce", "ranks": [f.host_ip["h0_0"], "10.9.9.9"],
         "bytes": 1e6}).encode())
    assert code == 400 and "10.9.9.9" in doc["error"]
    assert clock.now - t0 <= svc.settings.resolve_timeout + 0.2
    probes = {(d, p) for d, p, frame in sw.packets_out if lldp.parse_lldp(frame) is None}
    host_ports = {(f.dpids[l], f.port(l, h)) for h, l in f.hosts.items()}
    assert probes == host_ports  # ARP probes went out of every host port, nowhere else


def test_a_host_heard_later_is_added_while_jobs_run():
    f = truth()
    clock, sw, svc = boot(f)
    late = Fabric.generate(2, 4, 3, 0.01, wiring=True)  # a third host per leaf, same wiring
    assert api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": "a", "collective": "ring_allreduce", "ranks": ["h0_0", "h1_0"],
         "bytes": 1e6}).encode())[0] == 201
    h = "h2_2"
    frame = lldp.arp_request(late.host_mac[h], "10.255.0.1", sender_ip=late.host_ip[h])
    svc.switch_connected(f.dpids["l2"], {p: True for p in late.ports["l2"].values()})
    svc.packet_in(f.dpids["l2"], late.port("l2", h), frame)
    clock.now += 3
    svc.tick()
    assert h in svc.state.declared.hosts and "a" in svc.jobs


def test_a_miswired_declared_fabric_is_reported_precisely():
    f = truth()
    p0, p1 = f.port("l2", "s0"), f.port("l2", "s1")
    # the cables of l2's two uplinks are swapped
    wiring = {("l2", p0): ("s1", f.port("s1", "l2")), ("l2", p1): ("s0", f.port("s0", "l2")),
              ("s0", f.port("s0", "l2")): ("l2", p1), ("s1", f.port("s1", "l2")): ("l2", p0)}
    _, _, svc = boot(f, declared=f, wiring=wiring)
    problems = api.handle(svc, "GET", "/v1/fabric")[1]["discovery"]["wiring_problems"]
    wrong = sorted((p["switch"], p["port"]) for p in problems if p["kind"] == "wrong_port")
    assert ("l2", p0) in wrong and ("l2", p1) in wrong
    assert all(p["switch"] in ("l2", "s0", "s1") for p in problems)
