"""The exact second layer on a Clos fabric (``clos_ilp.clos_ilp_layer2`` runs it): among
routings with max fabric-link load <= alpha, fewest directed fabric links at alpha, a HiGHS
MILP (``ilp.layer2_milp``). Apart from ``clos_ilp`` so that ``clos_auto`` can close a gap its
ejection chains leave (``clos_layer2``) with the exact answer, and ``clos_ilp`` can start
from ``clos_auto``'s routing, with no import cycle. The model, its exactness and its cost:
``clos_ilp_layer2``'s docstring. Also the helpers both ILPs share: the options, the members
least loaded first, the answer's info."""
from __future__ import annotations

import time

import numpy as np

from controller.errors import InputError
from controller.model.clospaths import ClosProblem, ClosRouting, link_loads
from controller.planners.clos_loads import ClosLoads, empty_routing, hop_rows, score
from controller.planners.ilp import check_time_limit, layer2_milp


def layer2_exact(problem: ClosProblem, alpha: float, time_limit: float = 60.0,
                 incumbent: ClosRouting | None = None, source: str | None = "given"
                 ) -> ClosRouting:
    """``clos_ilp_layer2`` with the incumbent given or none (``source``: where it came from,
    in ``info["incumbent_from"]``); an InputError if the incumbent's max load exceeds
    ``alpha``."""
    check_time_limit(time_limit)
    t0 = time.perf_counter()
    if incumbent is not None and score(problem, incumbent)[0] > alpha + 1e-9:
        raise InputError(f"incumbent's max link load exceeds alpha = {alpha}")
    L = problem.links
    cells = L.cells()
    alive = L.alive[cells.members]
    n_alive = alive.sum(axis=1)
    units = L.units[np.where(alive, cells.members, 0)]  # padded members: no index past the end
    unit = np.where(alive, units, 0).max(axis=1, initial=0)
    hi = np.floor(alpha * unit + 1e-6)
    lo = np.where(hi >= alpha * unit - 1e-6, hi - 1, hi)  # hi flows reach alpha: lo below
    same = np.where(alive, units, np.inf).min(axis=1, initial=np.inf) == unit
    info = {"time_limit_s": time_limit, "alpha": alpha, "incumbent_from": source,
            "exact": bool(np.all(same[n_alive > 0]))}  # one speed per cell: always here
    upper = None
    if incumbent is not None:
        incumbent = _members(problem, *_chosen(incumbent))
        upper = links_at(problem, incumbent, alpha)
        if upper == 0:
            return _layer2_done(problem, incumbent, info, "optimal", 0, 0, "lower_bound", t0)
    flow, middle, plane, rows = path_options(problem)
    used, inv = np.unique(rows[rows >= 0], return_inverse=True)
    var = np.repeat(np.arange(len(flow)), 4)[(rows >= 0).ravel()]
    keep = None
    if incumbent is not None:
        keep = ((np.asarray(incumbent.plane)[flow] == plane)
                & (np.asarray(incumbent.middle)[flow] == middle))
    z_ub = np.where(hi > lo, n_alive, 0)[used]
    res, status, dual = layer2_milp(len(problem), flow, var, inv, (n_alive * lo)[used],
                                    (hi - lo)[used], z_ub, 0,
                                    (upper - 1) if upper is not None else z_ub.sum(), keep,
                                    time_limit, t0)
    routing, proved_by = incumbent, None
    if status == "infeasible" and upper is not None:
        status, proved_by = "optimal", "solver_cutoff"
    if res.x is not None:
        chosen = np.flatnonzero(res.x[:len(flow)] > 0.5)
        candidate = _members(problem, flow[chosen], plane[chosen], middle[chosen])
        if score(problem, candidate)[0] <= alpha + 1e-9 and (
                upper is None or links_at(problem, candidate, alpha) < upper):
            routing, info["incumbent_from"] = candidate, "solver"
    if routing is None:
        return _layer2_done(problem, empty_routing(len(problem)), info, status, None, 0, None, t0)
    value = links_at(problem, routing, alpha)
    bound = 0 if dual is None else max(0, min(int(np.ceil(dual - 1e-6)), value))
    if status == "optimal":
        bound = value
    return _layer2_done(problem, routing, info, status, value, bound, proved_by, t0)


def links_at(problem: ClosProblem, r: ClosRouting, alpha: float) -> int:
    """Directed fabric links of ``r`` whose load reaches ``alpha`` (within 1e-9)."""
    fab = link_loads(problem, r)[problem.links.tier > 0]
    return int(np.count_nonzero(fab >= alpha - 1e-9)) if alpha > 0 else 0


def _layer2_done(problem, r, info, status, value, bound, proved_by, t0) -> ClosRouting:
    if value is None:  # nothing routed: alpha below the optimum, no incumbent
        out = ClosRouting(list(r.plane), list(r.middle), list(r.path), dict(info))
        out.info.update(status=status, links_at_max=None, objective=None, bound=0, proved=False,
                        wall_ms=(time.perf_counter() - t0) * 1e3)
        return out
    out = _done(problem, r, info, status, value, bound, status == "optimal", proved_by, t0)
    out.info.update(links_at_max=value, bound=int(bound), gap=int(value - bound))
    return out


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


def path_options(problem: ClosProblem):
    """Every usable (flow, plane, middle) with its cells: (flow, middle, plane, rows (V, 4)):
    the binaries of the layer-2 MILP and of churn's fewest-moves MILP (``clos_ilp_moves``)."""
    L = problem.links
    out = []
    for q in range(len(problem.fabric.planes)):
        a, b, p, r = problem.end_arrays(q)
        u1, d1, u2, d2 = L.ok(q)
        groups = L.group_of_core[q]
        here = problem.open_in(q)  # flows pinned elsewhere have no option in plane q
        intra = np.flatnonzero((p == r) & here)
        f, m = np.nonzero(u1[a[intra]] & d1[b[intra]])
        parts = [(intra[f], m)]
        inter = np.flatnonzero((p != r) & here)
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
