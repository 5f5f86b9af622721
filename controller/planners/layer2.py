"""The paper's second layer for unsplit routings: among routings with the minimal max load
alpha, fewest directed links at alpha, then the lexicographically smallest sorted load vector.

* ``layer2_lower_bound``: no routing with max load alpha has fewer links at alpha. At a leaf
  side, the n(M) flows confined to a set M of spines fill |M| links holding at most alpha each,
  so at least n(M) - (alpha - 1)|M| of them hold alpha; sides have disjoint links, so the bounds
  add up. M ranges over the side's distinct usable masks and their union (as ``auto``'s layer-1
  bound). Met by the equitable colouring when every flow may use the same spines.
* ``fewer_at_max``: alternating-chain (Kempe) moves that take a flow off a link at alpha and
  place it, by a chain if needed, where no link of the chain reaches alpha
  (``repair.reduce_to(alpha - 1)``), honouring each flow's usable spines; then the same one
  level down (links at alpha - 1), which only moves flows onto links below alpha - 1: the
  sorted load vector never gets worse.
* ``vector_key``: the order on routings (max, links at max, sorted vector).

    >>> from controller.model.clos import Clos
    >>> from controller.model.jobs import Flow, Job
    >>> from controller.model.problem import Problem
    >>> f = Clos.generate(2, 3, 4).as_leaf_spine()
    >>> job = Job("j", explicit=[Flow("j", "h0_0", "h1_0", 1), Flow("j", "h0_1", "h1_1", 1),
    ...                          Flow("j", "h0_2", "h2_0", 1)])
    >>> p = Problem.build(f, [job])      # 3 flows out of l0 over 2 spines: alpha = 2
    >>> spines = [0, 0, 1]               # l0->s0 and s0->l1 both carry 2
    >>> layer2_lower_bound(p, 2), links_at(p, spines, 2)
    (1, 2)
    >>> better = fewer_at_max(p, spines)
    >>> links_at(p, better, 2), vector_key(p, better) < vector_key(p, spines)
    (1, True)
"""
from __future__ import annotations

import time
from collections import Counter

from controller.model.loads import link_flows
from controller.model.problem import Problem
from controller.planners.repair import Routing, bits


def links_at(problem: Problem, spines: list[int], alpha: int | None = None) -> int:
    """Directed links carrying ``alpha`` flows (default: the max load). O(F + L S)."""
    v = link_flows(problem, spines)
    if alpha is None:
        alpha = max(v, default=0)
    return sum(1 for x in v if x == alpha) if alpha else 0


def vector_key(problem: Problem, spines: list[int]) -> tuple:
    """(max load, links at it, sorted load vector): smaller is better on every layer."""
    v = sorted((x for x in link_flows(problem, spines) if x), reverse=True)
    top = v[0] if v else 0
    return top, sum(1 for x in v if x == top), v


def layer2_lower_bound(problem: Problem, alpha: int) -> int:
    """At least this many directed links carry ``alpha`` flows in any routing whose max load is
    ``alpha`` (module docstring). O(F + sum over sides of (distinct masks)^2)."""
    return sum(side_bounds(problem, alpha))


def side_bounds(problem: Problem, alpha: int) -> list[int]:
    """Per leaf side (``Routing``'s rows: uplinks of leaf i at i, downlinks at L + i) the least
    number of its links at ``alpha`` (module docstring)."""
    n = len(problem.fabric.leaves)
    if alpha <= 0:
        return [0] * (2 * n)
    rows: list[Counter] = [Counter() for _ in range(2 * n)]
    for a, b, m in zip(problem.src_leaf, problem.dst_leaf, problem.usable):
        rows[a][m] += 1
        rows[n + b][m] += 1
    out = []
    for row in rows:
        best = 0
        if row:
            items = list(row.items())
            union = 0
            for m, _ in items:
                union |= m
            for cover in {m for m, _ in items} | {union}:
                count = sum(c for m, c in items if not m & ~cover)
                best = max(best, count - (alpha - 1) * len(bits(cover)))
        out.append(best)
    return out


def fewer_at_level(r: Routing, c: int, deadline: float | None = None,
                   budget: int = 4096, floor: list[int] | None = None) -> int:
    """Chain moves that take one flow off links carrying c + 1 flows and place it where no
    link ends above ``c``, except links already above ``c``, which may swap a flow but never
    gain one: the number of links at c + 1 drops and no link above ``c`` gains a flow, so the
    sorted load vector gets lexicographically smaller at every move. Returns the links cleared.
    ``floor``: per leaf side the least links it can have at c + 1 (``side_bounds``); sides
    there are skipped.
    Cost: per target link at most (its flows) chain searches of ``budget`` links each."""
    r.set_capacity(c, hold=True)
    cleared = 0
    S = r.S
    targets = [y for y, v in enumerate(r.load) if v == c + 1]
    at = Counter(y // S for y in targets)
    for x in targets:
        if deadline is not None and time.perf_counter() > deadline:
            break
        if floor is not None and at[x // S] <= floor[x // S]:
            continue  # this leaf side is at its bound: no chain can clear one of its links
        if r.load[x] > c and not r.room[x // S]:
            # x above c and no link of its leaf side below its capacity: the side's flows stay
            # on its links and, with x at c, exceed their capacities, so no chain (which keeps
            # every link within its capacity) places a flow taken off x. What the failed
            # searches leave is the flow sets' take-off and put-back (their order kept);
            # loads, capacities and room masks come back as they were
            on, spine = r.on, r.spine
            for g in sorted(on[x]):
                up, down = (on[y] for y in r.links(g, spine[g]))
                up.discard(g)  # remove_route's order, then add_route's
                down.discard(g)
                up.add(g)
                down.add(g)
            continue
        r.set_link_capacity(x, c)
        for g in sorted(r.on[x]):
            s = r.remove_route(g)
            if r.insert(g, budget):
                cleared += 1
                at[x // S] -= 1
                break
            r.add_route(g, s)
        else:
            r.set_link_capacity(x, c + 1)
    return cleared


def fewer_below(r: Routing, alpha: int, deadline: float | None = None,
                budget: int = 256, keep_order: bool = True) -> int:
    """Below the max (the Clos ``clos_layer2.fewer_below``): ``fewer_at_level`` at the
    next load below ``alpha`` that some link carries, pass after pass while one clears a
    link; the links above it hold their flows, so the max, the links at it and every load
    above the level stay and the sorted load vector gets lexicographically smaller. Returns
    the links cleared. Cost: per pass at most (links at the level x their flows) chain
    searches of ``budget`` links each.

    Without ``keep_order`` (a caller that only reads the spines and loads of ``r``
    afterwards) the pass at level 1 is left out: at c = 0 every link is held at its load, so
    no side has room and it clears nothing (``fewer_at_level``'s skipped searches), ending
    the passes; it would only take flows off and put them back, which reorders the flow sets
    and nothing else."""
    cleared = 0
    while deadline is None or time.perf_counter() <= deadline:
        below = [v for v in r.load if 0 < v < alpha]
        if not below:
            break
        level = max(below)
        if level == 1 and not keep_order:
            if deadline is None or time.perf_counter() <= deadline:
                r.set_capacity(0, hold=True)  # the pass's capacities, as it leaves them
            break
        while deadline is None or time.perf_counter() <= deadline:
            got = fewer_at_level(r, level - 1, deadline, budget)
            cleared += got
            if not got:
                break
        if level in r.load:
            break
        alpha = level  # every link at the level cleared: again at the next load down
    return cleared


def fewer_at_max(problem: Problem, spines: list[int], deadline: float | None = None,
                 levels: int = 2, budget: int = 4096) -> list[int]:
    """``fewer_at_level`` at the max load alpha (c = alpha - 1), then at the next ``levels`` - 1
    loads below it (c = alpha - 2, ...). Returns new spines; the input is not changed."""
    r = Routing(problem, spines)
    alpha = r.max_load()
    floor = side_bounds(problem, alpha)
    for c in range(alpha - 1, max(alpha - 1 - levels, 0), -1):
        if deadline is not None and time.perf_counter() > deadline:
            break
        fewer_at_level(r, c, deadline, budget if c == alpha - 1 else budget // 16,
                       floor if c == alpha - 1 else None)
    return r.spine
