"""``mlroute fabric``: write a fabric document, generated from a shape (leaf-spine, planes,
bundles, fat-tree, an Alibaba-style host-location table) or declared from a real fabric's
cabling table and host table (``model.cabling``: ports, names and addresses as cabled, the
document ``mlroute srv6-config`` and the controller read). ``--wired`` adds to a generated
fabric the wiring ``topologies/clos.py`` builds (``clos_wiring.wire``)."""
from __future__ import annotations

from controller.errors import InputError
from controller.jsonio import HelpFormatter
from controller.model.clos import Clos
from controller.model.hosttable import Shape

LINE = "write a fabric as JSON: leaf-spine, planes, bundles, fat-tree, host or cabling table"
DESCRIPTION = ("Write a fabric document: a regular leaf-spine (--spines, --leaves, "
               "--hosts-per-leaf, optionally failed spines, several planes or bundles), a "
               "k-ary fat-tree (--fat-tree K), a three-tier fabric from a host-location "
               "table (--host-table), or a real fabric as cabled (--cabling and --hosts: its "
               "ports, interface names and host addresses; docs/howto/router-fabric.md).")
# a leaf-spine's shape when ``fabric`` is not told (None on the command line: a fat-tree or a
# host table has its own)
LEAF_SPINE = {"spines": 4, "leaves": 8, "hosts_per_leaf": 2}


def add_command(sub, line: str, description: str) -> None:
    fab = sub.add_parser("fabric", help=line, description=description,
                         formatter_class=HelpFormatter)
    fab.add_argument("--spines", type=int,
                     help=f"spines per plane (default: {LEAF_SPINE['spines']})")
    fab.add_argument("--leaves", type=int,
                     help=f"leaves per plane (default: {LEAF_SPINE['leaves']})")
    fab.add_argument("--hosts-per-leaf", type=int,
                     help=f"hosts per leaf (default: {LEAF_SPINE['hosts_per_leaf']}; k/2 on a "
                          "fat-tree)")
    fab.add_argument("--gbps", type=float, default=100.0, help="link speed, every tier")
    fab.add_argument("--failed-spines", type=int, default=0, metavar="K",
                     help="fail the K highest spine ids")
    fab.add_argument("--fat-tree", type=int, metavar="K",
                     help="a k-ary fat-tree: k pods of k/2 leaves and k/2 aggregation "
                          "switches, (k/2)^2 cores")
    fab.add_argument("--planes", type=int, default=1,
                     help="independent planes, every host one port into each")
    fab.add_argument("--bundle", type=int, default=1,
                     help="links between every leaf and spine (leaf-spine only)")
    fab.add_argument("--host-table", metavar="CSV",
                     help="a three-tier fabric from a host-location table (columns ip, DSW, "
                          "PSW, ASW: host, core group, pod, ToR), e.g. "
                          "data/traces/lingjun-topo.csv")
    fab.add_argument("--aggs-per-pod", type=int,
                     help="with --host-table: aggregation switches per pod (default: "
                          f"{Shape.aggs_per_pod})")
    fab.add_argument("--cores-per-group", type=int,
                     help=f"with --host-table: cores per group (default: {Shape.cores_per_group})")
    fab.add_argument("--cabling", metavar="FILE",
                     help="a real fabric's cabling table or LLDP neighbour list (CSV or JSON: "
                          "switch, interface, peer, peer_interface), with --hosts")
    fab.add_argument("--hosts", metavar="FILE",
                     help="with --cabling: the host table (CSV or JSON: host, address, leaf, "
                          "interface: the leaf's port; optional host_interface, mac)")
    fab.add_argument("--wired", action="store_true",
                     help="add the wiring topologies/clos.py builds (datapath ids, ports, "
                          "addresses) to a generated fabric")
    fab.add_argument("--out", metavar="FILE",
                     help="write the fabric to FILE and print one line saying so (default: "
                          "print the fabric)")


def make_fabric(args) -> Clos:
    """The fabric the ``fabric`` command's options describe."""
    if (args.cabling is None) != (args.hosts is None):
        raise InputError("--cabling and --hosts go together: the cables and the hosts")
    if args.cabling is not None:
        from controller.model.cabling import load
        if args.wired or args.fat_tree is not None or args.host_table is not None:
            raise InputError("--cabling declares the fabric as cabled: drop --wired, "
                             "--fat-tree and --host-table")
        return load(args.cabling, args.hosts, args.gbps)
    fabric = _generated(args)
    return fabric.wire() if args.wired else fabric


def _generated(args) -> Clos:
    if args.host_table is not None:
        from controller.model.hosttable import load
        shape = Shape(**{k: v for k, v in (("aggs_per_pod", args.aggs_per_pod),
                                           ("cores_per_group", args.cores_per_group))
                         if v is not None})
        try:
            return load(args.host_table, shape)
        except OSError as e:
            raise InputError(f"host table {args.host_table}: {e.strerror}") from None
    if args.fat_tree is not None:
        if args.spines is not None or args.leaves is not None or args.failed_spines:
            raise InputError("--fat-tree K fixes the switches: drop --spines, --leaves and "
                             "--failed-spines")
        return Clos.fat_tree(args.fat_tree, args.hosts_per_leaf, args.gbps, args.planes)
    spines, leaves, hpl = (LEAF_SPINE[k] if getattr(args, k) is None else getattr(args, k)
                           for k in LEAF_SPINE)
    if args.planes > 1 or args.bundle > 1:
        if args.failed_spines:
            raise InputError("--failed-spines applies to single-plane fabrics without bundles")
        return Clos.leaf_spine(spines, leaves, hpl, args.gbps, args.planes, args.bundle)
    return Clos.generate(spines, leaves, hpl, args.gbps, args.failed_spines)


def summary(fabric: Clos) -> str:
    """What ``--out`` prints: the shape, and how the document is wired."""
    if not fabric.wired:
        return fabric.summary()
    named = " and interface names" if fabric.wiring.get("interfaces") else ""
    return f"{fabric.summary()}; wired (ports, addresses{named})"
