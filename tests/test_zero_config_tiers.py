"""Zero configuration without a wrong shape (issue 38): with no host heard, a fat-tree is
recognised as three tiers from LLDP alone (leaves are the switches with ports that face no
switch), never as a leaf-spine with missing links; the finder adopts it as soon as every
cable was probed both ways and waits while one is not; a leaf-spine stays two tiers."""
import json

import networkx as nx
import pytest

from controller.discovery.finder import QUIET_S, SWITCH_QUIET_S, FabricFinder
from controller.discovery.planes import discover
from controller.discovery.tiers import _unexplained, clos_shape, recognise_clos
from controller.discovery.topology import Topology
from controller.model.clos import Clos, as_clos
from tests.test_clos_discovery import observe
from topologies.clos import fattree_fabric


def spines(fabric: Clos) -> list[str]:
    """The spines of a leaf-spine's one plane (its one pod's aggregation switches)."""
    return fabric.planes[0].aggs[0]


def switch_ports(f):
    return {s: {n: p for n, p in m.items() if n in f.dpids} for s, m in f.ports.items()}


class Wired:
    """A wired fabric in front of a finder: a frame sent out of a switch port reaches the far
    switch's port (frames to hosts are lost: the hosts are silent)."""

    def __init__(self, f):
        self.f, self.finder, self.now = f, FabricFinder(secret=b"z" * 32), 100.0

    def connect(self, names=None, down=()):
        for name in names or list(self.f.dpids):
            ports = {p: (name, p) not in down for p in self.f.ports[name].values()}
            self.finder.switch_up(self.f.dpids[name], ports, self.now)

    def deliver(self, frames=None, lost=()) -> int:
        """Deliver frames (default: the finder's queued ones), but none out of ``lost``
        (switch, port) pairs; returns how many arrived."""
        frames = self.finder.take_frames() if frames is None else frames
        n = 0
        for dpid, port, frame in frames:
            name = self.f.switch_of_dpid[dpid]
            peer = self.f.peer(name, port)
            if peer is None or peer not in self.f.dpids or (name, port) in lost \
                    or self.f.dpids[peer] not in self.finder.topology.switches:
                continue
            self.finder.packet_in(self.f.dpids[peer], self.f.port(peer, name), frame, self.now)
            n += 1
        return n

    def exchange(self, lost=()):
        while self.deliver(lost=lost):
            pass

    def lldp_round(self, lost=()):
        self.deliver(self.finder.lldp_probes(self.now), lost)
        self.exchange(lost)


# ---- recognition: three tiers from LLDP alone ---------------------------------------------
@pytest.mark.parametrize("k,hosts", [(4, 2), (4, 1), (6, 3), (8, None)])
def test_a_fat_tree_with_no_host_heard_is_three_tiers_with_its_own_names(k, hosts):
    f = fattree_fabric(k, hosts)
    t = observe(f, hosts=[])
    got, problems = recognise_clos(t)
    assert problems == [] and isinstance(got, Clos) and got.tiers == 3
    assert got.planes == f.planes and got.dpids == f.dpids  # pods, leaves, aggs, cores
    assert switch_ports(got) == switch_ports(f) and got.down == set()
    assert got.host_leaves == {}
    for h in f.hosts:  # hosts heard later keep the places: the same document as the model
        observe(f, hosts=[h], t=t)
    again, problems = recognise_clos(t, previous=got)
    assert problems == [] and again.to_dict() == f.to_dict()


def test_the_places_match_the_fat_tree_model_pod_by_pod():
    f = fattree_fabric(8)
    got, _ = discover(observe(f, hosts=[]))
    p = got.planes[0]
    assert len(p.pods) == 8 and len(p.leaves) == 32 and len(p.cores) == 4
    assert all(len(aggs) == 4 for aggs in p.aggs) and all(len(g) == 4 for g in p.cores)
    for pod, aggs in enumerate(p.aggs):  # a pod's leaves reach exactly its aggregation switches
        for leaf in (x for x, q in zip(p.leaves, p.pod_of_leaf) if q == pod):
            assert sorted(n for n in f.ports[leaf] if n in f.dpids) == sorted(aggs)


def test_a_pod_whose_hosts_are_silent_is_placed_by_its_host_ports():
    f = fattree_fabric(4, 2)
    heard = [h for h in f.hosts if f.hosts[h] not in ("l2", "l3")]  # pod 1 silent
    got, problems = recognise_clos(observe(f, hosts=heard))
    assert problems == [] and got.planes == f.planes and got.dpids == f.dpids
    assert sorted(got.hosts) == sorted(heard)


def test_a_fat_tree_with_a_failed_link_and_no_host_is_three_tiers_with_it_down():
    f = fattree_fabric(4, 2)
    t = Topology()
    a, c = "a1_0", "c0_1"
    for sw in f.switches():  # the cable's ports are down: no LLDP crosses it
        t.switch_up(f.dpids[sw], {p: (sw, n) not in ((a, c), (c, a))
                                  for n, p in f.ports[sw].items()}, 0)
    observe(f, missing={(a, c)}, hosts=[], t=t)
    got, problems = recognise_clos(t)
    assert got.tiers == 3 and got.planes == f.planes and got.down == {(a, c)}
    assert [(p["kind"], p["switch"]) for p in problems] == [("missing_link", a)]


def test_a_two_tier_reading_of_a_fat_tree_leaves_most_links_unexplained():
    """Why a fat-tree is no leaf-spine: read as one (aggregation switches as spines, leaves
    and cores as leaves) it needs 64 links it never heard; three tiers explain every cable."""
    f = fattree_fabric(4, 2)
    t = observe(f, hosts=[])
    graph = nx.Graph((f.dpids[lo], f.dpids[up]) for lo, up in f.links())
    free = {d: sum(1 for p, up in t.switches[d].items() if up and (d, p) not in t.facing())
            for d in graph}
    shape = clos_shape(graph, {}, free)
    assert _unexplained(graph, shape) == 0
    assert _unexplained(graph, None, {d: (0, n) for d, n in free.items()}) == 64
    assert clos_shape(graph, {}) is None  # without host ports nothing says which are leaves


def test_a_reading_before_hosts_that_hosts_contradict_is_read_again():
    """Cores with more unused ports up than the leaves have hosts: with no host heard the
    grid is read the other way round (cores as leaves); once hosts speak on the real leaves
    the graph is read afresh and the fat-tree comes back as it is."""
    f = fattree_fabric(4, 1)
    t = observe(f, hosts=[])
    cores = [c for g in f.planes[0].cores for c in g]

    def spare_ports():
        for c in cores:
            t.switch_up(f.dpids[c], {**{p: True for p in f.ports[c].values()}, 90: True,
                                     91: True}, 0)
    spare_ports()
    first, _ = recognise_clos(t)
    assert first.tiers == 3 and first.planes != f.planes
    observe(f, t=t)
    spare_ports()
    again, problems = recognise_clos(t, previous=first)
    assert problems == [] and again.planes == f.planes and again.dpids == f.dpids
    assert again.host_ip == f.host_ip


def test_a_stray_host_on_an_aggregation_switch_does_not_undo_a_reading_before_hosts():
    f = fattree_fabric(4, 2)
    t = observe(f, hosts=[])
    first, _ = recognise_clos(t)
    spare = max(f.ports["a2_1"].values()) + 1
    t.switch_up(f.dpids["a2_1"], {**{p: True for p in f.ports["a2_1"].values()}, spare: True}, 1)
    t.host_seen(f.dpids["a2_1"], spare, "02:00:00:00:99:01", "10.0.99.1", 1)
    got, problems = recognise_clos(t, previous=first)
    assert got.planes == f.planes and got.dpids == f.dpids and got.host_leaves == {}
    assert [(p["kind"], p["switch"], p["port"]) for p in problems] == [
        ("host_on_spine", "a2_1", spare)]


@pytest.mark.parametrize("port_up", [False, True])
def test_a_leaf_spine_with_a_missing_link_stays_two_tiers(port_up):
    f = Clos.generate(4, 6, 2, wiring=True)
    t = Topology()
    gone = ("l1", "s2")
    for sw in spines(f) + f.leaves:
        t.switch_up(f.dpids[sw], {p: port_up or (sw, n) not in (gone, gone[::-1])
                                  for n, p in f.ports[sw].items()}, 0)
    for leaf in f.leaves:
        for s in spines(f):
            if (leaf, s) != gone:
                a, b = (f.dpids[leaf], f.port(leaf, s)), (f.dpids[s], f.port(s, leaf))
                t.link_seen(*a, *b, 0)
                t.link_seen(*b, *a, 0)
    got, problems = recognise_clos(t)
    assert isinstance(got, Clos) and got.tiers == 2 and got.planes == as_clos(f).planes
    assert got.down == {gone}
    assert [p["kind"] for p in problems] == ["missing_link"]


def test_a_leaf_spine_missing_a_spine_link_per_leaf_stays_two_tiers():
    """Every leaf lost its link to a different spine (ports up): still a leaf-spine."""
    f = Clos.generate(4, 4, 1, wiring=True)
    missing = {(leaf, spines(f)[i]) for i, leaf in enumerate(f.leaves)}
    t = Topology()
    for sw in spines(f) + f.leaves:
        t.switch_up(f.dpids[sw], {p: True for p in f.ports[sw].values()}, 0)
    for leaf in f.leaves:
        for s in spines(f):
            if (leaf, s) not in missing:
                a, b = (f.dpids[leaf], f.port(leaf, s)), (f.dpids[s], f.port(s, leaf))
                t.link_seen(*a, *b, 0)
                t.link_seen(*b, *a, 0)
    got, _ = discover(t)
    assert isinstance(got, Clos) and got.planes == as_clos(f).planes and got.down == missing


def test_two_planes_read_before_any_host_spoke_are_joined_once_hosts_speak():
    """Planes need a host heard to be told apart (their networks): before that the graph is
    read as before; the hosts heard then give both planes, whatever was read first."""
    from tests.test_planes_discovery import observe_planes
    for f in (Clos.leaf_spine(2, 4, 1, planes=2).wire(), Clos.fat_tree(4, 1, planes=2).wire()):
        first, _ = discover(observe_planes(f, heard=set()))
        assert first is not None
        t = observe_planes(f, heard={(h, q) for h in f.host_leaves for q in (0, 1)})
        again, problems = discover(t, previous=first)
        assert problems == [] and again.to_dict() == f.to_dict()


# ---- the finder: adopted at once when every cable was probed, never a wrong shape -----------
@pytest.mark.parametrize("k", [4, 8])
def test_the_finder_adopts_three_tiers_at_once_with_no_host_traffic(k):
    f = fattree_fabric(k, 2)
    w = Wired(f)
    w.connect()
    w.exchange()  # probes at connect, answers one way: every cable seen both ways
    assert w.finder.settle(w.now) is None  # switches connected just now
    w.now += SWITCH_QUIET_S
    got = w.finder.settle(w.now)
    assert isinstance(got, Clos) and got.tiers == 3 and w.now - 100.0 < QUIET_S
    assert got.planes == f.planes and got.dpids == f.dpids and got.down == set()
    assert switch_ports(got) == switch_ports(f) and w.finder.problems == []


def test_the_finder_adopts_a_leaf_spine_at_once_as_two_tiers():
    f = Clos.generate(4, 6, 2, wiring=True)
    w = Wired(f)
    w.connect()
    w.exchange()
    w.now += SWITCH_QUIET_S
    got = w.finder.settle(w.now)
    assert isinstance(got, Clos) and got.tiers == 2 and got.planes == as_clos(f).planes
    assert w.finder.last_cause == ("fabric discovered: 2 tiers: 4 spines, 6 leaves, 0 hosts, "
                                   "0 links down")


def test_a_partly_heard_round_waits_and_the_next_round_is_adopted():
    """Probes out of some aggregation switch ports are lost at connect: those cables are not
    seen (their upper ends face no switch), so nothing is adopted, neither a leaf-spine nor a
    smaller fat-tree; the next LLDP round shows them and the three tiers are adopted."""
    f = fattree_fabric(4, 2)
    w = Wired(f)
    lost = {("a0_0", f.port("a0_0", "c0_0")), ("c0_0", f.port("c0_0", "a0_0")),
            ("a2_1", f.port("a2_1", "l5")), ("l5", f.port("l5", "a2_1"))}
    w.connect()
    w.exchange(lost)
    for dt in (SWITCH_QUIET_S, 0.3, 0.3):
        w.now += dt
        assert w.finder.settle(w.now) is None
    w.now += 0.4
    w.lldp_round()
    got = w.finder.settle(w.now)
    assert isinstance(got, Clos) and got.planes == f.planes and got.down == set()


def test_a_switch_not_connected_yet_holds_the_fabric_back():
    f = fattree_fabric(4, 2)
    w = Wired(f)
    w.connect([s for s in f.dpids if s != "c1_1"])
    w.exchange()
    w.now += SWITCH_QUIET_S
    assert w.finder.settle(w.now) is None  # its aggregation switches' ports face no switch
    w.now += 0.3
    w.connect(["c1_1"])
    w.exchange()
    w.now += SWITCH_QUIET_S
    got = w.finder.settle(w.now)
    assert got.planes == f.planes and got.down == set()


def test_a_fat_tree_with_a_failed_link_is_adopted_as_three_tiers_after_the_quiet_period():
    f = fattree_fabric(4, 2)
    w = Wired(f)
    a, c = "a3_1", "c1_0"
    w.connect(down={(a, f.port(a, c)), (c, f.port(c, a))})
    w.exchange()
    w.now += SWITCH_QUIET_S
    assert w.finder.settle(w.now) is None  # a link down: the quiet period, as before
    w.now += QUIET_S
    got = w.finder.settle(w.now)
    assert got.tiers == 3 and got.planes == f.planes and got.down == {(a, c)}


def test_the_controller_installs_the_fat_tree_before_any_host_speaks():
    """Zero configuration over the fake switches: one LLDP round after the switches connected
    the fat-tree is the fabric in use, every switch reconciled to its table; hosts then speak
    and a ring across the pods is routed on its planned paths."""
    from controller.discovery import lldp
    from controller.service import api
    from controller.service.route_service import RouteService
    from emulation.harness.fake_switch import FakeSwitches, trace
    from tests.helpers import FakeClock
    from tests.test_zero_config import deliver
    f = fattree_fabric(4, 2, 10)
    clock = FakeClock()
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, None, clock=clock, sleep=clock.sleep, link_gbps=f.link_gbps)
    start = clock.now
    for name, dpid in f.dpids.items():
        svc.switch_connected(dpid, {p: True for p in f.ports[name].values()})
    deliver(f, svc, sw)
    deliver(f, svc, sw)
    clock.now += 1.0  # the next tick: one LLDP round
    svc.tick()
    deliver(f, svc, sw)
    view = api.handle(svc, "GET", "/v1/fabric")[1]
    assert clock.now - start <= 2.0
    assert Clos.from_dict(view["declared"]).planes == f.planes
    assert view["ready"] and view["discovery"]["wiring_problems"] == []
    assert [e["cause"] for e in view["events"] if e["cause"].startswith("fabric")] == [
        "fabric discovered: 3 tiers: 4 pods, 8 leaves, 8 aggregation switches, 4 cores, "
        "0 hosts, 0 links down"]
    for dpid in f.dpids.values():
        assert sw.rules[dpid] == svc.reconciler.installed[dpid].rules
    for h, leaf in f.hosts.items():
        svc.packet_in(f.dpids[leaf], f.port(leaf, h), lldp.arp_request(
            f.host_mac[h], "10.255.0.1", sender_ip=f.host_ip[h]))
    view = api.handle(svc, "GET", "/v1/fabric")[1]
    assert view["declared"] == f.to_dict()
    hosts = ["h0_0", "h2_0", "h4_0", "h6_0"]
    code, doc = api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": "ip", "ranks": [f.host_ip[h] for h in hosts], "bytes": 1e6}).encode())
    assert code == 201, doc
    for r in doc["routes"]:
        path, reached, _ = trace(f, sw, r["src"], r["dst"])
        assert reached == r["dst"] and path == r["path"], (path, r["path"])
