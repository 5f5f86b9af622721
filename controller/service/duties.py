"""Probe duties: which hosts' agents probe which paths so that every link of the fabric is
crossed by the probes of at least ``COVER`` distinct hosts, whatever the jobs.

Why: a link goes down on failed paths from at least two hosts (``pathstate``, the quorum) and
comes back only on a probe across it. The hosts' own parts and backups are probed by their
ends, but a link no job crosses would then never be watched: a failure there is not seen,
and the next job is planned onto it (issue 73: 73% of routes at k = 16 crossed a link no report
could show). The paths are chosen from the fabric's shape alone (links down included: a probe
tells when one is back), so a failure or a job changes no host's duties, and no document is
rebuilt for them.

How: links are taken top tier first (a path through a core also crosses two leaf links,
which then need no path of their own); each link short of ``COVER`` hosts gets a path from a
leaf below it up across it and down to a leaf whose nearest common switch with it is the
link's upper end, from the side below and from the side above in turn (a leaf's failure does
not blind both), until no other link lies on every path across it: the smallest explanation
of their failing (``pathstate``) is then that link alone. Origins and destinations rotate
over leaves and over each leaf's hosts, so duties spread: about the average plus a few per
host.

Complexity: O(L * T) for L links and T tiers, with per-leaf and per-link lookups in O(1).

>>> from controller.model.clos import Clos
>>> f = Clos.fat_tree(4)
>>> got = assign(f)
>>> covered = crossings(f, got)
>>> min(len(covered[link]) for link in f.links()) >= COVER
True
>>> sum(len(paths) for paths in got.values()), max(len(paths) for paths in got.values())
(23, 3)
"""
from __future__ import annotations

from itertools import count

COVER = 2  # distinct hosts whose probes cross each link (the quorum of a link down)
TRIES = 16  # paths tried per link (``assign``: its cover, told apart; ``repair``: alive)
_BASE: dict = {}  # (planes, hosts) identity -> (them, the shape's duties): ``_base``


def of(fabric, host: str, cover: int = COVER) -> list[tuple[list[str], str]]:
    """``host``'s duties on ``fabric``: its shape's (``assign``) and its ``extras``."""
    return _base(fabric, cover).get(host, []) + extras(fabric, cover).get(host, [])


def extras(fabric, cover: int = COVER) -> dict[str, list[tuple[list[str], str]]]:
    """``repair``'s extra paths where something is down ({} otherwise), kept on the fabric
    object: the only duties a failure changes, so the only documents it wakes for them."""
    if not fabric.down and not fabric.down_switches:
        return {}
    base = _base(fabric, cover)
    return fabric.derived(f"probe_duties_{cover}", lambda f: repair(f, base, cover))


def _base(fabric, cover: int) -> dict:
    """``assign`` once per shape: a copy with other links down shares the planes and hosts
    (``Clos.with_down``), so a failure costs no new assignment."""
    key = (id(fabric.planes), id(fabric.host_leaves), cover)
    held = _BASE.get(key)
    if held is None or held[0] is not fabric.planes or held[1] is not fabric.host_leaves:
        if len(_BASE) >= 4:
            _BASE.clear()
        held = _BASE[key] = (fabric.planes, fabric.host_leaves, assign(fabric, cover))
    return held[2]


def repair(fabric, duties: dict, cover: int = COVER) -> dict[str, list[tuple[list[str], str]]]:
    """Host -> extra paths for ``duties``, over alive links and switches only, for each alive link
    that fewer than ``cover`` hosts cross by an alive path: a path through a down switch
    fails whole, and would leave the alive links beside it unwatched. Only the links of
    paths that cross something down are looked at: O(those paths' links x ``TRIES``).

    >>> from controller.model.clos import Clos
    >>> f = Clos.fat_tree(4).with_down({("a0_0", "c0_0")})
    >>> base = assign(f)
    >>> more = repair(f, base)
    >>> alive = {l for l in f.links() if f.alive_members(*l)}
    >>> ok = alive_crossings(f, {h: base.get(h, []) + more.get(h, []) for h in f.hosts})
    >>> min(len(ok[l]) for l in alive) >= COVER
    True
    """
    def up(path: list[str]) -> bool:
        return all(fabric.alive_members(*_link(fabric, a, b)) for a, b in zip(path, path[1:]))

    broken = [path for paths in duties.values() for path, _ in paths if not up(path)]
    if not broken:
        return {}
    ok = alive_crossings(fabric, duties)
    short = {_link(fabric, a, b) for path in broken for a, b in zip(path, path[1:])}
    short = sorted((link for link in short if fabric.alive_members(*link)
                    and len(ok[link]) < cover), key=lambda l: -fabric.tier_of[l[1]])
    out: dict[str, list[tuple[list[str], str]]] = {}
    hosts_on = {leaf: hs for leaf, hs in fabric.hosts_on.items() if hs}
    shapes = [_Shape(plane, hosts_on) for plane in fabric.planes]
    for link in short:
        shape = shapes[fabric.plane_of[link[0]]]
        for n in range(TRIES):
            if len(ok[link]) >= cover:
                break
            path = shape.path_across(link, n, upward=n % 2 == 0)
            if path is None or not up(path):
                continue
            src = next((h for h in hosts_on[path[0]] if h not in ok[link]), None)
            dst = next((h for h in hosts_on[path[-1]] if h != src), None)
            if src is None or dst is None:
                continue
            out.setdefault(src, []).append((path, dst))
            for a, b in zip(path, path[1:]):
                ok[_link(fabric, a, b)].add(src)
    return out


def assign(fabric, cover: int = COVER) -> dict[str, list[tuple[list[str], str]]]:
    """Host -> its duties, each (switch path from its leaf, destination host); hosts with
    none are left out. Links no path can cross (a pod of one leaf with no core above, a leaf
    without hosts at both sides) stay uncovered: ``crossings`` shows them."""
    hosts_on = {leaf: hs for leaf, hs in fabric.hosts_on.items() if hs}
    seen: dict[tuple[str, str], set[str]] = {}
    on: dict[tuple[str, str], list[frozenset]] = {}  # link -> the links of paths across it
    duties: dict[str, list[tuple[list[str], str]]] = {}
    turn = {}  # leaf -> its next host's index (duties rotate over a leaf's hosts)

    def host_on(leaf: str, avoid: set[str]) -> str | None:
        hs = hosts_on[leaf]
        start = turn.get(leaf, 0)
        for i in range(len(hs)):
            h = hs[(start + i) % len(hs)]
            if h not in avoid:
                turn[leaf] = (start + i + 1) % len(hs)
                return h
        return None

    for q, plane in enumerate(fabric.planes):
        shape = _Shape(plane, hosts_on)
        links = sorted(((x, y) for x, y in fabric.links() if fabric.plane_of[x] == q),
                       key=lambda link: -fabric.tier_of[link[1]])
        rota = count()
        for link in links:
            have = seen.setdefault(link, set())
            for attempt in range(TRIES):
                shared = _shared(on.get(link), link)
                if len(have) >= cover and not shared:
                    break
                path = shape.path_across(link, next(rota), upward=attempt % 2 == 0)
                if path is None:
                    continue
                hops = frozenset(_link(fabric, a, b) for a, b in zip(path, path[1:]))
                if shared and hops & shared and attempt < TRIES - 1:
                    continue  # its failure would look like another link's
                src = host_on(path[0], have)
                dst = host_on(path[-1], {src}) if src else None
                if src is None or dst is None:
                    continue
                duties.setdefault(src, []).append((path, dst))
                for hop in hops:
                    seen.setdefault(hop, set()).add(src)
                    on.setdefault(hop, []).append(hops)
    return duties


def _shared(paths: list[frozenset] | None, link: tuple[str, str]) -> frozenset:
    """The other links every one of ``paths`` crosses (empty: a failure of ``link`` alone
    is the smallest explanation of their failing, ``pathstate``'s judgement)."""
    return frozenset.intersection(*paths) - {link} if paths else frozenset()


def crossings(fabric, duties: dict) -> dict[tuple[str, str], set[str]]:
    """(lower, upper) -> the hosts whose duties cross it, for every link of the fabric."""
    out = {link: set() for link in fabric.links()}
    for host, paths in duties.items():
        for path, _dst in paths:
            for a, b in zip(path, path[1:]):
                out[_link(fabric, a, b)].add(host)
    return out


def alive_crossings(fabric, duties: dict) -> dict[tuple[str, str], set[str]]:
    """As ``crossings``, counting only paths whose every link and switch is up (a probe
    along any other fails whole)."""
    out = {link: set() for link in fabric.links()}
    for host, paths in duties.items():
        for path, _dst in paths:
            links = [_link(fabric, a, b) for a, b in zip(path, path[1:])]
            if all(fabric.alive_members(*link) for link in links):
                for link in links:
                    out[link].add(host)
    return out


def _link(fabric, a: str, b: str) -> tuple[str, str]:
    return (a, b) if fabric.tier_of[a] < fabric.tier_of[b] else (b, a)


class _Shape:
    """One plane's pods, slots and leaves with hosts, to build a valley-free shortest path
    across a given link in O(tiers)."""

    def __init__(self, plane, hosts_on: dict) -> None:
        self.plane = plane
        self.pod_leaves: list[list[str]] = [[] for _ in plane.pods]
        for leaf, pod in zip(plane.leaves, plane.pod_of_leaf):
            if leaf in hosts_on:
                self.pod_leaves[pod].append(leaf)
        self.pod_of_leaf = dict(zip(plane.leaves, plane.pod_of_leaf))
        self.where = {a: (pod, slot) for pod, aggs in enumerate(plane.aggs)
                      for slot, a in enumerate(aggs)}
        self.group = {c: g for g, cores in enumerate(plane.cores) for c in cores}
        self.pods_with_hosts = [p for p, ls in enumerate(self.pod_leaves) if ls]

    def path_across(self, link: tuple[str, str], n: int, upward: bool) -> list[str] | None:
        """A shortest leaf-to-leaf path that crosses ``link`` (lower, upper), the ``n``-th
        choice of its ends; ``upward``: it starts below the link's lower end, else it ends
        there (the same path reversed). None where there is none."""
        x, y = link
        if y in self.group:  # agg x - core y: pod of x up, another pod down
            pod, slot = self.where[x]
            others = [p for p in self.pods_with_hosts if p != pod]
            below = self.pod_leaves[pod]
            if not others or not below:
                return None
            far = others[n % len(others)]
            dst_leaves = self.pod_leaves[far]
            path = [below[n % len(below)], x, y, self.plane.aggs[far][slot],
                    dst_leaves[(n // len(others)) % len(dst_leaves)]]
        else:  # leaf x - agg y: another leaf of the pod, else through a core
            pod, slot = self.where[y]
            if x not in self.pod_of_leaf or not self.pod_leaves[pod] or x not in self.pod_leaves[pod]:
                return None
            mates = [leaf for leaf in self.pod_leaves[pod] if leaf != x]
            others = [p for p in self.pods_with_hosts if p != pod]
            cores = self.plane.cores[slot] if self.plane.cores else []
            if mates and (n % 3 or not others or not cores):  # mostly within the pod
                path = [x, y, mates[n % len(mates)]]
            elif others and cores:  # through a core: another pod's leaf
                far = others[n % len(others)]
                path = [x, y, cores[n % len(cores)], self.plane.aggs[far][slot],
                        self.pod_leaves[far][n % len(self.pod_leaves[far])]]
            else:
                return None
        return path if upward else path[::-1]
