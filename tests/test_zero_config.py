"""Zero configuration on the fake switches: the controller finds the leaf-spine from LLDP and
ARP, routes a ring named by IPv4 addresses, looks for unknown addresses with ARP probes and
reports a miswired declared fabric precisely."""
import json

import pytest

from controller.discovery import lldp
from controller.model.clos import Clos
from controller.service import api
from controller.service.route_service import RouteService
from emulation.harness.fake_switch import FakeSwitches, arrival, trace
from tests.helpers import FakeClock


def truth(spines=2, leaves=4, hosts=2):
    return Clos.generate(spines, leaves, hosts, 0.01, wiring=True)


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
            peer_port = arrival(f, name, port)  # the same member of a bundle
        svc.packet_in(f.dpids[peer], peer_port, frame)
    sw.packets_out.clear()


def found_with_no_file(f, link_gbps: float):
    """A controller with no fabric file over fake switches wired as the Clos ``f`` (every
    member of a bundle connected): two LLDP rounds, then an ARP from every host interface of
    every plane; returns (service, switches, clock) once it recognised the fabric."""
    clock = FakeClock()
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, None, clock=clock, sleep=clock.sleep, link_gbps=link_gbps)
    for name, dpid in f.dpids.items():
        svc.switch_connected(dpid, {p: True for n in f.ports[name] for p in f.ports_to(name, n)})
    for _ in range(2):
        svc.tick()
        deliver(f, svc, sw)
    for h, _q, ip, mac, leaf in f.interfaces():
        svc.packet_in(f.dpids[leaf], f.port(leaf, h),
                      lldp.arp_request(mac, "10.255.0.1", sender_ip=ip))
    clock.now += 3
    svc.tick()
    deliver(f, svc, sw)
    return svc, sw, clock


def hosts_speak(f, svc):
    for h, leaf in f.hosts.items():
        frame = lldp.arp_request(f.host_mac[h], "10.255.0.1", sender_ip=f.host_ip[h])
        svc.packet_in(f.dpids[leaf], f.port(leaf, h), frame)


def boot(f, declared=None, wiring=None):
    clock = FakeClock()
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, declared, clock=clock, sleep=clock.sleep, link_gbps=f.link_gbps["leaf"])
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
    late = Clos.generate(2, 4, 3, 0.01, wiring=True)  # a third host per leaf, same wiring
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


# ---- connect at once, topology guard, link speed: through the service ------------------------
def test_a_host_is_added_at_its_first_packet_without_replanning_running_jobs():
    f = truth()
    clock, sw, svc = boot(f)
    code, doc = api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": "a", "collective": "ring_allreduce", "ranks": ["h0_0", "h1_0", "h2_0"],
         "bytes": 1e6}).encode())
    assert code == 201, doc
    routes = api.handle(svc, "GET", "/v1/routes")[1]
    late = Clos.generate(2, 4, 3, 0.01, wiring=True)
    h = "h3_2"
    svc.port_changed(f.dpids["l3"], late.port("l3", h), True)
    deliver(f, svc, sw)
    events = len(svc.state.events)
    svc.packet_in(f.dpids["l3"], late.port("l3", h), lldp.arp_request(
        late.host_mac[h], "10.255.0.1", sender_ip=late.host_ip[h]))  # no clock step: at once
    assert h in svc.state.declared.hosts
    (event,) = svc.state.events[events:]
    assert event["cause"] == f"hosts heard: {h}" and event["replanned"] == [], event
    assert api.handle(svc, "GET", "/v1/routes")[1] == routes  # running jobs keep their routes
    path, reached, _ = trace(late, sw, "h0_0", h)
    assert reached == h  # its static entries are installed


def test_an_arp_request_for_a_host_not_heard_yet_is_answered_when_it_answers_the_probe():
    f = truth()
    clock, sw, svc = boot(f)
    sw.packets_out.clear()
    late = Clos.generate(2, 4, 3, 0.01, wiring=True)
    asker, target = "h0_0", "h2_2"
    svc.port_changed(f.dpids["l2"], late.port("l2", target), True)
    req = lldp.arp_request(f.host_mac[asker], late.host_ip[target], sender_ip=f.host_ip[asker])
    svc.packet_in(f.dpids["l0"], f.port("l0", asker), req)
    assert svc.arp_answer(late.host_ip[target]) is None  # not known: probed
    located = [(d, p) for d, p, fr in sw.packets_out
               if (lldp.parse_arp(fr) or (0,))[0] == 1]
    assert (f.dpids["l2"], late.port("l2", target)) in located
    sw.packets_out.clear()
    svc.packet_in(f.dpids["l2"], late.port("l2", target), lldp.arp_request(
        late.host_mac[target], "10.255.0.1", sender_ip=late.host_ip[target]))
    answers = [(d, p, lldp.parse_arp(fr)) for d, p, fr in sw.packets_out
               if (lldp.parse_arp(fr) or (0,))[0] == 2]
    assert answers == [(f.dpids["l0"], f.port("l0", asker),
                        (2, late.host_mac[target], late.host_ip[target], f.host_ip[asker]))]


def test_spoofed_frames_are_events_in_the_fabric_view_and_metrics_and_change_nothing():
    from controller.service.metrics import exposition
    f = truth()
    clock, sw, svc = boot(f)
    before = svc.state.declared.to_dict()
    attacker = (f.dpids["l1"], f.port("l1", "h1_1"))
    for _ in range(10):  # LLDP claiming l1 port 3, and gratuitous ARP for h1_0's address
        svc.packet_in(*attacker, lldp.lldp_frame(f.dpids["l1"], f.port("l1", "h1_0")))
        svc.packet_in(*attacker, lldp.arp_request("02:00:00:00:99:99", f.host_ip["h1_0"],
                                                  sender_ip=f.host_ip["h1_0"]))
    probes = [(d, p) for d, p, fr in sw.packets_out if (lldp.parse_arp(fr) or (0,))[0] == 1]
    assert probes == [(f.dpids["l1"], f.port("l1", "h1_0"))]  # one check of the owner
    svc.packet_in(f.dpids["l1"], f.port("l1", "h1_0"), lldp.arp_request(
        f.host_mac["h1_0"], "10.255.0.1", sender_ip=f.host_ip["h1_0"]))  # the owner answers
    clock.now += 3
    svc.tick()
    deliver(f, svc, sw)
    view = api.handle(svc, "GET", "/v1/fabric")[1]
    assert view["declared"] == before
    kinds = [(e["kind"], e["switch"], e["port"]) for e in view["events"] if "kind" in e]
    assert kinds == [("lldp_unsigned", "l1", attacker[1]),
                     ("address_conflict", "l1", attacker[1])], kinds
    assert view["discovery"]["security"]["counts"]["lldp_unsigned"] == 10
    page = exposition(svc)[0].decode()
    assert 'mlroute_security_events_total{kind="lldp_unsigned"} 10.0' in page
    assert 'mlroute_security_events_total{kind="address_conflict"} 10.0' in page
    assert svc.arp_answer(f.host_ip["h1_0"]) == f.host_mac["h1_0"]


def test_port_speeds_reported_by_switches_set_the_link_speed():
    f = truth()
    clock = FakeClock()
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, None, clock=clock, sleep=clock.sleep)
    for name, dpid in f.dpids.items():
        ports = {p: True for p in f.ports[name].values()}
        svc.switch_connected(dpid, ports, {p: 25_000_000 for p in ports})
    deliver(f, svc, sw)  # the probes at connect
    deliver(f, svc, sw)  # and their answers
    clock.now += 1
    hosts_speak(f, svc)
    view = api.handle(svc, "GET", "/v1/fabric")[1]
    assert view["declared"]["link_gbps"] == 25.0
    assert view["discovery"]["link_speed"] == {"gbps": 25.0, "source": "port_desc",
                                               "ports_reporting": 24, "reported_gbps": [25.0]}


def test_switches_outside_any_fabric_are_bootstrapped_in_one_install(caplog):
    """With no fabric, switches noted together get their LLDP and ARP entries in one
    install; one that rejects them is named in the log, the others hold theirs."""
    f = truth()
    sw = FakeSwitches(f.dpids.values())
    installs, install = [], sw.install

    def counted(batches):
        installs.append(set(batches))
        install(batches)
    sw.install = counted
    svc = RouteService(sw, None, clock=FakeClock())
    bad = f.dpids["l1"]
    sw.fail.add(bad)
    failed = svc.note_switches([(d, {p: True for p in f.ports[n].values()}, None)
                                for n, d in f.dpids.items()])
    assert failed == {} and installs == [set(f.dpids.values())]
    assert f"switch {bad:#x} rejected a rule" in caplog.text
    assert all(sw.rules[d] for d in f.dpids.values() if d != bad)
    assert len(sw.rules[bad]) + len(sw.groups[bad]) == 1  # its first message only
    assert sw.packets_out  # LLDP probes out of the switches' ports
