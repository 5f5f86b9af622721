"""``auto``: the best proven unsplit routing, as fast as possible, by escalating stages, on
both layers of the paper's objective (max link load; then fewest links at it, then the sorted
load vector).

1. Construction. When every flow may use the same spines (only whole spines down), the
   equitable colouring onto them (``planners.equitable``): optimal on every layer, proven.
   Otherwise the equitable colouring onto the alive spines, the flows it puts on a failed link
   re-inserted by alternating chains under the lower bound (``equitable_insert``); if some flow
   does not fit, the paper's greedy.
2. Repair. While the max link load is above the lower bound, move flows off the busiest links
   by alternating chains (``planners.repair``), honouring each flow's usable spines.
3. ILP. Only while a gap to the lower bound remains and ``ilp_time_limit`` > 0: HiGHS asked
   for a routing strictly better than the incumbent (``planners.ilp``), within the budget.
   "Infeasible" proves the incumbent optimal; the result is never worse than the incumbent.
4. Layer 2. Chain moves that clear links at the max without any link reaching it
   (``layer2.fewer_at_level``), skipping leaf sides already at their bound; then below the
   max the same at the next load down that some link carries, and the next while a level is
   cleared entirely (``layer2.fewer_below``, as Clos auto's ``clos_layer2.fewer_below``: the
   parity tests hold both to the same sorted load vector); with ``ilp_time_limit`` > 0 (off
   the request path) and a gap left, the layer-2 MILP (``ilp.ilp_layer2``) within what
   remains of the budget.

With ``objective="jobs"`` a deterministic local search then lowers the mean predicted job
slowdown, the worst job kept within that of the best start (``planners.objective``,
``planners.jobmean``), starting from the one of this routing, the greedy's and edge
colouring's with the lowest mean by the shared prediction (``model.iteration``); ``stage`` is
then "jobs" when it moved flows. The controller's request path runs none of this
(``churn.replan(layer1_only=True)``): it follows off the path (``planners.offpath``).

The lower bound is the strongest of ceil(flows / spines) over every leaf side and every set of
spines that some of its flows are confined to (failed links confine flows), which equals
``Problem.lower_bound`` on fabrics with whole spines only. With failed links the optimum can
still exceed every such bound; then only the ILP can prove optimality.

``info``: ``stage`` (construction, repair, ilp or jobs: the stage whose routing is returned),
``lower_bound``, ``max_link_load``, ``optimal`` (layer 1, true only when proven: the max load
equals the lower bound, or the ILP proved it), ``links_at_max`` and
``links_at_max_lower_bound`` (``layer2.layer2_lower_bound``, or the MILP's bound),
``optimal_layers`` (per layer: max_link_load, links_at_max, and with the jobs objective
worst_slowdown), ``ms`` per stage, the ILPs' reports under ``ilp`` and ``layer2_ilp``.

    >>> from controller.model.clos import Clos
    >>> from controller.model.jobs import Job
    >>> from controller.model.problem import Problem
    >>> f = Clos.generate(2, 4, 2).as_leaf_spine()
    >>> job = Job("r", rings=[["h0_0", "h1_0", "h2_0", "h3_0", "h0_1", "h2_1"]], ring_bytes=1)
    >>> a = auto(Problem.build(f, [job]))
    >>> a.info["stage"], a.info["max_link_load"], a.info["optimal"]
    ('construction', 1, True)
    >>> a.info["links_at_max"], a.info["optimal_layers"]["links_at_max"]
    (12, True)

Cost: construction O(F x path), repair and layer 2 O(links cleared x links visited), the ILPs
only within their budget: 2.5-14 ms at 64 x 32 (1,568-1,920 flows) without the ILPs
(bench/planner.json, section layer2).
"""
from __future__ import annotations

import math
import time
from collections import Counter

from controller.errors import InputError
from controller.model.loads import max_link_flows
from controller.model.problem import Assignment, Problem
from controller.planners.edge_coloring import bipartite_edge_colouring
from controller.planners.equitable import common_spines, equitable_spines
from controller.planners.greedy import greedy_spines
from controller.planners.layer2 import fewer_at_level, fewer_below, links_at, side_bounds
from controller.planners.registry import OBJECTIVES
from controller.planners.repair import NO_SPINE, Routing, bits, gc_paused, insert_all, reduce_to

ILP_MAX_VARIABLES = 400_000  # beyond this the model alone takes seconds and GBs: not tried
REPAIR_TIME_LIMIT = 2.0  # seconds; repair keeps its best routing so far when time is up
LAYER2_LEVELS = 2  # layer-2 chain moves at the max load and the load below it


def check_options(ilp_time_limit, objective) -> None:
    """Clear errors for bad options (shared by auto and the churn planner)."""
    if objective not in OBJECTIVES:
        raise InputError(f"unknown objective {objective!r} (choose from {', '.join(OBJECTIVES)})")
    if (isinstance(ilp_time_limit, bool) or not isinstance(ilp_time_limit, (int, float))
            or not math.isfinite(ilp_time_limit) or ilp_time_limit < 0):
        raise InputError(f"ilp_time_limit must be a number of seconds >= 0 (0: no ILP stage), "
                         f"got {ilp_time_limit!r}")


def _side_degrees(problem: Problem) -> list[int]:
    """Inter-leaf flows leaving leaf i (index i) and entering it (index L + i). O(F)."""
    n = len(problem.fabric.leaves)
    deg = [0] * (2 * n)
    for a in problem.src_leaf:
        deg[a] += 1
    for b in problem.dst_leaf:
        deg[n + b] += 1
    return deg


def _degree_bound(problem: Problem, deg: list[int]) -> int:
    n = len(problem.fabric.leaves)
    best = 0
    for i, mask in enumerate(problem.fabric.up_mask):
        d = max(deg[i], deg[n + i])
        if d:
            best = max(best, -(-d // len(bits(mask))))
    return best


def degree_bound(problem: Problem) -> int:
    """``Problem.lower_bound`` (ceil(leaf degree / its up links)) in one pass. O(F + L)."""
    return _degree_bound(problem, _side_degrees(problem))


def lower_bound(problem: Problem) -> int:
    """max over leaf sides of ceil(n(M) / |M|), M a set of spines and n(M) the flows of that
    side whose usable spines all lie in M; M ranges over each side's distinct usable masks and
    their union. O(F + sum of (distinct masks per side)^2).

    >>> from controller.model.clos import Clos
    >>> from controller.model.jobs import Flow, Job
    >>> f = Clos.generate(3, 3, 2).as_leaf_spine().with_down({("l1", "s0"), ("l1", "s1"), ("l2", "s0"),
    ...                                         ("l2", "s1")})
    >>> job = Job("j", explicit=[Flow("j", "h0_0", "h1_0", 1), Flow("j", "h0_1", "h2_0", 1)])
    >>> p = Problem.build(f, [job])    # both flows from l0 can use only s2
    >>> p.lower_bound(), lower_bound(p)
    (1, 2)
    """
    n = len(problem.fabric.leaves)
    deg = _side_degrees(problem)
    best = _degree_bound(problem, deg)
    masks = set(problem.usable)
    if len(masks) <= 1:  # every flow confined to the same spines
        return max([best] + [-(-max(deg) // len(bits(m))) for m in masks])
    rows: list[Counter] = [Counter() for _ in range(2 * n)]
    for a, b, m in zip(problem.src_leaf, problem.dst_leaf, problem.usable):
        rows[a][m] += 1
        rows[n + b][m] += 1
    for row in rows:
        if not row:
            continue
        items = list(row.items())
        union = 0
        for m, _ in items:
            union |= m
        for cover in [m for m, _ in items] + [union]:
            count = sum(c for m, c in items if not m & ~cover)
            best = max(best, -(-count // len(bits(cover))))
    return best


def construct(problem: Problem, lb: int) -> tuple[list[int], Routing | None]:
    """When every flow may use the same spines, the equitable colouring onto them (optimal on
    every layer). Otherwise the equitable colouring onto the alive spines with the flows it puts
    on a failed link inserted by chains (``equitable_insert``), else the greedy. The spines and
    the chain state when there is one."""
    common = common_spines(problem)
    if common is not None:
        return equitable_spines(problem, common), None
    r = equitable_insert(problem, lb)
    if r is not None:
        return r.spine, r
    return greedy_spines(problem), None


def koenig_partial(problem: Problem) -> list[int]:
    """Koenig colouring onto the alive spines, NO_SPINE for flows whose spine has a dead link
    on their path. Loads stay <= ceil(Delta / alive spines) <= the lower bound."""
    alive = problem.fabric.alive_spines()
    edges = list(zip(problem.src_leaf, problem.dst_leaf))
    out = []
    for k, c in enumerate(bipartite_edge_colouring(edges, common_first=True)):
        s = alive[c % len(alive)]
        out.append(s if problem.usable[k] >> s & 1 else NO_SPINE)
    return out


def _descend(r: Routing, lower: int, deadline: float | None) -> Routing:
    for c in range(r.max_load() - 1, lower - 1, -1):
        if not reduce_to(r, c, deadline):
            break
    return r


def repair_down(problem: Problem, spines: list[int], lower: int, value: int,
                deadline: float | None = None) -> tuple[list[int], int]:
    """Lower the max load towards ``lower`` by chains; the routing and its max load. Never
    worse than the input on the max load (nor on the count of links at it).

    Tries, until one meets ``lower``: (1) Koenig colouring with the flows it puts on a dead
    link re-inserted by chains, most constrained first (cheap: few flows to insert);
    (2) chains moving flows off the input's links above the bound, one level at a time;
    (3) insertion of every flow from scratch, most constrained first.
    """
    if value <= lower:
        return spines, value
    by_constraint = sorted(range(len(problem)), key=lambda k: len(bits(problem.usable[k])))
    best = None
    partial = koenig_partial(problem)
    r = _descend(insert_all(problem, lower, [k for k in by_constraint
                                             if partial[k] == NO_SPINE], start=partial,
                            deadline=deadline), lower, deadline)
    if r.max_load() < value:
        best = r
    if best is None or best.max_load() > lower:
        r = _descend(Routing(problem, spines), lower, deadline)
        if best is None or r.max_load() < best.max_load() or (
                r.max_load() == value and best.max_load() == value):
            best = r
    if best.max_load() > lower and (deadline is None or time.perf_counter() < deadline):
        r = _descend(insert_all(problem, lower, by_constraint, deadline=deadline), lower,
                     deadline)
        if r.max_load() < best.max_load():
            best = r
    return best.spine, best.max_load()


def auto(problem: Problem, ilp_time_limit: float = 10.0, objective: str = "flows",
         job_budget: int | None = None, layer1_only: bool = False,
         job_clock=None) -> Assignment:
    """The escalating planner (module docstring). ``job_budget``: move evaluations of the
    ``jobs`` objective's search (default ``objective.JOB_BUDGET``); ``job_clock``: its time
    budget (``jobs_stop.Clock``, none by default). ``layer1_only``: stages 1
    and 2 only (construction, repair: what the request path runs), no ILP, layer 2 nor jobs
    search; ``info["links_at_max_lower_bound"]`` is then not computed (None)."""
    check_options(ilp_time_limit, objective)
    with gc_paused():
        if layer1_only:
            return _layer1(problem)
        return _auto(problem, ilp_time_limit, objective, job_budget, job_clock)


def _layer1(problem: Problem) -> Assignment:
    """Construction and repair: the max link load at its lower bound where chains reach it."""
    t0 = time.perf_counter()
    common = common_spines(problem)
    lb = degree_bound(problem) if common is not None else lower_bound(problem)
    spines, _ = construct(problem, lb)
    value = max_link_flows(problem, spines)
    stage = "construction"
    if value > lb:
        repaired, new_value = repair_down(problem, spines, lb, value,
                                          deadline=t0 + REPAIR_TIME_LIMIT)
        if repaired != spines:
            spines, value, stage = repaired, new_value, "repair"
    return Assignment.unsplit(spines, {
        "stage": stage, "lower_bound": lb, "max_link_load": value, "optimal": value <= lb,
        "links_at_max": links_at(problem, spines, value), "links_at_max_lower_bound": None,
        "ms": {"layer1": round((time.perf_counter() - t0) * 1e3, 3)}})


def equitable_insert(problem: Problem, lb: int, deadline: float | None = None):
    """The equitable colouring onto the alive spines, the flows it puts on a failed link then
    inserted by chains, most constrained first: under lb - 1 where possible (so that they do
    not add links at the max), else under lb. The Routing, or None when some flow fits under
    no chain (the bound is then not met this way)."""
    part = equitable_spines(problem)
    r = Routing(problem, part)
    left = sorted((k for k, s in enumerate(part) if s == NO_SPINE),
                  key=lambda k: (len(bits(problem.usable[k])), k))
    for c in (lb - 1, lb):
        if not left or c < 1:
            continue
        r.set_capacity(c)
        budget = 4096 if deadline is None or time.perf_counter() < deadline else 0
        left = [k for k in left if not r.insert(k, budget)]
    return None if left else r


def _auto(problem: Problem, ilp_time_limit: float, objective: str,
          job_budget: int | None = None, job_clock=None) -> Assignment:
    t0 = time.perf_counter()
    deadline = t0 + REPAIR_TIME_LIMIT  # a safety net only: budgets end the searches first
    ms: dict[str, float] = {}
    common = common_spines(problem)
    info: dict = {"objective": objective}
    lb = degree_bound(problem) if common is not None else lower_bound(problem)
    spines, r = construct(problem, lb)
    value = max_link_flows(problem, spines)
    stage = "construction"
    t1 = time.perf_counter()
    ms["construction"] = (t1 - t0) * 1e3
    if value > lb:
        repaired, new_value = repair_down(problem, spines, lb, value, deadline=deadline)
        if repaired != spines:
            spines, value, stage = repaired, new_value, "repair"
            r = None
        ms["repair"] = (time.perf_counter() - t1) * 1e3
    optimal = value <= lb
    if not optimal and ilp_time_limit > 0:
        t2 = time.perf_counter()
        n_vars = sum(len(bits(m)) for m in problem.usable)
        if n_vars > ILP_MAX_VARIABLES:
            info["ilp"] = {"status": "skipped", "variables": n_vars,
                           "reason": f"more than {ILP_MAX_VARIABLES} variables"}
        else:
            from controller.planners.ilp import ilp
            res = ilp(problem, ilp_time_limit, incumbent=spines, lower=lb)
            info["ilp"] = {k: res.info[k] for k in ("status", "bound", "gap", "wall_ms")
                           if k in res.info}
            if res.info["incumbent_from"] == "solver":
                spines, value, stage = res.spines(), res.info["incumbent"], "ilp"
                r = None
            lb = max(lb, res.info["bound"])
            optimal = res.info["status"] == "optimal" or value <= lb
        ms["ilp"] = (time.perf_counter() - t2) * 1e3
    # layer 2: fewer links at the max, then at the next load down
    t3 = time.perf_counter()
    if common is not None:  # the equitable colouring is exact: its count is the bound
        count = links_at(problem, spines, value)
        floor, lb2 = None, count
    else:
        floor = side_bounds(problem, value)
        lb2 = sum(floor)
        count = (0 if not value else sum(1 for v in r.load if v == value) if r is not None
                 else links_at(problem, spines, value))
    if common is None and value > 1:
        if r is None:
            r = Routing(problem, spines)
        if count > lb2:
            fewer_at_level(r, value - 1, deadline, 4096, floor)
        # the next load down: a small chain budget; r is only read for its spines and loads
        fewer_below(r, value, deadline, 256, keep_order=False)
        spines = list(r.spine)
        count = sum(1 for v in r.load if v == value)
    ms["layer2"] = (time.perf_counter() - t3) * 1e3
    info["layer2_ilp"] = None
    left = ilp_time_limit - (time.perf_counter() - t0)
    if (value and optimal and count > lb2 and ilp_time_limit > 0 and left > 0
            and sum(len(bits(m)) for m in problem.usable) <= ILP_MAX_VARIABLES):
        t4 = time.perf_counter()
        from controller.planners.ilp import ilp_layer2
        res = ilp_layer2(problem, value, ilp_time_limit - (t4 - t0), incumbent=spines, lower=lb2)
        info["layer2_ilp"] = {k: res.info[k] for k in ("status", "bound", "gap", "wall_ms")
                              if k in res.info}
        if res.info["incumbent_from"] == "solver":
            spines, count, stage = res.spines(), res.info["incumbent"], "ilp"
        lb2 = max(lb2, res.info["bound"])
        if res.info["status"] == "optimal":
            lb2 = count
        ms["layer2_ilp"] = (time.perf_counter() - t4) * 1e3
    if info["layer2_ilp"] is None:
        del info["layer2_ilp"]
    info.update(stage=stage, lower_bound=lb, max_link_load=value, optimal=optimal,
                links_at_max=count, links_at_max_lower_bound=lb2,
                optimal_layers={"max_link_load": optimal,
                                "links_at_max": bool(optimal and count <= lb2)})
    if objective == "jobs":
        from controller.planners.objective import improve_jobs
        t5 = time.perf_counter()
        from controller.planners.edge_coloring import edge_coloring
        baselines = {"greedy": greedy_spines(problem),
                     "edge-coloring": edge_coloring(problem).spines()}
        spines, job_info = improve_jobs(problem, spines, budget=job_budget,
                                        candidates=baselines, clock=job_clock)
        ms["jobs"] = (time.perf_counter() - t5) * 1e3
        info.update(job_info)
        if job_info["job_moves"]:
            info["stage"] = "jobs"
        new_value = max_link_flows(problem, spines)
        info["max_link_load"] = new_value
        info["links_at_max"] = links_at(problem, spines, new_value)
        layer1 = optimal and new_value == value
        info["optimal_layers"] = {
            "max_link_load": layer1,
            "links_at_max": bool(layer1 and info["links_at_max"] <= lb2),
            "worst_slowdown": job_info["worst_slowdown"] <= 1 + 1e-9}
        # ``optimal`` keeps meaning the max link load (what the service's anytime stage asks)
        info["optimal"] = layer1
    info["ms"] = {k: round(v, 3) for k, v in ms.items()}
    return Assignment.unsplit(spines, info)
