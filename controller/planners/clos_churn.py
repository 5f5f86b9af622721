"""Re-planning running flows on a Clos fabric with few moved flows.

Moving a running flow costs packets reordered or paused (for RDMA, a go-back-N) and OpenFlow
messages, yet a fresh ``clos_auto`` plan after a change (a link down or up, a job added) may
move most flows of the group: on a k = 8 fat-tree a core link failure moved 996 of 1,120
routes where only the 8 over that link had to move. So, as ``planners.churn`` does on two
tiers, a re-plan starts from the routes in force (``previous_routes``: per flow its plane,
middle and member links):

1. every flow whose route is still alive (every member link up, its plane still open to it)
   stays;
2. new flows and flows whose route died are placed by the greedy's rule (``clos_greedy``:
   the option whose busiest link is least loaded) on top of the flows kept, in the greedy's
   group order;
3. while the max link load (fabric links, as ``clos_auto`` scores) is above the lower bound,
   flows on links at the max move one at a time to an option whose busiest link stays below
   it, or by a chain of two moves (the flows just placed first: moving them costs nothing),
   and where those are stuck by ejection chains (``_ejection``: up to ``EJECTION_DEPTH``
   moves, each freeing the one link the move before it filled), bounded by passes,
   ``EJECTION_WORK`` and ``SEARCH_LIMIT``; the moves of a level are undone unless the max
   drops (fewer links at the max alone is not worth moving running flows);
4. only when the result still misses the lower bound, a fresh ``clos_auto`` plan is taken
   instead when it is strictly lower on the max link load (churn.py's rule on the request
   path: the fresh plan must win on the objective, never on a tie); then every flow whose
   route in force is alive goes back to it where that keeps the fresh plan's max (``home``),
   or, where the instance is small enough for HiGHS (``clos_ilp_moves``, within
   ``MOVES_MILP_S``), the routing at the fresh plan's max that keeps the most flows in
   place: the fresh plan decides the max, the routes in force the rest. On the loaded k = 8
   fat-tree of ``benchmarks.scale`` a failed core link moved about 860 of 1,120 routes with
   ``home`` alone, about 30 with the MILP (tests/test_clos_churn.py).

   Flows the search moved go home afterwards wherever free flows (new, lost or moved
   already: moving them costs no route more) can be pushed aside at the max reached
   (``clos_homing.send_home``); the search tries free flows first. ``info["why"]`` says in a
   sentence how many running flows moved and why (issue 74). After a failure, where the
   search left the max above the bound or moved more than twice the flows that lost their
   route, the fewest-moves MILP (``clos_ilp_moves``, on instances of at most
   ``LAYER2_MILP_OPTIONS`` options, within ``MOVES_MILP_S``) over the search's neighbourhood
   (``neighbourhood``: the flows it moved and those on the full links they touched) is
   taken when lower on the max or as low with fewer moves (k = 8: 29-36 routes for 16-18
   over a failed core link, in 0.1-0.6 s; the search alone 33-51).

When most flows are new (a job larger than those running is added), a fresh plan sets the
max to meet, and the running flows stay where greedy, search and homing meet it (a running
flow moves for a new job only where that lowers the max: 0 of a ring of 512 moved for an
all-to-all of 64 on a k = 16 fat-tree, where the fresh plan sent home moved 53); else the
fresh plan is taken, every running flow sent back home where that keeps its max.

    >>> from controller.model.clos import Clos
    >>> from controller.model.clospaths import ClosProblem
    >>> from controller.model.jobs import Job
    >>> f = Clos.fat_tree(4)
    >>> ring = Job("r", rings=[["h0_0", "h2_0", "h4_0", "h6_0"]], ring_bytes=1)  # 4 pods
    >>> p = ClosProblem.build(f, [ring])
    >>> before = clos_replan(p, empty_routing(len(p)))  # nothing in force: a fresh plan
    >>> dead = tuple(p.middle_name(0, 0, before.middle[0])[1:3])  # flow 0's agg -> core
    >>> after = clos_replan(ClosProblem.build(f.with_down([dead]), [ring]), before)
    >>> after.info["moved"], after.info["forced"], after.info["source"]  # the flow over it
    ([0], 1, 'installed')

Cost: O(F) to read the routes in force and rebuild the loads; the greedy's O(P x middles)
per flow placed; per level of the search O(passes x F x P x middles) at worst; one
``clos_auto`` run, and one MILP within ``MOVES_MILP_S``, only when the result misses the
lower bound.
"""
from __future__ import annotations

import itertools
import time

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting, lower_bound
from controller.model.intent import members_of
from controller.planners.clos_auto import LAYER2_MILP_OPTIONS, clos_auto, option_count, score
from controller.planners.clos_greedy import place_all
from controller.planners.clos_homing import send_home
from controller.planners.clos_ilp_moves import fewest_moves, moved_flows, neighbourhood
from controller.planners.clos_loads import (
    ClosLoads,
    empty_routing,
    group_order,
    hop_rows,
    paths_of,
)

MAX_PASSES = 20  # per level of the search: passes over the flows on links at the max
# the search's time on the request path, a guard (passes and work bound it first): the fresh
# plan is the fallback (at k = 8 the search takes about 10 ms; 0.05 s was too short on a
# machine at a load of 9 on 2 cores: a restore then moved 809-824 routes, not 32-111)
SEARCH_LIMIT = 0.3
MOVES_MILP_S = 1.0  # the fewest-moves MILP's time limit, where the fresh plan wins
EJECTION_DEPTH = 6  # moves in one ejection chain (``_ejection``), at most
EJECTION_WORK = 2000  # flows an ejection search looks at per level of lower_max


def clos_replan(problem: ClosProblem, previous: ClosRouting, time_limit: float = 1.0,
                layer1_only: bool = False) -> ClosRouting:
    """Plan ``problem`` from the routes in force ``previous`` (``ClosProblem.inter`` order,
    plane -1 for a flow without one: ``previous_routes``) with few moved flows.

    ``info`` adds to clos_auto's (``lower_bound``, ``gap``, ``optimal``): ``moved_flows``
    (flows with a route in force that changed), ``moved`` (their positions in
    ``problem.flows``), ``forced`` (of those, how many had lost their route), ``new_flows``,
    ``search_moves`` (moves the search kept), ``source`` ("installed", "fresh" or "fewest
    moves": ``clos_ilp_moves``, with its ``status`` and ``kept``) and ``homed`` (flows of a
    fresh plan sent back to their routes in force, ``home``). ``layer1_only`` (the
    controller's request path): a fresh plan is ``clos_auto``'s layer 1, and
    ``info["deferred"]`` says whether layer 2 and the jobs search may still improve the
    routing off the path (``clos_offpath``: some fabric link carries two flows or more)."""
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    n = len(problem)
    dead = set(np.flatnonzero(~problem.links.alive).tolist())  # few: a set test per flow
    r = empty_routing(n)
    planned = np.asarray(previous.plane, dtype=np.int64) >= 0
    todo, forced = np.flatnonzero(~planned).tolist(), 0  # new flows: nothing to check
    for i in np.flatnonzero(planned).tolist():
        q, path = previous.plane[i], previous.path[i]
        if path and dead.isdisjoint(path) and not problem.pinned_elsewhere(i, q):
            r.plane[i], r.middle[i], r.path[i] = q, previous.middle[i], tuple(path)
        else:
            todo.append(i)
            forced += 1
    todo.sort()
    bound = lower_bound(problem)
    lost = set(todo) - set(np.flatnonzero(~planned).tolist())  # their route died
    source, search_moves, homed, known = "installed", 0, 0, None
    if 2 * len(todo) > n:  # mostly new flows (a job larger than those running)
        fresh = clos_auto(problem, time_limit=time_limit, layer1_only=layer1_only)
        known = fresh.info["max_link_load"]
        if planned.any():  # running flows stay where that keeps the fresh plan's max
            search_moves, homed = _repair(problem, r, previous, todo, lost, bound, deadline)
            if score(problem, r)[0] > known + 1e-9:
                r, source, search_moves = fresh, "fresh", 0
                homed = home(problem, r, previous, known)
            known = None  # a flow sent home may have left the only link at the max
        else:
            r, source = fresh, "fresh"
    elif todo or score(problem, r)[0] > bound + 1e-9:
        search_moves, homed = _repair(problem, r, previous, todo, lost, bound, deadline)
        value = score(problem, r)[0]
        few = _fewer(problem, r, previous, forced, bound, value, deadline)
        if few is not None:
            r, source, value = few, "fewest moves", score(problem, few)[0]
        if value > bound + 1e-9:
            fresh = clos_auto(problem, time_limit=max(deadline - time.perf_counter(), 0.0),
                              layer1_only=layer1_only)
            f_value = score(problem, fresh)[0]
            if f_value < value - 1e-9:  # strictly lower max: worth moving, few as can
                r, source = fresh, "fresh"
                homed = home(problem, r, previous, f_value)
                few = fewest_moves(problem, previous, f_value, MOVES_MILP_S) \
                    if option_count(problem) <= LAYER2_MILP_OPTIONS else None
                if few is not None and len(moved_flows(few, previous)) < len(
                        moved_flows(r, previous)):
                    r, source = few, "fewest moves"
    value = score(problem, r)[0] if known is None else known
    moved = moved_flows(r, previous) if planned.any() else []
    r.info.update(stage="churn", source=source, lower_bound=round(bound, 9),
                  gap=round(max(value - bound, 0.0), 9), optimal=value <= bound + 1e-9,
                  max_link_load=value, moved_flows=len(moved),
                  moved=[problem.inter[i] for i in moved], forced=forced,
                  new_flows=len(todo) - forced, search_moves=search_moves, homed=homed,
                  why=why_moved(len(moved), forced, source, value, bound),
                  deferred=layer1_only and most_flows(problem, r) >= 2,
                  ms={"churn": round((time.perf_counter() - t0) * 1e3, 3)})
    return r


def _repair(problem: ClosProblem, r: ClosRouting, previous: ClosRouting, todo: list[int],
            lost: set[int], bound: float, deadline: float) -> tuple[int, int]:
    """``r`` (the alive routes in force) completed in place: the flows of ``todo`` placed
    the greedy's way, the max lowered towards ``bound`` (``lower_max``), then moved flows
    sent home at that max (``clos_homing.send_home``). (search moves, flows sent home)."""
    loads = ClosLoads(problem, r)
    if todo:
        wanted = set(todo)
        place_all(loads, r, [i for i in group_order(problem) if i in wanted])
    if loads.fabric_max() <= bound + 1e-9:
        return 0, 0
    moves = lower_max(problem, loads, r, todo, bound,
                      min(deadline, time.perf_counter() + SEARCH_LIMIT))
    return moves, send_home(problem, r, previous, score(problem, r)[0], lost) if moves else 0


def _fewer(problem: ClosProblem, r: ClosRouting, previous: ClosRouting, forced: int,
           bound: float, value: float, deadline: float) -> ClosRouting | None:
    """The fewest-moves MILP (``clos_ilp_moves``) at ``bound`` over the search's
    neighbourhood, after a failure (``forced`` flows lost their route) where the search left
    the max above ``bound`` or moved more than twice ``forced``, on instances small enough
    for HiGHS, within ``MOVES_MILP_S`` and ``deadline``: its routing when lower on the max,
    or as low with fewer moved flows; else None."""
    if max(previous.plane, default=-1) < 0 or option_count(problem) > LAYER2_MILP_OPTIONS:
        return None
    moved = len(moved_flows(r, previous))
    left = min(MOVES_MILP_S, deadline - time.perf_counter())
    if not forced or (value <= bound + 1e-9 and moved <= 2 * forced) or left <= 0.05:
        return None  # a restore or a new job: the search's moves each lowered the max
    few = fewest_moves(problem, previous, bound, left,
                       free=neighbourhood(problem, r, previous, bound))
    if few is None:
        return None
    f_value = score(problem, few)[0]
    if f_value < value - 1e-9 or (f_value <= value + 1e-9
                                  and len(moved_flows(few, previous)) < moved):
        return few
    return None


def why_moved(moved: int, forced: int, source: str, value: float, bound: float) -> str:
    """Why a re-plan moved the running flows it moved, in one sentence (``info["why"]``).

    >>> why_moved(5, 5, "installed", 9.0, 9.0)
    '5 running flows moved: 5 lost their route; max link load 9 at its lower bound 9'
    >>> why_moved(7, 5, "installed", 10.0, 9.0).split(", ")[1]
    '2 more to lower the max link load; max link load 10 (lower bound 9)'
    """
    parts = [f"{forced} lost their route"] if forced else []
    if moved > forced:
        how = {"installed": "to lower the max link load",
               "fresh": "by a fresh plan strictly lower on the max link load",
               "fewest moves": "to lower the max link load (the fewest such moves, a MILP)",
               "fewer links at the max": "by a fresh plan with fewer links at the max "
                                         "link load (two tiers)"}
        parts.append(f"{moved - forced} more {how.get(source, source)}")
    head = f"{moved} running flows moved: " + ", ".join(parts) if moved else \
        "no running flow moved"
    if value <= bound + 1e-9:
        return f"{head}; max link load {value:g} at its lower bound {bound:g}"
    return f"{head}; max link load {value:g} (lower bound {bound:g})"


def lower_max(problem: ClosProblem, loads: ClosLoads, r: ClosRouting, first: list[int],
              bound: float, deadline: float, max_passes: int = MAX_PASSES) -> int:
    """Lower the max fabric link load of ``r`` (``loads`` kept in step) level by level: a flow
    on a link at the max (those of ``first`` before the others) moves to its best option when
    that option's busiest fabric link stays below the max, or else (a chain of two) to an
    option blocked by one link only, once another flow on that link moved below the max; a
    level whose moves leave some link at the max is undone and ends the search, as do
    ``bound``, ``deadline`` (time.perf_counter) and ``max_passes`` passes. The moves kept."""
    L = problem.links
    fab = np.zeros(L.count + 1, dtype=bool)
    fab[:L.count] = (L.tier > 0) & L.alive[:L.count]
    seen = set(first)
    order = list(first) + [i for i in range(len(problem)) if i not in seen]
    on: dict[int, set[int]] = {}  # fabric link -> the flows over it
    for i, path in enumerate(r.path):
        for x in path:
            on.setdefault(x, set()).add(i)
    undo: list[tuple[int, int, int, tuple]] = []
    free = set(first)  # off their route in force already: moving them costs nothing more

    def move(i: int, q: int, m: int, path: tuple, log: bool = True) -> None:
        old = r.path[i]
        if log:
            undo.append((i, r.plane[i], r.middle[i], old))
            free.add(i)
        loads.add(i, r.plane[i], old, -1.0)
        for x in old:
            on[x].discard(i)
        r.plane[i], r.middle[i], r.path[i] = q, m, path
        loads.add(i, q, path)
        for x in path:
            on.setdefault(x, set()).add(i)

    kept = 0
    while True:
        alpha = loads.fabric_max()
        if alpha <= bound + 1e-9:
            return kept
        undo.clear()
        work = [EJECTION_WORK]  # the ejection chains' flows looked at, this level
        hot = _at(loads.load, fab, alpha)
        for _ in range(max_passes):
            before = len(undo)
            for i in order:
                if not r.path[i] or hot.isdisjoint(r.path[i]):
                    continue
                if time.perf_counter() > deadline:
                    hot = {-1}  # out of time: this level is undone
                    break
                if _single(loads, r, i, alpha, move) or _chain(loads, r, i, alpha, on, move,
                                                                free):
                    hot = _at(loads.load, fab, alpha)
                    if not hot:
                        break
            if hot and hot != {-1} and len(undo) == before:  # single moves are stuck
                for h in sorted(hot):
                    if h in hot and _ejection(loads, r, h, alpha, on, move, undo, work,
                                                 free):
                        hot = _at(loads.load, fab, alpha)
            if not hot or hot == {-1} or len(undo) == before:
                break
        if hot:  # the max did not drop: every move of this level back
            for i, q, m, path in reversed(undo):
                move(i, q, m, path, log=False)
            return kept
        kept += len(undo)


def _single(loads: ClosLoads, r: ClosRouting, i: int, alpha: float, move) -> bool:
    """Flow i to its best option if that stays below ``alpha`` on the fabric links."""
    q, path = r.plane[i], r.path[i]
    loads.add(i, q, path, -1.0)
    cost, q2, m2, new = loads.best(i, hosts=False)  # the objective: fabric links
    loads.add(i, q, path)
    if cost < alpha - 1e-9 and new != path:
        move(i, q2, m2, new)
        return True
    return False


def _chain(loads: ClosLoads, r: ClosRouting, i: int, alpha: float, on: dict, move,
           free: set = frozenset(), options: int = 8) -> bool:
    """Flow i to one of its ``options`` cheapest options that reach ``alpha`` on one fabric
    link only, after a flow over that link moved to an option below ``alpha``."""
    q0, path = r.plane[i], r.path[i]
    load, step = loads.load_l, loads.step_l
    loads.add(i, q0, path, -1.0)
    tried = []
    for q in range(loads.planes):
        c = loads.plane_costs(i, q, hosts=False).ravel()
        tried += [(float(c[m]), q, int(m)) for m in np.argsort(c, kind="stable")[:options]
                  if c[m] <= alpha + 1e-9]
    for _, q, m in sorted(tried)[:options]:
        new = loads.pick(i, q, m)
        block = [x for x in new if load[x] + step[x] >= alpha - 1e-9]
        if len(block) != 1 or new == path:
            continue
        for j in sorted(on.get(block[0], ()), key=lambda j: (j not in free, j)):
            if j == i:
                continue
            qj, pj = r.plane[j], r.path[j]
            loads.add(j, qj, pj, -1.0)
            cost, q2, m2, nj = loads.best(j, hosts=False)
            loads.add(j, qj, pj)
            if cost >= alpha - 1e-9 or block[0] in nj:
                continue
            loads.add(j, qj, pj, -1.0)  # j moved for a look: is i's option below alpha then?
            loads.add(j, q2, nj)
            ok = max(load[x] + step[x] for x in new) < alpha - 1e-9
            loads.add(j, q2, nj, -1.0)
            loads.add(j, qj, pj)
            if ok:
                loads.add(i, q0, path)
                move(j, q2, m2, nj)
                move(i, q, m, new)
                return True
    loads.add(i, q0, path)
    return False


def _ejection(loads: ClosLoads, r: ClosRouting, start: int, alpha: float, on: dict, move,
              undo: list, work: list[int], free: set = frozenset(),
              depth: int = EJECTION_DEPTH, options: int = 8) -> bool:
    """One flow off link ``start`` (at ``alpha``) by an ejection chain, as a Kempe chain
    swaps two colours along an alternating path: a flow over it moves to an option that
    reaches ``alpha`` on one fabric link only, a flow over that link moves on in the same
    way (its options read with the moves before it made: the link the previous flow left is
    free again), and so on, depth first, at most ``depth`` moves and each link once, until a
    move lands below ``alpha``. The moves are made as the search goes and undone where it
    backs off (``undo``: lower_max's log). Single moves and chains of two (``_single``,
    ``_chain``) are stuck where every other option of a flow crosses two full links (a
    failed core link on a loaded fat-tree left links one flow above the bound). ``work``:
    flows looked at, shared by the calls of a level (a budget without a clock: the same
    result on a loaded machine)."""
    load, step = loads.load_l, loads.step_l
    seen = {start}

    def shed(y: int, left: int) -> bool:
        for j in sorted(on.get(y, ()), key=lambda j: (j not in free, j)):
            if work[0] <= 0:
                return False
            work[0] -= 1
            qj, pj = r.plane[j], r.path[j]
            loads.add(j, qj, pj, -1.0)
            tried = []
            for q in range(loads.planes):
                c = loads.plane_costs(j, q, hosts=False).ravel()
                tried += [(float(c[m]), q, int(m)) for m in
                          np.argsort(c, kind="stable")[:options] if c[m] <= alpha + 1e-9]
            steps = []
            for _, q, m in sorted(tried)[:options]:
                new = loads.pick(j, q, m)
                if new == pj or y in new:
                    continue
                block = [x for x in new if load[x] + step[x] >= alpha - 1e-9]
                if not block:
                    steps.insert(0, (q, m, new, None))
                    break
                if len(block) == 1 and block[0] not in seen and left > 1:
                    steps.append((q, m, new, block[0]))
            loads.add(j, qj, pj)
            for q, m, new, z in steps:
                mark = len(undo)
                move(j, q, m, new)
                if z is None:
                    return True
                seen.add(z)
                if shed(z, left - 1):
                    return True
                while len(undo) > mark:
                    i, q0, m0, p0 = undo.pop()
                    move(i, q0, m0, p0, log=False)
        return False

    return shed(start, depth)


def home(problem: ClosProblem, r: ClosRouting, previous: ClosRouting, value: float,
         passes: int = 2) -> int:
    """Move the flows of ``r`` (a fresh plan) back to their alive routes in force wherever
    that keeps every fabric link at or below ``value`` (``r``'s max link load), in flow
    order, ``passes`` times; the flows sent back. O(passes x F x hops) in Python."""
    if max(previous.plane, default=-1) < 0:  # nothing in force (a first POST)
        return 0
    loads = ClosLoads(problem, r)
    L = problem.links
    fab = ((L.tier > 0) & L.alive[:L.count]).tolist() + [False]
    alive = L.alive.tolist()
    load, step = loads.load_l, loads.step_l
    back = 0
    for _ in range(passes):
        sent = 0
        for i in range(len(problem)):
            q, old, now = previous.plane[i], tuple(previous.path[i]), r.path[i]
            if q < 0 or not old or old == now or not all(alive[x] for x in old) \
                    or problem.pinned_elsewhere(i, q):
                continue
            loads.add(i, r.plane[i], now, -1.0)
            if all(load[x] + step[x] <= value + 1e-9 for x in old if fab[x]):
                r.plane[i], r.middle[i], r.path[i] = q, previous.middle[i], old
                loads.add(i, q, old)
                sent += 1
            else:
                loads.add(i, r.plane[i], now)
        back += sent
        if not sent:
            break
    return back


def most_flows(problem: ClosProblem, r: ClosRouting) -> int:
    """Flows on the busiest link of ``r`` (its paths hold fabric links only): with two or
    more, layer 2 and the jobs search may still gain. O(F x hops)."""
    ids = np.fromiter(itertools.chain.from_iterable(r.path), dtype=np.int64)
    return int(np.bincount(ids).max()) if ids.size else 0


def _at(load: np.ndarray, fab: np.ndarray, alpha: float) -> set[int]:
    """The alive fabric links at load ``alpha``."""
    return set(np.flatnonzero(fab & (load >= alpha - 1e-9)).tolist())


def previous_routes(problem: ClosProblem, previous: list) -> ClosRouting:
    """The routes in force of the problem's flows: per flow of ``problem.flows`` its parts
    (``clos_routes``: switch names, members kept on a fabric with bundles) or None, as a
    routing in ``inter`` order; plane -1 for a flow without one (None or no parts), a split
    flow (several parts) and parts that are not a route of this flow (a fabric changed under
    a stored state). O(F) dict look-ups in Python, then numpy per plane (``hop_rows``)."""
    f, L = problem.fabric, problem.links
    r = empty_routing(len(problem))
    if not any(previous):  # nothing in force (a first POST): no look-up
        return r
    found: dict[int, tuple[list, list, list]] = {}  # plane -> flows, middles, members
    for i, pos in enumerate(problem.inter):
        parts = previous[pos]
        if not parts or len(parts) != 1:
            continue
        names = parts[0][0]
        q = f.plane_of.get(names[0], -1)
        if q < 0:
            continue
        a, b, p, s = problem.ends(i, q)
        leaves = f.planes[q].leaves
        if names[0] != leaves[a] or names[-1] != leaves[b]:
            continue
        if len(names) == 3 and p == s:
            at = L.agg_at.get(names[1])
            m = at[2] if at is not None and at[:2] == (q, p) else -1
        elif len(names) == 5 and p != s:
            at = L.core_at.get(names[2])
            m = at[1] if at is not None and at[0] == q else -1
            g = int(L.group_of_core[q][m]) if m >= 0 else -1
            if L.agg_at.get(names[1]) != (q, p, g) or L.agg_at.get(names[3]) != (q, s, g):
                m = -1
        else:
            m = -1
        if m >= 0:
            flows, middles, members = found.setdefault(q, ([], [], []))
            flows.append(i)
            middles.append(m)
            given = members_of(names)
            members.append(given if given and len(given) == len(names) - 1 else None)
    cells = L.cells()
    for q, (flows, middles, members) in found.items():
        rows = hop_rows(problem, q, np.asarray(flows), np.asarray(middles))
        pick = np.zeros(rows.shape, dtype=np.int64)
        for j, given in enumerate(members):
            if given is not None:  # a fabric with bundles: the members named
                cols = (0, 3) if len(given) == 2 else range(4)
                pick[j, list(cols)] = given
        pick[(pick < 0) | (pick >= cells.width)] = 0
        ids = np.where(rows >= 0, cells.members[rows.clip(0), pick], -1)
        for i, m, path in zip(flows, middles, paths_of(ids)):
            r.plane[i], r.middle[i], r.path[i] = q, m, path
    return r
