"""The wiring of a Clos fabric: what the controller needs beside the shape (datapath ids,
port numbers, each host's IPv4 and MAC address in every plane), as ``topologies/clos.py``
builds it (``wire``) or as a fabric document declares it (``check``).

Several planes: a host has one interface, one address and one MAC per plane, and picks the
plane by the destination address (NVIDIA Spectrum-X's multi-plane hosts; HPN's dual planes);
no switch moves a packet between planes.

Bundles: ``ports[sw][peer]`` is a port number for a single link and a list of port numbers,
one per member in member order, for a bundle of two links or more; member m is the same cable
at both ends (``ports[a][b][m]`` and ``ports[b][a][m]``).

Interface names (optional, ``interfaces``): what the boxes call each link end, as a cabling
table says (``model.cabling``): ``interfaces[sw][peer]`` names the port(s) of
``ports[sw][peer]`` (a list for a bundle, member order), ``interfaces[host][leaf]`` the host's
own interface to that leaf. Only the routers' and hosts' configuration files use them
(``mlroute srv6-config``); without them those files name ports by a platform's scheme.
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping

from controller.errors import InputError

NEEDED = {"dpids", "ports", "host_ip", "host_mac"}  # what the controller needs (not the planner)
WIRING = NEEDED | {"interfaces"}  # and the names of the ports, where a cabling table gave them


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def per_plane(table) -> dict[str, tuple[str, ...]]:
    """host -> its addresses, one per plane (a string is one plane's address)."""
    if not isinstance(table, Mapping):
        return {}
    return {h: (a,) if isinstance(a, str) else tuple(a) if isinstance(a, list) else ()
            for h, a in table.items()}


def wire(fabric) -> dict:
    """The wiring of ``fabric`` (a ``model.clos.Clos``) as ``topologies/clos.py`` builds
    it: datapath ids (leaves 0x20000 + i, i counting leaves over all planes; the spines of a
    two-tier plane 0x10000 + j; aggregation switches 0x30000 + 256 pod + slot; cores 0x40000
    + 256 group + j; plane q adds 0x100000 q), ports in ``neighbours`` order from 1, and per
    plane q one address per host: 10.<16q + i/256>.<i%256>.<m> and MAC
    02:00:<q>:<i/256>:<i%256>:<m> (i the host's leaf in the first plane, m its position there
    from 1: the same host part in every plane, each plane its own 10.<16q>.0.0/12). One plane
    writes strings, as before; several planes a list per host. A bundle's members take
    consecutive ports (a list, member order)."""
    dpids: dict[str, int] = {}
    for q, p in enumerate(fabric.planes):
        base = 0x100000 * q
        for i, leaf in enumerate(p.leaves):
            dpids[leaf] = base + 0x20000 + i
        first = 0x30000 if p.cores else 0x10000  # a two-tier plane's spines
        for pod, aggs in enumerate(p.aggs):
            for x, a in enumerate(aggs):
                dpids[a] = base + first + 256 * pod + x
        for g, grp in enumerate(p.cores):
            for j, c in enumerate(grp):
                dpids[c] = base + 0x40000 + 256 * g + j
    ports = {sw: _numbered(fabric, sw) for sw in dpids}
    ip, mac, seen = {}, {}, {}
    first = {l: i for i, l in enumerate(fabric.planes[0].leaves)}
    n = len(fabric.planes)
    if n > 16 or (n > 1 and len(first) > 4096):
        raise InputError("fabric: wiring supports at most 16 planes of 4,096 leaves")
    for h, ls in fabric.host_leaves.items():
        i = first[ls[0]]
        m = seen[i] = seen.get(i, 0) + 1
        if m > 254:
            raise InputError("fabric: wiring supports at most 254 hosts per leaf")
        ips = [f"10.{16 * q + i // 256}.{i % 256}.{m}" for q in range(n)]
        macs = [f"02:00:{q:02x}:{i // 256:02x}:{i % 256:02x}:{m:02x}" for q in range(n)]
        ip[h], mac[h] = (ips[0], macs[0]) if n == 1 else (ips, macs)
    return {"dpids": dpids, "ports": ports, "host_ip": ip, "host_mac": mac}


def _numbered(fabric, sw: str) -> dict:
    """``sw``'s ports from 1 in ``neighbours`` order, a bundle's members consecutive."""
    out, nxt = {}, 1
    for n in fabric.neighbours(sw):
        k = _links(fabric, sw, n)
        out[n] = nxt if k == 1 else list(range(nxt, nxt + k))
        nxt += k
    return out


def _links(fabric, sw: str, peer: str) -> int:
    """Parallel links between ``sw`` and ``peer`` (1 for a host)."""
    if peer not in fabric.tier_of:
        return 1
    lo, up = (sw, peer) if fabric.tier_of[sw] < fabric.tier_of[peer] else (peer, sw)
    return fabric.bundle(lo, up)


def check_tables(wiring: Mapping, switches, hosts) -> None:
    """The wiring tables of a document, before the model reads them: each maps names it
    knows (``switches``, ``hosts``) to values of the right type, else an ``InputError``
    naming the table (a wrong type used to surface as a TypeError, an HTTP 500)."""
    for key, table in wiring.items():
        if not isinstance(table, Mapping) or not all(isinstance(k, str) for k in table):
            raise InputError(f"fabric: '{key}' must map names to values")
        kind, names = (("switch", switches) if key in ("dpids", "ports") else
                       ("switch or host", set(switches) | set(hosts)) if key == "interfaces"
                       else ("host", hosts))
        unknown = [k for k in table if k not in names]
        if unknown:
            raise InputError(f"fabric: '{key}' names an unknown {kind} {unknown[0]!r}")
    for sw, d in wiring.get("dpids", {}).items():
        if not _integer(d):
            raise InputError(f"fabric: 'dpids' must map switch names to integers ({sw}: {d!r})")
    for sw, peers in wiring.get("ports", {}).items():
        if not isinstance(peers, Mapping) or not all(isinstance(n, str) for n in peers):
            raise InputError("fabric: 'ports' must map each switch to {neighbour: port}")
        for peer, p in peers.items():
            if not (_integer(p) or isinstance(p, list) and all(_integer(x) for x in p)):
                raise InputError(f"fabric: switch {sw} has no port number for {peer} "
                                 f"('ports': {p!r}; a list of them for a bundle)")
    for node, peers in wiring.get("interfaces", {}).items():
        if not isinstance(peers, Mapping) or not all(
                isinstance(n, str) and (isinstance(v, str) and v or isinstance(v, list) and all(
                    isinstance(x, str) and x for x in v)) for n, v in peers.items()):
            raise InputError(f"fabric: 'interfaces' must map {node} to {{neighbour: interface "
                             "name}} (a list of names for a bundle)")
    for key in ("host_ip", "host_mac"):
        for h, a in wiring.get(key, {}).items():
            if not (isinstance(a, str) or isinstance(a, list)
                    and all(isinstance(x, str) for x in a)):
                raise InputError(f"fabric: '{key}' must map host names to address strings "
                                 f"(a list of them, one per plane), got {a!r} for {h}")


def check(fabric) -> None:
    """Every switch a datapath id, every link a port at both ends, every host an IPv4 and
    a MAC address in every plane (a string with one plane, a list with several), nothing
    twice over all planes; the first error names the element."""
    missing = NEEDED - set(fabric.wiring)
    if missing:
        raise InputError(f"fabric: wiring needs {sorted(missing)[0]!r} too")
    switches = list(fabric.tier_of)
    for sw in switches:
        d = fabric.dpids.get(sw)
        if not _integer(d) or not 0 < d < 2**64:
            raise InputError(f"fabric: switch {sw} needs a datapath id (positive integer)")
    if len(set(fabric.dpids.values())) != len(fabric.dpids):
        raise InputError("fabric: two switches share a datapath id")
    for sw in switches:
        ports = fabric.ports.get(sw)
        if not isinstance(ports, dict):
            raise InputError(f"fabric: no port map for switch {sw}")
        for peer in fabric.neighbours(sw):
            p, k = ports.get(peer), _links(fabric, sw, peer)
            numbers = p if isinstance(p, list) else [p]
            if not all(_integer(x) and 0 < x < 0xffffff00 for x in numbers):
                raise InputError(f"fabric: switch {sw} has no port number for {peer}")
            if k == 1 and isinstance(p, list):
                raise InputError(f"fabric: switch {sw} has a single link to {peer}: one port "
                                 f"number in 'ports', not a list ({p!r})")
            if len(numbers) != k:
                raise InputError(f"fabric: switch {sw} needs {k} port number(s) for {peer} "
                                 f"(its bundle has {k} link(s)), got {p!r}")
        used = [x for p in ports.values() for x in (p if isinstance(p, list) else [p])]
        if len(set(used)) != len(used):
            raise InputError(f"fabric: switch {sw} uses a port number twice")
    n = len(fabric.planes)
    for key, what in (("host_ip", "IPv4"), ("host_mac", "MAC")):
        table = fabric.wiring[key]
        for h in fabric.host_leaves:
            a = table.get(h) if isinstance(table, dict) else None
            if n == 1 and a is None:
                raise InputError(f"fabric: host {h} has no {what} address")
            if n == 1 and not isinstance(a, str):
                raise InputError(f"fabric: host {h} needs one {what} address (a string) in "
                                 f"'{key}', got {a!r}")
            if n > 1 and (not isinstance(a, list) or len(a) != n
                          or not all(isinstance(x, str) for x in a)):
                raise InputError(f"fabric: host {h} needs one {what} address per plane "
                                 f"({n}), got {a!r}")
        owner: dict[str, str] = {}
        for h, addresses in per_plane(table).items():
            for q, a in enumerate(addresses):
                where = f"host {h}" + (f" plane {q}" if n > 1 else "")
                if a in owner:
                    raise InputError(f"fabric: {owner[a]} and {where} share the {what} "
                                     f"address {a}")
                owner[a] = where
                if not (_ipv4(a) if what == "IPv4" else _MAC.fullmatch(a)):
                    raise InputError(f"fabric: {where} has a bad {what} address {a!r}")
    check_names(fabric)


def check_names(fabric) -> None:
    """A node's ``interfaces`` entry names each of its links, as many names as ``ports`` has
    numbers (a host: one per leaf), none twice at that node."""
    for node, peers in fabric.wiring.get("interfaces", {}).items():
        if node in fabric.tier_of:
            want = {n: fabric.ports[node][n] for n in fabric.neighbours(node)}
        else:
            want = {leaf: 0 for leaf in fabric.host_leaves[node]}
        for peer, names in peers.items():
            if peer not in want:
                raise InputError(f"fabric: 'interfaces' of {node} names {peer!r}, which is not "
                                 "linked to it")
            if isinstance(names, list) != isinstance(want[peer], list) or isinstance(
                    names, list) and len(names) != len(want[peer]):
                raise InputError(f"fabric: 'interfaces' of {node} needs as many names for "
                                 f"{peer} as it has ports there ({want[peer]!r}), got {names!r}")
        if missing := [p for p in want if p not in peers]:
            raise InputError(f"fabric: 'interfaces' of {node} names no interface for "
                             f"{missing[0]}")
        used = [x for v in peers.values() for x in (v if isinstance(v, list) else [v])]
        if len(set(used)) != len(used):
            dup = next(x for x in used if used.count(x) > 1)
            raise InputError(f"fabric: {node} uses the interface name {dup} twice")


_MAC = re.compile(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}")


def _ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True
