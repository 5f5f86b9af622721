"""The exact reference on a Clos fabric: the path ILP (HiGHS through scipy's milp).

A binary x[f, q, m] per flow and usable option (plane q, middle m: the aggregation slot inside
a pod, the core between pods) and a continuous alpha; every flow takes one option; every hop
*cell* (a leaf's bundle to an aggregation switch or an aggregation switch's bundle to a core,
each direction) carries at most cap x alpha flows, cap = alive members x their capacity units;
minimise alpha, the maximum load over the fabric links (host links are not in the objective, as
in ``clos_auto.score``).

Bundles: the members are not in the model; they are chosen afterwards, flow by flow, least
loaded first (``ClosLoads.pick``), so a bundle of n alive members carrying m flows has
ceil(m/n) on its busiest member, the least possible. When every fabric link has the leaf
tier's speed (one capacity unit) alpha is an integer and "m <= n x alpha" is exactly
"ceil(m/n) <= alpha": the ILP is exact, bundles or not. With faster links in bundles (units
u > 1, n > 1) a bundle is pooled (m <= n u alpha, a relaxation): ``objective`` is then a lower
bound on the best max member load and ``max_link_load`` what the balanced routing has
(``info["exact"]`` says which). Without bundles the ILP is exact at any speeds.

The incumbent (``clos_auto``'s routing unless one is given) is an upper bound and
``lower_bound`` (without bundles) a lower bound: when they meet, nothing is solved. Otherwise
the model asks for alpha below the incumbent (a cutoff, which is what a warm start would give
the solver: ``milp`` takes no starting point), so "infeasible" proves the incumbent optimal;
the result is never worse than the incumbent. ``info``: status, objective, bound (the larger of
the lower bound and HiGHS's dual bound, capped at the incumbent), proved, gap, wall_ms.

Cost: one MILP with a binary per usable option (F x middles) and a row per flow and per used
cell; exponential at worst, for references and benchmarks (k <= 8 in seconds), never on the
request path.

>>> from controller.model.clos import Clos
>>> from controller.model.clospaths import ClosProblem
>>> from controller.model.jobs import parse_job
>>> fab = Clos.fat_tree(4)
>>> hosts = list(fab.host_leaves)
>>> job = parse_job({"id": "r", "collective": "ring_allreduce", "ranks": hosts, "bytes": 1e6}, fab)
>>> r = clos_ilp(ClosProblem.build(fab, [job]), 10)
>>> r.info["status"], r.info["objective"], r.info["proved"]
('optimal', 1.0, True)
"""
from __future__ import annotations

import time

import numpy as np
from scipy.sparse import coo_matrix

from controller.model.clospaths import ClosProblem, ClosRouting, lower_bound
from controller.planners.clos_auto import clos_auto, score
from controller.planners.clos_loads import ClosLoads, empty_routing, hop_rows
from controller.planners.ilp import check_time_limit, run_milp

CUTOFF = 1e-6  # the cutoff below the incumbent when loads are not whole numbers of flows


def clos_ilp(problem: ClosProblem, time_limit: float = 60.0,
             incumbent: ClosRouting | None = None) -> ClosRouting:
    """Minimum max fabric-link load, proven within ``time_limit`` seconds or reported not."""
    check_time_limit(time_limit)
    t0 = time.perf_counter()
    if incumbent is None:
        incumbent, source = clos_auto(problem, time_limit=min(1.0, time_limit / 4)), "auto"
    else:
        source = "given"
    L = problem.links
    cells = L.cells()
    alive = L.alive[cells.members]
    n_alive = alive.sum(axis=1)
    unit = L.units[np.where(alive, cells.members, 0)].max(axis=1, initial=0)
    whole = bool(np.all(unit[n_alive > 0] == 1.0))  # alpha and every load a whole number
    exact = whole or cells.width == 1
    cap = n_alive * unit
    incumbent = _members(problem, *_chosen(incumbent))  # members rebalanced: never worse
    upper = cell_max(problem, incumbent, cap, whole)
    lower = lower_bound(problem) if exact else 0.0
    info = {"time_limit_s": time_limit, "incumbent_from": source, "exact": exact}
    if not len(problem) or upper <= lower + 1e-9:
        return _done(problem, incumbent, info, "optimal", upper, upper, True, "lower_bound", t0)

    flow, middle, plane, rows = _options(problem)
    n, nx = len(problem), len(flow)
    used, inv = np.unique(rows[rows >= 0], return_inverse=True)
    var = np.repeat(np.arange(nx), 4)[(rows >= 0).ravel()]
    rows_all = np.concatenate([flow, n + inv, n + np.arange(len(used))])
    cols_all = np.concatenate([np.arange(nx), var, np.full(len(used), nx)])
    vals = np.concatenate([np.ones(nx + len(var)), -cap[used]])
    a = coo_matrix((vals, (rows_all, cols_all)), shape=(n + len(used), nx + 1)).tocsr()
    lb = np.concatenate([np.ones(n), np.full(len(used), -np.inf)])
    ub = np.concatenate([np.ones(n), np.zeros(len(used))])
    c = np.zeros(nx + 1)
    c[nx] = 1.0
    top = upper - (1.0 if whole else CUTOFF * max(1.0, upper))
    integrality = np.ones(nx + 1)
    integrality[nx] = 1 if whole else 0
    res, status, dual = run_milp(c, a, lb, ub, integrality, np.append(np.zeros(nx), lower),
                                 np.append(np.ones(nx), top), time_limit, t0)
    routing, proved_by, proved = incumbent, None, False
    if status == "infeasible":  # nothing below the incumbent: it is optimal
        status, proved_by = "optimal", "solver_cutoff"
    if res.x is not None:
        chosen = np.flatnonzero(res.x[:nx] > 0.5)
        candidate = _members(problem, flow[chosen], plane[chosen], middle[chosen])
        if cell_max(problem, candidate, cap, whole) <= upper + 1e-9:
            routing, info["incumbent_from"] = candidate, "solver"
    value = cell_max(problem, routing, cap, whole)
    bound = lower
    if dual is not None:
        bound = max(bound, min(dual - 1e-6 if not whole else np.ceil(dual - 1e-6), value))
    if status == "optimal":
        bound, proved = value, True
    return _done(problem, routing, info, status, value, bound, proved, proved_by, t0)


def cell_max(problem: ClosProblem, r: ClosRouting, cap: np.ndarray, whole: bool) -> float:
    """The ILP's objective for ``r``: max over hop cells of ceil(flows / alive members) when
    ``whole`` (every unit 1: the balanced max member load), else flows / capacity."""
    cell_of = problem.links.cells().cell_of
    ids = np.fromiter((x for path in r.path for x in path), dtype=np.int64)
    flows = np.bincount(cell_of[ids], minlength=len(cap)) if len(ids) else np.zeros(len(cap))
    safe = np.where(cap > 0, cap, 1)
    load = np.ceil(flows / safe) if whole else flows / safe
    return round(float(np.where(flows > 0, load, 0.0).max(initial=0.0)), 9)


def _chosen(r: ClosRouting) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    placed = [i for i, q in enumerate(r.plane) if q >= 0]
    return (np.array(placed, dtype=np.int64), np.array([r.plane[i] for i in placed], dtype=np.int64),
            np.array([r.middle[i] for i in placed], dtype=np.int64))


def _options(problem: ClosProblem):
    """Every usable (flow, plane, middle) with its cells: (flow, middle, plane, rows (V, 4))."""
    L = problem.links
    out = []
    for q in range(len(problem.fabric.planes)):
        a, b, p, r = problem.end_arrays(q)
        u1, d1, u2, d2 = L.ok(q)
        groups = L.group_of_core[q]
        intra = np.flatnonzero(p == r)
        f, m = np.nonzero(u1[a[intra]] & d1[b[intra]])
        parts = [(intra[f], m)]
        inter = np.flatnonzero(p != r)
        if len(inter) and len(groups):
            ok = ((u1[a[inter]] & d1[b[inter]])[:, groups] & u2[p[inter]] & d2[r[inter]])
            f, m = np.nonzero(ok)
            parts.append((inter[f], m))
        for f, m in parts:
            out.append((f, m, np.full(len(f), q), hop_rows(problem, q, f, m)))
    flow, middle, plane, rows = (np.concatenate(x) for x in zip(*out))
    order = np.lexsort((middle, plane, flow))  # variables flow by flow
    return flow[order], middle[order], plane[order], rows[order]


def _members(problem: ClosProblem, flow, plane, middle) -> ClosRouting:
    """The routing of the chosen options, each hop on its least loaded member, flow order."""
    r = empty_routing(len(problem), {})
    loads = ClosLoads(problem)
    for i, q, m in sorted(zip(flow.tolist(), plane.tolist(), middle.tolist())):
        r.plane[i], r.middle[i] = q, m
        r.path[i] = loads.pick(i, q, m)
        loads.add(i, q, r.path[i])
    return r


def _done(problem, r: ClosRouting, info: dict, status: str, value: float, bound: float,
          proved: bool, proved_by, t0: float) -> ClosRouting:
    out = ClosRouting(list(r.plane), list(r.middle), list(r.path), dict(info))
    out.info.update(status=status, objective=value, bound=round(float(bound), 9),
                    proved=proved, max_link_load=score(problem, out)[0],
                    gap=round(max(value - float(bound), 0.0), 9),
                    wall_ms=(time.perf_counter() - t0) * 1e3,
                    solver="HiGHS (scipy.optimize.milp)")
    if proved_by:
        out.info["proved_by"] = proved_by
    return out
