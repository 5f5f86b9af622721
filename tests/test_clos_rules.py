"""Rules on three-tier fabrics (enforcement.clos_rules), traced through the fake OpenFlow
tables: unplanned traffic reaches every host over every ECMP bucket without valleys, also with
links and switches down; planned flows follow their planned path in flow and sr modes."""
import itertools
import random

import pytest

from controller.enforcement.clos_rules import clos_all_static, clos_flow_rules
from controller.enforcement.openflow import Message
from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.jobs import parse_job
from controller.planners.plan import make_plan
from emulation.harness.fake_switch import FakeSwitches, trace


def install(fabric, extra=(), ecmp="per-tier"):
    sw = FakeSwitches(fabric.dpids.values(), fabric)
    batches = {}
    for dpid, (rules, groups) in clos_all_static(fabric, ecmp).items():
        batches[dpid] = ([Message("group_add", group=g) for g in groups]
                         + [Message("flow_add", rule=r) for r in rules])
    for r in extra:
        batches.setdefault(r.dpid, []).append(Message("flow_add", rule=r))
    sw.install(batches)
    return sw


def wired(k=4, **down):
    doc = Clos.fat_tree(k).wire().to_dict()
    doc.update(down)
    return Clos.from_dict(doc)


def _up_down(fabric, path):
    tiers = [fabric.tier_of[s] for s in path]
    top = tiers.index(max(tiers))
    return tiers[:top + 1] == list(range(top + 1)) and tiers[top:] == list(range(top, -1, -1))


@pytest.mark.parametrize("ecmp, cores", [("per-tier", 4), ("polarised", 2)])
def test_one_flow_hash_reaches_every_core_only_per_tier(ecmp, cores):
    """The fake switch picks bucket ``hash mod buckets`` with one hash on every switch, as
    Open vSwitch hashes alike on every bridge: with one bucket per core the leaf's choice
    fixes the core; with a block per core (per-tier) every core is reached."""
    fab = wired()
    sw = install(fab, ecmp=ecmp)
    reached = {trace(fab, sw, "h0_0", "h4_0", bucket=b)[0][2] for b in range(16)}
    assert len(reached) == cores, reached


@pytest.mark.parametrize("down", [{}, {"down": [["l0", "a0_0"]]},
                                  {"down": [["a1_1", "c1_0"], ["l5", "a2_0"]]},
                                  {"down_switches": ["c0_0", "a3_1"]}])
def test_unplanned_traffic_reaches_every_host_on_every_bucket(down):
    fab = wired(**down)
    sw = install(fab)
    hosts = list(fab.host_leaves)
    for src, dst in itertools.permutations(hosts, 2):
        for bucket in range(4):
            path, reached, labels = trace(fab, sw, src, dst, bucket=bucket)
            assert reached == dst and labels == [], (src, dst, bucket, path)
            assert _up_down(fab, path), path
            for a, b in zip(path, path[1:]):
                lo, up = sorted((a, b), key=fab.tier_of.get)
                assert (lo, up) not in fab.down and a not in fab.down_switches


@pytest.mark.parametrize("mode", ["flow", "sr"])
def test_planned_flows_follow_their_path(mode):
    fab = wired(down=[["a0_0", "c0_1"]])
    rng = random.Random(1)
    hosts = list(fab.host_leaves)
    ranks = rng.sample(hosts, 12)
    job = parse_job({"id": "r", "collective": "ring_allreduce", "ranks": ranks, "bytes": 1e6,
                     "sport": 5000, "dport": 6000, "proto": "tcp"}, fab)
    plan = make_plan(fab, [job], "auto").to_dict()
    rules, paths = [], {}
    for flow, route in zip(job.flows(), plan["routes"]):
        path = route.get("path") or ([route["spine"]] if route.get("spine") else None)
        got = clos_flow_rules(fab, flow, path, mode, 1)
        if path:
            assert len(got) == (1 if mode == "sr" or len(path) == 3 else 2)
        rules += got
        paths[(flow.src, flow.dst)] = path
    sw = install(fab, rules)
    moved = 0
    for (src, dst), path in paths.items():
        for bucket in range(4):
            crossed, reached, labels = trace(fab, sw, src, dst, sport=5000, dport=6000,
                                             bucket=bucket)
            assert reached == dst and labels == []
            if path:
                assert crossed == path, (src, dst, crossed, path)
                moved += 1
    assert moved >= 4 * 8


def test_host_mode_holds_no_per_flow_entry_and_bad_paths_are_refused():
    fab = wired()
    job = parse_job({"id": "r", "collective": "ring_allreduce", "ranks": ["h0_0", "h4_0"],
                     "bytes": 1e6}, fab)
    flow = job.flows()[0]
    assert clos_flow_rules(fab, flow, ["l0", "a0_0", "c0_0", "a1_0", "l2"], "host", 1) == []
    with pytest.raises(InputError, match="4 switches"):
        clos_flow_rules(fab, flow, ["l0", "a0_0", "c0_0", "l2"], "flow", 1)


def test_wiring_round_trips_and_errors_name_the_switch():
    doc = Clos.fat_tree(4).wire().to_dict()
    assert Clos.from_dict(doc).to_dict() == doc
    del doc["ports"]["a1_1"]["c1_0"]
    with pytest.raises(InputError, match="a1_1 has no port number for c1_0"):
        Clos.from_dict(doc)


@pytest.mark.parametrize("fab", [Clos.leaf_spine(2, 4, 2, planes=2).wire(),
                                 Clos.fat_tree(4, 1, planes=2).wire()],
                         ids=["leaf-spine", "fat-tree"])
@pytest.mark.parametrize("mode", ["flow", "sr"])
def test_each_plane_carries_its_own_addresses_and_planned_flows(fab, mode):
    """Two planes, a host with one address per plane: no switch matches another plane's
    address; a packet sent on plane q (the host's interface to it, that plane's addresses)
    reaches its host inside plane q; a flow planned on plane 1 is matched on its plane-1 leaf
    with plane-1 port and addresses, and follows its path."""
    hosts = list(fab.host_leaves)
    job = parse_job({"id": "a2a", "flows": [  # an all-to-all: more than one plane carries
        {"src": a, "dst": b, "bytes": 1e6, "sport": 5000, "dport": 6000, "proto": "tcp"}
        for a, b in itertools.permutations(hosts, 2)]}, fab)
    plan = make_plan(fab, [job], "auto").to_dict()
    planes = {p.name: q for q, p in enumerate(fab.planes)}
    rules, paths = [], {}
    for flow, route in zip(job.flows(), plan["routes"]):
        q = planes[route["plane"]]
        path = route.get("path") or ([fab.host_leaves[flow.src][q], route["spine"],
                                      fab.host_leaves[flow.dst][q]] if route["spine"] else None)
        for r in clos_flow_rules(fab, flow, path, mode, 1):
            assert fab.plane_of[fab.switch_of_dpid[r.dpid]] == q
            assert r.match_dict()["ipv4_src"] == fab.ip_of(flow.src, q)
            if r.dpid == fab.dpids[path[0]]:
                assert r.match_dict()["in_port"] == fab.port(path[0], flow.src)
            rules.append(r)
        paths[(flow.src, flow.dst)] = (q, path)
    assert {q for q, path in paths.values() if path} == {0, 1}  # the plan uses both planes
    for dpid, (static, _groups) in clos_all_static(fab).items():
        q = fab.plane_of[fab.switch_of_dpid[dpid]]
        others = {a for h in hosts for r, a in enumerate(fab.host_ips[h]) if r != q}
        assert not {r.match_dict().get("ipv4_dst") for r in static} & others
    sw = install(fab, rules)
    for src, dst in itertools.permutations(hosts, 2):
        for q in range(2):
            crossed, reached, _ = trace(fab, sw, src, dst, plane=q)
            assert reached == dst and {fab.plane_of[s] for s in crossed} == {q}
    for (src, dst), (q, path) in paths.items():
        crossed, reached, labels = trace(fab, sw, src, dst, sport=5000, dport=6000, plane=q)
        assert reached == dst and labels == []
        if path:
            assert crossed == path, (src, dst, crossed, path)
