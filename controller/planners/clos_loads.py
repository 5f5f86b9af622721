"""Link loads while a Clos routing is built: what every path planner on ``model.clospaths``
shares (the greedy, the tier colouring's member choice, the local search).

A load is flows per unit of capacity; a dead link (and the sentinel id of a missing bundle
member) has an infinite load, so no option through it is ever cheapest. The cost of a middle
is the load its busiest hop would have with the flow added, each hop taking its least loaded
alive member: the greedy's rule of Cohen et al. (each flow on the path whose busiest link is
least loaded), with bundles and capacities. Host links count when a flow can choose a plane.
A flow pinned to a plane (``ClosProblem.pin``) costs inf in every other plane.

Every hop cell (a leaf's slot or a pod's core, up or down: ``clospaths.Cells``) keeps its
least loaded member's load plus one flow, refreshed when a flow is added or removed, so a
flow's costs in a plane are two or three element-wise maxima over the plane's middles and
one argmin, with the same floating-point values as taking the minimum over the members on
every query (the greedy's choices are unchanged).

Cost: building O(links) copies of the empty loads kept per fabric (``_Empty``), plus
O(F x hops) numpy for a routing's flows; a flow's best option O(P x middles) numpy, a few calls per plane;
adding a flow O(hops x members).
"""
from __future__ import annotations

from itertools import chain

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting, link_loads


class ClosLoads:
    def __init__(self, problem: ClosProblem, routing: ClosRouting | None = None):
        self.problem = problem
        L = problem.links
        empty = L.table("empty loads", _Empty)  # once per fabric, copied (O(links) memcpy)
        self.load = empty.load.copy()
        self.step, self.step_l = empty.step, empty.step_l  # a flow's load per link (read-only)
        self.planes = len(problem.fabric.planes)
        cells = L.cells()
        self.cells = cells
        self.members = cells.members
        self.single = cells.width == 1  # no bundles: a cell's member is its only link
        self.member0, self.cell_of = empty.member0, empty.cell_of
        self.groups = L.group_of_core
        self.views: list[tuple] = []  # per plane u1, d1 (leaves, slots, 1), u2, d2, even
        self.cost = empty.cost.copy()
        for q in range(self.planes):
            (A, C), base = cells.shape[q], cells.base[q]
            leaves, pods = L.up1[q].shape[0], L.up2[q].shape[0]
            g = self.groups[q]
            even = C > 0 and C % A == 0 and np.array_equal(g, np.repeat(np.arange(A), C // A))
            core = (pods, A, C // A) if even else (pods, C)  # cores by group when even
            sizes = (leaves * A, leaves * A, pods * C, pods * C)
            shapes = ((leaves, A, 1), (leaves, A, 1), core, core)
            v = tuple(self.cost[b:b + n].reshape(s) for b, n, s in zip(base, sizes, shapes))
            self.views.append((*v, even))
        if routing is not None:
            self.add_routing(routing)
            self.load_l = self.load.tolist()  # the same values, for scalar updates
        else:
            self.load_l = empty.load_l.copy()
        self.ends = [problem.end_lists(q) for q in range(self.planes)]
        self.pin = None if problem.pin is None else problem.pin.tolist()  # -1: free
        if self.planes > 1:
            self.host_up, self.host_down = empty.host_up, empty.host_down

    def _refresh(self, rows: np.ndarray) -> None:
        m = self.members[rows]
        self.cost[rows] = (self.load[m] + self.step[m]).min(axis=1)

    def add_routing(self, r: ClosRouting) -> None:
        """Add every placed flow of ``r`` at once: the same sums as adding them one by one
        (every addition to a link adds its step), O(F x hops) numpy."""
        ids = np.fromiter(chain.from_iterable(r.path), dtype=np.int64)
        if self.planes > 1:  # and the host links of the placed flows' planes
            p, L = self.problem, self.problem.links
            placed = np.flatnonzero(np.fromiter(map(len, r.path), dtype=np.int64, count=len(r.path)))
            plane = np.asarray(r.plane, dtype=np.int64)[placed]
            ids = np.concatenate([ids, L.host_up[plane, np.asarray(p.src, dtype=np.int64)[placed]],
                                  L.host_down[plane, np.asarray(p.dst, dtype=np.int64)[placed]]])
        np.add.at(self.load, ids, self.step[ids])
        self._refresh(np.arange(len(self.members)))

    def plane_costs(self, i: int, q: int, hosts: bool = True) -> np.ndarray:
        """Cost per middle of flow i in plane q (host links included with several planes);
        flat index = middle (shaped (slots, 1) inside a pod, (slots, cores per group)
        between pods when groups are even)."""
        u1, d1, u2, d2, even = self.views[q]
        a, b, p, r = self.ends[q][i]
        s = np.maximum(u1[a], d1[b])
        if p == r:
            cost = s
        elif even:
            cost = np.maximum(u2[p], d2[r])
            np.maximum(cost, s, out=cost)
        else:
            cost = np.maximum(np.maximum(u2[p], d2[r]), s.ravel()[self.groups[q]])
        if hosts and self.planes > 1:
            cost = np.maximum(cost, self.host_cost(i, q))
        if self.pin is not None and self.pin[i] not in (-1, q):
            return np.full(cost.shape, np.inf)  # pinned to another plane: no option here
        return cost

    def host_cost(self, i: int, q: int) -> float:
        """The busier of flow i's two host links in plane q, once the flow is on them."""
        up, down = self.host_up[q][self.problem.src[i]], self.host_down[q][self.problem.dst[i]]
        return max(self.load[up] + self.step[up], self.load[down] + self.step[down])

    def costs(self, i: int, q: int) -> tuple[np.ndarray, list[np.ndarray]]:
        """(cost per middle, per hop the member ids with -1 replaced by the sentinel)."""
        hops, _ = self.problem.options(i, q)
        return self.plane_costs(i, q).ravel(), [self.problem.links.sentinel(h) for h in hops]

    def best(self, i: int, hosts: bool = True) -> tuple[float, int, int, tuple[int, ...]]:
        """(cost, plane, middle, members) of flow i's cheapest option: with several planes
        its busiest link host links included, then its busiest fabric link (the objective:
        when a host link is the busiest of every option, the fabric decides, not the first
        middle), then lowest plane and middle; cost inf when it has none. ``hosts=False``:
        fabric links only, host links ignored. A pinned flow has its plane only."""
        best, bq, bm = (np.inf, np.inf), -1, -1
        pin = -1 if self.pin is None else self.pin[i]
        for q in (range(self.planes) if pin < 0 else (pin,)):
            fab = self.plane_costs(i, q, hosts=False)
            m = int(fab.argmin())
            f = fab.item(m)
            key = (max(f, self.host_cost(i, q)) if hosts and self.planes > 1 else f, f)
            if key < best:
                best, bq, bm = key, q, m
        if bq < 0:
            return np.inf, -1, -1, ()
        return best[0], bq, bm, self.pick(i, bq, bm)

    def rows(self, i: int, q: int, m: int) -> tuple[int, ...]:
        """The cells of flow i's hops over middle m in plane q, in path order."""
        a, b, p, r = self.ends[q][i]
        (A, C), (bu1, bd1, bu2, bd2) = self.cells.shape[q], self.cells.base[q]
        if p == r:
            return bu1 + a * A + m, bd1 + b * A + m
        g = int(self.groups[q][m])
        return bu1 + a * A + g, bu2 + p * C + m, bd2 + r * C + m, bd1 + b * A + g

    def pick(self, i: int, q: int, m: int) -> tuple[int, ...]:
        """The least loaded member of every hop of middle m (lowest member on ties)."""
        rows = self.rows(i, q, m)
        if self.single:
            return tuple(self.member0[c] for c in rows)
        ids = self.members[list(rows)]
        return tuple(ids[np.arange(len(rows)), (self.load[ids] + self.step[ids]).argmin(axis=1)]
                     .tolist())

    def members_of(self, ids: list[np.ndarray], m: int) -> tuple[int, ...]:
        """The least loaded member of every hop of middle m given as member-id arrays."""
        return tuple(int(h[m][np.argmin(self.load[h[m]] + self.step[h[m]])]) for h in ids)

    def add(self, i: int, q: int, path: tuple[int, ...], sign: float = 1.0) -> None:
        ids = list(path)
        if self.planes > 1:
            ids += self.problem.host_links(i, q)
        load, load_l, step, cost, cell_of = self.load, self.load_l, self.step_l, self.cost, self.cell_of
        for x in ids:
            v = load_l[x] + sign * step[x]
            load_l[x] = v
            load[x] = v
            if self.single and cell_of[x] >= 0:
                cost[cell_of[x]] = v + step[x]
        if not self.single:
            rows = [cell_of[x] for x in ids if cell_of[x] >= 0]
            self._refresh(np.asarray(rows, dtype=np.int64))

    def fabric_max(self) -> float:
        L = self.problem.links
        fab = self.load[:L.count][(L.tier > 0) & L.alive[:L.count]]
        return float(fab.max()) if fab.size else 0.0


class _Empty:
    """The loads of an empty routing and the tables every ``ClosLoads`` reads as lists, once
    per fabric (``ClosLinks.table``): a planner's loads start as copies."""

    def __init__(self, L):
        cells = L.cells()
        self.load = np.zeros(L.count + 1)
        self.load[~L.alive] = np.inf
        self.step = np.append(1.0 / L.units, 1.0)
        m = cells.members
        self.cost = (self.load[m] + self.step[m]).min(axis=1)
        for a in (self.load, self.step, self.cost):
            a.flags.writeable = False
        self.load_l, self.step_l = self.load.tolist(), self.step.tolist()
        self.member0, self.cell_of = cells.members[:, 0].tolist(), cells.cell_of.tolist()
        self.host_up, self.host_down = L.host_up.tolist(), L.host_down.tolist()


def hop_rows(problem: ClosProblem, q: int, idx: np.ndarray, middle: np.ndarray) -> np.ndarray:
    """The cells of flows ``idx`` over middles ``middle`` in plane q, in path order: (F, 4)
    rows, up1, up2, down2, down1; a flow inside a pod has -1 in columns 1 and 2."""
    cells, groups = problem.links.cells(), problem.links.group_of_core[q]
    a, b, p, r = (e[idx] for e in problem.end_arrays(q))
    (A, C), (bu1, bd1, bu2, bd2) = cells.shape[q], cells.base[q]
    inter = p != r
    g = np.array(middle, dtype=np.int64)
    g[inter] = groups[g[inter]]
    rows = np.full((len(idx), 4), -1, dtype=np.int64)
    rows[:, 0], rows[:, 3] = bu1 + a * A + g, bd1 + b * A + g
    rows[inter, 1] = bu2 + p[inter] * C + middle[inter]
    rows[inter, 2] = bd2 + r[inter] * C + middle[inter]
    return rows


def paths_of(ids: np.ndarray) -> list[tuple[int, ...]]:
    """Member ids (F, 4) as path tuples, the two missing hops of a flow inside a pod dropped:
    the columns zipped, a loop over the flows inside a pod only."""
    cols = ids.T.tolist()
    out = list(zip(*cols))
    up, down = cols[0], cols[3]
    for i in np.flatnonzero(ids[:, 1] < 0).tolist():
        out[i] = (up[i], down[i])
    return out


def empty_routing(n: int, info: dict | None = None) -> ClosRouting:
    return ClosRouting([-1] * n, [-1] * n, [()] * n, info or {})


def group_order(problem: ClosProblem) -> list[int]:
    """Flows in the paper's greedy order (``planners.greedy.group_order``): groups of one
    source leaf (or one destination leaf), largest first, source groups before destination
    groups, then leaf id; input order within a group. O(F log F) numpy."""
    n = len(problem)
    if not n:
        return []
    L = problem.links
    P = len(problem.fabric.planes)
    sizes = [len(at) for at in L.leaf_at]
    codes = []
    for side in (problem.src, problem.dst):  # a leaf tuple as one mixed-radix number
        hosts = np.asarray(side, dtype=np.int64)
        code = np.zeros(n, dtype=np.int64)
        for q in range(P):
            code = code * sizes[q] + L.host_leaf[q][hosts]
        codes.append(code)
    span = int(np.prod(sizes, dtype=np.int64))
    key = np.concatenate([codes[0], span + codes[1]])  # source groups before destination
    uniq, gid, count = np.unique(key, return_inverse=True, return_counts=True)
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[np.lexsort((uniq, -count))] = np.arange(len(uniq))
    flow = np.concatenate([np.arange(n), np.arange(n)])
    seq = flow[np.lexsort((flow, rank[gid.ravel()]))]
    _, first = np.unique(seq, return_index=True)
    return seq[np.sort(first)].tolist()


def score(problem: ClosProblem, r: ClosRouting) -> tuple[float, int]:
    """(max load on the fabric links, links within 1e-9 of it): smaller is better."""
    loads = link_loads(problem, r)
    fab = loads[problem.links.tier > 0]
    alpha = float(fab.max()) if fab.size else 0.0
    return round(alpha, 9), int(np.count_nonzero(fab >= alpha - 1e-9)) if alpha > 0 else 0
