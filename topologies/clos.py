"""The leaf-spine (two-layer Clos) fabric in Mininet, built from the same fabric model the
controller reads, so names, datapath ids, ports and addresses match by construction.

    mn --custom topologies/clos.py --topo clos,4,8,2 --controller remote
    mn --custom topologies/clos.py --topo fattree,4 --controller remote
    mn --custom topologies/clos.py --topo planes,2,2,4,1 --controller remote
    python -m topologies.clos --spines 4 --leaves 8 --hosts-per-leaf 2 --bw 10 --out fabric.json
    python -m topologies.clos --fat-tree 4 --bw 10 --out fattree.json

``clos,S,L,H[,BW]``: S spines, L leaves, H hosts per leaf, every link shaped to BW Mbit/s with
HTB (0 or absent: unshaped). ``fattree,K[,H[,BW]]``: a k-ary fat-tree (``model.clos``): k pods
of k/2 leaves and k/2 aggregation switches, (k/2)^2 cores, H hosts per leaf (k/2 by default),
hosts listed pod by pod, names, datapath ids and ports as ``Clos.wire`` declares.
``planes,P,S,L,H[,BW]``: a leaf-spine of P planes, every host with one interface, address and
MAC per plane (``eth<q>`` in plane q's 10.<16q>.0.0/12). Hosts answer ARP only on the
interface that holds the address and ask with the asking interface's address
(``arp_ignore=1``, ``arp_announce=2``): a plane sees only its own addresses.

The topology brings its own node classes, so ``mn`` needs no
``--switch``, ``--host`` or ``--link``: switches are ``ClosSwitch`` (Open vSwitch userspace
datapath, OpenFlow 1.3, secure fail mode, port MTU 1600 so that segment routing's two MPLS
labels fit), hosts are ``ClosHost`` (tx checksum offload off, without which TCP gets nothing
through a userspace switch; MTU 1500; IPv6 off), shaped links are ``ShapedLink`` (Mininet's
HTB, each interface configured in one command). The node classes are also registered for
``--switch mlroute`` and ``--host mlroute``. The fabric file written by the second command is
what ``mlroute-controller --mlroute-fabric`` and ``PUT /v1/fabric`` take.

Every switch samples packets with sFlow for the controller to learn what jobs send (1 in
``SFLOW_SAMPLING`` packets, 128 header bytes, to 127.0.0.1:6343; no flow entry involved).
``--topo clos,S,L,H,BW,sflow=N`` or the environment variable ``MLROUTE_SFLOW_SAMPLING=N``
changes the rate, 0 turns sampling off; ``MLROUTE_SFLOW_TARGET=host:port[,host:port...]`` the
collectors (redundant controllers on one host: one port each, every switch sends to all).

This file runs under ``mn``'s own Python (Debian's /usr/bin/python3): it imports only the
standard library, Mininet and the standard-library-only ``controller.model.clos`` (with the
``controller.model`` modules it imports).
"""
from __future__ import annotations

import argparse
import inspect
import ipaddress
import json
import os
import sys

# `mn --custom` runs this file with exec() and no __file__; the code object still knows its path
_HERE = os.path.abspath(inspect.currentframe().f_code.co_filename)
sys.path.insert(0, os.path.dirname(os.path.dirname(_HERE)))

from controller.errors import InputError  # noqa: E402
from controller.jsonio import HelpFormatter, write_output  # noqa: E402
from controller.model.clos import Clos  # noqa: E402

try:
    from mininet.link import Intf, TCIntf, TCLink
    from mininet.log import error, info
    from mininet.node import Host, OVSSwitch, RemoteController
    from mininet.topo import Topo
except ImportError:  # writing fabric files does not need Mininet
    Topo = Host = OVSSwitch = RemoteController = TCIntf = TCLink = object

HOST_MTU = 1500
SWITCH_MTU = 1600  # >= host MTU + 8: two MPLS labels (segment routing) must still fit

# 1 in 16: on the 5-20 Mbit/s links of the emulation a saturated link forwards 70-280 jumbo
# frames (417-1667 frames of 1500 bytes) a second, so a flow crossing leaf, spine and leaf gets
# 26-104 samples (156-625 at MTU 1500) per 2-second learning window, far above the 4 a steady
# pattern needs, while ovs-vswitchd handles a few thousand samples a second at most.
SFLOW_SAMPLING = 16
SFLOW_TARGET = "127.0.0.1:6343"
SFLOW_HEADER = 128  # bytes of each sampled packet: Ethernet, two MPLS labels, IPv4, ports
# The emulation harness's mark (``emulation.harness.owned``): a process of the harness has its
# token in this environment variable, and a switch it starts carries the token in its bridge's
# external_ids, so that the harness's cleanup removes what it made and nothing else.
OWNER_ENV = "MLROUTE_EMULATION"
OWNER_KEY = "mlroute-emulation"


def _sflow_setting(value, env: str, default):
    """A topology argument, else the environment variable, else the default."""
    return value if value is not None else os.environ.get(env) or default


def sflow_sampling(value=None) -> int:
    """The sampling rate (1 in N packets; 0: off), checked."""
    raw = _sflow_setting(value, "MLROUTE_SFLOW_SAMPLING", SFLOW_SAMPLING)
    try:
        n = int(raw)
    except (TypeError, ValueError):
        n = -1
    if n < 0 or str(raw).strip() not in (str(n), f"{n}.0"):
        raise ValueError(f"sFlow sampling must be a whole number >= 0 (1 in N packets, 0: off), "
                         f"not {raw!r} (MLROUTE_SFLOW_SAMPLING or --topo ...,sflow=N)")
    return n


def sflow_target(value=None) -> str:
    """The collectors' host:port (IPv4), comma-separated (redundant controllers each have a
    collector: every switch sends its samples to all of them), checked.

    >>> sflow_target("127.0.0.1:6343, 127.0.0.1:6344")
    '127.0.0.1:6343,127.0.0.1:6344'
    """
    raw = str(_sflow_setting(value, "MLROUTE_SFLOW_TARGET", SFLOW_TARGET))
    targets = [t.strip() for t in raw.split(",")]
    for t in targets:
        host, _, port = t.rpartition(":")
        parts = host.split(".")
        if not (len(parts) == 4 and all(p.isdigit() and int(p) < 256 for p in parts)
                and port.isdigit() and 0 < int(port) < 65536):
            raise ValueError(f"sFlow target must be IPv4:port, e.g. {SFLOW_TARGET}, or several "
                             f"separated by commas, not {raw!r} (MLROUTE_SFLOW_TARGET)")
    return ",".join(targets)


def sflow_agent(dpid: int) -> str:
    """The agent address a switch reports: 127.0.0.0/8 plus its datapath id's low 24 bits
    (spine j: 127.1.0.j, leaf i: 127.2.0.i), so samples say which switch took them, as a real
    switch's management address would."""
    return f"127.{(dpid >> 16) & 255}.{(dpid >> 8) & 255}.{dpid & 255}"


def host_network(fabric, plane: int = 0) -> str:
    """The network of the hosts' interfaces in ``plane`` as these topologies address them:
    10.0.0.0/8 with one plane, plane q's own 10.<16q>.0.0/12 with several (what a framework
    told which network to use binds to: Open MPI's ``btl_tcp_if_include``).

    >>> host_network(Clos.leaf_spine(2, 2, 1, planes=2).wire(), 1)
    '10.16.0.0/12'
    """
    prefix = 8 if fabric.plane_count <= 1 else 12
    some = next(iter(fabric.host_ip))
    return f"{ipaddress.ip_network(f'{fabric.ip_of(some, plane)}/{prefix}', strict=False)}"


def clos_fabric(spines: int, leaves: int, hosts_per_leaf: int, bw_mbps: float = 0) -> Clos:
    """The wired model of a leaf-spine topology (``Clos.generate``); link_gbps is the shaped
    rate (100 if unshaped)."""
    gbps = bw_mbps / 1000 if bw_mbps else 100.0
    return Clos.generate(spines, leaves, hosts_per_leaf, gbps, wiring=True)


class ClosSwitch(OVSSwitch):
    """Open vSwitch as these machines need it (environment.md section 4): the userspace
    datapath (there is no kernel module), OpenFlow 1.3 only, secure fail mode (no flooding, so
    the Clos loops do no harm), every port at ``mtu`` bytes, set on the veth before OVS
    opens it and requested from OVS in the same transaction that adds the port, and sFlow
    sampling 1 in ``sflow`` packets toward ``sflow_collector`` (module docstring)."""

    def __init__(self, name, datapath="user", protocols="OpenFlow13", failMode="secure",
                 mtu=SWITCH_MTU, sflow=None, sflow_collector=None, **params):
        self.mtu = int(mtu)
        self.sflow_sampling = sflow_sampling(sflow)
        self.sflow_target = sflow_target(sflow_collector)
        super().__init__(name, datapath=datapath, protocols=protocols, failMode=failMode,
                         **params)

    def intfOpts(self, intf):
        opts = super().intfOpts(intf)
        return (opts or f" -- set Interface {intf}") + f" mtu_request={self.mtu}"

    def bridgeOpts(self):
        """Mininet's, and the harness's mark when a harness started it (``OWNER_ENV``), in
        the transaction that adds the bridge: no window in which it exists unmarked."""
        owner = os.environ.get(OWNER_ENV)
        return super().bridgeOpts() + (f" external_ids:{OWNER_KEY}={owner}"
                                       if owner and owner.replace("-", "").isdigit() else "")

    def start(self, controllers):
        self.cmd("; ".join(f"ip link set dev {intf.name} mtu {self.mtu}"
                           for intf in self.intfList() if intf.name != "lo") or "true")
        super().start(controllers)
        if self.sflow_sampling:
            targets = ",".join(f'\\"{t}\\"' for t in self.sflow_target.split(","))
            # queued behind add-br when Mininet starts switches in one batch, else run now
            self.vsctl(f"-- --id=@sflow_{self.name} create sflow "
                       f"agent={sflow_agent(int(self.dpid, 16))} "
                       f"targets={targets} header={SFLOW_HEADER} "
                       f"sampling={self.sflow_sampling} polling=0 "
                       f"-- set bridge {self.name} sflow=@sflow_{self.name}")


class ClosHost(Host):
    """A host whose TCP works through a userspace switch: tx checksum offload off (otherwise
    segments leave with unfilled checksums and ping works while TCP gets 0 bit/s), MTU
    ``mtu``, IPv6 off (its router solicitations are noise on the fabric), ARP answered and asked
    per interface (several planes)."""

    def config(self, mtu=HOST_MTU, **params):
        r = super().config(**params)
        cmds = [f"ethtool -K {intf.name} tx off >/dev/null 2>&1; "
                f"ip link set dev {intf.name} mtu {int(mtu)}"
                for intf in self.intfList() if intf.name != "lo"]
        self.cmd("; ".join(cmds + [  # one command for the node
            "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 "
            "net.ipv6.conf.default.disable_ipv6=1 "  # ARP per interface (planes):
            "net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2"]))
        return r


class ShapedIntf(TCIntf):
    """Mininet's ``TCIntf`` with its default shaping (a root HTB, class 5:1 at ``bw``
    Mbit/s; ``TCIntf.bwCmds``'s own commands) and, given ``queue_bytes``, a byte FIFO of that
    size under the class (the default queue is txqueuelen packets: 9 MB of jumbo frames,
    14 s at 5 Mbit/s), configured in one command line: ``TCIntf`` runs each tc command (and
    asks for the qdisc first) as a command of its own, and every command is a round trip to
    the node's shell (half the commands of a fabric's build). Other ``TCIntf`` options (delay,
    loss, the other schedulers) take ``TCIntf``'s way."""

    strict = False  # a failed tc command: Mininet's error line (True: RuntimeError)

    def config(self, bw=None, queue_bytes=None, gro=False, txo=True, rxo=True, **params):
        if any(params.get(k) for k in TC_ONLY):
            return super().config(bw=bw, gro=gro, txo=txo, rxo=rxo, **params)
        r = Intf.config(self, **{k: v for k, v in params.items() if k not in TC_ONLY})

        def on(flag):
            return "on" if flag else "off"
        cmds = [f"ethtool -K {self.name} gro {on(gro)} tx {on(txo)} rx {on(rxo)} >/dev/null 2>&1"]
        if bw is not None:
            tc, r["parent"] = self.tc_lines(float(bw), queue_bytes, **params)
            cmds += tc
        out = self.cmd("; ".join(cmds))
        if out.strip() and self.strict:
            raise RuntimeError(f"{self.name}: tc failed: {out.strip()[-300:]}")
        if out.strip():
            error(f"*** Error: {out}")
        return r

    def tc_lines(self, bw: float, queue_bytes=None, **params) -> tuple[list[str], str]:
        """The shell commands that shape this port to ``bw`` Mbit/s (Mininet's HTB, then the
        byte FIFO) and the parent its queue hangs from: what a subclass overrides to queue
        differently (``topologies.routers.PriorityIntf``)."""
        tc, parent = self.bwCmds(bw=bw)
        if not tc:
            return [], parent
        info(f"({bw:.2f}Mbit) ")
        n = self.name
        return ([f"tc qdisc del dev {n} root >/dev/null 2>&1"] + [c % ("tc", n) for c in tc]
                + ([f"tc qdisc replace dev {n}{parent}handle 10: bfifo limit {int(queue_bytes)}"]
                   if queue_bytes else [])), parent


# TCIntf options ShapedIntf leaves to TCIntf
TC_ONLY = ("delay", "jitter", "loss", "max_queue_size", "speedup", "use_hfsc", "use_tbf",
           "latency_ms", "enable_ecn", "enable_red")


class ShapedLink(TCLink):
    """A link of two ``ShapedIntf``: what the topologies use for shaped links."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("cls1", ShapedIntf)
        kwargs.setdefault("cls2", ShapedIntf)
        super().__init__(*args, **kwargs)


def shaped(bw, queue_bytes=None) -> dict:
    """The link options of a topology: ``ShapedLink`` at ``bw`` Mbit/s (with a byte FIFO of
    ``queue_bytes``), nothing when ``bw`` is 0 (unshaped)."""
    if not float(bw):
        return {}
    return {"bw": float(bw), "cls": ShapedLink, **({"queue_bytes": int(queue_bytes)}
                                                    if queue_bytes else {})}


class ClosTopo(Topo):
    """Spines s<j>, leaves l<i>, hosts h<i>_<k>, with explicit port numbers and addresses, and
    the node and link classes the fabric needs (so ``mn`` options cannot get them wrong)."""

    def build(self, spines=4, leaves=8, hosts_per_leaf=2, bw=0, fabric: Clos | None = None,
              host_mtu=HOST_MTU, switch_mtu=SWITCH_MTU, sflow=None, sflow_collector=None,
              queue_bytes=None):
        f = fabric or clos_fabric(int(spines), int(leaves), int(hosts_per_leaf), float(bw))
        link = shaped(bw, queue_bytes)
        sampling = sflow_sampling(sflow)
        spine_names = f.planes[0].aggs[0]  # the spines of its one two-tier plane
        for sw in spine_names + f.leaves:
            self.addSwitch(sw, cls=ClosSwitch, dpid=f"{f.dpids[sw]:016x}", mtu=int(switch_mtu),
                           sflow=sampling, sflow_collector=sflow_collector)
        for leaf in f.leaves:
            for spine in spine_names:
                self.addLink(leaf, spine, port1=f.port(leaf, spine), port2=f.port(spine, leaf),
                             **link)
            for h in f.hosts_of_leaf.get(leaf, []):
                self.addHost(h, cls=ClosHost, ip=f"{f.host_ip[h]}/8", mac=f.host_mac[h],
                             mtu=int(host_mtu))
                self.addLink(h, leaf, port2=f.port(leaf, h), **link)


def fattree_fabric(k: int, hosts_per_leaf: int | None = None, bw_mbps: float = 0) -> Clos:
    """The wired fat-tree model; link_gbps is the shaped rate (100 if unshaped)."""
    gbps = bw_mbps / 1000 if bw_mbps else 100.0
    return Clos.fat_tree(int(k), None if hosts_per_leaf is None else int(hosts_per_leaf),
                         gbps).wire()


class WiredClosTopo(Topo):
    """Any wired ``Clos`` (``Clos.wire``): every switch with its datapath id, every link with
    its ports, hosts in the model's order. With several planes a host has one interface per
    plane (``eth<q>`` to its plane-q leaf, with that plane's address and MAC, each plane its
    own /12): the host picks the plane by the destination address. A bundle is one link per
    member, on the member's ports at both ends."""

    def build(self, fabric: Clos, bw=0, host_mtu=HOST_MTU, switch_mtu=SWITCH_MTU, sflow=None,
              sflow_collector=None, queue_bytes=None):
        f = fabric
        link = shaped(bw, queue_bytes)
        sampling = sflow_sampling(sflow)
        for sw in f.dpids:
            self.addSwitch(sw, cls=ClosSwitch, dpid=f"{f.dpids[sw]:016x}", mtu=int(switch_mtu),
                           sflow=sampling, sflow_collector=sflow_collector)
        prefix = host_network(f).split("/")[1]
        for h in f.host_leaves:
            self.addHost(h, cls=ClosHost, ip=f"{f.ip_of(h)}/{prefix}", mac=f.mac_of(h),
                         mtu=int(host_mtu))
        for sw in f.dpids:  # every link once, from its lower end (hosts from their leaf)
            for peer in f.neighbours(sw):
                if peer in f.host_leaves:
                    q = f.plane_of[sw]
                    self.addLink(peer, sw, port1=q, port2=f.port(sw, peer),
                                 addr1=f.mac_of(peer, q),
                                 params1={"ip": f"{f.ip_of(peer, q)}/{prefix}"}, **link)
                elif f.tier_of[peer] > f.tier_of[sw]:
                    for p1, p2 in zip(f.ports_to(sw, peer), f.ports_to(peer, sw)):
                        self.addLink(sw, peer, port1=p1, port2=p2, **link)


class FatTreeTopo(WiredClosTopo):
    """A k-ary fat-tree: leaves l<i>, aggregation switches a<pod>_<slot>, cores c<group>_<j>,
    hosts h<i>_<m> pod by pod, with the ports and addresses of ``Clos.wire``."""

    def build(self, k=4, hosts_per_leaf=None, bw=0, fabric: Clos | None = None, **params):
        super().build(fabric or fattree_fabric(int(k), hosts_per_leaf, float(bw)), bw, **params)


def planes_fabric(planes: int, spines: int, leaves: int, hosts_per_leaf: int,
                  bw_mbps: float = 0, bundle: int = 1) -> Clos:
    """The wired model of a leaf-spine of several planes (names end in ``_p<q>``), every
    leaf-spine pair joined by ``bundle`` links."""
    gbps = bw_mbps / 1000 if bw_mbps else 100.0
    return Clos.leaf_spine(int(spines), int(leaves), int(hosts_per_leaf), gbps,
                           planes=int(planes), bundle=int(bundle)).wire()


class PlanesTopo(WiredClosTopo):
    """A leaf-spine of P planes: in plane q spines s<j>_p<q> and leaves l<i>_p<q>; host
    h<i>_<m> on leaf l<i> of every plane, one interface each (``WiredClosTopo``)."""

    def build(self, planes=2, spines=2, leaves=4, hosts_per_leaf=1, bw=0,
              fabric: Clos | None = None, **params):
        super().build(fabric or planes_fabric(planes, spines, leaves, hosts_per_leaf,
                                              float(bw)), bw, **params)


class BundlesTopo(WiredClosTopo):
    """A leaf-spine whose every leaf-spine pair is joined by B parallel links (a bundle),
    the ports of ``Clos.wire``: a bundle's members on consecutive ports."""

    def build(self, spines=2, leaves=4, hosts_per_leaf=1, bundle=2, bw=0,
              fabric: Clos | None = None, **params):
        super().build(fabric or planes_fabric(1, spines, leaves, hosts_per_leaf, float(bw),
                                              int(bundle)), bw, **params)


class UncheckedRemoteController(RemoteController):
    """Mininet's ``RemoteController`` without its start-up check: the check reads the
    controller's answer through telnet and decodes it as UTF-8, and the OpenFlow HELLO a
    controller may send first (a random transaction id) raised UnicodeDecodeError out of
    ``mn`` and out of ``Mininet()`` (seen in CI, a tutorial's ``mn --custom``). The check only
    warns: a controller that is not listening shows as switches that never connect."""

    def checkListening(self) -> None:
        pass


# what `mn --custom` reads: --topo clos,S,L,H[,BW], fattree,K[,H[,BW]], planes,P,S,L,H[,BW]
# or bundles,S,L,H,B[,BW], --switch mlroute, --host mlroute; --controller remote,... is
# Mininet's without the start-up check above
topos = {"clos": ClosTopo, "fattree": FatTreeTopo, "planes": PlanesTopo, "bundles": BundlesTopo}
switches = {"mlroute": ClosSwitch}
hosts = {"mlroute": ClosHost}
controllers = {"remote": UncheckedRemoteController}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m topologies.clos", formatter_class=HelpFormatter,
                                 description="Write the fabric file of a Clos topology with its "
                                             "wiring (what the Mininet topology builds), for "
                                             "--mlroute-fabric and PUT /v1/fabric: the "
                                             "emulation's builder (mlroute fabric --wired "
                                             "writes the same; a real fabric: mlroute fabric "
                                             "--cabling).")
    ap.add_argument("--spines", type=int, default=4, help="spines (per plane)")
    ap.add_argument("--leaves", type=int, default=8, help="leaves (per plane)")
    ap.add_argument("--hosts-per-leaf", type=int, default=2, help="hosts per leaf")
    ap.add_argument("--bw", type=float, default=0, help="Mbit/s per link (0: unshaped)")
    ap.add_argument("--fat-tree", type=int, metavar="K",
                    help="a k-ary fat-tree instead (--hosts-per-leaf: k/2 unless given)")
    ap.add_argument("--planes", type=int, default=1,
                    help="a leaf-spine of this many planes (names end in _p<q>; hosts have "
                         "one address per plane)")
    ap.add_argument("--bundle", type=int, default=1,
                    help="links between every leaf-spine pair (a bundle; leaf-spine only)")
    ap.add_argument("--out", metavar="FILE",
                    help="write the fabric to FILE and print one line saying so (default: print "
                         "it)")
    args = ap.parse_args(argv)
    if args.planes < 1 or args.bundle < 1:
        ap.error("--planes and --bundle must be at least 1")
    if args.fat_tree and args.bundle > 1:
        ap.error("--bundle is for a leaf-spine (--spines, --leaves), not --fat-tree")
    if args.fat_tree and args.planes > 1:
        ap.error("--planes is for a leaf-spine (--spines, --leaves), not --fat-tree")
    if args.fat_tree:
        hpl = args.hosts_per_leaf if "--hosts-per-leaf" in (argv or sys.argv) else None
        fabric = fattree_fabric(args.fat_tree, hpl, args.bw)
    elif args.planes > 1 or args.bundle > 1:
        fabric = planes_fabric(args.planes, args.spines, args.leaves, args.hosts_per_leaf,
                               args.bw, args.bundle)
    else:
        fabric = clos_fabric(args.spines, args.leaves, args.hosts_per_leaf, args.bw)
    doc = fabric.to_dict()
    switches = len(doc.get("dpids", {}))
    try:
        write_output(json.dumps(doc, indent=1), args.out,
                     f"{switches} switches, {len(doc['host_ip'])} hosts, wired (dpids, ports, "
                     "addresses)")
    except InputError as e:
        ap.error(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
