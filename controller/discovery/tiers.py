"""Three tiers from what LLDP saw: leaves (the switches hosts are heard on, and before they
speak the switches with ports that face no switch), aggregation switches (the leaves'
neighbours) in pods, cores (the aggregation switches' other neighbours) in groups. A switch
graph with no core is a leaf-spine and is read by ``topology.recognise``, and so is one that
a leaf-spine explains better (a fat-tree is no leaf-spine with missing links, nor the
reverse: ``clos_shape``); either way the fabric comes back as a ``Clos`` (a leaf-spine: one
plane of one pod, its bundles added by ``_bundled``).

A pod is a connected part of the leaf-aggregation graph; a core group is the cores that reach
the same aggregation switches, one per pod (group g on the g-th aggregation switch of every pod,
``model.clos``). Names follow ``Clos.fat_tree``: pods in order of their lowest leaf dpid,
leaves l<i> pod by pod and by dpid, aggregation switches a<pod>_<slot>, cores c<group>_<j>,
groups in order of their lowest core dpid; hosts as ``topology.recognise`` names them.

First step of three-tier discovery (issue 26): one plane (issue 38: no host heard needed); a
cable between switches of one tier or across pods is reported and not used, a model link never
seen is down (on the port that is up, else a placeholder). With the last recognition
(``previous``) names stay and a switch that left stays in its place, down, with its hosts, as
long as every connected switch had a place there. Several planes: ``planes.py`` recognises
each alone with this. Not yet: a cable from a leaf to a core, new switches joining a
recognised fabric under their old names.

Bundles: parallel cables between two adjacent switches are one link of several members,
ordered by the lower switch's port numbers, on three tiers and on a leaf-spine (``_bundled``):
per tier the most common size is the ``bundle`` default, other sizes are listed and reported
(``unequal_bundle``); a member of the last recognition no longer seen keeps its ports and is
down.

>>> from controller.discovery.topology import Topology
>>> t = Topology()
>>> for d in (1, 2, 3, 4, 5, 6): _ = t.switch_up(d, {1: True, 2: True, 3: True}, 0)
>>> cables_ = [((1, 1), (3, 1)), ((2, 1), (4, 1)), ((3, 2), (5, 1)), ((4, 2), (5, 2)),
...            ((3, 3), (6, 1)), ((4, 3), (6, 2))]      # 2 pods of 1 leaf + 1 agg, 2 cores
>>> for (a, pa), (b, pb) in cables_: _ = t.link_seen(a, pa, b, pb, 0), t.link_seen(b, pb, a, pa, 0)
>>> _ = t.host_seen(1, 2, "02:00:00:00:00:01", "10.0.0.1", 0)
>>> _ = t.host_seen(2, 2, "02:00:00:00:01:01", "10.0.1.1", 0)
>>> f, problems = recognise_clos(t)
>>> f.planes[0].leaves, f.planes[0].aggs, f.planes[0].cores, sorted(f.hosts)
(['l0', 'l1'], [['a0_0'], ['a1_0']], [['c0_0', 'c0_1']], ['h0_0', 'h1_0'])
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from controller.discovery.hosts import natural_key, place_hosts
from controller.discovery.roles import LEAF, SPINE, _spine_side, assign_roles
from controller.discovery.topology import (
    Topology,
    _placeholder,
    _Problems,
    cables,
    recognise,
)
from controller.model.clos import TIERS, Clos, Plane

if TYPE_CHECKING:  # networkx where it is used: the controller's start loads no networkx (issue 74)
    import networkx as nx

TIER_WORDS = ("leaf", "aggregation switch", "core")  # how problems name a switch's tier


@dataclass
class ClosShape:
    """Datapath ids by place: leaves per pod, aggregation switches per pod and slot, cores per
    group (slot); the cables left out as (dpid, port, peer dpid, peer port, kind)."""
    pods: list[list[int]]
    aggs: list[list[int]]
    groups: list[list[int]]
    unused: list[tuple[int, int, int, int, str]] = field(default_factory=list)


def clos_shape(graph: nx.Graph, heard: Mapping[int, int],
               free: Mapping[int, int] | None = None) -> ClosShape | None:
    """The three tiers of ``graph`` (switches; edges: cables): the ``heard`` switches (dpid ->
    hosts heard) are leaves, and with ``free`` (dpid -> up ports that face no switch) so are
    switches with such ports where no host was heard yet (``_leaves``); the leaves' neighbours
    are aggregation switches; a switch above those is a core when it reaches two pods or more,
    else a leaf whose hosts were not heard yet. None when there is no core, when the graph is
    no single-plane Clos (each pod one aggregation switch per core group), or when the three
    tiers leave more cables unexplained than a leaf-spine would (``_unexplained``: a fat-tree
    is no leaf-spine with missing links, and a leaf-spine no fat-tree). O(V + E + C^2) for C
    cores."""
    import networkx as nx
    leaves = _leaves(graph, heard, free or {})
    aggs = {n for leaf in leaves for n in graph[leaf]} - leaves
    pods = _pods(graph, leaves, aggs)
    pod_of = {a: p for p, (_ls, ags) in enumerate(pods) for a in ags}
    cores = set()
    for d in graph:  # above the aggregation switches, or a leaf whose hosts are silent
        if d in leaves or d in aggs or not any(n in aggs for n in graph[d]):
            continue
        if len({pod_of[n] for n in graph[d] if n in pod_of}) > 1:
            cores.add(d)
        else:
            leaves.add(d)
    if not leaves or not cores:
        return None
    pods = _pods(graph, leaves, aggs)
    pod_of = {a: p for p, (_ls, ags) in enumerate(pods) for a in ags}
    # cores share a group when most of the aggregation switches of one reach the other: a
    # missing or miswired core link does not split or join groups
    below = {c: {n for n in graph[c] if n in aggs} for c in cores}
    same = nx.Graph()
    same.add_nodes_from(cores)
    ordered = sorted(cores)
    same.add_edges_from((c, d) for i, c in enumerate(ordered) for d in ordered[i + 1:]
                        if 2 * len(below[c] & below[d]) > min(len(below[c]), len(below[d])))
    groups = sorted((sorted(g) for g in nx.connected_components(same)), key=min)
    group_of = {c: g for g, members in enumerate(groups) for c in members}
    slots: list[dict[int, int]] = [{} for _ in pods]
    for a in sorted(pod_of):
        votes = [group_of[c] for c in graph[a] if c in group_of]
        if not votes:
            return None  # an aggregation switch with no core: no slot to give it (yet)
        g = max(sorted(set(votes)), key=votes.count)  # the group most of its cores are in
        if g in slots[pod_of[a]]:
            return None  # two aggregation switches of a pod in one group
        slots[pod_of[a]][g] = a
    if any(sorted(s) != list(range(len(groups))) for s in slots):
        return None  # a pod that misses a group
    shape = ClosShape([ls for ls, _a in pods],
                      [[s[g] for g in range(len(groups))] for s in slots], groups)
    evidence = {d: (heard.get(d, 0), (free or {}).get(d, 0)) for d in graph}
    return shape if _unexplained(graph, shape) <= _unexplained(graph, None, evidence) else None


def _leaves(graph: nx.Graph, heard: Mapping[int, int], free: Mapping[int, int]) -> set:
    """The switches taken as leaves. Hosts heard say it first: of two cabled switches with
    hosts heard, the one with fewer (then with more switch links) is an upper switch with a
    stray host. Then, with no host heard yet (zero configuration before any host spoke, or a
    pod whose hosts are silent), a switch with up ports that face no switch (host ports, once
    LLDP crossed every cable: the finder waits for that) on the leaf side of its part of the
    graph (bipartite: the side where more switches have hosts heard, then such ports), most
    such ports first, is a leaf when it is cabled to no leaf and to no leaf's neighbour: one
    leaf per pod is enough, the pods place the others (``clos_shape``), and a core or an
    aggregation switch whose link was not seen yet is never taken for one."""
    import networkx as nx
    rank = {d: (heard.get(d, 0), -graph.degree(d)) for d in graph}
    leaves = {d for d in graph if heard.get(d, 0) > 0
              and not any(heard.get(n, 0) > 0 and rank[n] > rank[d] for n in graph[d])}
    near = leaves | {n for d in leaves for n in graph[d]}
    evidence = {d: (heard.get(d, 0), free.get(d, 0)) for d in graph}
    for part in sorted(nx.connected_components(graph), key=min):
        sides, side = _sides(graph, part), part
        if sides is not None:
            x, y = sides
            side = y if _spine_side(x, y, evidence, {}) is x else x
        for d in sorted(side, key=lambda d: (-free.get(d, 0), graph.degree(d), d)):
            if free.get(d, 0) and not heard.get(d, 0) and d not in near \
                    and not any(n in near for n in graph[d]):
                leaves.add(d)
                near |= {d, *graph[d]}
    return leaves


def _sides(graph: nx.Graph, part: set) -> tuple[set, set] | None:
    """The two sides of a connected part of ``graph`` with a cable, or None when it has no
    cable or a cable within a side (not bipartite). O(part + its cables)."""
    start = min(part)
    colour, todo = {start: 0}, [start]
    while todo:
        d = todo.pop()
        for n in graph[d]:
            if n not in colour:
                colour[n] = 1 - colour[d]
                todo.append(n)
            elif colour[n] == colour[d]:
                return None
    if len(part) < 2:
        return None
    return {d for d, c in colour.items() if c == 0}, {d for d, c in colour.items() if c}


def _unexplained(graph: nx.Graph, shape: ClosShape | None, evidence=None) -> int:
    """Links a reading of ``graph`` leaves unexplained: the links of its model not heard plus
    the cables heard that are not in its model (parallel cables count once). ``shape``: three
    tiers; None: the leaf-spine ``assign_roles`` reads with ``evidence``, every leaf to every
    spine. O(V + E)."""
    if shape is None:
        roles = assign_roles(graph, evidence)
        model = sum(r == LEAF for r in roles.values()) * sum(r == SPINE for r in roles.values())
        fits = sum(1 for a, b in graph.edges if {roles.get(a), roles.get(b)} == {LEAF, SPINE})
    else:
        pod_of = {d: p for p, pod in enumerate(shape.pods) for d in pod}
        slot = {d: (p, g) for p, aggs in enumerate(shape.aggs) for g, d in enumerate(aggs)}
        group_of = {d: g for g, group in enumerate(shape.groups) for d in group}
        model = sum(len(pod) * len(aggs) for pod, aggs in zip(shape.pods, shape.aggs)) \
            + sum(len(shape.aggs) * len(group) for group in shape.groups)

        def fits_(a, b) -> bool:
            (a, b) = (a, b) if a in slot else (b, a)
            return a in slot and (pod_of.get(b) == slot[a][0] or group_of.get(b) == slot[a][1])
        fits = sum(1 for a, b in graph.edges if fits_(a, b))
    return model - fits + graph.number_of_edges() - fits


def _pods(graph: nx.Graph, leaves: set, aggs: set) -> list[tuple[list, list]]:
    """(leaves, aggregation switches) of every connected part of the leaf-aggregation graph,
    in order of their lowest leaf."""
    import networkx as nx
    down = nx.Graph()
    down.add_nodes_from(leaves | aggs)
    down.add_edges_from((a, b) for a, b in graph.edges
                        if (a in leaves and b in aggs) or (b in leaves and a in aggs))
    return sorted((sorted(c & leaves), sorted(c & aggs)) for c in nx.connected_components(down)
                  if c & leaves and c & aggs)


def _previous_shape(previous: Clos, topology: Topology) -> ClosShape | None:
    """The last three-tier recognition's places, while every connected switch has one there:
    names stay, and a switch that left stays in its place, down."""
    if len(previous.planes) != 1 or not previous.wired or previous.tiers != 3 \
            or not set(topology.switches) <= set(previous.switch_of_dpid):
        return None
    p, d = previous.planes[0], previous.dpids
    return ClosShape([[d[leaf] for leaf, q in zip(p.leaves, p.pod_of_leaf) if q == pod]
                      for pod in range(len(p.pods))],
                     [[d[a] for a in aggs] for aggs in p.aggs],
                     [[d[c] for c in group] for group in p.cores])


def _contradicted(previous: Clos, topology: Topology) -> bool:
    """Places read before any host spoke that a host heard since contradicts: it is on a
    switch they put above the leaves. The graph is then read afresh, hosts first, and that
    reading is used when it explains the links as well (a stray host on an aggregation
    switch does not undo a fat-tree read right)."""
    return not previous.host_leaves and any(
        previous.tier_of[previous.switch_of_dpid[h.dpid]] > 0
        for h in topology.hosts.values() if h.dpid in previous.switch_of_dpid)


def recognise_clos(topology: Topology, link_gbps: float | None = None,
                   previous: Clos | None = None):
    """The fabric the topology shows, a wired single-plane ``Clos``: three tiers when
    ``clos_shape`` finds cores, else the leaf-spine ``topology.recognise`` reads (with
    ``previous``) as a Clos of one pod (``_bundled``); and the problems found. Link speed 100
    Gbit/s unless ``link_gbps`` (Gbit/s, or per tier of ``model.clos.TIERS``; else the
    previous fabric's). ``previous``: the last recognition, a ``Clos``."""
    import networkx as nx
    found, _odd = cables(topology)
    graph = nx.Graph()
    graph.add_nodes_from(sorted(topology.switches))
    graph.add_edges_from((a, b) for a, _pa, b, _pb in found)
    heard: dict[int, int] = {}
    for h in topology.hosts.values():
        heard[h.dpid] = heard.get(h.dpid, 0) + 1
    facing = topology.facing()
    edge = {d: sorted(p for p, up in ports.items() if up and (d, p) not in facing)
            for d, ports in topology.switches.items()}
    kept = _previous_shape(previous, topology) if previous is not None else None
    shape = kept
    if kept is None or _contradicted(previous, topology):
        fresh = clos_shape(graph, heard, {d: len(e) for d, e in edge.items()})
        if kept is None or fresh is not None and \
                _unexplained(graph, fresh) <= _unexplained(graph, kept):
            shape, kept = fresh, None
    if shape is None:
        if isinstance(link_gbps, Mapping):  # per tier: a leaf-spine has its leaf tier only
            link_gbps = link_gbps.get("leaf")
        fabric, problems = recognise(topology, _leaf_spine(previous), link_gbps)
        return _bundled(fabric, found, problems, previous)
    if link_gbps is None and kept:
        link_gbps = previous.link_gbps
    names: dict[int, str] = {}
    tier: dict[int, int] = {}
    for i, d in enumerate(d for pod in shape.pods for d in pod):
        names[d], tier[d] = f"l{i}", 0
    for p, slot_aggs in enumerate(shape.aggs):
        for g, d in enumerate(slot_aggs):
            names[d], tier[d] = f"a{p}_{g}", 1
    for g, group in enumerate(shape.groups):
        for j, d in enumerate(group):
            names[d], tier[d] = f"c{g}_{j}", 2
    if kept:
        names = {d: previous.switch_of_dpid[d] for d in names}
    absent = {d for d in names if d not in topology.switches}
    problems = _Problems(lambda d: names.get(d) or f"{d:#x}")

    def called(d: int) -> str:
        """A switch with its tier, as the problems name it."""
        return f"{TIER_WORDS[tier[d]]} {names[d]}"
    for d in sorted(absent):
        problems.add("switch_down", d, None, f"{called(d)} ({d:#x}) is not connected; its "
                                             "links are down", tier=TIER_WORDS[tier[d]])
    for d in sorted(set(topology.switches) - set(names)):
        problems.add("switch_not_placed", d, None, f"switch {d:#x} has no place in the three "
                     "tiers (no link to a leaf with hosts or to a pod seen); not used")
    pod_of = {d: p for p, pod in enumerate(shape.pods) for d in pod}
    pod_of.update({d: p for p, slot_aggs in enumerate(shape.aggs) for d in slot_aggs})
    group_of = {d: g for g, group in enumerate(shape.groups) for d in group}
    model = {(leaf, agg) for p, pod in enumerate(shape.pods) for leaf in pod
             for agg in shape.aggs[p]}
    model |= {(agg, core) for slot_aggs in shape.aggs for g, agg in enumerate(slot_aggs)
              for core in shape.groups[g]}
    used: dict[int, dict[int, object]] = {d: {} for d in names}
    pair: dict[tuple[int, int], tuple[int, int]] = {}
    cabled: dict[tuple[int, int], list[tuple[int, int]]] = {}  # every cable of a pair
    for a, pa, b, pb in found:
        if a not in names or b not in names:
            continue
        (lo, lp), (up, upp) = ((a, pa), (b, pb)) if tier[a] <= tier[b] else ((b, pb), (a, pa))
        if (lo, up) not in model:
            where = (f"pod{pod_of[up]}" if tier[up] == 1 else f"core group {group_of[up]}"
                     if tier[lo] == 1 and tier[up] == 2 else None)
            why = ("the same tier" if tier[lo] == tier[up] else f"{where}, not its own"
                   if where else "tiers that are not adjacent")
            problems.add("miswired_link", lo, lp, f"{called(lo)} port {lp} is cabled to "
                         f"{called(up)} port {upp}: {why}; not used",
                         tiers=[TIER_WORDS[tier[lo]], TIER_WORDS[tier[up]]])
            continue
        cabled.setdefault((lo, up), []).append((lp, upp))  # parallel cables: a bundle
        pair.setdefault((lo, up), (lp, upp))
        used[lo][lp], used[up][upp] = up, lo

    def port_for(d: int) -> int:
        """An aggregation switch's or core's port that is up and faces no switch is the
        missing link's (hosts sit on leaves only), else a placeholder."""
        free = [p for p in edge.get(d, []) if p not in used[d]] if tier[d] else []
        return free[0] if free else _placeholder(topology, d, used[d])

    down = set()
    old_port = lambda d, peer: _first(previous.ports[names[d]].get(names[peer])) if kept else None
    for lo, up in sorted(model - set(pair)):
        lp, upp = old_port(lo, up), old_port(up, lo)  # the last recognition's, if still free
        lp = lp if lp is not None and lp not in used[lo] and (lo, lp) not in facing \
            else port_for(lo)
        upp = upp if upp is not None and upp not in used[up] and (up, upp) not in facing \
            else port_for(up)
        used[lo][lp], used[up][upp] = up, lo
        pair[(lo, up)] = (lp, upp)
        down.add((names[lo], names[up]))
        if lo not in absent and up not in absent:  # else reported as switch_down
            problems.add("missing_link", lo, None,
                         f"no link seen between {called(lo)} and {called(up)}; marked down",
                         tiers=[TIER_WORDS[tier[lo]], TIER_WORDS[tier[up]]])
    roles = {d: LEAF if tier[d] == 0 else SPINE for d in names}
    # an upper switch's port that faces no switch is a link LLDP has not crossed (yet), not a
    # host port: reported only when a host is heard there (place_hosts)
    free = {d: [p for p in ports if p not in used.get(d, {})] if tier.get(d) == 0 else []
            for d, ports in edge.items()}
    hosts = place_hosts(topology, roles, free, used, names, problems, None)
    ports: dict[str, dict] = {names[d]: {} for d in names}
    counts: dict[tuple[str, str], int] = {}
    for (lo, up), first in pair.items():
        key = (names[lo], names[up])
        old = (previous.ports[key[0]].get(key[1]), previous.ports[key[1]].get(key[0])) \
            if kept else (None, None)
        members, gone = _members(cabled.get((lo, up), [first]), old, used[lo], used[up])
        down |= set() if key in down else {(*key, m) for m in gone}
        _put(ports, key, members)
        counts[key] = len(members)
    default, bundles = _bundle_sizes(counts, {names[d]: t for d, t in tier.items()},
                                     down, problems, {n: d for d, n in names.items()})
    if kept:  # hosts not heard since (a leaf that left forgot them): where they were
        heard_now = {mac for mac, _d, _p, _ip in hosts.values()}
        ips_now = {ip for _m, _d, _p, ip in hosts.values()}
        for h, (leaf,) in previous.host_leaves.items():
            mac, ip, d = previous.host_mac[h], previous.host_ip[h], previous.dpids[leaf]
            port = previous.ports[leaf][h]
            if h not in hosts and mac not in heard_now and ip not in ips_now \
                    and port not in used[d]:
                hosts[h] = (mac, d, port, ip)
                used[d][port] = mac
    host_leaf, host_ip, host_mac = {}, {}, {}
    for hname, (mac, leaf, port, ip) in sorted(hosts.items(), key=lambda kv: natural_key(kv[0])):
        host_leaf[hname] = (names[leaf],)
        ports[names[leaf]][hname] = port
        host_ip[hname], host_mac[hname] = ip, mac
    plane = Plane("plane0", [f"pod{p}" for p in range(len(shape.pods))],
                  [names[d] for pod in shape.pods for d in pod],
                  [pod_of[d] for pod in shape.pods for d in pod],
                  [[names[d] for d in slot_aggs] for slot_aggs in shape.aggs],
                  [[names[d] for d in group] for group in shape.groups])
    gbps = ({t: float(link_gbps.get(t, 100.0)) for t in TIERS} if isinstance(link_gbps, Mapping)
            else {t: 100.0 if link_gbps is None else float(link_gbps) for t in TIERS})
    fabric = Clos([plane], host_leaf, gbps, bundles, default, down=down,
                  down_switches={names[d] for d in absent if tier[d] > 0},
                  wiring={"dpids": {n: d for d, n in names.items()}, "ports": ports,
                          "host_ip": host_ip, "host_mac": host_mac})
    for sw in fabric.switches():  # ports in neighbours order, as Clos.wire writes them
        order = {n: i for i, n in enumerate(fabric.neighbours(sw))}
        fabric.ports[sw] = dict(sorted(ports[sw].items(), key=lambda kv: order.get(kv[0], 1e9)))
    fabric.wiring["ports"] = fabric.ports
    fabric.check_wiring()  # a bug here, not bad input: the fabric is built to pass it
    return fabric, problems.sorted()


# ---- bundles: parallel cables between two switches ---------------------------------------
def _first(port):
    """The first member's port of a port map's value (an int, a list, or None)."""
    return port[0] if isinstance(port, list) else port


def _members(seen: list, old: tuple, used_lo: dict, used_up: dict) -> tuple[list, list]:
    """The members of a pair, (lower port, upper port) ordered by the lower switch's port:
    the cables ``seen``, and the last recognition's members (``old``: its port lists at both
    ends) not seen now whose ports are still free, which are down; and the indices of those."""
    members = sorted(seen)
    for p, q in members:
        used_lo.setdefault(p, "member")
        used_up.setdefault(q, "member")
    lo_old, up_old = old
    gone = []
    if isinstance(lo_old, list) and isinstance(up_old, list):
        for p, q in zip(lo_old, up_old):
            if (p, q) not in members and p not in used_lo and q not in used_up:
                members.append((p, q))
                gone.append((p, q))
                used_lo[p], used_up[q] = "member", "member"
    members.sort()
    return members, [members.index(x) for x in gone]


def _put(ports: dict, key: tuple[str, str], members: list) -> None:
    """The port map entries of a pair at both ends: an int, or a list for a bundle."""
    lo, up = key
    ports[lo][up] = members[0][0] if len(members) == 1 else [p for p, _q in members]
    ports[up][lo] = members[0][1] if len(members) == 1 else [q for _p, q in members]


def _bundle_sizes(counts: dict, tier_of: dict, down: set, problems, dpid_of: dict,
                  words=TIER_WORDS):
    """(``Clos.bundle_default``, ``Clos.bundles``) from the links per (lower, upper) pair: per
    tier the most common count is the default, the other pairs are listed; each of those is
    reported (``unequal_bundle``, used as seen)."""
    default, bundles = {"leaf": 1, "core": 1}, {}
    for tier, word in ((0, "leaf"), (1, "core")):
        mine = {k: n for k, n in counts.items() if tier_of[k[0]] == tier}
        if not mine:
            continue
        sizes = [n for k, n in mine.items() if k not in down] or list(mine.values())
        default[word] = n = max(sorted(set(sizes)), key=sizes.count)
        for (lo, up), m in sorted(mine.items()):
            if m == n:
                continue
            bundles[(lo, up)] = m
            if (lo, up) not in down:
                problems.add("unequal_bundle", dpid_of[lo], None,
                             f"{words[tier]} {lo} has {m} link(s) to {words[tier + 1]} {up} "
                             f"where most pairs of its tier have {n}; used as seen",
                             tiers=[words[tier], words[tier + 1]])
    return default, bundles


def _leaf_spine(previous: Clos | None) -> Clos | None:
    """The last recognition as ``topology.recognise`` takes its ``previous``: a wired ``Clos``
    of one two-tier plane (None for anything else)."""
    if previous is None or len(previous.planes) != 1 or previous.tiers != 2 \
            or not previous.wired:
        return None
    return previous


def _bundled(fabric: Clos | None, found: list, problems: list, previous: Clos | None):
    """A leaf-spine ``topology.recognise`` read (a two-tier ``Clos`` of one pod) with its
    parallel cables as bundles when some leaf-spine pair has several cables (or had, in
    ``previous``), else as read. A bundle's members are ordered by the leaf's port numbers."""
    if fabric is None:
        return fabric, problems
    names, tier_of = fabric.switch_of_dpid, fabric.tier_of  # tier 0: a leaf, 1: a spine
    cabled: dict[tuple[str, str], list] = {}
    for a, pa, b, pb in found:
        x, y = names.get(a), names.get(b)
        if (tier_of.get(x), tier_of.get(y)) == (0, 1):
            cabled.setdefault((x, y), []).append((pa, pb))
        elif (tier_of.get(y), tier_of.get(x)) == (0, 1):
            cabled.setdefault((y, x), []).append((pb, pa))
    old_ports = previous.ports if previous is not None else {}
    if not any(len(c) > 1 for c in cabled.values()) and not any(
            isinstance(p, list) for m in old_ports.values() for p in m.values()):
        return fabric, problems
    problems = [p for p in problems if p["kind"] != "parallel_links"]
    used = {sw: {_first(p): n for n, p in m.items()} for sw, m in fabric.ports.items()}
    ports = {sw: dict(m) for sw, m in fabric.ports.items()}
    down, counts = set(fabric.down), {}
    for leaf in fabric.leaves:
        for spine in fabric.planes[0].aggs[0]:
            key = (leaf, spine)
            first = (fabric.ports[leaf][spine], fabric.ports[spine][leaf])
            old = (old_ports.get(leaf, {}).get(spine), old_ports.get(spine, {}).get(leaf))
            members, gone = _members(cabled.get(key, [first]), old, used[leaf], used[spine])
            down |= set() if key in down else {(*key, m) for m in gone}
            _put(ports, key, members)
            counts[key] = len(members)
    extra = _Problems(lambda d: names.get(d) or f"{d:#x}")
    default, bundles = _bundle_sizes(counts, tier_of, down, extra, fabric.dpids,
                                     ("leaf", "spine"))
    out = replace(fabric, bundles=bundles, bundle_default=default, down=down,
                  wiring={**fabric.wiring, "ports": ports})
    out.check_wiring()  # a bug here, not bad input: the fabric is built to pass it
    return out, sorted(problems + extra.items, key=lambda p: (
        p["dpid"] is None, p["dpid"] or 0, p["port"] or 0, p["kind"], p["detail"]))
