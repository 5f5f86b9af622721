"""Rule builders: what every switch must hold, as lists of ``openflow.FlowRule``/``GroupEntry``.

Static rules (once per fabric, ``static_rules``):

* leaf, table 0: ARP to the controller (it answers from the declared addresses); MPLS with
  this leaf's label (bottom of stack) popped and sent to table 1; IPv4 for a local host to
  table 1; anything else arriving from a spine dropped (no loops); other IPv4 to the default
  select group, one bucket per alive uplink (ECMP for unplanned traffic); IPv4 for a leaf that
  some alive uplink cannot reach (a spine lost its link to it) to a select group over the
  uplinks that can.
* leaf, table 1: IPv4 for a local host out of its port.
* spine, table 0: its own label on top of the stack popped, then table 1; IPv4 by destination
  leaf out of the port to that leaf. Table 1: leaf labels out of the port to that leaf.

A destination leaf is one entry, its hosts' common prefix, where no other host's address falls
in it, else its hosts one by one (``model.prefixes``): a spine holds O(leaves) entries (130 on
64 leaves of 32 hosts, 2,114 per host).

Per-flow state lives only at ingress leaves (``job_rules``): a planned flow matches its
5-tuple from its host's port and, in ``flow`` mode, goes out to its spine; in ``sr`` mode it is
pushed the destination-leaf label and then the spine label (segment routing) and goes out to
its spine. A split flow gets one rule per part, each part a sub-connection with its own source
port. Labels: spine j = 100000 + j, leaf i = 200000 + i.

``host`` mode (``host_static_rules``) adds no per-flow entry at all: every leaf chooses the
uplink of TCP and RoCEv2 (UDP to 4791) packets from its hosts by the low bits of the source port
(masked matches: an ECMP hash configured on the source port, as RoCE fabrics configure theirs),
and every spine sends packets carrying the probe mark (IP DSCP 59) to the controller, which
learns from them which spine each source port takes (``controller/enforcement/hostmode.py``).
"""
from __future__ import annotations

from controller.enforcement.modes import mode_of
from controller.enforcement.openflow import (
    COOKIE_STATIC,
    ETH_ARP,
    ETH_IPV4,
    ETH_MPLS,
    FlowRule,
    GroupEntry,
    Message,
    job_cookie,
    rule,
)
from controller.errors import InputError
from controller.model.fabric import Fabric
from controller.model.jobs import Flow
from controller.model.prefixes import dst_prefixes

SPINE_LABEL_BASE = 100000
LEAF_LABEL_BASE = 200000
SPLIT_SPORT_BASE = 40000
DEFAULT_GROUP = 1
T_CLASSIFY, T_DELIVER = 0, 1
PRIO_LLDP = 1100
ETH_LLDP = 0x88CC
PRIO_ARP, PRIO_MPLS, PRIO_PLANNED, PRIO_LOCAL, PRIO_FROM_SPINE, PRIO_DEFAULT = (
    1000, 900, 500, 100, 20, 10)
# host mode: below the drop of packets from spines (20), so only host ports reach it, and above
# the default group (10); the probe trap on spines above everything
PRIO_HOST, PRIO_HOST_CLASS, PRIO_PROBE = 15, 16, 1000
PRIO_DEGRADED = 12  # unplanned traffic to a leaf some spines cannot reach
T_HOST_CLASS = 2  # host mode: first table of the per-destination classes
PROBE_DSCP = 59  # RFC 2474 pool 2 (xxxx11): experimental or local use, never set by RoCE or TCP
ROCE_DPORT = 4791
UDP, TCP = 17, 6
HOST_PROTOCOLS = ((UDP, ROCE_DPORT), (TCP, 0))  # (protocol, destination port or 0: any)


def spine_label(fabric: Fabric, spine: str) -> int:
    return SPINE_LABEL_BASE + fabric.spine_index[spine]


def leaf_label(fabric: Fabric, leaf: str) -> int:
    return LEAF_LABEL_BASE + fabric.leaf_index[leaf]


def link_up(fabric: Fabric, leaf: str, spine: str) -> bool:
    return (leaf, spine) not in fabric.down


def static_rules(fabric: Fabric, switch: str, classes: list | None = None
                 ) -> tuple[list[FlowRule], list[GroupEntry]]:
    """``classes``: a leaf's ``host_classes``, if the caller has them."""
    dpid = fabric.dpids[switch]
    ip = fabric.host_ip
    rules: list[FlowRule] = [lldp_trap(dpid)]
    if switch in fabric.leaf_index:
        hosts = fabric.hosts_of_leaf[switch]
        rules.append(rule(dpid, T_CLASSIFY, PRIO_ARP, {"eth_type": ETH_ARP}, [("controller",)]))
        rules.append(rule(dpid, T_CLASSIFY, PRIO_MPLS,
                          {"eth_type": ETH_MPLS, "mpls_label": leaf_label(fabric, switch),
                           "mpls_bos": 1}, [("pop_mpls", ETH_IPV4)], goto=T_DELIVER))
        for h in hosts:
            rules.append(rule(dpid, T_CLASSIFY, PRIO_LOCAL,
                              {"eth_type": ETH_IPV4, "ipv4_dst": ip[h]}, goto=T_DELIVER))
            rules.append(rule(dpid, T_DELIVER, PRIO_LOCAL, {"eth_type": ETH_IPV4, "ipv4_dst": ip[h]},
                              [("output", fabric.port(switch, h))]))
        for s in fabric.spines:
            rules.append(rule(dpid, T_CLASSIFY, PRIO_FROM_SPINE,
                              {"in_port": fabric.port(switch, s)}))  # no actions: drop
        buckets = tuple((("output", fabric.port(switch, s)),) for s in fabric.spines
                        if link_up(fabric, switch, s))
        groups = []
        if buckets:
            groups.append(GroupEntry(dpid, DEFAULT_GROUP, buckets))
            rules.append(rule(dpid, T_CLASSIFY, PRIO_DEFAULT, {"eth_type": ETH_IPV4},
                              [("group", DEFAULT_GROUP)]))
        # a destination leaf that some live uplink cannot reach (a spine lost its link to it)
        # gets a select group over the uplinks that do, host by host: unplanned traffic
        # (acknowledgements of planned flows too) never goes to a spine without a way on
        classes = host_classes(fabric, switch) if classes is None else classes
        for c, (usable, leaves) in enumerate(classes):
            gid = DEFAULT_GROUP + 1 + c
            groups.append(GroupEntry(dpid, gid, tuple((("output", fabric.port(switch, u)),)
                                                      for u in usable)))
            rules += [rule(dpid, T_CLASSIFY, PRIO_DEGRADED, {"eth_type": ETH_IPV4, "ipv4_dst": d},
                           [("group", gid)]) for d in dst_prefixes(fabric, switch).of_leaves(leaves)]
        return rules, groups
    rules.append(rule(dpid, T_CLASSIFY, PRIO_MPLS,
                      {"eth_type": ETH_MPLS, "mpls_label": spine_label(fabric, switch),
                       "mpls_bos": 0}, [("pop_mpls", ETH_MPLS)], goto=T_DELIVER))
    for leaf in fabric.leaves:
        if not link_up(fabric, leaf, switch):
            continue
        port = fabric.port(switch, leaf)
        rules.append(rule(dpid, T_DELIVER, PRIO_LOCAL,
                          {"eth_type": ETH_MPLS, "mpls_label": leaf_label(fabric, leaf)},
                          [("output", port)]))
        rules += [rule(dpid, T_CLASSIFY, PRIO_LOCAL, {"eth_type": ETH_IPV4, "ipv4_dst": d},
                       [("output", port)]) for d in dst_prefixes(fabric, switch).leaf[leaf]]
    return rules, []


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


def flow_match(fabric: Fabric, flow: Flow, sport: int) -> dict:
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


def flow_rules(fabric: Fabric, flow: Flow, parts, mode: str, job_number: int) -> list[FlowRule]:
    """Ingress-leaf rules of one planned flow; ``parts`` is ((spine index, share), ...) or None
    for an intra-leaf flow (no rule: static delivery)."""
    if parts is None:
        return []
    how = mode_of(mode)
    if not how.per_flow_entries:  # host mode: the host's source port picks the spine
        return []
    leaf = fabric.hosts[flow.src]
    dst_leaf = fabric.hosts[flow.dst]
    dpid = fabric.dpids[leaf]
    out = []
    for i, (s, _share) in enumerate(parts):
        spine = fabric.spines[s]
        port = fabric.port(leaf, spine)
        match = flow_match(fabric, flow, part_sport(flow, i, len(parts)))
        if not how.labels:
            actions = [("output", port)]
        else:
            actions = [("push_mpls", ETH_MPLS), ("set_field", "mpls_label", leaf_label(fabric, dst_leaf)),
                       ("push_mpls", ETH_MPLS), ("set_field", "mpls_label", spine_label(fabric, spine)),
                       ("output", port)]
        out.append(rule(dpid, T_CLASSIFY, PRIO_PLANNED + len(match), match, actions,
                        cookie=job_cookie(job_number)))
    return out


def static_update(fabric: Fabric, before: tuple | None = None) -> tuple[dict, dict]:
    """(static entries per dpid, link-state inputs per dpid) of every switch, without host
    mode's pipeline. ``before``: that pair of a fabric of the same wiring in another link
    state; a switch whose inputs (a leaf's live uplinks and classes, which leaves a spine
    reaches) are equal there keeps its entries, the very lists. A leaf's classes depend on
    its live uplinks only, so they are computed once per set of them."""
    old_tables, old_inputs = before or ({}, {})
    classes: dict[tuple, list] = {}
    tables, inputs = {}, {}
    for sw in fabric.spines + fabric.leaves:
        dpid, these = fabric.dpids[sw], None
        if sw in fabric.leaf_index:
            live = tuple(live_uplinks(fabric, sw))
            if live not in classes:
                classes[live] = host_classes(fabric, sw)
            these = classes[live]
            inputs[dpid] = (live, tuple((u, tuple(ls)) for u, ls in these))
        else:
            inputs[dpid] = tuple(link_up(fabric, leaf, sw) for leaf in fabric.leaves)
        if dpid in old_tables and old_inputs.get(dpid) == inputs[dpid]:
            tables[dpid] = old_tables[dpid]
        else:
            tables[dpid] = static_rules(fabric, sw, these)
    return tables, inputs


def all_static(fabric: Fabric, host: bool = False
               ) -> dict[int, tuple[list[FlowRule], list[GroupEntry]]]:
    """Static entries of every switch; ``host`` adds the host-mode pipeline."""
    out = {}
    for sw in fabric.spines + fabric.leaves:
        rules, groups = static_rules(fabric, sw)
        if host:
            rules = rules + host_static_rules(fabric, sw)
        out[fabric.dpids[sw]] = (rules, groups)
    return out


def live_uplinks(fabric: Fabric, leaf: str) -> list[str]:
    """The leaf's alive uplinks in spine order."""
    return [s for s in fabric.spines if link_up(fabric, leaf, s)]


def sport_buckets(n: int) -> int:
    """Source-port buckets of a leaf with ``n`` live uplinks: n rounded up to a power of two,
    so that one masked match on the low bits is one bucket.

    >>> [sport_buckets(n) for n in (0, 1, 2, 3, 4, 5, 32)]
    [0, 1, 2, 4, 4, 8, 32]
    """
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


def usable_uplinks(fabric: Fabric, leaf: str, dst_leaf: str) -> list[str]:
    """Spines whose links to both leaves are up, in spine order."""
    return [s for s in fabric.spines if link_up(fabric, leaf, s) and link_up(fabric, dst_leaf, s)]


def host_classes(fabric: Fabric, leaf: str) -> list[tuple[tuple, list[str]]]:
    """Destination leaves that a leaf must not reach over all its live uplinks (a spine lost
    its link to them), grouped by the uplinks that do reach them: [(usable spines, [leaves])],
    ordered by first leaf. Empty while every spine alive at the leaf reaches every leaf.

    >>> f = Fabric.generate(3, 3, 1).with_down({("l2", "s0")})
    >>> host_classes(f, "l0")
    [(('s1', 's2'), ['l2'])]
    """
    live = tuple(live_uplinks(fabric, leaf))
    classes: dict[tuple, list[str]] = {}
    for other in fabric.leaves:
        usable = tuple(usable_uplinks(fabric, leaf, other))
        if other != leaf and usable and usable != live:
            classes.setdefault(usable, []).append(other)
    return sorted(classes.items(), key=lambda kv: fabric.leaf_index[kv[1][0]])


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


def host_static_rules(fabric: Fabric, switch: str) -> list[FlowRule]:
    """The host-mode pipeline of one switch, static (it grows with spines, and with leaves
    only while links are down; never with flows).

    Leaf, table 0: per protocol (RoCEv2 = UDP to 4791, and TCP) and per bucket b of the m =
    ``sport_buckets(live uplinks)`` buckets, one entry matching the source port's low bits
    (value b, mask m - 1) that outputs to the (b mod n)-th live uplink: 2 m entries. Only
    packets from host ports reach them (packets from spines are dropped above them); other
    IPv4 keeps the default select group. A destination leaf that some live uplink cannot
    reach (``host_classes``) is sent, by its prefix (``model.prefixes``), to a table of its own
    class (table 2 + class) holding the same buckets over the uplinks that reach it, and its
    other IPv4 to the first of them, so that no source port leads to a spine without a way on
    (acknowledgements of planned flows included). Spine: one entry sending IPv4 packets with DSCP
    ``PROBE_DSCP`` to the controller (the probes of ``controller.enforcement.hostmode``).
    O(uplinks) entries per switch, plus O(uplinks + destination leaves) per class.
    """
    dpid = fabric.dpids[switch]
    if switch not in fabric.leaf_index:
        return [rule(dpid, T_CLASSIFY, PRIO_PROBE, {"eth_type": ETH_IPV4, "ip_dscp": PROBE_DSCP},
                     [("controller",)])]
    ups = live_uplinks(fabric, switch)
    if not ups:
        return []
    dst = dst_prefixes(fabric, switch)
    return sport_entries(fabric, switch, T_CLASSIFY, ups) + class_tables(fabric, switch, [
        (usable, dst.of_leaves(leaves), [("output", fabric.port(switch, usable[0]))])
        for usable, leaves in host_classes(fabric, switch)])


def class_tables(fabric, switch: str, classes, shift: int = 0, entries=None) -> list[FlowRule]:
    """Host mode's per-class tables of one switch: class c of ``classes`` (uplinks,
    destinations as ``ipv4_dst`` matches, actions for its other IPv4) gets table 2 + c with the
    source-port entries over its uplinks (bits from ``shift``) and those actions below them;
    its destinations go there from table 0, one entry each (a leaf's or pod's prefix, or a
    host: ``model.prefixes``). Leaves (both models) and aggregation switches
    (``clos_hostmode``) build theirs with it; ``entries`` (the arguments of ``sport_entries``)
    builds the source-port entries instead, where they also read a bundle's member."""
    dpid, out = fabric.dpids[switch], []
    for c, (uplinks, dsts, otherwise) in enumerate(classes):
        table = T_HOST_CLASS + c
        out += (entries or sport_entries)(fabric, switch, table, uplinks, shift)
        out.append(rule(dpid, table, PRIO_DEFAULT, {"eth_type": ETH_IPV4}, otherwise))
        out += [rule(dpid, T_CLASSIFY, PRIO_HOST_CLASS, {"eth_type": ETH_IPV4, "ipv4_dst": d},
                     goto=table) for d in dsts]
    return out


__all__ = ["COOKIE_STATIC", "static_rules", "flow_rules", "flow_match", "part_sport",
           "all_static", "static_update", "spine_label", "leaf_label", "host_static_rules", "live_uplinks",
           "sport_buckets", "sport_entries", "class_tables", "usable_uplinks", "host_classes", "PROBE_DSCP",
           "ROCE_DPORT"]
