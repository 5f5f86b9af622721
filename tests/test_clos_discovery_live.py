"""Zero configuration on three tiers with real parts: ryu-manager with no fabric file in front
of the emulated k = 4 fat-tree (20 Open vSwitch switches, 16 hosts) finds it by LLDP and ARP,
with the names, ports and addresses ``topologies/clos.py`` builds; a ring named by IPv4
addresses across every pod carries its bytes on its planned links; a host claiming an
aggregation switch's port by LLDP, or another host's address by ARP, changes nothing and is
reported (the topology guard on three tiers)."""
import json
import re
import subprocess
import sys
import time

import pytest

from emulation.harness import fabricnet
from emulation.harness.controller_proc import REPO
from emulation.harness.transfers import planned_links
from tests.clos_checks import CROSS_POD_RING
from tests.integration import carried_as_planned, discovered, discovering
from topologies.clos import fattree_fabric

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

BW = 20  # Mbit/s
PAYLOAD = 2_000_000  # bytes per flow
RING = CROSS_POD_RING


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """The controller with no fabric file in front of the emulated fat-tree, every host heard
    once (ARP): (controller, Mininet, the fabric topologies/clos.py built)."""
    truth = fattree_fabric(4, 2, BW)
    with discovering(str(tmp_path_factory.mktemp("clos-discovery")), truth, BW) as (ctl, net):
        first = truth.host_ip["h0_0"]
        fabricnet.ping_pairs(net, [(h.name, first if h.name != "h0_0" else truth.host_ip["h0_1"])
                                   for h in net.hosts], 2)  # every host speaks once (ARP)
        yield ctl, net, truth


def test_a_fat_tree_is_discovered_with_no_file_and_a_ring_follows_its_plan(live):
    ctl, net, truth = live
    view = discovered(ctl, truth, "the fat-tree discovered")
    assert view["discovery"]["wiring_problems"] == []
    job = {"id": "ring", "collective": "ring_allreduce", "bytes": 4e6,
           "ranks": [truth.host_ip[h] for h in RING]}
    code, doc = ctl.rest("POST", "/v1/jobs", job)
    assert code == 201, doc
    try:
        routes = doc["routes"]
        assert len(routes) == 8 and all(len(r["path"]) == 5 for r in routes)
        assert max(planned_links(routes).values()) == 1
        carried_as_planned(net, truth, routes, PAYLOAD)
    finally:
        ctl.rest("DELETE", "/v1/jobs/ring")


def _attack(net, host: str, *args: str):
    h = net[host]
    return h.popen([sys.executable, "-m", "emulation.harness.attacks", args[0], "--iface",
                    h.defaultIntf().name, *args[1:]], cwd=REPO, stdout=subprocess.PIPE,
                   text=True)


def test_a_host_claiming_an_aggregation_port_or_an_address_changes_nothing(live):
    """The topology guard on three tiers: h1_1 sends LLDP claiming to be aggregation switch
    a0_0's port to core c0_0, h4_1 gratuitous ARP for h2_0's address, while h0_0 pings h2_0
    and a ring crosses the pods. No ping is lost, the fabric and the routes stay, and each
    attack is reported at the leaf port it came in on."""
    ctl, net, truth = live
    discovered(ctl, truth, "the fat-tree discovered")
    job = {"id": "guarded", "collective": "ring_allreduce", "bytes": 4e6,
           "ranks": [truth.host_ip[h] for h in RING]}
    assert ctl.rest("POST", "/v1/jobs", job)[0] == 201
    try:
        before = ctl.rest("GET", "/v1/fabric")[1]["declared"]
        routes = ctl.rest("GET", "/v1/routes")[1]
        victim_ip = truth.host_ip["h2_0"]
        ping = net["h0_0"].popen(["ping", "-n", "-i", "0.1", "-W", "1", "-c", "70", victim_ip],
                                 stdout=subprocess.PIPE, text=True)
        lldp = _attack(net, "h1_1", "lldp", "--dpid", hex(truth.dpids["a0_0"]), "--port",
                       str(truth.port("a0_0", "c0_0")), "--rate", "10", "--duration", "5")
        garp = _attack(net, "h4_1", "garp", "--ip", victim_ip, "--rate", "2", "--duration", "5")
        sent = {name: json.loads(p.communicate(timeout=60)[0].splitlines()[-1])["sent"]
                for name, p in (("lldp", lldp), ("garp", garp))}
        text = ping.communicate(timeout=60)[0]
        m = re.search(r"(\d+) packets transmitted, (\d+) received", text)
        assert m and m.group(1) == m.group(2) == "70", text
        assert sent["lldp"] >= 40 and sent["garp"] >= 8, sent
        time.sleep(1.5)  # the last claims are verified
        view = ctl.rest("GET", "/v1/fabric")[1]
        assert view["declared"] == before and view["declared"] == truth.to_dict()
        assert ctl.rest("GET", "/v1/routes")[1] == routes
        events = view["events"]
        fake = [e for e in events if e.get("kind") == "lldp_unsigned"]
        assert fake and {(e["switch"], e["port"]) for e in fake} == \
            {("l1", truth.port("l1", "h1_1"))}, fake
        conflict = [e for e in events if e.get("kind") == "address_conflict"]
        assert conflict and {(e["switch"], e["port"], e["address"]) for e in conflict} == \
            {("l4", truth.port("l4", "h4_1"), victim_ip)}, conflict
        assert not [e for e in events if e.get("kind") == "host_moved"]
    finally:
        ctl.rest("DELETE", "/v1/jobs/guarded")
