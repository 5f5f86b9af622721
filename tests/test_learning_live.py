"""Learned matrices end to end with real parts: ryu-manager + mlroute, Open vSwitch sampling
with sFlow toward the controller, Mininet hosts sending TCP (iperf3) around a ring in the
direction gloo's ring uses (each rank to rank - 1). A job declared by members learns exactly
those pairs, a ring declared the other way is re-planned onto them (make before break: another
job's UDP stream loses no packet meanwhile), and the learned entries at the ingress leaves carry
the traffic."""
import json
import subprocess
import time

import pytest

from emulation.harness import fabricnet, ovs
from tests.integration import default_session, iperf_ring, require_root_and_ovs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
RING = ["h0_0", "h1_0", "h2_0", "h3_0", "h0_1", "h1_1", "h2_1", "h3_1"]
UDP_S = 15  # the other job's UDP streams: the re-planned ring is learned within them


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    require_root_and_ovs()
    with default_session(tmp_path_factory.mktemp("learn"), bw=20) as s:
        yield s


def test_every_link_end_is_shaped_with_a_bounded_queue(emu):
    """topologies.clos.ShapedIntf, configured in one shell command per interface: every end
    of every link, host or switch, has the HTB class at the session's rate and the harness's
    byte FIFO under it, at its MTU."""
    rate = f"rate {emu.bw:g}Mbit"
    for node in emu.net.hosts + emu.net.switches:
        for intf in node.intfList():
            if intf.name == "lo":
                continue
            out = node.cmd(f"tc qdisc show dev {intf.name}; tc class show dev {intf.name}; "
                           f"ip link show dev {intf.name}")
            assert "qdisc htb 5: root" in out and rate in out, (intf.name, out)
            assert f"bfifo 10: parent 5:1 limit {fabricnet.QUEUE_BYTES}b" in out, out
            mtu = fabricnet.HOST_MTU if node in emu.net.hosts else fabricnet.SWITCH_MTU
            assert f"mtu {mtu} " in out, (intf.name, out)


def ring_traffic(emu, seconds: float, ring=RING, learned: str | None = None):
    """iperf3 from every rank of ``ring`` to rank - 1 for ``seconds`` (4 Mbit/s each); returns
    when done, or as soon as job ``learned`` is learned."""
    until = None if learned is None else (lambda: is_learned(emu, learned))
    iperf_ring(emu.net, emu.fabric, ring, seconds, until=until)


def is_learned(emu, jid) -> bool:
    return emu.ctl.rest("GET", f"/v1/jobs/{jid}")[1].get("matrix") == "learned"


def wait_matrix(emu, jid, want, timeout):
    deadline = time.monotonic() + timeout
    doc = None
    while time.monotonic() < deadline:
        doc = emu.ctl.rest("GET", f"/v1/jobs/{jid}")[1]
        if doc.get("matrix") == want:
            return doc
        time.sleep(0.5)
    return doc


def cross_leaf(emu, pairs):
    return {(a, b) for a, b in pairs if emu.fabric.hosts[a] != emu.fabric.hosts[b]}


def learned_members_job(emu, jid: str, members: list[str], data: set) -> dict:
    """Post job ``jid`` by its ``members``, run the ring's traffic, and return the job's view
    once learned, its routes exactly the measured cross-leaf pairs ``data`` (the caller
    deletes the job)."""
    status, doc = emu.ctl.rest("POST", "/v1/jobs", {"id": jid, "members": members})
    assert status == 201 and doc["matrix"] == "learning", doc
    ring_traffic(emu, 12, learned=jid)
    doc = wait_matrix(emu, jid, "learned", 5)
    assert doc["matrix"] == "learned", doc
    assert {(r["src"], r["dst"]) for r in doc["routes"]} == data
    return doc


def test_members_only_job_learns_the_data_direction_from_cold_and_when_posted_again(emu):
    """The module's first job meets a cold controller (issue 36: a members-only job was
    sometimes never learned from a cold controller, or after another learning job was
    deleted): learned, its entries carry the traffic; deleted and posted again under a new id,
    learned again. Real gloo and Open MPI jobs across their whole life, on a discovered
    leaf-spine and a fat-tree: tests/test_lifecycle_live.py (``make test-live``)."""
    data = cross_leaf(emu, {(h, RING[i - 1]) for i, h in enumerate(RING)})
    members = [emu.fabric.host_ip[h] for h in RING]
    try:
        doc = learned_members_job(emu, "m", members, data)
        assert {(m["src"], m["dst"]) for m in doc["measured_flows"]} == data
        # the learned entries are in the ingress leaves and counted the traffic after it
        before = {leaf: ovs.flow_table(leaf) for leaf in emu.fabric.leaves}
        assert sum(len(t) for t in before.values()) > 0
        ring_traffic(emu, 3)
        ovs.settle_counters(emu.fabric.leaves)
        hits = [e for leaf in emu.fabric.leaves for e in ovs.dump_flows(leaf, None)
                if e.get("cookie", 0) and e.get("n_bytes", 0) > 0 and "nw_src" in e["match"]]
        assert len(hits) >= len(data), hits
    finally:
        emu.ctl.rest("DELETE", "/v1/jobs/m")
    try:
        learned_members_job(emu, "m2", members, data)
    finally:
        emu.ctl.rest("DELETE", "/v1/jobs/m2")


def test_replan_on_learned_traffic_drops_no_packet_of_another_job(emu):
    """Half the hosts run a ring declared the wrong way (opposite to its data) and re-planned
    on its traffic: its routes become the measured pairs, and the mismatch is described on the
    job and in the fabric's events. The other half run a correctly declared ring of
    constant-rate UDP streams the whole time (3 flows of 4 Mbit/s at most per 20 Mbit/s link:
    no congestion loss), the re-plan inside their run: every UDP datagram arrives and the other
    job's routes never move."""
    half, other = RING[:4], RING[4:]
    ip = emu.fabric.host_ip
    status, doc = emu.ctl.rest("POST", "/v1/jobs", {
        "id": "keep", "flows": [{"src": h, "dst": other[i - 1], "bytes": 4e6, "proto": "udp",
                                 "dport": 5401} for i, h in enumerate(other)]})
    assert status == 201, doc
    kept = {(r["src"], r["dst"], r["spine"]) for r in doc["routes"]}
    status, doc = emu.ctl.rest("POST", "/v1/jobs", {
        "id": "w2", "collective": "ring_allreduce", "ranks": half, "bytes": 4e6})
    assert status == 201 and doc["matrix"] == "declared", doc
    declared = cross_leaf(emu, {(r["src"], r["dst"]) for r in doc["routes"]})
    servers, clients = [], []
    try:
        for h in other:
            servers.append(emu.net.get(h).popen(["iperf3", "-s", "-1", "-p", "5401"],
                                                stdout=subprocess.DEVNULL,
                                                stderr=subprocess.DEVNULL))
        time.sleep(0.5)
        for i, h in enumerate(other):
            clients.append(emu.net.get(h).popen(
                ["iperf3", "-c", ip[other[i - 1]], "-p", "5401", "-u", "-b", "4M", "-l", "1200",
                 "-t", str(UDP_S), "-J"], stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True))
        began = time.monotonic()
        time.sleep(1.0)
        # data rank -> rank - 1: opposite to the declaration
        ring_traffic(emu, UDP_S - 3, half, learned="w2")
        doc = wait_matrix(emu, "w2", "learned", 1)
        assert doc["matrix"] == "learned", doc
        assert time.monotonic() - began < UDP_S - 1, "re-planned after the UDP streams ended"
        assert {(r["src"], r["dst"]) for r in doc["routes"]} == {(b, a) for a, b in declared}
        assert "opposite to the declared ring" in doc["mismatch"]["description"]
        events = emu.ctl.rest("GET", "/v1/fabric")[1]["events"]
        assert any("opposite to the declared ring" in e.get("cause", "") for e in events)
        reports = [json.loads(c.communicate(timeout=UDP_S + 20)[0]) for c in clients]
    finally:
        for p in clients + servers:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=5)
        emu.ctl.rest("DELETE", "/v1/jobs/w2")
        now = emu.ctl.rest("GET", "/v1/jobs/keep")[1]
        emu.ctl.rest("DELETE", "/v1/jobs/keep")
    sent = [r["end"]["sum"]["packets"] for r in reports]
    lost = [r["end"]["sum"]["lost_packets"] for r in reports]
    assert min(sent) > 1000 and sum(lost) == 0, (sent, lost)
    assert {(r["src"], r["dst"], r["spine"]) for r in now["routes"]} == kept
