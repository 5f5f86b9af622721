"""Host mode on routers, the agent's pure part (``controller/agent/portmap.py``): probe
packets, ICMP answers, and the search for source ports against a fake network that hashes."""
from __future__ import annotations

import hashlib
import ipaddress

from scapy.layers.inet import ICMP, IP, TCP, UDP, IPerror

from controller.agent.portmap import (
    PortMap,
    Target,
    checked_hops,
    learn,
    parse_time_exceeded,
    probe_packet,
)
from controller.enforcement.hostmode import PORT_MIN
from controller.enforcement.srv6 import SidPlan
from controller.enforcement.srv6_config import ROUTER_NET, configs, router_ips
from controller.model.clos import Clos
from controller.model.clos_wiring import wire


def test_probe_packets_are_valid_tcp_syns_and_udp_with_the_ttl_and_id():
    for proto, layer in ((6, TCP), (17, UDP)):
        raw = probe_packet("10.0.0.1", "10.0.1.1", proto, 50000, 4791, 3, 0xBEEF)
        pkt = IP(raw)
        assert (pkt.ttl, pkt.id, pkt.src, pkt.dst) == (3, 0xBEEF, "10.0.0.1", "10.0.1.1")
        assert (pkt[layer].sport, pkt[layer].dport) == (50000, 4791)
        again = IP(bytes(pkt))  # scapy recomputes checksums when asked: same bytes
        del again.chksum, again[layer].chksum
        assert bytes(IP(bytes(again))) == raw
    assert IP(probe_packet("10.0.0.1", "10.0.1.1", 6, 1, 2, 2, 1))[TCP].flags == "S"


def test_time_exceeded_answers_name_the_router_and_the_probe():
    probe = probe_packet("10.0.0.1", "10.0.1.1", 17, 49999, 4791, 2, 42)
    answer = bytes(IP(src="100.64.0.3", dst="10.0.0.1") / ICMP(type=11, code=0)
                   / IPerror(probe[:28]))
    assert parse_time_exceeded(answer) == ("100.64.0.3", 42, "10.0.1.1", 17, 49999, 4791)
    echo = bytes(IP(src="10.0.1.1", dst="10.0.0.1") / ICMP(type=0))
    unreachable = bytes(IP(src="100.64.0.3") / ICMP(type=3) / IPerror(probe[:28]))
    for other in (echo, unreachable, answer[:30], b"", b"\x60" + answer[1:]):
        assert parse_time_exceeded(other) is None


def test_checked_hops_go_up_to_the_top_of_the_path():
    assert checked_hops(["l0"]) == ()
    assert checked_hops(["l0", "s3", "l5"]) == ("s3",)
    assert checked_hops(["l0", "a0", "l1"]) == ("a0",)
    assert checked_hops(["l0", "a0", "c1", "a2", "l4"]) == ("a0", "c1")


def hashing(seed: bytes, spines: int, lost=lambda p: False):
    """A fake fabric's answers: hop 2 by a hash of the 5-tuple, hop 3 (between pods) by
    another; ``lost`` probes get no answer. Counts what it was asked."""
    asked = []

    def h(*parts):
        return int.from_bytes(hashlib.sha256(seed + repr(parts).encode()).digest()[:4], "big")

    def network(probes):
        asked.extend(probes)
        out = {}
        for key, sport, ttl in probes:
            if lost((key, sport, ttl)):
                continue
            up = h("leaf", key, sport) % spines
            out[(key, sport, ttl)] = f"a{up}" if ttl == 2 else f"c{up}{h('agg', key, sport) % 2}"
        return out
    network.asked = asked
    return network


def test_every_spine_gets_a_port_and_ports_are_unique_per_protocol():
    net = hashing(b"x", 4)
    targets = {f"f{i}": Target("10.0.1.1", 6, 5201, (f"a{i % 4}",)) for i in range(16)}
    targets["u"] = Target("10.0.1.1", 17, 4791, ("a2",))
    maps: dict = {}
    r = learn(targets, maps, net, used={(6, PORT_MIN)})
    assert None not in r.ports.values()
    tcp = [p for n, p in r.ports.items() if n != "u"]
    assert len(set(tcp)) == 16 and PORT_MIN not in tcp
    for name, port in r.ports.items():
        t = targets[name]
        assert net([(t.key, port, 2)])[(t.key, port, 2)] == t.hops[0]
    assert r.probes <= 4 * 17 and r.rounds <= 4, (r.probes, r.rounds)
    # known maps answer the same targets again with one confirming probe each
    again = learn(targets, maps, net)
    assert again.ports == r.ports and again.probes == 17 and again.rounds == 1


def test_between_pods_both_hops_are_probed_and_must_match():
    net = hashing(b"y", 2)
    t = Target("10.1.0.1", 6, 80, ("a1", "c11"))
    r = learn({"x": t}, {}, net)
    port = r.ports["x"]
    assert port is not None
    assert net([(t.key, port, 2), (t.key, port, 3)]) == {(t.key, port, 2): "a1",
                                                          (t.key, port, 3): "c11"}
    assert {ttl for _k, _p, ttl in net.asked} == {2, 3}


def test_lost_answers_are_asked_again_and_a_silent_network_ends_in_time():
    flaky = hashing(b"z", 2, lost=lambda p: p[1] % 3 == 0 and len(flaky.asked) < 40)
    r = learn({"x": Target("10.0.1.1", 6, 1, ("a0",)), "y": Target("10.0.1.1", 6, 1, ("a1",))},
              {}, flaky)
    assert None not in r.ports.values()
    silent = lambda probes: {}
    r = learn({"x": Target("10.0.1.1", 6, 1, ("a0",))}, {}, silent, rounds=5)
    assert r.ports == {"x": None} and r.rounds == 5


def test_a_stale_map_is_dropped_and_learned_again():
    t = Target("10.0.1.1", 6, 5201, ("a0",))
    maps = {t.key: PortMap({PORT_MIN: ("a0",), PORT_MIN + 1: ("a1",)}, PORT_MIN + 2)}
    net = hashing(b"w", 2)  # the routers hash otherwise now: the map said a0 for PORT_MIN
    wrong = net([(t.key, PORT_MIN, 2)])[(t.key, PORT_MIN, 2)] != "a0"
    r = learn({"x": t}, maps, net)
    assert net([(t.key, r.ports["x"], 2)])[(t.key, r.ports["x"], 2)] == "a0"
    assert (r.dropped == [t.key]) == wrong
    without = learn({"x": t}, {t.key: PortMap({PORT_MIN: ("a0",)}, PORT_MIN + 1)}, net,
                    confirm=False)
    assert without.ports == {"x": PORT_MIN} and without.probes == 0


def test_routers_have_their_own_ipv4_address_first_on_lo_and_in_sonic():
    c = Clos.leaf_spine(2, 2, 1)
    f = c.wire(wire(c))
    ips = router_ips(f)
    assert len(set(ips.values())) == 4
    assert all(ipaddress.IPv4Address(a) in ROUTER_NET for a in ips.values())
    cfg = configs(SidPlan.of(f))
    for s, ip in ips.items():
        lo = [line for line in cfg[s].iproute2() if line.endswith("dev lo")]
        assert lo[0] == f"addr replace {ip}/32 dev lo", lo  # before the leaves' ARP source
        assert cfg[s].sonic()["LOOPBACK_INTERFACE"] == {"Loopback0": {},
                                                        f"Loopback0|{ip}/32": {}}
