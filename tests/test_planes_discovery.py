"""Several planes recognised from LLDP and hosts heard (``controller.discovery.planes``), and
the controller finding a two-plane fabric with no file (fake switches)."""
import json

import pytest

from controller.discovery import lldp
from controller.discovery.planes import recognise_planes
from controller.discovery.tiers import recognise_clos
from controller.model.clos import Clos
from controller.service import api
from controller.service.route_service import RouteService
from emulation.harness.fake_switch import FakeSwitches, trace
from tests.helpers import FakeClock
from tests.test_clos_discovery import observe
from tests.test_zero_config import found_with_no_file


def observe_planes(f, missing=(), heard=None, t=None):
    """``observe`` with every host interface of every plane heard (or those in ``heard``:
    (host, plane) pairs)."""
    t = observe(f, missing=missing, hosts=[], t=t)
    for h, q, ip, mac, leaf in f.interfaces():
        if heard is None or (h, q) in heard:
            t.host_seen(f.dpids[leaf], f.port(leaf, h), mac, ip, 0)
    return t


def unlike_planes(link_gbps=100.0) -> Clos:
    """Two planes of different shapes: a k = 4 fat-tree (three tiers) and a leaf-spine of 3
    spines over the same 8 hosts, one per leaf (as a cluster grown plane by plane is)."""
    tree = Clos.fat_tree(4, 1, planes=2, link_gbps=link_gbps).to_dict()
    flat = {"name": "plane1", "spines": ["s0_p1", "s1_p1", "s2_p1"],
            "leaves": [f"l{i}_p1" for i in range(8)]}
    hosts = {h: [ls[0], ls[0].replace("_p0", "_p1")] for h, ls in tree["hosts"].items()}
    return Clos.from_dict({"planes": [tree["planes"][0], flat], "hosts": hosts,
                           "link_gbps": link_gbps})


SHAPES = {"leaf-spine": lambda: Clos.leaf_spine(2, 4, 1, planes=2),
          "leaf-spine, 3 planes": lambda: Clos.leaf_spine(2, 3, 2, planes=3),
          "fat-tree": lambda: Clos.fat_tree(4, 1, planes=2),
          "planes of different shapes": unlike_planes}


@pytest.mark.parametrize("shape", SHAPES)
def test_a_fabric_of_several_planes_comes_back_with_its_own_names(shape):
    f = SHAPES[shape]().wire()
    got, problems = recognise_planes(observe_planes(f))
    assert problems == []
    assert got.to_dict() == f.to_dict()


def test_one_plane_is_left_to_the_recognition_of_one_plane():
    f = Clos.fat_tree(4, 1).wire()
    t = observe(f)
    assert recognise_planes(t)[0].to_dict() == recognise_clos(t)[0].to_dict() == f.to_dict()


def test_an_interface_not_heard_leaves_its_host_out_and_names_the_address_to_probe():
    f = Clos.leaf_spine(2, 4, 1, planes=2).wire()
    heard = {(h, q) for h in f.host_leaves for q in (0, 1)} - {("h2_0", 1)}
    got, problems = recognise_planes(observe_planes(f, heard=heard))
    assert sorted(got.host_leaves) == ["h0_0", "h1_0", "h3_0"]
    assert got.planes == f.planes and got.dpids == f.dpids
    assert [(p["kind"], p["switch"], p["probe"]) for p in problems] == [
        ("host_missing_plane", "l2_p0", [f.ip_of("h2_0", 1)])]
    assert f.ip_of("h2_0", 1) in problems[0]["detail"]


def test_a_switch_that_leaves_a_plane_stays_in_its_place_down_and_comes_back():
    f = Clos.leaf_spine(2, 4, 1, planes=2).wire()
    t = observe_planes(f)
    first, _ = recognise_planes(t)
    t.switch_down(f.dpids["s1_p1"], 1)
    got, problems = recognise_planes(t, previous=first)
    assert [(p["kind"], p["switch"], p["plane"]) for p in problems] == [
        ("switch_down", "s1_p1", 1)]
    assert got.planes == f.planes and got.ports == f.ports and got.host_ips == f.host_ips
    assert got.down == {link for link in f.links() if "s1_p1" in link}
    again, problems = recognise_planes(observe_planes(f), previous=got)
    assert problems == [] and again.to_dict() == f.to_dict()


def test_a_plane_cut_in_two_stays_one_plane_with_its_links_down():
    """A single plane whose leaves lose their uplinks to different spines is two parts of
    the graph with hosts: still one plane (its last recognition had both), links down."""
    f = Clos.leaf_spine(2, 4, 1).wire()
    first, _ = recognise_clos(observe(f))
    cut = {("l0", "s1"), ("l1", "s1"), ("l2", "s0"), ("l3", "s0")}
    got, _problems = recognise_planes(observe(f, missing=cut), previous=first)
    assert got.planes == f.planes and got.down == cut  # 2 spines and 4 leaves, one plane


def test_planes_whose_host_parts_differ_are_not_joined():
    """The second plane's hosts in the first plane's network: no host part says which
    interfaces are one host, so only the first plane is used, and it is said."""
    f = Clos.leaf_spine(2, 2, 1, planes=2).wire()
    t = observe(f, hosts=[])
    for h, q, _ip, mac, leaf in f.interfaces():
        t.host_seen(f.dpids[leaf], f.port(leaf, h), mac, f"10.0.0.{1 + 2 * q + int(h[1])}", 0)
    got, problems = recognise_planes(t)
    assert [p["kind"] for p in problems] == ["planes_not_joined"]
    assert set(got.switch_of_dpid) == {f.dpids[s] for s in f.planes[0].switches()}


def test_a_cable_between_planes_is_reported_and_not_used():
    f = Clos.leaf_spine(2, 2, 1, planes=2).wire()
    first, _ = recognise_planes(observe_planes(f))
    spare = max(f.ports["l0_p0"].values()) + 1, max(f.ports["s0_p1"].values()) + 1
    t = observe_planes(f)
    t.switch_up(f.dpids["l0_p0"], {**{p: True for p in f.ports["l0_p0"].values()},
                                    spare[0]: True}, 1)
    t.switch_up(f.dpids["s0_p1"], {**{p: True for p in f.ports["s0_p1"].values()},
                                    spare[1]: True}, 1)
    a, b = (f.dpids["l0_p0"], spare[0]), (f.dpids["s0_p1"], spare[1])
    t.link_seen(*a, *b, 1), t.link_seen(*b, *a, 1)
    got, problems = recognise_planes(t, previous=first)
    assert [(p["kind"], p["switch"]) for p in problems] == [("cable_between_planes", "l0_p0")]
    assert got.to_dict() == f.to_dict()


@pytest.mark.parametrize("make", [lambda: Clos.leaf_spine(2, 4, 1, link_gbps=0.01, planes=2),
                                  lambda: unlike_planes(0.01)], ids=["alike", "unlike"])
def test_the_controller_finds_two_planes_with_no_file_and_routes_over_both(make):
    """Zero configuration on the fake switches: LLDP and ARP (every interface) give the
    two-plane fabric with its own names (planes alike, or a fat-tree beside a leaf-spine);
    an all-to-all is planned over both planes and each route's packets, sent with the
    route's plane addresses, follow it."""
    f = make().wire()
    svc, sw, _clock = found_with_no_file(f, 0.01)
    view = api.handle(svc, "GET", "/v1/fabric")[1]
    assert view["declared"] == f.to_dict()
    assert view["ready"] and view["discovery"]["wiring_problems"] == []
    alltoall_follows_its_routes(f, svc, sw)


def alltoall_follows_its_routes(f, svc, sw):
    """An all-to-all posted is planned over every plane and each route's packets, sent with
    its plane's addresses (and its source port in host mode), follow it."""
    hosts = sorted(f.host_leaves)
    flows = [{"src": a, "dst": b, "bytes": 1e6} for a in hosts for b in hosts if a != b]
    code, doc = api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": "a2a", "flows": flows}).encode())
    assert code == 201, doc
    planes = {p.name: q for q, p in enumerate(f.planes)}
    assert {r["plane"] for r in doc["routes"]} == set(planes)
    for r in doc["routes"]:
        path, reached, _ = trace(f, sw, r["src"], r["dst"], sport=r.get("sport") or 1234,
                                 plane=planes[r["plane"]])
        assert reached == r["dst"] and path == r["path"], (path, r)


@pytest.mark.parametrize("mode", ["flow", "sr", "host"])
def test_planes_of_different_shapes_are_served_in_every_mode(mode):
    """A fat-tree plane beside a leaf-spine plane, declared: an all-to-all uses both and
    every route's packets follow it (host mode: with the route's source port)."""
    f = unlike_planes(0.01).wire()
    clock = FakeClock()
    sw = FakeSwitches(f.dpids.values(), fabric=f)
    svc = RouteService(sw, f, clock=clock, sleep=clock.sleep, mode=mode)
    for name, dpid in f.dpids.items():
        svc.switch_connected(dpid, {p: True for p in f.ports[name].values()})
    alltoall_follows_its_routes(f, svc, sw)


def test_the_finder_probes_the_address_a_host_misses_on_a_plane():
    """A host heard on plane 0 only: the finder sends ARP requests for its plane-1 address
    (the host part it has on plane 0), and once it answers it is placed on both planes."""
    from controller.discovery.finder import PROBE_MAC, FabricFinder
    f = Clos.leaf_spine(2, 2, 1, planes=2).wire()
    heard = {(h, q) for h in f.host_leaves for q in (0, 1)} - {("h1_0", 1)}
    finder = FabricFinder()
    finder.topology = observe_planes(f, heard=heard)
    got = finder.settle(10.0, force=True)
    assert sorted(got.host_leaves) == ["h0_0"]
    asked = [lldp.parse_arp(frame) for _d, _p, frame in finder.take_frames()]
    assert asked and all(a is not None and a[3] == f.ip_of("h1_0", 1) for a in asked)
    leaf = f.host_leaves["h1_0"][1]
    finder.packet_in(f.dpids[leaf], f.port(leaf, "h1_0"),
                     lldp.arp_reply(f.mac_of("h1_0", 1), f.ip_of("h1_0", 1), PROBE_MAC,
                                    "0.0.0.0"), 11.0)
    again = finder.settle(11.0, force=True)
    assert again.to_dict() == f.to_dict()


def test_a_plane_where_no_host_spoke_is_left_out_until_one_does():
    """Plane 1's switches are cabled, but none of its hosts spoke: the first plane alone is
    the fabric (no switch of plane 1 in it) and plane 1 is reported; once one host speaks
    there, both planes are recognised and the silent interfaces are asked for by address."""
    f = Clos.leaf_spine(2, 4, 1, planes=2).wire()
    t = observe_planes(f, heard={(h, 0) for h in f.host_leaves})
    first, problems = recognise_planes(t)
    plane0 = {f.dpids[s] for s in f.planes[0].switches()}
    assert set(first.switch_of_dpid) == plane0 and first.down == set()
    assert [p["kind"] for p in problems] == ["plane_without_hosts"]
    h = "h1_0"
    leaf = f.host_leaves[h][1]
    t.host_seen(f.dpids[leaf], f.port(leaf, h), f.mac_of(h, 1), f.ip_of(h, 1), 1)
    got, problems = recognise_planes(t, previous=first)
    assert [p.leaves for p in got.planes] == [p.leaves for p in f.planes]
    assert sorted(got.host_leaves) == [h]
    assert sorted(ip for p in problems for ip in p["probe"]) == sorted(
        f.ip_of(x, 1) for x in f.host_leaves if x != h)


def test_a_fabric_before_any_host_spoke_is_recognised_as_one_plane_as_before():
    f = Clos.leaf_spine(2, 4, 1).wire()
    t = observe(f, hosts=[])
    got, problems = recognise_planes(t)
    assert got.to_dict() == recognise_clos(t)[0].to_dict()
    assert len(got.leaves) == 4 and problems == []


@pytest.mark.parametrize("fabric,gone", [(lambda: Clos.fat_tree(4, 2).wire(), "c1_0"),
                                         (lambda: Clos.fat_tree(4, 2).wire(), "l3"),
                                         (lambda: Clos.leaf_spine(2, 4, 1, planes=2).wire(),
                                          "s1_p1")])
def test_a_switch_that_left_stays_in_place_over_later_recognitions(fabric, gone):
    """Recognised again and again while it is away, the switch keeps its place and names."""
    f = fabric()
    t = observe_planes(f)
    got, _ = recognise_planes(t)
    t.switch_down(f.dpids[gone], 1)
    for _ in range(3):
        got, problems = recognise_planes(t, previous=got)
        assert [(p["kind"], p["switch"]) for p in problems] == [("switch_down", gone)]
        assert got.planes == f.planes and got.ports == f.ports


def test_hosts_of_other_leaves_are_not_joined_while_few_have_spoken():
    """Two hosts of leaf 0 heard on plane 0, a host of leaf 1 on plane 1: none is the same
    host, and each is asked for at its address on the other plane."""
    f = Clos.leaf_spine(2, 4, 2, planes=2).wire()
    heard = {("h0_0", 0), ("h0_1", 0), ("h1_0", 1)}
    got, problems = recognise_planes(observe_planes(f, heard=heard))
    assert got.host_leaves == {}
    assert sorted(ip for p in problems for ip in p["probe"]) == sorted(
        [f.ip_of("h0_0", 1), f.ip_of("h0_1", 1), f.ip_of("h1_0", 0)])


def test_the_probes_for_missing_interfaces_take_turns_within_a_budget(monkeypatch):
    """Many hosts heard on plane 0 only: each settle sends at most the budget, and every
    missing address is asked for within a few rounds."""
    from controller.discovery import finder as finder_module
    monkeypatch.setattr(finder_module, "MISSING_FRAMES", 64)
    f = Clos.leaf_spine(2, 4, 4, planes=2).wire()
    heard = {(h, 0) for h in f.host_leaves} | {("h0_0", 1)}
    finder = finder_module.FabricFinder()
    finder.topology = observe_planes(f, heard=heard)
    asked = set()
    for t in range(8):
        finder.settle(10.0 + t, force=True)
        frames = finder.take_frames()
        assert len(frames) <= 64
        asked |= {lldp.parse_arp(frame)[3] for _d, _p, frame in frames}
    assert asked == {f.ip_of(h, 1) for h in f.host_leaves if h != "h0_0"}
