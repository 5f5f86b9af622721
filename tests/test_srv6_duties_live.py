"""Issue 73 on real kernels: sixteen agents on a k = 4 fat-tree of Linux routers, every one
watching its document and reporting its probes (its parts' paths and its probe duties).
A core link that no job crosses is set down: the controller takes it down from the agents'
duty probes alone (before the duties no probe crossed an unused link, and its failure was
never seen), moves nothing, and plans the next job around it; set up again (its routers'
configuration applied again: Linux drops a link's static routes), it comes back on the
probes' positive evidence. Its neighbours, which the first reports may blame with
it, come back as their probes answer."""
from __future__ import annotations

import time

import pytest

from emulation.harness.fabricnet import wait_until
from emulation.harness.routers import RouterSession
from tests.integration import require_root_and_ovs
from tests.test_agent_routes_live import _reconfigure

pytestmark = pytest.mark.integration


def _links(routes: list[dict]) -> set[frozenset]:
    return {frozenset(hop) for r in routes for hop in zip(r["path"], r["path"][1:])}


def _down(client) -> list[set]:
    return [set(str(x).split("-")) for x in client.fabric().get("links_down") or []]


def test_sixteen_agents_see_an_unused_link_fail_and_come_back(tmp_path):
    require_root_and_ovs()
    from topologies.routers import fat_tree
    fabric = fat_tree(4)
    hosts = sorted(fabric.host_leaves)
    with RouterSession(fabric, str(tmp_path)) as s:
        assert len(s.agent_hosts) == 16
        ring = hosts[::2]
        view = s.ctl.client.add_job({"id": "ring", "collective": "ring_allreduce",
                                     "ranks": ring, "bytes": 1e6})
        for h in ring:
            wait_until(lambda h=h: s.steered(h), 20, interval=0.1, what=f"{h}'s rules")
        probing = sum(1 for h in hosts if s.ctl.client.segments(h)["probes"])
        assert probing >= 14  # every host with a part or a duty (k = 4: 2 hosts have neither)
        wait_until(lambda: (s.ctl.client.ready().get("hosts") or {}).get("reporting") ==
                   probing, 30, interval=0.5, what="every probing agent's reports")
        used = _links(view["routes"])
        idle = next((a, c) for a, c in fabric.links()
                    if fabric.tier_of[c] == 2 and frozenset((a, c)) not in used)
        before = [r["path"] for r in view["routes"]]
        s.net.configLinkStatus(*idle, "down")
        t = time.monotonic()
        wait_until(lambda: set(idle) in _down(s.ctl.client), 20, interval=0.2,
                   what=f"the unused link {idle} down from the duties' probes")
        seen_after = time.monotonic() - t
        # the first reports may name a neighbour too (a tie: only some paths reported yet);
        # the later ones explain them better, and the neighbours' probes answer
        wait_until(lambda: _down(s.ctl.client) == [set(idle)], 15, interval=0.2,
                   what=f"{idle} alone down")
        assert [r["path"] for r in s.ctl.client.routes()["routes"]] == before  # nothing moved
        pairs = s.ctl.client.add_job({"id": "pairs", "flows": [
            {"src": a, "dst": b, "bytes": 1e6} for a, b in zip(hosts[1::2], hosts[3::2])]})
        assert frozenset(idle) not in _links(pairs["routes"])  # planned around it
        s.net.configLinkStatus(*idle, "up")
        for router in idle:  # its static routes, which Linux dropped with the link
            _reconfigure(s, router)
        wait_until(lambda: not _down(s.ctl.client), 30, interval=0.5,
                   what=f"{idle} back on a probe across it")
        hosts_view = s.ctl.client.ready()["hosts"]
        assert hosts_view["reporting"] >= probing and hosts_view["document_refused"] == 0
        print(f"unused link down after {seen_after:.2f} s")
