"""A host's LLDP agent (lldpd) names its interfaces alike: discovery joins them across planes
by that chassis id, where host parts of addresses cannot (they interleave) or would join the
wrong interfaces. Frames are built with scapy's LLDP layer, as lldpd sends them."""
from __future__ import annotations

import ipaddress

import pytest
from scapy.contrib.lldp import (
    LLDPDUChassisID,
    LLDPDUEndOfLLDPDU,
    LLDPDUPortID,
    LLDPDUSystemName,
    LLDPDUTimeToLive,
)
from scapy.layers.l2 import Ether

from controller.discovery import lldp
from controller.discovery.finder import FabricFinder
from controller.discovery.planes import recognise_planes
from controller.model.clos import Clos
from tests.test_clos_discovery import observe


def agent_frame(mac: str, chassis: str, ifname: str = "eth0", subtype: int = 4) -> bytes:
    """What lldpd sends out of the interface ``mac``: its chassis id (by default the MAC of
    one of the host's interfaces), the interface name, a TTL and the host name."""
    ident = chassis if subtype == 4 else chassis.encode()
    return bytes(Ether(src=mac, dst=lldp.LLDP_MULTICAST)
                 / LLDPDUChassisID(subtype=subtype, id=ident)
                 / LLDPDUPortID(subtype=5, id=ifname.encode()) / LLDPDUTimeToLive(ttl=120)
                 / LLDPDUSystemName(system_name=b"mininet") / LLDPDUEndOfLLDPDU())


def test_an_agents_frame_gives_the_interface_and_its_hosts_chassis_id():
    assert lldp.parse_host_lldp(agent_frame("02:00:00:00:01:07", "02:00:00:00:00:07")) == \
        ("02:00:00:00:01:07", "02:00:00:00:00:07")
    assert lldp.parse_host_lldp(agent_frame("02:00:00:00:01:07", "gpu-07", subtype=7)) == \
        ("02:00:00:00:01:07", "7:" + b"gpu-07".hex())
    assert lldp.parse_probe(agent_frame("02:00:00:00:01:07", "02:00:00:00:00:07")) is None
    assert lldp.parse_host_lldp(lldp.lldp_frame(0x10000, 3)) is None  # a switch's probe
    assert lldp.parse_host_lldp(b"\x01" * 13) is None


def interleaved(f: Clos) -> dict[tuple[str, int], str]:
    """Addresses whose planes interleave in one subnet: host i has 10.0.0.(2i+1) on plane 0
    and 10.0.0.(2i+2) on plane 1 (no host part says which interfaces are one host)."""
    order = sorted(f.host_leaves)
    return {(h, q): str(ipaddress.IPv4Address("10.0.0.1") + 2 * order.index(h) + q)
            for h in f.host_leaves for q in (0, 1)}


def observed(f: Clos, addresses=None, agents=True, chassis_of=None):
    """Every interface heard with ``addresses`` (default: the fabric's), and (``agents``)
    its host's LLDP frame through the finder, chassis id ``chassis_of(host)`` (default: the
    MAC of the host's first interface)."""
    finder = FabricFinder()
    t = finder.topology = observe(f, hosts=[])
    for h, q, ip, mac, leaf in f.interfaces():
        t.host_seen(f.dpids[leaf], f.port(leaf, h), mac, (addresses or {}).get((h, q), ip), 0)
        if agents:
            c = chassis_of(h) if chassis_of else f.mac_of(h, 0)
            assert finder.packet_in(f.dpids[leaf], f.port(leaf, h), agent_frame(mac, c), 0) \
                == "host"
    return finder


@pytest.mark.parametrize("shape", ["leaf-spine", "fat-tree"])
def test_interleaved_planes_are_joined_by_the_hosts_chassis_ids(shape):
    f = (Clos.leaf_spine(2, 3, 2, planes=2) if shape == "leaf-spine"
         else Clos.fat_tree(4, 1, planes=2)).wire()
    addresses = interleaved(f)
    got, problems = recognise_planes(observed(f, addresses, agents=False).topology)
    assert [p["kind"] for p in problems] == ["planes_not_joined"]
    assert "lldpd" in problems[0]["detail"]
    finder = observed(f, addresses)
    got, problems = recognise_planes(finder.topology)
    assert problems == [] and len(got.planes) == 2
    assert got.host_leaves == f.host_leaves
    assert {h: list(ips) for h, ips in got.host_ips.items()} == {
        h: [addresses[(h, 0)], addresses[(h, 1)]] for h in f.host_leaves}
    assert finder.guard.counts["lldp_unsigned"] == 0  # an agent's frame is no link claim


def test_the_chassis_id_wins_over_a_host_part_that_names_another_host():
    """Plane 1's cables of two hosts swapped against their address plan: the host parts
    would join h0_0's plane-0 interface with h0_1's plane-1 interface; their agents say
    otherwise."""
    f = Clos.leaf_spine(2, 2, 2, planes=2).wire()
    swap = {("h0_0", 1): f.ip_of("h0_1", 1), ("h0_1", 1): f.ip_of("h0_0", 1)}
    got, problems = recognise_planes(observed(f, swap).topology)
    assert problems == []
    assert got.host_ips["h0_0"] == (f.ip_of("h0_0", 0), f.ip_of("h0_1", 1))
    assert got.host_ips["h0_1"] == (f.ip_of("h0_1", 0), f.ip_of("h0_0", 1))
    plain, _ = recognise_planes(observed(f, swap, agents=False).topology)
    assert plain.host_ips["h0_0"] == (f.ip_of("h0_0", 0), f.ip_of("h0_0", 1))


def test_a_chassis_id_claimed_twice_in_a_plane_is_reported_and_host_parts_join():
    """Two interfaces of plane 1 give one chassis id (a forged frame, or two NICs of one host
    on one plane): it joins nothing there; the host parts still line up and join."""
    f = Clos.leaf_spine(2, 2, 2, planes=2).wire()
    got, problems = recognise_planes(observed(f, chassis_of=lambda h: "02:aa:00:00:00:01"
                                              if h in ("h0_0", "h1_0") else f.mac_of(h, 0)
                                              ).topology)
    assert sorted({p["kind"] for p in problems}) == ["chassis_conflict"]
    assert got.host_ips == f.host_ips


def test_a_host_heard_by_its_agent_on_one_plane_only_is_asked_for_by_chassis():
    """Interleaved addresses, one host's plane-1 agent silent: it is not placed, the problem
    names its chassis id and there is no address to probe for."""
    f = Clos.leaf_spine(2, 2, 1, planes=2).wire()
    addresses = interleaved(f)
    finder = observed(f, addresses, chassis_of=lambda h: f.mac_of(h, 0))
    mac = f.mac_of("h1_0", 1)
    finder.topology.chassis = {k: v for k, v in finder.topology.chassis.items() if k[0] != mac}
    got, problems = recognise_planes(finder.topology)
    assert set(got.host_leaves) == {"h0_0"}
    missing = [p for p in problems if p["kind"] == "host_missing_plane"]
    assert {p["address"] for p in missing} == {addresses[("h1_0", 0)], addresses[("h1_0", 1)]}
    assert all(p["probe"] == [] for p in missing)
    assert any(f.mac_of("h1_0", 0) in p["detail"] for p in missing)


def test_an_agents_frame_on_a_switch_port_is_ignored():
    f = Clos.leaf_spine(2, 2, 1, planes=2).wire()
    finder = FabricFinder()
    finder.topology = observe(f, hosts=[])
    leaf, spine = "l0_p0", "s0_p0"
    assert finder.packet_in(f.dpids[leaf], f.port(leaf, spine),
                            agent_frame("02:00:00:00:00:09", "02:00:00:00:00:09"), 0) is None
    assert finder.topology.chassis == {}


def test_a_frame_sent_with_another_hosts_mac_names_nothing():
    """h0_1 sends, out of its own plane-1 port, an agent frame claiming h0_0's plane-1 MAC
    with h0_1's chassis id: nothing changes (an id counts only where its interface is seen).
    Then it claims h0_0's chassis id for its own interface: the id is heard twice on plane 1,
    reported and not used; h0_0 is never joined with h0_1's interface."""
    f = Clos.leaf_spine(2, 2, 2, planes=2).wire()
    addresses = interleaved(f)
    finder = observed(f, addresses)
    before, _ = recognise_planes(finder.topology)
    leaf, port = f.host_leaves["h0_1"][1], f.port(f.host_leaves["h0_1"][1], "h0_1")
    finder.packet_in(f.dpids[leaf], port, agent_frame(f.mac_of("h0_0", 1), f.mac_of("h0_1", 0)), 1)
    after, problems = recognise_planes(finder.topology)
    assert after.host_ips == before.host_ips and problems == []
    finder.packet_in(f.dpids[leaf], port, agent_frame(f.mac_of("h0_1", 1), f.mac_of("h0_0", 0)), 2)
    after, problems = recognise_planes(finder.topology)
    assert "chassis_conflict" in {p["kind"] for p in problems}
    assert addresses[("h0_1", 1)] not in after.host_ips.get("h0_0", ())


@pytest.mark.parametrize("case", ["a NIC's id per port", "an agent heard on one plane"])
def test_ids_that_join_nothing_leave_the_host_parts_to_join(case):
    """A NIC's own LLDP names each port differently, and an agent heard on one plane so far
    names no other interface: neither keeps host parts that line up from joining."""
    f = Clos.leaf_spine(2, 2, 2, planes=2).wire()
    finder = observed(f)
    t = finder.topology
    if case == "a NIC's id per port":
        t.chassis = {key: (key[0], seen) for key, (_c, seen) in t.chassis.items()}
    else:
        t.chassis = {key: v for key, v in t.chassis.items()
                     if key[0] in {f.mac_of(h, 1) for h in f.host_leaves}}
    got, problems = recognise_planes(t)
    assert problems == [] and got.host_ips == f.host_ips


def test_agents_are_forgotten_with_their_host_and_the_longest_unheard_first(monkeypatch):
    from controller.discovery import topology
    monkeypatch.setattr(topology, "MAX_AGENTS", 4)
    f = Clos.leaf_spine(2, 2, 2, planes=2).wire()
    finder = observed(f, agents=False)
    t = finder.topology
    for i, (h, q, _ip, mac, leaf) in enumerate(f.interfaces()):
        assert t.host_chassis(f.dpids[leaf], f.port(leaf, h), mac, f.mac_of(h, 0), float(i))
    macs = lambda: {k[0] for k in t.chassis}
    assert len(t.chassis) == 4 and f.interfaces()[-1][3] in macs()
    assert f.interfaces()[0][3] not in macs()
    last = f.interfaces()[-1][3]
    t.forget_hosts(lambda m, _h: m == last, 99.0)
    assert last not in macs()
