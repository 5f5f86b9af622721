"""The controller on an emulated k = 4 fat-tree (20 Open vSwitch switches, 16 hosts, 20 Mbit/s,
``topologies.clos.FatTreeTopo``) with real TCP traffic: a ring crossing every pod is planned
over the three tiers, and every directed switch link carries what the plan puts on it (port
counters, within 5% of the payload), in flow, sr and host modes (the senders bind the source
ports host mode chose); a restart from the state file sends nothing to any switch; a core
link taken down moves the flows that crossed it, and the traffic follows; a leaf link taken
down leaves every pair of hosts answering through its degraded class; layer 2 follows a POST
off the request path, and the traffic with it, and again after the jobs were deleted and
posted again."""

import ipaddress
import random

import pytest

from controller.enforcement.clos_hostmode import clos_host_static_rules
from controller.enforcement.clos_rules import clos_static_rules
from controller.enforcement.openflow import COOKIE_JOB, COOKIE_OWNER_MASK, COOKIE_STATIC
from controller.enforcement.rules import T_DELIVER
from controller.model.prefixes import dst_prefixes
from emulation.harness import fabricnet, ovs
from emulation.harness.session import Session
from emulation.harness.transfers import planned_links, step
from tests import integration
from tests.clos_checks import CROSS_POD_RING
from tests.integration import require_root_and_ovs, restart_changes_nothing

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

BW = 20  # Mbit/s
PAYLOAD = 3_000_000  # bytes per flow
RING = CROSS_POD_RING


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    require_root_and_ovs()
    with Session.fat_tree(4, 2, BW, str(tmp_path_factory.mktemp("fattree")), state=True) as s:
        yield s


def carried_as_planned(emu, routes) -> dict:
    return integration.carried_as_planned(emu.net, emu.fabric, routes, PAYLOAD)


@pytest.mark.parametrize("mode", ["flow", "sr", "host"])
def test_a_ring_across_pods_carries_its_bytes_on_its_planned_links(emu, mode):
    job = {"id": f"ring-{mode}", "collective": "ring_allreduce", "ranks": RING,
           "bytes": 4e6, "mode": mode}
    code, doc = emu.ctl.rest("POST", "/v1/jobs", job)
    assert code == 201, doc
    try:
        view = emu.ctl.rest("GET", f"/v1/jobs/{job['id']}")[1]
        routes = view["routes"]
        assert len(routes) == 8 and all(len(r["path"]) == 5 for r in routes)
        assert max(planned_links(routes).values()) == 1  # every flow on links of its own
        if mode == "host":  # the hosts steer by source port: no switch holds a job entry
            assert all(r["sport"] for r in routes)
            for sw in emu.fabric.switches():
                entries = ovs.dump_flows(sw)
                assert entries and all(e["cookie"] == COOKIE_STATIC for e in entries), sw
                want = (len(clos_static_rules(emu.fabric, sw, labels=False)[0])
                        + len(clos_host_static_rules(emu.fabric, sw)) + 1)  # + the echo
                assert len(entries) == want, (sw, len(entries), want)
        carried_as_planned(emu, routes)
        links = emu.ctl.rest("GET", "/v1/links")[1]
        assert links["summary"]["max_link_load"] == 1.0
    finally:
        emu.ctl.rest("DELETE", f"/v1/jobs/{job['id']}")


def test_a_core_link_down_moves_its_flows_and_traffic_follows(emu):
    job = {"id": "fail", "collective": "ring_allreduce", "ranks": RING, "bytes": 4e6}
    assert emu.ctl.rest("POST", "/v1/jobs", job)[0] == 201
    f = emu.fabric
    try:
        first = emu.ctl.rest("GET", "/v1/jobs/fail")[1]["routes"]
        agg, core = first[0]["path"][1], first[0]["path"][2]
        emu.net.configLinkStatus(agg, core, "down")

        def moved():
            routes = emu.ctl.rest("GET", "/v1/jobs/fail")[1]["routes"]
            return routes if all((agg, core) not in zip(r["path"], r["path"][1:])
                                 for r in routes) else None
        routes = fabricnet.wait_until(moved, 15, what="the flows to leave the link down")
        got = carried_as_planned(emu, routes)
        assert got[f"{agg}->{core}"] == 0
        view = emu.ctl.rest("GET", "/v1/fabric")[1]
        assert f"{agg}-{core}" in view["links_down"]
    finally:
        emu.net.configLinkStatus(agg, core, "up")
        emu.ctl.rest("DELETE", "/v1/jobs/fail")
    fabricnet.wait_until(lambda: not emu.ctl.rest("GET", "/v1/fabric")[1]["links_down"], 15,
                         what="the link back up")
    assert f.dpids  # the fabric the session built is the one the controller serves


def test_a_leaf_link_down_keeps_every_pair_answering_through_its_class(emu):
    """l0-a0_0 down: l1, in l0's pod, may no longer send l0's traffic up a0_0. It matches its
    pod's prefix to the class's group, one priority below the per-leaf classes
    (``DstPrefixes.of_classes``: its own hosts are matched above anyway); the leaves of other
    pods match l0's own prefix. Unplanned traffic between every pair still answers."""
    f, link = emu.fabric, ("l0", "a0_0")
    pod = str(ipaddress.ip_network("/".join(dst_prefixes(f, "l1").pod[0][0])))

    def down():
        return {tuple(x.split("-")) for x in emu.ctl.rest("GET", "/v1/fabric")[1]["links_down"]}
    emu.net.configLinkStatus(*link, "down")
    try:
        fabricnet.wait_until(lambda: link in down(), 15, what="the link down")

        def installed():
            return {(e["priority"], e["match"].get("nw_dst")) for e in ovs.dump_flows("l1")
                    if e["table"] == T_DELIVER and e["priority"] in (11, 12)} or None
        assert fabricnet.wait_until(installed, 15, what="l1's class") == {(11, pod)}
        assert fabricnet.pingall(emu.net, timeout=2) == 0.0
    finally:
        emu.net.configLinkStatus(*link, "up")
    fabricnet.wait_until(lambda: not down(), 15, what="the link back up")


def test_a_restart_changes_no_entry_at_any_tier(emu):
    """A ring in flow mode and one in host mode; the controller restarts from its state file:
    it sends no flow or group message, every entry of the 20 switches keeps ageing, and the
    host-mode ring keeps its paths and source ports (learned again by probes)."""
    jobs = [{"id": "rs-flow", "collective": "ring_allreduce", "ranks": RING[:4], "bytes": 4e6},
            {"id": "rs-host", "collective": "ring_allreduce", "ranks": RING[4:], "bytes": 4e6,
             "mode": "host"}]
    for job in jobs:
        assert emu.ctl.rest("POST", "/v1/jobs", job)[0] == 201
    try:
        routes = {j["id"]: emu.ctl.rest("GET", f"/v1/jobs/{j['id']}")[1]["routes"] for j in jobs}
        restart_changes_nothing(emu)
        for j in jobs:
            again = fabricnet.wait_until(
                lambda jid=j["id"]: (lambda r: r if all(x.get("sport", 1) for x in r) else None)(
                    emu.ctl.rest("GET", f"/v1/jobs/{jid}")[1]["routes"]), 15,
                what="the host-mode ports placed again")
            assert [(r["src"], r["dst"], r["path"], r.get("sport")) for r in again] == \
                [(r["src"], r["dst"], r["path"], r.get("sport")) for r in routes[j["id"]]]
    finally:
        for job in jobs:
            emu.ctl.rest("DELETE", f"/v1/jobs/{job['id']}")


@pytest.mark.extended  # make bench: benchmarks.fattree measures the hashed paths
@pytest.mark.parametrize("ecmp", ["per-tier", "polarised"])
def test_hashed_paths_with_no_job_use_the_cores_the_hashing_allows(emu, ecmp):
    """With no job, unplanned traffic follows the select groups, which Open vSwitch hashes
    alike on every bridge. ``polarised`` (one bucket per core): a leaf's choice of aggregation
    slot fixes the aggregation switch's choice of core, so pod-crossing traffic reaches only
    k/2 of the (k/2)^2 cores (the planners' ``ecmp-polarised``). ``per-tier`` (the default: a
    block of buckets per core) decorrelates the two choices and every core is used (the
    planners' ``ecmp``)."""
    f = emu.fabric
    hosts = list(f.host_leaves)
    pod = {leaf: p for leaf, p in zip(f.planes[0].leaves, f.planes[0].pod_of_leaf)}
    pairs = [(a, b) for a in hosts for b in hosts if pod[f.hosts[a]] != pod[f.hosts[b]]]
    routes = [{"src": a, "dst": b} for a, b in random.Random(1).sample(pairs, 12)]
    if ecmp != "per-tier":
        emu.restart_controller(["--mlroute-ecmp", ecmp])
    try:
        _, got = step(emu.net, f, routes, PAYLOAD, port=5501 if ecmp == "per-tier" else 5521)
    finally:
        if ecmp != "per-tier":
            emu.restart_controller([])
    up = [link.split("->") for link in got]
    cores = {b for a, b in up if f.tier_of[a] == 1 and f.tier_of[b] == 2
             and got[f"{a}->{b}"] > PAYLOAD / 2}
    if ecmp == "polarised":
        assert 0 < len(cores) <= 2, cores  # at most k/2 of the 4 cores
    else:
        assert len(cores) > 2, cores


# posted one by one on this k = 4 fat-tree, two rings whose layer-1 routes leave 6 directed
# links at the max; the off-path stage (layer 2 from the routes in force) leaves 2, moving 3
# flows (the same posts on fake switches: tests/test_clos_offpath.py)
OFF_PATH_RINGS = [["h1_0", "h2_0", "h0_1", "h3_1", "h6_0", "h5_1", "h3_0", "h1_1"],
                  ["h7_1", "h0_0", "h6_1", "h3_0"]]


def test_layer2_follows_a_post_off_the_request_path_and_the_traffic_with_it(emu):
    jobs = [{"id": f"layer2-{k}", "collective": "ring_allreduce", "ranks": ranks, "bytes": 4e6,
             "algorithm": "auto", "objective": "flows"}
            for k, ranks in enumerate(OFF_PATH_RINGS)]
    cause = "off-path planning found a better routing"
    try:
        post_and_follow(emu, jobs, cause)
    finally:
        for job in jobs:
            emu.ctl.rest("DELETE", f"/v1/jobs/{job['id']}")


def post_and_follow(emu, jobs: list[dict], cause: str) -> dict:
    """Post ``jobs`` one by one, wait for the off-path stage's event (15 s), check that it
    left fewer links at the max and the traffic follows its routes; the event. Events are
    told apart by time (``/v1/fabric`` keeps the last ten only)."""
    def newest() -> dict | None:
        found = [e for e in emu.ctl.rest("GET", "/v1/fabric")[1]["events"]
                 if e["cause"] == cause]
        return found[-1] if found else None
    before = newest()
    for job in jobs:
        code, doc = emu.ctl.rest("POST", "/v1/jobs", job)
        assert code == 201, doc
    event = fabricnet.wait_until(
        lambda: (lambda e: e if e is not None and (before is None or e["time"] > before["time"])
                 else None)(newest()), 15, what="the off-path stage's routing")
    assert event["links_at_max_after"] < event["links_at_max_before"]
    assert event["max_link_load_after"] == event["max_link_load_before"]
    summary = emu.ctl.rest("GET", "/v1/links")[1]["summary"]
    assert summary["links_at_max"] == event["links_at_max_after"]
    routes = [r for job in jobs for r in emu.ctl.rest("GET", f"/v1/jobs/{job['id']}")[1][
        "routes"] if "path" in r]  # the flows that leave their leaf
    carried_as_planned(emu, routes)  # the switches carry the routes the stage moved
    return event


def job_entries(emu) -> int:
    """Job entries (a job owns the cookie) on every switch of the fabric."""
    return sum(1 for sw in emu.net.switches for f in ovs.dump_flows(sw.name)
               if f["cookie"] & COOKIE_OWNER_MASK == COOKIE_JOB)


def test_the_off_path_stage_follows_a_post_after_a_delete_too(emu):
    """A user's life on a cold controller: post, the off-path stage, delete (every job entry
    gone from every switch, no link loaded), the same jobs posted again: the off-path stage
    improves them again, and the traffic follows."""
    cause = "off-path planning found a better routing"
    jobs = [{"id": f"again-{k}", "collective": "ring_allreduce", "ranks": ranks, "bytes": 4e6,
             "algorithm": "auto", "objective": "flows"}
            for k, ranks in enumerate(OFF_PATH_RINGS)]
    emu.restart_controller([])  # cold: a controller that has seen no job since it started
    try:
        post_and_follow(emu, jobs, cause)
        for job in jobs:
            code, doc = emu.ctl.rest("DELETE", f"/v1/jobs/{job['id']}")
            assert code in (200, 204), doc
            assert emu.ctl.rest("GET", f"/v1/jobs/{job['id']}")[0] == 404
        fabricnet.wait_until(lambda: job_entries(emu) == 0, 10, what="the jobs' entries removed")
        assert emu.ctl.rest("GET", "/v1/links")[1]["summary"]["max_link_load"] == 0
        post_and_follow(emu, jobs, cause)
    finally:
        for job in jobs:
            emu.ctl.rest("DELETE", f"/v1/jobs/{job['id']}")
