"""srv6 mode on two planes of Linux routers (issue 73): four flows between two leaves, two
spines a plane, so the plan needs both planes; each host's agent steers every part out of
its plane's interface, and each flow's bytes are counted at its planned spine of its
planned plane (the routers' per-SID counters: one flow a spine, so a flow hashed or
steered elsewhere leaves its spine short)."""
from __future__ import annotations

import subprocess

import pytest

from emulation.harness.fabricnet import wait_until
from emulation.harness.routers import PY, RouterSession
from tests.integration import require_root_and_ovs
from tests.test_srv6_live import CLIENT, SERVER

pytestmark = pytest.mark.integration
SIZE = 3_000_000


def test_a_job_on_two_planes_crosses_its_planned_spines(tmp_path):
    require_root_and_ovs()
    from topologies.routers import leaf_spine
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    fabric = leaf_spine(2, 2, 2, planes=2)
    pairs = [("h0_0", "h1_0"), ("h0_0", "h1_1"), ("h0_1", "h1_0"), ("h0_1", "h1_1")]
    with RouterSession(fabric, str(tmp_path)) as s:
        view = s.ctl.client.add_job({"id": "two", "flows": [
            {"src": a, "dst": b, "bytes": 1e7, "dport": 5100 + i}
            for i, (a, b) in enumerate(pairs)]})
        routes = view["routes"]
        assert {r["plane"] for r in routes} == {"plane0", "plane1"}, routes
        assert len({r["spine"] for r in routes}) == 4  # one flow a spine: max load 1
        for h in ("h0_0", "h0_1"):
            wait_until(lambda h=h: s.steered(h) >= 2, 20, interval=0.1, what=f"{h}'s rules")
        before = {r["spine"]: s.sid_bytes(r["spine"]) for r in routes}
        servers, clients = [], []
        for i, r in enumerate(routes):
            p = s.net[r["dst"]].popen([PY, str(tmp_path / "server.py"), str(5100 + i)],
                                      stdout=subprocess.PIPE, text=True)
            s.procs.append(p)
            servers.append(p)
        wait_until(lambda: all(str(5100 + i) in s.net[r["dst"]].cmd("ss -ltn")
                               for i, r in enumerate(routes)), 10, what="the servers")
        for i, r in enumerate(routes):  # to the destination's address on the flow's plane
            c = s.net[r["src"]].popen([PY, str(tmp_path / "client.py"), r["dst_ip"],
                                       str(5100 + i), str(SIZE)], stderr=subprocess.PIPE,
                                      text=True)
            s.procs.append(c)
            clients.append(c)
        for c in clients:
            assert c.wait(60) == 0, c.stderr.read()
        for p in servers:
            assert int(p.communicate(timeout=30)[0]) == SIZE  # every byte
        for r in routes:
            got = s.sid_bytes(r["spine"]) - before[r["spine"]]
            assert got >= SIZE * 0.9, (r, got)  # its bytes crossed its planned spine
