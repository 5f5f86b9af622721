"""``auto`` on a Clos fabric: the tier-by-tier colouring and the greedy, each improved by the
local search, the better kept, with the lower bound and the gap reported.

Exact (gap 0) wherever the colouring meets the bound: full-bisection fat-trees and multi-plane
leaf-spines with nothing down under permutation traffic, and many more instances the local
search closes (tests/test_clos.py, bench/fabrics.json). Elsewhere the gap is stated, never
hidden: ``info["lower_bound"]``, ``info["gap"]`` (max load minus bound, flows per unit).

Layer 2 (``layer2``, also run off the request path from the routes in force:
``clos_offpath``): ejection chains at the max (``clos_layer2.fewer_at_max``), the
layer-2 MILP where a gap is left on small instances, then below the max the chains at the
next loads down (``clos_layer2.fewer_below``, the two-tier auto's ``layer2.fewer_below``:
the parity tests hold both autos to one sorted load vector on a single two-tier plane).

The two-tier kernel (private, the stronger there): on a single two-tier plane without bundles
(``Clos.as_leaf_spine``) ``planners.auto`` on the plane's two-tier model makes the plan
(construction proven by the equitable colouring, repair, the ILP stage within
``ilp_time_limit``, layer 2), its ``info`` kept (``stage``, ``optimal``, ``lower_bound``...);
the parity tests hold both to one sorted load vector. The jobs objective is ``clos_jobs``
(``clos_objective`` chooses).

Tie-break (``tiebreak``, the registry's ``auto`` by flows): which flow of a leaf pair takes
which of the pair's paths, the link loads unchanged, by the jobs' predicted slowdowns
(``clos_tiebreak``): below the max the colouring's choice was chance.

Cost: the colouring, the greedy and two local searches; ``time_limit`` bounds the searches;
the chains below the max spend at most ``LAYER2_BELOW_WORK`` search nodes and
``LAYER2_BELOW_WORK_PER_FLOW`` per flow (no clock: the same result on a loaded machine).
"""
from __future__ import annotations

import time

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting, lower_bound
from controller.planners.auto import auto, check_options
from controller.planners.clos_greedy import clos_greedy, improve
from controller.planners.clos_ilp_layer2 import layer2_exact
from controller.planners.clos_layer2 import (
    fewer_at_max,
    fewer_below,
    side_floors,
    soft_limits,
)
from controller.planners.clos_loads import score
from controller.planners.clos_tiebreak import tiebreak as tiebreak_paths
from controller.planners.clos_tiers import tier_colouring

LAYER2_WORK = 2048  # chain search nodes in all: this many ...
LAYER2_WORK_PER_FLOW = 0.25  # ... and this many per flow,
LAYER2_SHARE = 1.0  # within this share of layer 1's time (a request-path budget) ...
LAYER2_MIN_S = 0.05  # ... or this long, whichever is longer
LAYER2_BELOW_WORK = 128  # the chains below the max: search nodes in all, this many ...
LAYER2_BELOW_WORK_PER_FLOW = 0.01  # ... and this many per flow (no clock: deterministic)
LAYER2_MILP_OPTIONS = 20_000  # the layer-2 MILP on instances of at most this many options
LAYER2_MILP_S = 0.5  # its time limit (within time_limit)
TIEBREAK_WORK = 16_000  # the tie-break's predictions: flow-events (about 20-40 ms of CPU)


def clos_auto(problem: ClosProblem, time_limit: float = 1.0, ilp_time_limit: float = 0.0,
              layer1_only: bool = False, tiebreak: bool = False) -> ClosRouting:
    """auto's routing of ``problem`` by flow counts (module docstring; the jobs objective:
    ``clos_objective``). ``time_limit``: the searches' budget (s); ``ilp_time_limit``: the
    two-tier kernel's ILP stage (s, 0: none); ``layer1_only``: the colouring and the greedy
    with their local search, no layer 2 (the controller's request path on Clos fabrics,
    ``clos_churn``: layer 2 follows off the path, ``clos_offpath``); ``tiebreak`` (not with
    ``layer1_only``): last, the job-aware exchange of paths within leaf pairs
    (``clos_tiebreak``, the link loads unchanged) within ``TIEBREAK_WORK``."""
    check_options(ilp_time_limit, "flows")
    kernel = None if layer1_only else two_tier_auto(problem, "flows", ilp_time_limit)
    if kernel is not None:
        return _tiebroken(problem, kernel) if tiebreak else kernel
    t0 = time.perf_counter()
    bound = lower_bound(problem)
    best, tried = None, []
    for name, build in (("colouring", tier_colouring), ("greedy", clos_greedy)):
        r = build(problem)
        key = score(problem, r)
        if key[0] > bound + 1e-9:
            r = improve(problem, r, deadline=t0 + time_limit)
            key = score(problem, r)
        tried.append({"construction": name, "max_link_load": key[0], "links_at_max": key[1]})
        if best is None or key < best[0]:
            best = (key, name, r)
        if key[0] <= bound + 1e-9:
            break  # the bound is met: the greedy cannot do better on the max
    key, name, r = best
    t1 = time.perf_counter()
    if layer1_only:
        r.info.update(links_at_max=key[1], _layer2_proved=False)
        ms = {}
    else:
        chains_end = min(t0 + time_limit, t1 + max(LAYER2_MIN_S, LAYER2_SHARE * (t1 - t0)))
        r, ms = layer2(problem, r, key, chains_end, t0 + time_limit)
    alpha = key[0] if layer1_only else score(problem, r)[0]
    r.info.update({"construction": name, "max_link_load": alpha, "tried": tried,
                   "lower_bound": round(bound, 9), "gap": round(max(alpha - bound, 0.0), 9),
                   "optimal": alpha <= bound + 1e-9})
    proved = r.info.pop("_layer2_proved")
    r.info["optimal_layers"] = {"max_link_load": r.info["optimal"],
                                "links_at_max": r.info["optimal"] and proved}
    r.info["ms"] = {"layer1": round((t1 - t0) * 1e3, 3), **ms}
    return _tiebroken(problem, r) if tiebreak and not layer1_only else r


def _tiebroken(problem: ClosProblem, r: ClosRouting) -> ClosRouting:
    """``clos_tiebreak.tiebreak`` on ``r`` within ``TIEBREAK_WORK``."""
    return tiebreak_paths(problem, r, TIEBREAK_WORK)


def two_tier_auto(problem: ClosProblem, objective: str, ilp_time_limit: float,
                  **options) -> ClosRouting | None:
    """The two-tier kernel's routing (``planners.auto`` on the plane's two-tier instance with
    ``objective`` and ``options``, its info kept); None when the fabric is not a single
    two-tier plane or the two models route other flows."""
    from controller.planners.leaf_spine import kernel_routing, two_tier_problem
    p2 = two_tier_problem(problem)
    if p2 is None:
        return None
    return kernel_routing(problem, auto(p2, ilp_time_limit=ilp_time_limit, objective=objective,
                                        **options))


def layer2(problem: ClosProblem, r: ClosRouting, key: tuple[float, int], chains_end: float,
           end: float, milp: bool = True):
    """Fewer links at the max (module docstring), then at the loads below it: the routing,
    with ``links_at_max``, ``links_at_max_lower_bound``, ``layer2`` (and ``layer2_ilp``) and
    ``layer2_below`` in its info, and the ms of the chains, the MILP and the chains below.
    ``key``: ``score`` of ``r``; ``chains_end`` and ``end`` (time.perf_counter) end the
    chains and the MILP; the chains below the max spend ``LAYER2_BELOW_WORK`` (and per
    flow) search nodes at most, ``end`` a safety net. ``milp`` False: the chains only (they
    move few flows; the MILP's routing may move any: ``clos_offpath``, from routes in
    force)."""
    t0 = time.perf_counter()
    alpha, count = key
    chains: dict = {"cleared": 0, "chains_tried": 0, "nodes": 0, "stopped": "done"}
    work = LAYER2_WORK + int(LAYER2_WORK_PER_FLOW * len(problem))
    lb2 = 0
    while alpha > 0:
        soft = soft_limits(problem, alpha)[0]
        if not soft.any() and len(problem.fabric.planes) == 1:
            floor, lb2 = None, count  # one flow reaches the max: every hop of a flow is at it
        else:
            floor = side_floors(problem, alpha, soft)
            lb2 = floor[2]
        if count <= lb2 or chains["stopped"] != "done":
            break
        if time.perf_counter() > chains_end:
            chains["stopped"] = "deadline"
            break
        r = fewer_at_max(problem, r, alpha, deadline=chains_end, floor=floor,
                         work=work - chains["nodes"])
        got = r.info.pop("layer2")
        chains = {k: (v if k == "stopped" else chains[k] + v) for k, v in got.items()}
        new_alpha, count = score(problem, r)
        if new_alpha >= alpha:
            break
        alpha = new_alpha  # every link at the max cleared: again at the new max
    t1 = time.perf_counter()
    ms = {"layer2": round((t1 - t0) * 1e3, 3)}
    proved = count <= lb2
    if not proved and milp and time.perf_counter() < end \
            and option_count(problem) <= LAYER2_MILP_OPTIONS:
        m = layer2_exact(problem, alpha, min(LAYER2_MILP_S, end - t1), r)
        info = m.info
        r.info["layer2_ilp"] = {k: info[k] for k in ("status", "bound", "gap", "wall_ms")}
        if info.get("incumbent_from") == "solver" or info["links_at_max"] < count:
            # (the given routes with their bundles' members rebalanced count too)
            r = ClosRouting(m.plane, m.middle, m.path, r.info)
            count = info["links_at_max"]
        lb2 = max(lb2, info["bound"])
        proved = info["status"] == "optimal"
        if proved:
            lb2 = count
        ms["layer2_ilp"] = round((time.perf_counter() - t1) * 1e3, 3)
    t2 = time.perf_counter()
    if alpha > 0:  # below the max: fewer links at the next load down (``fewer_below``)
        below = LAYER2_BELOW_WORK + int(LAYER2_BELOW_WORK_PER_FLOW * len(problem))
        r = fewer_below(problem, r, alpha, deadline=end, work=below)
        ms["layer2_below"] = round((time.perf_counter() - t2) * 1e3, 3)
    r.info.update(links_at_max=count, links_at_max_lower_bound=lb2,
                  layer2=chains, _layer2_proved=bool(proved))
    return r, ms


def option_count(problem: ClosProblem) -> int:
    """(flow, plane, middle) triples, usable or not: at least a path MILP's binaries, counted
    without building them (the layer-2 MILP here, churn's fewest-moves MILP)."""
    L = problem.links
    total = 0
    for q in range(len(problem.fabric.planes)):
        A, C = L.cells().shape[q]
        _, _, p, s = problem.end_arrays(q)
        total += int(np.where(p == s, A, C).sum())
    return total
