"""The leaf-spine (two-layer Clos) fabric in Mininet, built from the same fabric model the
controller reads, so names, datapath ids, ports and addresses match by construction.

    mn --custom topologies/clos.py --topo clos,4,8,2 --switch ovs,datapath=user,protocols=OpenFlow13 \\
       --controller remote --link tc
    python -m topologies.clos --spines 4 --leaves 8 --hosts-per-leaf 2 --bw 10 --out fabric.json

``clos,S,L,H[,BW]``: S spines, L leaves, H hosts per leaf, every link shaped to BW Mbit/s
(0 or absent: unshaped). The fabric file written by the second command is what
``ryu-manager ... --mlroute-fabric`` and ``PUT /v1/fabric`` take.
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

from controller.fabric import Fabric  # noqa: E402
from controller.jsonio import write_output  # noqa: E402

try:
    from mininet.topo import Topo
except ImportError:  # writing fabric files does not need Mininet
    Topo = object


def clos_fabric(spines: int, leaves: int, hosts_per_leaf: int, bw_mbps: float = 0) -> Fabric:
    """The fabric model of a Clos topology; link_gbps is the shaped rate (100 if unshaped)."""
    gbps = bw_mbps / 1000 if bw_mbps else 100.0
    return Fabric.generate(spines, leaves, hosts_per_leaf, gbps, wiring=True)


class ClosTopo(Topo):
    """Spines s<j>, leaves l<i>, hosts h<i>_<k>, with explicit port numbers and addresses."""

    def build(self, spines=4, leaves=8, hosts_per_leaf=2, bw=0, fabric: Fabric | None = None):
        f = fabric or clos_fabric(int(spines), int(leaves), int(hosts_per_leaf), float(bw))
        link = {"bw": float(bw)} if float(bw) else {}
        for sw in f.spines + f.leaves:
            self.addSwitch(sw, dpid=f"{f.dpids[sw]:016x}", protocols="OpenFlow13",
                           datapath="user", failMode="secure")
        for leaf in f.leaves:
            for spine in f.spines:
                self.addLink(leaf, spine, port1=f.port(leaf, spine), port2=f.port(spine, leaf),
                             **link)
            for h in f.hosts_of_leaf[leaf]:
                self.addHost(h, ip=f"{f.host_ip[h]}/8", mac=f.host_mac[h])
                self.addLink(h, leaf, port2=f.port(leaf, h), **link)


topos = {"clos": ClosTopo}


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
