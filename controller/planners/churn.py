"""Re-planning a running fabric with few moved flows.

Moving a running flow costs packets reordered or paused (for RDMA, a go-back-N), so a re-plan
starts from the installed routing: every flow whose spine is still usable stays, new flows and
flows whose path lost a link are placed under the current capacity (by an alternating chain
if they do not fit directly), and other flows move only along chains that lower the max link
load towards its lower bound (``planners.repair``), then the links at the max
(``planners.layer2``). The jobs objective's search off the request path is ``clos_jobs``
from the routes in force (``clos_offpath``, on every fabric); here it only names the
request path's group. A fresh ``auto`` plan, with its spines renamed
to agree with the installed routing as far as the fabric's symmetry allows (a maximum-weight
matching per class of interchangeable spines), is taken instead only when it is strictly
better on the max load, or on the links at it by more than max(2, 10%).

    >>> from controller.model.clos import Clos
    >>> from controller.model.jobs import Job
    >>> from controller.model.problem import Problem
    >>> f = Clos.generate(4, 4, 2).as_leaf_spine()
    >>> a = Job("a", rings=[["h0_0", "h1_0", "h2_0", "h3_0"]], ring_bytes=1)
    >>> b = Job("b", rings=[["h0_1", "h2_1"]], ring_bytes=1)
    >>> old = [((0, 1.0),)] * 4                    # job a, all four flows on s0
    >>> new = replan(Problem.build(f, [a, b]), old + [None, None])
    >>> new.info["moved_flows"], new.info["new_flows"], new.spines()[:4]
    (0, 2, [0, 0, 0, 0])

Cost: O(F + L S) to rebuild the loads, plus the chains and one fresh ``auto`` run when the
kept routing stays above the bound; O(S^3) per class of interchangeable spines to rename.
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from controller.errors import InputError
from controller.model.loads import link_flows
from controller.model.problem import Assignment, Problem
from controller.planners.auto import (
    LAYER2_LEVELS,
    REPAIR_TIME_LIMIT,
    auto,
    check_options,
    degree_bound,
    lower_bound,
)
from controller.planners.clos_churn import why_moved
from controller.planners.equitable import common_spines
from controller.planners.greedy import LoadCounters, group_order
from controller.planners.layer2 import fewer_at_level, layer2_lower_bound, links_at, side_bounds
from controller.planners.repair import NO_SPINE, Routing, bits, gc_paused, reduce_to


def previous_spines(problem: Problem, previous: list) -> tuple[list[int], list[int]]:
    """Per inter-leaf flow: its installed spine, or NO_SPINE for new flows (None, or empty
    parts: the controller's mark for a flow that had no alive spine); and the inter-leaf flows
    whose installed path is no longer usable (or was split)."""
    if len(previous) != len(problem.flows):
        raise InputError(f"previous routes: {len(previous)} entries for "
                         f"{len(problem.flows)} flows")
    spines, broken = [], []
    for k, pos in enumerate(problem.inter):
        parts = previous[pos]
        if not parts:  # a new flow (None), or one that had no alive spine (empty parts)
            spines.append(NO_SPINE)
            continue
        s = parts[0][0] if len(parts) == 1 else NO_SPINE
        if s is not None and s != NO_SPINE and problem.usable[k] >> s & 1:
            spines.append(s)
        else:
            spines.append(NO_SPINE)
            broken.append(k)
    return spines, broken


def align_spines(problem: Problem, spines: list[int], prev: list[int]) -> list[int]:
    """Rename spines within classes of interchangeable spines (same links up at every leaf) so
    that as many flows as possible keep their previous spine; loads and feasibility unchanged.

    >>> from controller.model.clos import Clos
    >>> from controller.model.jobs import Flow, Job
    >>> f = Clos.generate(3, 2, 2).as_leaf_spine()
    >>> p = Problem.build(f, [Job("j", explicit=[Flow("j", "h0_0", "h1_0", 1),
    ...                                          Flow("j", "h0_1", "h1_1", 1)])])
    >>> align_spines(p, [0, 1], [2, 0])
    [2, 0]
    """
    # imported here: scipy.optimize takes about 0.3 s to import, a fifth of the controller's start
    from scipy.optimize import linear_sum_assignment
    fabric = problem.fabric
    S = len(fabric.spines)
    classes: dict[tuple, list[int]] = {}
    for s in range(S):
        column = tuple(m >> s & 1 for m in fabric.up_mask)
        classes.setdefault(column, []).append(s)
    rename = list(range(S))
    for members in classes.values():
        if len(members) < 2:
            continue
        pos = {s: i for i, s in enumerate(members)}
        agree = np.zeros((len(members), len(members)))
        for s, p in zip(spines, prev):
            if s in pos and p in pos:
                agree[pos[s], pos[p]] += 1
        rows, cols = linear_sum_assignment(agree, maximize=True)
        for i, j in zip(rows, cols):
            rename[members[i]] = members[j]
    return [rename[s] for s in spines]


def _moved(prev: list[int], spines: list[int]) -> list[int]:
    return [k for k, (p, s) in enumerate(zip(prev, spines)) if p != NO_SPINE and p != s]


def replan(problem: Problem, previous: list, objective: str = "flows",
           ilp_time_limit: float = 0.0, layer1_only: bool = False) -> Assignment:
    """Plan ``problem`` from the installed routing ``previous`` with few moved flows.

    ``previous``: per flow of ``problem.flows`` (the routes format's order) its installed
    ``(spine, share)`` parts, or None (or empty parts) for a new, intra-leaf or unroutable
    flow. ``info`` adds to auto's:
    ``moved_flows`` (installed flows whose spine changed), ``moved`` (their positions in
    ``problem.flows``), ``forced`` (of those, how many had lost their path), ``new_flows``,
    ``source`` ("installed" or "fresh": which routing the result grew from).

    ``layer1_only`` (the controller's request path, ``_replan_layer1``): new flows placed the
    greedy's way on top of the kept ones, chains down to the lower bound, a fresh layer-1
    ``auto`` only when they miss it; no layer 2 nor ILP. ``info["deferred"]`` is then true
    when the off-path stages may still improve the routing (``controller.service.anytime``),
    and ``objective`` (the group's, flows or jobs) is in the info. Else every stage by flow
    counts: the jobs objective's search is ``clos_jobs`` (``clos_offpath``), and asking it
    here is a ValueError.
    """
    check_options(ilp_time_limit, objective)
    with gc_paused():
        if layer1_only:
            return _replan_layer1(problem, previous, objective)
        if objective != "flows":
            raise ValueError("churn.replan: off the request path it plans by flow counts; the "
                             "jobs objective's search is clos_jobs (planners.clos_offpath)")
        return _replan(problem, previous, ilp_time_limit)


def _installed(problem: Problem, previous: list, prev: list[int], broken: list[int]):
    """The installed spine per inter-leaf flow (-2 for a broken flow with no single spine),
    to count moves."""
    installed = list(prev)
    for k in broken:  # remember the old spine to count the forced move
        parts = previous[problem.inter[k]]
        installed[k] = parts[0][0] if len(parts) == 1 and parts[0][0] is not None else -2
    return installed


def _replan_layer1(problem: Problem, previous: list, objective: str) -> Assignment:
    """The request path: about the greedy's cost when its placement meets the lower bound.

    Kept flows stay; new and broken flows go, in the greedy's order (largest leaf group
    first), to their least-loaded usable spine given everything placed so far (the greedy's
    level masks). Only when the max load is then above the lower bound: with nothing in force
    a layer-1 ``auto`` (construction and repair) at once; else chains lower it
    (``reduce_to``), and if they miss the bound a fresh layer-1 ``auto`` renamed to the
    installed spines is taken when strictly better on the max load. O(F S / word size) on the
    first path."""
    t0 = time.perf_counter()
    prev, broken = previous_spines(problem, previous)
    installed = _installed(problem, previous, prev, broken)
    counters = LoadCounters(len(problem.fabric.leaves), len(problem.fabric.spines))
    src, dst, usable = problem.src_leaf, problem.dst_leaf, problem.usable
    spines = list(prev)
    add, best = counters.add, counters.best
    for k, s in enumerate(prev):
        if s != NO_SPINE:
            add(src[k], s, dst[k])
    for k in group_order(problem):
        if spines[k] == NO_SPINE:
            s = best(src[k], dst[k], usable[k])
            add(src[k], s, dst[k])
            spines[k] = s
    value = max((len(le) for le in counters.up_le + counters.down_le), default=0)
    lb = degree_bound(problem)  # <= lower_bound: equal to value proves it optimal at once
    if value > lb and common_spines(problem) is None:
        lb = lower_bound(problem)
    source, fresh = "installed", None
    if value > lb and all(s == NO_SPINE for s in prev):
        # nothing in force to keep: auto's layer 1 at once (the equitable colouring, exact on
        # every layer with only whole spines down, in 3-5 ms at 64 x 32 where the chains
        # from the greedy's placement took 18-28 ms)
        fresh = auto(problem, ilp_time_limit=0, layer1_only=True)
        if fresh.info["max_link_load"] < value:
            spines, value, source = fresh.spines(), fresh.info["max_link_load"], "fresh"
    if value > lb:
        r = Routing(problem, spines)
        deadline = time.perf_counter() + REPAIR_TIME_LIMIT
        for cap in range(value - 1, lb - 1, -1):
            if not reduce_to(r, cap, deadline):
                break
        spines, value = list(r.spine), r.max_load()
        if value > lb and fresh is None:
            fresh = auto(problem, ilp_time_limit=0, layer1_only=True)
            if fresh.info["max_link_load"] < value:
                spines = align_spines(problem, fresh.spines(), installed)
                value, source = fresh.info["max_link_load"], "fresh"
    moved = _moved(installed, spines)
    info = {"stage": "churn-layer1", "source": source, "lower_bound": lb,
            "max_link_load": value, "optimal": value <= lb,
            "links_at_max": None, "links_at_max_lower_bound": None,
            "optimal_layers": {"max_link_load": value <= lb},
            # layer 2 (links at the max) and the jobs search can only gain with 2+ flows on
            # some link; the ILP only with a gap to the bound
            "deferred": value >= 2, "objective": objective, "moved_flows": len(moved),
            "moved": [problem.inter[k] for k in moved], "forced": len(broken),
            "new_flows": sum(1 for p in prev if p == NO_SPINE) - len(broken),
            "why": why_moved(len(moved), len(broken), source, value, lb),
            "ms": {"churn": round((time.perf_counter() - t0) * 1e3, 3)}}
    return Assignment.unsplit(spines, info)


def _replan(problem: Problem, previous: list, ilp_time_limit: float):
    t0 = time.perf_counter()
    prev, broken = previous_spines(problem, previous)
    kept = prev  # broken flows are NO_SPINE already
    installed = _installed(problem, previous, prev, broken)
    lb = lower_bound(problem)
    r = Routing(problem, kept)
    c = max(lb, r.max_load())
    r.set_capacity(c)
    S, LS, load = r.S, r.LS, r.load
    todo = sorted((k for k, s in enumerate(kept) if s == NO_SPINE),
                  key=lambda k: len(bits(problem.usable[k])))
    for k in todo:
        if not r.insert(k):
            a, b = r.src[k], r.dst[k]
            u = min(bits(r.usable[k]),
                    key=lambda s: (max(load[a * S + s], load[LS + b * S + s]), s))
            r.add_route(k, u)
    value = r.max_load()
    deadline = time.perf_counter() + REPAIR_TIME_LIMIT
    for cap in range(value - 1, lb - 1, -1):
        if not reduce_to(r, cap, deadline):
            break
    top = r.max_load()
    floor = side_bounds(problem, top)
    for cap in range(top - 1, max(top - 1 - LAYER2_LEVELS, 0), -1):  # layer 2: chains only
        fewer_at_level(r, cap, deadline, 4096 if cap == top - 1 else 256,
                       floor if cap == top - 1 else None)
    spines, value, source = list(r.spine), r.max_load(), "installed"
    reason = source  # why flows moved beyond those that must (``clos_churn.why_moved``)
    count = links_at(problem, spines, value)
    info: dict = {}
    lb2 = None
    if value > lb or count > layer2_lower_bound(problem, value):
        # a fresh plan may be better: taken only when strictly better on the max load, or on
        # the links at it by more than max(2, 10%) (moving flows has a cost)
        fresh = auto(problem, ilp_time_limit=ilp_time_limit)
        f_value, f_count = fresh.info["max_link_load"], fresh.info["links_at_max"]
        if f_value < value or (f_value == value and f_count < count - max(2, 0.1 * count)):
            spines = align_spines(problem, fresh.spines(), installed)
            reason = "fresh" if f_value < value else "fewer links at the max"
            value, count, source = f_value, f_count, "fresh"
        lb = max(lb, fresh.info["lower_bound"])
        if fresh.info["optimal"] and fresh.info["max_link_load"] == value:
            lb = value
        if f_value == value:
            lb2 = fresh.info["links_at_max_lower_bound"]
    if lb2 is None:
        lb2 = layer2_lower_bound(problem, value)
    info.update(stage="churn", source=source, lower_bound=lb, max_link_load=value,
                optimal=value <= lb, links_at_max=count, links_at_max_lower_bound=lb2,
                optimal_layers={"max_link_load": value <= lb,
                                "links_at_max": value <= lb and count <= lb2})
    moved = _moved(installed, spines)
    info.update(objective="flows", moved_flows=len(moved),
                moved=[problem.inter[k] for k in moved],
                forced=len(broken), new_flows=sum(1 for p in prev if p == NO_SPINE) - len(broken),
                why=why_moved(len(moved), len(broken), reason, value, lb),
                ms={"churn": round((time.perf_counter() - t0) * 1e3, 3)})
    return Assignment.unsplit(spines, info)


JOB_MIN_GAIN = 0.002  # relative drop of the mean job slowdown worth moving running flows
JOB_GAIN_PER_MOVE = 1e-4  # ... and this much more (relative) per running flow moved
MOVES_PER_LINK = 2  # at the same max: a link fewer at it is worth this many moved flows


def plan_rank(problem: Problem, spines: list[int], objective: str = "flows",
              predicted: dict | None = None) -> tuple:
    """A routing's rank on ``objective``: (max link load, links at it); with "jobs" the
    predicted (mean, worst) job slowdown first (``objective.job_slowdowns``, or
    ``predicted``: job -> slowdown when the caller has it). Compare ranks with
    ``worth_moving``. O(F + L S), plus the prediction."""
    v = link_flows(problem, spines)
    top = max(v, default=0)
    count = sum(1 for x in v if x == top) if top else 0
    if objective != "jobs":
        return top, count
    from controller.planners.objective import job_slowdowns
    if predicted is None:
        predicted = job_slowdowns(problem, spines)
    values = list(predicted.values()) or [1.0]
    return sum(values) / len(values), max(values), top, count


class Moving(NamedTuple):
    """An off-path routing judged against the routes in force: what the controller installs
    (``paths``: flow position -> its new parts; None when not worth it), the ranks before
    and after (``plan_rank``), the running flows it moves (the count the rule weighed) and
    why (``why``: ``moving_gain``'s sentence with that count; None when not worth it)."""
    paths: dict | None
    before: tuple
    after: tuple
    moved: int
    why: str | None


def worth_moving(before: tuple, after: tuple, objective: str = "flows", moved: int = 0
                 ) -> bool:
    """Whether a routing ranked ``after`` (``plan_rank``) should replace the running one,
    ranked ``before``, when it moves ``moved`` running flows (issue 74: a running flow moves
    only for a gain in the objective, one that grows with the flows moved): ``moving_gain``
    finds one.

    >>> worth_moving((9, 710), (9, 384), moved=381)  # 326 links fewer: 190 moves' worth
    True
    >>> worth_moving((9, 710), (9, 700), moved=381), worth_moving((10, 3), (9, 300), moved=60)
    (False, True)
    >>> worth_moving((1.2, 1.5, 9, 10), (1.19, 1.5, 9, 10), "jobs", moved=10)  # 0.83% > 0.3%
    True
    >>> worth_moving((1.2, 1.5, 9, 10), (1.19, 1.5, 9, 10), "jobs", moved=100)  # < 1.2%
    False
    """
    return moving_gain(before, after, objective, moved) is not None


def moving_gain(before: tuple, after: tuple, objective: str = "flows", moved: int = 0
                ) -> str | None:
    """The gain of a routing ranked ``after`` over the running one ranked ``before`` that is
    worth ``moved`` running flows, in words (the decision and its reason in one place); None
    when there is none. By flow counts: a lower max link load, or the same max with at least
    one link fewer at it per ``MOVES_PER_LINK`` moved flows. With "jobs" (the objective's
    rule: the mean under a bound on the worst): never a worse worst job (beyond float
    noise), and a mean lower by ``JOB_MIN_GAIN`` plus ``JOB_GAIN_PER_MOVE`` per moved flow
    (relative), or no higher and a lower worst or max link load (fewer links at the max
    alone, no job faster, is not worth moved flows).

    >>> moving_gain((10, 3), (9, 300), moved=62)
    'max link load 10 -> 9 (links at it 3 -> 300)'
    >>> moving_gain((1.2, 1.5, 9, 10), (1.19, 1.5, 9, 10), "jobs", 4)
    'mean predicted job slowdown 1.2 -> 1.19 (-0.83%, at least 0.24% for 4 moved flows)'
    """
    if objective != "jobs":
        if after[0] < before[0]:
            return (f"max link load {before[0]:g} -> {after[0]:g} (links at it "
                    f"{before[1]} -> {after[1]})")
        if after < before and before[1] - after[1] >= moved / MOVES_PER_LINK:
            return (f"links at the max link load ({after[0]:g}) {before[1]} -> {after[1]}, "
                    f"at least one fewer per {MOVES_PER_LINK} moved flows")
        return None
    (m0, w0, *flows0), (m1, w1, *flows1) = before, after
    if w1 > w0 * (1 + 1e-6):
        return None
    need = JOB_MIN_GAIN + JOB_GAIN_PER_MOVE * moved
    if m1 < m0 * (1 - need):
        return (f"mean predicted job slowdown {m0:.4g} -> {m1:.4g} "
                f"({(m1 - m0) / m0:+.2%}, at least {need:.2%} for {moved} moved flows)")
    if m1 > m0 * (1 + 1e-9):
        return None
    if w1 < w0 * (1 - 1e-6) or flows1[0] < flows0[0]:
        return (f"worst predicted job slowdown {w0:.4g} -> {w1:.4g}, max link load "
                f"{before[2]:g} -> {after[2]:g}, mean {m0:.4g} -> {m1:.4g}")
    return None


def moved_why(moved: int, gain: str | None) -> str | None:
    """The answer's and the event's ``moved_why`` for an off-path routing that moves
    ``moved`` running flows for ``gain`` (``moving_gain``); None without a gain.

    >>> moved_why(62, moving_gain((10, 3), (9, 300), moved=62))
    '62 running flows moved off the path: max link load 10 -> 9 (links at it 3 -> 300)'
    """
    return None if gain is None else f"{moved} running flows moved off the path: {gain}"
