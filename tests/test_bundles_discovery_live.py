"""Bundles found with no file, with real parts: ryu-manager with no fabric file in front of
the emulated leaf-spine whose leaf-spine pairs are bundles of 2 links (``BundlesTopo``,
2 spines x 4 leaves, one host per leaf, 20 Mbit/s) finds it by LLDP over every member and
ARP, members and ports as ``topologies/clos.py`` wires them; an all-to-all then carries its
bytes on its planned member of every bundle."""
import itertools

import pytest

from emulation.harness import fabricnet
from tests.integration import carried_as_planned, discovered, discovering
from topologies.clos import planes_fabric

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

BW = 20  # Mbit/s
PAYLOAD = 2_000_000  # bytes per flow


def test_a_bundled_leaf_spine_is_discovered_with_no_file_and_its_members_used(tmp_path):
    truth = planes_fabric(1, 2, 4, 1, BW, bundle=2)
    with discovering(str(tmp_path), truth, BW) as (ctl, net):
        hosts = sorted(truth.host_leaves)
        fabricnet.ping_pairs(net, [(a, truth.host_ip[b]) for a, b in  # every host speaks once
                                   zip(hosts, hosts[1:] + hosts[:1])], 2)
        view = discovered(ctl, truth, "the bundled leaf-spine discovered")
        assert view["discovery"]["wiring_problems"] == [] and view["declared"]["bundle"]["leaf"] == 2
        job = {"id": "a2a", "flows": [{"src": truth.host_ip[a], "dst": truth.host_ip[b],
                                       "bytes": 4e6} for a, b in itertools.permutations(hosts, 2)]}
        code, doc = ctl.rest("POST", "/v1/jobs", job)
        assert code == 201, doc
        routes = ctl.rest("GET", "/v1/jobs/a2a")[1]["routes"]
        assert len(routes) == 12 and all(len(r["members"]) == 2 for r in routes)
        got = carried_as_planned(net, truth, routes, PAYLOAD)
        used = {link for link, n in got.items() if n > PAYLOAD / 2}
        assert any(link.endswith("#1") and link[:-2] in used for link in used), sorted(used)
