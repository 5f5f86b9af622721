"""Links, paths and the routing instance of a Clos fabric (``model.clos``).

Links are directed and have dense ids: per plane and host an up (host -> leaf) and a down link,
per member of every leaf-aggregation bundle an up and a down link, per member of every
aggregation-core bundle an up and a down link. A link's *units* are its capacity in links of
the leaf tier (a 400G core link next to 100G leaf links counts 4), so a load is flows per unit
and 1.0 means one flow on a leaf-tier link.

A flow's route is its plane, its *middle* (the aggregation slot for leaves of one pod, the core
for leaves of different pods) and one member per hop. ``hops(...)`` gives, per hop of every
middle of a plane, the member link ids as arrays (-1: no such member), which is what the
planners vectorise over. Failed links and the links of failed switches are not *alive*: a
route never uses them and a middle none of whose members is alive at some hop is not usable.

Cost: building O(links); a flow's options O(middles x members) with numpy.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from controller.errors import ConflictError
from controller.model.clos import Clos
from controller.model.jobs import Flow, Job


class ClosLinks:
    def __init__(self, fabric: Clos):
        self.fabric = fabric
        self.hosts = list(fabric.host_leaves)
        self.host_id = {h: i for i, h in enumerate(self.hosts)}
        names: list[str] = []
        units: list[float] = []
        tiers: list[int] = []
        base = fabric.link_gbps["leaf"]

        def new(name: str, tier: str) -> int:
            names.append(name)
            units.append(fabric.link_gbps[tier] / base)
            tiers.append(("host", "leaf", "core").index(tier))
            return len(names) - 1

        P = len(fabric.planes)
        self.host_up = np.zeros((P, len(self.hosts)), dtype=np.int64)
        self.host_down = np.zeros((P, len(self.hosts)), dtype=np.int64)
        self.leaf_at: list[dict[str, int]] = []  # per plane: leaf name -> index in the plane
        self.up1, self.down1, self.up2, self.down2 = [], [], [], []
        self.group_of_core: list[np.ndarray] = []
        self.core_names: list[list[str]] = []
        for q, plane in enumerate(fabric.planes):
            self.leaf_at.append({l: i for i, l in enumerate(plane.leaves)})
            for i, h in enumerate(self.hosts):
                leaf = fabric.host_leaves[h][q]
                self.host_up[q, i] = new(f"{h}->{leaf}", "host")
                self.host_down[q, i] = new(f"{leaf}->{h}", "host")
            A = max(len(a) for a in plane.aggs)  # equal in every pod of a three-tier plane
            m1 = max([fabric.bundle(l, a) for k, l in enumerate(plane.leaves)
                      for a in plane.aggs[plane.pod_of_leaf[k]]] or [1])
            up1 = np.full((len(plane.leaves), A, m1), -1, dtype=np.int64)
            down1 = np.full_like(up1, -1)
            for k, leaf in enumerate(plane.leaves):
                for x, agg in enumerate(plane.aggs[plane.pod_of_leaf[k]]):
                    for m in range(fabric.bundle(leaf, agg)):
                        up1[k, x, m] = new(f"{leaf}->{agg}" + (f"#{m}" if m else ""), "leaf")
                        down1[k, x, m] = new(f"{agg}->{leaf}" + (f"#{m}" if m else ""), "leaf")
            cores = [c for g in plane.cores for c in g]
            groups = np.array([g for g, grp in enumerate(plane.cores) for _ in grp], dtype=np.int64)
            m2 = max([fabric.bundle(plane.aggs[p][groups[c]], core) for p in range(len(plane.pods))
                      for c, core in enumerate(cores)] or [1])
            up2 = np.full((len(plane.pods), len(cores), m2), -1, dtype=np.int64)
            down2 = np.full_like(up2, -1)
            for p in range(len(plane.pods)):
                for c, core in enumerate(cores):
                    agg = plane.aggs[p][groups[c]]
                    for m in range(fabric.bundle(agg, core)):
                        up2[p, c, m] = new(f"{agg}->{core}" + (f"#{m}" if m else ""), "core")
                        down2[p, c, m] = new(f"{core}->{agg}" + (f"#{m}" if m else ""), "core")
            self.up1.append(up1)
            self.down1.append(down1)
            self.up2.append(up2)
            self.down2.append(down2)
            self.group_of_core.append(groups)
            self.core_names.append(cores)
        self.names = names
        self.count = len(names)
        self.units = np.array(units)
        self.tier = np.array(tiers, dtype=np.int8)
        self.alive = np.ones(self.count + 1, dtype=bool)
        self.alive[self.count] = False  # the sentinel id -1 stands for "no such member"
        self._fail()

    def _fail(self) -> None:
        """Mark failed members, failed links (all members) and the links of failed switches."""
        f = self.fabric
        dead_pairs = {d[:2] for d in f.down if len(d) == 2}
        dead_members = {d for d in f.down if len(d) == 3}
        for i, name in enumerate(self.names):
            a, rest = name.split("->")
            b, _, m = rest.partition("#")
            member = int(m) if m else 0
            lo, up = (a, b) if f.tier_of.get(a, -1) < f.tier_of.get(b, -1) else (b, a)
            if ((lo, up) in dead_pairs or (lo, up, member) in dead_members
                    or a in f.down_switches or b in f.down_switches):
                self.alive[i] = False

    def sentinel(self, ids: np.ndarray) -> np.ndarray:
        """``ids`` with -1 (no such member) replaced by the sentinel id ``count``."""
        return np.where(ids < 0, self.count, ids)

    def capacity_bps(self) -> np.ndarray:
        """Capacity per link id in bytes per second."""
        return self.units * self.fabric.link_bps("leaf")


@dataclass
class ClosProblem:
    """The inter-leaf flows of ``jobs`` with what their options depend on, per plane:
    source and destination leaf (plane index) and pods."""
    fabric: Clos
    links: ClosLinks
    jobs: list[Job]
    flows: list[Flow]
    inter: list[int]  # positions in ``flows`` of the flows that leave their leaf
    src: list[int] = field(default_factory=list)  # host ids
    dst: list[int] = field(default_factory=list)
    intra: dict[int, int] = field(default_factory=dict)  # position -> plane where both share a leaf
    unroutable: list[int] = field(default_factory=list)

    @classmethod
    def build(cls, fabric: Clos, jobs: list[Job], skip_unroutable: bool = False,
              links: ClosLinks | None = None) -> ClosProblem:
        links = links or ClosLinks(fabric)
        flows = [f for job in jobs for f in job.flows()]
        prob = cls(fabric, links, list(jobs), flows, [])
        for k, f in enumerate(flows):
            for h in (f.src, f.dst):
                fabric.leaf_of(h)
            ls, ld = fabric.host_leaves[f.src], fabric.host_leaves[f.dst]
            same = next((q for q in range(len(ls)) if ls[q] == ld[q]), None)
            if same is not None:
                prob.intra[k] = same
                continue
            prob.inter.append(k)
            prob.src.append(links.host_id[f.src])
            prob.dst.append(links.host_id[f.dst])
        bad = [i for i in range(len(prob.inter)) if not any(
            prob.options(i, q)[1].any() for q in range(len(fabric.planes)))]
        if bad and not skip_unroutable:
            f = flows[prob.inter[bad[0]]]
            raise ConflictError(f"no alive path from {f.src} to {f.dst} (job {f.job}; leaves "
                                f"{' / '.join(fabric.host_leaves[f.src])} and "
                                f"{' / '.join(fabric.host_leaves[f.dst])})")
        if bad:
            drop = set(bad)
            prob.unroutable = [prob.inter[i] for i in bad]
            keep = [i for i in range(len(prob.inter)) if i not in drop]
            prob.inter = [prob.inter[i] for i in keep]
            prob.src = [prob.src[i] for i in keep]
            prob.dst = [prob.dst[i] for i in keep]
        return prob

    def __len__(self) -> int:
        return len(self.inter)

    def ends(self, i: int, q: int) -> tuple[int, int, int, int]:
        """(source leaf, destination leaf, source pod, destination pod) of flow i in plane q."""
        fab, at = self.fabric, self.links.leaf_at[q]
        plane = fab.planes[q]
        a = at[fab.host_leaves[self.links.hosts[self.src[i]]][q]]
        b = at[fab.host_leaves[self.links.hosts[self.dst[i]]][q]]
        return a, b, plane.pod_of_leaf[a], plane.pod_of_leaf[b]

    def hops(self, i: int, q: int) -> list[np.ndarray]:
        """Per hop of flow i in plane q an array (middles, members) of link ids (-1: none)."""
        L = self.links
        a, b, p, r = self.ends(i, q)
        if p == r:
            return [L.up1[q][a], L.down1[q][b]]
        g = L.group_of_core[q]
        return [L.up1[q][a][g], L.up2[q][p], L.down2[q][r], L.down1[q][b][g]]

    def options(self, i: int, q: int) -> tuple[list[np.ndarray], np.ndarray]:
        """(hops, usable): usable[m] when every hop of middle m has an alive member."""
        hops = self.hops(i, q)
        alive = self.links.alive
        usable = np.ones(len(hops[0]), dtype=bool)
        for h in hops:
            usable &= alive[self.links.sentinel(h)].any(axis=1)
        return hops, usable

    def host_links(self, i: int, q: int) -> tuple[int, int]:
        return int(self.links.host_up[q, self.src[i]]), int(self.links.host_down[q, self.dst[i]])

    def middle_name(self, i: int, q: int, m: int) -> list[str]:
        """The switches of flow i's route over middle m in plane q, source leaf to destination."""
        plane = self.fabric.planes[q]
        a, b, p, r = self.ends(i, q)
        if p == r:
            return [plane.leaves[a], plane.aggs[p][m], plane.leaves[b]]
        g = int(self.links.group_of_core[q][m])
        return [plane.leaves[a], plane.aggs[p][g], self.links.core_names[q][m],
                plane.aggs[r][g], plane.leaves[b]]


@dataclass
class ClosRouting:
    """Per inter-leaf flow (``ClosProblem.inter`` order) its plane, middle and member link ids
    (one per hop, fabric links only; the plane fixes the host links)."""
    plane: list[int]
    middle: list[int]
    path: list[tuple[int, ...]]
    info: dict = field(default_factory=dict)


def flow_links(problem: ClosProblem, routing: ClosRouting, i: int) -> list[int]:
    """Every link flow i crosses, host links included."""
    up, down = problem.host_links(i, routing.plane[i])
    return [up, *routing.path[i], down]


def link_loads(problem: ClosProblem, routing: ClosRouting, hosts: bool = False) -> np.ndarray:
    """Flows per unit of capacity on every link (host links only with ``hosts``)."""
    loads = np.zeros(problem.links.count)
    for i, path in enumerate(routing.path):
        ids = flow_links(problem, routing, i) if hosts else path
        np.add.at(loads, list(ids), 1.0)
    return loads / problem.links.units


def lower_bound(problem: ClosProblem) -> float:
    """A bound no routing beats on the fabric links: for every group of hosts that share their
    leaf (pod) in every plane, the flows that must leave that leaf (pod) in every plane over the
    alive up capacity of those leaves (pods), and the same for arriving flows; rounded up to
    whole flows per link when the links of the cut have equal capacity.

    Exact (met by ``clos_auto``) on full-bisection fat-trees and multi-plane leaf-spines with
    permutation traffic; elsewhere ``clos_auto`` reports its gap to it.
    """
    L = problem.links
    best = 0.0
    for tier, key in ((1, _leaf_key), (2, _pod_key)):
        out: dict[tuple, int] = {}
        inn: dict[tuple, int] = {}
        for i in range(len(problem)):
            ks = key(problem, problem.src[i])
            kd = key(problem, problem.dst[i])
            if ks is None or kd is None or any(a == b for a, b in zip(ks, kd)):
                continue
            out[ks] = out.get(ks, 0) + 1
            inn[kd] = inn.get(kd, 0) + 1
        for counts, side in ((out, "up"), (inn, "down")):
            for group, n in counts.items():
                ids = _cut(problem, tier, group, side)
                ids = ids[L.alive[ids]]
                if not len(ids):
                    continue
                u = L.units[ids]
                if np.allclose(u, u[0]):
                    best = max(best, -(-n // len(ids)) / float(u[0]))
                else:
                    best = max(best, n / float(u.sum()))
    return best


def _leaf_key(problem: ClosProblem, host: int):
    return problem.fabric.host_leaves[problem.links.hosts[host]]


def _pod_key(problem: ClosProblem, host: int):
    f = problem.fabric
    if f.tiers < 3:
        return None
    leaves = f.host_leaves[problem.links.hosts[host]]
    return tuple(p.pod_of_leaf[problem.links.leaf_at[q][leaf]] if p.cores else None
                 for q, (p, leaf) in enumerate(zip(f.planes, leaves)))


def _cut(problem: ClosProblem, tier: int, group: tuple, side: str) -> np.ndarray:
    L = problem.links
    ids = []
    for q, g in enumerate(group):
        if g is None:
            continue
        if tier == 1:
            arr = (L.up1 if side == "up" else L.down1)[q][L.leaf_at[q][g]]
        else:
            arr = (L.up2 if side == "up" else L.down2)[q][g]
        ids.append(arr[arr >= 0])
    return np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
