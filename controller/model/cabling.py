"""A wired fabric document from what an operator of a real fabric has: a cabling table (or an
LLDP neighbour list) and a host table, instead of hand-written port numbers and datapath ids.

* cabling: one row per cable, ``switch, interface, peer, peer_interface``; a cable may be
  listed from both ends (LLDP neighbours seen by each switch), the two rows must agree;
* hosts: one row per host interface, ``host, address, leaf, interface`` (the leaf's port the
  host is cabled to), optionally ``host_interface`` (the host's own, for its configuration
  files) and ``mac``; a host of several planes has one row per plane.

Both as CSV with that header (other columns ignored) or as a JSON list of objects. The shape
follows from the cables: the leaves are the switches hosts are cabled to, the switches linked
to leaves are spines (two tiers) or aggregation switches, the switches above them cores (three
tiers: a pod is leaves and aggregation switches linked together; a core group is the cores
the aggregation switches of one slot reach); parallel cables are a bundle; separate fabrics
are planes. Ports are numbered per switch in the natural order of its interface names, and
the names are kept (``interfaces``), so the routers' files name the interfaces as the boxes
do. Datapath ids and MAC addresses, which srv6 mode never asks a box for, are numbered as
``topologies/clos.py`` numbers them (``clos_wiring.wire``) unless the host table gives MACs.

>>> cables = [{"switch": "l0", "interface": "swp1", "peer": "s0", "peer_interface": "swp1"},
...           {"switch": "l1", "interface": "swp1", "peer": "s0", "peer_interface": "swp2"}]
>>> hosts = [{"host": "a", "address": "10.0.0.1", "leaf": "l0", "interface": "swp9"},
...          {"host": "b", "address": "10.0.1.1", "leaf": "l1", "interface": "swp9"}]
>>> doc = document(cables, hosts)
>>> doc["spines"], doc["leaves"], doc["ports"]["s0"], doc["interfaces"]["l0"]
(['s0'], ['l0', 'l1'], {'l0': 1, 'l1': 2}, {'s0': 'swp1', 'a': 'swp9'})
"""
from __future__ import annotations

import csv
import json
import re

from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.clos_wiring import wire

CABLE_COLUMNS = ("switch", "interface", "peer", "peer_interface")
HOST_COLUMNS = ("host", "address", "leaf", "interface")
HOST_OPTIONAL = ("host_interface", "mac")


def natural(name: str):
    """Sort key: digit runs as numbers (``Ethernet8`` before ``Ethernet12``)."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def read_table(path: str, columns: tuple, what: str, optional: tuple = ()) -> list[dict]:
    """Rows of a CSV file with a header naming ``columns`` (any order, others ignored) or of
    a JSON list of objects; every value of ``columns`` a non-empty string."""
    try:
        with open(path, newline="") as fh:
            text = fh.read()
    except OSError as e:
        raise InputError(f"{what} {path}: {e.strerror}") from None
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except ValueError as e:
            raise InputError(f"{what} {path}: not JSON ({e})") from None
        where = [f"{what} {path}: item {n}" for n in range(len(rows))]
    else:
        reader = csv.DictReader(line for line in text.splitlines() if line.strip()
                                and not line.lstrip().startswith("#"))
        rows = [{k.strip(): (v or "").strip() for k, v in r.items() if k} for r in reader]
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"{what} {path}: expected a header with {', '.join(columns)}, "
                             f"missing {missing[0]!r}")
        where = [f"{what} {path}: line {n + 2}" for n in range(len(rows))]
    if not rows:
        raise InputError(f"{what} {path}: no rows")
    out = []
    for row, at in zip(rows, where):
        if not isinstance(row, dict):
            raise InputError(f"{at}: expected an object with {', '.join(columns)}")
        for c in columns:
            if not isinstance(row.get(c), str) or not row[c].strip():
                raise InputError(f"{at}: '{c}' must be a non-empty name, got {row.get(c)!r}")
        out.append({c: row[c].strip() for c in columns}
                   | {c: str(row[c]).strip() for c in optional if row.get(c)})
    return out


def cables_of(rows: list[dict], hosts: set[str]) -> list[tuple[tuple, tuple]]:
    """Each cable once, as ((switch, interface), (peer, interface)); a cable listed from both
    ends counts once; an interface cabled to two places is an error naming both."""
    end: dict[tuple, tuple] = {}
    for r in rows:
        a, b = (r["switch"], r["interface"]), (r["peer"], r["peer_interface"])
        if a == b:
            raise InputError(f"cabling: {a[0]} {a[1]} is cabled to itself")
        for x, y in ((a, b), (b, a)):
            if end.setdefault(x, y) != y:
                raise InputError(f"cabling: {x[0]} {x[1]} is cabled to {end[x][0]} "
                                 f"{end[x][1]} and to {y[0]} {y[1]}")
    return sorted({tuple(sorted((x, y))) for x, y in end.items()
                   if x[0] not in hosts and y[0] not in hosts})


def document(cable_rows: list[dict], host_rows: list[dict], gbps: float = 100.0) -> dict:
    """The wired fabric document (``Clos.from_dict`` checks it) of a cabling and a host table."""
    names = {r["host"] for r in host_rows}
    cables = cables_of(cable_rows, names)
    host_rows = _with_host_cables(cable_rows, host_rows, names)
    links: dict[tuple[str, str], list[tuple[str, str]]] = {}  # (a, b) -> [(a's if, b's if)]
    adj: dict[str, set[str]] = {}
    for (a, ai), (b, bi) in cables:
        links.setdefault((a, b), []).append((ai, bi))
        links.setdefault((b, a), []).append((bi, ai))
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    leaf_of = _host_leaves(host_rows, adj)
    planes = [_plane(comp, {l for ls in leaf_of.values() for l in ls}, adj)
              for comp in _components(adj)]
    planes.sort(key=lambda p: natural(_leaves(p)[0]))
    plane_of = {s: q for q, p in enumerate(planes) for s in _switches(p)}
    hosts = {}
    for h, leaves in leaf_of.items():
        by_plane = sorted(leaves, key=lambda l: plane_of[l])
        if sorted(plane_of[l] for l in by_plane) != list(range(len(planes))):
            raise InputError(f"hosts: host {h} needs one leaf in each of the {len(planes)} "
                             f"separate fabrics (planes) of the cabling, got {sorted(leaves)}")
        hosts[h] = by_plane if len(planes) > 1 else by_plane[0]
    doc: dict = ({"planes": [dict(p, name=f"plane{q}") for q, p in enumerate(planes)]}
                 if len(planes) > 1 else dict(planes[0]))
    doc.update(hosts=hosts, link_gbps=gbps)
    tier = {s: t for p in planes for t, group in enumerate(_tiers(p)) for s in group}
    bundles = [[a, b, len(v)] for (a, b), v in sorted(links.items())
               if len(v) > 1 and tier[a] < tier[b]]
    if bundles:
        doc["bundles"] = bundles
    shape = Clos.from_dict(doc)
    _check_cabled(shape, links)
    doc.update(_wiring(shape, links, host_rows))
    Clos.from_dict(doc)  # every address, port and name checked, naming the element
    return doc


def _with_host_cables(cable_rows: list[dict], host_rows: list[dict], names: set) -> list[dict]:
    """Host rows completed by the cables that name a host (an LLDP list of a leaf whose hosts
    run LLDP): the host's own interface; the leaf's port must be the host table's."""
    out = [dict(r) for r in host_rows]
    at = {(r["host"], r["leaf"]): r for r in out}
    for c in cable_rows:
        for (h, hi), (leaf, li) in (((c["switch"], c["interface"]), (c["peer"], c["peer_interface"])),
                                    ((c["peer"], c["peer_interface"]), (c["switch"], c["interface"]))):
            if h not in names:
                continue
            r = at.get((h, leaf))
            if r is None or r["interface"] != li:
                raise InputError(f"cabling: host {h} {hi} is cabled to {leaf} {li}, the host "
                                 f"table says {r and r['leaf']} {r and r['interface']}")
            r.setdefault("host_interface", hi)
    return out


def _host_leaves(rows: list[dict], adj: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in rows:
        if r["leaf"] not in adj:
            raise InputError(f"hosts: host {r['host']}'s leaf {r['leaf']} has no cable in the "
                             "cabling table")
        if r["leaf"] in out.get(r["host"], []):
            raise InputError(f"hosts: host {r['host']} is listed twice on leaf {r['leaf']}")
        out.setdefault(r["host"], []).append(r["leaf"])
    return out


def _components(adj: dict) -> list[set[str]]:
    seen, out = set(), []
    for s in sorted(adj, key=natural):
        if s in seen:
            continue
        comp, todo = set(), [s]
        while todo:
            x = todo.pop()
            if x not in comp:
                comp.add(x)
                todo += adj[x] - comp
        seen |= comp
        out.append(comp)
    return out


def _plane(comp: set[str], leaves_all: set[str], adj: dict) -> dict:
    """One plane's shape from its switches (module text)."""
    leaves = sorted(comp & leaves_all, key=natural)
    if not leaves:
        raise InputError(f"cabling: switches {', '.join(sorted(comp, key=natural)[:3])} have "
                         "no host in the host table (a fabric without leaves)")
    mid = sorted({n for l in leaves for n in adj[l]} - set(leaves), key=natural)
    for s in mid:
        if adj[s] & set(mid):
            raise InputError(f"cabling: {s} is cabled to {sorted(adj[s] & set(mid))[0]}, "
                             "another switch of its tier")
    cores = sorted(comp - set(leaves) - set(mid), key=natural)
    for l in leaves:
        if adj[l] - set(mid):
            raise InputError(f"cabling: leaf {l} is cabled to {sorted(adj[l] - set(mid))[0]},"
                             " which is not a spine")
    if not cores:
        return {"spines": mid, "leaves": leaves}
    pods, slot_of = [], {}
    for comp_pod in _components({s: adj[s] & (set(leaves) | set(mid))
                                 for s in leaves + mid}):
        pods.append((sorted(comp_pod & set(leaves), key=natural),
                     sorted(comp_pod & set(mid), key=natural)))
    pods.sort(key=lambda p: natural(p[0][0]))
    groups = sorted({frozenset(adj[a] & set(cores)) for a in mid},
                    key=lambda g: natural(min(g, key=natural)) if g else [])
    if frozenset() in groups:
        agg = next(a for a in mid if not adj[a] & set(cores))
        raise InputError(f"cabling: aggregation switch {agg} has no cable to a core")
    for g, group in enumerate(groups):
        for a in mid:
            if adj[a] & set(cores) == group:
                slot_of[a] = g
    return {"pods": {f"pod{k}": {"leaves": ls, "aggs": sorted(aggs, key=lambda a: slot_of[a])}
                     for k, (ls, aggs) in enumerate(pods)},
            "cores": [sorted(g, key=natural) for g in groups]}


def _leaves(p: dict) -> list[str]:
    return p["leaves"] if "leaves" in p else [l for pod in p["pods"].values()
                                              for l in pod["leaves"]]


def _tiers(p: dict) -> list[list[str]]:
    if "leaves" in p:
        return [p["leaves"], p["spines"]]
    return [_leaves(p), [a for pod in p["pods"].values() for a in pod["aggs"]],
            [c for g in p["cores"] for c in g]]


def _switches(p: dict) -> list[str]:
    return [s for t in _tiers(p) for s in t]


def _check_cabled(shape: Clos, links: dict) -> None:
    """Every link the shape has is a cable, and every cable a link of the shape."""
    expected = {(lo, up) for lo, up in shape.links()}
    for lo, up in sorted(expected):
        if (lo, up) not in links:
            raise InputError(f"cabling: {lo} has no cable to {up} (every leaf is cabled to "
                             "every spine of its pod, every core of a group to one "
                             "aggregation switch of every pod)")
    extra = [k for k in links if k not in expected and k[::-1] not in expected]
    if extra:
        raise InputError(f"cabling: the cable {extra[0][0]} - {extra[0][1]} does not fit a "
                         "Clos (a leaf to a spine, an aggregation switch to a core)")


def _wiring(shape: Clos, links: dict, host_rows: list[dict]) -> dict:
    """ports (natural order of each switch's interface names), interfaces, host_ip, and the
    dpids and MACs ``clos_wiring.wire`` numbers (MACs from the table where it has them)."""
    hosts = {(r["host"], r["leaf"]): r for r in host_rows}
    names: dict[str, dict[str, list[str]]] = {}
    for s in shape.switches():
        names[s] = {}
        for peer in shape.neighbours(s):
            if peer in shape.host_leaves:
                names[s][peer] = [hosts[(peer, s)]["interface"]]
                continue
            lo, _ = (s, peer) if shape.tier_of[s] < shape.tier_of[peer] else (peer, s)
            cables = sorted(links[(lo, peer if lo == s else s)], key=lambda c: natural(c[0]))
            names[s][peer] = [c[0] if lo == s else c[1] for c in cables]
    ports, interfaces = {}, {}
    for s, peers in names.items():
        order = sorted((x for v in peers.values() for x in v), key=natural)
        if len(set(order)) != len(order):
            dup = next(x for x in order if order.count(x) > 1)
            raise InputError(f"cabling: {s} {dup} is cabled twice (a host port and a cable?)")
        number = {x: k + 1 for k, x in enumerate(order)}
        ports[s] = {p: number[v[0]] if len(v) == 1 else [number[x] for x in v]
                    for p, v in peers.items()}
        interfaces[s] = {p: v[0] if len(v) == 1 else v for p, v in peers.items()}
    n = len(shape.planes)
    made = wire(shape)
    host_ip, host_mac = {}, {}
    for h, leaves in shape.host_leaves.items():
        rows = [hosts[(h, l)] for l in leaves]
        ips = [r["address"] for r in rows]
        macs = [r.get("mac") or (made["host_mac"][h] if n == 1 else made["host_mac"][h][q])
                for q, r in enumerate(rows)]
        host_ip[h], host_mac[h] = (ips[0], macs[0]) if n == 1 else (ips, macs)
        if all(r.get("host_interface") for r in rows):
            interfaces[h] = {r["leaf"]: r["host_interface"] for r in rows}
    return {"dpids": made["dpids"], "ports": ports, "host_ip": host_ip, "host_mac": host_mac,
            "interfaces": interfaces}


def load(cabling: str, hosts: str, gbps: float = 100.0) -> Clos:
    """The fabric of a cabling table file and a host table file (CSV or JSON)."""
    doc = document(read_table(cabling, CABLE_COLUMNS, "cabling"),
                   read_table(hosts, HOST_COLUMNS, "hosts", HOST_OPTIONAL), gbps)
    return Clos.from_dict(doc)
