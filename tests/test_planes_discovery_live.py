"""Zero configuration on two planes with real parts: ryu-manager with no fabric file in front
of the emulated two-plane leaf-spine (``topologies.clos.PlanesTopo``: 2 planes x 2 spines x
4 leaves, one host per leaf with one interface per plane, 12 Open vSwitch switches) finds it
by LLDP and ARP with the names, ports and addresses ``topologies/clos.py`` builds. The hosts
speak on their first plane, and one of them on the second: the controller finds the other
interfaces of the second plane with ARP probes for the addresses their host part gives there.
An all-to-all then carries its bytes on its planned links of both planes."""
import pytest

from emulation.harness import fabricnet
from tests.integration import alltoall_by_address, carried_as_planned, discovered, discovering
from topologies.clos import planes_fabric

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

BW = 20  # Mbit/s
PAYLOAD = 2_000_000  # bytes per flow


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """The controller with no fabric file in front of the emulated planes, every host heard
    on its first plane, two on the second (ARP): (controller, Mininet, the fabric
    topologies/clos.py built)."""
    truth = planes_fabric(2, 2, 4, 1, BW)
    with discovering(str(tmp_path_factory.mktemp("planes-discovery")), truth, BW) as (ctl, net):
        hosts = sorted(truth.host_leaves)
        fabricnet.ping_pairs(net, [(a, truth.ip_of(b, 0)) for a, b in  # plane 0
                                   zip(hosts, hosts[1:] + hosts[:1])]
                             + [(hosts[0], truth.ip_of(hosts[1], 1))], 2)  # two on plane 1
        yield ctl, net, truth


def test_two_planes_are_discovered_with_no_file(live):
    ctl, _net, truth = live
    view = discovered(ctl, truth, "the two planes discovered")
    assert view["discovery"]["wiring_problems"] == []
    assert view["discovery"]["probes"]["sent"]["arp_locate"] > 0  # the other plane-1 interfaces


def test_an_alltoall_over_discovered_planes_carries_its_bytes_as_planned(live):
    ctl, net, truth = live
    discovered(ctl, truth, "the two planes discovered")
    with alltoall_by_address(ctl, truth) as routes:
        assert len(routes) == 12 and {r["plane"] for r in routes} == {"plane0", "plane1"}
        got = carried_as_planned(net, truth, routes, PAYLOAD)
        for q in range(2):
            assert any(n > PAYLOAD / 2 for link, n in got.items()
                       if truth.plane_of[link.split("->")[0]] == q)
