"""Several planes from what LLDP saw: each plane is a part of the switch graph that no cable
joins to the others, recognised alone (``tiers.recognise_clos``: two or three tiers), and a
host is joined across planes by its address.

A host has one interface per plane, each with its own MAC and address (``model.clos``), so no
frame says which interfaces are one host. The join is by the *host part* of the address:
the bits below the highest bit in which two planes' addresses differ (``host_bits``; the
planes' networks differ there), and interfaces with equal host parts are one host (the layout
``topologies/clos.py`` builds, 10.<16q + i/256>.<i%256>.<m> on plane q, and the usual one of a
plane per subnet with the same offsets). Planes are numbered by
their networks, hosts named after the first plane's leaves, switches get ``_p<q>`` as
``Clos.leaf_spine`` and ``Clos.fat_tree`` name them.

A part where no host was heard yet is left out (``plane_without_hosts``): its network, and so
the addresses to look for, are unknown until one host speaks there. A host heard on some
planes only is not placed (``host_missing_plane``, naming the address it should have on the
others, which the finder looks for with ARP probes). Planes whose host parts
do not line up (``planes_not_joined``) leave the fabric at its first plane. A part of the
graph is a new plane only when no switch of it had a place in the last recognition
(``previous``): a plane cut in two by failures stays one plane with its links down, and a
plane keeps its number while it has switches. Cables between planes are reported and not used.

Where a host runs an LLDP agent (lldpd), its chassis id, the same on every interface
(``Topology.chassis``), joins its interfaces instead: planes whose addresses interleave, or
whose host parts would join the wrong interfaces (a cabling or address mistake), are joined
as the hosts say; an id heard from two interfaces of one plane is reported
(``chassis_conflict``) and not used. Host parts still join the interfaces no agent named.

Planes may differ in shape (a fat-tree beside a leaf-spine): each is recognised alone.
Not yet: one switch that moves between planes.

>>> t = Topology()       # two planes, each a spine (1, 4) and two leaves with one host each
>>> for d in range(1, 7): _ = t.switch_up(d, {1: True, 2: True}, 0)
>>> for s, leaf, port in ((1, 2, 1), (1, 3, 2), (4, 5, 1), (4, 6, 2)):
...     _ = t.link_seen(s, port, leaf, 1, 0), t.link_seen(leaf, 1, s, port, 0)
>>> for d, m, ip in ((2, 1, "10.0.0.1"), (3, 2, "10.0.1.1"), (5, 3, "10.16.0.1"),
...                  (6, 4, "10.16.1.1")):
...     _ = t.host_seen(d, 2, f"02:00:00:00:00:0{m}", ip, 0)
>>> got, problems = recognise_planes(t)
>>> [p.leaves for p in got.planes], got.host_ips["h1_0"], problems
([['l0_p0', 'l1_p0'], ['l0_p1', 'l1_p1']], ('10.0.1.1', '10.16.1.1'), [])
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping

from controller.discovery.hosts import natural_key
from controller.discovery.tiers import recognise_clos
from controller.discovery.topology import Topology, cables
from controller.model.clos import Clos, Plane


def discover(topology: Topology, previous: Clos | None = None,
             link_gbps: float | None = None):
    """The fabric the topology shows with the last recognition (``previous``, a ``Clos``):
    several planes when it has them, else ``tiers.recognise_clos``."""
    return recognise_planes(topology, link_gbps, previous)


def recognise_planes(topology: Topology, link_gbps=None, previous: Clos | None = None):
    """(a wired ``Clos`` of every plane, problems) when the topology shows two planes or more
    or ``previous`` had them; else what ``tiers.recognise_clos`` gives (a ``Clos`` too, or
    None). ``previous``: the last recognition, a ``Clos``. O(V + E + H log H) plus the
    recognition of each plane."""
    several = previous is not None and len(previous.planes) > 1
    placed = _placed(previous)
    if not several and previous is not None and set(placed) != set(previous.dpids.values()):
        previous = None  # it held switches that were never part of its plane: start afresh
    groups, crossing, idle = plane_groups(topology, placed)
    problems = [_idle_problem(part) for part in idle]
    if len(groups) < 2 and not several:
        fabric, found = recognise_clos(_restricted(topology, groups[0]) if idle else topology,
                                       link_gbps, previous)
        return fabric, _sorted(found + problems)
    seen = []
    for q, dpids in enumerate(groups):
        view = plane_view(previous, q) if several and q < len(previous.planes) \
            else previous if q == 0 and not several else None
        fabric, found = recognise_clos(_restricted(topology, dpids), link_gbps, view)
        if fabric is None:
            problems += found
            continue
        seen.append((fabric, found))
    if not several:  # first recognition of these planes: numbered by their networks
        seen.sort(key=lambda fp: (_network_key(fp[0]), min(fp[0].dpids.values())))
    if len(seen) < 2:
        return (seen[0][0] if seen else None), _sorted(
            problems + [p for _f, ps in seen for p in ps])
    return _joined(seen, problems, crossing, topology.agents())


def plane_groups(topology: Topology, placed: dict[int, int]):
    """The datapath ids of each plane, the cables between planes (dpid, port, dpid, port),
    and the parts left out. A part of the cable graph joins the plane its switches had in the
    last recognition (``placed``: dpid -> plane); a part with no such switch is a new plane
    when a host was heard on it, left out while none was (a plane whose hosts are silent, not
    a broken part of another) unless no plane has a host yet; a switch with no cable goes to
    the first plane (where it is reported)."""
    import networkx as nx
    found, _odd = cables(topology)
    graph = nx.Graph()
    graph.add_nodes_from(topology.switches)
    graph.add_edges_from((a, b) for a, _pa, b, _pb in found)
    heard = {h.dpid for h in topology.hosts.values()}
    before = placed
    count = max(before.values(), default=-1) + 1
    groups: list[set[int]] = [set() for _ in range(count)]
    new, idle, rest = [], [], set()
    for part in sorted(nx.connected_components(graph), key=min):
        planes = {before[d] for d in part if d in before}
        if planes:
            for d in part:  # a new switch joins its part's (first) plane
                groups[before.get(d, min(planes))].add(d)
        elif len(part) > 1:
            (new if part & heard else idle).append(set(part))
        else:
            rest |= part
    groups += new
    if not any(groups):  # no plane known or heard yet: everything is one fabric, as before
        groups, rest = [set()], rest.union(*idle)
        idle = []
    groups[0] |= rest
    plane_of = {d: q for q, g in enumerate(groups) for d in g}
    crossing = [c for c in found if plane_of.get(c[0], -1) != plane_of.get(c[2], -1)
                and c[0] in plane_of and c[2] in plane_of]
    return groups, crossing, idle


def _placed(previous) -> dict[int, int]:
    """dpid -> plane of the last recognition. One plane: only its part that holds the most
    hosts over links up (a part with no link up to it never was that plane); none without a
    host."""
    import networkx as nx
    if previous is None or not previous.wired:
        return {}
    if len(previous.planes) > 1:
        return {d: previous.plane_of[n] for n, d in previous.dpids.items()}
    up = nx.Graph()
    up.add_nodes_from(previous.dpids.values())
    up.add_edges_from((previous.dpids[a], previous.dpids[b]) for a, b in previous.links()
                      if (a, b) not in previous.down)
    with_hosts = {previous.dpids[leaf] for leaf in previous.hosts.values()}
    parts = list(nx.connected_components(up))
    main = max(parts, key=lambda p: (len(p & with_hosts), len(p)), default=set())
    if not main & with_hosts:
        return {}
    alone = {d for p in parts if len(p) == 1 for d in p}  # every link down: still in place
    return {d: 0 for d in main | alone}


def _idle_problem(part: set[int]) -> dict:
    return {"kind": "plane_without_hosts", "switch": None, "port": None, "dpid": min(part),
            "detail": f"{len(part)} switches cabled together and to no other "
                      f"({', '.join(f'{d:#x}' for d in sorted(part)[:8])}"
                      f"{', ...' if len(part) > 8 else ''}), no host heard on them yet: a plane "
                      "of its own, used once a host is heard there"}


def plane_view(fabric: Clos, q: int) -> Clos:
    """Plane ``q`` of a recognised ``Clos`` alone, names without ``_p<q>``, as one plane's
    recognition gives it: the ``previous`` of that plane."""
    plane, sfx = fabric.planes[q], f"_p{q}"
    own = set(plane.switches())

    def bare(name):
        return name[:-len(sfx)] if isinstance(name, str) and name in own \
            and name.endswith(sfx) else name
    hosts = {h: bare(ls[q]) for h, ls in fabric.host_leaves.items() if len(ls) > q}
    wiring = {"dpids": {bare(s): fabric.dpids[s] for s in own if s in fabric.dpids},
              "ports": {bare(s): {bare(n): p for n, p in fabric.ports.get(s, {}).items()}
                        for s in own},
              "host_ip": {h: fabric.ip_of(h, q) for h in hosts},
              "host_mac": {h: fabric.mac_of(h, q) for h in hosts}}
    down = {(bare(d[0]), bare(d[1]), *d[2:]) for d in fabric.down if d[0] in own}
    one = Plane("plane0", list(plane.pods), [bare(x) for x in plane.leaves],
                list(plane.pod_of_leaf), [[bare(x) for x in a] for a in plane.aggs],
                [[bare(x) for x in g] for g in plane.cores])
    bundles = {(bare(lo), bare(up)): fabric.bundle(lo, up) for lo, up in fabric.links()
               if lo in own}
    return Clos([one], {h: (leaf,) for h, leaf in hosts.items()}, dict(fabric.link_gbps),
                bundles, down=down, down_switches={bare(s) for s in fabric.down_switches
                                                   if s in own}, wiring=wiring)


def host_bits(addresses_by_plane) -> int | None:
    """How many low bits of an address are its host part: those below the highest bit in
    which two planes' addresses differ (wherever the hosts sit, that bit is the networks').
    None when a plane's addresses differ above it (the planes' addresses interleave) or
    fewer than two planes have an address. O(addresses + planes^2).

    >>> host_bits([["10.0.0.1", "10.0.3.1"], ["10.16.1.1"]])
    20
    >>> host_bits([["10.0.0.1", "10.0.0.2"], ["10.0.0.3"]]) is None
    True
    """
    planes = [[int(ipaddress.IPv4Address(a)) for a in ips] for ips in addresses_by_plane]
    planes = [p for p in planes if p]
    if len(planes) < 2:
        return None
    bits = min((p[0] ^ r[0]).bit_length() - 1 for i, p in enumerate(planes)
               for r in planes[i + 1:])
    if bits < 0 or any(v >> bits != p[0] >> bits for p in planes for v in p):
        return None
    return bits


def _network_key(fabric) -> int:
    ips = list(fabric.host_ip.values())
    return min((int(ipaddress.IPv4Address(a)) for a in ips), default=1 << 32)


def _restricted(topology: Topology, dpids: set[int]) -> Topology:
    """The topology of some switches: their ports, the links between them, their hosts; a
    port cabled to a switch outside is left down (reported as a cable between planes)."""
    out = {end for (a, pa), (b, pb, _t) in topology.links.items()
           if (a in dpids) != (b in dpids) for end in ((a, pa), (b, pb))}
    return Topology(link_timeout=topology.link_timeout,
                    switches={d: {p: up and (d, p) not in out for p, up in ports.items()}
                              for d, ports in topology.switches.items() if d in dpids},
                    links={k: v for k, v in topology.links.items()
                           if k[0] in dpids and v[0] in dpids},
                    hosts={m: h for m, h in topology.hosts.items() if h.dpid in dpids},
                    version=topology.version, changed_at=topology.changed_at)


def _joined(seen: list, problems: list[dict], crossing: list[tuple], chassis=None):
    """One ``Clos`` of the planes recognised alone (``seen``: (fabric, problems) in plane
    order), hosts joined by their LLDP chassis id (``chassis``: interface MAC -> id) where
    heard, else by host part."""
    count = len(seen)
    bits = host_bits([f.host_ip.values() for f, _p in seen])
    agents, parts = _agents(seen, chassis or {}, problems), _host_parts(seen, bits)
    joined = _join(seen, bits, parts, agents)
    if bits is None and not joined:  # the first plane alone, its problems as its recognition named them
        problems.append({"kind": "planes_not_joined", "switch": None, "port": None,
                         "dpid": None, "detail": f"{count} planes seen, but their hosts' "
                         "addresses interleave and no host's LLDP chassis id was heard on "
                         "every plane: nothing says which interfaces are one host; only the "
                         "first plane is used (run an LLDP agent such as lldpd on the hosts, "
                         "or declare the fabric, to use them all)"})
        return seen[0][0], _sorted(problems + seen[0][1])
    names = [{d: f"{n}_p{q}" for n, d in f.dpids.items()} for q, (f, _p) in enumerate(seen)]
    for q, (f, found) in enumerate(seen):
        problems += [_in_plane(p, q, f, names[q]) for p in found]
    name_of = {d: n for per in names for d, n in per.items()}
    for a, pa, b, pb in crossing:
        problems.append({"kind": "cable_between_planes", "switch": name_of[a], "port": pa,
                         "dpid": a, "detail": f"{name_of[a]} port {pa} is cabled to "
                         f"{name_of[b]} port {pb}, a switch of another plane; not used"})
    first = seen[0][0]
    placed = {(q, local) for locals_ in joined.values() for q, local in enumerate(locals_)}
    nets = [_network_key(f) & ~((1 << bits) - 1) & 0xFFFFFFFF for f, _p in seen] \
        if bits is not None else []
    for q, (f, _p) in enumerate(seen):
        for local, ip in sorted(f.host_ip.items(), key=lambda kv: natural_key(kv[0])):
            if (q, local) not in placed:
                problems.append(_missing(seen, q, local, bits, parts, nets, chassis or {},
                                         names[q]))
    planes, ports, dpids, down, down_switches = [], {}, {}, set(), set()
    sizes: dict = {}
    for q, (f, _p) in enumerate(seen):  # each plane's recognition: a Clos of one plane
        rename = {n: names[q][d] for n, d in f.dpids.items()}
        p = f.planes[0]
        planes.append(Plane(f"plane{q}", list(p.pods), [rename[x] for x in p.leaves],
                            list(p.pod_of_leaf), [[rename[x] for x in a] for a in p.aggs],
                            [[rename[x] for x in g] for g in p.cores]))
        down_switches |= {rename[s] for s in f.down_switches}
        down |= {(rename[x[0]], rename[x[1]], *x[2:]) for x in f.down}
        # links per pair and the lower end's tier, every plane
        sizes.update({(rename[lo], rename[up]): (f.tier_of[lo], f.bundle(lo, up))
                      for lo, up in f.links()})
        back = {local: h for h, locals_ in joined.items() for r, local in enumerate(locals_)
                if r == q}
        for n, d in f.dpids.items():
            dpids[rename[n]] = d
            ports[rename[n]] = {rename.get(x) or back[x]: port for x, port
                                in f.ports.get(n, {}).items() if x in rename or x in back}
    host_leaves = {h: tuple(names[q][seen[q][0].dpids[seen[q][0].hosts[local]]]
                            for q, local in enumerate(locals_))
                   for h, locals_ in joined.items()}
    gbps = dict(first.link_gbps)
    wiring = {"dpids": dpids, "ports": ports,
              "host_ip": {h: [seen[q][0].host_ip[x] for q, x in enumerate(ls)]
                          for h, ls in joined.items()},
              "host_mac": {h: [seen[q][0].host_mac[x] for q, x in enumerate(ls)]
                           for h, ls in joined.items()}}
    default, bundles = _bundle_default(sizes)
    fabric = Clos(planes, host_leaves, gbps, bundles, default, down=down,
                  down_switches=down_switches, wiring=wiring)
    for sw in fabric.switches():  # ports in neighbours order, as Clos.wire writes them
        order = {n: i for i, n in enumerate(fabric.neighbours(sw))}
        fabric.ports[sw] = dict(sorted(ports[sw].items(), key=lambda kv: order.get(kv[0], 1e9)))
    fabric.wiring["ports"] = fabric.ports
    fabric.check_wiring()  # a bug here, not bad input: the fabric is built to pass it
    return fabric, _sorted(problems)


def _agents(seen: list, chassis: Mapping[str, str], problems: list[dict]) -> list[dict]:
    """Per plane, {chassis id: local host} of the interfaces whose host's LLDP agent was
    heard; only ids heard on two planes or more name a host (a NIC's own LLDP names the
    port, and an agent heard on one plane so far joins nothing yet); an id heard on two
    interfaces of one plane is reported and not used there."""
    planes: dict[str, set[int]] = {}
    for q, (f, _p) in enumerate(seen):
        for local in f.host_ip:
            c = chassis.get(f.host_mac[local])
            if c is not None:
                planes.setdefault(c, set()).add(q)
    out = []
    for q, (f, _p) in enumerate(seen):
        by: dict[str, list[str]] = {}
        for local in sorted(f.host_ip, key=natural_key):
            c = chassis.get(f.host_mac[local])
            if c is not None and len(planes[c]) > 1:
                by.setdefault(c, []).append(local)
        for c, locals_ in by.items():
            if len(locals_) > 1:
                problems.append({"kind": "chassis_conflict", "switch": None, "port": None,
                                 "dpid": None, "detail": f"LLDP chassis id {c} heard from "
                                 f"{len(locals_)} interfaces of plane {q} ("
                                 f"{', '.join(f.host_ip[x] for x in locals_)}): not used to "
                                 "join them"})
        out.append({c: locals_[0] for c, locals_ in by.items() if len(locals_) == 1})
    return out


def _host_parts(seen: list, bits: int | None) -> list[dict[int, str]]:
    """Per plane, host part -> local host ([] when no host part is known)."""
    if bits is None:
        return []
    mask = (1 << bits) - 1
    return [{int(ipaddress.IPv4Address(ip)) & mask: h for h, ip in f.host_ip.items()}
            for f, _p in seen]


def _join(seen: list, bits: int | None, part: list[dict], agents: list[dict]
          ) -> dict[str, list[str]]:
    """First-plane host -> its local host on every plane: the interface with its chassis id
    there, else (``bits`` known: ``part`` by host part) the one with its host part, unless
    that one names another chassis; hosts missing a plane are left out."""
    mask = (1 << bits) - 1 if bits is not None else 0
    ident = [{local: c for c, local in a.items()} for a in agents]
    first = seen[0][0]
    joined, taken = {}, set()
    for h in sorted(first.host_ip, key=natural_key):
        c, locals_ = ident[0].get(h), [h]
        for q in range(1, len(seen)):
            local = agents[q].get(c) if c is not None else None
            if local is None and bits is not None:
                local = part[q].get(int(ipaddress.IPv4Address(first.host_ip[h])) & mask)
                if local is not None and ident[q].get(local, c) != c:
                    local = None  # its agent names another host
            if local is None or (q, local) in taken:
                break
            locals_.append(local)
        if len(locals_) == len(seen):
            joined[h] = locals_
            taken.update(enumerate(locals_))
    return joined


def _missing(seen: list, q: int, local: str, bits: int | None, parts: list[dict],
             nets: list[int], chassis: Mapping[str, str], names: dict) -> dict:
    """The problem of an interface joined to no host on every plane, with the addresses the
    host should have on the planes it lacks when host parts say them (``parts`` and the
    planes' networks ``nets``, as ``_joined`` has them; the finder probes)."""
    f = seen[q][0]
    ip = f.host_ip[local]
    wanted = []
    if bits is not None:
        host_part = int(ipaddress.IPv4Address(ip)) & ((1 << bits) - 1)
        wanted = [str(ipaddress.IPv4Address(net | host_part))
                  for net, part in zip(nets, parts) if host_part not in part]
    leaf = f.hosts[local]
    d = f.dpids[leaf]
    c = chassis.get(f.host_mac[local])
    if wanted:
        lacking = (f"{' or '.join(wanted)} (its address on the other "
                   f"plane{'s' if len(wanted) > 1 else ''})")
    else:
        lacking = "its LLDP chassis id" + (f" {c}" if c else " (none heard)") + " on every plane"
    return {"kind": "host_missing_plane", "switch": names[d], "port": f.ports[leaf][local],
            "dpid": d, "address": ip, "probe": wanted,
            "detail": f"{ip} ({f.host_mac[local]}) on {names[d]} port {f.ports[leaf][local]} "
                      f"has no interface heard with {lacking}; not placed until it is"}


def _bundle_default(sizes: dict) -> tuple[dict, dict]:
    """(``Clos.bundle_default``, ``Clos.bundles``) of planes joined: per tier the most common
    number of links over every plane's pairs, the other pairs listed (planes may differ:
    each plane reported its own odd pairs when recognised alone)."""
    default = {"leaf": 1, "core": 1}
    for tier, word in ((0, "leaf"), (1, "core")):
        counts = [n for t, n in sizes.values() if t == tier]
        if counts:
            default[word] = max(sorted(set(counts)), key=counts.count)
    return default, {pair: n for pair, (t, n) in sorted(sizes.items())
                     if n != default["core" if t else "leaf"]}


def _in_plane(problem: dict, q: int, fabric, names: dict[int, str]) -> dict:
    """A plane's problem with its switch names as the joined fabric gives them."""
    local = {n: names[d] for n, d in fabric.dpids.items()}
    if not local:
        return {**problem, "plane": q}
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(local, key=len,
                                                                   reverse=True))) + r")\b")
    out = {**problem, "plane": q, "detail": pattern.sub(lambda m: local[m.group(1)],
                                                        problem["detail"])}
    if problem.get("switch") in local:
        out["switch"] = local[problem["switch"]]
    return out


def _sorted(problems: list[dict]) -> list[dict]:
    """In the order ``topology._Problems`` gives them: by switch, port, kind."""
    return sorted(problems, key=lambda p: (p["dpid"] is None, p["dpid"] or 0, p["port"] or 0,
                                           p["kind"], p["detail"]))
