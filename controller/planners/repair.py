"""Local repair of an unsplit routing: move flows off directed links above a capacity c by
alternating chains, the Kempe-chain moves of edge colouring generalised to capacities and to
per-flow usable spines.

Why: the greedy (and any routing kept from before a change) often leaves a few links one flow
above what is possible; rebuilding from scratch would move every flow, a chain moves only the
flows on one alternating path. To insert flow f (a -> b) under capacity c: put it on a usable
spine u where both links a->u and u->b carry fewer than c flows; else put it where one of them
has room and evict one flow g from the other (now one above c) to another usable spine of g,
and so on. A breadth-first search over links finds the shortest such chain; each step is
checked against the loads the earlier steps of the same chain leave, so an applied chain never
puts more than c flows on a link. In a bipartite multigraph with every spine usable and c = 1
this finds the classic alternating path of Koenig's theorem.

    >>> from controller.model.clos import Clos
    >>> from controller.model.jobs import Flow, Job
    >>> from controller.model.problem import Problem
    >>> f = Clos.generate(2, 3, 2).as_leaf_spine()
    >>> job = Job("j", explicit=[Flow("j", "h0_0", "h1_0", 1), Flow("j", "h0_1", "h2_0", 1),
    ...                          Flow("j", "h2_1", "h1_1", 1)])
    >>> r = Routing(Problem.build(f, [job]), [0, 0, 0])   # two flows on l0->s0 and on s0->l1
    >>> r.max_load(), reduce_to(r, 1), r.max_load()
    (2, True, 1)

Cost: a chain search visits each directed link at most once, O(L S) links with bit-mask
expansion; repairing r overloaded flows costs O(r L S) at worst, far less in practice because
chains are short when capacity is left anywhere near.
"""
from __future__ import annotations

import gc
import time
from contextlib import contextmanager

from controller.model.problem import Problem

NO_SPINE = -1
_SPINES: dict[int, tuple[int, ...]] = {}


@contextmanager
def gc_paused():
    """Pause the cyclic garbage collector: planning allocates 100,000s of small containers and
    no cycles, and full collections triggered by them cost more than the planning itself on
    large fabrics (they scan every object of the process)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def bits(mask: int) -> tuple[int, ...]:
    """Set bit positions of ``mask``, ascending (cached: few distinct masks per instance)."""
    out = _SPINES.get(mask)
    if out is None:
        lst, m = [], mask
        while m:
            low = m & -m
            lst.append(low.bit_length() - 1)
            m ^= low
        out = tuple(lst)
        if len(_SPINES) < 65536:
            _SPINES[mask] = out
    return out


class Routing:
    """A mutable unsplit routing with per-link flow sets and "has room below c" bit masks.

    Links are numbered ``leaf * S + spine`` for uplinks and ``L * S + leaf * S + spine`` for
    downlinks, so a link's leaf-side row is ``link // S`` and its spine ``link % S``.
    """

    def __init__(self, problem: Problem, spines: list[int]):
        self.n_leaves = len(problem.fabric.leaves)
        self.S = len(problem.fabric.spines)
        self.LS = self.n_leaves * self.S
        self.src, self.dst, self.usable = problem.src_leaf, problem.dst_leaf, problem.usable
        self.spine = list(spines)
        self.c = 0
        self.room = [0] * (2 * self.n_leaves)  # per leaf-side row: spines with load < cap
        S, LS = self.S, self.LS
        on: list[list] = [[] for _ in range(2 * LS)]
        for k, (a, b, s) in enumerate(zip(self.src, self.dst, self.spine)):
            if s != NO_SPINE:
                on[a * S + s].append(k)
                on[LS + b * S + s].append(k)
        self.load = [len(x) for x in on]
        self.on: list[set] = [set(x) for x in on]
        self.cap = [0] * (2 * LS)  # per link: the most flows it may carry after a move

    # ---- basic moves ---------------------------------------------------------------------
    def links(self, k: int, s: int) -> tuple[int, int]:
        return self.src[k] * self.S + s, self.LS + self.dst[k] * self.S + s

    def add_route(self, k: int, s: int) -> None:
        """Put flow k (unrouted) on spine s: its two links' flow sets, loads and room."""
        self.spine[k] = s
        S, on, load, cap = self.S, self.on, self.load, self.cap
        for x in (self.src[k] * S + s, self.LS + self.dst[k] * S + s):  # self.links(k, s)
            on[x].add(k)
            v = load[x] = load[x] + 1
            if v == cap[x]:
                self.room[x // S] &= ~(1 << s)

    def remove_route(self, k: int) -> int:
        """Take flow k off its spine (it is then unrouted) and return that spine."""
        s = self.spine[k]
        S, on, load, cap = self.S, self.on, self.load, self.cap
        for x in (self.src[k] * S + s, self.LS + self.dst[k] * S + s):  # self.links(k, s)
            on[x].discard(k)
            v = load[x] = load[x] - 1
            if v == cap[x] - 1:
                self.room[x // S] |= 1 << s
        self.spine[k] = NO_SPINE
        return s

    def move(self, k: int, s: int) -> None:
        if self.spine[k] != NO_SPINE:
            self.remove_route(k)
        self.add_route(k, s)

    def set_capacity(self, c: int, hold: bool = False) -> None:
        """Capacity ``c`` on every link, or with ``hold`` max(c, its load): links above ``c``
        may then swap flows but never gain one (layer-2 moves). Recomputes the room masks.
        O(L S)."""
        self.c = c
        S, load = self.S, self.load
        self.cap = [max(c, v) for v in load] if hold else [c] * len(load)
        for row in range(2 * self.n_leaves):
            base = row * S
            m = 0
            for s, v in enumerate(load[base:base + S]):
                if v < self.cap[base + s]:
                    m |= 1 << s
            self.room[row] = m

    def set_link_capacity(self, x: int, c: int) -> None:
        """Capacity of one link (and its room bit). O(1)."""
        self.cap[x] = c
        bit = 1 << (x % self.S)
        if self.load[x] < c:
            self.room[x // self.S] |= bit
        else:
            self.room[x // self.S] &= ~bit

    def max_load(self) -> int:
        return max(self.load, default=0)

    def links_above(self, c: int) -> list[int]:
        return [x for x, v in enumerate(self.load) if v > c]

    # ---- chain search --------------------------------------------------------------------
    def best_direct(self, k: int) -> int:
        """Usable spine where both links of ``k`` have room below c, least loaded first
        (lowest id on ties); NO_SPINE if none."""
        S, LS = self.S, self.LS
        a, b = self.src[k], self.dst[k]
        both = self.usable[k] & self.room[a] & self.room[self.n_leaves + b]
        if not both:
            return NO_SPINE
        load, best, best_v = self.load, NO_SPINE, None
        for u in bits(both):
            v = max(load[a * S + u], load[LS + b * S + u])
            if best_v is None or v < best_v:
                best, best_v = u, v
                if v == 0:
                    break
        return best

    def insert(self, k: int, budget: int = 4096, log: list | None = None) -> bool:
        """Place unplaced flow ``k`` under capacity c, by a chain if needed; False (nothing
        changed) when no chain within ``budget`` visited links exists. ``log`` gets
        (flow, previous spine) for every other flow the chain moved."""
        u = self.best_direct(k)
        if u != NO_SPINE:
            self.add_route(k, u)
            return True
        chain = self._chain(k, budget)
        if chain is None:
            return False
        for g, _ in chain:
            if g != k:
                if log is not None:
                    log.append((g, self.spine[g]))
                self.remove_route(g)
        for g, u in chain:
            self.add_route(g, u)
        return True

    def _chain(self, k: int, budget: int):
        """Shortest list of (flow, new spine) moves, ``k`` first, that keeps every link <= c."""
        S, LS, cap, load = self.S, self.LS, self.cap, self.load
        src, dst, usable, on, room = self.src, self.dst, self.usable, self.on, self.room
        a, b = src[k], dst[k]
        parent: dict[int, tuple] = {}  # link with one flow in excess -> (prev link, flow, spine)
        queue: list[int] = []
        for u in bits(usable[k]):
            x_up, x_down = a * S + u, LS + b * S + u
            full_up, full_down = load[x_up] >= cap[x_up], load[x_down] >= cap[x_down]
            if full_up == full_down:
                continue  # both full (both with room is handled by best_direct)
            x = x_up if full_up else x_down
            if load[x] == cap[x] and x not in parent:
                parent[x] = (None, k, u)
                queue.append(x)
        head = 0
        paths: dict[int, tuple] = {}  # popped link -> its _path, each from its parent's
        while head < len(queue) and head < budget:
            x = queue[head]
            head += 1
            prev, g0, u0 = parent[x]
            if prev is None:
                moves, delta = self._path(parent, x)
            else:  # _path(parent, x): the parent's moves and load change, then x's move
                moves, delta = paths[prev]
                moves, delta = moves + [(g0, u0)], dict(delta)
                self._shift(delta, g0, u0)
            paths[x] = moves, delta
            moved = {g for g, _ in moves}
            t = x % S
            row_x = x // S
            by_row: dict[int, list] = {}  # _room_row's changes, per row
            for y, d in delta.items():
                by_row.setdefault(y // S, []).append((y, d))
            room_x = room[row_x]
            for y, d in by_row.get(row_x, ()):
                if load[y] + d < cap[y]:
                    room_x |= 1 << (y - row_x * S)
                else:
                    room_x &= ~(1 << (y - row_x * S))
            for g in on[x]:
                if g in moved:
                    continue
                up_g, down_g = src[g] * S + t, LS + dst[g] * S + t
                oth = down_g if x == up_g else up_g
                row_o = oth // S
                room_o = room[row_o]  # self._room_row(row_o, delta)
                for y, d in by_row.get(row_o, ()):
                    if load[y] + d < cap[y]:
                        room_o |= 1 << (y - row_o * S)
                    else:
                        room_o &= ~(1 << (y - row_o * S))
                cand = usable[g] & ~(1 << t)
                both = cand & room_x & room_o
                if both:
                    u = (both & -both).bit_length() - 1
                    return moves + [(g, u)]
                for u in bits(cand & (room_x | room_o)):
                    y = row_o * S + u if room_x >> u & 1 else row_x * S + u
                    if y in parent or load[y] + delta.get(y, 0) != cap[y]:
                        continue
                    parent[y] = (x, g, u)
                    queue.append(y)
        return None

    def _room_row(self, row: int, delta: dict[int, int]) -> int:
        """Room mask of one leaf-side row as the chain's earlier moves leave it."""
        m = self.room[row]
        if delta:
            S, cap, load = self.S, self.cap, self.load
            lo, hi = row * S, row * S + S
            for y, d in delta.items():
                if lo <= y < hi:
                    if load[y] + d < cap[y]:
                        m |= 1 << (y - lo)
                    else:
                        m &= ~(1 << (y - lo))
        return m

    def _path(self, parent: dict, x: int):
        """Moves from the chain's start to link ``x`` and the load change they cause."""
        moves = []
        while x is not None:
            prev, g, u = parent[x]
            moves.append((g, u))
            x = prev
        moves.reverse()
        delta: dict[int, int] = {}
        for g, u in moves:
            self._shift(delta, g, u)
        return moves, delta

    def _shift(self, delta: dict, g: int, u: int) -> None:
        """Add to ``delta`` (link -> load change) flow g's move from its spine to spine u."""
        s = self.spine[g]
        if s != NO_SPINE:
            for y in self.links(g, s):
                delta[y] = delta.get(y, 0) - 1
        for y in self.links(g, u):
            delta[y] = delta.get(y, 0) + 1


def reduce_to(r: Routing, c: int, deadline: float | None = None, budget: int = 4096) -> bool:
    """Move flows off every link above ``c`` by chains; True when no link is above ``c``.

    Never raises any link's load above max(c, its current load): a flow is taken off an
    overloaded link and put back where it was when no chain places it.
    """
    r.set_capacity(c)
    ok = True
    for x in r.links_above(c):
        while r.load[x] > c:
            if deadline is not None and time.perf_counter() > deadline:
                return False
            for g in sorted(r.on[x]):
                s = r.remove_route(g)
                if r.insert(g, budget):
                    break
                r.add_route(g, s)
            else:
                ok = False
                break
    return ok and r.max_load() <= c


def insert_all(problem: Problem, c: int, order: list[int], budget: int = 4096,
               start: list[int] | None = None, deadline: float | None = None) -> Routing:
    """Alternating-path insertion under capacity ``c`` of the flows in ``order`` into
    ``start`` (a partial routing, NO_SPINE for unplaced flows; empty by default); flows no
    chain can place (or, after ``deadline``, no direct slot) are put on their least-loaded
    usable spine (over ``c``)."""
    r = Routing(problem, start if start is not None else [NO_SPINE] * len(problem))
    r.set_capacity(c)
    left = []
    for k in order:
        if deadline is not None and budget and time.perf_counter() > deadline:
            budget = 0  # out of time: direct slots only
        if not r.insert(k, budget):
            left.append(k)
    S, LS, load = r.S, r.LS, r.load
    for k in left:
        a, b = r.src[k], r.dst[k]
        u = min(bits(r.usable[k]), key=lambda s: (max(load[a * S + s], load[LS + b * S + s]), s))
        r.add_route(k, u)
    return r
