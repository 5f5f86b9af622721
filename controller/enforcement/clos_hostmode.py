"""Host mode on three-tier Clos fabrics: the static pipeline that steers TCP and RoCEv2 by
source port at two tiers, and what a probe through it teaches.

Why two bit fields: the leaf chooses the aggregation switch and, between pods, the aggregation
switch chooses the core. If both chose from the same low bits, a port's leaf choice would fix
its core choice too, and a leaf would reach only k/2 of a fat-tree's (k/2)^2 cores. So the leaf
reads the low ``leaf_bits`` bits of the source port and the aggregation switch the bits above
them (``agg_shift``): every (aggregation switch, core) pair has ports of its own.

Pipeline (static: it grows with switches and, while links are down, with hosts; never with
flows), per protocol (RoCEv2 = UDP to 4791, and TCP):

* leaf: m = ``sport_buckets(live uplinks)`` entries, source port bits (b, m - 1) out to the
  (b mod n)-th live uplink; a destination leaf that not every live uplink reaches goes, host by
  host, to a table of its class (table 2 + class) with the same entries over the uplinks that
  reach it, and its other IPv4 to the first of them (as on two tiers, ``rules.
  host_static_rules``);
* aggregation switch: per class of other pods (the cores of its group that reach them, as its
  select groups have them), a table with the entries (b << shift, (m - 1) << shift) out to the
  (b mod n)-th core, other IPv4 to the class's select group; the pods' hosts go there from
  table 0 (packets from cores never do: they are dropped above). It also traps ``PROBE_DSCP``;
* core: traps ``PROBE_CORE_DSCP``.

A map key is (leaf, class, protocol), the class being what the pipeline does for the
destination: ((aggregation switch, (cores reaching the destination's pod, or () inside the
pod)), ...) in uplink order. The pipeline's answer for a port is a function of the key alone,
so a learned map never goes stale: a failure changes the keys of the flows it touches. A probe
inside the pod is trapped by the aggregation switch it reached; between pods by the core, whose
in_port names the aggregation switch. What a port reaches is the hops the two choices made:
(aggregation switch,) or (aggregation switch, core).
"""
from __future__ import annotations

from controller.enforcement.clos_rules import PlaneView
from controller.enforcement.openflow import ETH_IPV4, FlowRule, rule
from controller.enforcement.probepacket import PROBE_CORE_DSCP, PROBE_DSCP
from controller.enforcement.rules import (
    DEFAULT_GROUP,
    PRIO_PROBE,
    T_CLASSIFY,
    class_tables,
    sport_buckets,
    sport_entries,
)
from controller.errors import InputError
from controller.model.clos import Clos


def leaf_bits(fabric: Clos, leaf: str) -> int:
    """Source-port bits the leaf's plane gives its leaves (enough for every uplink of a pod)."""
    p = fabric.planes[fabric.plane_of[leaf]]
    return (sport_buckets(max((len(a) for a in p.aggs), default=1)) - 1).bit_length()


def agg_shift(fabric: Clos, switch: str) -> int:
    """Where the aggregation switches' bits start: above every leaf's."""
    return leaf_bits(fabric, fabric.planes[fabric.plane_of[switch]].leaves[0])


def clos_host_static_rules(fabric: Clos, switch: str) -> list[FlowRule]:
    """The host-mode pipeline of one switch (module docstring). O(uplinks) entries, plus
    O(uplinks + hosts) per class."""
    f, pl, dpid = fabric, PlaneView(fabric, switch), fabric.dpids[switch]
    tier = f.tier_of[switch]
    if tier == 2:
        return [rule(dpid, T_CLASSIFY, PRIO_PROBE, {"eth_type": ETH_IPV4,
                                                    "ip_dscp": PROBE_CORE_DSCP}, [("controller",)])]
    if tier == 1:
        out = [rule(dpid, T_CLASSIFY, PRIO_PROBE, {"eth_type": ETH_IPV4, "ip_dscp": PROBE_DSCP},
                    [("controller",)])]
        return out + class_tables(f, switch, [
            (cores, [h for q in pods for leaf in pl.leaves_of(q) for h in f.hosts_on.get(leaf, [])],
             [("group", DEFAULT_GROUP + c)])
            for c, (cores, pods) in enumerate(pl.agg_classes(switch))], agg_shift(f, switch))
    live = pl.live_uplinks(switch)
    if not live:
        return []
    return sport_entries(f, switch, T_CLASSIFY, live) + class_tables(f, switch, [
        (usable, [h for other in leaves for h in f.hosts_on.get(other, [])],
         [("output", f.port(switch, usable[0]))])
        for usable, leaves in pl.leaf_classes(switch)])


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
    when a core did; None for anywhere else."""
    sw = fabric.switch_of_dpid.get(dpid)
    came = fabric.peer(sw, in_port) if sw is not None else None
    if came is None:
        return None
    tier = fabric.tier_of.get(sw)
    if tier == 1 and came == leaf:
        return (sw,)
    if tier == 2 and fabric.tier_of.get(came) == 1 and leaf in fabric.ports.get(came, {}):
        return (came, sw)
    return None


def part_hops(part) -> tuple:
    """The hops a route part's source-port choices make: its path's aggregation switch, and
    its core between pods."""
    path = part[0]
    return tuple(path[1:-1][:2])


__all__ = ["clos_host_static_rules", "dest_class", "buckets", "probe_ends", "probe_mark", "reached",
           "part_hops", "leaf_bits", "agg_shift"]
