"""Flows sent back to their routes in force after a Clos re-plan, each by at most one
eviction per full link of its way home: fewer moved routes at the same max link load.

Why: ``clos_churn.lower_max`` reaches the bound by moving flows off links at the max, level
by level, in whatever order the search finds them; on the scale benchmark's loaded k = 8
fat-tree a failed core link with 18 routes over it ended with 50-64 moved routes where 32
suffice (``clos_ilp_moves``). Many of those moves were made for a level that a later move
settled anyway. Moving a flow that is off its route already (one that lost its route, a new
one, one the search moved) costs nothing more, so a moved flow goes home wherever the flows
in its way can be pushed aside among those "free" flows alone:

1. flow j, moved from its alive route in force, is put back on it;
2. each fabric link of that route now above ``value`` (the max to keep) sheds one free flow
   (not j, at most one per link) to that flow's best option, taken only when that option
   stays at or below ``value``;
3. if every link is back at or below ``value`` the moves stay (one route fewer moved),
   else they are undone.

Passes repeat while some flow went home. The max never rises above ``value`` and a flow at
home is never taken from it (only free flows shed), so each kept step lowers the moved
routes by one.

    >>> from controller.model.clos import Clos
    >>> from controller.model.clospaths import ClosProblem, ClosRouting
    >>> from controller.model.jobs import Job
    >>> from controller.planners.clos_auto import clos_auto
    >>> from controller.planners.clos_loads import ClosLoads, score
    >>> f = Clos.fat_tree(4)
    >>> p = ClosProblem.build(f, [Job("r", rings=[["h0_0", "h2_0", "h4_0", "h6_0"]],
    ...                               ring_bytes=1)])
    >>> before = clos_auto(p)
    >>> after = ClosRouting(list(before.plane), list(before.middle), list(before.path), {})
    >>> q, m = after.plane[0], (after.middle[0] + 1) % 4  # flow 0 on another core
    >>> after.middle[0], after.path[0] = m, ClosLoads(p).pick(0, q, m)
    >>> send_home(p, after, before, score(p, after)[0], set()), after.path == before.path
    (1, True)

Cost: per pass O(M x H x F_l x P x middles), M moved flows, H hops, F_l flows on a link
(``ClosLoads.best`` per candidate), bounded by ``work`` candidates looked at.
"""
from __future__ import annotations

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting
from controller.planners.clos_loads import ClosLoads

HOME_WORK = 3000  # candidate evictions looked at, all passes together
HOME_PASSES = 4
SHED_DEPTH = 3  # moves in one chain of free flows pushed aside


def send_home(problem: ClosProblem, r: ClosRouting, previous: ClosRouting, value: float,
              forced: set[int], passes: int = HOME_PASSES, work: int = HOME_WORK) -> int:
    """Move flows of ``r`` back to their alive routes in force (``previous``, ``inter``
    order, plane -1 for none) where the module's rule allows it at max ``value`` on the
    fabric links; ``forced``: flows whose route in force died (free to move, never home).
    Changes ``r`` in place; the flows sent home."""
    n = len(problem)
    L = problem.links
    alive = L.alive.tolist()
    fab = ((L.tier > 0) & L.alive[:L.count]).tolist() + [False]
    loads = ClosLoads(problem, r)
    load = loads.load_l
    on: dict[int, set[int]] = {}
    for i, path in enumerate(r.path):
        for x in path:
            on.setdefault(x, set()).add(i)

    def place(i: int, q: int, m: int, path: tuple) -> None:
        loads.add(i, r.plane[i], r.path[i], -1.0)
        for x in r.path[i]:
            on[x].discard(i)
        r.plane[i], r.middle[i], r.path[i] = q, m, path
        loads.add(i, q, path)
        for x in path:
            on.setdefault(x, set()).add(i)

    def free(i: int) -> bool:  # moving it costs no route more: new, forced or moved
        return previous.plane[i] < 0 or i in forced or tuple(r.path[i]) != tuple(
            previous.path[i])

    def homeable(i: int) -> bool:
        q, old = previous.plane[i], tuple(previous.path[i])
        return (q >= 0 and bool(old) and i not in forced and free(i)
                and all(alive[x] for x in old) and not problem.pinned_elsewhere(i, q))

    back, budget = 0, [work]
    for _ in range(passes):
        sent = 0
        for j in [i for i in range(n) if homeable(i)]:
            if budget[0] <= 0:
                return back + sent
            if not homeable(j):
                continue
            log = [(j, r.plane[j], r.middle[j], r.path[j])]
            place(j, previous.plane[j], previous.middle[j], tuple(previous.path[j]))
            over = [x for x in r.path[j] if fab[x] and load[x] > value + 1e-9]
            if all(_shed(loads, r, x, j, value, on, place, log, free, budget)
                   for x in over):
                sent += 1
                continue
            for i, q, m, path in reversed(log):
                place(i, q, m, path)
        back += sent
        if not sent:
            break
    return back


def _shed(loads: ClosLoads, r: ClosRouting, x: int, j: int, value: float, on: dict, place,
          log: list, free, budget: list[int], depth: int = SHED_DEPTH,
          options: int = 8) -> bool:
    """Link ``x`` back to at most ``value``: a free flow over it (off its route in force,
    not ``j``) moves to an option at or below ``value`` on every fabric link, or (``depth``
    > 1) to one that is one flow over on a single link, which sheds in turn, an ejection
    chain of free flows; moves in ``log`` (undone here where a branch fails). True when
    ``x`` is then at or below ``value``."""
    load, step = loads.load_l, loads.step_l
    if load[x] <= value + 1e-9:
        return True  # an earlier shed emptied it
    for g in sorted(on.get(x, ())):
        if g == j or not free(g):
            continue
        budget[0] -= 1
        if budget[0] < 0:
            return False
        q0, path = r.plane[g], r.path[g]
        loads.add(g, q0, path, -1.0)
        tried = []
        for q in range(loads.planes):
            c = loads.plane_costs(g, q, hosts=False).ravel()
            tried += [(float(c[m]), q, int(m)) for m in np.argsort(c, kind="stable")[:options]
                      if np.isfinite(c[m])]
        steps = []
        for cost, q, m in sorted(tried)[:options]:
            new = loads.pick(g, q, m)
            if x in new or new == path:
                continue
            block = [y for y in new if load[y] + step[y] > value + 1e-9]
            if not block:
                steps = [(q, m, new, None)]
                break
            if depth > 1 and len(block) == 1 and block[0] != x:
                steps.append((q, m, new, block[0]))
        loads.add(g, q0, path)
        for q, m, new, y in steps:
            mark = len(log)
            log.append((g, q0, r.middle[g], path))
            place(g, q, m, new)
            if y is None or _shed(loads, r, y, g, value, on, place, log, free, budget,
                                  depth - 1, options):
                if load[x] <= value + 1e-9:
                    return True
            while len(log) > mark:
                i, qi, mi, pi = log.pop()
                place(i, qi, mi, pi)
    return False
