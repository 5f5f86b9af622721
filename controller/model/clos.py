"""Clos fabrics as they are built: planes, bundles and a third tier.

A fabric is one or more independent *planes*; every host has one port into each plane (one leaf
per plane). A plane is two-tier (leaves and spines, every leaf linked to every spine) or
three-tier: *pods* of leaves and aggregation switches (every leaf of a pod linked to every
aggregation switch of the pod) and *cores* in groups, group g attached to the g-th aggregation
switch of every pod. A two-tier plane is a plane of one pod whose aggregation switches are its
spines and that has no cores, so both shapes share one model. Two adjacent switches may be
joined by a *bundle* of n parallel links; links of each tier may have their own speed; links
(one member of a bundle or all of them) and whole switches may be down.

A route in a plane is fixed by one *middle* switch: the spine (aggregation switch) for leaves
of one pod, the core for leaves of different pods (which fixes both aggregation switches); the
member of a bundle is chosen per hop (``model.clospaths``). The document extends the two-tier
one (docs/reference/formats.md); the controller serves every fabric as a ``Clos`` (``as_clos``).

>>> c = Clos.fat_tree(4)
>>> len(c.planes[0].leaves), sum(len(g) for g in c.planes[0].cores), len(c.hosts)
(8, 4, 16)
>>> Clos.from_dict(c.to_dict()).to_dict() == c.to_dict()
True
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from controller.errors import InputError
from controller.model import clos_wiring
from controller.model.clos_wiring import WIRING, per_plane
from controller.model.fabric import DERIVED, Fabric, HostLookup, leaf_spine_line
from controller.model.fabric_doc import TIERS, link_count, name_list, speeds
from controller.model.prefixes import CACHE as PREFIX_CACHE

_KEYS = {"spines", "leaves", "pods", "cores", "planes", "hosts", "link_gbps", "bundle", "bundles",
         "down", "down_switches", "name"} | WIRING
_PLANE_KEYS = {"spines", "leaves", "pods", "cores", "name"}
_MEMBERS = tuple(tuple(range(n)) for n in range(9))  # the members of a bundle of n, all up


@dataclass
class Plane:
    """One plane: pods of leaves and aggregation switches, cores in groups (none: two tiers)."""
    name: str
    pods: list[str]
    leaves: list[str]
    pod_of_leaf: list[int]
    aggs: list[list[str]]  # per pod, its aggregation switches in slot order
    cores: list[list[str]] = field(default_factory=list)  # per slot g, the cores of group g

    @property
    def tiers(self) -> int:
        return 3 if self.cores else 2

    def switches(self) -> list[str]:
        return self.leaves + [a for pod in self.aggs for a in pod] + [c for g in self.cores for c in g]


@dataclass
class Clos(HostLookup):
    planes: list[Plane]
    host_leaves: dict[str, tuple[str, ...]]  # host -> its leaf in each plane
    link_gbps: dict[str, float]  # per tier in TIERS
    bundles: dict[tuple[str, str], int] = field(default_factory=dict)  # (lower, upper) -> links
    bundle_default: dict[str, int] = field(default_factory=lambda: {"leaf": 1, "core": 1})
    down: set[tuple] = field(default_factory=set)  # (lower, upper) or (lower, upper, member)
    down_switches: set[str] = field(default_factory=set)
    wiring: dict = field(default_factory=dict)  # dpids, ports, host_ip, host_mac (or nothing)

    def __post_init__(self) -> None:
        self.__dict__.pop(PREFIX_CACHE, None)  # derived from the hosts: recomputed
        self.__dict__.pop(DERIVED, None)
        self.__dict__.pop("_leaf_spine", None)  # likewise (``as_leaf_spine``)
        self.hosts = {h: ls[0] for h, ls in self.host_leaves.items()}  # first plane's leaf
        self.dpids: dict[str, int] = dict(self.wiring.get("dpids", {}))
        self.ports: dict[str, dict[str, int]] = {k: dict(v) for k, v in
                                                  self.wiring.get("ports", {}).items()}
        # each host's address in every plane (one interface per plane, the host picks the
        # plane by the destination address); host_ip and host_mac are the first plane's
        self.host_ips = per_plane(self.wiring.get("host_ip", {}))
        self.host_macs = per_plane(self.wiring.get("host_mac", {}))
        self.host_ip: dict[str, str] = {h: a[0] for h, a in self.host_ips.items() if a}
        self.host_mac: dict[str, str] = {h: a[0] for h, a in self.host_macs.items() if a}
        self.switch_of_dpid = {d: name for name, d in self.dpids.items()}
        self.hosts_on: dict[str, list[str]] = {}  # leaf (any plane) -> its hosts
        for h, ls in self.host_leaves.items():
            for leaf in ls:
                self.hosts_on.setdefault(leaf, []).append(h)
        self.plane_of: dict[str, int] = {}
        self.tier_of: dict[str, int] = {}
        for p, plane in enumerate(self.planes):
            for tier, names in ((0, plane.leaves), (1, [a for pod in plane.aggs for a in pod]),
                                (2, [c for g in plane.cores for c in g])):
                for name in names:
                    self.plane_of[name] = p
                    self.tier_of[name] = tier

    # ---- shape --------------------------------------------------------------------------
    is_clos = True  # the Clos model: paths of switches as route parts (``Fabric.is_clos``)

    @property
    def tiers(self) -> int:
        return max(p.tiers for p in self.planes)

    def bundle(self, lower: str, upper: str) -> int:
        """Parallel links between two adjacent switches (lower tier first)."""
        n = self.bundles.get((lower, upper))
        return n if n is not None else self.bundle_default["core" if self.tier_of[lower] == 1 else "leaf"]

    @property
    def bundled(self) -> bool:
        """Some pair of switches is joined by two links or more (a core tier's default
        counts only where some plane has cores)."""
        return (any(n > 1 for n in self.bundles.values()) or self.bundle_default["leaf"] > 1
                or (self.bundle_default["core"] > 1 and any(p.cores for p in self.planes)))

    def alive_members(self, lower: str, upper: str) -> tuple[int, ...]:
        """The members of the link (lower, upper) that are up, both switches up too. The
        static entries ask for every link again and again: with something down the answers
        are kept on the fabric object (immutable in use)."""
        if not self.down and not self.down_switches:
            n = self.bundle(lower, upper)
            return _MEMBERS[n] if 0 <= n < len(_MEMBERS) else tuple(range(n))
        kept = self.derived("alive_members", lambda _: {})
        got = kept.get((lower, upper))
        if got is None:
            if (lower, upper) in self.down or lower in self.down_switches \
                    or upper in self.down_switches:
                got = ()
            else:
                got = tuple(m for m in range(self.bundle(lower, upper))
                            if (lower, upper, m) not in self.down)
            kept[(lower, upper)] = got
        return got

    leaves = property(lambda self: [l for p in self.planes for l in p.leaves])  # plane by plane
    plane_count = property(lambda self: len(self.planes))  # ``Fabric.plane_count`` is 1

    def leaves_by_pod(self, plane: int = 0) -> list[list[str]]:
        """The leaves of ``plane``, pod by pod, in plane order (``Fabric``: one pod)."""
        p = self.planes[plane]
        return [[l for l, i in zip(p.leaves, p.pod_of_leaf) if i == k] for k in range(len(p.pods))]

    hosts_of_leaf = property(lambda self: self.hosts_on)  # leaf (any plane) -> its hosts

    def switches(self) -> list[str]:
        """Every switch, plane by plane, tier by tier (leaves first)."""
        return [s for p in self.planes for s in p.switches()]

    def links(self) -> list[tuple[str, str]]:
        """Every switch link as (lower, upper), bundles as one."""
        return [(s, up) for s in self.switches() if self.tier_of[s] < 2
                for up in self.neighbours(s) if self.tier_of.get(up, -1) > self.tier_of[s]]

    def with_down(self, down) -> Clos:
        """A copy with another set of failed links (the model is immutable in use); it keeps
        the destination prefixes (they depend on the hosts only) and ``as_leaf_spine``'s model."""
        out = replace(self, down=set(down), down_switches=set(self.down_switches), wiring=dict(self.wiring))
        if PREFIX_CACHE in self.__dict__:
            out.__dict__[PREFIX_CACHE] = self.__dict__[PREFIX_CACHE]
        if "_leaf_spine" in self.__dict__:  # two tiers: the same model, other links down
            two = self.__dict__["_leaf_spine"]
            out._keep_view(two and two.with_down(out.down))
        return out

    def _keep_view(self, two: Fabric | None) -> None:
        """``two`` is this fabric's two-tier view (``as_leaf_spine``) and knows it (``as_clos``)."""
        if two is not None:
            two.__dict__.setdefault(DERIVED, {})["as_clos"] = self
        self.__dict__["_leaf_spine"] = two

    # ---- wiring (what topologies/clos.py builds; the controller needs it) ---------------
    @property
    def wired(self) -> bool:
        return bool(self.dpids)

    def neighbours(self, switch: str) -> list[str]:
        """Linked switches and hosts of ``switch`` (bundles not expanded)."""
        p = self.planes[self.plane_of[switch]]
        tier = self.tier_of[switch]
        if tier == 0:
            k = p.leaves.index(switch)
            return p.aggs[p.pod_of_leaf[k]] + self.hosts_on.get(switch, [])
        if tier == 1:
            pod = next(i for i, a in enumerate(p.aggs) if switch in a)
            slot = p.aggs[pod].index(switch)
            down = [l for l, i in zip(p.leaves, p.pod_of_leaf) if i == pod]
            return down + (list(p.cores[slot]) if p.cores else [])
        g = next(i for i, grp in enumerate(p.cores) if switch in grp)
        return [aggs[g] for aggs in p.aggs]

    # ---- addresses per plane ------------------------------------------------------------
    def ip_of(self, host: str, plane: int = 0) -> str:
        """The host's IPv4 address on ``plane`` (its interface to that plane's leaf)."""
        return self.host_ips[host][plane]

    def mac_of(self, host: str, plane: int = 0) -> str:
        return self.host_macs[host][plane]

    def plane_ips(self, plane: int) -> dict[str, str]:
        """host -> its address on ``plane`` (what that plane's switches match)."""
        return self.host_ip if plane == 0 else {h: ips[plane] for h, ips in self.host_ips.items()
                                                if len(ips) > plane}

    def addresses_at(self, switch: str) -> dict[str, str]:
        return self.plane_ips(self.plane_of[switch])

    def interfaces(self) -> list[tuple[str, int, str | None, str | None, str]]:
        def nth(values, q):
            return values[q] if q < len(values) else None
        return [(h, q, nth(self.host_ips.get(h, ()), q), nth(self.host_macs.get(h, ()), q), leaf)
                for h, leaves in self.host_leaves.items() for q, leaf in enumerate(leaves)]

    def plane_of_switch(self, switch: str | None) -> int:
        return self.plane_of.get(switch, 0)

    def part_plane(self, where) -> int:
        return self.plane_of[where[0]] if isinstance(where, tuple) else 0

    def as_leaf_spine(self) -> Fabric | None:
        """This fabric as the two-tier model (``model.fabric.Fabric``: same names, wiring and
        failed links) when it is one two-tier plane without bundles, failed switches or a host
        link speed of its own, else None, for the two-tier planners (``planners.leaf_spine``)."""
        if "_leaf_spine" not in self.__dict__:
            p, g = self.planes[0], self.link_gbps
            single = (len(self.planes) == 1 and not p.cores and not self.bundled
                      and not self.down_switches and g.get("host", g["leaf"]) == g["leaf"])
            wiring = {k: getattr(self, k) for k in ("dpids", "ports", "host_ip", "host_mac")
                      if k in self.wiring}  # checked as this fabric's: not again
            self._keep_view(Fabric(list(p.aggs[0]), list(p.leaves), dict(self.hosts), g["leaf"],
                                   set(self.down), wiring) if single else None)
        return self.__dict__["_leaf_spine"]

    def two_tier_spine(self, switch: str) -> bool:
        """Whether ``switch`` is the spine of a two-tier plane (a route names it ``spine``)."""
        return self.tier_of.get(switch) == 1 and not self.planes[self.plane_of[switch]].cores

    def wire(self, wiring: dict | None = None) -> Clos:
        """Declare ``wiring``, else what ``topologies/clos.py`` builds (``clos_wiring.wire``)."""
        self.wiring = clos_wiring.wire(self) if wiring is None else wiring
        self.__post_init__()
        return self

    def link_bps(self, tier: str = "leaf") -> float:
        return self.link_gbps[tier] * 1e9 / 8

    def summary(self) -> str:
        """One line: planes, tiers, switches per tier, hosts; one two-tier plane as ``leaf_spine_line``."""
        if not (p0 := self.planes[0]).cores and len(self.planes) == 1:  # one pod: its spines
            return leaf_spine_line(p0.aggs[0], p0.leaves, len(self.host_leaves), self.alive_members)
        aggs, cores = sum(map(len, p0.aggs)), sum(map(len, p0.cores))
        pods = f", {cores} cores in {len(p0.cores)} groups, {len(p0.pods)} pods" if cores else ""
        return (f"{len(self.planes)} plane(s) x {p0.tiers} tiers: {len(p0.leaves)} leaves, {aggs} "
                f"{'aggregation' if cores else 'spine'} switches{pods}, {len(self.host_leaves)} hosts")

    # ---- generators ---------------------------------------------------------------------
    @classmethod
    def fat_tree(cls, k: int, hosts_per_leaf: int | None = None, link_gbps: float = 100.0,
                 planes: int = 1, cores_per_group: int | None = None) -> Clos:
        """A k-ary fat-tree: k pods of k/2 leaves and k/2 aggregation switches, (k/2)^2 cores in
        k/2 groups, k/2 hosts per leaf (full bisection) unless ``hosts_per_leaf`` says otherwise;
        ``cores_per_group`` below k/2 oversubscribes the core tier. Leaves l<i> (i counts pod by
        pod), aggregation switches a<pod>_<slot>, cores c<group>_<j>, hosts h<i>_<m>; with
        several planes every switch name ends in _p<plane>."""
        if not isinstance(k, int) or k < 2 or k % 2:
            raise InputError(f"fabric: a fat-tree needs an even k >= 2, got {k!r}")
        half = k // 2
        hpl = half if hosts_per_leaf is None else hosts_per_leaf
        cpg = half if cores_per_group is None else cores_per_group
        if hpl < 1 or cpg < 1 or planes < 1:
            raise InputError("fabric: hosts per leaf, cores per group and planes must be >= 1")
        pods = {f"pod{p}": ([f"l{p * half + i}" for i in range(half)],
                            [f"a{p}_{g}" for g in range(half)]) for p in range(k)}
        cores = [[f"c{g}_{j}" for j in range(cpg)] for g in range(half)]
        hosts = [f"h{i}_{m}" for i in range(k * half) for m in range(hpl)]
        return cls._planes_of(pods, cores, hosts, hpl, link_gbps, planes)

    @classmethod
    def leaf_spine(cls, spines: int, leaves: int, hosts_per_leaf: int, link_gbps: float = 100.0,
                   planes: int = 1, bundle: int = 1) -> Clos:
        """A two-tier fabric of ``planes`` planes (spines s<j>, leaves l<i>, hosts h<i>_<m>,
        _p<plane> added with several planes), every leaf-spine pair joined by ``bundle`` links."""
        if spines < 1 or leaves < 1:
            raise InputError("fabric: need at least one spine and one leaf")
        if hosts_per_leaf < 0 or planes < 1 or bundle < 1:
            raise InputError("fabric: hosts per leaf >= 0, planes and bundle >= 1")
        pods = {"pod": ([f"l{i}" for i in range(leaves)], [f"s{j}" for j in range(spines)])}
        hosts = [f"h{i}_{m}" for i in range(leaves) for m in range(hosts_per_leaf)]
        fabric = cls._planes_of(pods, [], hosts, hosts_per_leaf, link_gbps, planes)
        fabric.bundle_default = {"leaf": bundle, "core": 1}
        return fabric

    @classmethod
    def generate(cls, spines: int, leaves: int, hosts_per_leaf: int, link_gbps: float = 100.0,
                 failed_spines: int = 0, wiring: bool = False) -> Clos:
        """The paper's leaf-spine: ``leaf_spine`` with every link of its last ``failed_spines``
        spines down, and with ``wiring`` what ``topologies/clos.py`` builds (``wire``)."""
        if not 0 <= failed_spines <= spines:
            raise InputError(f"fabric: cannot fail {failed_spines} of {spines} spines")
        f = cls.leaf_spine(spines, leaves, hosts_per_leaf, link_gbps)
        p = f.planes[0]
        f.down = {(leaf, s) for s in p.aggs[0][spines - failed_spines:] for leaf in p.leaves}
        return f.wire() if wiring else f

    @classmethod
    def _planes_of(cls, pods: dict, cores: list, hosts: list[str], hpl: int, gbps: float,
                   planes: int) -> Clos:
        out = []
        for q in range(planes):
            sfx = (lambda n: n) if planes == 1 else (lambda n, q=q: f"{n}_p{q}")
            leaves = [sfx(l) for ls, _ in pods.values() for l in ls]
            pod_of = [p for p, (ls, _) in enumerate(pods.values()) for _ in ls]
            out.append(Plane(f"plane{q}", list(pods), leaves, pod_of,
                             [[sfx(a) for a in aggs] for _, aggs in pods.values()],
                             [[sfx(c) for c in g] for g in cores]))
        host_leaves = {h: tuple(p.leaves[i // hpl] for p in out) for i, h in enumerate(hosts)}
        return cls(out, host_leaves, {t: float(gbps) for t in TIERS})

    # ---- document -----------------------------------------------------------------------
    @classmethod
    def from_dict(cls, doc: Mapping) -> Clos:
        """Validate a fabric document of any shape; every error names the element (InputError)."""
        if not isinstance(doc, Mapping):
            raise InputError("fabric: expected a JSON object")
        if unknown := set(doc) - _KEYS:
            raise InputError(f"fabric: unknown field {sorted(unknown)[0]!r}")
        if "planes" in doc:
            if not isinstance(doc["planes"], list) or not doc["planes"]:
                raise InputError("fabric: 'planes' must be a non-empty list of planes")
            if clash := _PLANE_KEYS & set(doc) - {"name"}:
                raise InputError(f"fabric: {sorted(clash)[0]!r} belongs inside a plane when "
                                 "'planes' is given")
            planes = [_plane(p, q) for q, p in enumerate(doc["planes"])]
        else:
            planes = [_plane(doc, None)]
        seen: dict[str, str] = {}
        for plane in planes:
            for name in plane.switches() + plane.pods:
                if name in seen and not (name in plane.pods and seen[name] == "pod"):
                    raise InputError(f"fabric: name {name!r} is used twice")
                seen[name] = "pod" if name in plane.pods else "switch"
        host_leaves = _hosts(doc, planes, seen)
        wiring = {k: doc[k] for k in WIRING if k in doc}
        clos_wiring.check_tables(wiring, {n for n, k in seen.items() if k == "switch"}, host_leaves)
        fabric = cls(planes, host_leaves, speeds(doc.get("link_gbps", 100)), wiring=wiring)
        fabric._read_bundles(doc)
        fabric._read_down(doc)
        if wiring:
            fabric.check_wiring()
        return fabric

    def check_wiring(self) -> None:
        """Every switch a datapath id, every link a port at both ends, every host an IPv4 and
        a MAC address per plane, nothing twice (``clos_wiring.check``)."""
        clos_wiring.check(self)

    def to_dict(self) -> dict:
        def plane_doc(p: Plane) -> dict:
            if not p.cores:
                return {"spines": list(p.aggs[0]), "leaves": list(p.leaves)}
            return {"pods": {pod: {"leaves": [l for l, i in zip(p.leaves, p.pod_of_leaf)
                                              if i == k], "aggs": list(p.aggs[k])}
                             for k, pod in enumerate(p.pods)},
                    "cores": [list(g) for g in p.cores]}
        doc: dict = ({"planes": [{"name": p.name, **plane_doc(p)} for p in self.planes]}
                     if len(self.planes) > 1 else plane_doc(self.planes[0]))
        doc["hosts"] = {h: (ls[0] if len(ls) == 1 else list(ls))
                        for h, ls in self.host_leaves.items()}
        speeds = set(self.link_gbps.values())
        doc["link_gbps"] = speeds.pop() if len(speeds) == 1 else dict(self.link_gbps)
        if self.bundle_default != {"leaf": 1, "core": 1}:
            doc["bundle"] = dict(self.bundle_default)
        if self.bundles:
            doc["bundles"] = [[a, b, n] for (a, b), n in sorted(self.bundles.items())]
        at = {s: i for i, s in enumerate(self.switches())}  # in the fabric's order
        doc["down"] = sorted([list(d) for d in self.down], key=lambda d: (at[d[0]], at[d[1]], *d[2:]))
        if self.down_switches:
            doc["down_switches"] = sorted(self.down_switches)
        doc.update(self.wiring)
        return doc

    def _adjacent(self, a: str, b: str, what: str) -> tuple[str, str]:
        """(lower, upper) for two linked switches, either order; else an error naming them."""
        for lo, up in ((a, b), (b, a)):
            if lo in self.tier_of and up in self.tier_of and self._linked(lo, up):
                return lo, up
        raise InputError(f"fabric: {what} names {a!r} and {b!r}, which are not linked")

    def _linked(self, lower: str, upper: str) -> bool:
        p = self.plane_of[lower]
        if self.plane_of[upper] != p:
            return False
        plane, tl, tu = self.planes[p], self.tier_of[lower], self.tier_of[upper]
        if tl == 0 and tu == 1:
            return upper in plane.aggs[plane.pod_of_leaf[plane.leaves.index(lower)]]
        if tl == 1 and tu == 2:
            slot = next(pod.index(lower) for pod in plane.aggs if lower in pod)
            return slot < len(plane.cores) and upper in plane.cores[slot]
        return False

    def _read_bundles(self, doc: Mapping) -> None:
        default = doc.get("bundle", {})
        if not isinstance(default, Mapping) or set(default) - {"leaf", "core"}:
            raise InputError("fabric: 'bundle' must map 'leaf' and/or 'core' to a link count")
        for tier, n in default.items():
            self.bundle_default[tier] = link_count(n, f"'bundle' of tier {tier}")
        items = doc.get("bundles", [])
        if not isinstance(items, list):
            raise InputError("fabric: 'bundles' must be a list of [switch, switch, links]")
        for item in items:
            if not (isinstance(item, list) and len(item) == 3):
                raise InputError(f"fabric: bad bundle {item!r} (expected [switch, switch, links])")
            lo, up = self._adjacent(str(item[0]), str(item[1]), "a bundle")
            self.bundles[(lo, up)] = link_count(item[2], f"the bundle {lo}-{up}")

    def _read_down(self, doc: Mapping) -> None:
        items = doc.get("down", [])
        if not isinstance(items, list):
            raise InputError("fabric: 'down' must be a list of [switch, switch(, member)]")
        for item in items:
            if not (isinstance(item, list) and len(item) in (2, 3)
                    and all(isinstance(x, str) for x in item[:2])):
                raise InputError(f"fabric: bad entry in 'down': {item!r} "
                                 "(expected [switch, switch] or [switch, switch, member])")
            lo, up = self._adjacent(item[0], item[1], "'down'")
            if len(item) == 3:
                m = item[2]
                if isinstance(m, bool) or not isinstance(m, int) or not 0 <= m < self.bundle(lo, up):
                    raise InputError(f"fabric: 'down' names member {m!r} of the bundle {lo}-{up}, "
                                     f"which has {self.bundle(lo, up)} links")
                self.down.add((lo, up, m))
            else:
                self.down.add((lo, up))
        names = doc.get("down_switches", [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise InputError("fabric: 'down_switches' must be a list of switch names")
        for name in names:
            if name not in self.tier_of:
                raise InputError(f"fabric: 'down_switches' names unknown switch {name!r}")
            if self.tier_of[name] == 0:
                raise InputError(f"fabric: leaf {name} cannot be down (its hosts would be cut "
                                 "off: remove them instead)")
            self.down_switches.add(name)


def load_fabric(doc: Mapping) -> Clos:
    """Any fabric document (two tiers or three, planes, bundles) as a ``Clos``."""
    return Clos.from_dict(doc)


def as_clos(fabric: Fabric | Clos | None) -> Clos | None:
    """The fabric as the controller serves it: a ``Fabric`` as its Clos of one plane, wiring
    as is (kept on the Fabric object: both are immutable in use)."""
    return fabric if fabric is None or fabric.is_clos else fabric.derived("as_clos", _clos_of)


def _clos_of(f: Fabric) -> Clos:
    c = Clos.from_dict({k: v for k, v in f.to_dict().items() if k not in WIRING})
    return c.wire(dict(f.extra)) if f.extra else c


def _plane(doc, q: int | None) -> Plane:
    where = "fabric" if q is None else f"fabric: plane {q}"
    if not isinstance(doc, Mapping):
        raise InputError(f"{where}: expected a JSON object")
    if q is not None and set(doc) - _PLANE_KEYS:
        raise InputError(f"{where}: unknown field {sorted(set(doc) - _PLANE_KEYS)[0]!r}")
    name = doc.get("name", "plane0" if q is None else f"plane{q}")
    if "pods" in doc:
        if "spines" in doc or "leaves" in doc:
            raise InputError(f"{where}: give 'pods' (three tiers) or 'spines' and 'leaves' "
                             "(two tiers), not both")
        pods_doc = doc["pods"]
        if not isinstance(pods_doc, Mapping) or not pods_doc:
            raise InputError(f"{where}: 'pods' must map pod names to {{leaves, aggs}}")
        leaves, pod_of, aggs = [], [], []
        for k, (pod, body) in enumerate(pods_doc.items()):
            if not isinstance(body, Mapping) or set(body) != {"leaves", "aggs"}:
                raise InputError(f"{where}: pod {pod} needs exactly 'leaves' and 'aggs'")
            ls = name_list(body["leaves"], f"leaves of pod {pod}", where)
            aggs.append(name_list(body["aggs"], f"aggs of pod {pod}", where))
            leaves += ls
            pod_of += [k] * len(ls)
        cores = doc.get("cores", [])
        if not isinstance(cores, list) or not all(isinstance(g, list) for g in cores):
            raise InputError(f"{where}: 'cores' must be a list of core groups (lists of names)")
        cores = [name_list(g, f"core group {g_i}", where) for g_i, g in enumerate(cores)]
        plane = Plane(name, list(pods_doc), leaves, pod_of, aggs, cores)
        _check_tiers(plane, where)
        return plane
    for key in ("spines", "leaves"):
        if key not in doc:
            raise InputError(f"{where}: missing field '{key}'")
    if "cores" in doc:
        raise InputError(f"{where}: 'cores' needs 'pods' (a two-tier plane has no cores)")
    spines = name_list(doc["spines"], "spines", where)
    leaves = name_list(doc["leaves"], "leaves", where)
    return Plane(name, ["pod"], leaves, [0] * len(leaves), [spines])


def _check_tiers(plane: Plane, where: str) -> None:
    width = {len(a) for a in plane.aggs}
    if len(plane.pods) > 1 and not plane.cores:
        raise InputError(f"{where}: pods {plane.pods[0]} and {plane.pods[1]} are not connected "
                         "(no 'cores')")
    if plane.cores:
        if len(plane.cores) != max(width):
            raise InputError(f"{where}: {len(plane.cores)} core groups for {max(width)} "
                             "aggregation switches per pod (group g attaches to the g-th "
                             "aggregation switch of every pod)")
        for pod, aggs in zip(plane.pods, plane.aggs):
            if len(aggs) < len(plane.cores):
                raise InputError(f"{where}: core group {len(aggs)} does not reach pod {pod} "
                                 f"(it has {len(aggs)} aggregation switches)")


def _hosts(doc: Mapping, planes: list[Plane], names: dict) -> dict[str, tuple[str, ...]]:
    hosts = doc.get("hosts")
    if not isinstance(hosts, Mapping):
        raise InputError("fabric: 'hosts' must map host names to a leaf (one per plane)")
    leaf_sets = [set(p.leaves) for p in planes]
    out = {}
    for h, where in hosts.items():
        if not isinstance(h, str) or not h:
            raise InputError("fabric: host names must be non-empty strings")
        if h in names:
            raise InputError(f"fabric: host name {h} is also a switch name")
        ls = [where] if isinstance(where, str) else where
        if not isinstance(ls, list) or len(ls) != len(planes):
            raise InputError(f"fabric: host {h} needs one leaf in each of the {len(planes)} "
                             f"planes, got {where!r}")
        for q, leaf in enumerate(ls):
            if leaf not in leaf_sets[q]:
                on = f" of plane {planes[q].name}" if len(planes) > 1 else ""
                raise InputError(f"fabric: host {h} is attached to unknown leaf {leaf!r}{on}")
        out[h] = tuple(ls)
    return out

