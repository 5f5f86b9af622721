"""Rule builders for three-tier (and two-tier) Clos planes (``model.clos``): what every leaf,
aggregation switch and core must hold, in the conventions of ``enforcement.rules`` (tables,
priorities, cookies, framework-neutral ``FlowRule``/``GroupEntry``).

Static entries (valley-free, destination-based; unplanned traffic takes ECMP up):

* leaf: LLDP and ARP to the controller; its own label (bottom of stack) popped, then table 1;
  IPv4 from a host port with its host's address to table 1, with another address dropped
  (``source_check``); IPv4 for a local host to table 1 and out of its port; anything else from
  an uplink dropped (no valleys); in table 1, other IPv4 to a select group over the alive
  uplinks, and destination leaves that some alive uplink cannot reach (a link or switch down
  on the way) to a select group over the uplinks that can.
* aggregation switch: IPv4 for a leaf of its pod out of the port to that leaf; from a leaf,
  IPv4 for another pod to a select group over the alive cores of its group that reach that
  pod; anything else from a core dropped. ECMP hashing ``per-tier`` (the default) gives
  each core of that group a block of m buckets (m: aggregation switches per pod): a switch
  that picks a bucket from one flow hash (Open vSwitch hashes alike on every bridge) then
  picks the core independently of the leaf's choice among its m buckets; ``polarised`` gives
  one bucket per core, and a leaf's choice of aggregation switch fixes the core (k/2 of the
  (k/2)^2 cores carry a pod's unplanned traffic). Labels: a leaf of its pod (bottom of stack) out
  to that leaf; a core of its group (on top) out to that core (each code over the member it
  names, see Bundles).
* core: IPv4 for pod Q out to its group's aggregation switch in Q; its own label popped, then
  a leaf label out to that leaf's pod.

Above the leaves IPv4 is matched by destination leaf or pod, not host (``model.prefixes``): one
entry per leaf (its hosts' common prefix) or per pod where the addresses allow it, the leaf's
hosts one by one where they do not. A leaf holds an entry per host of its own. On a k = 16
fat-tree (``Clos.wire``'s addresses) a leaf holds 45 static entries (27 of them forwarding, 18
checking sources), an aggregation switch 32 and a core 17 (1,033 and 1,025 per host;
``benchmarks/entries.py``); sr's label entries (``labels``), held only while a job runs in sr
mode or sr is the default mode, add 9 (1 and a drop of MPLS per host port), 16 and 129 (the
cores switch every leaf's label).

Per flow (``clos_flow_rules``): ``flow`` mode matches the 5-tuple where the path branches, at
the source leaf (out to the aggregation switch) and, between pods, at the source aggregation
switch (out to the core); ``sr`` mode pushes at the source leaf the destination leaf's label
and, between pods, the core's label on top (a stack of at most two labels), and nothing else
holds per-flow state. ``host`` mode holds no per-flow entry: its static pipeline is
``enforcement.clos_hostmode``.

Bundles (``Clos.bundle``): every output across a bundle is a select group over its alive
members (group ``BUNDLE_GROUP`` + the peer's position in ``Clos.neighbours``; an output to
a single alive member stays an output), and the ECMP groups up have one bucket per alive
member of every usable uplink; a member down leaves its buckets, the link stays up while a
member lives. In ``flow`` mode a planned path names its members (``model.intent.MemberPath``)
and the entries pin them: besides the entries above, one at every switch whose next hop is a
bundle with more than one alive member (down hops included), matching the port the flow came
in on and output to the planned member's port. ``sr`` mode pins them with its labels, still a
stack of at most two: the source leaf outputs over the first hop's member; the destination
leaf's label codes the members core -> aggregation switch and aggregation switch -> leaf, the
core's label the member aggregation switch -> core (``enforcement.clos_labels``: C codes per
label, C = Bl x Bc for a leaf and Bc for a core, Bl and Bc the largest bundles of the leaf and
core tiers). The static label entries serve every code: a leaf pops its C labels, an
aggregation switch sends each of C labels per leaf of its pod and Bc per core of its group over
the member its code names, a core pops its Bc labels and sends C labels per leaf of its plane
over the named member to that pod; a code whose member is down (or that a smaller bundle lacks)
takes the output above (the select group over the alive members). Label entries grow by these
factors with bundles; without bundles C = 1 and they are as above. ``host`` mode pins them with
the source port: member fields above the bits that choose the hops, read by masked static
entries at every tier (``enforcement.clos_hostmode``). The controller refuses host mode where
those fields do not fit the port's 14 free bits, and sr where its labels would overflow a
tier's label space (no switch then holds label entries) (``check_mode_on``).

Labels (``enforcement.clos_labels``): leaves 200000 + i x C + code, aggregation switches
300000 + i, cores 100000 + i x Bc + code, i counting the switches of that tier over all planes
in declaration order (without bundles: 200000 + i, 300000 + i, 100000 + i).
"""
from __future__ import annotations

from controller.enforcement.clos_labels import label_space
from controller.enforcement.clos_members import MemberBits
from controller.enforcement.modes import check_ecmp, mode_of
from controller.enforcement.openflow import (
    ETH_ARP,
    ETH_IPV4,
    ETH_MPLS,
    FlowRule,
    GroupEntry,
    job_cookie,
    rule,
)
from controller.enforcement.pacing import Pacer
from controller.enforcement.rules import (
    DEFAULT_GROUP,
    PRIO_ARP,
    PRIO_DEFAULT,
    PRIO_DEGRADED,
    PRIO_DEGRADED_POD,
    PRIO_FROM_SPINE,
    PRIO_LOCAL,
    PRIO_MPLS,
    PRIO_PLANNED,
    T_CLASSIFY,
    T_DELIVER,
    flow_match,
    lldp_trap,
)
from controller.enforcement.source_check import source_check
from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.jobs import Flow
from controller.model.prefixes import dst_prefixes

BUNDLE_GROUP = 0x10000  # + the peer's position among the switch's neighbours


def check_mode_on(fabric, mode: str) -> None:
    """sr mode is refused where its labels (with the members' codes) do not fit a tier's
    label space (``LabelSpace.check``); host mode on a fabric with bundles where its source
    ports cannot code every bundle hop's member above the bits that choose the hops
    (``clos_members.MemberBits.check``): InputErrors naming the mode and the sizes."""
    if mode == "sr":
        label_space(fabric).check()
    if mode == "host" and fabric.bundled:
        MemberBits(fabric).check()


def alive_of(fabric: Clos, switch: str, peer: str) -> tuple[int, ...]:
    """The alive members of the link between ``switch`` and ``peer``, either way round."""
    return fabric.alive_members(switch, peer) if fabric.tier_of[switch] < fabric.tier_of[peer] \
        else fabric.alive_members(peer, switch)


def member_ports(fabric: Clos, switch: str, peer: str) -> tuple[int, ...]:
    """``switch``'s ports to ``peer`` of the alive members, in member order."""
    ports = fabric.ports_to(switch, peer)
    return tuple(ports[m] for m in alive_of(fabric, switch, peer))


def _to(fabric: Clos, switch: str, peer: str, groups: dict) -> list:
    """The actions sending out to ``peer``: an output, or over a bundle of several alive
    members a select group over them (added to ``groups`` once)."""
    ports = member_ports(fabric, switch, peer)
    if len(ports) == 1:
        return [("output", ports[0])]
    gid = BUNDLE_GROUP + fabric.neighbours(switch).index(peer)
    if gid not in groups:
        groups[gid] = GroupEntry(fabric.dpids[switch], gid, tuple((("output", p),) for p in ports))
    return [("group", gid)]


def _member_out(fabric: Clos, switch: str, peer: str, member: int, fallback: list) -> list:
    """Output to ``peer`` over ``member`` of the bundle, or ``fallback`` where that member
    is down (or the bundle has fewer)."""
    if member in alive_of(fabric, switch, peer):
        return [("output", fabric.ports_to(switch, peer)[member])]
    return fallback


def alive(fabric: Clos, lower: str, upper: str) -> bool:
    """Some member of the link and both switches are up."""
    return bool(fabric.alive_members(lower, upper))


class PlaneView:
    """The plane of a switch, with its pods and reachability (who can reach which leaf).
    ``keep``: remember the answers about link state (cores reaching a pod, a pod's leaf
    classes) for as long as the view lives: one computation of the fabric's static entries
    (``clos_all_static``), which asks them for every switch of the plane."""

    def __init__(self, fabric: Clos, switch: str, keep: bool = False):
        self.f = fabric
        self.p = fabric.planes[fabric.plane_of[switch]]
        self.pod_of = {l: self.p.pod_of_leaf[i] for i, l in enumerate(self.p.leaves)}
        for k, aggs in enumerate(self.p.aggs):
            for a in aggs:
                self.pod_of[a] = k
        self.kept: dict | None = {} if keep else None
        self._alive: dict[tuple[str, str], bool] = {}  # kept answers of ``alive``

    def alive(self, lower: str, upper: str) -> bool:
        """``alive`` of the link, kept by a kept view: a leaf's classes ask it of every leaf
        of the plane for every live uplink (48,000 questions about 2,000 links on a k = 16
        fat-tree with a switch down)."""
        if self.kept is None:
            return alive(self.f, lower, upper)
        got = self._alive.get((lower, upper))
        if got is None:
            got = self._alive[(lower, upper)] = alive(self.f, lower, upper)
        return got

    def leaves_of(self, pod: int) -> list[str]:
        return [l for l in self.p.leaves if self.pod_of[l] == pod]

    def cores_reaching(self, agg: str, pod: int) -> list[str]:
        """Cores of ``agg``'s group alive on both sides, towards pod ``pod``."""
        if self.kept is not None and (agg, pod) in self.kept:
            return list(self.kept[(agg, pod)])
        slot = self.p.aggs[self.pod_of[agg]].index(agg)
        if slot >= len(self.p.cores):
            return []
        there = self.p.aggs[pod][slot]
        out = [c for c in self.p.cores[slot] if self.alive(agg, c) and self.alive(there, c)]
        if self.kept is not None:
            self.kept[(agg, pod)] = tuple(out)
        return out

    def live_uplinks(self, leaf: str) -> tuple[str, ...]:
        """The leaf's alive uplinks, in slot order (kept: asked for every leaf's inputs,
        classes and entries)."""
        if self.kept is not None and leaf in self.kept:
            return self.kept[leaf]
        out = tuple(a for a in self.p.aggs[self.pod_of[leaf]] if self.alive(leaf, a))
        if self.kept is not None:
            self.kept[leaf] = out
        return out

    def leaf_classes(self, leaf: str) -> list[tuple[tuple, list[str]]]:
        """Destination leaves that not every live uplink reaches, grouped by the uplinks that
        do: [(usable aggregation switches, [leaves])], in leaf order. None while nothing is
        down and every aggregation slot has a core group (or there is one pod). They depend
        on the leaf's pod and live uplinks only (the leaf itself, and every leaf of its pod
        with those uplinks, is reached by all of them), so a kept view computes them once
        per pod and uplinks."""
        if not self.f.down and not self.f.down_switches and (
                len(self.p.aggs) == 1 or all(len(a) <= len(self.p.cores) for a in self.p.aggs)):
            return []
        live = self.live_uplinks(leaf)
        key = ("classes", self.pod_of[leaf], live)
        if self.kept is not None and key in self.kept:
            return list(self.kept[key])
        pod, aggs = self.pod_of[leaf], self.p.aggs
        slots = [(a, aggs[pod].index(a)) for a in live]
        up: dict = {}  # (uplink, pod) -> some core of the uplink's group reaches that pod
        classes: dict[tuple, list[str]] = {}
        for other in self.p.leaves:  # agg_reaches(a, other) for every live uplink a
            there = self.pod_of[other]
            if there == pod:
                usable = tuple(a for a in live if self.alive(other, a))
            else:
                usable = []
                for a, slot in slots:
                    if (a, there) not in up:
                        up[(a, there)] = bool(self.cores_reaching(a, there))
                    if up[(a, there)] and self.alive(other, aggs[there][slot]):
                        usable.append(a)
                usable = tuple(usable)
            if other != leaf and usable and usable != live:
                classes.setdefault(usable, []).append(other)
        if self.kept is not None:
            self.kept[key] = tuple(classes.items())
        return list(classes.items())

    def agg_classes(self, agg: str) -> list[tuple[tuple, list[int]]]:
        """The other pods, grouped by the cores of ``agg``'s group that reach them:
        [(usable cores, [pods])], in pod order; pods no core reaches are left out."""
        by_cores: dict[tuple, list[int]] = {}
        for other in range(len(self.p.pods)):
            usable = tuple(self.cores_reaching(agg, other)) if other != self.pod_of[agg] else ()
            if usable:
                by_cores.setdefault(usable, []).append(other)
        return list(by_cores.items())

    def agg_reaches(self, agg: str, leaf: str, memo: dict | None = None) -> bool:
        """Traffic that ``leaf``'s source sent up to ``agg`` can reach ``leaf``. ``memo``
        (a dict the caller keeps for one question about the same link state) remembers which
        pods ``agg``'s cores reach: a leaf's classes ask it for every leaf of the plane."""
        src_pod, dst_pod = self.pod_of[agg], self.pod_of[leaf]
        if src_pod == dst_pod:
            return self.alive(leaf, agg)
        up = None if memo is None else memo.get((agg, dst_pod))
        if up is None:
            up = bool(self.cores_reaching(agg, dst_pod))
            if memo is not None:
                memo[(agg, dst_pod)] = up
        slot = self.p.aggs[src_pod].index(agg)
        return up and self.alive(leaf, self.p.aggs[dst_pod][slot])


def clos_static_rules(fabric: Clos, switch: str, ecmp: str = "per-tier",
                      view: PlaneView | None = None, labels: bool = True
                      ) -> tuple[list[FlowRule], list[GroupEntry]]:
    """The static entries and groups of one switch; ``ecmp`` (one of ``ECMP_HASHES``) says
    whether the aggregation switches' select groups decorrelate from the leaves'. ``view``:
    the switch's plane, kept across the switches of one computation. ``labels``: with sr's
    label entries (``desired``: while a job runs in sr mode, or sr is the default mode)."""
    check_ecmp(ecmp)
    tier, pl = fabric.tier_of[switch], view or PlaneView(fabric, switch)
    ls = label_space(fabric) if labels else NO_LABELS
    if tier == 1:
        return _agg(fabric, switch, pl, ecmp, ls)
    return (_leaf, None, _core)[tier](fabric, switch, pl, ls)


class _NoLabels:
    """A label space with no codes: the builders make no label entry."""

    @staticmethod
    def code_range(_tier: int) -> range:
        return range(0)


NO_LABELS = _NoLabels()


def _leaf(f: Clos, leaf: str, pl: PlaneView, ls):
    dpid, ip = f.dpids[leaf], f.addresses_at(leaf)
    rules = [lldp_trap(dpid),
             rule(dpid, T_CLASSIFY, PRIO_ARP, {"eth_type": ETH_ARP}, [("controller",)])]
    rules += [rule(dpid, T_CLASSIFY, PRIO_MPLS, {"eth_type": ETH_MPLS, "mpls_label": ls.of(leaf, c),
                                                 "mpls_bos": 1}, [("pop_mpls", ETH_IPV4)],
                   goto=T_DELIVER) for c in ls.code_range(0)]
    for h in f.hosts_on.get(leaf, []):
        rules.append(rule(dpid, T_CLASSIFY, PRIO_LOCAL, {"eth_type": ETH_IPV4, "ipv4_dst": ip[h]},
                          goto=T_DELIVER))
        rules.append(rule(dpid, T_DELIVER, PRIO_LOCAL, {"eth_type": ETH_IPV4, "ipv4_dst": ip[h]},
                          [("output", f.port(leaf, h))]))
    uplinks = pl.p.aggs[pl.pod_of[leaf]]
    for a in uplinks:
        rules += [rule(dpid, T_CLASSIFY, PRIO_FROM_SPINE, {"in_port": p})
                  for p in f.ports_to(leaf, a)]
    live = pl.live_uplinks(leaf)
    groups = []
    if live:  # what a host sends beyond its leaf is forwarded in table 1, past source_check
        groups.append(GroupEntry(dpid, DEFAULT_GROUP, tuple((("output", p),) for a in live
                                                            for p in member_ports(f, leaf, a))))
        rules.append(rule(dpid, T_DELIVER, PRIO_DEFAULT, {"eth_type": ETH_IPV4},
                          [("group", DEFAULT_GROUP)]))
    classes = pl.leaf_classes(leaf)
    for c, (usable, _leaves) in enumerate(classes):
        groups.append(GroupEntry(dpid, DEFAULT_GROUP + 1 + c, tuple(
            (("output", p),) for a in usable for p in member_ports(f, leaf, a))))
    wide, narrow = dst_prefixes(f, leaf).of_classes([ls for _u, ls in classes], own=leaf)
    for prio, matches in ((PRIO_DEGRADED_POD, wide), (PRIO_DEGRADED, narrow)):
        rules += [rule(dpid, T_DELIVER, prio, {"eth_type": ETH_IPV4, "ipv4_dst": d}, [(
            "group", DEFAULT_GROUP if c is None else DEFAULT_GROUP + 1 + c)])
            for d, c in matches]
    # last: a switch that applies them in order has table 1 filled before they lead there
    return rules + source_check(f, leaf, bool(ls.code_range(0))), groups


def _agg(f: Clos, agg: str, pl: PlaneView, ecmp: str, ls):
    dpid, dst = f.dpids[agg], dst_prefixes(f, agg)
    pod, one = pl.pod_of[agg], not f.bundled  # one: every link one port, no member to pin
    rules, groups, bundles = [lldp_trap(dpid)], [], {}
    for leaf in pl.leaves_of(pod):
        if not alive(f, leaf, agg):
            continue
        out = _to(f, agg, leaf, bundles)
        rules += [rule(dpid, T_CLASSIFY, PRIO_MPLS, {"eth_type": ETH_MPLS,
                                                     "mpls_label": ls.of(leaf, c)},
                       out if one else _member_out(f, agg, leaf, ls.down_members(c)[1], out))
                  for c in ls.code_range(0)]
        rules += [rule(dpid, T_CLASSIFY, PRIO_LOCAL, {"eth_type": ETH_IPV4, "ipv4_dst": d}, out)
                  for d in dst.leaf[leaf]]
    slot = pl.p.aggs[pod].index(agg)
    cores = pl.p.cores[slot] if slot < len(pl.p.cores) else []
    for c in cores:
        rules += [rule(dpid, T_CLASSIFY, PRIO_FROM_SPINE, {"in_port": p})
                  for p in f.ports_to(agg, c)]
        if alive(f, agg, c):
            out = _to(f, agg, c, bundles)
            rules += [rule(dpid, T_CLASSIFY, PRIO_MPLS,
                           {"eth_type": ETH_MPLS, "mpls_label": ls.of(c, m), "mpls_bos": 0},
                           _member_out(f, agg, c, m, out)) for m in ls.code_range(2)]
    block = len(pl.p.aggs[pod]) if ecmp == "per-tier" else 1
    for c, (usable, pods) in enumerate(pl.agg_classes(agg)):
        gid = DEFAULT_GROUP + c
        groups.append(GroupEntry(dpid, gid, tuple((("output", p),) for x in usable
                                                  for p in member_ports(f, agg, x)
                                                  for _ in range(block))))
        rules += [rule(dpid, T_CLASSIFY, PRIO_DEFAULT, {"eth_type": ETH_IPV4, "ipv4_dst": d},
                       [("group", gid)]) for d in dst.of_pods(pods)]
    return rules, groups + list(bundles.values())


def _core(f: Clos, core: str, pl: PlaneView, ls):
    dpid, dst = f.dpids[core], dst_prefixes(f, core)
    rules = [lldp_trap(dpid)]
    rules += [rule(dpid, T_CLASSIFY, PRIO_MPLS, {"eth_type": ETH_MPLS, "mpls_label": ls.of(core, m),
                                                 "mpls_bos": 0}, [("pop_mpls", ETH_MPLS)],
                   goto=T_DELIVER) for m in ls.code_range(2)]
    g, one = next(i for i, grp in enumerate(pl.p.cores) if core in grp), not f.bundled
    bundles: dict = {}
    for pod, aggs in enumerate(pl.p.aggs):
        agg = aggs[g]
        if not alive(f, agg, core):
            continue
        out = _to(f, core, agg, bundles)
        for leaf in pl.leaves_of(pod):
            rules += [rule(dpid, T_DELIVER, PRIO_LOCAL, {"eth_type": ETH_MPLS,
                                                         "mpls_label": ls.of(leaf, c)},
                           out if one else _member_out(f, core, agg, ls.down_members(c)[0],
                                                       out)) for c in ls.code_range(0)]
        rules += [rule(dpid, T_CLASSIFY, PRIO_LOCAL, {"eth_type": ETH_IPV4, "ipv4_dst": d}, out)
                  for d in dst.pod[pod]]
    return rules, list(bundles.values())


def clos_all_static(fabric: Clos, ecmp: str = "per-tier", labels: bool = True
                    ) -> dict[int, tuple[list[FlowRule], list[GroupEntry]]]:
    return clos_static_update(fabric, ecmp, labels=labels)[0]


def clos_static_update(fabric: Clos, ecmp: str = "per-tier", before: tuple | None = None,
                       labels: bool = True, pause=None) -> tuple[dict, dict]:
    """(static entries per dpid, link-state inputs per dpid, ``static_inputs``). ``before``:
    that pair of a fabric with the same switches, ports, hosts and bundles in another link
    state (and the same ``labels``); a switch whose inputs are equal there keeps its entries
    (the very lists), so a link down recomputes the few switches it changes. One
    ``PlaneView`` per plane keeps its answers across the switches. ``pause()``, if given, is
    called between switches by a ``pacing.Pacer`` (every ``PAUSE_ENTRIES`` entries built or
    ``PAUSE_S`` seconds: the shell's yield, REST answers meanwhile)."""
    views: dict[int, PlaneView] = {}  # per plane, its answers kept for this computation
    tables, inputs = {}, {}
    old_tables, old_inputs = before or ({}, {})
    pacer = Pacer(pause)
    for sw in fabric.tier_of:
        q = fabric.plane_of[sw]
        if q not in views:
            views[q] = PlaneView(fabric, sw, keep=True)
        dpid = fabric.dpids[sw]
        inputs[dpid] = static_inputs(fabric, sw, views[q])
        if dpid in old_tables and old_inputs.get(dpid) == inputs[dpid]:
            tables[dpid] = old_tables[dpid]
            pacer.add(1)
        else:
            tables[dpid] = clos_static_rules(fabric, sw, ecmp, views[q], labels)
            pacer.add(1 + len(tables[dpid][0]))
    return tables, inputs


def static_inputs(fabric: Clos, switch: str, pl: PlaneView) -> tuple:
    """Everything of the link state that ``clos_static_rules`` reads for ``switch``: the
    alive members of its links, and a leaf's or an aggregation switch's classes. Equal
    inputs on two fabrics of the same wiring give equal static entries."""
    tier, pod = fabric.tier_of[switch], pl.pod_of.get(switch)
    if tier == 0:
        return (tuple(alive_of(fabric, switch, a) for a in pl.p.aggs[pod]),
                tuple((u, tuple(ls)) for u, ls in pl.leaf_classes(switch)))
    if tier == 1:
        slot = pl.p.aggs[pod].index(switch)
        cores = pl.p.cores[slot] if slot < len(pl.p.cores) else []
        return (tuple(alive_of(fabric, switch, l) for l in pl.leaves_of(pod)),
                tuple(alive_of(fabric, switch, c) for c in cores),
                tuple((u, tuple(ps)) for u, ps in pl.agg_classes(switch)))
    g = next(i for i, grp in enumerate(pl.p.cores) if switch in grp)
    return tuple(alive_of(fabric, switch, aggs[g]) for aggs in pl.p.aggs)


def clos_flow_match(fabric: Clos, flow: Flow, sport: int, leaf: str) -> dict:
    """``rules.flow_match`` in the plane of ``leaf`` (the path's first switch): the host's
    port on that leaf and the two hosts' addresses in that plane (the host chose the plane by
    the destination address)."""
    q = fabric.plane_of[leaf]
    return dict(flow_match(fabric, flow, sport), in_port=fabric.port(leaf, flow.src),
                ipv4_src=fabric.ip_of(flow.src, q), ipv4_dst=fabric.ip_of(flow.dst, q))


def flow_rules_read_links(mode: str, parts) -> bool:
    """Whether ``clos_flow_rules`` reads the link state for a flow's ``parts`` in ``mode``:
    sr's labels and pinned bundle members do (the alive members); a flow entry on a path
    without members reads only the wiring, so it stays the same in any link state."""
    return bool(mode_of(mode).labels) or any(
        getattr(where, "members", None) is not None for where, _ in parts or ())


def clos_flow_rules(fabric: Clos, flow: Flow, path: list[str] | None, mode: str,
                    job_number: int) -> list[FlowRule]:
    """The entries of one planned flow on its ``path`` (switches, source leaf to destination
    leaf, as the routes document gives it; None or one switch: no entry, static delivery)."""
    how = mode_of(mode)
    if not how.per_flow_entries or not path or len(path) == 1:
        return []
    if len(path) not in (3, 5):
        raise InputError(f"flow {flow.src} -> {flow.dst}: a path of {len(path)} switches is not "
                         "an up-down path")
    leaf, first = path[0], path[1]
    match = clos_flow_match(fabric, flow, flow.sport, leaf)
    cookie = job_cookie(job_number)
    prio = PRIO_PLANNED + len(match)
    members = getattr(path, "members", None)
    if how.labels:
        return [_sr(fabric, path, members, match, cookie)]
    if members is not None:
        return _pinned(fabric, path, members, match, cookie)
    out = [rule(fabric.dpids[leaf], T_CLASSIFY, prio, match,
                [("output", fabric.port(leaf, first))], cookie=cookie)]
    if len(path) == 5:
        at_agg = dict(match, in_port=fabric.port(first, leaf))
        out.append(rule(fabric.dpids[first], T_CLASSIFY, PRIO_PLANNED + len(at_agg), at_agg,
                        [("output", fabric.port(first, path[2]))], cookie=cookie))
    return out


def _sr(fabric: Clos, path, members, match: dict, cookie: int) -> FlowRule:
    """sr mode: the source leaf pushes the destination leaf's label (coding the members core
    -> aggregation switch and aggregation switch -> leaf) and, between pods, the core's on top
    (coding the member aggregation switch -> core), and outputs over the first hop's member.
    A path naming no members takes every hop's first alive member (0 without bundles)."""
    ls = label_space(fabric)
    ls.check()
    if members is None:
        members = [(alive_of(fabric, a, b) or (0,))[0] for a, b in zip(path, path[1:])]
    _check_members(path, members)
    m = list(members)
    if len(path) == 3:
        stack = [ls.of(path[-1], ls.leaf_code(0, m[1]))]
    else:
        stack = [ls.of(path[-1], ls.leaf_code(m[2], m[3])), ls.of(path[2], m[1])]
    actions = [a for lab in stack for a in (("push_mpls", ETH_MPLS), ("set_field", "mpls_label", lab))]
    return rule(fabric.dpids[path[0]], T_CLASSIFY, PRIO_PLANNED + len(match), match,
                actions + [("output", fabric.ports_to(path[0], path[1])[m[0]])], cookie=cookie)


def _check_members(path, members) -> None:
    if len(members) != len(path) - 1:
        raise InputError(f"a path of {len(path)} switches needs {len(path) - 1} members, got "
                         f"{len(members)}")


def _pinned(fabric: Clos, path, members, match: dict, cookie: int) -> list[FlowRule]:
    """Flow mode on a fabric with bundles: the entries at the source leaf and (between pods)
    the source aggregation switch, and at every other switch whose next hop is a bundle of
    several alive members; each matches the port the flow came in on (the planned member of
    the hop before) and outputs to the planned member's port."""
    _check_members(path, members)
    out = []
    for k, (sw, nxt) in enumerate(zip(path, path[1:])):
        if k >= len(path) // 2 and len(member_ports(fabric, sw, nxt)) < 2:
            continue  # a down hop the static entries take to the only alive member
        at = match if k == 0 else dict(match, in_port=fabric.ports_to(sw, path[k - 1])[
            members[k - 1]])
        out.append(rule(fabric.dpids[sw], T_CLASSIFY, PRIO_PLANNED + len(at), at,
                        [("output", fabric.ports_to(sw, nxt)[members[k]])], cookie=cookie))
    return out
