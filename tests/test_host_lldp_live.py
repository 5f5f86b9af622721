"""Hosts' LLDP agents as their identity, with real parts: ryu-manager with no fabric file in
front of the emulated two-plane leaf-spine (``topologies.clos.PlanesTopo``), lldpd running on
every host, and two hosts' plane-1 addresses swapped against the address plan (as a cabling
or address mistake leaves them). Host parts of addresses would join h0_0's plane-0 interface
with h1_0's plane-1 interface; the agents' chassis ids join each host's own interfaces."""
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile

import pytest

from emulation.harness import fabricnet
from tests.integration import alltoall_by_address, carried_as_planned, discovered, discovering
from topologies.clos import host_network, planes_fabric

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

BW = 20  # Mbit/s
PAYLOAD = 2_000_000  # bytes per flow
SWAPPED = ("h0_0", "h1_0")  # their plane-1 addresses are exchanged


@contextlib.contextmanager
def lldp_agents(net, hosts, logs: str):
    """lldpd in every host's namespace (its own control socket, in a directory its
    unprivileged lldpcli can reach; LLDP out of every interface at once, then every 30 s),
    stopped on the way out."""
    if subprocess.run(["sh", "-c", "command -v lldpd"], capture_output=True).returncode:
        pytest.fail("lldpd is not installed (make system installs it)")
    pids, tmp = [], tempfile.mkdtemp(prefix="mlroute-lldpd-")
    os.chmod(tmp, 0o755)
    try:
        for h in hosts:
            node = net.get(h)
            sock = os.path.join(tmp, f"lldpd-{h}.sock")
            out = node.cmd(f"lldpd -d -u {sock} -I '{h}-eth*' > {logs}/lldpd-{h}.log 2>&1 & "
                           "echo $!")
            pids.append(int(out.split()[-1]))
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """(controller, Mininet, the fabric as addressed: the plan with SWAPPED's plane-1
    addresses exchanged), every interface heard, every host's agent heard."""
    plan = planes_fabric(2, 2, 4, 1, BW)
    a, b = SWAPPED
    doc = plan.to_dict()
    ips = {h: list(v) for h, v in doc["host_ip"].items()}
    ips[a][1], ips[b][1] = ips[b][1], ips[a][1]
    truth = type(plan).from_dict({**doc, "host_ip": ips})
    tmp = str(tmp_path_factory.mktemp("host-lldp"))
    prefix = host_network(plan, 1).split("/")[1]
    with discovering(tmp, plan, BW) as (ctl, net):
        for h in SWAPPED:
            intf = f"{h}-eth1"
            net.get(h).cmd(f"ip addr flush dev {intf} && ip addr add "
                           f"{truth.ip_of(h, 1)}/{prefix} dev {intf}")
        hosts = sorted(truth.host_leaves)
        with lldp_agents(net, hosts, tmp):
            fabricnet.ping_pairs(net, [(x, truth.ip_of(y, q)) for q in (0, 1)
                                       for x, y in zip(hosts, hosts[1:] + hosts[:1])], 2)
            yield ctl, net, truth


def test_each_hosts_interfaces_are_joined_by_its_agents_chassis_id(live):
    ctl, _net, truth = live
    view = discovered(ctl, truth, "the two planes joined by the hosts' agents")
    assert view["discovery"]["wiring_problems"] == []
    low = lambda ip: ip.split(".", 2)[2]  # the host part of 10.<16q>.x.y
    a, b = SWAPPED
    assert low(truth.ip_of(a, 1)) == low(truth.ip_of(b, 0))  # addresses alone join a with b


def test_an_alltoall_by_address_reaches_the_addresses_own_hosts(live):
    ctl, net, truth = live
    discovered(ctl, truth, "the two planes joined by the hosts' agents")
    with alltoall_by_address(ctl, truth) as routes:
        assert len(routes) == 12
        for r in routes:  # each route's addresses are its hosts' own in its plane
            q = int(r["plane"].removeprefix("plane"))
            assert (r["src_ip"], r["dst_ip"]) == (truth.ip_of(r["src"], q),
                                                 truth.ip_of(r["dst"], q)), r
        carried_as_planned(net, truth, routes, PAYLOAD)
