"""``emulation.harness.routers``' counters read without a fabric: a switch's uN SID is a
route per port (metrics 1, 2, ...), and ``sid_bytes`` counts them all."""
import os
from types import SimpleNamespace

from emulation.harness.routers import RouterSession

SHOW = """fcbb:bbbb:1::/48  encap seg6local action End flavors next-csid dev s0-eth1 metric 1 pref medium
    Stats:
        packets 10 bytes 1500 errors 0
fcbb:bbbb:1::/48  encap seg6local action End flavors next-csid dev s0-eth2 metric 2 pref medium
    Stats:
        packets 3 bytes 420 errors 0
"""


def test_sid_bytes_sums_every_route_of_the_sid():
    node = SimpleNamespace(cmd=lambda c: SHOW if "fcbb:bbbb:1::/48" in c else "")
    fake = SimpleNamespace(net={"s0": node},
                           plan=SimpleNamespace(locator=lambda sw: "fcbb:bbbb:1::/48"))
    assert RouterSession.sid_bytes(fake, "s0") == 1920
    assert RouterSession.sid_bytes(fake, "s0", "fcbb:bbbb:9::/48") == 0


def test_host_queues_requeue_every_hosts_port_with_or_without_its_peers_classes():
    """One fabric measures both ways: a host's shaped ports get a class per peer
    (``fair_tc``) or one FIFO again; routers' ports and ports without peers are left alone."""
    from topologies.routers import PriorityIntf
    ran = []

    def port(name, **params):
        i = object.__new__(PriorityIntf)
        i.name, i.params = name, params

        def cmd(line):
            path = line.split("tc -batch ")[1].split()[0]
            with open(path) as fh:
                ran.append((name, line.split(";")[0], fh.read()))
            os.unlink(path)
            return ""
        i.cmd = cmd
        return i
    peers = ["10.0.0.2", "10.0.1.1"]
    nodes = {"h0_0": SimpleNamespace(intfList=lambda: [
        port("h0_0-eth0", bw=20.0, queue_bytes=500_000, fair_peers=peers),
        port("h0_0-eth9")])}
    s = SimpleNamespace(fabric=SimpleNamespace(host_leaves={"h0_0": ["l0"]}), net=nodes)
    RouterSession.host_queues(s, True)
    RouterSession.host_queues(s, False)
    assert [(n, first) for n, first, _ in ran] == [("h0_0-eth0", "tc qdisc del dev h0_0-eth0 "
                                                   "root")] * 2
    fair, fifo = ran[0][2], ran[1][2]
    assert "match ip dst 10.0.1.1/32 flowid 5:101" in fair and "5:101" not in fifo
    assert all("ip6 priority 0xc0 0xfc flowid 5:10\n" in t for t in (fair, fifo))  # probes
