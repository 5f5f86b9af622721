"""A Clos of Linux routers in Mininet, for srv6 mode: no OpenFlow, no switch daemon. Built from
the same fabric model as ``topologies/clos.py``: names, ports and host addresses match the
fabric document the controller declares (``--mlroute-southbound none``).

    mn --custom topologies/routers.py --topo routers,2,2,2 --controller none
    mn --custom topologies/routers.py --topo routers,2,2,2,2 --controller none  # two planes
    mn --custom topologies/routers.py --topo fattree-routers,4 --controller none

Each host also has a management link (``<host>-eth9``) to the root namespace, where the
controller answers at ``CONTROLLER_IP`` (172.30.255.254: ``mlroute-controller --wsapi-host
172.30.255.254``), so each host's ``mlroute-agent --url http://172.30.255.254:8080`` reaches
it as a cluster's management network would.

Every router applies its static configuration (``controller.enforcement.srv6_config``: link
addresses, uN / uA / End.X / End.DX4 SIDs with counters, every locator and host over all
shortest paths, at a leaf its host ports' source check) in one ``ip -batch`` (a leaf's IPv6
source check in an ``ip -6 -batch``); unsteered traffic spreads by the kernel's L4 ECMP hash
(``fib_multipath_hash_policy=3`` on the 5-tuple). Hosts keep their IPv4 address; their IPv4 fabric and the
uSID block go through their leaf (``srv6_config.host_config``), IPv6 on. A host's
``mlroute-agent`` steers its flows. The fabric carries jumbo frames (``MTU``) and hosts clamp
their TCP receive buffers (``RMEM``), as the OpenFlow emulation does. Shaped links serve the
agents' probes first (``PriorityIntf``), and a host's shaped port shares its rate equally
among the peers it sends to (``fair_tc``), as a host's ``fq`` or an RDMA NIC would.

Runs under ``mn``'s Python: the standard library, Mininet and ``controller.model`` /
``controller.enforcement.srv6*`` (standard library only).
"""
from __future__ import annotations

import inspect
import os
import sys

_HERE = os.path.abspath(inspect.currentframe().f_code.co_filename)
sys.path.insert(0, os.path.dirname(os.path.dirname(_HERE)))

from controller.enforcement.srv6 import SidPlan  # noqa: E402
from controller.enforcement.srv6_config import (  # noqa: E402
    PROBE_DSCP,
    SYSCTLS,
    Addressing,
    configs,
    host_config,
    priority_tc,
)
from controller.model.clos import Clos  # noqa: E402
from controller.model.clos_wiring import wire  # noqa: E402
from topologies.clos import ShapedIntf  # noqa: E402

try:
    from mininet.link import Intf, TCLink
    from mininet.node import Node
    from mininet.topo import Topo
except ImportError:  # the module's configuration helpers do not need Mininet
    Node = Topo = Intf = TCLink = object

MTU = 9000  # the fabric's links and host ports: jumbo frames, as training fabrics use (and the
# OpenFlow emulation, harness/fabricnet.HOST_MTU); the encapsulation's 40 bytes then cost 0.4%
# of a packet, not 2.7%, and the kernel lowers TCP's MSS to fit them (hosts encapsulate)
RMEM = 65536  # a host's largest TCP receive buffer (SrHost)


def _mtu(node, management: str = "") -> str:
    """The commands that set ``MTU`` on a node's fabric ports (not on a host's ``management``
    link, whose other end is the root namespace's)."""
    return "; ".join(f"ip link set dev {i.name} mtu {MTU}" for i in node.intfList()
                     if i.name not in ("lo", management))


def _batch(node, lines: list[str], what: str, family: str = "") -> None:
    path = f"/tmp/mlroute-{node.name}-{what}.batch"
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    out = node.cmd(f"ip {family} -batch {path} 2>&1; echo rc=$?")
    os.unlink(path)
    if not out.strip().endswith("rc=0"):
        raise RuntimeError(f"{node.name}: {what} configuration failed: {out.strip()[-400:]}")


class SrRouter(Node):
    """A Linux router holding static SIDs only (``srv6_config.SwitchConfig``)."""

    def config(self, lines=(), lines6=(), **params):
        r = super().config(**params)
        self.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=0 " + " ".join(SYSCTLS) + "; "
                 + _mtu(self, f"{self.name}-eth{ROUTER_MGMT_PORT}"))
        _batch(self, list(lines), "router")
        if lines6:  # a leaf's IPv6 source check (``ip rule`` takes the family from -6 only)
            _batch(self, list(lines6), "router6", "-6")
        return r


class SrHost(Node):
    """A host with IPv6 on, its IPv4 fabric and the uSID block through its leaf."""

    def config(self, lines=(), **params):
        r = super().config(**params)
        # TCP small queues: at most 32 kB of a socket in the qdisc, as at line rate, so that a
        # shaped link's short FIFO (emulation/harness/routers.QUEUE_S) is not overrun by the
        # host's own flow (its default, 1 MB, is 1.6 s at 5 Mbit/s)
        # and no segmentation offload: a 64 kB GSO packet would not fit that FIFO at all;
        # receive buffers of 64 kB (``RMEM``): flows that share a link keep equal amounts in
        # its FIFO and get equal rates, and a host's ACKs do not wait behind a full FIFO of
        # the flow it receives (unclamped, the demo's planned rings took 1.36x the ideal step,
        # clamped 1.04x), as the OpenFlow emulation's agents clamp theirs (harness/agents.py);
        # an all-to-all's seven senders queue at most seven windows at their receiver's port:
        # 128 kB queued about 0.2 s there at 20 Mbit/s, 64 kB half (a planned launch of the
        # router fat-tree's all-to-all: 1.064x its prediction at 128 kB, 1.046x at 64)
        self.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.default.disable_ipv6=0 "
                 f"net.ipv4.tcp_limit_output_bytes=32768 net.ipv4.tcp_rmem='4096 {RMEM} {RMEM}'; "
                 + _mtu(self, f"{self.name}-eth9") + "; " + "; ".join(
                     f"ethtool -K {i.name} tso off gso off >/dev/null 2>&1"
                     for i in self.intfList() if i.name != "lo"))
        _batch(self, list(lines), "host")
        return r


def fair_tc(dev: str, rate_mbit: float, queue_bytes: int, peers: list[str]) -> list[str]:
    """``tc -batch`` lines that give each destination of ``peers`` (IPv4 addresses) its own
    class in ``priority_tc``'s data class (``5:2``, ``rate_mbit``): equal guaranteed rates, each
    may borrow up to line rate, and HTB serves the backlogged ones round robin by a jumbo
    frame's quantum, as an RDMA NIC serves its queue pairs or ``fq`` its flows. A host's port
    so shares its line rate equally among the peers it sends to (the fluid model's share),
    where one FIFO gave each of an all-to-all's seven flows what TCP's dynamics gave it
    (issue 75; the emulation's kernel has no ``fq``, ``sfq`` or ``drr``). A packet is matched
    on its IPv4 destination, plain or inside a reduced SRv6 encapsulation (outer IPv6 header
    with next header 4, no SRH: the inner destination at byte 56); anything else (probes,
    neighbour discovery, an SRH) keeps ``priority_tc``'s classes. O(len(peers)) lines.

    >>> lines = fair_tc("e", 20, 500_000, ["10.0.0.2", "10.0.1.1"])
    >>> [x.split(" htb ")[1] for x in lines if " htb " in x] == 3 * [
    ...     'rate 6.66667mbit ceil 20mbit burst 15k quantum 9000 prio 1']  # 5:20, 5:100, 5:101
    True
    >>> lines[-1]  # doctest: +NORMALIZE_WHITESPACE
    'filter add dev e parent 5: protocol ipv6 prio 4 u32 match ip6 protocol 4 0xff
     match u32 0x0a000101 0xffffffff at 56 flowid 5:101'
    """
    share = float(rate_mbit) / (len(peers) + 1)  # and 5:20, the rest
    lines = [f"class change dev {dev} parent 5:2 classid 5:20 htb rate {share:g}mbit "
             f"ceil {float(rate_mbit):g}mbit burst 15k quantum 9000 prio 1"]
    for i, ip in enumerate(peers):
        cls, word = f"5:{0x100 + i:x}", "".join(f"{int(b):02x}" for b in ip.split("."))
        lines += [f"class add dev {dev} parent 5:2 classid {cls} htb rate {share:g}mbit "
                  f"ceil {float(rate_mbit):g}mbit burst 15k quantum 9000 prio 1",
                  *([f"qdisc add dev {dev} parent {cls} handle {0x1000 + i:x}: bfifo limit "
                     f"{int(queue_bytes)}"] if queue_bytes else []),
                  f"filter add dev {dev} parent 5: protocol ip prio 3 u32 match ip dst "
                  f"{ip}/32 flowid {cls}",
                  f"filter add dev {dev} parent 5: protocol ipv6 prio 4 u32 match ip6 protocol "
                  f"4 0xff match u32 0x{word} 0xffffffff at 56 flowid {cls}"]
    return lines


class PriorityIntf(ShapedIntf):
    """A shaped port whose probe class (``PROBE_DSCP``) is served first, as a fabric serves
    its control traffic (``srv6_config.priority_tc``: an HTB at ``bw`` Mbit/s, the probes'
    class before a byte FIFO of ``queue_bytes`` for the rest). Without it, 10 ms probes behind
    tens of ms of queue were judged failed and the agents moved planned flows mid-step.
    ``fair_peers`` (a host's port): a class per destination besides (``fair_tc``)."""

    strict = True

    def tc_lines(self, bw: float, queue_bytes=None, fair_peers=(), **params):
        """One ``tc -batch`` of a file written here: a host's classes make a line longer than
        the node's shell takes (4 kB)."""
        lines = priority_tc(self.name, PROBE_DSCP, bw, int(queue_bytes or 0))
        if fair_peers:
            lines += fair_tc(self.name, bw, int(queue_bytes or 0), list(fair_peers))
        path = f"/tmp/mlroute-{os.getpid()}-{self.name}.tc"
        with open(path, "w") as fh:
            fh.write("\n".join(lines) + "\n")
        return [f"tc -batch {path} 2>&1", f"rm -f {path}"], " parent 5:20 "


class PriorityLink(TCLink):
    """A link of two ``PriorityIntf``: the router emulation's shaped links."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("cls1", PriorityIntf)
        kwargs.setdefault("cls2", PriorityIntf)
        super().__init__(*args, **kwargs)


CONTROLLER_IP = "172.30.255.254"  # the management network's side of the root namespace
MGMT = "mgmt"  # the management node: the root namespace, where the controller runs


class MgmtNode(Node):
    """The root namespace's end of every host's management link: one veth per host, each
    holding ``CONTROLLER_IP`` and a route to its host's management address, as an out-of-band
    management network reaches a cluster's hosts. Its veths go with the network."""

    def config(self, hosts=(), **params):
        r = super().config(**params)
        self.cmd("; ".join(f"ip addr replace {CONTROLLER_IP}/32 dev {i.name}; ip route replace "
                           f"{mgmt_ip(j)}/32 dev {i.name} src {CONTROLLER_IP}"
                           for j, i in enumerate(self.intfList()) if i.name != "lo"))
        return r


MGMT_NET = "172.30.0.0/16"  # the management addresses (mgmt_ip) and CONTROLLER_IP


def mgmt_ip(j: int) -> str:
    """The j-th management address: the hosts' in the fabric's order, then the routers'
    (``RoutersTopo``'s ``routers_mgmt``)."""
    return f"172.30.{j // 250}.{1 + j % 250}"


ROUTER_MGMT_PORT = 999  # a router's management link (``routers_mgmt``): <router>-eth999


class RoutersTopo(Topo):
    """Any wired ``Clos`` as routers and hosts (a host has one interface per plane,
    ``<host>-eth<plane>``; bundles: one link per member), and
    with ``mgmt`` a management network: each host's ``<host>-eth9`` to the root namespace,
    where the controller answers at ``CONTROLLER_IP`` (its ``--wsapi-host``); with
    ``routers_mgmt`` each router's ``<router>-eth999`` too (host addresses first, then the
    routers', in ``fabric.dpids`` order), over which its sFlow reaches the collector. ``fair``
    (shaped ``PriorityLink``s): a host's port shares its rate among its peers (``fair_tc``)."""

    def build(self, fabric: Clos, link=None, mgmt=True, routers_mgmt=False, fair=True):
        f, link = fabric, link or {}  # link: Mininet link options (bw with TCLink)
        plan = SidPlan.of(f)
        cfg = configs(plan)
        hosts, routers_mgmt = len(f.host_leaves), mgmt and routers_mgmt
        for k, sw in enumerate(f.dpids):
            dev = f"{sw}-eth{ROUTER_MGMT_PORT}"
            self.addHost(sw, cls=SrRouter, ip=None, lines=cfg[sw].iproute2() + ([
                f"addr replace {mgmt_ip(hosts + k)}/32 dev {dev}",
                f"route replace {CONTROLLER_IP}/32 dev {dev}"] if routers_mgmt else []),
                lines6=cfg[sw].iproute2_v6())
        bits = 8 if len(f.planes) == 1 else 12  # each plane's IPv4 net (clos_wiring.wire)
        for j, h in enumerate(f.host_leaves):
            self.addHost(h, cls=SrHost, ip=f"{f.ip_of(h)}/{bits}", mac=f.mac_of(h),
                         lines=[f"addr replace {f.ip_of(h, q)}/{bits} dev {h}-eth{q}"
                                for q in range(1, len(f.planes))]  # plane 0's: Mininet's
                         + host_config(plan, h) + ([
                             f"addr replace {mgmt_ip(j)}/32 dev {h}-eth9",
                             f"route replace {CONTROLLER_IP}/32 dev {h}-eth9"] if mgmt else []))
        if mgmt:
            self.addHost(MGMT, cls=MgmtNode, ip=None, inNamespace=False)
            for j, h in enumerate(f.host_leaves):
                self.addLink(h, MGMT, port1=9, port2=j + 1)
            for k, sw in enumerate(f.dpids if routers_mgmt else []):
                self.addLink(sw, MGMT, port1=ROUTER_MGMT_PORT, port2=hosts + k + 1)
        for sw in f.dpids:
            for peer in f.neighbours(sw):
                if peer in f.host_leaves:  # the host's interface of that plane
                    q = f.plane_of[sw]
                    peers = [f.ip_of(o, q) for o in f.host_leaves if o != peer]
                    self.addLink(peer, sw, port1=q, port2=f.port(sw, peer),
                                 addr1=f.mac_of(peer, q),
                                 params1={"fair_peers": peers} if fair and link else {}, **link)
                elif f.tier_of[peer] > f.tier_of[sw]:
                    for p1, p2 in zip(f.ports_to(sw, peer), f.ports_to(peer, sw)):
                        self.addLink(sw, peer, port1=p1, port2=p2, **link)


def warm(net, fabric: Clos) -> None:
    """Resolve every neighbour once (each node pings its link peers, leaves their hosts'
    IPv4 too), all nodes at once: a cold fabric drops a flow's first packets while IPv6
    neighbours resolve, and a TCP SYN lost there costs seconds of back-off."""
    addr = Addressing.of(fabric)
    peers: dict[str, list[str]] = {}
    for (a, _b, _m), (_mine, theirs) in addr.links.items():
        peers.setdefault(a, []).append(theirs)
    for (h, _q), (host_addr, leaf_addr) in addr.hosts.items():
        peers.setdefault(h, []).append(leaf_addr)
        leaf = fabric.host_leaves[h][_q]
        peers.setdefault(leaf, []).extend([host_addr, fabric.ip_of(h, _q)])
    nodes = [(net[n], targets) for n, targets in peers.items()]
    for node, targets in nodes:
        node.sendCmd("for a in " + " ".join(targets) + "; do ping -c1 -W1 $a >/dev/null 2>&1 & "
                     "done; wait")
    for node, _ in nodes:
        node.waitOutput()


def leaf_spine(spines: int, leaves: int, hosts_per_leaf: int, planes: int = 1) -> Clos:
    c = Clos.leaf_spine(int(spines), int(leaves), int(hosts_per_leaf), planes=int(planes))
    return c.wire(wire(c))


def fat_tree(k: int, planes: int = 1) -> Clos:
    c = Clos.fat_tree(int(k), planes=int(planes))
    return c.wire(wire(c))


topos = {"routers": lambda s=2, l=2, h=2, p=1: RoutersTopo(fabric=leaf_spine(s, l, h, p)),
         "fattree-routers": lambda k=4: RoutersTopo(fabric=fat_tree(k))}
