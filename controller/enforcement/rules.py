"""The conventions every rule builder shares (``clos_rules``, ``clos_labels``,
``clos_hostmode``): tables, priorities, cookies, the 5-tuple match of a planned flow, the
source ports of a split flow's parts, and host mode's source-port buckets.

Tables: 0 classifies (``T_CLASSIFY``); 1 delivers to a local host (``T_DELIVER``) and, on a
leaf, forwards the IPv4 its host ports let in (``source_check``: a host port admits its own
host's source address only); 2 drops and counts what a host port refused (``T_FORGED``); 3 and
up are host mode's per-destination classes (``T_HOST_CLASS``). Priorities, highest first: LLDP
to the controller, ARP to the controller and host mode's probe trap, MPLS labels, planned flows
(plus the number of matched fields: they match the host's port and address already), a host
port's own source and then its others, local delivery, drops of what comes down from above,
host mode's classes and buckets, unplanned traffic to a leaf some uplinks cannot reach, the
default select group (ECMP).

Every fabric is served as a ``model.clos.Clos`` (a leaf-spine is one plane of one pod whose
aggregation switches are its spines): its static entries are ``clos_rules.clos_static_rules``,
its per-flow entries ``clos_rules.clos_flow_rules`` (``flow`` mode: the 5-tuple out to the
planned next hop where the path branches; ``sr``: the destination leaf's label, between pods
the core's on top), and ``host`` mode's pipeline ``clos_hostmode.clos_host_static_rules``: the
leaves choose the uplink of TCP and RoCEv2 (UDP to 4791) packets from their hosts by the low
bits of the source port (``sport_entries``: masked matches, an ECMP hash configured on the
source port, as RoCE fabrics configure theirs), and the switches above trap packets with the
probe mark (IP DSCP 59), from which the controller learns which spine each source port takes
(``controller/enforcement/hostmode.py``).
"""
from __future__ import annotations

from controller.enforcement.openflow import (
    COOKIE_STATIC,
    ETH_ARP,
    ETH_IPV4,
    FlowRule,
    Message,
    rule,
)
from controller.errors import InputError
from controller.model.jobs import Flow

SPLIT_SPORT_BASE = 40000
DEFAULT_GROUP = 1
T_CLASSIFY, T_DELIVER = 0, 1
PRIO_LLDP = 1100
ETH_LLDP = 0x88CC
PRIO_ARP, PRIO_MPLS, PRIO_PLANNED, PRIO_LOCAL, PRIO_FROM_SPINE, PRIO_DEFAULT = (
    1000, 900, 500, 100, 20, 10)
# host mode: below the drop of packets from above (20; on a leaf in table 1, which only its
# host ports' IPv4 reaches beyond local delivery), above the default group (10); the probe trap
# on spines above everything
PRIO_HOST, PRIO_HOST_CLASS, PRIO_PROBE = 15, 16, 1000
PRIO_DEGRADED = 12  # unplanned traffic to a leaf some spines cannot reach
PRIO_DEGRADED_POD = 11  # ... to a pod most of whose leaves are in one class, below its others
T_FORGED = 2  # a leaf's drop of what a host port refused: one entry, its counter read
T_HOST_CLASS = 3  # host mode: first table of the per-destination classes
PRIO_SOURCE, PRIO_FORGED = 300, 299  # a host port's own source on; its others to T_FORGED
PROBE_DSCP = 59  # RFC 2474 pool 2 (xxxx11): experimental or local use, never set by RoCE or TCP
ROCE_DPORT = 4791
UDP, TCP = 17, 6
HOST_PROTOCOLS = ((UDP, ROCE_DPORT), (TCP, 0))  # (protocol, destination port or 0: any)


def lldp_trap(dpid: int) -> FlowRule:
    """LLDP to the controller on every switch: discovery sees (and keeps checking) the links."""
    return rule(dpid, T_CLASSIFY, PRIO_LLDP, {"eth_type": ETH_LLDP}, [("controller",)])


def bootstrap_messages(dpid: int) -> list[Message]:
    """What a switch outside the known fabric gets: LLDP and ARP to the controller, so that
    discovery finds its links and hosts. Both are static entries of a leaf, so a switch that
    turns out to be a leaf keeps them when it is reconciled."""
    return [Message("flow_add", rule=lldp_trap(dpid)),
            Message("flow_add", rule=rule(dpid, T_CLASSIFY, PRIO_ARP, {"eth_type": ETH_ARP},
                                          [("controller",)]))]


def part_sport(flow: Flow, part: int, parts: int) -> int:
    """Source port of a sub-connection: the flow's own for an unsplit flow; for part i of a
    split flow, (the flow's source port, or 40000) + i. A part past port 65535 is an
    InputError naming the flow (give it a lower source port)."""
    if parts == 1:
        return flow.sport
    first = flow.sport or SPLIT_SPORT_BASE
    if first + parts - 1 > 65535:
        raise InputError(f"flow {flow.src} -> {flow.dst}: split into {parts} parts, its parts' "
                         f"source ports {first}..{first + parts - 1} pass 65535; give it a "
                         f"source port of at most {65536 - parts}")
    return first + part


def flow_match(fabric, flow: Flow, sport: int) -> dict:
    """The 5-tuple match of a planned flow; a zero port is a wildcard, and a flow with both
    ports zero matches all IPv4 traffic between its two hosts."""
    m = {"in_port": fabric.port(fabric.hosts[flow.src], flow.src), "eth_type": ETH_IPV4,
         "ipv4_src": fabric.host_ip[flow.src], "ipv4_dst": fabric.host_ip[flow.dst]}
    if sport or flow.dport:
        m["ip_proto"] = flow.proto
        l4 = {6: "tcp", 17: "udp"}.get(flow.proto)
        if l4 is None:
            raise InputError(f"flow {flow.src} -> {flow.dst}: ports need proto tcp or udp")
        if sport:
            m[f"{l4}_src"] = sport
        if flow.dport:
            m[f"{l4}_dst"] = flow.dport
    return m


def sport_buckets(n: int) -> int:
    """Source-port buckets of a leaf with ``n`` live uplinks: n rounded up to a power of two,
    so that one masked match on the low bits is one bucket.

    >>> [sport_buckets(n) for n in (0, 1, 2, 3, 4, 5, 32)]
    [0, 1, 2, 4, 4, 8, 32]
    """
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


def sport_entries(fabric, leaf: str, table: int, uplinks, shift: int = 0,
                  member=None) -> list[FlowRule]:
    """Per protocol and per source-port bucket, the uplink: bucket b -> uplinks[b mod n], the
    bucket read from the source port's bits ``shift`` and up (three tiers: ``clos_hostmode``).
    ``member`` = (shift, width, port of (uplink, code)): the entries also read a member field
    of that width, one per bucket and code (bundles: ``clos_hostmode.member_entries``)."""
    dpid, m = fabric.dpids[leaf], sport_buckets(len(uplinks))
    mshift, w, port_of = member or (0, 0, lambda up, _c: fabric.port(leaf, up))
    out = []
    for proto, dport in HOST_PROTOCOLS:
        l4 = "udp" if proto == UDP else "tcp"
        for b in range(m):
            for c in range(1 << w):
                match = {"eth_type": ETH_IPV4, "ip_proto": proto}
                if dport:
                    match[f"{l4}_dst"] = dport
                mask = ((m - 1) << shift) | (((1 << w) - 1) << mshift)
                if mask:
                    match[f"{l4}_src"] = ((b << shift) | (c << mshift), mask)
                out.append(rule(dpid, table, PRIO_HOST, match,
                                [("output", port_of(uplinks[b % len(uplinks)], c))]))
    return out


def class_tables(fabric, switch: str, classes, shift: int = 0, entries=None,
                 at: int = T_CLASSIFY) -> list[FlowRule]:
    """Host mode's per-class tables of one switch: class c of ``classes`` (uplinks,
    destinations as ``ipv4_dst`` matches, actions for its other IPv4) gets table 3 + c with the
    source-port entries over its uplinks (bits from ``shift``) and those actions below them;
    its destinations go there from table ``at`` (a leaf's 1, where its hosts' IPv4 is
    forwarded), one entry each (a leaf's or pod's prefix, or a host: ``model.prefixes``).
    Leaves and aggregation switches (``clos_hostmode``) build theirs with it; ``entries`` (the
    arguments of ``sport_entries``) builds the source-port entries instead, where they also
    read a bundle's member."""
    dpid, out = fabric.dpids[switch], []
    for c, (uplinks, dsts, otherwise) in enumerate(classes):
        table = T_HOST_CLASS + c
        out += (entries or sport_entries)(fabric, switch, table, uplinks, shift)
        out.append(rule(dpid, table, PRIO_DEFAULT, {"eth_type": ETH_IPV4}, otherwise))
        out += [rule(dpid, at, PRIO_HOST_CLASS, {"eth_type": ETH_IPV4, "ipv4_dst": d},
                     goto=table) for d in dsts]
    return out


__all__ = ["COOKIE_STATIC", "flow_match", "part_sport", "lldp_trap", "bootstrap_messages",
           "sport_buckets", "sport_entries", "class_tables", "PROBE_DSCP", "ROCE_DPORT"]
