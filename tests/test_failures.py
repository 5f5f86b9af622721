"""Failures and restarts with real parts: a link taken down under a running ring All-Reduce,
and a controller restart that must leave every switch table exactly as planned."""
import json
import os

import pytest

from emulation.harness import ovs
from emulation.harness.run import _run_traffic, prepare_jobs
from tests.integration import default_session, require_root_and_ovs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    require_root_and_ovs()
    with default_session(tmp_path_factory.mktemp("fail"), bw=5.0, state=True) as f:
        yield f


def tables(emu):
    return {sw: ovs.flow_table(sw) for sw in emu.fabric.switches()}


def test_link_down_under_allreduce_delivers_every_byte(emu, tmp_path):
    import threading
    import time
    job = prepare_jobs({"jobs": [{"id": "f", "collective": "ring_allreduce",
                                  "ranks": ["h0_0", "h1_0", "h2_0", "h3_0"], "bytes": 2_000_000}]},
                       emu.fabric)[0]
    assert emu.ctl.rest("POST", "/v1/jobs", job)[0] == 201
    try:
        view = emu.ctl.rest("GET", "/v1/jobs/f")[1]
        victim = view["routes"][0]
        leaf, spine = emu.fabric.hosts[victim["src"]], victim["spine"]
        # the ring takes about 6 steps x 0.8 s; take the victim's uplink down after 2 s
        timer = threading.Timer(2.0 + 3.0, emu.net.configLinkStatus, (leaf, spine, "down"))
        timer.start()
        times = _run_traffic(emu.net, emu.fabric, [job], {"f": view}, 1, str(tmp_path), "fail")
        timer.join()
        assert times["f"][0] > 0
        for name in [n for n in os.listdir(tmp_path) if n.endswith(".json")]:
            res = json.load(open(tmp_path / name))
            assert res["received_bytes"] == res["sent_bytes"] == 500_000 * 6
        fabric = emu.ctl.rest("GET", "/v1/fabric")[1]
        assert f"{leaf}-{spine}" in fabric["links_down"]
        event = next(e for e in fabric["events"] if f"{leaf}-{spine}" in e["links_down"])
        assert event["replanned"] == ["greedy"] and event["error"] is None
        assert event["recovery_ms"] < 1000
        routes = emu.ctl.rest("GET", "/v1/jobs/f")[1]["routes"]
        assert all(not (emu.fabric.hosts[r["src"]] == leaf and r["spine"] == spine) for r in routes)
    finally:
        emu.net.configLinkStatus(leaf, spine, "up")
        emu.ctl.rest("DELETE", "/v1/jobs/f")
    deadline = time.monotonic() + 20
    while emu.ctl.rest("GET", "/v1/fabric")[1]["links_down"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert emu.ctl.rest("GET", "/v1/fabric")[1]["links_down"] == []


def test_same_plan_twice_leaves_tables_identical(emu):
    job = {"id": "twice", "collective": "ring_allreduce", "ranks": ["h0_1", "h2_1", "h1_1", "h3_1"],
           "bytes": 1e6, "mode": "sr"}
    assert emu.ctl.rest("POST", "/v1/jobs", job)[0] == 201
    try:
        first = tables(emu)
        status, doc = emu.ctl.rest("POST", "/v1/optimize")
        assert status == 200 and doc["rules"]["added"] == doc["rules"]["removed"] == 0
        assert tables(emu) == first
    finally:
        emu.ctl.rest("DELETE", "/v1/jobs/twice")


def test_restart_reconciles_exactly(emu):
    for k, mode in enumerate(("flow", "sr")):
        job = {"id": f"keep{k}", "collective": "ring_allreduce",
               "ranks": [f"h{i}_{k}" for i in range(4)], "bytes": 1e6, "mode": mode}
        assert emu.ctl.rest("POST", "/v1/jobs", job)[0] == 201
    try:
        planned = tables(emu)
        jobs = emu.ctl.rest("GET", "/v1/jobs")[1]
        routes = emu.ctl.rest("GET", "/v1/routes")[1]
        emu.ctl.stop()
        # while no controller runs, add a rule the controller never planned (it must go)
        os.system("ovs-ofctl -O OpenFlow13 add-flow l1 priority=7,cookie=0x99,ip,nw_tos=4,actions=drop")
        emu.ctl = emu.controller(log="controller2.log").start()
        emu.wait_ready(timeout=60)
        assert emu.ctl.rest("GET", "/v1/jobs")[1] == jobs
        assert emu.ctl.rest("GET", "/v1/routes")[1] == routes
        assert tables(emu) == planned
    finally:
        for k in range(2):
            emu.ctl.rest("DELETE", f"/v1/jobs/keep{k}")
