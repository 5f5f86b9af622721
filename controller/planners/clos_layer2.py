"""Layer 2 on any Clos fabric: with the max fabric-link load alpha fixed, fewer directed fabric
links at alpha, by ejection chains over hop cells; and the bound no routing beats.

The model is the layer-2 MILP's (``clos_ilp.clos_ilp_layer2``): a hop *cell* c (a leaf's slot
or a pod's core, up or down, per plane: ``clospaths.Cells``) with n_c alive members of u_c
units carries m_c flows; a member reaches alpha with hi_c = alpha u_c flows (lo_c = hi_c - 1;
when alpha u_c is not whole no member reaches alpha: lo_c = floor(alpha u_c)). Its members
least loaded first leave z_c = max(0, m_c - n_c lo_c) of them at alpha, the fewest m_c
allows, so the links at alpha are the sum of z_c (members rebalanced so at the end: never
worse). A cell with z_c > 0 is *hot*.

* ``fewer_at_max``: for each hot cell x, a breadth-first search for an ejection chain: flow
  f_1 leaves x for another option (plane, middle) of its own, which puts one flow too many on
  at most one cell y_1; flow f_2 leaves y_1 for another option, and so on, until a flow lands
  where every cell of its option stays at most n_c lo_c (not hot) or, if hot, keeps its m_c.
  Every cell but x and the last keeps its m_c, x loses a flow and the last stays below hot:
  the sum of z_c drops by one and no cell gains a link at alpha or any load above it, so the
  max load stays and the sorted load vector gets lexicographically smaller at every chain.
  It is the alternating path of planners.repair (Koenig's theorem on two tiers) carried to
  options of two or four cells (Glover's ejection chains). Cells of a side at its bound
  (below) are skipped: no chain can clear them.
* ``layer2_bound``: per side (the up or down cells of a group of hosts that share their leaf,
  or their pod, in every plane) every flow leaving (entering) the group crosses one of its
  cells, so n flows leave at least n - sum(n_c lo_c) of the side's links at alpha; the flows
  confined to a subset M of the side's cells (failed links confine them) give
  n(M) - sum over M, and sides of disjoint cells add up.

Exact (the MILP's optimum) where the chains meet the bound, which the caller checks
(``clos_auto``: the MILP where a gap is left on small instances). Cost: the bound
O(F x planes x middles) numpy; a chain search visits at most ``budget`` cells, each
O(flows on it x planes x middles) numpy; a target costs at most one search.

References: Cohen et al., Routing for Large ML Models (2025), the second layer; F. Glover,
Ejection chains, reference structures and alternating path methods for traveling salesman
problems, Discrete Applied Mathematics 65 (1996); D. Koenig (1916) for alternating paths.

>>> from controller.model.clos import Clos
>>> from controller.model.clospaths import ClosProblem
>>> from controller.model.jobs import parse_job
>>> from controller.planners.clos_auto import score
>>> fab = Clos.fat_tree(4)
>>> flows = [{"src": a, "dst": b, "bytes": 1, "sport": i} for i, (a, b) in  # l0 to l1, 3 flows
...          enumerate([("h0_0", "h1_0"), ("h0_1", "h1_1"), ("h0_0", "h1_1")])]
>>> p = ClosProblem.build(fab, [parse_job({"id": "j", "flows": flows}, fab)])
>>> from controller.planners.clos_loads import ClosLoads, empty_routing
>>> r, loads = empty_routing(3), ClosLoads(p)
>>> for i in range(3):  # every flow on slot 0: l0 -> a0_0 and a0_0 -> l1 carry 3
...     r.plane[i], r.middle[i], r.path[i] = 0, 0, loads.pick(i, 0, 0)
>>> layer2_bound(p, 3.0), score(p, r)
(0, (3.0, 2))
>>> better = fewer_at_max(p, r)  # both links at 3 cleared: the max drops to 2, on 2 links
>>> score(p, better), better.info["layer2"]["cleared"]
((2.0, 2), 2)
"""
from __future__ import annotations

import time
from itertools import chain

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting, link_loads
from controller.planners.clos_loads import ClosLoads, score

BUDGET = 512  # cells a chain search visits at most (the two-tier chains' 4096 links / 8)
BRANCH = 8  # options of a flow a chain search extends to at most: those with the most room
DEAD = -(1 << 40)  # exc and room of a cell without an alive member: never usable


class CellState:
    """Flows per hop cell of a routing at max load ``alpha``: ``count`` (m_c), ``exc``
    (m_c - n_c lo_c: its links at alpha when positive) and ``room`` (n_c hi_c - m_c: flows
    it may still take without a member above alpha); both ``DEAD`` for a cell without an
    alive member. ``hold`` (alpha a level below the max): a cell with a member above alpha
    counts as full at its own m_c (exc and room 0), so that a chain may pass a flow through
    it (one in, one out) but never leave it a flow more. Per-plane views of both over the
    four hop kinds serve option scans."""

    def __init__(self, problem: ClosProblem, routing: ClosRouting, alpha: float,
                 hold: bool = False):
        L = problem.links
        cells = L.cells()
        self.problem, self.routing = problem, routing
        self.soft, self.n, cap = soft_limits(problem, alpha)
        self.cell_of = cells.cell_of
        self.planes = len(problem.fabric.planes)
        sizes = np.fromiter(map(len, routing.path), dtype=np.int64, count=len(routing.path))
        flat = self.cell_of[np.fromiter(chain.from_iterable(routing.path), dtype=np.int64,
                                        count=int(sizes.sum()))]
        cut = np.r_[0, np.cumsum(sizes)].tolist()
        rows = flat.tolist()
        self.cells_of: list[tuple[int, ...]] = [tuple(rows[a:b]) for a, b in
                                                 zip(cut[:-1], cut[1:], strict=True)]
        self.count = np.bincount(flat, minlength=len(cells.members)).astype(np.int64)
        if hold:  # cells with a member above alpha keep their flows: swaps only
            above = self.count > cap
            self.soft = np.where(above, self.count, self.soft)
            cap = np.where(above, self.count, cap)
        order = np.argsort(flat, kind="stable")  # flows per cell, built once: ``flows_on``
        self._flow = np.repeat(np.arange(len(sizes)), sizes)[order]
        self._start = np.r_[0, np.cumsum(self.count)]
        self._on: dict[int, set] = {}
        self.exc = self.count - self.soft
        self.room = cap - self.count
        self.exc[self.n == 0] = DEAD
        self.room[self.n == 0] = DEAD
        self.views = []
        for q in range(self.planes):
            (A, C), base = cells.shape[q], cells.base[q]
            leaves, pods = L.up1[q].shape[0], L.up2[q].shape[0]
            shapes = ((leaves, A), (leaves, A), (pods, C), (pods, C))
            self.views.append(tuple(tuple(x[b:b + h * w].reshape(h, w) for b, (h, w)
                                          in zip(base, shapes)) for x in (self.exc, self.room))
                              + (L.group_of_core[q], (A, C), base))
        self.ends = [problem.end_lists(q) for q in range(self.planes)]
        self.pin = None if problem.pin is None else problem.pin.tolist()

    def flows_on(self, c: int) -> set:
        """The flows on cell c now (from the table built once until a move touches it)."""
        out = self._on.get(c)
        if out is None:
            out = self._on[c] = set(self._flow[self._start[c]:self._start[c + 1]].tolist())
        return out

    def hot(self) -> np.ndarray:
        """Links at alpha per cell (z_c)."""
        return np.maximum(self.exc, 0)

    def options(self, i: int, q: int):
        """Per hop of flow i's middles in plane q: (exc per middle, room per middle, cell
        row per middle), three lists of 2 (inside a pod) or 4 arrays."""
        (U1, D1, U2, D2), (R1, S1, R2, S2), G, (A, C), (bu1, bd1, bu2, bd2) = self.views[q]
        a, b, p, r = self.ends[q][i]
        if p == r:
            m = np.arange(A)
            return [U1[a], D1[b]], [R1[a], S1[b]], [bu1 + a * A + m, bd1 + b * A + m]
        m = np.arange(C)
        return ([U1[a][G], U2[p], D2[r], D1[b][G]], [R1[a][G], R2[p], S2[r], S1[b][G]],
                [bu1 + a * A + G, bu2 + p * C + m, bd2 + r * C + m, bd1 + b * A + G])

    def move(self, i: int, q: int, m: int, rows: tuple[int, ...]) -> list[int]:
        """Flow i to option (q, m) of cells ``rows``, for good; the cells whose flows
        changed."""
        old = self.cells_of[i]
        for c in old:
            self.flows_on(c).discard(i)
        for c in rows:
            self.flows_on(c).add(i)
        self.shift(old, rows)
        self.count[list(old)] -= 1
        self.count[list(rows)] += 1
        self.cells_of[i] = rows
        self.routing.plane[i], self.routing.middle[i] = q, m
        return list(old) + list(rows)

    def shift(self, old, rows, sign: int = 1) -> None:
        """One flow off cells ``old`` and onto ``rows`` (sign -1: back) in exc and room."""
        exc, room = self.exc, self.room
        for c in old:
            exc[c] -= sign
            room[c] += sign
        for c in rows:
            exc[c] += sign
            room[c] -= sign

    def apply(self, moves: list[tuple[int, int, int, tuple[int, ...]]], sign: int = 1) -> None:
        """A chain's moves (flow, plane, middle, cells) on exc and room only (sign -1 undoes
        them, in reverse order): the state the search extends a chain from."""
        for i, _, _, rows in (moves if sign > 0 else reversed(moves)):
            self.shift(self.cells_of[i], rows, sign)


def fewer_at_max(problem: ClosProblem, routing: ClosRouting, alpha: float | None = None,
                 deadline: float | None = None, budget: int = BUDGET,
                 floor: tuple | None = None, work: int | None = None,
                 hold: bool = False) -> ClosRouting:
    """Ejection chains at ``alpha`` (default: the routing's max fabric-link load) from every
    hot cell, pass after pass while one clears a link, until ``work`` search nodes in all
    (None: no bound) or ``deadline`` (time.perf_counter); a new routing (members least
    loaded first where bundles have several), the input unchanged. ``floor``:
    ``side_floors``' answer, when the caller has it. ``hold``: ``alpha`` is a level below
    the max (``fewer_below``): the cells above it keep their flows (``CellState``) and no
    side is skipped. ``info["layer2"]``: cleared (links), chains tried, nodes, stopped (done,
    work or deadline)."""
    if alpha is None:
        alpha = score(problem, routing)[0]
    r = ClosRouting(list(routing.plane), list(routing.middle), list(routing.path),
                    dict(routing.info))
    if deadline is not None and time.perf_counter() > deadline:
        r.info["layer2"] = {"cleared": 0, "chains_tried": 0, "nodes": 0, "stopped": "deadline"}
        return r
    st = CellState(problem, r, alpha, hold)
    if hold:  # the sides' bounds hold at the max only
        floor = (np.full(len(st.count), -1, dtype=np.int64), [], 0)
        if not (st.room > 0).any():  # no cell takes a flow below the level: no chain ends
            r.info["layer2"] = {"cleared": 0, "chains_tried": 0, "nodes": 0, "stopped": "done"}
            return r
    sides, need, _ = floor if floor is not None else side_floors(problem, alpha, st.soft)
    on_side = sides >= 0
    at = np.bincount(sides[on_side], weights=st.hot()[on_side],
                     minlength=len(need)).astype(np.int64)
    cleared = tried = nodes = 0
    stopped, progress = "done", True
    while progress and stopped == "done":
        progress = False
        for x in np.flatnonzero(st.exc > 0).tolist():
            if deadline is not None and time.perf_counter() > deadline:
                stopped = "deadline"
                break
            if work is not None and nodes >= work:
                stopped = "work"
                break
            s = int(sides[x])
            if st.exc[x] <= 0 or (s >= 0 and at[s] <= need[s]):
                continue  # cleared meanwhile, or its side at its bound: no chain clears it
            tried += 1
            chain, n = _chain(st, x, budget if work is None else min(budget, work - nodes))
            nodes += n
            if chain is None:
                continue
            touched = {c for move in chain for c in st.cells_of[move[0]] + move[3]}
            before = st.hot()[list(touched)]
            for move in chain:
                st.move(*move)
            after = st.hot()[list(touched)]
            cleared += int(before.sum() - after.sum())
            for c, d in zip(touched, after - before):
                if sides[c] >= 0:
                    at[sides[c]] += d
            progress = True
    if cleared:
        _members(problem, st, r)
    r.info["layer2"] = {"cleared": cleared, "chains_tried": tried, "nodes": nodes,
                        "stopped": stopped}
    return r


def next_level(problem: ClosProblem, routing: ClosRouting, alpha: float) -> float | None:
    """The largest fabric-link load of ``routing`` below ``alpha`` (None: none above 0)."""
    fab = link_loads(problem, routing)[problem.links.tier > 0]
    below = fab[(fab < alpha - 1e-9) & (fab > 1e-9)]
    return float(below.max()) if len(below) else None


def fewer_below(problem: ClosProblem, routing: ClosRouting, alpha: float,
                deadline: float | None = None, budget: int = BUDGET // 8,
                work: int | None = None) -> ClosRouting:
    """Below the max (as the two-tier ``layer2.fewer_below``): ejection chains that clear
    links at the next load below ``alpha`` (``next_level``), no cell above that level gaining
    a flow (``fewer_at_max`` with ``hold``), and again at the next load down while a level
    is cleared entirely: the max, the links at it and every load above the level stay, the
    sorted load vector gets lexicographically smaller at every chain. Until ``work`` search
    nodes in all or ``deadline``. A new routing; ``info["layer2_below"]``: the levels tried
    and ``fewer_at_max``'s report summed over them."""
    keep = routing.info.get("layer2")
    r = ClosRouting(list(routing.plane), list(routing.middle), list(routing.path),
                    dict(routing.info))
    report: dict = {"cleared": 0, "chains_tried": 0, "nodes": 0, "stopped": "done"}
    levels = []
    level = next_level(problem, r, alpha)
    while level is not None and report["stopped"] == "done":
        if not soft_limits(problem, level)[0].any():
            break  # no cell holds a flow below the level: a flow leaving links at it lands
            # on as many links that reach it (the two-tier chains at capacity 0)
        left = None if work is None else work - report["nodes"]
        r = fewer_at_max(problem, r, level, deadline, budget, work=left, hold=True)
        got = r.info.pop("layer2")
        report = {k: (v if k == "stopped" else report[k] + v) for k, v in got.items()}
        levels.append(level)
        below = next_level(problem, r, alpha)
        if below == level:
            break
        level = below  # every link at the level cleared: again at the next load down
    r.info["layer2_below"] = {"levels": levels, **report}
    if keep is not None:
        r.info["layer2"] = keep
    return r


def _chain(st: CellState, x: int, budget: int):
    """The shortest chain of moves (flow, plane, middle, cells) that takes a flow off hot
    cell ``x`` and lowers the links at alpha, no cell above n_c hi_c; None when none within
    ``budget`` search nodes. A node is a cell to take a flow off (``x``, then the one the
    last move made hot or hotter), the chain that led there and its change of the links at
    alpha so far; a cell is entered once per flow that moves into it. Also the nodes
    expanded."""
    nodes: list[tuple] = [(x, -1, None, 0)]  # (cell, parent node, move to it, change)
    seen = {(x, -1)}
    head, found = 0, None
    while head < len(nodes) and head < budget and found is None:
        moves = chain_moves(nodes, head)
        st.apply(moves)
        found = _expand(st, head, nodes, {m[0] for m in moves}, seen)
        st.apply(moves, -1)
        if found is not None:
            found = moves + [found]
        head += 1
    return found, head


def chain_moves(nodes: list, k: int) -> list:
    """The moves from the root of a chain search's tree to node ``k``, in order: a node holds
    its parent's index second and the move that reached it third (None at the root)."""
    out = []
    while nodes[k][2] is not None:
        out.append(nodes[k][2])
        k = nodes[k][1]
    out.reverse()
    return out


def _expand(st: CellState, k: int, nodes: list, moved: set, seen: set):
    """Every flow on node k's cell to each of its other options: the first flow with an
    option that ends the chain (fewer links at alpha in all, no cell over n_c hi_c) returns
    its best such move (the most links cleared, then the most room on its tightest cell);
    an option that makes exactly one cell hot or hotter is a new node at that cell (which
    may be one flow over n_c hi_c meanwhile), at most ``BRANCH`` per flow and plane."""
    y, _, _, delta = nodes[k]
    for i in sorted(st.flows_on(y) - moved):
        old = list(st.cells_of[i])
        lost = sum(1 for c in old if st.exc[c] > 0)
        st.shift(old, ())
        best = None
        pin = -1 if st.pin is None else st.pin[i]
        for q in (range(st.planes) if pin < 0 else (pin,)):
            exc, room, rows = st.options(i, q)
            gain = sum((e >= 0).astype(np.int64) for e in exc)
            low = np.minimum.reduce(room) if len(room) > 2 else np.minimum(*room)
            if q == st.routing.plane[i]:
                low = low.copy()
                low[st.routing.middle[i]] = DEAD  # its own option: not a move
            change = delta - lost + gain
            done = np.flatnonzero((low > 0) & (change < 0))
            if len(done):
                m = int(done[np.lexsort((-low[done], change[done]))[0]])
                key = (int(change[m]), -int(low[m]))
                if best is None or key < best[0]:
                    best = (key, q, m, tuple(int(h[m]) for h in rows))
                continue
            grow = np.flatnonzero((gain == 1) & (low >= 0))
            if len(grow) > BRANCH:  # the options with the most room in all
                total = sum(room)[grow]
                grow = grow[np.argpartition(-total, BRANCH)[:BRANCH]]
            for m in sorted(grow.tolist()):
                z = next(int(h[m]) for e, h in zip(exc, rows) if e[m] >= 0)
                if (z, i) not in seen:
                    seen.add((z, i))
                    move = (i, q, m, tuple(int(h[m]) for h in rows))
                    nodes.append((z, k, move, int(change[m])))
        st.shift(old, (), -1)
        if best is not None:
            return (i, *best[1:])
    return None


def _members(problem: ClosProblem, st: CellState, r: ClosRouting) -> None:
    """Every flow's path from its cells: the cell's member without bundles; with bundles
    the least loaded alive member, flow by flow (each cell balanced: the fewest members at
    alpha for its flows)."""
    loads = ClosLoads(problem)
    single = loads.single
    for i, rows in enumerate(st.cells_of):
        if not rows:
            continue
        if single:
            r.path[i] = tuple(loads.member0[c] for c in rows)
        else:
            r.path[i] = loads.pick(i, r.plane[i], r.middle[i])
            loads.add(i, r.plane[i], r.path[i])


def layer2_bound(problem: ClosProblem, alpha: float) -> int:
    """No routing with max fabric-link load ``alpha`` has fewer links at alpha (module
    docstring). O(F x planes x middles) numpy."""
    return int(side_floors(problem, alpha)[2])


def soft_limits(problem: ClosProblem, alpha: float):
    """Per cell (n_c lo_c: the most flows it holds with no member at ``alpha``; n_c alive
    members; n_c hi_c: the most it holds with no member above ``alpha``)."""
    L = problem.links
    cells = L.cells()
    alive = L.alive[cells.members]
    n = alive.sum(axis=1)
    unit = L.units[np.where(alive, cells.members, 0)].max(axis=1, initial=0)
    hi = np.floor(alpha * unit + 1e-6)
    lo = np.where(hi >= alpha * unit - 1e-6, hi - 1, hi)
    return (n * np.maximum(lo, 0)).astype(np.int64), n, (n * hi).astype(np.int64)


def side_floors(problem: ClosProblem, alpha: float, soft: np.ndarray | None = None):
    """(side per cell, -1 for none; per side the least links at ``alpha`` it can have; the
    bound, their sum over sides of disjoint cells). Sides: per tier (leaf, then pod on three
    tiers) and direction, the groups of hosts sharing their leaf (pod) in every plane."""
    L, f = problem.links, problem.fabric
    if soft is None:
        soft = soft_limits(problem, alpha)[0]
    sides = np.full(len(soft), -1, dtype=np.int64)
    need: list[int] = []
    if not len(problem):
        return sides, need, 0
    P = len(f.planes)
    src, dst = np.asarray(problem.src), np.asarray(problem.dst)
    tiers = [(0, L.host_leaf)]
    if f.tiers == 3 and all(p.cores for p in f.planes):
        tiers.append((1, np.stack([L.pod_of_leaf[q][L.host_leaf[q]] for q in range(P)])))
    total = 0
    for tier, key in tiers:
        keep = np.flatnonzero(~(key[:, src] == key[:, dst]).any(axis=0))
        if not len(keep):
            continue
        groups, gid = np.unique(key.T, axis=0, return_inverse=True)
        gid = gid.ravel()
        rows = _usable(problem, keep, tier)
        disjoint = all(len(np.unique(groups[:, q])) == len(groups) for q in range(P))
        for down, hosts in ((False, src), (True, dst)):
            cellmat = _side_cells(problem, groups, tier, down)
            best = _group_floors(gid[hosts[keep]], rows, soft[cellmat])
            if disjoint:
                sid = len(need) + np.arange(len(groups))
                need += best.tolist()
                sides[cellmat] = sid[:, None]
                total += int(best.sum())
            else:
                total += int(best.max(initial=0))
    return sides, need, total


def _usable(problem: ClosProblem, idx: np.ndarray, tier: int) -> np.ndarray:
    """Per flow of ``idx`` whether each cell position of its sides is on a usable option:
    (flows, planes x slots) at the leaf tier, (flows, planes x cores) at the pod tier."""
    L = problem.links
    out = []
    for q in range(len(problem.fabric.planes)):
        a, b, p, r = (e[idx] for e in problem.end_arrays(q))
        u1, d1, u2, d2 = L.ok(q)
        if tier == 0:
            ok = u1[a] & d1[b]
            inter = p != r
            if inter.any():
                ok[inter] &= L.pair_slot_ok(q)[p[inter], r[inter]]
        else:
            G = L.group_of_core[q]
            ok = u1[a][:, G] & d1[b][:, G] & u2[p] & d2[r]
        out.append(ok & problem.open_in(q, idx)[:, None])
    return np.concatenate(out, axis=1)


def _side_cells(problem: ClosProblem, groups: np.ndarray, tier: int, down: bool) -> np.ndarray:
    """(groups, planes x width) cell rows of every group's side, in ``_usable``'s order."""
    cells = problem.links.cells()
    out = []
    for q in range(len(problem.fabric.planes)):
        (A, C), base = cells.shape[q], cells.base[q]
        width = A if tier == 0 else C
        b = base[(1 if down else 0) + 2 * tier]
        out.append(b + groups[:, q][:, None] * width + np.arange(width))
    return np.concatenate(out, axis=1)


def _group_floors(gid: np.ndarray, rows: np.ndarray, soft: np.ndarray) -> np.ndarray:
    """Per group the most of n(M) - soft(M) (0 at least) over M: each distinct usable mask
    of its flows, n(M) the flows with that mask (they fill M's room below alpha, the rest
    is at alpha), and the union of them, n(M) every flow of the group. Distinct (group,
    mask) pairs by one lexsort of the masks packed in 64-bit words: numpy throughout."""
    out = np.zeros(len(soft), dtype=np.int64)
    if not len(gid):
        return out
    bytes_ = np.packbits(rows, axis=1)
    packed = np.zeros((len(rows), -(-bytes_.shape[1] // 8) * 8), dtype=np.uint8)
    packed[:, :bytes_.shape[1]] = bytes_
    words = packed.view(np.uint64)
    order = np.lexsort(tuple(words.T[::-1]) + (gid,))
    keys = np.column_stack([gid[order], words[order].view(np.int64)])
    start = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]).any(axis=1)])
    first = order[start]
    counts = np.diff(np.r_[start, len(order)])
    g = gid[first]
    own = counts - _dot(rows[first], soft, g)
    np.maximum.at(out, g, own)
    edges = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])  # pairs come group by group
    union = np.bitwise_or.reduceat(packed[first], edges, axis=0)
    bits = np.unpackbits(union, axis=1)[:, :rows.shape[1]].astype(bool)
    members = g[edges]
    total = np.add.reduceat(counts, edges)
    own = total - _dot(bits, soft, members)
    out[members] = np.maximum(out[members], own)
    return np.maximum(out, 0)


def _dot(masks: np.ndarray, soft: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Per row j of ``masks`` the sum of ``soft[group[j]]`` over its set positions: a
    gather of the rows' soft limits when a mask is shorter than the groups are many, else
    float32 BLAS (exact below 2**24)."""
    if masks.shape[1] <= len(soft):
        return np.einsum("ij,ij->i", soft[group], masks.astype(np.int64))
    both = masks.astype(np.float32) @ soft.T.astype(np.float32)
    return np.rint(both[np.arange(len(group)), group]).astype(np.int64)
