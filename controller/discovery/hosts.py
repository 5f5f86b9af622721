"""Hosts of a recognised fabric: which of those heard are used, on which leaf port, and
their names (``topology.recognise`` on a leaf-spine, ``tiers.recognise_clos`` on three tiers).

A host is heard on a leaf port that faces no switch (``Topology.hosts``); one heard on a spine,
two on one port, or one address on two ports are reported and the last seen is used. Names
are h<leaf>_<k>, k the rank of the host's port among the leaf's ports that face no switch,
and stay those of the last recognition (``previous``) for the hosts it had.
"""
from __future__ import annotations

import re

from controller.discovery.roles import LEAF, SPINE
from controller.model.clos import Clos


def natural_key(name: str) -> tuple:
    return tuple(int(x) if x.isdigit() else x for x in re.split(r"(\d+)", name))


def place_hosts(topology, roles, edge, used, names, problems,
           previous: Clos | None) -> dict:
    """Hosts on leaf ports that face no switch, named; the rest reported. Mutates ``used``.
    ``previous``: the last recognition, a ``Clos`` of one two-tier plane (a bundle's first
    member is its port)."""
    at: dict[tuple[int, int], list[tuple]] = {}
    for mac, h in sorted(topology.hosts.items()):
        role = roles.get(h.dpid)
        if role is None:
            continue  # on an isolated switch: reported with it
        at.setdefault((h.dpid, h.port), []).append((h.seen, mac, h))
    # a spine port that faces no switch and that no spine uses for a leaf (so not a missing
    # link) holds a host even before it talks
    downlinks = {p for d, r in roles.items() if r == SPINE for p, peer in used[d].items()
                 if roles.get(peer) == LEAF}
    if previous is not None:
        downlinks |= {previous.port(s, l) for s in previous.planes[0].aggs[0]
                      for l in previous.ports[s] if previous.tier_of.get(l) == 0}
    for d in sorted(d for d, r in roles.items() if r == SPINE):
        for p in sorted(set(edge.get(d, [])) - downlinks | {x[1] for x in at if x[0] == d}):
            seen = at.get((d, p), [])
            heard = ", ".join(f"{m} ({h.ip})" for _t, m, h in seen) or "not heard yet"
            problems.add("host_on_spine", d, p, f"{names[d]} port {p} faces no switch (host: "
                         f"{heard}): hosts belong on leaves; not used")
    at = {x: seen for x, seen in at.items() if roles[x[0]] == LEAF}
    chosen: dict[str, tuple] = {}  # ip -> latest
    for (d, p), seen in sorted(at.items()):
        seen.sort(reverse=True)
        best = seen[0]
        if len(seen) > 1:
            problems.add("shared_port", d, p,
                         f"{names[d]} port {p} has hosts "
                         f"{', '.join(f'{m} ({h.ip})' for _t, m, h in seen)}; only the last "
                         f"seen, {best[1]}, is used")
        other = chosen.get(best[2].ip)
        if other is not None:
            old, new = sorted([other, best])
            problems.add("duplicate_ip", new[2].dpid, new[2].port,
                         f"{best[2].ip} is used by {old[1]} on {names[old[2].dpid]} port "
                         f"{old[2].port} and {new[1]} on {names[new[2].dpid]} port "
                         f"{new[2].port}; only the last seen, {new[1]}, is used")
            best = new
        chosen[best[2].ip] = best
    by_leaf: dict[int, list[tuple[int, str, str]]] = {}
    for _t, mac, h in chosen.values():
        by_leaf.setdefault(h.dpid, []).append((h.port, mac, h.ip))
        used[h.dpid][h.port] = mac
    old_name: dict[str, str] = {}
    if previous is not None:  # hosts not heard since: kept where they were, if still free
        ips = set(chosen)
        facing = topology.facing()
        for host, leaf in previous.hosts.items():
            mac, ip = previous.host_mac[host].lower(), previous.host_ip[host]
            old_name[mac] = host
            d, port = previous.dpids[leaf], previous.ports[leaf][host]
            if mac in topology.hosts or ip in ips or roles.get(d) != LEAF \
                    or port in used[d] or (d, port) in facing:
                continue
            by_leaf.setdefault(d, []).append((port, mac, ip))
            used[d][port] = mac
            ips.add(ip)
    # host ranks skip port numbers any leaf uses for a spine: a leaf whose uplink is missing
    # (port up, no probe) still names its hosts as its neighbours do
    uplinks = {p for d, r in roles.items() if r == LEAF for p, peer in used[d].items()
               if roles.get(peer) == SPINE}
    if previous is not None:
        uplinks |= {previous.port(l, s) for l in previous.leaves for s in previous.ports[l]
                    if previous.tier_of.get(s) == 1}
    taken = set(names.values())
    out: dict[str, tuple[str, int, int, str]] = {}
    fresh = []
    for d in sorted(by_leaf, key=lambda d: natural_key(names[d])):
        for port, mac, ip in sorted(by_leaf[d]):
            hname = old_name.get(mac)
            if hname is None or hname in taken:
                fresh.append((d, port, mac, ip))
                continue
            taken.add(hname)
            out[hname] = (mac, d, port, ip)
    for d, port, mac, ip in fresh:
        slots = sorted(set(edge.get(d, [])) - uplinks | {p for p, _m, _ip in by_leaf[d]})
        m = re.fullmatch(r"l(\d+)", names[d])
        tag = m.group(1) if m else names[d]
        k = slots.index(port)
        while f"h{tag}_{k}" in taken:
            k += 1
        hname = f"h{tag}_{k}"
        taken.add(hname)
        out[hname] = (mac, d, port, ip)
    return out
