"""Learned matrices end to end with real parts: ryu-manager + mlroute, Open vSwitch sampling
with sFlow toward the controller, Mininet hosts sending TCP (iperf3) around a ring in the
direction gloo's ring uses (each rank to rank - 1). A job declared by members learns exactly
those pairs, a ring declared the other way is re-planned onto them, and the learned entries at
the ingress leaves carry the traffic."""
import subprocess
import time

import pytest

from emulation import ovs
from tests.integration import default_session, require_root_and_ovs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
RING = ["h0_0", "h1_0", "h2_0", "h3_0", "h0_1", "h1_1", "h2_1", "h3_1"]


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    require_root_and_ovs()
    with default_session(tmp_path_factory.mktemp("learn"), bw=20) as s:
        yield s


def ring_traffic(emu, seconds: float):
    """iperf3 from every rank to rank - 1 for ``seconds`` (4 Mbit/s each); returns when done."""
    servers, clients = [], []
    try:
        for h in RING:
            servers.append(emu.net.get(h).popen(["iperf3", "-s", "-1", "-p", "5301"],
                                                stdout=subprocess.DEVNULL,
                                                stderr=subprocess.DEVNULL))
        time.sleep(0.5)
        for i, h in enumerate(RING):
            dst = emu.fabric.host_ip[RING[i - 1]]
            clients.append(emu.net.get(h).popen(
                ["iperf3", "-c", dst, "-p", "5301", "-t", str(seconds), "-b", "4M"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for c in clients:
            c.wait(timeout=seconds + 20)
    finally:
        for p in clients + servers:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=5)


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


def test_members_only_job_learns_the_data_direction(emu):
    data = cross_leaf(emu, {(h, RING[i - 1]) for i, h in enumerate(RING)})
    status, doc = emu.ctl.rest("POST", "/v1/jobs", {
        "id": "m", "members": [emu.fabric.host_ip[h] for h in RING]})
    assert status == 201 and doc["matrix"] == "learning", doc
    try:
        ring_traffic(emu, 12)
        doc = wait_matrix(emu, "m", "learned", 5)
        assert doc["matrix"] == "learned", doc
        assert {(r["src"], r["dst"]) for r in doc["routes"]} == data
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


def test_ring_declared_opposite_is_replanned_on_the_measured_pairs(emu):
    status, doc = emu.ctl.rest("POST", "/v1/jobs", {
        "id": "w", "collective": "ring_allreduce", "ranks": RING, "bytes": 4e6})
    assert status == 201 and doc["matrix"] == "declared", doc
    declared = cross_leaf(emu, {(r["src"], r["dst"]) for r in doc["routes"]})
    try:
        ring_traffic(emu, 12)
        doc = wait_matrix(emu, "w", "learned", 5)
        assert doc["matrix"] == "learned", doc
        assert {(r["src"], r["dst"]) for r in doc["routes"]} == {(b, a) for a, b in declared}
        assert "opposite to the declared ring" in doc["mismatch"]["description"]
        events = emu.ctl.rest("GET", "/v1/fabric")[1]["events"]
        assert any("opposite to the declared ring" in e.get("cause", "") for e in events)
    finally:
        emu.ctl.rest("DELETE", "/v1/jobs/w")
