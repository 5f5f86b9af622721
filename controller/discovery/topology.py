"""Fabric discovery: what LLDP and host packets show, and the leaf-spine made of it.

The shell feeds a ``Topology`` with events, passing the time in: switches and their ports
(``switch_up``, ``port_changed``, ``switch_down``), LLDP probes received (``link_seen``: a
probe sent from (dpid, port) came in on (dpid2, port2)), ``expire`` every probe round, and
hosts (``host_seen``) from ARP and IPv4 packet-ins on ports that face no switch.

``recognise`` turns that into a wired ``Clos`` of one two-tier plane (one pod, its spines the
aggregation switches; ``tiers.recognise_clos`` adds bundles and three tiers): the switch graph
(networkx) should be bipartite; the side without host ports are the spines; every leaf should
reach every spine and a pair without a link is put in ``Clos.down``. What is not leaf-spine
(a leaf-leaf cable, a host on a spine, a switch with no link, parallel links) is reported and
left out, so routing stays on what is valid (roles: ``roles.assign_roles``).
``declared.check_declared`` compares a declared fabric with what is seen (wrong port, missing
link, unknown switch). ``probe_ports`` says where ARP probes can find a host not heard yet.
Problems are dicts ``{"kind", "switch", "port", "detail", "dpid"}`` (``switch`` is a name, or
the dpid in hex for a switch that has none; ``port`` may be None).

    >>> t = Topology()
    >>> t.switch_up(1, {1: True}, now=0.0)                # a spine
    True
    >>> t.switch_up(2, {1: True, 3: True}, now=0.0)       # a leaf, host on port 3
    True
    >>> t.link_seen(1, 1, 2, 1, now=0.0), t.link_seen(2, 1, 1, 1, now=0.0)
    (True, True)
    >>> t.host_seen(2, 3, "02:00:00:00:00:01", "10.0.0.1", now=0.0)
    True
    >>> fabric, problems = recognise(t)
    >>> fabric.planes[0].aggs, fabric.leaves, fabric.hosts, fabric.ports["l0"]
    ([['s0']], ['l0'], {'h0_0': 'l0'}, {'s0': 1, 'h0_0': 3})
    >>> problems
    []
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.discovery.hosts import natural_key, place_hosts
from controller.discovery.roles import LEAF, SPINE, assign_roles
from controller.errors import InputError
from controller.model.clos import TIERS, Clos, Plane

DEFAULT_LINK_TIMEOUT = 3.5  # LLDP every second: a link is gone after three lost probes
MAX_AGENTS = 65536  # host interfaces whose LLDP agent is remembered
_OVS_MAX_PORT = 0xFF00  # OVS rejects OpenFlow 1.3 port numbers above its 16-bit range


# ---- observations ----------------------------------------------------------------------------
@dataclass
class HostSeen:
    dpid: int
    port: int
    ip: str
    seen: float


@dataclass
class Topology:
    """What the network showed so far. Every event method returns True when it changed
    something that ``recognise`` reads (then ``version`` grew and ``changed_at`` is ``now``);
    the shell re-runs ``recognise`` once the topology stayed quiet for a probe round or two."""

    link_timeout: float = DEFAULT_LINK_TIMEOUT
    switches: dict[int, dict[int, bool]] = field(default_factory=dict)  # dpid -> {port: up}
    # directed: (src dpid, src port) -> (dst dpid, dst port, last seen)
    links: dict[tuple[int, int], tuple[int, int, float]] = field(default_factory=dict)
    hosts: dict[str, HostSeen] = field(default_factory=dict)  # by MAC
    # (host interface MAC, dpid, port) -> (LLDP chassis id, last heard): ``agents``
    chassis: dict[tuple[str, int, int], tuple[str, float]] = field(default_factory=dict)
    version: int = 0
    changed_at: float = 0.0
    _facing: set | None = field(default=None, repr=False, compare=False)
    # dpid -> keys of the links with an end on it (``_drop_links``), kept as links come and
    # go once built; None: not built yet
    _touching: dict | None = field(default=None, repr=False, compare=False)
    # keys of the links new or moved since ``take_fresh`` (a declared fabric's relayed-probe
    # check looks at those only: ``finder``); at most one per link key
    _fresh: set = field(default_factory=set, repr=False, compare=False)

    def _changed(self, now: float) -> bool:
        self.version += 1
        self.changed_at = now
        return True

    def switch_up(self, dpid: int, ports: Mapping[int, bool], now: float) -> bool:
        """A switch connected (or re-sent its port list): ``ports`` maps every physical port
        number to its up flag (no OFPP_LOCAL). Links on ports now down or gone are dropped."""
        ports = {int(p): bool(up) for p, up in ports.items()}
        if self.switches.get(dpid) == ports:
            return False
        self.switches[dpid] = ports
        self._drop_links(dpid, lambda d, p: d == dpid and not ports.get(p, False))
        return self._changed(now)

    def switch_down(self, dpid: int, now: float) -> bool:
        """A switch disconnected: its ports, links and hosts are forgotten."""
        if dpid not in self.switches:
            return False
        del self.switches[dpid]
        self._drop_links(dpid, lambda d, p: d == dpid)
        for mac in [m for m, h in self.hosts.items() if h.dpid == dpid]:
            del self.hosts[mac]
        return self._changed(now)

    def port_changed(self, dpid: int, port: int, up: bool, now: float) -> bool:
        """A port status (added, deleted = down, link up/down). A port going down takes its
        links with it at once; hosts stay where they were seen."""
        ports = self.switches.get(dpid)
        if ports is None or ports.get(port) == up:
            return False
        ports[port] = up
        if not up:
            self._drop_links(dpid, lambda d, p: (d, p) == (dpid, port))
        return self._changed(now)

    def link_seen(self, src_dpid: int, src_port: int, dst_dpid: int, dst_port: int,
                  now: float) -> bool:
        """An LLDP probe sent out of (src_dpid, src_port) came in on (dst_dpid, dst_port).
        Ignored (False) when either switch is not connected. True only for a new or moved
        link; a re-seen link just has its time refreshed."""
        if src_dpid not in self.switches or dst_dpid not in self.switches:
            return False
        key, old = (src_dpid, src_port), self.links.get((src_dpid, src_port))
        self.links[key] = (dst_dpid, dst_port, now)
        if old is None or old[:2] != (dst_dpid, dst_port):
            self._facing = None
            self._fresh.add(key)
            if old is not None:
                self._unindex(key, old[0])
            self._index(key, dst_dpid)
        for d, p in (key, (dst_dpid, dst_port)):
            self.switches[d][p] = True  # a probe crossed it
        for mac in [m for m, h in self.hosts.items()
                    if (h.dpid, h.port) in (key, (dst_dpid, dst_port))]:
            del self.hosts[mac]  # learned before the probe showed a switch there
        if old is not None and old[:2] == (dst_dpid, dst_port):
            return False
        return self._changed(now)

    def take_fresh(self) -> set[tuple[int, int]]:
        """The keys of the links new or moved since the last call (some may be gone since)."""
        fresh, self._fresh = self._fresh, set()
        return fresh

    def expire(self, now: float, paused=None) -> list[tuple[int, int, int, int]]:
        """Drop links not seen for ``link_timeout`` seconds; returns them as
        (src dpid, src port, dst dpid, dst port). Call it once per probe round. ``paused(t)``:
        the seconds since ``t`` when no probe could go out (a busy controller), not counted."""
        gone = [(s, sp, d, dp) for (s, sp), (d, dp, t) in self.links.items()
                if now - t > self.link_timeout
                and (paused is None or now - t - paused(t) > self.link_timeout)]
        for s, sp, d, _dp in gone:
            del self.links[(s, sp)]
            self._unindex((s, sp), d)
            self._facing = None
        if gone:
            self._changed(now)
        return sorted(gone)

    def drop_ports(self, ports: set[tuple[int, int]], now: float) -> bool:
        """Forget the links with an end on one of ``ports`` ((dpid, port) pairs): discovery
        took them for host ports (relayed probes, ``finder``)."""
        before = len(self.links)
        for dpid in {d for d, _p in ports}:
            self._drop_links(dpid, lambda d, p: (d, p) in ports)
        return self._changed(now) if len(self.links) != before else False

    def host_seen(self, dpid: int, port: int, mac: str, ip: str, now: float) -> bool:
        """A host's ARP or IPv4 packet came in on (dpid, port) (``lldp.parse_host`` gives
        mac and ip). Ignored (False) on a port that faces a switch, on an unknown switch and
        for an unspecified, multicast or malformed address."""
        try:
            addr = ipaddress.IPv4Address(ip)
        except (ValueError, TypeError):
            return False
        if addr.is_unspecified or addr.is_multicast or not isinstance(mac, str) \
                or not re.fullmatch(r"([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}", mac) \
                or int(mac[:2], 16) & 1:
            return False
        if dpid not in self.switches or (dpid, port) in self.facing():
            return False
        mac, ip = mac.lower(), str(addr)
        old = self.hosts.get(mac)
        self.hosts[mac] = HostSeen(dpid, port, ip, now)
        if old is not None and (old.dpid, old.port, old.ip) == (dpid, port, ip):
            return False
        return self._changed(now)

    def host_chassis(self, dpid: int, port: int, mac: str, chassis: str, now: float) -> bool:
        """A host's LLDP frame (``lldp.parse_host_lldp``) came in on (dpid, port): the
        interface ``mac`` belongs to the host whose agent names itself ``chassis`` (joins a
        host's interfaces across planes, ``planes``). Ignored (False) where ``host_seen``
        ignores a packet. At most ``MAX_AGENTS`` interfaces are remembered, the longest
        unheard forgotten first."""
        if dpid not in self.switches or (dpid, port) in self.facing() or not isinstance(mac, str):
            return False
        key = (mac.lower(), dpid, port)
        old = self.chassis.pop(key, None)
        self.chassis[key] = (chassis, now)  # last: the dict's order is the order last heard
        if old is not None and old[0] == chassis:
            return False
        if len(self.chassis) > MAX_AGENTS:
            del self.chassis[next(iter(self.chassis))]
        return self._changed(now)

    def agents(self) -> dict[str, str]:
        """MAC -> chassis id of host interfaces whose agent was heard on the port where the
        interface is seen now (a frame with another host's MAC from elsewhere names nothing)."""
        return {mac: got[0] for mac, h in self.hosts.items()
                if (got := self.chassis.get((mac, h.dpid, h.port))) is not None}

    def forget_hosts(self, which, now: float) -> bool:
        """Drop the hosts for which ``which(mac, HostSeen)`` is true (an address moved)."""
        gone = [m for m, h in self.hosts.items() if which(m, h)]
        for m in gone:
            del self.hosts[m]
        lost = set(gone)
        if lost:
            self.chassis = {k: v for k, v in self.chassis.items() if k[0] not in lost}
        return self._changed(now) if gone else False

    # ---- queries --------------------------------------------------------------------------
    def facing(self) -> set[tuple[int, int]]:
        """Ports at either end of a link seen (in one direction at least). Do not modify."""
        if self._facing is None:
            self._facing = set(self.links)
            self._facing.update((d, p) for d, p, _t in self.links.values())
        return self._facing

    def host_by_ip(self, ip: str) -> tuple[str, HostSeen] | None:
        """(MAC, where) of the host last seen with this address, or None."""
        best = None
        for mac, h in self.hosts.items():
            if h.ip == ip and (best is None or (h.seen, mac) > (best[1].seen, best[0])):
                best = (mac, h)
        return best

    def _drop_links(self, dpid: int, touches) -> None:
        """Drop the links with an end on ``dpid`` that ``touches(dpid, port)`` of an end.
        O(links of the switch), once the index of links by switch is built (O(links), once;
        then kept as links come and go): a fabric's switches reconnecting one by one scanned
        every link each (4,096 at k = 16, 0.25 s in a restart)."""
        if self._touching is None:
            self._touching = {}
            for key, (d, _dp, _t) in self.links.items():
                self._index(key, d)
        for key in list(self._touching.get(dpid, ())):
            d, dp, _t = self.links[key]
            if touches(*key) or touches(d, dp):
                del self.links[key]
                self._unindex(key, d)
                self._facing = None

    def _index(self, key: tuple[int, int], dst: int) -> None:
        if self._touching is not None:
            for end in {key[0], dst}:
                self._touching.setdefault(end, set()).add(key)

    def _unindex(self, key: tuple[int, int], dst: int) -> None:
        if self._touching is not None:
            for end in {key[0], dst}:
                self._touching.get(end, set()).discard(key)


# ---- algorithms --------------------------------------------------------------------------------
def cables(topology: Topology) -> tuple[list[tuple[int, int, int, int]], list[tuple]]:
    """Links seen in both directions, as (dpid a, port a, dpid b, port b) with (a, pa) <
    (b, pb), sorted; and the odd observations as (kind, dpid, port, peer dpid, peer port, other):
    ``one_way_link``, ``inconsistent_link`` (the far port's probes come from a third port,
    ``other``), ``self_link``. O(links log links).

    >>> t = Topology(); _ = t.switch_up(1, {1: True}, 0); _ = t.switch_up(2, {1: True}, 0)
    >>> _ = t.link_seen(1, 1, 2, 1, 0); cables(t)
    ([], [('one_way_link', 1, 1, 2, 1, None)])
    """
    out, odd = [], []
    for (a, pa), (b, pb, _t) in sorted(topology.links.items()):
        if a == b:
            odd.append(("self_link", a, pa, b, pb, None))
            continue
        back = topology.links.get((b, pb))
        if back is None:
            odd.append(("one_way_link", a, pa, b, pb, None))
        elif back[:2] != (a, pa):
            odd.append(("inconsistent_link", a, pa, b, pb, back[:2]))
        elif (a, pa) < (b, pb):
            out.append((a, pa, b, pb))
    return out, odd


def recognise(topology: Topology, previous: Clos | None = None,
              link_gbps: float | None = None) -> tuple[Clos | None, list[dict]]:
    """The leaf-spine the topology shows, as a wired ``Clos`` of one two-tier plane, and the
    problems found.

    Names are deterministic: spines s0.., leaves l0.. by datapath id, hosts h<leaf>_<k> with
    k the rank of the host's port among the leaf's ports that face no switch (so a generated
    Mininet fabric comes back with its own names). With ``previous`` (the last recognition)
    names, roles and port numbers stick: switches and hosts keep their names, a switch that
    left stays with its links down, a link that went away keeps its ports in ``down`` (a
    ``Clos`` of one two-tier plane; of a bundle, its first member's ports). A
    leaf-spine pair without any port ever seen gets an unused placeholder port number (above
    the switch's ports) so the fabric stays wired; it is in ``down``. Returns (None, problems)
    when there is no spine or no leaf. ``link_gbps`` (probes cannot measure it) defaults to
    the previous fabric's (its leaf tier's), else 100. O(V + E + H) plus ``assign_roles``.

    >>> t = Topology()
    >>> for d in (1, 2, 3): _ = t.switch_up(d, {1: True, 2: True}, 0)
    >>> for a, pa, b in ((1, 1, 2), (1, 2, 3)):      # spine 1, leaves 2 and 3 (port 2 idle)
    ...     _ = t.link_seen(a, pa, b, 1, 0), t.link_seen(b, 1, a, pa, 0)
    >>> f, _ = recognise(t); f.planes[0].aggs, f.leaves, f.down
    ([['s0']], ['l0', 'l1'], set())
    """
    import networkx as nx
    if previous is not None and not previous.wired:
        raise InputError("discovery: the previous fabric has no wiring (dpids, ports)")
    found, odd = cables(topology)
    facing = topology.facing()
    edge = {d: sorted(p for p, up in ports.items() if up and (d, p) not in facing)
            for d, ports in topology.switches.items()}
    prev_name = dict(previous.switch_of_dpid) if previous else {}
    prev_role = {d: SPINE if previous.tier_of.get(n) == 1 else LEAF
                 for d, n in prev_name.items()} if previous else {}

    graph = nx.Graph()
    graph.add_nodes_from(sorted(topology.switches))
    for a, pa, b, pb in found:
        graph.add_edge(a, b)
    heard = {}
    for h in topology.hosts.values():
        heard[h.dpid] = heard.get(h.dpid, 0) + 1
    roles = assign_roles(graph, {d: (heard.get(d, 0), len(e)) for d, e in edge.items()},
                         prev_role)
    absent = {d: r for d, r in prev_role.items() if d not in topology.switches}
    roles.update(absent)

    names = _switch_names(roles, prev_name, previous)
    name = lambda d: names.get(d) or f"{d:#x}"
    problems = _Problems(name)
    spines = [d for d in _ordered(roles, SPINE, previous)]
    leaves = [d for d in _ordered(roles, LEAF, previous)]

    for kind, a, pa, b, pb, other in odd:
        if kind == "self_link":
            problems.add(kind, a, pa, f"{name(a)} port {pa} is cabled to its own port {pb}; "
                                      "not used")
        elif kind == "one_way_link":
            problems.add(kind, a, pa, f"{name(a)} port {pa} -> {name(b)} port {pb}: probes "
                                      "cross in this direction only; not used")
        else:
            problems.add(kind, a, pa, f"{name(a)} port {pa} reaches {name(b)} port {pb}, but "
                                      f"{name(b)} port {pb} reaches {name(other[0])} port "
                                      f"{other[1]}; not used")
    for d in sorted(topology.switches):
        if d not in roles:
            macs = sorted(m for m, h in topology.hosts.items() if h.dpid == d)
            problems.add("isolated_switch", d, None,
                         f"switch {d:#x} has no link to another switch; left out"
                         + (f" with its hosts {', '.join(macs)}" if macs else ""))
    for d in sorted(absent):
        problems.add("switch_down", d, None, f"{name(d)} ({d:#x}) is not connected; its "
                                             "links are down")

    used: dict[int, dict[int, object]] = {d: {} for d in roles}  # dpid -> {port: peer dpid/mac}
    pair: dict[tuple[int, int], tuple[int, int]] = {}  # (leaf, spine) -> (leaf port, spine port)
    for a, pa, b, pb in found:
        ra, rb = roles.get(a), roles.get(b)
        if ra == rb:
            problems.add(f"{ra}_{ra}_link", a, pa,
                         f"{name(a)} port {pa} is cabled to {name(b)} port {pb}: a {ra}-{ra} "
                         "link is not part of a leaf-spine; not used")
            continue
        (l, lp), (s, sp) = ((a, pa), (b, pb)) if ra == LEAF else ((b, pb), (a, pa))
        if (l, s) in pair:
            problems.add("parallel_links", l, lp,
                         f"{name(l)} port {lp} is a second link to {name(s)} (its port {sp}); "
                         f"only port {pair[(l, s)][0]} is used")
            continue
        pair[(l, s)] = (lp, sp)
        used[l][lp], used[s][sp] = s, l

    hosts = place_hosts(topology, roles, edge, used, names, problems, previous)
    down: set[tuple[str, str]] = set()
    cabled = {(a, pa) for a, pa, _b, _pb in found} | {(b, pb) for _a, _pa, b, pb in found}
    for l in leaves:
        for s in spines:
            if (l, s) in pair:
                continue
            lp = sp = None
            if l in prev_name and s in prev_name and prev_role.get(l) == LEAF \
                    and prev_role.get(s) == SPINE:
                lp = previous.port(prev_name[l], prev_name[s])  # a bundle's first member
                sp = previous.port(prev_name[s], prev_name[l])
                lp = lp if lp is not None and lp not in used[l] and (l, lp) not in cabled else None
                sp = sp if sp is not None and sp not in used[s] and (s, sp) not in cabled else None
            known_port = lp
            lp = lp if lp is not None else _placeholder(topology, l, used[l])
            used[l][lp] = s
            sp = sp if sp is not None else _placeholder(topology, s, used[s])
            used[s][sp] = l
            pair[(l, s)] = (lp, sp)
            down.add((names[l], names[s]))
            if l in absent or s in absent:
                continue  # reported as switch_down
            where = f"{name(l)} port {known_port}" if known_port is not None else name(l)
            problems.add("missing_link", l, known_port,
                         f"no link seen between {where} and {name(s)}; marked down")

    if not spines or not leaves:
        problems.add("not_leaf_spine", None, None,
                     f"found {len(spines)} spines and {len(leaves)} leaves: a leaf-spine needs "
                     "at least one of each")
        return None, problems.sorted()
    ports: dict[str, dict[str, int]] = {names[d]: {} for d in spines + leaves}
    for (l, s), (lp, sp) in pair.items():
        ports[names[l]][names[s]] = lp
        ports[names[s]][names[l]] = sp
    host_leaf, host_ip, host_mac = {}, {}, {}
    for hname, (mac, l, port, ip) in hosts.items():
        host_leaf[hname] = names[l]
        ports[names[l]][hname] = port
        host_ip[hname], host_mac[hname] = ip, mac
    order = {n: i for i, n in enumerate(  # neighbours as generate writes them
        [names[d] for d in spines + leaves] + sorted(hosts, key=natural_key))}
    for sw in ports:
        ports[sw] = dict(sorted(ports[sw].items(), key=lambda kv: order[kv[0]]))
    wiring = {"dpids": {names[d]: d for d in spines + leaves}, "ports": ports,
              "host_ip": host_ip, "host_mac": host_mac}
    gbps = link_gbps if link_gbps is not None else previous.link_gbps["leaf"] if previous \
        else 100.0
    plane = Plane("plane0", ["pod"], [names[d] for d in leaves], [0] * len(leaves),
                  [[names[d] for d in spines]])
    fabric = Clos([plane], {h: (host_leaf[h],) for h in sorted(host_leaf, key=natural_key)},
                  {t: float(gbps) for t in TIERS}, down=down, wiring=wiring)
    fabric.check_wiring()  # a bug here, not bad input: the fabric is built to pass it
    return fabric, problems.sorted()


def probe_ports(topology: Topology, fabric: Clos | None = None) -> list[tuple[int, int]]:
    """(dpid, port) pairs to send an ARP probe from to find a host not heard yet: every up
    port of a leaf that faces no switch (leaves of ``fabric``, else of ``recognise``; every
    switch when no leaf-spine is recognised). O(ports).

    >>> t = Topology(); _ = t.switch_up(5, {1: True, 2: False}, 0); probe_ports(t)
    [(5, 1)]
    """
    if fabric is None:
        fabric, _ = recognise(topology)
    dpids = {fabric.dpids[l] for l in fabric.leaves} if fabric is not None and fabric.wired \
        else set(topology.switches)
    facing = topology.facing()
    return sorted((d, p) for d in dpids for p, up in topology.switches.get(d, {}).items()
                  if up and (d, p) not in facing)


def format_problem(problem: Mapping) -> str:
    """One log line: ``kind: detail``."""
    return f"{problem['kind']}: {problem['detail']}"


# ---- helpers -----------------------------------------------------------------------------------
class _Problems:
    def __init__(self, name):
        self.name, self.items = name, []

    def add(self, kind: str, dpid: int | None, port: int | None, detail: str, **more) -> None:
        self.items.append({"kind": kind, "switch": None if dpid is None else self.name(dpid),
                           "port": port, "detail": detail, "dpid": dpid, **more})

    def sorted(self) -> list[dict]:
        return sorted(self.items, key=lambda p: (p["dpid"] is None, p["dpid"] or 0,
                                                 p["port"] or 0, p["kind"], p["detail"]))


def _ordered(roles: Mapping[int, str], role: str, previous: Clos | None) -> list[int]:
    """Switches of a role: the previous fabric's order first, then new ones by dpid."""
    members = {d for d, r in roles.items() if r == role}
    old = []
    if previous is not None:
        names = previous.planes[0].aggs[0] if role == SPINE else previous.leaves
        old = [previous.dpids[n] for n in names if previous.dpids[n] in members]
    return old + sorted(members - set(old))


def _switch_names(roles: Mapping[int, str], prev_name: Mapping[int, str],
                  previous: Clos | None) -> dict[int, str]:
    names: dict[int, str] = {}
    for d, r in roles.items():
        if d in prev_name and (previous.tier_of.get(prev_name[d]) == 1) == (r == SPINE):
            names[d] = prev_name[d]
    taken = set(names.values()) | (set(previous.hosts) if previous else set())
    for role, prefix in ((SPINE, "s"), (LEAF, "l")):
        n = 0
        for d in _ordered(roles, role, previous):
            if d in names:
                continue
            while f"{prefix}{n}" in taken:
                n += 1
            names[d] = f"{prefix}{n}"
            taken.add(names[d])
    return names


def _placeholder(topology: Topology, dpid: int, used: Mapping[int, object]) -> int:
    """An unused port number above every port of the switch: the port of a link never seen."""
    top = max([0, *topology.switches.get(dpid, {}), *used])
    port = top + 1
    if port >= _OVS_MAX_PORT:
        port = next(p for p in range(1, _OVS_MAX_PORT)
                    if p not in used and p not in topology.switches.get(dpid, {}))
    return port

