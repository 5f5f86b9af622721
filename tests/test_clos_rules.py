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
from controller.planners.clos_plan import make_clos_plan
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
    plan = make_clos_plan(fab, [job], "auto").to_dict()
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
