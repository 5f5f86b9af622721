"""Discovery: observations of generated fabrics give the same fabric back; miswiring and
non-leaf-spine cases are reported port by port while the rest stays routable."""
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.discovery.declared import check_declared
from controller.discovery.finder import FabricFinder
from controller.discovery.lldp import arp_request, lldp_frame, parse_host, parse_lldp
from controller.discovery.planes import discover
from controller.discovery.topology import Topology, assign_roles, format_problem, probe_ports, recognise
from controller.errors import InputError
from controller.model.clos import Clos, as_clos, load_fabric


def cable(t, a, b, now=0.0):
    """Both directions of an LLDP exchange over the cable a = (dpid, port) - b."""
    t.link_seen(*a, *b, now)
    t.link_seen(*b, *a, now)


def observe(f, now=0.0, missing=(), hosts=None, extra_ports=None, order_seed=None, t=None):
    """The events the shell would feed for the Mininet build of wired fabric ``f``: every
    switch with all its ports up, LLDP both ways on every leaf-spine cable except ``missing``
    (leaf, spine) pairs, the ``hosts`` named (all by default) heard once."""
    t = t or Topology()
    events = []
    for sw in spines(f) + f.leaves:
        ports = {p: True for p in f.ports[sw].values()}
        ports.update({p: True for p in (extra_ports or {}).get(sw, ())})
        t.switch_up(f.dpids[sw], ports, now)
    for l in f.leaves:
        for s in spines(f):
            if (l, s) not in missing:
                a, b = (f.dpids[l], f.port(l, s)), (f.dpids[s], f.port(s, l))
                events += [("link", a + b), ("link", b + a)]
    for h in (f.hosts if hosts is None else hosts):
        leaf = f.hosts[h]
        events.append(("host", (f.dpids[leaf], f.port(leaf, h), f.host_mac[h], f.host_ip[h])))
    if order_seed is not None:
        random.Random(order_seed).shuffle(events)
    for kind, args in events:
        (t.link_seen if kind == "link" else t.host_seen)(*args, now)
    return t


def kinds(problems):
    return [(p["kind"], p["switch"], p["port"]) for p in problems]


def spines(fabric: Clos) -> list[str]:
    """The spines of a recognised leaf-spine: its one pod's aggregation switches."""
    return fabric.planes[0].aggs[0]


@pytest.mark.parametrize("size", [(2, 4, 2), (4, 8, 2)])
def test_generated_fabric_is_recognised(size):
    want = Clos.generate(*size, wiring=True)
    got, problems = recognise(observe(want))
    assert problems == []
    assert isinstance(got, Clos) and got.tiers == 2 and len(got.planes) == 1
    assert got.to_dict() == as_clos(want).to_dict()


@pytest.mark.parametrize("size", [(2, 4, 2), (4, 3, 1), (3, 5, 2)])
def test_a_discovered_leaf_spine_is_the_clos_recognise_reads(size):
    """Discovery returns every fabric as a ``Clos`` (issue 37): a leaf-spine is one plane of
    one pod, exactly what the two-tier recognition (``recognise``, a ``Clos`` too) reads, with
    the same problems, names and ports; so is each later reading with the last one as
    ``previous`` (a link lost, a host not heard again, the link back), and what the finder
    adopts: ``as_clos`` of the generated fabric."""
    f = Clos.generate(*size, wiring=True)
    gone = {(f.leaves[0], spines(f)[-1])}
    old = new = None
    for t in (observe(f), observe(f, missing=gone, hosts=list(f.hosts)[1:]), observe(f)):
        old, want = recognise(t, previous=old)
        new, got = discover(t, previous=new)
        assert isinstance(new, Clos) and new.tiers == 2 and len(new.planes) == 1
        assert isinstance(old, Clos) and new.to_dict() == old.to_dict() and got == want
        assert (new.dpids, new.ports, new.hosts, new.down) == (old.dpids, old.ports, old.hosts,
                                                               old.down)
    finder = FabricFinder()
    observe(f, t=finder.topology)
    adopted = finder.settle(10.0, force=True)
    assert isinstance(adopted, Clos)
    assert adopted.to_dict() == recognise(finder.topology)[0].to_dict()
    assert adopted.to_dict() == as_clos(f).to_dict()


def test_names_follow_dpids_not_event_order():
    want = Clos.generate(3, 5, 2, wiring=True)
    docs = {str(recognise(observe(want, order_seed=seed))[0].to_dict()) for seed in range(5)}
    assert len(docs) == 1


def test_roles_come_from_hosts_not_from_dpid_order():
    """Leaves with lower dpids than the spines are still leaves; names follow dpid order."""
    f = Clos.generate(2, 3, 1, wiring=True)
    doc = f.to_dict()
    doc["dpids"] = {**{s: 0x900 + j for j, s in enumerate(spines(f))},
                    **{l: 0x100 + i for i, l in enumerate(f.leaves)}}
    want = load_fabric(doc)
    got, problems = recognise(observe(want))
    assert problems == []
    assert spines(got) == ["s0", "s1"] and got.dpids["s0"] == 0x900
    assert got.to_dict() == want.to_dict()


def test_no_hosts_heard_yet_still_names_by_port():
    want = Clos.generate(2, 4, 3, wiring=True)
    got, _ = recognise(observe(want, hosts=["h2_1", "h0_2"]))
    assert got.hosts == {"h0_2": "l0", "h2_1": "l2"}
    assert got.ports["l0"]["h0_2"] == want.ports["l0"]["h0_2"]
    assert got.host_ip["h2_1"] == want.host_ip["h2_1"]


def test_fabric_without_hosts_takes_the_smaller_side_as_spines():
    want = Clos.generate(2, 4, 0, wiring=True)
    got, problems = recognise(observe(want))
    assert problems == [] and got.to_dict() == as_clos(want).to_dict()


def test_missing_link_is_down_with_a_placeholder_port():
    want = Clos.generate(2, 4, 2, wiring=True)
    got, problems = recognise(observe(want, missing={("l1", "s0")}))
    assert got.down == {("l1", "s0")}
    assert kinds(problems) == [("missing_link", "l1", None)]
    got.check_wiring()
    port = got.ports["l1"]["s0"]
    assert port not in want.ports["l1"].values() and port < 0xFF00
    assert [s for s in spines(got) if got.alive_members("l1", s)] == ["s1"]
    assert {k: v for k, v in got.ports["l0"].items()} == want.ports["l0"]


def test_link_expiry_marks_links_down_and_keeps_ports_with_previous():
    want = Clos.generate(2, 4, 2, wiring=True)
    t = Topology(link_timeout=3.5)
    observe(want, now=0.0, t=t)
    first, _ = recognise(t)
    observe(want, now=3.0, missing={("l1", "s0")}, hosts=[], t=t)
    assert t.expire(3.4) == []
    gone = t.expire(4.0)
    l1, s0 = want.dpids["l1"], want.dpids["s0"]
    assert sorted(gone) == sorted([(l1, 1, s0, 2), (s0, 2, l1, 1)])
    again, problems = recognise(t, previous=first)
    assert again.down == {("l1", "s0")}
    assert again.ports == want.ports  # the link's ports are remembered
    assert kinds(problems) == [("missing_link", "l1", 1)]
    assert again.with_down(set()).to_dict() == as_clos(want).to_dict()


def test_spine_that_lost_every_link():
    want = Clos.generate(2, 3, 1, wiring=True)
    t = observe(want)
    first, _ = recognise(t)
    observe(want, now=5.0, missing={(l, "s1") for l in want.leaves}, hosts=[], t=t)
    assert len(t.expire(5.0)) == 2 * len(want.leaves)
    kept, problems = recognise(t, previous=first)
    assert spines(kept) == ["s0", "s1"] and kept.down == {(l, "s1") for l in want.leaves}
    assert kept.ports == want.ports
    assert sorted(kinds(problems)) == [("missing_link", l, 2) for l in want.leaves]
    fresh, problems = recognise(t)
    assert spines(fresh) == ["s0"]
    assert ("isolated_switch", f"{want.dpids['s1']:#x}", None) in kinds(problems)


def test_previous_keeps_a_departed_spine_and_silent_hosts():
    want = Clos.generate(2, 3, 1, wiring=True)
    first, _ = recognise(observe(want))
    t = observe(want)
    t.switch_down(want.dpids["s0"], 1.0)
    t.hosts.clear()
    got, problems = recognise(t, previous=first)
    assert spines(got) == ["s0", "s1"] and got.down == {(l, "s0") for l in want.leaves}
    assert got.hosts == want.hosts and got.host_mac == want.host_mac
    assert kinds(problems) == [("switch_down", "s0", None)]  # its links: no more reports
    assert recognise(t, previous=first, link_gbps=0.01)[0].link_gbps["leaf"] == 0.01
    fresh, _ = recognise(t)  # without memory the spine is simply gone
    assert spines(fresh) == ["s0"] and fresh.dpids["s0"] == want.dpids["s1"]


def test_leaf_leaf_cable_is_reported_and_left_out():
    want = Clos.generate(2, 4, 2, wiring=True)
    t = observe(want, extra_ports={"l0": [9], "l1": [9]})
    cable(t, (want.dpids["l0"], 9), (want.dpids["l1"], 9))
    got, problems = recognise(t)
    assert kinds(problems) == [("leaf_leaf_link", "l0", 9)]
    assert "l1 port 9" in problems[0]["detail"]
    assert got.to_dict() == as_clos(want).to_dict()
    assert (want.dpids["l0"], 9) not in probe_ports(t, got)


def test_leaf_leaf_cable_with_one_spine():
    want = Clos.generate(1, 3, 1, wiring=True)
    t = observe(want, extra_ports={"l0": [7], "l2": [7]})
    cable(t, (want.dpids["l0"], 7), (want.dpids["l2"], 7))
    got, problems = recognise(t)
    assert kinds(problems) == [("leaf_leaf_link", "l0", 7)]
    assert got.to_dict() == as_clos(want).to_dict()


def test_spine_spine_cable_is_reported():
    want = Clos.generate(2, 3, 1, wiring=True)
    t = observe(want, extra_ports={"s0": [8], "s1": [8]})
    cable(t, (want.dpids["s0"], 8), (want.dpids["s1"], 8))
    got, problems = recognise(t)
    assert kinds(problems) == [("spine_spine_link", "s0", 8)]
    assert got.to_dict() == as_clos(want).to_dict()


def test_host_on_a_spine_is_reported_and_left_out():
    want = Clos.generate(2, 4, 2, wiring=True)
    t = observe(want, extra_ports={"s1": [9]})
    assert t.host_seen(want.dpids["s1"], 9, "02:00:00:00:99:01", "10.9.9.1", 0.0)
    got, problems = recognise(t)
    assert kinds(problems) == [("host_on_spine", "s1", 9)]
    assert "02:00:00:00:99:01" in problems[0]["detail"]
    assert got.to_dict() == as_clos(want).to_dict()
    assert "10.9.9.1" not in got.host_ip.values()
    t.hosts.clear()  # a port above every spine's leaf ports is a host even before it talks
    assert kinds(recognise(t)[1]) == [("host_on_spine", "s1", 9)]


def test_switch_with_no_links_is_reported():
    want = Clos.generate(2, 2, 1, wiring=True)
    t = observe(want)
    t.switch_up(0x30000, {1: True}, 0.0)
    t.host_seen(0x30000, 1, "02:00:00:00:77:01", "10.7.7.1", 0.0)
    got, problems = recognise(t)
    assert kinds(problems) == [("isolated_switch", "0x30000", None)]
    assert "02:00:00:00:77:01" in problems[0]["detail"]
    assert got.to_dict() == as_clos(want).to_dict()


def test_parallel_links_use_the_lowest_port():
    want = Clos.generate(2, 2, 1, wiring=True)
    t = observe(want, extra_ports={"l0": [9], "s1": [9]})
    cable(t, (want.dpids["l0"], 9), (want.dpids["s1"], 9))
    got, problems = recognise(t)
    assert kinds(problems) == [("parallel_links", "l0", 9)]
    assert got.to_dict() == as_clos(want).to_dict()


def test_one_way_link_is_not_used():
    want = Clos.generate(2, 2, 1, wiring=True)
    t = observe(want, missing={("l0", "s1")})
    t.link_seen(want.dpids["l0"], want.port("l0", "s1"), want.dpids["s1"],
                want.port("s1", "l0"), 0.0)
    got, problems = recognise(t)
    assert got.down == {("l0", "s1")}
    assert ("one_way_link", "l0", want.port("l0", "s1")) in kinds(problems)


def test_not_a_leaf_spine():
    t = Topology()
    t.switch_up(1, {1: True}, 0.0)
    got, problems = recognise(t)
    assert got is None
    assert [p["kind"] for p in problems] == ["isolated_switch", "not_leaf_spine"]
    assert all(set(p) >= {"kind", "switch", "port", "detail"} for p in problems)
    assert format_problem(problems[-1]).startswith("not_leaf_spine: found 0 spines")


def test_duplicate_ip_and_shared_port_keep_the_last_seen():
    want = Clos.generate(1, 2, 2, wiring=True)
    t = observe(want)
    t.host_seen(want.dpids["l1"], want.port("l1", "h1_0"), "02:00:00:00:00:aa", "10.0.0.1", 5.0)
    got, problems = recognise(t)
    assert kinds(problems) == [("duplicate_ip", "l1", 2), ("shared_port", "l1", 2)]
    assert got.host_mac["h1_0"] == "02:00:00:00:00:aa"
    assert "10.0.1.1" not in got.host_ip.values()
    assert sorted(got.host_ip.values()) == ["10.0.0.1", "10.0.0.2", "10.0.1.2"]


# ---- declared fabrics ----------------------------------------------------------------------
def swapped(f, leaf, s_a, s_b):
    """Observations of ``f`` with the leaf's cables to spines s_a and s_b swapped."""
    t = observe(f, missing={(leaf, s_a), (leaf, s_b)})
    d = f.dpids[leaf]
    cable(t, (d, f.port(leaf, s_a)), (f.dpids[s_b], f.port(s_b, leaf)))
    cable(t, (d, f.port(leaf, s_b)), (f.dpids[s_a], f.port(s_a, leaf)))
    return t


def test_declared_fabric_as_built_has_no_problem():
    f = Clos.generate(4, 8, 2, wiring=True)
    assert check_declared(f, observe(f)) == []


def test_swapped_leaf_ports_are_reported_precisely():
    f = Clos.generate(2, 4, 2, wiring=True)
    problems = check_declared(f, swapped(f, "l2", "s0", "s1"))
    assert [(p["kind"], p["switch"], p["port"], p["expected"], p["seen"]) for p in problems] == [
        ("wrong_port", "l2", 1, "spine s0 port 3", "spine s1 port 3"),
        ("wrong_port", "l2", 2, "spine s1 port 3", "spine s0 port 3")]
    assert problems[0]["detail"] == "leaf l2 port 1: expected spine s0 port 3, seen spine s1 port 3"
    # recognition still routes over what is there
    got, rp = recognise(swapped(f, "l2", "s0", "s1"))
    assert rp == [] and got.ports["l2"]["s0"] == 2 and got.ports["l2"]["s1"] == 1


def test_cable_moved_to_a_free_port_is_one_report():
    f = Clos.generate(2, 2, 1, wiring=True)
    t = observe(f, missing={("l1", "s1")}, extra_ports={"l1": [7]})
    cable(t, (f.dpids["l1"], 7), (f.dpids["s1"], f.port("s1", "l1")))
    problems = check_declared(f, t)
    assert kinds(problems) == [("wrong_port", "l1", 7)]
    assert problems[0]["detail"] == (
        "leaf l1 port 7: cabled to spine s1 port 2, which is declared on leaf l1 port 2")


def test_missing_link_unknown_and_missing_switches():
    f = Clos.generate(2, 3, 1, wiring=True)
    t = observe(f, missing={("l0", "s1")})
    t.switch_down(f.dpids["l2"], 0.0)
    t.switch_up(0x30000, {1: True}, 0.0)
    t.switch_up(f.dpids["s0"], {**{p: True for p in f.ports["s0"].values()}, 9: True}, 0.0)
    cable(t, (0x30000, 1), (f.dpids["s0"], 9))
    problems = check_declared(f, t)
    assert kinds(problems) == [("missing_link", "l0", 2), ("switch_missing", "l2", None),
                               ("unknown_switch", "0x30000", None)]
    assert "spine s0 port 9" in problems[2]["detail"]
    assert problems[0]["detail"] == "leaf l0 port 2 (up) should reach spine s1 port 1; no probe seen"


def test_declared_down_links_are_not_reported():
    f = Clos.generate(2, 2, 1, failed_spines=1, wiring=True)
    assert check_declared(f, observe(f, missing=f.down)) == []


def test_hosts_against_the_declaration():
    f = Clos.generate(1, 2, 2, wiring=True)
    t = observe(f, hosts=[])
    t.host_seen(f.dpids["l1"], f.port("l1", "h1_1"), f.host_mac["h0_0"], f.host_ip["h0_0"], 0)
    t.host_seen(f.dpids["l0"], f.port("l0", "h0_1"), "02:00:00:00:00:ee", "10.0.0.99", 0)
    problems = check_declared(f, t)
    assert kinds(problems) == [("wrong_port", "l0", 2), ("unknown_host", "l0", 3)]
    assert "declared for h0_1" in problems[1]["detail"]
    assert problems[0]["seen"] == "host h0_0 on leaf l1 port 3"


def test_leaf_leaf_cable_on_undeclared_ports_is_one_report():
    f = Clos.generate(2, 2, 1, wiring=True)
    t = observe(f, extra_ports={"l0": [8], "l1": [8]})
    cable(t, (f.dpids["l0"], 8), (f.dpids["l1"], 8))
    assert kinds(check_declared(f, t)) == [("unexpected_link", "l0", 8)]


def test_unwired_fabrics_are_refused():
    with pytest.raises(InputError, match="no wiring"):
        check_declared(Clos.generate(1, 1, 1), Topology())
    with pytest.raises(InputError, match="no wiring"):
        recognise(Topology(), previous=Clos.leaf_spine(1, 1, 1))


# ---- observation state ------------------------------------------------------------------------
def test_host_on_a_switch_port_is_ignored_and_forgotten():
    t = Topology()
    t.switch_up(1, {1: True, 2: True}, 0)
    t.switch_up(2, {1: True}, 0)
    assert t.host_seen(1, 1, "02:00:00:00:00:01", "10.0.0.1", 0)
    v = t.version
    assert t.link_seen(2, 1, 1, 1, 1.0) and t.version == v + 1
    assert t.hosts == {}  # learned before the probe showed a switch there
    assert not t.host_seen(1, 1, "02:00:00:00:00:01", "10.0.0.1", 2)
    assert not t.host_seen(1, 2, "01:00:5e:00:00:01", "10.0.0.1", 2)  # group MAC
    assert not t.host_seen(1, 2, "02:00:00:00:00:01", "0.0.0.0", 2)
    assert not t.host_seen(9, 2, "02:00:00:00:00:01", "10.0.0.1", 2)  # unknown switch
    assert not t.link_seen(2, 1, 1, 1, 3.0)  # a refresh is no change
    assert t.links[(2, 1)][2] == 3.0


def test_port_down_and_switch_down_drop_links():
    t = Topology()
    for d in (1, 2, 3):
        t.switch_up(d, {1: True, 2: True}, 0)
    cable(t, (1, 1), (2, 1))
    cable(t, (1, 2), (3, 1))
    assert t.port_changed(2, 1, False, 1.0)
    assert set(t.links) == {(1, 2), (3, 1)}
    assert t.switch_down(3, 2.0)
    assert t.links == {} and 3 not in t.switches
    assert not t.port_changed(9, 1, False, 3.0)


def test_probe_ports_are_the_leaf_host_ports():
    f = Clos.generate(2, 4, 2, wiring=True)
    t = observe(f, hosts=["h0_0"])
    want = sorted((f.dpids[f.hosts[h]], f.port(f.hosts[h], h)) for h in f.hosts)
    assert probe_ports(t) == want
    assert probe_ports(t, f) == want
    mac_ip = t.host_by_ip(f.host_ip["h0_0"])
    assert mac_ip[0] == f.host_mac["h0_0"] and mac_ip[1].port == f.port("l0", "h0_0")
    assert t.host_by_ip("10.9.9.9") is None


def test_assign_roles_follows_previous_roles():
    import networkx as nx
    g = nx.complete_bipartite_graph([1, 2], [3, 4])
    assert assign_roles(g, {}) == {1: "spine", 2: "spine", 3: "leaf", 4: "leaf"}
    assert assign_roles(g, {1: (1, 0), 2: (0, 5), 3: (0, 5), 4: (0, 5)}) == {
        1: "leaf", 2: "leaf", 3: "spine", 4: "spine"}  # hosts heard outrank idle ports
    assert assign_roles(g, {}, {3: "spine"}) == {1: "leaf", 2: "leaf", 3: "spine", 4: "spine"}


def test_docstring_examples():
    import doctest

    import controller.discovery.lldp
    import controller.discovery.topology
    for module in (controller.discovery.topology, controller.discovery.lldp):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


# ---- frames ---------------------------------------------------------------------------------
def test_lldp_round_trip_and_scapy_reads_it():
    frame = lldp_frame(0x20003, 5, "02:00:00:00:00:09")
    assert parse_lldp(frame) == (0x20003, 5)
    assert len(frame) == 60
    scapy_lldp = pytest.importorskip("scapy.contrib.lldp")
    from scapy.layers.l2 import Ether
    pkt = Ether(frame)
    assert pkt[scapy_lldp.LLDPDUChassisID].id == b"dpid:0000000000020003"
    assert pkt[scapy_lldp.LLDPDUPortID].id == b"\x00\x00\x00\x05"


def test_shell_pipeline_from_frames_to_fabric():
    """What the shell does, on the Mininet wiring: an LLDP probe out of every port, the packet-in
    of each at the far end parsed into link_seen; ARP probes on the probe ports, the hosts'
    replies parsed into host_seen; then recognise."""
    from scapy.layers.l2 import ARP, Ether
    want = Clos.generate(2, 4, 2, wiring=True)
    far = {}  # (dpid, port) -> what is cabled there: (dpid, port) of a switch, or a host
    for sw in spines(want) + want.leaves:
        for peer, port in want.ports[sw].items():
            far[(want.dpids[sw], port)] = (want.dpids[peer], want.port(peer, sw)) \
                if peer in want.dpids else peer
    t = Topology()
    for sw in spines(want) + want.leaves:
        t.switch_up(want.dpids[sw], {p: True for p in want.ports[sw].values()}, 0.0)
    for (d, p), there in sorted(far.items()):
        if isinstance(there, tuple):  # a host ignores LLDP
            assert t.link_seen(*parse_lldp(lldp_frame(d, p)), *there, 0.0)
    probes = probe_ports(t)
    assert len(probes) == len(want.hosts)
    for d, p in probes:
        host = far[(d, p)]
        request = Ether(arp_request("02:00:00:00:00:fe", want.host_ip[host]))
        assert request[ARP].pdst == want.host_ip[host]  # each host answers its own address
        reply = bytes(Ether(src=want.host_mac[host], dst="02:00:00:00:00:fe") /
                      ARP(op=2, hwsrc=want.host_mac[host], psrc=want.host_ip[host],
                          hwdst="02:00:00:00:00:fe", pdst="0.0.0.0"))
        assert t.host_seen(d, p, *parse_host(reply), 0.5)
    got, problems = recognise(t)
    assert problems == [] and got.to_dict() == as_clos(want).to_dict()
    assert check_declared(want, t) == []


def test_parse_lldp_rejects_other_frames():
    frame = lldp_frame(1, 2)
    assert parse_lldp(frame[:20]) is None
    assert parse_lldp(frame[:12] + b"\x08\x00" + frame[14:]) is None
    foreign = bytearray(frame)
    foreign[17] = 4  # chassis id subtype: MAC address
    assert parse_lldp(bytes(foreign)) is None
    assert parse_lldp(b"") is None


def test_arp_probe_and_host_addresses():
    from scapy.layers.inet import IP
    from scapy.layers.l2 import ARP, Ether
    probe = arp_request("02:00:00:00:00:fe", "10.0.1.2")
    pkt = Ether(probe)
    assert (pkt.dst, pkt[ARP].op, pkt[ARP].pdst, pkt[ARP].psrc) == (
        "ff:ff:ff:ff:ff:ff", 1, "10.0.1.2", "0.0.0.0")
    assert parse_host(probe) is None  # the controller's own probe teaches nothing
    reply = bytes(Ether(src="02:00:00:00:01:02", dst="02:00:00:00:00:fe") /
                  ARP(op=2, hwsrc="02:00:00:00:01:02", psrc="10.0.1.2",
                      hwdst="02:00:00:00:00:fe", pdst="0.0.0.0"))
    assert parse_host(reply) == ("02:00:00:00:01:02", "10.0.1.2")
    ip = bytes(Ether(src="02:00:00:00:01:03", dst="02:00:00:00:00:01") /
               IP(src="10.0.1.3", dst="10.0.0.1"))
    assert parse_host(ip) == ("02:00:00:00:01:03", "10.0.1.3")
    assert parse_host(lldp_frame(1, 1)) is None
    with pytest.raises(InputError, match="bad IPv4"):
        arp_request("02:00:00:00:00:fe", "10.0.1")


# ---- property ---------------------------------------------------------------------------------
@st.composite
def fabrics_with_gaps(draw):
    s, l, h = draw(st.integers(1, 4)), draw(st.integers(1, 6)), draw(st.integers(1, 3))
    f = Clos.generate(s, l, h, wiring=True)
    pairs = [(a, b) for a in f.leaves for b in spines(f)]
    missing = set(draw(st.lists(st.sampled_from(pairs), unique=True, max_size=len(pairs))))
    # every switch keeps a link (a switch with none is left out, see the isolated test)
    for leaf in f.leaves:
        if all((leaf, sp) in missing for sp in spines(f)):
            missing.discard((leaf, spines(f)[0]))
    for sp in spines(f):
        if all((leaf, sp) in missing for leaf in f.leaves):
            missing.discard((f.leaves[-1], sp))
    # hosts heard (as after a pingall): at least one per leaf, so that every part of a fabric
    # split by missing links shows which side its leaves are on
    heard = {f.hosts_of_leaf[leaf][0] for leaf in f.leaves}
    heard = sorted(heard | set(draw(st.lists(st.sampled_from(sorted(f.hosts)), unique=True))))
    return f, missing, heard, draw(st.integers(0, 2**16))


@settings(max_examples=80, deadline=None)
@given(fabrics_with_gaps())
def test_recognise_property(case):
    f, missing, heard, seed = case
    got, problems = recognise(observe(f, missing=missing, hosts=heard, order_seed=seed))
    assert spines(got) == spines(f) and got.leaves == f.leaves
    assert got.dpids == f.dpids
    assert got.down == missing
    assert as_clos(load_fabric(got.to_dict())).to_dict() == got.to_dict()  # PUT /v1/fabric
    assert sorted((p["switch"], p["kind"]) for p in problems) == sorted(
        (leaf, "missing_link") for leaf, _s in missing)
    assert got.hosts == {h: f.hosts[h] for h in heard}
    for leaf in f.leaves:
        for sp in spines(f):
            if (leaf, sp) not in missing:
                assert got.port(leaf, sp) == f.port(leaf, sp)
                assert got.port(sp, leaf) == f.port(sp, leaf)
    for h in heard:
        assert got.port(f.hosts[h], h) == f.port(f.hosts[h], h)
        assert (got.host_ip[h], got.host_mac[h]) == (f.host_ip[h], f.host_mac[h])


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 4), st.integers(1, 5), st.integers(0, 2), st.data())
def test_any_swapped_pair_of_leaf_ports_is_two_reports(s, l, h, data):
    f = Clos.generate(s, l, h, wiring=True)
    leaf = data.draw(st.sampled_from(f.leaves))
    a, b = data.draw(st.lists(st.sampled_from(spines(f)), min_size=2, max_size=2, unique=True))
    problems = check_declared(f, swapped(f, leaf, a, b))
    assert sorted((p["kind"], p["switch"], p["port"], p["expected"], p["seen"])
                  for p in problems) == sorted([
        ("wrong_port", leaf, f.port(leaf, a), f"spine {a} port {f.port(a, leaf)}",
         f"spine {b} port {f.port(b, leaf)}"),
        ("wrong_port", leaf, f.port(leaf, b), f"spine {b} port {f.port(b, leaf)}",
         f"spine {a} port {f.port(a, leaf)}")])


def test_links_dropped_by_switch_events_are_those_a_full_scan_drops():
    """``Topology._drop_links`` looks only at the links of the switch (an index rebuilt when
    links come or go): random switch, port and probe events give the links a scan of every
    link gives (the rule before the index)."""
    def scan(links, touches):
        return {k: v for k, v in links.items() if not (touches(*k) or touches(*v[:2]))}

    rng = random.Random(7)
    for _ in range(30):
        t, want, now = Topology(), {}, 0.0
        for _ in range(200):
            now += 0.01
            d, p = rng.randrange(6), rng.randrange(1, 5)
            kind = rng.random()
            if kind < 0.5:
                for x in (d, e := rng.randrange(6)):
                    if x not in t.switches:
                        t.switch_up(x, {q: True for q in range(1, 5)}, now)
                q = rng.randrange(1, 5)
                if t.link_seen(d, p, e, q, now) or (d, p) in want:
                    want[(d, p)] = (e, q)
            elif kind < 0.7:
                ports = {q: rng.random() < 0.7 for q in range(1, rng.randrange(2, 6))}
                if t.switches.get(d) != ports:
                    want = scan(want, lambda x, y: x == d and not ports.get(y, False))
                t.switch_up(d, ports, now)
            elif kind < 0.85:
                if t.port_changed(d, p, False, now):
                    want = scan(want, lambda x, y: (x, y) == (d, p))
            elif t.switch_down(d, now):
                want = scan(want, lambda x, y: x == d)
            assert {k: v[:2] for k, v in t.links.items()} == want
