"""``split`` on any Clos fabric: the fractional optimum of the max link load, reached by
splitting few flows into at most ``max_parts`` parts over (plane, middle) options.

What: the linear program of ``planners.lp`` carried to paths. Variables x[c, q, m] >= 0 for
every commodity c (flows with the same source and destination leaf in every plane, so the
same options: merged, exact, the count as demand) and every usable option (plane q, middle
m); every commodity's shares sum to its demand; every hop cell (a leaf's slot or a pod's core,
up or down: ``clospaths.Cells``) carries at most alpha flows per unit of its alive capacity
(all members of a bundle, in leaf-link units). Minimising alpha (>= ``split.FLOOR``, one flow
per link: a part sends no faster than its NIC) gives the fractional optimum; loads count the
fabric links, as ``clos_auto.score`` and ``clospaths.lower_bound`` do. A pinned flow
(``ClosProblem.pin``) has options in its plane only, and is merged only with flows of its pin.

One algorithm on every fabric (issue 60): on a single two-tier plane without bundles
(``Clos.as_leaf_spine``) its two-tier kernel, ``planners.split`` (McNaughton's wrap-around
when every leaf sees the same spines, else its LP on spine shares), makes the plan, which
comes back as this problem's paths: the same plan as the name ``split`` on two tiers
(tests/test_parity.py). Elsewhere the path LP below. With ``objective="jobs"`` the split is
by bytes (``by_bytes``, as the kernel's ``split_bytes``): the max time a link is busy, not
its flow count, then the best of that, the flow count split and the jobs planner's unsplit
routing by the shared prediction.

How (as ``planners.split``'s LP method): (1) ``clos_auto``'s unsplit routing is the
preference, and the plan, unsplit, where its max load meets max(floor, ``cuts.split_bound``)
(above the floor with its links at the max all in cuts at the bound: ``clos_split_bound``; no
LP, ``info["split"]`` says so); (2) min alpha (HiGHS interior
point with crossover: a vertex); above the floor, without crossover: a point inside the
optimal face, whose cells at alpha are so in every optimum, then the others' least max alpha2
(the fewest links at the max: the second layer);
(3) under alpha + 1e-9 on those cells, (alpha + alpha2) / 2 on the others, the flows that stay
where ``auto`` put them (per option min(share, its flows)) are maximised (dual simplex: a
vertex, so few fractional shares; no flow moves where ``auto``'s routing meets those bounds);
(4) a commodity's shares go to its flows, each flow first whole on its preferred option if a
share has room, the rest filled in order (McNaughton-like: at most one cut per piece);
(5) every flow of more than ``max_parts`` parts keeps its ``max_parts`` largest options and
those flows are re-balanced there by the min-alpha LP, the others fixed (``split.bound_parts``);
(6) every part takes the least loaded member of every hop, largest parts first. Should (5) lose
the optimum, (3)-(6) again under alpha alone, then maximising the shares on preferred options,
the best kept; should that exceed ``auto``'s max load (it never did in the tests), ``auto``'s
routing is returned unsplit: ``split`` is never behind ``auto`` on the max link load.

Why: spraying a flow over several paths (Ethereal, SIGCOMM'22; multipath RDMA) lowers the max
link load below any unsplit routing when degrees are not multiples of the paths; on a
full-bisection fabric with permutation traffic ``auto`` is already at the optimum: nothing is
split, no LP built.

With bundles the LP bounds each cell (all members together); the member choice of step 6 can
leave a member above alpha (``info["optimal"]`` then says so).

Cost: where ``auto``'s routing meets the bound, ``auto`` and O(F + cuts) (a shift of 4,096
flows on MRC's 8 x 256 x 512: 0.8 s of CPU, 37 s with the LPs, bench/pathsets.json); else the
options O(F x P x middles) numpy; one LP of (commodities x usable options) variables and (used
cells + commodities) rows; above the floor two more without crossover (about 1 s each to the
first's 9 s at 64 x 32); one with a row and a column more per preferred option (three if (5)
loses the optimum); one over the flows above ``max_parts``; the members O(parts x hops x
members). By bytes: one more LP (of flows of distinct weights; none where an unsplit candidate meets the
byte cut bound), ``clos_jobs`` and two or three predictions. The kernel: ``split``'s.

References: McNaughton, Scheduling with deadlines and loss functions, Management Science 1959;
Ethereal (Chen et al., SIGCOMM 2022); HiGHS (Huangfu and Hall, 2018).

>>> from controller.model.clos import Clos
>>> from controller.model.clospaths import ClosProblem
>>> from controller.model.jobs import Flow, Job
>>> fab = Clos.fat_tree(4, hosts_per_leaf=3)       # l0 sends 3 flows over 2 aggregations
>>> job = Job("j", explicit=[Flow("j", f"h0_{k}", f"h1_{k}", 1e6) for k in range(3)])
>>> r = clos_split(ClosProblem.build(fab, [job]))
>>> r.info["fractional_optimum"], round(r.info["max_link_load"], 6), r.info["split_flows"]
(1.5, 1.5, 1)
>>> r = clos_split(ClosProblem.build(Clos.leaf_spine(2, 2, 3), [job]))  # one two-tier plane
>>> r.info["kernel"], r.info["method"], r.info["fractional_optimum"], r.info["split_flows"]
('two-tier', 'mcnaughton', 1.5, 1)
"""
from __future__ import annotations

import time
import warnings

import numpy as np

from controller.errors import InputError
from controller.model.clospaths import ClosProblem
from controller.planners.clos_auto import clos_auto, score
from controller.planners.clos_loads import hop_rows
from controller.planners.clos_split_bound import byte_bound_met, unsplit_at_bound
from controller.planners.clos_split_routing import (
    ClosSplitRouting,
    Part,
    parts_of,
    split_score,
)
from controller.planners.lp import TOL
from controller.planners.split import FLOOR, MAX_PARTS, normalised_shares

_SLACK, _AT = 1e-9, 1e-6  # room above alpha; a cell this close (relative) inside is at it

# ---- the LP on cells ------------------------------------------------------------------------
class _Options:
    """Every usable (plane, middle) option of a set of flows: per variable its flow position
    in ``idx``, plane, middle and hop cells (V, 4), -1 where a flow inside a pod has no hop."""

    def __init__(self, problem: ClosProblem, idx: np.ndarray,
                 allowed: list[set] | None = None):
        L = problem.links
        owner, plane, middle, rows = [], [], [], []
        for q in range(len(problem.fabric.planes)):
            a, b, p, r = (e[idx] for e in problem.end_arrays(q))
            u1, d1, u2, d2 = L.ok(q)
            slot = u1[a] & d1[b]  # (n, slots)
            g = L.group_of_core[q]
            ok = np.zeros((len(idx), max(slot.shape[1], len(g))), dtype=bool)
            inter = p != r
            ok[~inter, :slot.shape[1]] = slot[~inter]
            if len(g):
                ok[inter, :len(g)] = slot[inter][:, g] & u2[p[inter]] & d2[r[inter]]
            if problem.pin is not None:
                ok &= problem.open_in(q, idx)[:, None]
            j, m = np.nonzero(ok)
            if allowed is not None:
                keep = np.array([(q, mm) in allowed[jj] for jj, mm in zip(j.tolist(),
                                                                          m.tolist())], dtype=bool)
                j, m = j[keep], m[keep]
            owner.append(j)
            plane.append(np.full(len(j), q, dtype=np.int64))
            middle.append(m)
            rows.append(hop_rows(problem, q, idx[j], m))
        self.owner = np.concatenate(owner)
        self.plane = np.concatenate(plane)
        self.middle = np.concatenate(middle)
        self.rows = np.concatenate(rows) if rows else np.zeros((0, 4), dtype=np.int64)


def cell_capacity(problem: ClosProblem) -> np.ndarray:
    """Alive units per hop cell (every member of its bundle)."""
    L = problem.links
    units = np.append(L.units, 0.0) * L.alive
    return units[L.cells().members].sum(axis=1)


def _lp(opts: _Options, demand: np.ndarray, cap: np.ndarray, base: np.ndarray,
        target: float | np.ndarray | None = None, prefer: np.ndarray | None = None,
        time_limit: float | None = None, weight: np.ndarray | None = None, floor: float = FLOOR,
        vertex: bool = True, held: np.ndarray | None = None, stay: bool = True
        ) -> tuple[float, np.ndarray]:
    """min alpha >= ``floor`` on the cells not ``held`` (per cell a bound, nan: free; ``vertex``
    False: without crossover) or under ``target`` (one, or per cell) max sum min(x, ``prefer``)
    (``stay`` False: the shares on options ``prefer`` > 0): (alpha, x). ``weight``: per
    variable what a unit share puts on each of its cells (1)."""
    # imported here: scipy.optimize takes about 0.3 s to import, a fifth of the controller's start
    from scipy.optimize import OptimizeWarning, linprog
    from scipy.sparse import coo_matrix
    V = len(opts.owner)
    var = np.repeat(np.arange(V), 4)
    cell = opts.rows.ravel()
    keep = cell >= 0
    var, cell = var[keep], cell[keep]
    used, link = np.unique(cell, return_inverse=True)
    per = np.ones(V) if weight is None else np.asarray(weight, dtype=float)
    a_rows, a_cols, a_vals = [link], [var], [per[var] / cap[cell]]
    fixed = base[used] / cap[used]
    if target is None:  # column V, alpha, on the free cells' rows
        free = np.flatnonzero(np.ones(len(used), bool) if held is None else np.isnan(held[used]))
        a_rows, a_cols = a_rows + [free], a_cols + [np.full(len(free), V)]
        a_vals.append(-np.ones(len(free)))
        b_ub = (0.0 if held is None else np.nan_to_num(held[used])) - fixed
        bounds = [(0, None)] * V + [(floor, None)]
    else:  # per preferred option a column y <= x, y <= prefer (a row and a bound)
        pv = np.flatnonzero(prefer > 0) if stay else np.zeros(0, dtype=np.int64)
        k = np.arange(len(pv))
        a_rows, a_cols = a_rows + [len(used) + k] * 2, a_cols + [V + k, pv]
        a_vals += [np.ones(len(pv)), -np.ones(len(pv))]
        b_ub = np.append((target[used] if np.ndim(target) else target) - fixed, np.zeros(len(pv)))
        bounds = [(0, None)] * V + [(0, float(p)) for p in prefer[pv]]
    cols = len(bounds)
    a_ub = coo_matrix((np.concatenate(a_vals), (np.concatenate(a_rows), np.concatenate(a_cols))),
                      shape=(len(b_ub), cols)).tocsr()
    a_eq = coo_matrix((np.ones(V), (opts.owner, np.arange(V))), shape=(len(demand), cols)).tocsr()
    c = np.append(np.zeros(V) if stay or target is None else -(prefer > 0).astype(float),
                  np.full(cols - V, 1.0 if target is None else -1.0))
    options = {"presolve": True} if vertex else {"presolve": True, "run_crossover": "off"}
    if time_limit is not None:
        options["time_limit"] = float(time_limit)
    with warnings.catch_warnings():  # linprog warns that it passes run_crossover on
        warnings.simplefilter("ignore", OptimizeWarning)
        res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=demand, bounds=bounds,
                      method="highs-ipm" if target is None else "highs-ds", options=options)
    if res.status != 0:
        raise InputError(f"split: the LP ended with status {res.status} ({res.message})")
    x = np.clip(res.x[:V], 0.0, None)
    return (float(res.x[V]) if target is None else float(np.max(target))), x


def commodities(problem: ClosProblem, weight: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """(commodity per flow, one representative flow per commodity): flows with the same
    source and destination leaf in every plane, and the same pin (and ``weight``, one per
    flow, when given). O(F log F)."""
    n = len(problem)
    keys = np.stack([e for q in range(len(problem.fabric.planes))
                     for e in problem.end_arrays(q)[:2]], axis=1) if n else np.zeros((0, 2))
    if problem.pin is not None:
        keys = np.column_stack([keys, problem.pin])
    if weight is not None:
        keys = np.column_stack([keys.astype(float), weight])
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    return inverse.ravel(), first


def fractional_optimum(problem: ClosProblem, time_limit: float | None = None) -> float:
    """min over splittable routings of the max fabric-link load (>= ``FLOOR``); 0 without
    flows. One LP over commodities x usable options."""
    if not len(problem):
        return 0.0
    com, first = commodities(problem)
    opts = _Options(problem, first)
    demand = np.bincount(com, minlength=len(first)).astype(float)
    base = np.zeros(len(problem.links.cells().members))
    return _lp(opts, demand, cell_capacity(problem), base, time_limit=time_limit)[0]


# ---- the planner ----------------------------------------------------------------------------
def clos_split(problem: ClosProblem, max_parts: int | None = MAX_PARTS,
               time_limit: float | None = None, objective: str = "flows") -> ClosSplitRouting:
    """The split of the module docstring: on flow counts, or with ``objective`` "jobs" by
    bytes (``by_bytes``); each flow in at most ``max_parts`` parts (None: no bound). On a
    single two-tier plane the two-tier kernel (``planners.split``) makes the plan."""
    if max_parts is not None and (isinstance(max_parts, bool) or not isinstance(max_parts, int)
                                  or max_parts < 1):
        raise InputError(f"split: max_parts must be a positive integer or null, got {max_parts!r}")
    if objective not in ("flows", "jobs"):
        raise InputError(f"split: unknown objective {objective!r} (choose from flows, jobs)")
    kernel = _two_tier(problem, max_parts, time_limit, objective)
    if kernel is not None:
        return _not_behind_jobs(problem, kernel) if objective == "jobs" and len(problem) \
            else kernel
    r = _by_flows(problem, max_parts, time_limit)
    if objective == "jobs" and len(problem):
        r = by_bytes(problem, r, max_parts, time_limit)
    return r


def _two_tier(problem: ClosProblem, max_parts: int | None, time_limit: float | None,
              objective: str) -> ClosSplitRouting | None:
    """The two-tier kernel's plan (``planners.split`` on the plane's two-tier model: McNaughton
    or its LP, by bytes with objective jobs) as this problem's routing, each flow's parts in
    the kernel's order; None when the fabric is not a single two-tier plane
    (``Clos.as_leaf_spine``) or the two models route other flows. O(the kernel + parts)."""
    from controller.planners.leaf_spine import spine_path, two_tier_problem
    from controller.planners.split import split
    p2 = two_tier_problem(problem)
    if p2 is None:
        return None
    limit = {} if time_limit is None else {"time_limit": float(time_limit)}
    a = split(p2, max_parts=max_parts, objective=objective, **limit)
    parts: list[list[Part]] = [[(0, int(s), spine_path(problem, i, int(s)), float(x))
                                for s, x in mine] for i, mine in enumerate(a.parts)]
    return ClosSplitRouting([0] * len(parts), [p[0][1] for p in parts],
                            [p[0][2] for p in parts], {**a.info, "kernel": "two-tier"}, parts)


def _by_flows(problem: ClosProblem, max_parts: int | None,
              time_limit: float | None) -> ClosSplitRouting:
    """The path LP on flow counts (module docstring, steps 1-6)."""
    t0 = time.perf_counter()
    n = len(problem)
    start = clos_auto(problem)
    auto_key = score(problem, start)
    if not n:
        return ClosSplitRouting([], [], [], {"method": "lp", "split_flows": 0}, [])
    if (short := unsplit_at_bound(problem, start, auto_key, max_parts, t0)) is not None:
        return short  # nothing to gain: no LP (clos_split_bound)
    com, first = commodities(problem)
    opts = _Options(problem, first)
    demand = np.bincount(com, minlength=len(first)).astype(float)
    cap = cell_capacity(problem)
    base = np.zeros(len(cap))
    t1 = time.perf_counter()
    alpha, _ = _lp(opts, demand, cap, base, time_limit=time_limit)
    var_of = {(int(c), int(q), int(m)): v for v, (c, q, m) in
              enumerate(zip(opts.owner, opts.plane, opts.middle))}
    pref = np.zeros(len(opts.owner))
    for i in range(n):
        pref[var_of[(int(com[i]), start.plane[i], start.middle[i])]] += 1.0
    bound, held = _below_max(opts, demand, cap, base, alpha, time_limit)
    tried = []
    plain = [(alpha + _SLACK, None, True), (alpha + _SLACK, None, False)]
    for target, at_max, stay in [(bound, held, True)] * (held is not None) + plain:
        try:
            _, x = _lp(opts, demand, cap, base, target, pref, time_limit, stay=stay)
        except InputError:  # per cell: the inner point's tolerance; alpha alone must do
            if at_max is None:
                raise
            continue
        shares = _fill(problem, com, start, opts, var_of, x)
        load = _cell_loads(problem, shares)
        unbounded = float((load / np.where(load > 0, cap, 1.0)).max(initial=0.0))
        over = [i for i, s in enumerate(shares) if max_parts is not None and len(s) > max_parts]
        if over:
            shares = _bound(problem, shares, over, max_parts, cap, time_limit)
        r = _members(problem, shares)
        tried.append((split_score(problem, r), unbounded, at_max, r))
        if tried[-1][0][0] <= alpha + 1e-6:  # the bound on parts kept the optimum
            break
    lp_ms = (time.perf_counter() - t1) * 1e3  # the LPs and the plans between them
    key, unbounded, at_max, r = min(tried, key=lambda t: t[0])
    info = {"method": "lp", "fractional_optimum": round(alpha, 9), "max_link_load": key[0],
            "auto_max_link_load": auto_key[0], "lp_ms": round(lp_ms, 3),
            "parts_bound": max_parts, "unbounded_max_link_load": round(unbounded, 9),
            "cells_held_at_max": at_max}
    if key[0] > auto_key[0] + 1e-6:  # never behind auto (but for the LP's dust, as optimal)
        r = ClosSplitRouting(start.plane, start.middle, start.path, {}, parts_of(start))
        key = auto_key
        info.update(chosen="auto", max_link_load=key[0])
    sizes = [len(p) for p in r.parts if len(p) > 1]
    info.update(split_flows=len(sizes), subflows=sum(sizes), max_parts=max(sizes, default=1),
                optimal=key[0] <= alpha + 1e-6, wall_ms=round((time.perf_counter() - t0) * 1e3, 3))
    r.info = info
    return r


def by_bytes(problem: ClosProblem, by_flows: ClosSplitRouting, max_parts: int | None,
             time_limit: float | None) -> ClosSplitRouting:
    """The byte-aware split (objective ``jobs``), as ``planners.split.split_bytes`` on paths:
    shares that minimise the max time a cell is busy, each flow weighing its bytes per
    iteration at the leaf links' rate (``clos_jobs``' weights; no floor), each flow cut to its
    ``max_parts`` largest shares; then the best by the shared prediction
    (``predict_clos_split_times``; ``objective.rank_key``: the mean, the worst within that
    of the lowest-mean candidate) of that routing, ``by_flows`` (the flow count split) and
    the jobs planner's unsplit routing (``clos_jobs``), so that it is never behind the
    latter. ``info["byte_fractional_optimum"]`` (seconds) and ``info["chosen"]``.
    Cost: one LP over (flows of distinct weight) x usable options, three predictions and
    ``clos_jobs``."""
    from controller.planners.objective import iteration_bytes
    t0 = time.perf_counter()
    weight = np.array(iteration_bytes(problem)) / problem.fabric.link_bps("leaf")
    candidates = {"flows": by_flows, "jobs-unsplit": _jobs_unsplit(problem)}
    met, alpha = byte_bound_met(problem, weight, candidates)
    if met is None:  # else that candidate is an optimum of the byte LP: no LP
        com, first = commodities(problem, weight)
        opts = _Options(problem, first)
        demand = np.bincount(com, minlength=len(first)).astype(float)
        cap = cell_capacity(problem)
        alpha, x = _lp(opts, demand, cap, np.zeros(len(cap)), time_limit=time_limit,
                       weight=weight[first][opts.owner], floor=0.0)
        shares = _deal(problem, com, opts, x)
        if max_parts is not None:
            shares = [normalised_shares(dict(_largest(s, max_parts))) for s in shares]
        candidates = {"bytes": _members(problem, shares), **candidates}
    chosen, scores = _by_prediction(problem, candidates)
    out = candidates[chosen]
    info = dict(by_flows.info, **({} if met is None else
                                  {"split_bytes": f"{met} at the byte cut bound: no LP"}))
    info.update(objective="jobs", byte_fractional_optimum=round(alpha, 9),
                **_chosen_info(out, chosen, scores[chosen]),
                candidates_mean={n: round(sum(v.values()) / max(1, len(v)), 6)
                                 for n, v in scores.items()},
                bytes_ms=round((time.perf_counter() - t0) * 1e3, 3))
    if chosen != "flows":
        info["max_link_load"] = split_score(problem, out)[0]
        info["optimal"] = False  # on flow counts; bytes: see byte_fractional_optimum
    out.info = info
    return out


def _by_prediction(problem: ClosProblem, candidates: dict) -> tuple[str, dict]:
    """The candidate (name -> ``ClosSplitRouting``) the shared prediction ranks best
    (``objective.rank_key``: the mean, the worst within that of the lowest-mean candidate;
    names break ties), and every candidate's per-job slowdowns."""
    from controller.model.iteration import predict_clos_split_times, slowdown
    from controller.planners.objective import rank_key, worst_bound
    bps = problem.fabric.link_bps("host")
    scores = {}
    for name, r in candidates.items():
        times = predict_clos_split_times(problem, r)
        scores[name] = {j.id: slowdown(j, times[j.id], bps) for j in problem.jobs}
    bound = worst_bound(scores)
    return min(candidates, key=lambda n: (rank_key(scores[n].values(), bound), n)), scores


def _not_behind_jobs(problem: ClosProblem, kernel: ClosSplitRouting) -> ClosSplitRouting:
    """By bytes on a single two-tier plane: the kernel's plan, or the jobs planner's unsplit
    routing (``clos_jobs``) where the prediction ranks it better. The kernel's own unsplit
    candidate is its two-tier search's; ``clos_jobs`` searches on from it."""
    candidates = {"kernel": kernel, "jobs-unsplit": _jobs_unsplit(problem)}
    chosen, scores = _by_prediction(problem, candidates)
    if chosen == "kernel":
        return kernel
    out = candidates[chosen]
    out.info = {**kernel.info, **_chosen_info(out, chosen, scores[chosen]),
                "max_link_load": split_score(problem, out)[0], "optimal": False}
    return out


def _jobs_unsplit(problem: ClosProblem) -> ClosSplitRouting:
    """The jobs planner's unsplit routing (``clos_jobs``), one part a flow: the candidate that
    keeps the byte split from being behind it."""
    from controller.planners.clos_jobs import clos_jobs
    r = clos_jobs(problem)
    return ClosSplitRouting(r.plane, r.middle, r.path, {}, parts_of(r))


def _largest(shares: dict, count: int) -> list[tuple]:
    """The ``count`` largest (option, share) pairs of a flow's ``shares``, ties by option."""
    return sorted(shares.items(), key=lambda kv: (-kv[1], kv[0]))[:count]


def _chosen_info(out: ClosSplitRouting, chosen: str, slowdowns: dict) -> dict:
    """The info of a candidate the prediction chose: its name, per-job slowdowns, worst and
    mean, and its split flows and parts."""
    values = list(slowdowns.values())
    sizes = [len(p) for p in out.parts if len(p) > 1]
    return {"chosen": chosen, "predicted_slowdown": slowdowns,
            "worst_slowdown": max(values, default=1.0),
            "mean_slowdown": sum(values) / len(values) if values else 1.0,
            "split_flows": len(sizes), "subflows": sum(sizes), "max_parts": max(sizes, default=1)}


def _below_max(opts, demand, cap, base, alpha, time_limit) -> tuple:
    """Step 3's bound per cell and the cells it holds at alpha (module docstring); at the floor
    alpha alone and None: a link there carries a flow at its NIC's rate, nothing to relieve."""
    if alpha <= FLOOR + _SLACK:
        return alpha + _SLACK, None
    _, x = _lp(opts, demand, cap, base, time_limit=time_limit, vertex=False)
    cell, on = opts.rows.ravel(), opts.rows.ravel() >= 0
    load = (np.bincount(cell[on], np.repeat(x, 4)[on], len(cap)) + base) / np.maximum(cap, 1e-12)
    at = load >= alpha * (1 - _AT)
    bound = np.where(at, alpha + _SLACK, np.nan)  # nan: free in the second level's LP
    second, _ = _lp(opts, demand, cap, base, time_limit=time_limit, vertex=False, held=bound)
    bound[~at] = (alpha + second) / 2
    return bound, int(at.sum())


def _deal(problem: ClosProblem, com: np.ndarray, opts: _Options, x: np.ndarray) -> list[dict]:
    """Per flow {(plane, middle): share}: each commodity's shares dealt to its flows in order,
    largest shares first (McNaughton-like: at most one cut per piece)."""
    out: list[dict] = [{} for _ in range(len(problem))]
    amounts = {v: float(x[v]) for v in np.flatnonzero(x > TOL).tolist()}
    _hand_out(_pieces(opts, amounts), com, range(len(problem)), out)
    return out


def _fill(problem, com, start, opts, var_of, x) -> list[dict]:
    """Per flow {(plane, middle): share}: a commodity's shares to its flows, each flow first
    whole on its preferred (``start``) option where a share has room, then in order."""
    left = {v: float(x[v]) for v in np.flatnonzero(x > TOL).tolist()}
    out: list[dict] = [{} for _ in range(len(problem))]
    rest: list[int] = []
    for i in range(len(problem)):
        v = var_of[(int(com[i]), start.plane[i], start.middle[i])]
        if left.get(v, 0.0) >= 1.0 - 1e-7:
            out[i] = {(start.plane[i], start.middle[i]): 1.0}
            left[v] -= 1.0
        else:
            rest.append(i)
    _hand_out(_pieces(opts, left), com, rest, out)
    return out


def _pieces(opts: _Options, amounts: dict[int, float]) -> dict[int, list]:
    """Per commodity its options' shares above ``TOL``, [(plane, middle), amount], largest
    first (ties by option)."""
    pieces: dict[int, list] = {}
    for v, amount in sorted(amounts.items(), key=lambda va: (-va[1], va[0])):
        if amount > TOL:
            pieces.setdefault(int(opts.owner[v]), []).append(
                [(int(opts.plane[v]), int(opts.middle[v])), amount])
    return pieces


def _hand_out(pieces: dict[int, list], com: np.ndarray, flows, out: list[dict]) -> None:
    """Each flow of ``flows`` in order takes a whole unit from its commodity's ``pieces``
    (consumed in order, a piece cut at most once per flow) into ``out``, normalised."""
    for i in flows:
        need, queue = 1.0, pieces.get(int(com[i]), [])
        while need > TOL and queue:
            key, amount = queue[0]
            take = min(amount, need)
            out[i][key] = out[i].get(key, 0.0) + take
            need -= take
            queue[0][1] -= take
            if queue[0][1] <= TOL:
                queue.pop(0)
        out[i] = normalised_shares(out[i])


def _cell_loads(problem: ClosProblem, shares: list[dict], skip=()) -> np.ndarray:
    """Flows per hop cell (not per unit) of ``shares``, the flows in ``skip`` left out."""
    skip = set(skip)
    idx, planes, middles, vals = [], [], [], []
    for i, s in enumerate(shares):
        if i not in skip:
            for (q, m), w in s.items():
                idx.append(i)
                planes.append(q)
                middles.append(m)
                vals.append(w)
    load = np.zeros(len(problem.links.cells().members))
    idx, planes, middles = (np.asarray(a, dtype=np.int64) for a in (idx, planes, middles))
    vals = np.asarray(vals, dtype=float)
    for q in np.unique(planes).tolist():
        on = planes == q
        rows = hop_rows(problem, q, idx[on], middles[on])
        w = np.repeat(vals[on], 4)
        flat = rows.ravel()
        np.add.at(load, flat[flat >= 0], w[flat >= 0])
    return load


def _bound(problem, shares, over, max_parts, cap, time_limit) -> list[dict]:
    """Flows in ``over`` confined to their ``max_parts`` largest options and re-balanced by
    the min-alpha LP there, every other flow fixed; the largest shares scaled up if the LP
    fails (``split._lp_within``)."""
    shares = list(shares)
    kept = []
    for i in over:
        top = _largest(shares[i], max_parts)
        kept.append({k for k, _ in top})
        shares[i] = normalised_shares(dict(top))
    base = _cell_loads(problem, shares, skip=over)
    idx = np.asarray(over, dtype=np.int64)
    opts = _Options(problem, idx, kept)
    try:
        _, x = _lp(opts, np.ones(len(over)), cap, base, time_limit=time_limit)
    except InputError:
        return shares
    new: list[dict] = [{} for _ in over]
    for v in np.flatnonzero(x > TOL).tolist():
        key = (int(opts.plane[v]), int(opts.middle[v]))
        j = int(opts.owner[v])
        new[j][key] = new[j].get(key, 0.0) + float(x[v])
    for j, i in enumerate(over):
        if new[j]:
            shares[i] = normalised_shares(new[j])
    return shares


def _members(problem: ClosProblem, shares: list[dict]) -> ClosSplitRouting:
    """Every part on the least loaded member of every hop, largest parts first."""
    L = problem.links
    cells = L.cells()
    load = np.zeros(L.count + 1)
    load[~L.alive] = np.inf
    step = np.append(1.0 / L.units, 1.0)
    order = sorted(((i, k, w) for i, s in enumerate(shares) for k, w in s.items()),
                   key=lambda t: (-t[2], t[0], t[1]))
    parts: list[list[Part]] = [[] for _ in shares]
    for i, (q, m), w in order:
        rows = hop_rows(problem, q, np.array([i]), np.array([m]))[0]
        path = []
        for c in rows[rows >= 0].tolist():
            ids = cells.members[c]
            x = int(ids[np.argmin(load[ids] + w * step[ids])])
            load[x] += w * step[x]
            path.append(x)
        parts[i].append((q, m, tuple(path), w))
    for p in parts:
        p.sort(key=lambda t: (-t[3], t[0], t[1]))
    main = [p[0] if p else (-1, -1, (), 0.0) for p in parts]
    return ClosSplitRouting([t[0] for t in main], [t[1] for t in main], [t[2] for t in main],
                            {}, parts)
