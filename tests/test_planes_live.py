"""The controller on an emulated leaf-spine of two planes (``topologies.clos.PlanesTopo``: 2
planes x 2 spines x 4 leaves, one host per leaf with one interface per plane, 12 Open vSwitch
switches, 20 Mbit/s) with real TCP traffic: an all-to-all that needs both planes is planned
over them, each route names its plane and the addresses its ends use there, the senders
connect to those addresses, and every directed switch link carries what the plan puts on it
(port counters, within 5% of the payload), in flow, sr and host modes; hosts reach each other
on both planes; a restart from the state file sends nothing to any switch; a job declared by
its members whose ranks send on plane 1 is learned and planned on plane 1, with iperf3 and with
real PyTorch gloo and Open MPI rings bound to the hosts' plane-1 interfaces."""

import itertools
import statistics

import pytest

from emulation.harness import collectives, fabricnet, ovs
from emulation.harness.session import Session
from tests.integration import (
    EXTENDED,
    carried_as_planned,
    ext,
    iperf_ring,
    require_root_and_ovs,
    restart_changes_nothing,
)
from tests.test_learning_live import is_learned, wait_matrix

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

BW = 20  # Mbit/s
PAYLOAD = 2_000_000  # bytes per flow


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    require_root_and_ovs()
    with Session.planes(2, 2, 4, 1, BW, str(tmp_path_factory.mktemp("planes")),
                        state=True) as s:
        yield s


def alltoall(emu, jid, mode):
    hosts = sorted(emu.fabric.host_leaves)
    return {"id": jid, "mode": mode, "flows": [
        {"src": a, "dst": b, "bytes": 4e6}
        for a, b in itertools.permutations(hosts, 2)]}


def test_hosts_reach_each_other_on_both_planes(emu):
    f = emu.fabric
    pairs = [(a, f.ip_of(b, q)) for a, b in itertools.permutations(sorted(f.host_leaves), 2)
             for q in range(2)]
    assert fabricnet.ping_pairs(emu.net, pairs, 2) == []


@pytest.mark.parametrize("mode", ["flow", ext("sr"), ext("host")])
def test_an_alltoall_over_two_planes_carries_its_bytes_on_its_planned_links(emu, mode):
    f = emu.fabric
    job = alltoall(emu, f"a2a-{mode}", mode)
    code, doc = emu.ctl.rest("POST", "/v1/jobs", job)
    assert code == 201, doc
    try:
        routes = emu.ctl.rest("GET", f"/v1/jobs/{job['id']}")[1]["routes"]
        assert len(routes) == 12 and all(len(r["path"]) == 3 for r in routes)
        planes = {p.name: q for q, p in enumerate(f.planes)}
        for r in routes:
            q = planes[r["plane"]]
            assert {f.plane_of[s] for s in r["path"]} == {q}
            assert (r["src_ip"], r["dst_ip"]) == (f.ip_of(r["src"], q), f.ip_of(r["dst"], q))
        assert {r["plane"] for r in routes} == set(planes)  # 3 flows a host: both planes
        if mode == "host":
            assert all(r["sport"] for r in routes)
        got = carried_as_planned(emu.net, f, routes, PAYLOAD)
        for q in range(2):  # both planes carried traffic
            assert any(n > PAYLOAD / 2 for link, n in got.items()
                       if f.plane_of[link.split("->")[0]] == q)
    finally:
        emu.ctl.rest("DELETE", f"/v1/jobs/{job['id']}")


def test_a_restart_changes_no_entry_on_either_plane(emu):
    job = alltoall(emu, "restart", "flow")
    assert emu.ctl.rest("POST", "/v1/jobs", job)[0] == 201
    try:
        def paths():
            return [(r["src"], r["dst"], r["plane"], r["path"])
                    for r in emu.ctl.rest("GET", "/v1/jobs/restart")[1]["routes"]]
        routes = paths()
        restart_changes_nothing(emu)
        assert paths() == routes
    finally:
        emu.ctl.rest("DELETE", "/v1/jobs/restart")


def test_a_ring_a_framework_runs_on_plane_1_is_learned_and_planned_there(emu):
    """A job declared by its members (by their first-plane addresses) whose ranks send to
    each other on plane 1, as a framework bound to the hosts' second interfaces does: it is
    learned, every learned flow is planned on plane 1 with plane-1 addresses, and the learned
    entries of the plane-1 leaves carry the traffic."""
    f = emu.fabric
    ring = sorted(f.host_leaves)
    code, doc = emu.ctl.rest("POST", "/v1/jobs", {"id": "p1", "members": [
        f.ip_of(h, 0) for h in ring]})
    assert code == 201 and doc["matrix"] == "learning", doc
    try:
        iperf_ring(emu.net, f, ring, 12, plane=1, until=lambda: is_learned(emu, "p1"))
        doc = wait_matrix(emu, "p1", "learned", 10)
        assert doc["matrix"] == "learned", doc
        routes = doc["routes"]
        assert {(r["src"], r["dst"]) for r in routes} == {
            (h, ring[i - 1]) for i, h in enumerate(ring)}
        assert {r["plane"] for r in routes} == {f.planes[1].name}, routes
        assert all((r["src_ip"], r["dst_ip"]) == (f.ip_of(r["src"], 1), f.ip_of(r["dst"], 1))
                   for r in routes)
        leaves = f.planes[1].leaves
        iperf_ring(emu.net, f, ring, 3, plane=1)
        ovs.settle_counters(leaves)
        hits = [e for leaf in leaves for e in ovs.dump_flows(leaf, None)
                if e.get("cookie", 0) and e.get("n_bytes", 0) > 0 and "nw_src" in e["match"]]
        assert len(hits) >= len(ring), hits
    finally:
        emu.ctl.rest("DELETE", "/v1/jobs/p1")


@EXTENDED  # make test: the ring a framework runs on plane 1, above
@pytest.mark.parametrize("library", collectives.LIBRARIES)
def test_a_ring_bound_to_plane_1_is_learned_and_runs_at_line_rate(emu, library):
    """Real PyTorch gloo (GLOO_SOCKET_IFNAME: each host's plane-1 interface) and Open MPI
    (``btl_tcp_if_include``: plane 1's network), 4 ranks one per leaf, declared by its
    members: after learning, every flow of the ring is planned on plane 1 (left to choose,
    the planner spreads 4 flows over both planes), the traffic stays on plane 1, the sums
    are exact and the All-Reduce near the line rate."""
    why = collectives.missing(library)
    if why:
        pytest.skip(why)
    f = emu.fabric
    hosts = sorted(f.host_leaves)
    res = collectives.members_only(emu, library, hosts, mib=2, iters=3, plane=1)
    assert res["sums_ok"], res["logs"]
    routes = res["job"]["view"]["routes"]
    assert len(routes) == len(hosts) and {r["plane"] for r in routes} == {f.planes[1].name}
    plane0 = sum(n for link, n in res["uplinks"].items() if f.plane_of[link.split("->")[0]] == 0)
    assert plane0 < 0.02 * sum(res["uplinks"].values()), res["uplinks"]
    ideal = collectives.ideal_s(len(hosts), 2, BW)
    assert statistics.median(res["times"]) < 1.35 * ideal, (res["times"], ideal)
