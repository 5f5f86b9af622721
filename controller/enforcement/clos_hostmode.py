"""Host mode on Clos fabrics (a leaf-spine is one plane of one pod): the static pipeline that
steers TCP and RoCEv2 by source port at two tiers, and what a probe through it teaches.

Why two bit fields: the leaf chooses the aggregation switch and, between pods, the aggregation
switch chooses the core. If both chose from the same low bits, a port's leaf choice would fix
its core choice too, and a leaf would reach only k/2 of a fat-tree's (k/2)^2 cores. So the leaf
reads the low ``leaf_bits`` bits of the source port and the aggregation switch the bits above
them (``agg_shift``): every (aggregation switch, core) pair has ports of its own.

Pipeline (static: it grows with switches and, while links are down, with leaves; never with
flows), per protocol (RoCEv2 = UDP to 4791, and TCP):

* leaf (in table 1, where its host ports' IPv4 is forwarded: ``source_check``): m =
  ``sport_buckets(live uplinks)`` entries, source port bits (b, m - 1) out to the
  (b mod n)-th live uplink; a destination leaf that not every live uplink reaches goes, by its
  prefix (``model.prefixes``), to a table of its class (table 3 + class) with the same entries
  over the uplinks that reach it, and its other IPv4 to the first of them (``rules.
  class_tables``); on a leaf-spine the leaf's pipeline is all there is below the spines;
* aggregation switch: per class of other pods (the cores of its group that reach them, as its
  select groups have them), a table with the entries (b << shift, (m - 1) << shift) out to the
  (b mod n)-th core, other IPv4 to the class's select group; the pods' prefixes go there from
  table 0 (packets from cores never do: they are dropped above). It also traps ``PROBE_DSCP``;
* core: traps ``PROBE_CORE_DSCP``.

A map key is (leaf, class, protocol), the class being what the pipeline does for the
destination: ((aggregation switch, (cores reaching the destination's pod, or () inside the
pod)), ...) in uplink order. The pipeline's answer for a port is a function of the key alone,
so a learned map never goes stale: a failure changes the keys of the flows it touches. A probe
inside the pod is trapped by the aggregation switch it reached; between pods by the core, whose
in_port names the aggregation switch. What a port reaches is the hops the two choices made:
(aggregation switch,) or (aggregation switch, core).

Bundles (``Clos.bundle``): the port also codes the planned member of every bundle hop, so that
no per-flow entry is needed to pin them. Above every plane's leaf and aggregation bits (``base``
bits: the widest plane's) come four member fields, one per hop of an up-down path: 0 leaf ->
aggregation switch, 1 aggregation switch -> core, 2 core -> aggregation switch, 3 aggregation
switch -> leaf (a path of three switches uses fields 0 and 3), each ceil(log2 B) bits wide with
B the largest bundle of that hop's tier (Bl for fields 0 and 3, Bc for 1 and 2, as
``clos_labels.LabelSpace`` counts them); without bundles every width is 0 and nothing above
changes. The fields must end at or below bit 14 (ports 49152..65535 are 0xC000 and 14 free
bits): host mode is refused by name otherwise (``clos_members.MemberBits.check``); the bits
above the fields tell a host's ports apart. A code c takes member c where it is alive, else the
(c mod n)-th of the n alive members (``member_port``): a code that a smaller bundle lacks, or a
member down until the re-plan moves the flow (the planner never plans on a dead member).
Entries (x 2 protocols; C_f = 2 ** width of field f; m the buckets of a switch or class):

* leaf: the source-port entries (and those of its class tables) match the leaf bits and field
  0 together, m C_0 of them instead of m, out to the uplink over the coded member;
* aggregation switch: its class tables' entries match its bits and field 1 (m C_1 per class,
  out to the core over the coded member), and, per leaf of its pod (its prefix, or its hosts
  where their addresses allow none), C_3 entries matching the destination and field 3, out to
  that leaf over the coded member (priority
  ``PRIO_MEMBER``, above the destination's output among the static entries);
* core: per pod of its plane (its prefix, or its leaves'), C_2 entries matching the destination
  and field 2, out to the aggregation switch of that pod over the coded member.

A field of width 0 (no bundle in its tier) adds no entry and changes none. What probes verify
and what is computed: a probe carries member fields 0 and learns the hops; its trap's in_port
also says the member of the last hop up (the leaf's inside a pod, the aggregation switch's
between pods), checked against code 0's member (``reached``). The other codes and the down
hops' members are computed: the controller installed the entries that read them, and the hop
bits and the member fields are disjoint masks, so a port's hops never depend on its members.
"""
from __future__ import annotations

from controller.enforcement.clos_members import MemberBits, leaf_bits
from controller.enforcement.clos_rules import PlaneView, alive_of, member_ports
from controller.enforcement.openflow import ETH_IPV4, FlowRule, rule
from controller.enforcement.probepacket import PROBE_CORE_DSCP, PROBE_DSCP
from controller.enforcement.rules import (
    DEFAULT_GROUP,
    HOST_PROTOCOLS,
    PRIO_LOCAL,
    PRIO_PROBE,
    T_CLASSIFY,
    T_DELIVER,
    UDP,
    class_tables,
    sport_buckets,
    sport_entries,
)
from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.prefixes import dst_prefixes


def agg_shift(fabric: Clos, switch: str) -> int:
    """Where the aggregation switches' bits start: above every leaf's."""
    return leaf_bits(fabric, fabric.planes[fabric.plane_of[switch]].leaves[0])


# ---- member fields (bundles): ``clos_members.MemberBits`` codes them -------------------------
PRIO_MEMBER = PRIO_LOCAL + 1  # down hops over a bundle: above the destination's output


def member_port(fabric: Clos, switch: str, peer: str, code: int) -> int:
    """The port over member ``code`` of the bundle to ``peer`` when it is alive, else the
    (code mod n)-th of its n alive members."""
    alive, ports = alive_of(fabric, switch, peer), fabric.ports_to(switch, peer)
    return ports[code] if code in alive else ports[alive[code % len(alive)]]


def member_entries(fabric: Clos, switch: str, table: int, uplinks, shift: int, bits: MemberBits,
                   field: int) -> list[FlowRule]:
    """``rules.sport_entries`` that also read member field ``field``: per bucket b and code c,
    out to the (b mod n)-th uplink over member c (``member_port``); without that field the
    entries of ``sport_entries``."""
    w = bits.widths[field]
    return sport_entries(fabric, switch, table, uplinks, shift, member=(
        bits.shifts[field], w, lambda up, c: member_port(fabric, switch, up, c)) if w else None)


def down_entries(fabric: Clos, switch: str, peer: str, dsts, bits: MemberBits,
                 field: int) -> list[FlowRule]:
    """A down hop over a bundle: per destination (an ``ipv4_dst`` match: a leaf's or pod's
    prefix, or a host, ``model.prefixes``), protocol and code c of member field ``field``, out
    to ``peer`` over member c (``member_port``); none without that field or when the link is
    down."""
    w, dpid = bits.widths[field], fabric.dpids[switch]
    if not w or not member_ports(fabric, switch, peer):
        return []
    out = []
    for d in dsts:
        for proto, dport in HOST_PROTOCOLS:
            l4 = "udp" if proto == UDP else "tcp"
            for c in range(1 << w):
                match = {"eth_type": ETH_IPV4, "ipv4_dst": d, "ip_proto": proto}
                if dport:
                    match[f"{l4}_dst"] = dport
                match[f"{l4}_src"] = (c << bits.shifts[field], ((1 << w) - 1) << bits.shifts[field])
                out.append(rule(dpid, T_CLASSIFY, PRIO_MEMBER, match,
                                [("output", member_port(fabric, switch, peer, c))]))
    return out


def clos_host_static_rules(fabric: Clos, switch: str) -> list[FlowRule]:
    """The host-mode pipeline of one switch (module docstring). O(uplinks) entries, plus
    O(uplinks + destination leaves or pods) per class; with bundles the counts of the module
    docstring."""
    f, pl, dpid, bits = fabric, PlaneView(fabric, switch), fabric.dpids[switch], MemberBits(fabric)
    tier, dst = f.tier_of[switch], dst_prefixes(fabric, switch)
    if tier == 2:
        g = next(i for i, grp in enumerate(pl.p.cores) if switch in grp)
        return [rule(dpid, T_CLASSIFY, PRIO_PROBE, {"eth_type": ETH_IPV4,
                                                    "ip_dscp": PROBE_CORE_DSCP}, [("controller",)])
                ] + [x for q, aggs in enumerate(pl.p.aggs)
                     for x in down_entries(f, switch, aggs[g], dst.pod[q], bits, 2)]
    if tier == 1:
        out = [rule(dpid, T_CLASSIFY, PRIO_PROBE, {"eth_type": ETH_IPV4, "ip_dscp": PROBE_DSCP},
                    [("controller",)])]
        out += [x for leaf in pl.leaves_of(pl.pod_of[switch])
                for x in down_entries(f, switch, leaf, dst.leaf[leaf], bits, 3)]
        return out + class_tables(f, switch, [
            (cores, dst.of_pods(pods), [("group", DEFAULT_GROUP + c)])
            for c, (cores, pods) in enumerate(pl.agg_classes(switch))], agg_shift(f, switch),
            entries=lambda *a: member_entries(*a, bits, 1))
    live = pl.live_uplinks(switch)
    if not live:
        return []
    # a leaf's in table 1: what its host ports let in (``source_check``) is forwarded there
    return member_entries(f, switch, T_DELIVER, live, 0, bits, 0) + class_tables(f, switch, [
        (usable, dst.of_leaves(leaves), [("output", member_ports(f, switch, usable[0])[0])])
        for usable, leaves in pl.leaf_classes(switch)], entries=lambda *a: member_entries(
            *a, bits, 0), at=T_DELIVER)


# ---- keys, probes and what they reach -------------------------------------------------------
def _plane_view(fabric: Clos, switch: str) -> PlaneView:
    """The plane's view, kept on the fabric object: host mode asks for classes per flow, and
    building the view walks every switch of the plane (it holds no link state: liveness is
    read from the fabric at each question)."""
    views = fabric.__dict__.setdefault("_plane_views", {})
    p = fabric.plane_of[switch]
    if p not in views:
        views[p] = PlaneView(fabric, switch)
    return views[p]


def dest_class(fabric: Clos, leaf: str, dst_leaf: str) -> tuple:
    """What the pipeline does from ``leaf`` towards ``dst_leaf``: ((aggregation switch,
    (cores that reach the destination's pod) or () inside the pod), ...) in uplink order.

    >>> f = Clos.fat_tree(4)
    >>> dest_class(f, "l0", "l1"), dest_class(f, "l0", "l2")[0]
    ((('a0_0', ()), ('a0_1', ())), ('a0_0', ('c0_0', 'c0_1')))
    """
    pl = _plane_view(fabric, leaf)
    same = pl.pod_of[leaf] == pl.pod_of[dst_leaf]
    return tuple((a, () if same else tuple(pl.cores_reaching(a, pl.pod_of[dst_leaf])))
                 for a in pl.live_uplinks(leaf) if pl.agg_reaches(a, dst_leaf))


def buckets(klass: tuple) -> int:
    """Distinct (leaf bucket, aggregation bucket) pairs a class's pipeline has."""
    return max(1, sport_buckets(len(klass))) * max(
        (max(1, sport_buckets(len(cores))) for _a, cores in klass), default=1)


def probe_ends(fabric: Clos, leaf: str, klass: tuple) -> tuple[str, str, int]:
    """A source host of ``leaf``, a destination host of that class, and the probe's mark."""
    src = fabric.hosts_on.get(leaf, [None])[0]
    plane = fabric.planes[fabric.plane_of[leaf]]
    dst = next((h for other in plane.leaves if other != leaf and
                dest_class(fabric, leaf, other) == klass
                for h in fabric.hosts_on.get(other, [])[:1]), None)
    if src is None or dst is None:
        raise InputError(f"no host pair of leaf {leaf} has the path class {klass}")
    return src, dst, probe_mark(klass)


def probe_mark(klass: tuple) -> int:
    """The mark of a class's probes: trapped by the aggregation switch inside the pod, by the
    core between pods."""
    return PROBE_CORE_DSCP if klass and klass[0][1] else PROBE_DSCP


def reached(fabric: Clos, leaf: str, dpid: int, in_port: int) -> tuple | None:
    """The hops a probe of ``leaf`` took, from its packet-in: (aggregation switch,) when an
    aggregation switch of the leaf's pod trapped it from the leaf, (aggregation switch, core)
    when a core did; None for anywhere else, or when it came over another member of the last
    hop's bundle than the one its port codes (a probe's member fields are 0)."""
    sw = fabric.switch_of_dpid.get(dpid)
    came = fabric.peer(sw, in_port) if sw is not None else None
    if came is None:
        return None
    tier = fabric.tier_of.get(sw)
    if tier == 1 and came == leaf:
        hops, lo = (sw,), leaf
    elif tier == 2 and fabric.tier_of.get(came) == 1 and leaf in fabric.ports.get(came, {}):
        hops, lo = (came, sw), came
    else:
        return None
    # a probe's member fields are 0: the last hop up took code 0's member (``member_port``)
    alive = fabric.alive_members(lo, sw)
    return hops if alive and fabric.member(sw, in_port) == alive[0] else None


def pipeline_hops(fabric: Clos, leaf: str, klass: tuple, port: int) -> tuple:
    """The hops the static pipeline (``clos_host_static_rules``) gives a probe's source port
    from ``leaf`` towards a destination of class ``klass``: the leaf's bucket (the low bits)
    picks the aggregation switch, between pods that switch's bucket (bits from ``agg_shift``)
    its core. What a probe through settled tables reaches (``hostmode.HostPorts`` probes a
    contradicting answer again).

    >>> f = Clos.fat_tree(4).wire()
    >>> [pipeline_hops(f, "l0", dest_class(f, "l0", "l2"), p) for p in (49152, 49153, 49154)]
    [('a0_0', 'c0_0'), ('a0_1', 'c1_0'), ('a0_0', 'c0_1')]
    """
    agg, cores = klass[(port & (sport_buckets(len(klass)) - 1)) % len(klass)]
    if not cores:
        return (agg,)
    bucket = (port >> agg_shift(fabric, agg)) & (sport_buckets(len(cores)) - 1)
    return (agg, cores[bucket % len(cores)])


def part_hops(part) -> tuple:
    """The hops a route part's source-port choices make: its path's aggregation switch, and
    its core between pods."""
    path = part[0]
    return tuple(path[1:-1][:2])


__all__ = ["MemberBits", "member_port", "member_entries", "down_entries", "clos_host_static_rules",
           "dest_class", "buckets", "probe_ends", "probe_mark", "reached", "pipeline_hops",
           "part_hops", "leaf_bits", "agg_shift"]
