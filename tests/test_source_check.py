"""Forged sources (issue 59, item 8): a leaf's host port admits IPv4 from its own host's address
only, in flow, sr and host modes, on a leaf-spine, a fat-tree, two planes and bundles
(``enforcement.source_check``), traced through the fake OpenFlow tables; what it refuses is
counted (``mlroute_forged_packets_total``); and a sample of a packet a switch dropped never
reaches a learned matrix (Open vSwitch samples on ingress, before its tables drop)."""
import json
from dataclasses import replace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.enforcement.clos_labels import label_space
from controller.enforcement.desired import desired_tables
from controller.enforcement.openflow import ETH_IPV4, ETH_MPLS
from controller.enforcement.rules import (
    PRIO_DEFAULT,
    PRIO_FORGED,
    PRIO_LOCAL,
    PRIO_MPLS,
    PRIO_SOURCE,
    T_CLASSIFY,
    T_DELIVER,
    T_FORGED,
    T_HOST_CLASS,
)
from controller.enforcement.source_check import forged_drop, host_ports
from controller.measurement.learner import TrafficLearner
from controller.measurement.sflow import PacketSample, parse_datagram
from controller.model.clos import Clos
from controller.service import api
from controller.service.metrics import exposition
from controller.service.route_service import RouteService
from emulation.harness.fake_switch import FakeSwitches, trace
from tests.test_sflow import datagram, ethernet, expanded_sample, flow_sample, ipv4, raw_header

SHAPES = {
    "leaf-spine": lambda: Clos.generate(2, 3, 2, wiring=True),
    "fat-tree": lambda: Clos.fat_tree(4, 2).wire(),
    "two planes": lambda: Clos.leaf_spine(2, 3, 2, planes=2).wire(),
    "bundles": lambda: Clos.leaf_spine(2, 3, 2, bundle=2).wire(),
}
MODES = {"flow": {"host": False, "labels": False}, "sr": {"host": False, "labels": True},
         "host": {"host": True, "labels": False}}


def loaded(f, mode: str) -> FakeSwitches:
    """Fake switches holding the fabric's static entries of ``mode`` (no job)."""
    sw = FakeSwitches(f.dpids.values(), f)
    for dpid, (rules, groups) in desired_tables(f, [], **MODES[mode]).items():
        sw.rules[dpid] = {r.key: r for r in rules}
        sw.groups[dpid] = {g.group_id: g for g in groups}
    return sw


def packet(port: int, src: str, dst: str, mpls=()) -> dict:
    return {"in_port": port, "eth_type": ETH_IPV4, "ipv4_src": src, "ipv4_dst": dst,
            "ip_proto": 6, "sport": 49152, "dport": 80, "mpls": list(mpls)}


def as_before(f, switch: str, rules) -> list:
    """``rules`` as the builders wrote them before the source check: its entries taken out, a
    leaf's forwarding back in table 0 and host mode's classes from table 2, where they were
    (``tests/test_bundles_host.py`` keeps digests of what they did then)."""
    leaf, out = f.tier_of[switch] == 0, []
    for r in rules:
        m = r.match_dict()
        if r.table == T_FORGED or (r.table == T_CLASSIFY and r.priority in (
                PRIO_SOURCE, PRIO_FORGED)) or (r.priority == PRIO_MPLS + 1 and m.get(
                "eth_type") == ETH_MPLS) or (leaf and r.table == T_CLASSIFY and r.goto ==
                                             T_DELIVER and r.priority == PRIO_DEFAULT):
            continue
        table = T_CLASSIFY if leaf and r.table == T_DELIVER and r.priority < PRIO_LOCAL \
            else r.table
        out.append(replace(r, table=table - (table >= T_HOST_CLASS), goto=None if r.goto is None
                           else r.goto - (r.goto >= T_HOST_CLASS)))
    return out


def leaves_with_hosts(f):
    return [leaf for leaf in f.tier_of if f.tier_of[leaf] == 0 and f.hosts_on.get(leaf)]


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_host_port_forwards_its_hosts_address_and_drops_every_other(shape, mode):
    """From every host's port: its own address reaches every host of its plane; another
    host's address (of its leaf or another, of its plane or the other) reaches nothing, to
    a host of its leaf or beyond."""
    f = SHAPES[shape]()
    sw = loaded(f, mode)
    for leaf in leaves_with_hosts(f):
        q = f.plane_of[leaf]
        ips = f.plane_ips(q)
        for h in f.hosts_on[leaf]:
            port = f.port(leaf, h)
            for dst in f.host_leaves:
                if dst != h:
                    assert trace(f, sw, h, dst, plane=q)[1] == dst, (mode, h, dst)
            for other in f.host_leaves:
                if other == h:
                    continue
                forged = {f.ip_of(other, p) for p in range(len(f.planes))}
                for dst in {f.hosts_on[leaf][-1], next(x for x in ips if f.host_leaves[x][q]
                                                        != leaf)} - {h}:
                    for src in forged:
                        out = sw.process(f.dpids[leaf], packet(port, src, ips[dst]))
                        assert out == [], (mode, leaf, h, "as", other, src, "->", dst, out)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_leaf_holds_an_admission_per_host_and_a_refusal_per_host_port(shape):
    f = SHAPES[shape]()
    tables = desired_tables(f, [])
    for leaf in leaves_with_hosts(f):
        dpid, ips = f.dpids[leaf], f.addresses_at(leaf)
        rules = tables[dpid][0]
        admitted = {(r.match_dict()["in_port"], r.match_dict()["ipv4_src"]) for r in rules
                    if r.table == T_CLASSIFY and r.priority == PRIO_SOURCE}
        assert admitted == {(f.port(leaf, h), ips[h]) for h in f.hosts_on[leaf]}
        refused = {r.match_dict()["in_port"] for r in rules
                   if r.table == T_CLASSIFY and r.goto == T_FORGED}
        assert refused == set(host_ports(f, leaf)) == {f.port(leaf, h) for h in f.hosts_on[leaf]}
        assert forged_drop(dpid) in rules


def test_mpls_from_a_host_port_is_dropped_while_labels_are_held():
    """A host that wraps a forged packet in its own leaf's label: the leaf pops that label from
    any port, and would deliver (or forward) what was inside."""
    f = Clos.generate(2, 3, 2, wiring=True)
    sw = loaded(f, "sr")
    own = label_space(f).of("l0", 0)
    port = f.port("l0", "h0_0")
    for dst in ("h0_1", "h1_0"):
        pkt = packet(port, f.host_ip["h2_0"], f.host_ip[dst], mpls=[own])
        assert sw.process(f.dpids["l0"], pkt) == [], dst
    # from a spine, the leaf's label is still popped and delivered
    spine_port = f.port("l0", "s0")
    out = sw.process(f.dpids["l0"], packet(spine_port, f.host_ip["h1_0"], f.host_ip["h0_1"],
                                           mpls=[own]))
    assert [p for p, _ in out] == [f.port("l0", "h0_1")]


def test_a_port_with_no_known_host_is_not_checked():
    """Zero configuration learns a host from its ARP; until then its port forwards as before,
    to a host of its leaf and beyond (nothing is dropped before the fabric knows the host)."""
    f = Clos.generate(2, 3, 2, wiring=True)
    sw = loaded(f, "flow")
    unknown = max(p for ports in [f.ports["l0"].values()] for p in ports) + 1
    local = sw.process(f.dpids["l0"], packet(unknown, "192.0.2.9", f.host_ip["h0_1"]))
    assert [p for p, _ in local] == [f.port("l0", "h0_1")]
    beyond = sw.process(f.dpids["l0"], packet(unknown, f.host_ip["h2_0"], f.host_ip["h1_0"]))
    assert [p for p, _ in beyond] and beyond[0][0] in (f.port("l0", "s0"), f.port("l0", "s1"))


def test_refused_packets_are_counted_in_the_metrics():
    f = Clos.generate(2, 2, 2, 0.01, wiring=True)
    sw = FakeSwitches(f.dpids.values(), f)
    svc = RouteService(sw, f)
    for d in f.dpids.values():
        svc.switch_connected(d, {})
    drop = forged_drop(f.dpids["l1"])
    assert drop.key in sw.rules[f.dpids["l1"]]
    svc.flow_stats(f.dpids["l1"], [(drop.table, drop.priority, dict(drop.match), 6400, 50)])
    fams = {m.name: m for m in text_string_to_metric_families(exposition(svc)[0].decode())}
    got = {s.labels["switch"]: s.value for s in fams["mlroute_forged_packets"].samples
           if s.name.endswith("_total")}
    assert got == {"l0": 0, "l1": 50}


# ---- sFlow: a sample of a dropped packet ------------------------------------------------------
def forged_datagram(outp, expanded=False):
    header = raw_header(ethernet(ipv4("10.0.2.1", "10.0.1.1", proto=17)), frame_length=1400)
    if expanded:
        return datagram([expanded_sample([header], outp=outp)])
    return datagram([flow_sample([header], outp=outp)])


@pytest.mark.parametrize("outp, expanded, dropped", [
    (0x40000000 | 256, False, True),  # Open vSwitch: "packet dropped for unknown reason"
    ((1, 256), True, True),
    (4, False, False), (0x80000002, False, False),  # one port; several
    ((0, 10), True, False), ((2, 2), True, False)])
def test_the_decoder_tells_a_dropped_packets_sample(outp, expanded, dropped):
    (s,) = parse_datagram(forged_datagram(outp, expanded))
    assert s.dropped is dropped and s.src == "10.0.2.1"


def test_the_learner_never_counts_a_dropped_packet():
    """A host sends as another member of a job: its leaf drops the packets, and the switch's
    samples of them (taken on ingress, output "dropped") add no pair."""
    learner = TrafficLearner(window_s=1.0)
    (forged,) = parse_datagram(forged_datagram(0x40000000 | 256))
    (kept,) = parse_datagram(forged_datagram(4))
    learner.observe([forged] * 5, now=0.5)
    assert learner.window_pairs(1.5) == {} and learner.dropped == 5 and learner.observed == 0
    learner.observe([kept], now=1.5)
    assert learner.window_pairs(2.5) == {("10.0.2.1", "10.0.1.1"): 1400 * 32}


def test_a_forged_pair_never_reaches_a_members_only_job():
    """End to end in the service: a members-only job's learning sees no sample of what a
    leaf dropped, however many; the same pair not dropped is heard."""
    f = Clos.generate(2, 3, 2, 0.01, wiring=True)
    sw = FakeSwitches(f.dpids.values(), f)
    now = [100.0]
    svc = RouteService(sw, f, clock=lambda: now[0], monotonic=lambda: now[0])
    for d in f.dpids.values():
        svc.switch_connected(d, {})
    code, doc = api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": "m", "members": ["h0_0", "h1_0", "h2_0"]}).encode())
    assert code == 201, doc
    ip = f.host_ip

    def sample(dropped):
        return PacketSample("127.0.0.1", 0, 0, 1, 16, 0, 0, 3, None, 1400, ip["h2_0"],
                            ip["h1_0"], 17, 40000, 4791, dropped=dropped)
    now[0] += 3
    svc.traffic_samples([sample(True)] * 100)
    now[0] += 5
    svc.tick()
    assert svc.learning.samples_by_job() == {"m": 0}
    svc.traffic_samples([sample(False)] * 10)
    now[0] += 5
    svc.tick()
    assert svc.learning.samples_by_job() == {"m": 10}

