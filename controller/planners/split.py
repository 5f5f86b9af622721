"""Minimal flow splitting (after Ethereal): reach the fractional optimum of the max directed-link
load, whatever links are down, splitting few flows into few parts. Our reconstruction
(paper.md section 9.1), not Ethereal's published algorithm.

Two methods, both reaching the optimum of the LP in ``lp.py`` (never below one flow per link:
a part cannot send faster than its NIC):

* **McNaughton** (the fast path, when every leaf sees the same alive spines). Write
  Delta = q * S' + r. Pad the leaf multigraph to Delta-regular and colour it with Delta colours:
  each colour class is a perfect matching. q * S' classes go whole to the spines, q per spine.
  The r classes with the fewest real flows are laid end to end on [0, r) and cut into S' pieces
  of length r / S' (McNaughton's wrap-around); piece j goes to spine j. Only flows of a class that
  straddles a cut are split. Every directed link carries at most Delta / S' flow units, which is
  the LP optimum there. O(F * Delta) for the colouring.
* **LP** (any failure pattern). Start from the better unsplit routing of edge colouring and the
  greedy. If its max load already meets a cheap fractional lower bound, it is the plan: no LP
  (``info["split"]``; by bytes the same with the weighted bound, ``split_bytes``).
  Otherwise free only the flows on overloaded links (then, if that is infeasible, every flow of
  the leaves around them, then all flows), keep the others fixed, and solve the LP "shares under
  the bound, as many as possible on the flow's current spine" with HiGHS's dual simplex: a vertex
  solution, so few shares are fractional. If even all flows cannot meet the bound, the LP's own
  optimum (min alpha) becomes the target. Then split flows are consolidated: a flow goes back
  whole to a spine where it fits, and a part merges into another part of the same flow where it
  fits. Cost: the edge colouring plus none (at the bound), one or a few LP solves over the
  freed flows (all F * S' variables in the worst case).

``granularity=k`` makes every share a multiple of 1/k (applications split by chunks): an ILP
(HiGHS) over the freed flows minimises the max load in units of 1/k, then keeps most shares in
place, within ``time_limit`` seconds; the info says whether it was proven.

``info`` reports the method, the fractional optimum, whether it was reached, the split flows and
their parts (``split_flows``, ``subflows`` = parts of split flows, ``max_parts``), the freed
flows and the LP time.

Example: 5 flows out of every leaf of a 4-spine fabric (unsplit optimum 2): the fractional
optimum 1.25 is reached by splitting one matching, one flow per leaf, into 4 quarters.
"""
from __future__ import annotations

import math
import time
from dataclasses import replace
from fractions import Fraction

import numpy as np

from controller.errors import InputError
from controller.model.problem import Assignment, Problem
from controller.planners.edge_coloring import bipartite_edge_colouring, edge_coloring
from controller.planners.greedy import greedy
from controller.planners.lp import TOL, fractional_lower_bound, fractional_optimum, solve, variables

MAX_PARTS = 4  # default bound on the parts of a flow: most of the gain, few rules and sports
FLOOR = 1.0  # one flow per link: no part can send faster than its NIC
_SLACK = 1e-9  # numerical slack on the LP's link bound


def split(problem: Problem, granularity: int | None = None, time_limit: float = 10.0,
          max_parts: int | None = MAX_PARTS, objective: str = "flows") -> Assignment:
    """Split few flows to reach the fractional optimum of the max directed-link load (module
    docstring); ``granularity`` k makes every share a multiple of 1/k; ``max_parts`` bounds
    the parts of every flow (None: no bound, the fractional optimum): McNaughton then cuts each
    leftover class into ``max_parts`` equal pieces, the LP keeps each flow's ``max_parts``
    largest shares (``bound_parts``). ``info["optimal"]`` says whether the fractional optimum
    was still reached, ``info["unbounded_max_link_load"]`` what it would be without the bound.

    Cost: O(F * Delta) on uniform fabrics (McNaughton); otherwise the edge colouring, the greedy
    and one to three LP solves over the freed flows (0.02-0.5 s at 64 x 32 with a few links
    down), plus an ILP within ``time_limit`` seconds when a granularity needs it.

    >>> from controller.model.clos import Clos
    >>> from controller.model.jobs import Flow, Job
    >>> f = Clos.generate(4, 5, 4).as_leaf_spine().with_down({("l0", "s0")})  # l0 keeps 3 up links
    >>> job = Job("j", explicit=[Flow("j", f"h0_{k}", f"h{k + 1}_0", 1e6) for k in range(4)])
    >>> a = split(Problem.build(f, [job]))
    >>> round(a.info["fractional_optimum"], 6), a.info["split_flows"], a.info["subflows"]
    (1.333333, 1, 3)
    """
    if granularity is not None and (isinstance(granularity, bool) or not isinstance(granularity, int)
                                    or granularity < 1):
        raise InputError(f"split: granularity must be a positive integer, got {granularity!r}")
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or \
            not time_limit > 0:
        raise InputError(f"split: time limit must be positive, got {time_limit!r}")
    if max_parts is not None and (isinstance(max_parts, bool) or not isinstance(max_parts, int)
                                  or max_parts < 1):
        raise InputError(f"split: max_parts must be a positive integer or null, got {max_parts!r}")
    if objective not in ("flows", "jobs"):
        raise InputError(f"split: unknown objective {objective!r} (choose from flows, jobs)")
    result = _split(problem, granularity, time_limit)
    if max_parts is not None and result.info.get("max_parts", 1) > max_parts:
        result = bound_parts(problem, result, max_parts)
    if objective == "jobs" and granularity is None and len(problem):
        result = split_bytes(problem, result, max_parts, time_limit)
    return result


def split_bytes(problem: Problem, by_flows: Assignment, max_parts: int | None,
                time_limit: float) -> Assignment:
    """Byte-aware splitting (``objective="jobs"``): shares that minimise the max time a
    directed link is busy, each flow weighted by its bytes per iteration (``lp.weighted_split_lp``),
    each flow cut to its ``max_parts`` largest shares; then the best, by the shared prediction
    (``objective.job_slowdowns``; ``objective.rank_key``: the mean, the worst within that of the
    lowest-mean candidate), of that routing, ``by_flows`` (the flow
    count split) and the ``jobs`` objective's unsplit routing (``auto``), so that it is never
    behind the latter. ``info["byte_fractional_optimum"]`` (seconds) and ``info["chosen"]``.
    No LP where one of the latter two meets ``fractional_lower_bound`` by bytes (no floor): an
    optimum of the byte LP then (``info["split_bytes"]`` says so), the prediction ranks those."""
    from controller.planners.auto import auto
    from controller.planners.lp import weighted_split_lp
    from controller.planners.objective import JobModel, job_slowdowns, rank_key, worst_bound
    t0 = time.perf_counter()
    model = JobModel(problem)
    weight = np.asarray(model.weight) / model.capacity
    candidates = {"flows": by_flows, "jobs-unsplit": auto(problem, ilp_time_limit=0,
                                                            objective="jobs")}
    alpha = fractional_lower_bound(problem, 0.0, weight)
    met = next((n for n, a in candidates.items()  # an optimum of the byte LP: no LP
                if _max_of(problem, a, weight) <= alpha * (1 + 1e-9)), None)
    if met is None:
        alpha, flow, spine, share = weighted_split_lp(problem, weight, time_limit=time_limit)
        per: dict[int, dict] = {k: {} for k in range(len(problem))}
        for k, s, x in zip(flow, spine, share):
            per[int(k)][int(s)] = per[int(k)].get(int(s), 0.0) + float(x)
        parts = []
        for k in range(len(problem)):
            p = sorted(per[k].items(), key=lambda sx: (-sx[1], sx[0]))[:max_parts]
            total = sum(x for _, x in p)
            parts.append(tuple(sorted((sp, x / total) for sp, x in p)))
        candidates = {"bytes": Assignment(parts), **candidates}
    scores = {n: job_slowdowns(problem, a.parts) for n, a in candidates.items()}
    bound = worst_bound(scores)
    chosen = min(candidates, key=lambda n: (rank_key(scores[n].values(), bound), n))
    out = candidates[chosen]
    values = list(scores[chosen].values())
    info = dict(by_flows.info, **({} if met is None else
                                  {"split_bytes": f"{met} at the byte bound: no LP"}))
    info.update(_counts(out), objective="jobs", chosen=chosen,
                byte_fractional_optimum=round(alpha, 9),
                predicted_slowdown=scores[chosen],
                worst_slowdown=max(values, default=1.0),
                mean_slowdown=sum(values) / len(values) if values else 1.0,
                candidates_mean={n: round(sum(v.values()) / max(1, len(v)), 6)
                                 for n, v in scores.items()},
                bytes_ms=round((time.perf_counter() - t0) * 1e3, 3))
    if chosen != "flows":
        up, down = _loads(problem, out)
        info["max_link_load"] = round(float(max(up.max(), down.max())), 9)
        info["optimal"] = False  # on flow counts; bytes: see byte_fractional_optimum
    return Assignment(out.parts, info)


def _split(problem: Problem, granularity: int | None, time_limit: float) -> Assignment:
    if not len(problem):
        return Assignment([], {"method": "none", "split_flows": 0, "subflows": 0})
    t0 = time.perf_counter()
    if problem.fabric.uniform():
        result = mcnaughton(problem)
        if granularity is None or _granular(result, granularity):
            if granularity is not None:
                result = _snap(result, granularity)
            return result
    result = lp_split(problem)
    if granularity is not None:
        if _granular(result, granularity):
            result = _snap(result, granularity)
        else:
            result = _granular_split(problem, result, granularity, time_limit)
    result.info["wall_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
    return result


def bound_parts(problem: Problem, a: Assignment, max_parts: int) -> Assignment:
    """At most ``max_parts`` parts per flow. McNaughton plans are rebuilt with each leftover
    colour class cut into ``max_parts`` equal pieces laid round-robin over the spines (the max
    load becomes q + ceil(r * max_parts / S') / max_parts); other plans keep each flow's
    ``max_parts`` largest shares, scaled up to 1. O(F S').

    >>> from controller.model.clos import Clos
    >>> from controller.model.jobs import Flow, Job
    >>> f = Clos.generate(4, 2, 5).as_leaf_spine()          # l0 sends 5 flows over 4 spines
    >>> p = Problem.build(f, [Job("j", explicit=[Flow("j", f"h0_{k}", f"h1_{k}", 1)
    ...                                          for k in range(5)])])
    >>> [_max_of(p, split(p, max_parts=k)) for k in (1, 2, 4, None)]
    [2.0, 1.5, 1.25, 1.25]
    """
    before = _max_of(problem, a)
    if a.info.get("method") == "mcnaughton":
        out = mcnaughton(problem, max_parts)
    else:
        out = Assignment(_lp_within(problem, a, max_parts), dict(a.info))
        out.info.update(_counts(out))
    reached = _max_of(problem, out)
    out.info.update(parts_bound=max_parts, unbounded_max_link_load=round(before, 9),
                    max_link_load=round(reached, 9),
                    optimal=reached <= out.info.get("fractional_optimum", 0) + 1e-6)
    return out


def _lp_within(problem: Problem, a: Assignment, max_parts: int) -> list:
    """Parts of ``a`` with every flow of more than ``max_parts`` parts confined to its
    ``max_parts`` largest shares' spines and re-balanced there by the min-max LP (the other
    flows fixed); the plain largest shares, scaled up, if the LP fails."""
    over = [k for k, p in enumerate(a.parts) if len(p) > max_parts]
    kept = {k: sorted(sorted(a.parts[k], key=lambda x: (-x[1], x[0]))[:max_parts])
            for k in over}
    parts = list(a.parts)
    for k in over:
        total = sum(x for _, x in kept[k])
        parts[k] = tuple((s, x / total) for s, x in kept[k])
    masks = list(problem.usable)
    for k in over:
        masks[k] = sum(1 << s for s, _ in kept[k])
    fixed = np.ones(len(problem), dtype=bool)
    fixed[over] = False
    base_up, base_down = _loads(problem, a, fixed)
    res = solve(replace(problem, usable=masks), np.asarray(over), base_up, base_down, floor=FLOOR)
    if res.x is None:
        return parts
    shares: dict[int, dict] = {k: {} for k in over}
    for k, s, x in zip(res.flow, res.spine, res.x):
        if x > TOL:
            shares[int(k)][int(s)] = shares[int(k)].get(int(s), 0.0) + float(x)
    for k in over:
        if shares[k]:
            parts[k] = tuple(sorted(normalised_shares(shares[k]).items()))
    return parts


def _max_of(problem: Problem, a: Assignment, weight=None) -> float:
    """The max directed-link load of ``a``, each flow ``weight`` per unit share (1)."""
    up, down = _loads(problem, a if weight is None else
                      [tuple((s, x * w) for s, x in p) for p, w in zip(a.parts, weight)])
    return float(max(up.max(initial=0), down.max(initial=0)))


# ---- McNaughton: uniform fabrics ------------------------------------------------------------
def mcnaughton(problem: Problem, max_parts: int | None = None) -> Assignment:
    """McNaughton's wrap-around over the colour classes; needs every leaf to see the same spines.
    With ``max_parts`` each leftover class is cut into that many equal pieces instead, laid
    round-robin over the spines after the whole classes."""
    alive = problem.fabric.alive_spines()
    n_alive = len(alive)
    out, inn = problem.degrees()
    delta = max(out + inn, default=0)
    edges = list(zip(problem.src_leaf, problem.dst_leaf))
    real = len(edges)
    edges += _padding(out, inn, delta)
    colours = bipartite_edge_colouring(edges)
    q, r = divmod(delta, n_alive)
    if q == 0:  # Delta <= S': one flow per link at most, no faster than a flow's own NIC
        r = 0
    real_per_class = [0] * delta
    for c in colours[:real]:
        real_per_class[c] += 1
    # the r classes carrying the fewest real flows are the ones that get split
    by_load = sorted(range(delta), key=lambda c: (real_per_class[c], c))
    leftover = sorted(by_load[:r])
    whole = sorted(by_load[r:])
    pieces: dict[int, tuple] = {}
    for rank, c in enumerate(whole):
        pieces[c] = ((alive[rank % n_alive], 1.0),)
    width = Fraction(r, n_alive)
    pieces_per_class = None if max_parts is None else min(max_parts, n_alive)
    for pos, c in enumerate(leftover):
        if pieces_per_class is not None:
            # piece i of the leftover classes (in order) on spine i mod S': a class's pieces
            # land on distinct spines, every spine gets at most ceil(r P / S') pieces
            pieces[c] = tuple(sorted((alive[(pos * pieces_per_class + j) % n_alive],
                                      1.0 / pieces_per_class)
                                     for j in range(pieces_per_class)))
            continue
        parts = []
        lo, hi = Fraction(pos), Fraction(pos + 1)
        for j in range(n_alive):
            a, b = max(lo, j * width), min(hi, (j + 1) * width)
            if b > a:
                parts.append((alive[j], float(b - a)))
        pieces[c] = tuple(parts)
    assignment = Assignment([pieces[c] for c in colours[:real]])
    optimum = max(delta / n_alive, FLOOR)
    assignment.info.update(method="mcnaughton", fractional_optimum=optimum,
                           fractional_lower_bound=optimum, optimal=True, **_counts(assignment))
    if pieces_per_class is not None:
        assignment.info["optimal"] = _max_of(problem, assignment) <= optimum + 1e-6
    return assignment


def _padding(out: list[int], inn: list[int], delta: int) -> list[tuple[int, int]]:
    """Dummy edges that make every left (out) and right (in) degree equal to delta."""
    lefts = [i for i, d in enumerate(out) for _ in range(delta - d)]
    rights = [i for i, d in enumerate(inn) for _ in range(delta - d)]
    return list(zip(lefts, rights))


# ---- LP: any failure pattern ----------------------------------------------------------------
def lp_split(problem: Problem) -> Assignment:
    """The LP method of the module docstring (works on every fabric)."""
    start, start_name = _best_unsplit(problem)
    spines = start.spines()
    up, down = _loads(problem, spines)
    bound = fractional_lower_bound(problem, FLOOR)
    info = {"method": "lp", "start": start_name, "fractional_lower_bound": bound,
            "lp_solves": 0, "lp_ms": 0.0, "free_flows": 0}
    if max(up.max(), down.max()) <= bound + TOL:  # the unsplit start meets the bound
        start.info = {**info, "fractional_optimum": bound, "optimal": True, **_counts(start),
                      "split": "unsplit routing at the bound: no LP"}
        return start
    prefer = dict(enumerate(spines))
    result, target = None, bound
    for free in _free_sets(problem, spines, up, down, bound):
        res = _solve_on(problem, free, spines, target + _SLACK, prefer, info)
        if res.x is not None:
            result = res
            break
    if result is None:  # the cheap bound is below the LP optimum: find the optimum itself
        t1 = time.perf_counter()
        target = fractional_optimum(problem, FLOOR)
        info["lp_solves"] += 1
        info["lp_ms"] += (time.perf_counter() - t1) * 1e3
        result = _solve_on(problem, np.arange(len(problem)), spines, target + _SLACK, prefer, info)
        if result.x is None:
            raise InputError(f"split: the LP ended with status {result.status}")
    parts = {k: {spines[k]: 1.0} for k in range(len(problem))}
    for k in set(result.flow.tolist()):
        parts[k] = {}
    for k, s, x in zip(result.flow, result.spine, result.x):
        if x > TOL:
            parts[int(k)][int(s)] = parts[int(k)].get(int(s), 0.0) + float(x)
    parts = _consolidate(problem, parts, target + _SLACK)
    assignment = Assignment([tuple(sorted(p.items())) for p in (normalised_shares(parts[k])
                                                                for k in range(len(problem)))])
    up, down = _loads(problem, assignment)
    reached = float(max(up.max(), down.max()))
    info.update(fractional_optimum=target, optimal=reached <= target + 1e-6,
                lp_ms=round(info["lp_ms"], 3), **_counts(assignment))
    assignment.info = info
    return assignment


def _best_unsplit(problem: Problem) -> tuple[Assignment, str]:
    """The better of edge colouring (optimal on uniform fabrics) and the greedy: lower max load,
    then fewer links at the max."""
    best = None
    for name, fn in (("edge-coloring", edge_coloring), ("greedy", greedy)):
        a = fn(problem)
        up, down = _loads(problem, a.spines())
        loads = np.concatenate([up.ravel(), down.ravel()])
        key = (loads.max(), int((loads == loads.max()).sum()))
        if best is None or key < best[0]:
            best = (key, a, name)
    return best[1], best[2]


def _free_sets(problem: Problem, spines: list[int], up: np.ndarray, down: np.ndarray,
               bound: float):
    """Growing sets of flows the LP may move: those on overloaded links, then every flow of the
    leaves at those links, then all."""
    src, dst, sp = np.asarray(problem.src_leaf), np.asarray(problem.dst_leaf), np.asarray(spines)
    over_up, over_down = up > bound + TOL, down > bound + TOL
    on_over = over_up[src, sp] | over_down[dst, sp]
    yield np.flatnonzero(on_over)
    hot = over_up.any(axis=1) | over_down.any(axis=1)
    near = hot[src] | hot[dst]
    if near.sum() > on_over.sum():
        yield np.flatnonzero(near)
    if near.sum() < len(problem):
        yield np.arange(len(problem))


def _solve_on(problem, free, spines, target, prefer, info):
    """Solve the "stay in place under ``target``" LP with ``free`` movable, the rest fixed."""
    fixed = np.ones(len(problem), dtype=bool)
    fixed[free] = False
    up, down = _loads(problem, spines, fixed)
    res = solve(problem, free, up, down, target=target, prefer=prefer, floor=FLOOR)
    info["lp_solves"] += 1
    info["lp_ms"] += res.ms
    info["free_flows"] = int(len(free))
    return res


def _consolidate(problem: Problem, parts: list, cap: float) -> dict:
    """Fewer split flows and parts: put a split flow back whole on a spine where it fits, else
    merge its smallest part into another of its parts where that fits. Loads never exceed cap."""
    up, down = _loads(problem, [tuple(p.items()) for p in parts.values()], keys=list(parts))
    for k, p in parts.items():
        if len(p) < 2:
            continue
        a, b = problem.src_leaf[k], problem.dst_leaf[k]
        usable = [s for s in range(up.shape[1]) if problem.usable[k] >> s & 1]
        for s in sorted(usable, key=lambda s: -p.get(s, 0.0)):
            have = p.get(s, 0.0)
            if up[a, s] - have + 1 <= cap and down[b, s] - have + 1 <= cap:
                for t, x in p.items():
                    up[a, t] -= x
                    down[b, t] -= x
                up[a, s] += 1
                down[b, s] += 1
                parts[k] = {s: 1.0}
                break
        else:
            merged = True
            while merged and len(p) > 1:
                merged = False
                small = min(p, key=p.get)
                x = p[small]
                for t in sorted(p, key=lambda t: -p[t]):
                    if t != small and up[a, t] + x <= cap and down[b, t] + x <= cap:
                        up[a, t] += x
                        down[b, t] += x
                        up[a, small] -= x
                        down[b, small] -= x
                        p[t] += x
                        del p[small]
                        merged = True
                        break
    return parts


def normalised_shares(p: dict) -> dict:
    """A flow's shares (key -> share) without the ones at the LP's tolerance, summing to 1
    (the two-tier split and the path LP, ``clos_split``)."""
    p = {s: x for s, x in p.items() if x > TOL}
    total = sum(p.values())
    return {s: x / total for s, x in p.items()}


# ---- granularity: shares in multiples of 1/k ------------------------------------------------
def _granular(a: Assignment, k: int) -> bool:
    """Every share is a multiple of 1/k up to the LP's tolerance (and rounds to a sum of 1)."""
    return all(abs(x * k - round(x * k)) <= 1e-6 for p in a.parts for _, x in p) and \
        all(sum(round(x * k) for _, x in p) == k for p in a.parts)


def _snap(a: Assignment, k: int) -> Assignment:
    """Shares rounded to exact multiples of 1/k (they are within the LP's tolerance)."""
    snapped = Assignment([tuple((s, round(x * k) / k) for s, x in p if round(x * k))
                          for p in a.parts])
    snapped.info = {**a.info, "granularity": k, **_counts(snapped)}
    return snapped


def _granular_split(problem: Problem, fractional: Assignment, k: int,
                    time_limit: float) -> Assignment:
    """ILP in units of 1/k over the flows the LP split and the flows sharing their links; the
    others keep the fractional routing's whole spines. Objective: the max load in units, then as
    many units as possible on each flow's largest LP share (lexicographic: exact in integers)."""
    # imported here: scipy.optimize takes about 0.3 s to import, a fifth of the controller's start
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix
    t0 = time.perf_counter()
    info = dict(fractional.info)
    split_flows = [i for i, p in enumerate(fractional.parts) if len(p) > 1]
    up, down = _loads(problem, fractional)
    src, dst = np.asarray(problem.src_leaf), np.asarray(problem.dst_leaf)
    touched_up = np.zeros(up.shape, dtype=bool)
    touched_down = np.zeros(up.shape, dtype=bool)
    for i in split_flows:
        for s, _ in fractional.parts[i]:
            touched_up[src[i], s] = touched_down[dst[i], s] = True
    main = np.array(fractional.spines())
    free = np.flatnonzero(touched_up[src, main] | touched_down[dst, main]
                          | np.isin(np.arange(len(problem)), split_flows))
    fixed = np.ones(len(problem), dtype=bool)
    fixed[free] = False
    base_up, base_down = _loads(problem, fractional, fixed)  # whole flows only: integers
    vf, vs = variables(problem, free)
    nx = len(vf)
    n_spines = up.shape[1]
    local = np.full(len(problem), -1)
    local[free] = np.arange(len(free))
    up_rows, up_idx = np.unique(src[vf] * n_spines + vs, return_inverse=True)
    down_rows, down_idx = np.unique(dst[vf] * n_spines + vs, return_inverse=True)
    n_links = len(up_rows) + len(down_rows)
    fixed_units = k * np.concatenate([base_up.ravel()[up_rows], base_down.ravel()[down_rows]])
    link_row = np.concatenate([up_idx, len(up_rows) + down_idx])
    cols = np.arange(nx)
    a = coo_matrix((np.concatenate([np.ones(3 * nx), -np.ones(n_links)]),
                    (np.concatenate([local[vf], len(free) + link_row, len(free) + np.arange(n_links)]),
                     np.concatenate([cols, cols, cols, np.full(n_links, nx)]))),
                   shape=(len(free) + n_links, nx + 1)).tocsr()
    lb = np.concatenate([np.full(len(free), k), np.full(n_links, -np.inf)])
    ub = np.concatenate([np.full(len(free), k), -fixed_units])
    lower = math.ceil(k * info["fractional_optimum"] - 1e-6)
    upper = np.inf  # every free flow whole on its largest share is always feasible
    c = np.zeros(nx + 1)
    c[nx] = k * len(free) + 1
    keep = main[vf] == vs
    c[:nx] = -keep.astype(float)
    res = milp(c, constraints=LinearConstraint(a, lb, ub), integrality=np.ones(nx + 1),
               bounds=Bounds(np.concatenate([np.zeros(nx), [lower]]),
                             np.concatenate([np.full(nx, k), [upper]])),
               options={"time_limit": float(time_limit), "disp": False})
    status = {0: "optimal", 1: "time_limit"}.get(res.status, "error")
    if res.x is None:  # no integral solution in time: the unsplit start is one
        result, _ = _best_unsplit(problem)
        gu, gd = _loads(problem, result.spines())
        units = k * int(max(gu.max(), gd.max()))
    else:
        parts = {int(f): {} for f in free}
        for f, s, y in zip(vf, vs, np.rint(res.x[:nx]).astype(int)):
            if y:
                parts[int(f)][int(s)] = y / k
        result = Assignment([tuple(sorted(parts[i].items())) if i in parts else fractional.parts[i]
                             for i in range(len(problem))])
        gu, gd = _loads(problem, result)
        units = round(k * float(max(gu.max(), gd.max())))
    bound = lower
    dual = getattr(res, "mip_dual_bound", None)
    if status == "optimal" and res.x is not None:
        bound = units
    elif dual is not None and np.isfinite(dual):
        bound = max(lower, math.ceil(dual / (k * len(free) + 1) - 1e-6))
    info.update(method=info["method"] + "+ilp", granularity=k, ilp_status=status,
                granular_optimum_bound=bound / k, optimal=units <= bound and res.x is not None,
                ilp_ms=round((time.perf_counter() - t0) * 1e3, 3), free_flows=int(len(free)),
                **_counts(result))
    result.info = info
    return result


# ---- helpers --------------------------------------------------------------------------------
def _loads(problem: Problem, routing, mask: np.ndarray | None = None, keys=None):
    """(up, down) flow units per directed link of a routing: a spine list, an Assignment or a
    list of part tuples (for the flows ``keys``); only flows where ``mask`` is True count."""
    shape = (len(problem.fabric.leaves), len(problem.fabric.spines))
    up, down = np.zeros(shape), np.zeros(shape)
    if isinstance(routing, Assignment):
        routing = routing.parts
    keys = range(len(routing)) if keys is None else keys
    if routing and not isinstance(routing[0], (tuple, list)):
        src, dst = np.asarray(problem.src_leaf), np.asarray(problem.dst_leaf)
        sp = np.asarray(routing)
        w = np.ones(len(sp)) if mask is None else mask.astype(float)
        np.add.at(up, (src, sp), w)
        np.add.at(down, (dst, sp), w)
        return up, down
    for k, parts in zip(keys, routing):
        if mask is not None and not mask[k]:
            continue
        a, b = problem.src_leaf[k], problem.dst_leaf[k]
        for s, x in parts:
            up[a, s] += x
            down[b, s] += x
    return up, down


def _counts(a: Assignment) -> dict:
    sizes = [len(p) for p in a.parts if len(p) > 1]
    return {"split_flows": len(sizes), "subflows": sum(sizes), "max_parts": max(sizes, default=1)}
