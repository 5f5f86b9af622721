"""The controller on an emulated leaf-spine whose leaf-spine pairs are bundles of 2 links
(``topologies.clos.BundlesTopo``: 2 spines x 4 leaves, one host per leaf, 20 Mbit/s) with
real TCP traffic: declared with its bundles, each member a link of its own; an all-to-all
in flow, sr and host modes carries its bytes on its planned member of every bundle (port
counters, within 5% of the payload); a split job's parts each on theirs; a member taken down
is avoided; a restart from the state file sends nothing."""

import itertools

import pytest

from emulation.harness.fabricnet import wait_until
from emulation.harness.session import Session
from tests.integration import carried_as_planned, ext, require_root_and_ovs, restart_changes_nothing
from topologies.clos import planes_fabric

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

BW = 20  # Mbit/s
PAYLOAD = 2_000_000  # bytes per flow


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    require_root_and_ovs()
    with Session(0, 0, 0, BW, str(tmp_path_factory.mktemp("bundles")), state=True,
                 clos=planes_fabric(1, 2, 4, 1, BW, bundle=2)) as s:
        yield s


def alltoall(emu, jid, mode="flow"):
    hosts = sorted(emu.fabric.host_leaves)
    return {"id": jid, "mode": mode, "flows": [{"src": a, "dst": b, "bytes": 4e6}
                                               for a, b in itertools.permutations(hosts, 2)]}


def test_the_bundles_are_declared_as_wired(emu):
    doc = emu.ctl.rest("GET", "/v1/fabric")[1]
    assert doc["ready"] and doc["declared"]["bundle"]["leaf"] == 2, doc["declared"]
    links = {x["link"] for x in emu.ctl.rest("GET", "/v1/links")[1]["links"]}
    assert {"l0->s0", "l0->s0#1", "s1->l3#1"} <= links, sorted(links)


@pytest.mark.parametrize("mode", ["flow", ext("sr"), ext("host")])
def test_an_alltoall_carries_its_bytes_on_its_planned_members(emu, mode):
    f = emu.fabric
    code, doc = emu.ctl.rest("POST", "/v1/jobs", alltoall(emu, "a2a", mode))
    assert code == 201, doc
    try:
        routes = emu.ctl.rest("GET", "/v1/jobs/a2a")[1]["routes"]
        assert len(routes) == 12 and all(len(r["members"]) == 2 for r in routes)
        got = carried_as_planned(emu.net, f, routes, PAYLOAD)
        # 12 flows over 16 uplink members and 16 downlink members: both members of some
        # bundle carry a flow, so the member choice is enforced, not left to a hash
        used = {link for link, n in got.items() if n > PAYLOAD / 2}
        assert any(link.endswith("#1") and link[:-2] in used for link in used), sorted(used)
    finally:
        emu.ctl.rest("DELETE", "/v1/jobs/a2a")


@pytest.mark.parametrize("mode", ["flow", ext("sr"), ext("host")])
def test_a_split_jobs_parts_carry_their_bytes_on_their_members(emu, mode):
    """Five flows out of h0_0 over l0's four uplink members: unsplit, some member carries 2;
    split, 1.25. Each part is a connection of its own source port (the flow's + i) and
    carries the payload on its own path and members."""
    dsts = ["h1_0", "h2_0", "h3_0", "h1_0", "h2_0"]
    job = {"id": "cut", "mode": mode, "algorithm": "split",
           "flows": [{"src": "h0_0", "dst": d, "bytes": 4e6, "sport": 41000 + 1000 * i}
                     for i, d in enumerate(dsts)]}
    code, doc = emu.ctl.rest("POST", "/v1/jobs", job)
    assert code == 201, doc
    try:
        routes = emu.ctl.rest("GET", "/v1/jobs/cut")[1]["routes"]
        parts = [{"src": r["src"], "dst": r["dst"], **p} for r in routes
                 for p in (r.get("split") or [r])]
        assert len(parts) > len(routes), routes  # some flow is split
        assert len({p["sport"] for p in parts}) == len(parts)
        carried_as_planned(emu.net, emu.fabric, parts, PAYLOAD)
    finally:
        emu.ctl.rest("DELETE", "/v1/jobs/cut")


def test_a_member_down_is_avoided_and_its_twin_carries_the_flows(emu):
    f = emu.fabric
    port = f.ports_to("l0", "s0")[1]
    intf = emu.net.get("l0").intf(f"l0-eth{port}")
    try:
        intf.ifconfig("down")
        wait_until(lambda: "l0-s0-1" in emu.ctl.rest("GET", "/v1/fabric")[1]["links_down"], 20,
                   what="member 1 of l0-s0 seen down")
        code, doc = emu.ctl.rest("POST", "/v1/jobs", alltoall(emu, "a2a-down"))
        assert code == 201, doc
        routes = emu.ctl.rest("GET", "/v1/jobs/a2a-down")[1]["routes"]
        assert not [r for r in routes if r["path"][:2] == ["l0", "s0"] and r["members"][0] == 1]
        got = carried_as_planned(emu.net, f, routes, PAYLOAD)
        assert got.get("l0->s0#1", 0) < PAYLOAD / 100
    finally:
        emu.ctl.rest("DELETE", "/v1/jobs/a2a-down")
        intf.ifconfig("up")
        # the member back, its static entries installed, before the next test reads tables
        wait_until(lambda: not emu.ctl.rest("GET", "/v1/fabric")[1]["links_down"]
                   and emu.ctl.rest("GET", "/v1/fabric")[1]["ready"], 20,
                   what="member 1 of l0-s0 seen up again")


@pytest.mark.parametrize("mode", ["flow", ext("sr"), ext("host")])
def test_a_restart_changes_no_entry(emu, mode):
    code, doc = emu.ctl.rest("POST", "/v1/jobs", alltoall(emu, "kept", mode))
    assert code == 201, doc
    try:
        restart_changes_nothing(emu)
    finally:
        emu.ctl.rest("DELETE", "/v1/jobs/kept")
