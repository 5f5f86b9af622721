"""The leaf-spine (two-layer Clos) fabric in Mininet, built from the same fabric model the
controller reads, so names, datapath ids, ports and addresses match by construction.

    mn --custom topologies/clos.py --topo clos,4,8,2 --controller remote
    python -m topologies.clos --spines 4 --leaves 8 --hosts-per-leaf 2 --bw 10 --out fabric.json

``clos,S,L,H[,BW]``: S spines, L leaves, H hosts per leaf, every link shaped to BW Mbit/s with
HTB (0 or absent: unshaped). The topology brings its own node classes, so ``mn`` needs no
``--switch``, ``--host`` or ``--link``: switches are ``ClosSwitch`` (Open vSwitch userspace
datapath, OpenFlow 1.3, secure fail mode, port MTU 1600 so that segment routing's two MPLS
labels fit), hosts are ``ClosHost`` (tx checksum offload off, without which TCP gets nothing
through a userspace switch; MTU 1500; IPv6 off). Both are also registered for
``--switch mlroute`` and ``--host mlroute``. The fabric file written by the second command is
what ``ryu-manager ... --mlroute-fabric`` and ``PUT /v1/fabric`` take.

This file runs under ``mn``'s own Python (Debian's /usr/bin/python3): it imports only the
standard library, Mininet and the standard-library-only ``controller.model.fabric``.
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import sys

# `mn --custom` runs this file with exec() and no __file__; the code object still knows its path
_HERE = os.path.abspath(inspect.currentframe().f_code.co_filename)
sys.path.insert(0, os.path.dirname(os.path.dirname(_HERE)))

from controller.model.fabric import Fabric  # noqa: E402
from controller.jsonio import write_output  # noqa: E402

try:
    from mininet.link import TCLink
    from mininet.node import Host, OVSSwitch
    from mininet.topo import Topo
except ImportError:  # writing fabric files does not need Mininet
    Topo = Host = OVSSwitch = object
    TCLink = None

HOST_MTU = 1500
SWITCH_MTU = 1600  # >= host MTU + 8: two MPLS labels (segment routing) must still fit


def clos_fabric(spines: int, leaves: int, hosts_per_leaf: int, bw_mbps: float = 0) -> Fabric:
    """The fabric model of a Clos topology; link_gbps is the shaped rate (100 if unshaped)."""
    gbps = bw_mbps / 1000 if bw_mbps else 100.0
    return Fabric.generate(spines, leaves, hosts_per_leaf, gbps, wiring=True)


class ClosSwitch(OVSSwitch):
    """Open vSwitch as these machines need it (environment.md section 4): the userspace
    datapath (there is no kernel module), OpenFlow 1.3 only, secure fail mode (no flooding, so
    the Clos loops do no harm) and every port at ``mtu`` bytes, set on the veth before OVS
    opens it and requested from OVS in the same transaction that adds the port."""

    def __init__(self, name, datapath="user", protocols="OpenFlow13", failMode="secure",
                 mtu=SWITCH_MTU, **params):
        self.mtu = int(mtu)
        super().__init__(name, datapath=datapath, protocols=protocols, failMode=failMode,
                         **params)

    def intfOpts(self, intf):
        opts = super().intfOpts(intf)
        return (opts or f" -- set Interface {intf}") + f" mtu_request={self.mtu}"

    def start(self, controllers):
        for intf in self.intfList():
            if intf.name != "lo":
                self.cmd(f"ip link set dev {intf.name} mtu {self.mtu}")
        super().start(controllers)


class ClosHost(Host):
    """A host whose TCP works through a userspace switch: tx checksum offload off (otherwise
    segments leave with unfilled checksums and ping works while TCP gets 0 bit/s), MTU
    ``mtu``, IPv6 off (its router solicitations are noise on the fabric)."""

    def config(self, mtu=HOST_MTU, **params):
        r = super().config(**params)
        for intf in self.intfList():
            if intf.name != "lo":
                self.cmd(f"ethtool -K {intf.name} tx off >/dev/null 2>&1")
                self.cmd(f"ip link set dev {intf.name} mtu {int(mtu)}")
        self.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 "
                 "net.ipv6.conf.default.disable_ipv6=1")
        return r


class ClosTopo(Topo):
    """Spines s<j>, leaves l<i>, hosts h<i>_<k>, with explicit port numbers and addresses, and
    the node and link classes the fabric needs (so ``mn`` options cannot get them wrong)."""

    def build(self, spines=4, leaves=8, hosts_per_leaf=2, bw=0, fabric: Fabric | None = None,
              host_mtu=HOST_MTU, switch_mtu=SWITCH_MTU):
        f = fabric or clos_fabric(int(spines), int(leaves), int(hosts_per_leaf), float(bw))
        link = {"bw": float(bw), "cls": TCLink} if float(bw) else {}
        for sw in f.spines + f.leaves:
            self.addSwitch(sw, cls=ClosSwitch, dpid=f"{f.dpids[sw]:016x}", mtu=int(switch_mtu))
        for leaf in f.leaves:
            for spine in f.spines:
                self.addLink(leaf, spine, port1=f.port(leaf, spine), port2=f.port(spine, leaf),
                             **link)
            for h in f.hosts_of_leaf[leaf]:
                self.addHost(h, cls=ClosHost, ip=f"{f.host_ip[h]}/8", mac=f.host_mac[h],
                             mtu=int(host_mtu))
                self.addLink(h, leaf, port2=f.port(leaf, h), **link)


# what `mn --custom` reads: --topo clos,S,L,H[,BW], --switch mlroute, --host mlroute
topos = {"clos": ClosTopo}
switches = {"mlroute": ClosSwitch}
hosts = {"mlroute": ClosHost}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m topologies.clos",
                                 description="write the fabric file of a Clos topology")
    ap.add_argument("--spines", type=int, default=4)
    ap.add_argument("--leaves", type=int, default=8)
    ap.add_argument("--hosts-per-leaf", type=int, default=2)
    ap.add_argument("--bw", type=float, default=0, help="Mbit/s per link (0: unshaped)")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    write_output(json.dumps(clos_fabric(args.spines, args.leaves, args.hosts_per_leaf,
                                        args.bw).to_dict(), indent=1), args.out, echo=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
