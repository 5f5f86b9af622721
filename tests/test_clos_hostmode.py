"""Host mode on a three-tier fabric (``enforcement.clos_hostmode``), against fake OpenFlow
tables that forward packets as the entries say: the leaf and the aggregation switch read
disjoint source-port bits, so one leaf reaches every core; a ring across pods gets ports
learned by probes that its packets follow at every tier, with no per-flow entry anywhere; a
core link down gives the flows that crossed it new ports, make before break."""
import json

import pytest

from controller.enforcement.clos_hostmode import (
    clos_host_static_rules,
    dest_class,
    pipeline_hops,
)
from controller.enforcement.clos_rules import clos_all_static
from controller.enforcement.hostmode import PORT_MIN
from controller.enforcement.openflow import COOKIE_STATIC, Message
from controller.model.clos import Clos
from controller.service import api
from controller.service.route_service import RouteService
from emulation.harness.fake_switch import FakeSwitches, trace
from tests.clos_checks import CROSS_POD_RING
from tests.helpers import FakeClock

CROSS_PODS = CROSS_POD_RING


def start(fabric=None):
    f = fabric or Clos.fat_tree(4, 2, link_gbps=0.02).wire()
    sw = FakeSwitches(f.dpids.values(), fabric=f)
    clock = FakeClock(100.0)
    svc = RouteService(sw, f, clock=clock, sleep=clock.sleep)
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    return f, sw, svc


def call(svc, method, path, doc=None):
    return api.handle(svc, method, path, None if doc is None else json.dumps(doc).encode())


def host_pipeline(f, sw):
    """Install the static and host-mode entries of every switch into the fake tables."""
    static = clos_all_static(f)
    sw.install({f.dpids[name]: [Message("flow_add", rule=x) for x in
                                static[f.dpids[name]][0] + clos_host_static_rules(f, name)] +
                               [Message("group_add", group=g) for g in static[f.dpids[name]][1]]
                for name in f.switches()})


@pytest.mark.parametrize("k", [4, 6, 8])
def test_one_leaf_reaches_every_core_through_disjoint_port_bits(k):
    f = Clos.fat_tree(k, 1, link_gbps=0.02).wire()
    sw = FakeSwitches(f.dpids.values(), fabric=f)
    host_pipeline(f, sw)
    src, dst = f.hosts_on["l0"][0], f.hosts_on[f.planes[0].leaves[-1]][0]
    half = k // 2
    span = 1 << (2 * (half - 1).bit_length())  # every (leaf bucket, aggregation bucket) pair
    cores = set()
    for port in range(PORT_MIN, PORT_MIN + span):
        path, got, _ = trace(f, sw, src, dst, proto=6, sport=port)
        assert got == dst and len(path) == 5, (port, path)
        cores.add(path[2])
    assert len(cores) == half * half  # (k/2)^2, not the k/2 of one shared bit field


def test_a_degraded_class_keeps_every_port_on_a_way_down():
    f = Clos.fat_tree(4, 1, link_gbps=0.02).wire().with_down({("a1_0", "c0_0")})
    sw = FakeSwitches(f.dpids.values(), fabric=f)
    host_pipeline(f, sw)
    assert dest_class(f, "l0", "l2") == (("a0_0", ("c0_1",)), ("a0_1", ("c1_0", "c1_1")))
    for port in range(PORT_MIN, PORT_MIN + 8):
        path, got, _ = trace(f, sw, "h0_0", "h2_0", proto=6, sport=port)
        assert got == "h2_0" and "c0_0" not in path


def test_a_ring_across_pods_follows_its_ports_with_no_per_flow_entry():
    f, sw, svc = start()
    code, doc = call(svc, "POST", "/v1/jobs", {"id": "r", "collective": "ring_allreduce",
                                                "ranks": CROSS_PODS, "bytes": 1e6,
                                                "mode": "host"})
    assert code == 201, doc
    view = call(svc, "GET", "/v1/jobs/r")[1]
    assert view["mode"] == "host" and view["unroutable_flows"] == 0
    for route in view["routes"]:
        assert route["sport"] >= PORT_MIN
        path, reached, _ = trace(f, sw, route["src"], route["dst"], proto=route["proto"],
                                 sport=route["sport"], dport=80)
        assert reached == route["dst"] and path == route["path"], (route, path)
    assert call(svc, "GET", "/v1/links")[1]["summary"]["max_link_load"] == 1.0
    cookies = {r.cookie for rules in sw.rules.values() for r in rules.values()}
    assert cookies == {COOKIE_STATIC}  # nothing per flow, at any tier
    host = call(svc, "GET", "/v1/fabric")[1]["host_mode"]
    assert 0 < host["probes_sent"] <= 2 * 4 * 16  # a window per (leaf, class) at most


def test_an_answer_from_a_stale_datapath_is_probed_again():
    """Open vSwitch updates its cached datapath flows after the barrier: a probe sent right
    after the pipeline went in took a path cached from before (fat-tree emulation). Here the
    first round says port 49152 reaches what 49154 reaches (as in the emulation); the
    controller sees that this contradicts its pipeline, probes 49152 again after a pause,
    and every flow follows its planned path. Taken as it came, a flow planned over 49154's
    core got 49152, which leads to another core."""
    f = Clos.fat_tree(4, 2, link_gbps=0.02).wire()
    sw = FakeSwitches(f.dpids.values(), fabric=f)
    truth, rounds = sw.probe, []

    def stale_first(probes):
        got = truth(probes)
        if not rounds:
            first = {(p.key, p.sport): p.token for p in probes}
            for p in probes:
                if p.sport == PORT_MIN and (p.key, PORT_MIN + 2) in first:
                    got[p.token] = got[first[(p.key, PORT_MIN + 2)]]
        rounds.append(len(probes))
        return got
    sw.probe = stale_first
    clock = FakeClock(100.0)
    svc = RouteService(sw, f, clock=clock, sleep=clock.sleep)
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    code, doc = call(svc, "POST", "/v1/jobs", {"id": "r", "collective": "ring_allreduce",
                                                "ranks": CROSS_PODS, "bytes": 1e6,
                                                "mode": "host"})
    assert code == 201, doc
    for route in call(svc, "GET", "/v1/jobs/r")[1]["routes"]:
        path, reached, _ = trace(f, sw, route["src"], route["dst"], proto=route["proto"],
                                 sport=route["sport"], dport=80)
        assert reached == route["dst"] and path == route["path"], (route, path)
    host = call(svc, "GET", "/v1/fabric")[1]["host_mode"]
    assert host["probes_repeated"] == rounds[1] > 0 and len(rounds) == 2  # once each, settled


@pytest.mark.parametrize("fab", [
    lambda: Clos.fat_tree(4, 2, link_gbps=0.02).wire().with_down({("a1_0", "c0_0"),
                                                                  ("l0", "a0_1")}),
    lambda: Clos.leaf_spine(4, 4, 2, link_gbps=0.02).wire().with_down({("l1", "s2")}),
    lambda: Clos.leaf_spine(2, 4, 2, planes=2, link_gbps=0.02).wire(),
    lambda: Clos.fat_tree(4, 1, planes=2, link_gbps=0.02).wire()],
    ids=["fat-tree-down", "leaf-spine-down", "two-planes", "fat-tree-two-planes"])
def test_settled_tables_never_contradict_the_pipeline(fab):
    """Every probe through settled tables reaches what ``pipeline_hops`` says, with links
    down and on several planes: a placement never probes twice for nothing."""
    f, sw, svc = start(fab())
    hosts = sorted(f.host_leaves)
    flows = [{"src": a, "dst": b, "bytes": 1e6, "proto": "tcp", "dport": 80}
             for a in hosts for b in hosts if f.hosts[a] != f.hosts[b]]
    code, doc = call(svc, "POST", "/v1/jobs", {"id": "all", "flows": flows, "mode": "host"})
    assert code == 201, doc
    maps = svc.host.maps
    assert maps and all(hops == pipeline_hops(f, k[0], k[1], port)
                        for k, pm in maps.items() for port, hops in pm.spine_of.items())
    assert call(svc, "GET", "/v1/fabric")[1]["host_mode"]["probes_repeated"] == 0


@pytest.mark.parametrize("fab", [lambda: Clos.leaf_spine(2, 4, 2, planes=2, link_gbps=0.02),
                                 lambda: Clos.fat_tree(4, 1, planes=2, link_gbps=0.02)],
                         ids=["leaf-spine", "fat-tree"])
def test_two_planes_in_host_mode_probe_and_steer_each_plane(fab):
    """Host mode on two planes: a plane's ports are probed from that plane's leaves with its
    addresses, and a packet sent on the route's plane with its port follows the planned
    path; both planes carry flows, and nothing is installed per flow."""
    f, sw, svc = start(fab().wire())
    hosts = sorted(f.host_leaves)
    flows = [{"src": a, "dst": b, "bytes": 1e6, "proto": "tcp", "dport": 80}
             for a in hosts for b in hosts if f.hosts[a] != f.hosts[b]]
    code, doc = call(svc, "POST", "/v1/jobs", {"id": "a2a", "flows": flows, "mode": "host"})
    assert code == 201, doc
    names = {p.name: q for q, p in enumerate(f.planes)}
    used = set()
    for route in call(svc, "GET", "/v1/jobs/a2a")[1]["routes"]:
        q = names[route["plane"]]
        path, reached, _ = trace(f, sw, route["src"], route["dst"], proto=6,
                                 sport=route["sport"], dport=80, plane=q)
        assert reached == route["dst"] and path == route["path"], (route, path)
        used.add(q)
    assert used == {0, 1}
    cookies = {r.cookie for rules in sw.rules.values() for r in rules.values()}
    assert cookies == {COOKIE_STATIC}
    lines = call(svc, "GET", "/v1/jobs/a2a/ports")[1].splitlines()[1:]
    assert {x.split()[0] for x in lines} >= {f.ip_of(hosts[0], 1)}  # plane-1 sources


def test_a_core_link_down_gives_new_ports_that_avoid_it():
    f, sw, svc = start()
    assert call(svc, "POST", "/v1/jobs", {"id": "r", "collective": "ring_allreduce",
                                           "ranks": CROSS_PODS, "bytes": 1e6,
                                           "mode": "host"})[0] == 201
    before = {(r["src"], r["dst"]): r for r in call(svc, "GET", "/v1/jobs/r")[1]["routes"]}
    hit = next(iter(before.values()))
    agg, core = hit["path"][1], hit["path"][2]
    svc.port_changed(f.dpids[agg], f.port(agg, core), False)
    after = call(svc, "GET", "/v1/jobs/r")[1]["routes"]
    assert len(after) == 8
    for route in after:
        assert (agg, core) not in zip(route["path"], route["path"][1:])
        path, reached, _ = trace(f, sw, route["src"], route["dst"], proto=route["proto"],
                                 sport=route["sport"], dport=80)
        assert reached == route["dst"] and path == route["path"], (route, path)
    assert after != list(before.values())
    moved = [c for e in svc.state.events for c in e.get("port_changes", [])]
    assert moved and all(c["path"] and c["sport"] != c["old_sport"] for c in moved)
