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

Everything per flow is numpy over flows: ``ClosProblem.build`` computes every flow's ends per
plane (source and destination leaf and pod) once, and checks routability against tables
computed once per fabric (``ClosLinks.ok``: per leaf slot and pod core whether some member is
alive; ``pair_slot_ok``: per pod pair and slot whether some core of the group is usable).

Cost: links O(links) numpy, once per fabric object (``ClosLinks.of``, with the tables they
keep); build O(F x planes x slots) numpy after one pass over the flows (``pair_slot_ok``
O(pods^2 x cores) once); ``lower_bound`` O(F + leaves); ``link_loads`` O(F + links); a
flow's options (``options``, for loops over single flows) O(middles x members).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from controller.errors import ConflictError, InputError
from controller.model.clos import TIERS, Clos
from controller.model.jobs import Flow, Job


class ClosLinks:
    """Link ids, capacities and liveness of a fabric, and per plane the member tables of its
    four hop kinds: ``up1``/``down1`` (leaf, slot, member) and ``up2``/``down2`` (pod, core,
    member), -1 where a bundle has fewer members. Built with numpy: O(links)."""

    def __init__(self, fabric: Clos):
        self.fabric = fabric
        self.hosts = list(fabric.host_leaves)
        self.host_id = {h: i for i, h in enumerate(self.hosts)}
        P, H = len(fabric.planes), len(self.hosts)
        self.host_up = np.zeros((P, H), dtype=np.int64)
        self.host_down = np.zeros((P, H), dtype=np.int64)
        self.host_leaf = np.zeros((P, H), dtype=np.int64)  # a host's leaf index per plane
        self.leaf_at: list[dict[str, int]] = []  # per plane: leaf name -> index in the plane
        self.pod_of_leaf: list[np.ndarray] = []
        self.up1, self.down1, self.up2, self.down2 = [], [], [], []
        self.group_of_core: list[np.ndarray] = []
        self.core_names: list[list[str]] = []
        self.agg_at: dict[str, tuple[int, int, int]] = {}  # name -> (plane, pod, slot)
        self.core_at: dict[str, tuple[int, int]] = {}  # name -> (plane, core index)
        speed = fabric.link_gbps
        segments: list[tuple[int, float, int]] = []  # (links, units, tier) in id order
        n = 0
        for q, plane in enumerate(fabric.planes):
            at = {leaf: i for i, leaf in enumerate(plane.leaves)}
            self.leaf_at.append(at)
            self.pod_of_leaf.append(np.array(plane.pod_of_leaf, dtype=np.int64))
            self.host_leaf[q] = [at[fabric.host_leaves[h][q]] for h in self.hosts]
            self.host_up[q] = n + 2 * np.arange(H)
            self.host_down[q] = self.host_up[q] + 1
            n += 2 * H
            segments.append((2 * H, speed["host"] / speed["leaf"], 0))
            for p, aggs in enumerate(plane.aggs):
                for x, agg in enumerate(aggs):
                    self.agg_at[agg] = (q, p, x)
            cores = [c for g in plane.cores for c in g]
            self.core_at.update({c: (q, i) for i, c in enumerate(cores)})
            self.group_of_core.append(np.array([g for g, grp in enumerate(plane.cores)
                                                for _ in grp], dtype=np.int64))
            self.core_names.append(cores)
            b1, b2 = self._bundles(q, plane, len(cores))
            for b, tier, ups, downs in ((b1, 1, self.up1, self.down1),
                                        (b2, 2, self.up2, self.down2)):
                valid = np.arange(max(int(b.max(initial=1)), 1)) < b[..., None]
                up = np.full(valid.shape, -1, dtype=np.int64)
                count = int(valid.sum())
                up[valid] = n + 2 * np.arange(count)  # (leaf, slot, member) order, as named
                down = np.where(valid, up + 1, -1)
                ups.append(up)
                downs.append(down)
                n += 2 * count
                segments.append((2 * count, speed[TIERS[tier]] / speed["leaf"], tier))
        self.count = n
        self.units = np.repeat([u for _, u, _ in segments], [c for c, _, _ in segments])
        self.tier = np.repeat([t for _, _, t in segments],
                              [c for c, _, _ in segments]).astype(np.int8)
        self.alive = np.ones(self.count + 1, dtype=bool)
        self.alive[self.count] = False  # the sentinel id -1 stands for "no such member"
        self._fail()
        for a in (self.host_up, self.host_down, self.host_leaf, self.units, self.tier, self.alive,
                  *self.pod_of_leaf, *self.up1, *self.down1, *self.up2, *self.down2, *self.group_of_core):
            a.flags.writeable = False  # shared by every problem on the fabric (``of``)
        self._names: list[str] | None = None
        self._tables: dict = {}

    @classmethod
    def of(cls, fabric: Clos) -> ClosLinks:
        """The links of ``fabric`` and the tables they keep, once per fabric object (``derived``;
        again if its failures, bundles or speeds were set since): a problem costs O(F)."""
        kept = fabric.derived("clos_links", lambda _: {})
        key = (frozenset(fabric.down), frozenset(fabric.down_switches),
               frozenset(fabric.bundles.items()), tuple(sorted(fabric.bundle_default.items())),
               tuple(sorted(fabric.link_gbps.items())))
        if kept.get("key") != key:
            kept.update(key=key, links=cls(fabric))
        return kept["links"]

    def _bundles(self, q: int, plane, cores: int) -> tuple[np.ndarray, np.ndarray]:
        """Links per (leaf, slot) and per (pod, core) of plane q (0: no such pair)."""
        f = self.fabric
        width = max(len(a) for a in plane.aggs)  # equal in every pod of a three-tier plane
        b1 = np.zeros((len(plane.leaves), width), dtype=np.int64)
        for p, aggs in enumerate(plane.aggs):
            b1[self.pod_of_leaf[q] == p, :len(aggs)] = f.bundle_default["leaf"]
        b2 = np.full((len(plane.pods), cores), f.bundle_default["core"], dtype=np.int64)
        for (lo, up), count in f.bundles.items():
            if f.plane_of.get(lo) != q:
                continue
            if f.tier_of[lo] == 0:
                b1[self.leaf_at[q][lo], self.agg_at[up][2]] = count
            else:
                b2[self.agg_at[lo][1], self.core_at[up][1]] = count
        return b1, b2

    def _fail(self) -> None:
        """Mark failed members, failed links (all members) and the links of failed switches."""
        f = self.fabric

        def kill(*arrays: np.ndarray) -> None:
            for a in arrays:
                self.alive[a[a >= 0]] = False
        for d in f.down:
            lo, up = d[:2]
            member = d[2] if len(d) == 3 else slice(None)
            if f.tier_of[lo] == 0:
                q, _, x = self.agg_at[up]
                k = self.leaf_at[q][lo]
                kill(self.up1[q][k, x, member], self.down1[q][k, x, member])
            else:
                q, p, _ = self.agg_at[lo]
                c = self.core_at[up][1]
                kill(self.up2[q][p, c, member], self.down2[q][p, c, member])
        for name in f.down_switches:
            if name in self.agg_at:
                q, p, x = self.agg_at[name]
                mine = self.pod_of_leaf[q] == p
                group = self.group_of_core[q] == x
                kill(self.up1[q][mine, x], self.down1[q][mine, x], self.up2[q][p, group],
                     self.down2[q][p, group])
            elif name in self.core_at:
                q, c = self.core_at[name]
                kill(self.up2[q][:, c], self.down2[q][:, c])
            elif f.tier_of.get(name) == 0:
                q = f.plane_of[name]
                k = self.leaf_at[q][name]
                on = self.host_leaf[q] == k
                kill(self.up1[q][k], self.down1[q][k], self.host_up[q][on], self.host_down[q][on])

    @property
    def names(self) -> list[str]:
        """Per link id ``a->b`` (``#m`` appended for member m > 0 of a bundle); built on first use."""
        if self._names is None:
            out = [""] * self.count
            f = self.fabric
            for q, plane in enumerate(f.planes):
                for i, h in enumerate(self.hosts):
                    leaf = f.host_leaves[h][q]
                    out[self.host_up[q, i]], out[self.host_down[q, i]] = f"{h}->{leaf}", f"{leaf}->{h}"
                uppers = [[plane.aggs[p] for p in plane.pod_of_leaf], None]
                lowers = [plane.leaves, None]
                uppers[1] = [self.core_names[q]] * len(plane.pods)
                lowers[1] = [[plane.aggs[p][g] for g in self.group_of_core[q]]
                             for p in range(len(plane.pods))]
                for up, down, lo, hi in ((self.up1[q], self.down1[q], lowers[0], uppers[0]),
                                         (self.up2[q], self.down2[q], lowers[1], uppers[1])):
                    for (k, x, m) in zip(*np.nonzero(up >= 0)):
                        a = lo[k] if isinstance(lo[k], str) else lo[k][x]
                        b = hi[k][x]
                        sfx = f"#{m}" if m else ""
                        out[up[k, x, m]] = f"{a}->{b}{sfx}"
                        out[down[k, x, m]] = f"{b}->{a}{sfx}"
            self._names = out
        return self._names

    @property
    def member_of(self) -> np.ndarray:
        """Per link id its member index in its bundle (0 for host links); built on first use."""
        if "member" not in self._tables:
            out = np.zeros(self.count + 1, dtype=np.int64)
            for tables in (self.up1, self.down1, self.up2, self.down2):
                for ids in tables:
                    m = np.broadcast_to(np.arange(ids.shape[-1]), ids.shape)
                    out[ids[ids >= 0]] = m[ids >= 0]
            self._tables["member"] = out
        return self._tables["member"]

    def sentinel(self, ids: np.ndarray) -> np.ndarray:
        """``ids`` with -1 (no such member) replaced by the sentinel id ``count``."""
        return np.where(ids < 0, self.count, ids)

    def capacity_bps(self) -> np.ndarray:
        """Capacity per link id in bytes per second."""
        return self.units * self.fabric.link_bps("leaf")

    # ---- tables per fabric, computed once -----------------------------------------------
    def ok(self, q: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per hop kind of plane q whether the cell (leaf, slot) or (pod, core) has an alive
        member: (up1, down1, up2, down2)."""
        return self.table(("ok", q), lambda L: tuple(L.alive[L.sentinel(h[q])].any(axis=-1)
                                                      for h in (L.up1, L.down1, L.up2, L.down2)))

    def pair_slot_ok(self, q: int) -> np.ndarray:
        """(pods, pods, slots): some core of the slot's group has alive up and down members
        from the first pod to the second. O(pods^2 x cores) once per fabric."""
        key = ("pair", q)
        if key not in self._tables:
            _, _, u2, d2 = self.ok(q)
            groups = self.group_of_core[q]
            pods, slots = u2.shape[0], self.up1[q].shape[1]
            out = np.zeros((pods, pods, slots), dtype=bool)
            if len(groups):
                starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
                both = u2[:, None, :] & d2[None, :, :]
                out[:, :, groups[starts]] = np.logical_or.reduceat(both, starts, axis=2)
            self._tables[key] = out
        return self._tables[key]

    def uplink_members(self) -> tuple[np.ndarray, np.ndarray]:
        """Per switch with uplinks (plane by plane its leaves, then its aggregation switches
        pod by pod, slot by slot) the link ids of its uplinks' members, in ``Clos.neighbours``
        order, and of the members of the links back down to it: two (switches, uplinks,
        members) arrays, -1 where a switch has fewer uplinks or a bundle fewer members. What
        imbalance is over (``loads.clos_plan_imbalance``); computed once."""
        if "uplinks" not in self._tables:
            ups, downs = [], []
            for q, plane in enumerate(self.fabric.planes):
                ups += list(self.up1[q])
                downs += list(self.down1[q])
                g = self.group_of_core[q]
                for p in range(len(plane.pods) if plane.cores else 0):
                    for x in range(len(plane.cores)):
                        ups.append(self.up2[q][p, g == x])
                        downs.append(self.down2[q][p, g == x])
            shape = (len(ups), max(a.shape[0] for a in ups), max(a.shape[1] for a in ups))
            out = []
            for arrays in (ups, downs):
                ids = np.full(shape, -1, dtype=np.int64)
                for i, a in enumerate(arrays):
                    ids[i, :a.shape[0], :a.shape[1]] = a
                out.append(ids)
            self._tables["uplinks"] = tuple(out)
        return self._tables["uplinks"]

    def cut_tables(self) -> list[tuple[np.ndarray, np.ndarray, tuple, float]]:
        """Per cut of ``lower_bound`` (leaves; pods where every plane has cores): the host's
        leaf (pod) per plane (planes, hosts), its group (one key), the alive members out of
        and into every group, the tier's units (one speed per tier). Computed once."""
        if "cuts" not in self._tables:
            f, out = self.fabric, []
            tiers = [(1, self.host_leaf)]
            if f.tiers == 3 and all(p.cores for p in f.planes):  # no cores: no pod cut
                tiers.append((2, np.stack([self.pod_of_leaf[q][self.host_leaf[q]]
                                           for q in range(len(f.planes))])))
            for tier, key in tiers:
                groups, gid = np.unique(key.T, axis=0, return_inverse=True)
                alive = []
                for tables in ((self.up1, self.down1) if tier == 1 else (self.up2, self.down2)):
                    n = np.zeros(len(groups), dtype=np.int64)
                    for q, arr in enumerate(tables):
                        ids = arr.reshape(arr.shape[0], -1)[groups[:, q]]
                        n += ((ids >= 0) & self.alive[self.sentinel(ids)]).sum(axis=1)
                    alive.append(n)
                unit = f.link_gbps[TIERS[tier]] / f.link_gbps["leaf"]
                out.append((key, gid.ravel(), tuple(alive), unit))
            self._tables["cuts"] = out
        return self._tables["cuts"]

    def cells(self) -> Cells:
        """The hop cells of every plane in one table (``Cells``), computed once."""
        return self.table("cells", Cells)

    def table(self, key, build):
        """``build(self)``, once per links object (per fabric: ``of``): the planners' tables."""
        if key not in self._tables:
            self._tables[key] = build(self)
        return self._tables[key]


class Cells:
    """Every hop cell (a leaf's slot or a pod's core, up or down, per plane) as one row of
    ``members`` (link ids, the sentinel where a bundle has fewer members), so the planners
    keep one value per cell (its least loaded member's load) and a flow's cost is a few
    gathers. ``base[q]`` is the first row of plane q's up1, down1, up2, down2 blocks (rows in
    (leaf, slot) and (pod, core) order); ``cell_of`` maps a link id to its row (-1: host link).
    """

    def __init__(self, links: ClosLinks):
        blocks, self.base, self.shape = [], [], []
        width = max([h.shape[-1] for hs in (links.up1, links.up2) for h in hs] or [1])
        row = 0
        for q in range(len(links.fabric.planes)):
            bases = []
            for h in (links.up1[q], links.down1[q], links.up2[q], links.down2[q]):
                flat = h.reshape(-1, h.shape[-1])
                pad = np.full((flat.shape[0], width), -1, dtype=np.int64)
                pad[:, :flat.shape[1]] = flat
                blocks.append(pad)
                bases.append(row)
                row += flat.shape[0]
            self.base.append(tuple(bases))
            self.shape.append((links.up1[q].shape[1], links.up2[q].shape[1]))  # (slots, cores)
        members = np.concatenate(blocks) if blocks else np.zeros((0, width), dtype=np.int64)
        self.members = links.sentinel(members)
        self.width = width
        self.cell_of = np.full(links.count + 1, -1, dtype=np.int64)
        rows = np.repeat(np.arange(len(members)), width)
        flat = members.ravel()
        self.cell_of[flat[flat >= 0]] = rows[flat >= 0]


@dataclass
class ClosProblem:
    """The inter-leaf flows of ``jobs`` with what their options depend on, per plane:
    source and destination leaf (plane index) and pods (``end_arrays``, numpy over flows)."""
    fabric: Clos
    links: ClosLinks
    jobs: list[Job]
    flows: list[Flow]
    inter: list[int]  # positions in ``flows`` of the flows that leave their leaf
    src: list[int] = field(default_factory=list)  # host ids
    dst: list[int] = field(default_factory=list)
    intra: dict[int, int] = field(default_factory=dict)  # position -> plane where both share a leaf
    unroutable: list[int] = field(default_factory=list)
    # per flow (``inter`` order) the plane it must stay in, -1: free; None: no flow pinned
    pin: np.ndarray | None = None
    unpinned: list[int] = field(default_factory=list)  # positions whose pin was dropped
    _ends: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def build(cls, fabric: Clos, jobs: list[Job], skip_unroutable: bool = False,
              links: ClosLinks | None = None, pins=None) -> ClosProblem:
        """O(F x planes) numpy after one pass over the flows; routability from the per-fabric
        tables of ``ClosLinks`` (no per-flow option arrays).

        ``pins``: per flow (``flows`` order) the plane it must stay in, -1 free: a running
        connection is bound to its plane's addresses. A pin to a plane where the flow has no
        alive path is dropped (moving is the only way to keep it routed): ``unpinned``."""
        links = links or ClosLinks.of(fabric)
        flows = [f for job in jobs for f in job.flows()]
        hid = links.host_id
        try:
            ends = np.array([[hid[f.src] for f in flows], [hid[f.dst] for f in flows]],
                            dtype=np.int64).T  # (F, 2), two lists: no tuple per flow
        except KeyError:
            for f in flows:
                fabric.leaf_of(f.src), fabric.leaf_of(f.dst)  # names the first unknown host
            raise
        same = links.host_leaf[:, ends[:, 0]] == links.host_leaf[:, ends[:, 1]]  # (P, F)
        shared = same.any(axis=0)
        prob = cls(fabric, links, list(jobs), flows, [])
        prob.intra = dict(zip(np.flatnonzero(shared).tolist(),
                              same[:, shared].argmax(axis=0).tolist()))
        keep = np.flatnonzero(~shared)
        prob.inter, prob.src, prob.dst = (keep.tolist(), ends[keep, 0].tolist(),
                                          ends[keep, 1].tolist())
        usable = np.stack([prob.usable_any(q) for q in range(len(fabric.planes))])
        routable = usable.any(axis=0)
        if pins is not None:
            pin = prob._pins(pins, len(flows))[keep]
            drop = (pin >= 0) & routable & ~usable[pin.clip(0), np.arange(len(keep))]
            prob.unpinned = keep[drop].tolist()
            pin[drop] = -1
            prob.pin = pin if (pin >= 0).any() else None
        bad = np.flatnonzero(~routable)
        if len(bad) and not skip_unroutable:
            f = flows[prob.inter[bad[0]]]
            raise ConflictError(f"no alive path from {f.src} to {f.dst} (job {f.job}; leaves "
                                f"{' / '.join(fabric.host_leaves[f.src])} and "
                                f"{' / '.join(fabric.host_leaves[f.dst])})")
        if len(bad):
            prob.keep_only(np.flatnonzero(routable).tolist())
        return prob

    def keep_only(self, keep: list[int]) -> None:
        """Keep the inter-leaf flows at ``keep`` (ascending indices into ``inter``); the others
        join ``unroutable``. Pins follow, and the ends cached per plane (``end_arrays``) are
        recomputed from the flows kept."""
        kept = set(keep)
        dropped = [pos for i, pos in enumerate(self.inter) if i not in kept]
        self.unroutable = sorted(set(self.unroutable) | set(dropped))
        self.inter = [self.inter[i] for i in keep]
        self.src = [self.src[i] for i in keep]
        self.dst = [self.dst[i] for i in keep]
        self.pin = None if self.pin is None else self.pin[np.asarray(keep, dtype=np.int64)]
        self._ends.clear()

    def _pins(self, pins, n: int) -> np.ndarray:
        """``pins`` as an int64 array over the flows, checked."""
        pin = np.asarray(pins, dtype=np.int64).reshape(-1)
        if len(pin) != n or ((pin < -1) | (pin >= len(self.fabric.planes))).any():
            raise InputError(f"pins: expected {n} planes in -1..{len(self.fabric.planes) - 1}")
        return pin

    def open_in(self, q: int, idx: np.ndarray | None = None) -> np.ndarray:
        """Per flow (all, or ``idx``) whether plane q is open to it: free, or pinned to q."""
        n = len(self) if idx is None else len(idx)
        if self.pin is None:
            return np.ones(n, dtype=bool)
        pin = self.pin if idx is None else self.pin[idx]
        return (pin < 0) | (pin == q)

    def pinned_elsewhere(self, i: int, q: int) -> bool:
        """Flow i is pinned to a plane other than q (a scalar test for loops over flows)."""
        return self.pin is not None and int(self.pin[i]) not in (-1, q)

    def __len__(self) -> int:
        return len(self.inter)

    def end_arrays(self, q: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(source leaf, destination leaf, source pod, destination pod) of every flow in plane
        q, as arrays over flows; computed once (from ``src`` and ``dst``)."""
        if q not in self._ends:
            L = self.links
            a = L.host_leaf[q][np.asarray(self.src, dtype=np.int64)]
            b = L.host_leaf[q][np.asarray(self.dst, dtype=np.int64)]
            self._ends[q] = (a, b, L.pod_of_leaf[q][a], L.pod_of_leaf[q][b])
        return self._ends[q]

    def end_lists(self, q: int) -> list[tuple[int, int, int, int]]:
        """``end_arrays(q)`` as one tuple per flow, for loops over flows."""
        key = ("lists", q)
        if key not in self._ends:
            self._ends[key] = list(zip(*(e.tolist() for e in self.end_arrays(q))))
        return self._ends[key]

    def ends(self, i: int, q: int) -> tuple[int, int, int, int]:
        """(source leaf, destination leaf, source pod, destination pod) of flow i in plane q."""
        return self.end_lists(q)[i]

    def usable_any(self, q: int, idx: np.ndarray | None = None) -> np.ndarray:
        """Per flow (all, or ``idx``) whether it has a usable middle in plane q."""
        a, b, p, r = (e if idx is None else e[idx] for e in self.end_arrays(q))
        u1, d1, _, _ = self.links.ok(q)
        slot = u1[a] & d1[b]  # (F, slots)
        inter = p != r
        if inter.any():
            slot[inter] &= self.links.pair_slot_ok(q)[p[inter], r[inter]]
        out = slot.any(axis=1)
        return out if self.pin is None else out & self.open_in(q, idx)

    def usable_at(self, q: int, idx: np.ndarray, middle: np.ndarray) -> np.ndarray:
        """Whether middle ``middle[j]`` is usable in plane q for flow ``idx[j]``."""
        a, b, p, r = (e[idx] for e in self.end_arrays(q))
        u1, d1, u2, d2 = self.links.ok(q)
        inter = p != r
        g = np.array(middle, dtype=np.int64)
        g[inter] = self.links.group_of_core[q][g[inter]]
        out = u1[a, g] & d1[b, g]
        if inter.any():
            m = middle[inter]
            out[inter] &= u2[p[inter], m] & d2[r[inter], m]
        return out if self.pin is None else out & self.open_in(q, idx)

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
        a, b, p, r = self.ends(i, q)
        u1, d1, u2, d2 = self.links.ok(q)
        if p == r:
            usable = u1[a] & d1[b]
        else:
            g = self.links.group_of_core[q]
            usable = (u1[a] & d1[b])[g] & u2[p] & d2[r]
        if self.pinned_elsewhere(i, q):
            usable = np.zeros_like(usable)
        return self.hops(i, q), usable

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
    """Flows per unit of capacity on every link (host links only with ``hosts``, for the
    placed flows). O(F x hops) with numpy."""
    L = problem.links
    ids = np.fromiter(chain.from_iterable(routing.path), dtype=np.int64)
    counts = np.bincount(ids, minlength=L.count).astype(float)
    if hosts:
        plane = np.asarray(routing.plane, dtype=np.int64)
        placed = np.flatnonzero(plane >= 0)
        src, dst = np.asarray(problem.src)[placed], np.asarray(problem.dst)[placed]
        counts += np.bincount(L.host_up[plane[placed], src], minlength=L.count)
        counts += np.bincount(L.host_down[plane[placed], dst], minlength=L.count)
    return counts / L.units


def lower_bound(problem: ClosProblem) -> float:
    """A bound no routing beats on the fabric links: for every group of hosts that share their
    leaf (pod) in every plane, the flows that must leave that leaf (pod) in every plane over the
    alive up capacity of those leaves (pods), and the same for arriving flows; rounded up to
    whole flows per link when the links of the cut have equal capacity (always: a cut is one
    tier, and a tier has one speed).

    Exact (met by ``clos_auto``) on full-bisection fat-trees and multi-plane leaf-spines with
    permutation traffic; elsewhere ``clos_auto`` reports its gap to it. O(F + groups) numpy
    (the groups and their alive links once per fabric: ``ClosLinks.cut_tables``).
    """
    L = problem.links
    if not len(problem):
        return 0.0
    src, dst = np.asarray(problem.src), np.asarray(problem.dst)
    best = 0.0
    for key, gid, alive, unit in L.cut_tables():
        keep = ~(key[:, src] == key[:, dst]).any(axis=0)
        for hosts, cap in ((src[keep], alive[0]), (dst[keep], alive[1])):
            n = np.bincount(gid[hosts], minlength=len(cap))
            use = (n > 0) & (cap > 0)
            if use.any():  # one speed per tier: every link of a cut has these units
                best = max(best, float((-(-n[use] // cap[use])).max() / unit))
    return best
