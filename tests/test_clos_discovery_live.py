"""Zero configuration on three tiers with real parts: ryu-manager with no fabric file in front
of the emulated k = 4 fat-tree (20 Open vSwitch switches, 16 hosts) finds it by LLDP and ARP,
with the names, ports and addresses ``topologies/clos.py`` builds; a ring named by IPv4
addresses across every pod carries its bytes on its planned links."""
import os

import pytest

from emulation.harness import fabricnet
from emulation.harness.controller_proc import ControllerProcess
from emulation.harness.transfers import planned_links, step
from tests.integration import require_root_and_ovs
from topologies.clos import fattree_fabric

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

BW = 20  # Mbit/s
PAYLOAD = 2_000_000  # bytes per flow
RING = ["h0_0", "h2_0", "h4_0", "h6_0", "h1_1", "h3_1", "h5_1", "h7_1"]  # every pod, twice


def test_a_fat_tree_is_discovered_with_no_file_and_a_ring_follows_its_plan(tmp_path):
    require_root_and_ovs()
    truth = fattree_fabric(4, 2, BW)
    fabricnet.ensure_ovs()
    fabricnet.cleanup()
    ctl = net = None
    try:
        ctl = ControllerProcess(None, os.path.join(str(tmp_path), "controller.log"),
                                extra_args=["--mlroute-link-gbps", str(BW / 1000),
                                            "--mlroute-stats-interval", "0"]).start()
        net = fabricnet.build(0, 0, 0, BW, ctl.of_port, clos=truth)
        fabricnet.start(net, timeout=60)
        first = truth.host_ip["h0_0"]
        for h in net.hosts:  # every host speaks once (ARP): discovery hears it
            h.cmd(f"ping -c1 -W2 {first if h.name != 'h0_0' else truth.host_ip['h0_1']}")

        def found():
            view = ctl.rest("GET", "/v1/fabric", timeout=15)[1]
            return view if view.get("ready") and view.get("declared") == truth.to_dict() \
                else None
        view = fabricnet.wait_until(found, 90, interval=1.0, what="the fat-tree discovered")
        assert view["discovery"]["wiring_problems"] == []
        job = {"id": "ring", "collective": "ring_allreduce", "bytes": 4e6,
               "ranks": [truth.host_ip[h] for h in RING]}
        code, doc = ctl.rest("POST", "/v1/jobs", job)
        assert code == 201, doc
        routes = doc["routes"]
        assert len(routes) == 8 and all(len(r["path"]) == 5 for r in routes)
        assert max(planned_links(routes).values()) == 1
        _, got = step(net, truth, routes, PAYLOAD)
        plan = planned_links(routes)
        wrong = {link: (n, plan.get(link, 0) * PAYLOAD) for link, n in got.items()
                 if not plan.get(link, 0) * PAYLOAD * 0.99 <= n
                 <= (plan.get(link, 0) + 0.05) * PAYLOAD}
        assert not wrong, (wrong, routes)
    finally:
        try:
            if net is not None:
                net.stop()
        finally:
            if ctl is not None:
                ctl.stop()
