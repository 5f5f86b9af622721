"""Three tiers recognised from LLDP and hosts heard (``controller.discovery.tiers``)."""
import json

import pytest

from controller.discovery.tiers import recognise_clos
from controller.discovery.topology import Topology
from controller.model.clos import Clos, as_clos
from topologies.clos import fattree_fabric


def spines(fabric: Clos) -> list[str]:
    """The spines of a leaf-spine's one plane (its one pod's aggregation switches)."""
    return fabric.planes[0].aggs[0]


def observe(f, missing=(), extra=(), hosts=None, t=None):
    """What the shell feeds for the Mininet build of wired fabric ``f``: every switch with
    its ports up, LLDP both ways on every link but ``missing`` (lower, upper) pairs, the extra
    cables ((switch, port), (switch, port)), every host (or ``hosts``) heard once."""
    t = t or Topology()
    for sw in f.switches():
        ports = {p: True for p in f.ports[sw].values()}
        ports.update({p: True for (s, p), _b in extra if s == sw})
        ports.update({p: True for _a, (s, p) in extra if s == sw})
        t.switch_up(f.dpids[sw], ports, 0)
    links = [((lo, f.port(lo, up)), (up, f.port(up, lo))) for lo, up in f.links()
             if (lo, up) not in missing] + list(extra)
    for (a, pa), (b, pb) in links:
        t.link_seen(f.dpids[a], pa, f.dpids[b], pb, 0)
        t.link_seen(f.dpids[b], pb, f.dpids[a], pa, 0)
    for h in (f.hosts if hosts is None else hosts):
        leaf = f.hosts[h]
        t.host_seen(f.dpids[leaf], f.port(leaf, h), f.host_mac[h], f.host_ip[h], 0)
    return t


@pytest.mark.parametrize("k,hosts", [(4, 2), (4, 1), (6, 3)])
def test_an_emulated_fat_tree_comes_back_with_its_own_names(k, hosts):
    f = fattree_fabric(k, hosts)
    got, problems = recognise_clos(observe(f))
    assert problems == []
    assert got.to_dict() == f.to_dict()


def test_a_leaf_spine_is_left_to_the_two_tier_recognition():
    f = Clos.generate(2, 4, 2, 100, wiring=True)
    t = Topology()
    for sw in spines(f) + f.leaves:
        t.switch_up(f.dpids[sw], {p: True for p in f.ports[sw].values()}, 0)
    for leaf in f.leaves:
        for s in spines(f):
            a, b = (f.dpids[leaf], f.port(leaf, s)), (f.dpids[s], f.port(s, leaf))
            t.link_seen(*a, *b, 0)
            t.link_seen(*b, *a, 0)
    for h in f.hosts:
        t.host_seen(f.dpids[f.hosts[h]], f.port(f.hosts[h], h), f.host_mac[h], f.host_ip[h], 0)
    got, problems = recognise_clos(t)
    assert isinstance(got, Clos) and got.tiers == 2 and problems == []
    assert got.to_dict() == as_clos(f).to_dict()


def test_a_core_link_never_seen_is_down_and_named():
    f = fattree_fabric(4, 2)
    got, problems = recognise_clos(observe(f, missing={("a1_0", "c0_1")}))
    assert got.down == {("a1_0", "c0_1")}
    assert [(p["kind"], p["detail"], p["tiers"]) for p in problems] == [
        ("missing_link", "no link seen between aggregation switch a1_0 and core c0_1; marked "
         "down", ["aggregation switch", "core"])]
    assert got.ports == f.ports  # the ports that are up and face no switch are the link's


def test_a_cable_between_two_pods_is_reported_and_not_used():
    f = fattree_fabric(4, 2)
    spare = max(f.ports["a0_0"].values()) + 1, max(f.ports["a1_1"].values()) + 1
    got, problems = recognise_clos(observe(f, extra=[(("a0_0", spare[0]), ("a1_1", spare[1]))]))
    assert [p["kind"] for p in problems] == ["miswired_link"]
    assert "aggregation switch a0_0" in problems[0]["detail"]
    assert "aggregation switch a1_1" in problems[0]["detail"]
    assert problems[0]["tiers"] == ["aggregation switch", "aggregation switch"]
    assert "a1_1" not in got.ports["a0_0"] and got.down == set()


def test_a_leaf_whose_hosts_are_silent_is_still_a_leaf():
    f = fattree_fabric(4, 2)
    heard = [h for h in f.hosts if f.hosts[h] != "l5"]
    got, problems = recognise_clos(observe(f, hosts=heard))
    assert problems == []
    assert got.planes == f.planes and got.dpids == f.dpids
    assert sorted(got.hosts) == sorted(heard)


def test_a_core_that_left_shrinks_its_group():
    f = fattree_fabric(4, 2)
    t = observe(f)
    t.switch_down(f.dpids["c1_1"], 0)
    got, problems = recognise_clos(t)
    assert problems == []
    assert got.planes[0].cores == [["c0_0", "c0_1"], ["c1_0"]]


def test_a_host_heard_on_an_aggregation_switch_is_reported_and_left_out():
    f = fattree_fabric(4, 2)
    spare = max(f.ports["a2_1"].values()) + 1
    t = observe(f, extra=[])
    t.switch_up(f.dpids["a2_1"], {**{p: True for p in f.ports["a2_1"].values()}, spare: True}, 0)
    t.host_seen(f.dpids["a2_1"], spare, "02:00:00:00:99:01", "10.0.99.1", 0)
    got, problems = recognise_clos(t)
    assert [(p["kind"], p["switch"], p["port"]) for p in problems] == [
        ("host_on_spine", "a2_1", spare)]
    assert "10.0.99.1" not in got.host_ip.values()


def test_the_controller_finds_a_fat_tree_with_no_file_and_routes_across_pods():
    """Zero configuration on the fake switches (as tests/test_zero_config.py on a leaf-spine):
    LLDP and ARP give the fat-tree, every switch gets its full table, and a ring named by
    addresses across every pod is installed along its planned paths."""
    from controller.service import api
    from emulation.harness.fake_switch import trace
    from tests.test_zero_config import boot
    f = fattree_fabric(4, 2, 10)
    _, sw, svc = boot(f)
    view = api.handle(svc, "GET", "/v1/fabric")[1]
    assert view["declared"] == f.to_dict()
    assert view["ready"] and view["discovery"]["wiring_problems"] == []
    for dpid in f.dpids.values():
        assert sw.rules[dpid] == svc.reconciler.installed[dpid].rules
    hosts = ["h0_0", "h2_0", "h4_0", "h6_0"]  # one leaf per pod
    code, doc = api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": "ip", "ranks": [f.host_ip[h] for h in hosts], "bytes": 1e6}).encode())
    assert code == 201, doc
    assert len(doc["routes"]) == 4
    for r in doc["routes"]:
        path, reached, _ = trace(f, sw, r["src"], r["dst"])
        assert reached == r["dst"] and path == r["path"], (path, r["path"])


@pytest.mark.parametrize("gone", ["c1_0", "a2_1", "l3"])
def test_a_switch_that_leaves_stays_in_its_place_down_and_comes_back(gone):
    f = fattree_fabric(4, 2)
    t = observe(f)
    first, _ = recognise_clos(t)
    t.switch_down(f.dpids[gone], 1)
    got, problems = recognise_clos(t, previous=first)
    assert [(p["kind"], p["switch"]) for p in problems] == [("switch_down", gone)]
    assert got.planes == f.planes and got.ports == f.ports and got.host_ip == f.host_ip
    assert got.down == {link for link in f.links() if gone in link}
    assert got.down_switches == (set() if gone.startswith("l") else {gone})
    back = observe(f, t=None)
    again, problems = recognise_clos(back, previous=got)
    assert problems == [] and again.to_dict() == f.to_dict()


def test_a_declared_three_tier_fabric_is_checked_and_the_report_names_tiers():
    from controller.discovery.declared import check_declared
    f = fattree_fabric(4, 2)
    spare = max(f.ports["l0"].values()) + 1, max(f.ports["a1_0"].values()) + 1
    seen = observe(f, missing={("a1_0", "c0_1")}, extra=[(("l0", spare[0]), ("a1_0", spare[1]))])
    got = {p["kind"]: p["detail"] for p in check_declared(f, seen)}
    assert got == {
        "unexpected_link": f"leaf l0 port {spare[0]} is cabled to aggregation switch a1_0 port "
                           f"{spare[1]}, which is not declared",
        "missing_link": f"aggregation switch a1_0 port {f.ports['a1_0']['c0_1']} (up) should "
                        f"reach core c0_1 port {f.ports['c0_1']['a1_0']}; no probe seen"}


def test_a_declared_two_plane_fabric_is_checked_interface_by_interface():
    """Every host heard on each plane's leaf with that plane's MAC: nothing to report; a
    plane-1 interface heard on another port is a wrong port naming its host."""
    from controller.discovery.declared import check_declared
    f = Clos.leaf_spine(2, 2, 2, planes=2).wire()
    t = observe(f, hosts=[])
    for h, _, ip, mac, leaf in f.interfaces():
        t.host_seen(f.dpids[leaf], f.port(leaf, h), mac, ip, 0)
    assert check_declared(f, t) == []
    leaf = f.host_leaves["h0_0"][1]
    t.host_seen(f.dpids[leaf], f.port(leaf, "h0_1"), f.mac_of("h0_0", 1), f.ip_of("h0_0", 1), 1)
    got = [(p["kind"], p["detail"]) for p in check_declared(f, t)]
    assert got == [("wrong_port", f"host h0_0 ({f.mac_of('h0_0', 1)}) is declared on leaf "
                                  f"{leaf} port {f.port(leaf, 'h0_0')}, seen on leaf {leaf} "
                                  f"port {f.port(leaf, 'h0_1')}")], got


def test_a_leaf_with_no_uplink_seen_is_reported_not_dropped_silently():
    f = fattree_fabric(4, 2)
    got, problems = recognise_clos(observe(f, missing={("l0", "a0_0"), ("l0", "a0_1")}))
    assert len(got.leaves) == 7
    assert [(p["kind"], p["dpid"]) for p in problems] == [("switch_not_placed", f.dpids["l0"])]
