"""The exact reference on a Clos fabric: the path ILP (HiGHS through scipy's milp).

A binary x[f, q, m] per flow and usable option (plane q, middle m: the aggregation slot inside
a pod, the core between pods) and a continuous alpha; every flow takes one option; every hop
*cell* (a leaf's bundle to an aggregation switch or an aggregation switch's bundle to a core,
each direction) carries at most cap x alpha flows, cap = alive members x their capacity units;
minimise alpha, the maximum load over the fabric links (host links are not in the objective, as
in ``clos_auto.score``). A pinned flow (``ClosProblem.pin``) has options in its plane only.

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

The second layer (``clos_ilp_layer2``): with the max load fixed at alpha, fewest directed
fabric links at alpha, exact at any speeds (a member's flows are whole numbers, so the cell's
count is pooled without loss); the MILP is the two-tier one's (``ilp.layer2_milp``).

``clos_ilp`` is the planner ``ilp`` on every fabric (a single two-tier plane too, through
``leaf_spine.clos_planner``: one algorithm, one result): layer 1, then the second layer's
MILP at the max load found, within the time left of ``time_limit``, then below the max the
deterministic chains of ``clos_layer2.fewer_below`` (the rest of the sorted load vector,
not proven). Each MILP reports its status, bound and gap; a run that hit the time limit is
never reported optimal.

Cost: two MILPs with a binary per usable option (F x middles) and a row per flow and per used
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

from controller.model.clospaths import ClosProblem, ClosRouting, lower_bound
from controller.planners.clos_auto import clos_auto
from controller.planners.clos_ilp_layer2 import (
    _chosen,
    _done,
    _members,
    cell_max,
    layer2_exact,
    path_options,
)
from controller.planners.clos_layer2 import fewer_below
from controller.planners.clos_loads import score
from controller.planners.ilp import check_time_limit, run_milp

CUTOFF = 1e-6  # the cutoff below the incumbent when loads are not whole numbers of flows


def clos_ilp(problem: ClosProblem, time_limit: float = 60.0,
             incumbent: ClosRouting | None = None, layer2: bool = True) -> ClosRouting:
    """The exact lexicographic routing as far as the MILPs reach within ``time_limit``
    seconds (module docstring): the minimum max fabric-link load (``layer1``, proven or
    reported not), then with ``layer2`` the fewest links at it (``layer2_exact`` within the
    time left, from the layer-1 routing), then fewer links at each load below the max
    (``clos_layer2.fewer_below``, deterministic chains, until the time limit). ``info``:
    layer 1's report (status, objective, bound, proved, gap, exact, incumbent_from), and
    ``layer2`` (the MILP's status, links_at_max, bound, gap, proved, incumbent_from, wall_ms,
    or status "skipped" when no time is left), ``layer2_below``, ``links_at_max``,
    ``optimal_layers``, ``ms`` per stage, ``wall_ms`` in all."""
    check_time_limit(time_limit)
    t0 = time.perf_counter()
    r = layer1(problem, time_limit, incumbent)
    if not layer2:
        return r
    t1 = time.perf_counter()
    info = dict(r.info)
    alpha, count = score(problem, r)
    left = time_limit - (t1 - t0)
    report: dict = {"status": "skipped", "links_at_max": count, "proved": False}
    if alpha > 0 and left > 1e-3:
        m = layer2_exact(problem, alpha, left, r, "layer1")
        report = {k: m.info[k] for k in ("status", "links_at_max", "bound", "gap", "proved",
                                          "incumbent_from", "wall_ms")}
        if m.info["incumbent_from"] == "solver":
            r = m
    elif alpha <= 0:
        report.update(status="optimal", proved=True, bound=0, gap=0)
    t2 = time.perf_counter()
    if alpha > 0:
        r = fewer_below(problem, r, alpha, deadline=t0 + time_limit)
    info.update(layer2=report, layer2_below=r.info.get("layer2_below"),
                max_link_load=score(problem, r)[0], links_at_max=score(problem, r)[1],
                optimal_layers={"max_link_load": info["proved"],
                                "links_at_max": bool(info["proved"] and report["proved"])},
                ms={"layer1": round(info["wall_ms"], 3), "layer2": round((t2 - t1) * 1e3, 3),
                    "layer2_below": round((time.perf_counter() - t2) * 1e3, 3)},
                wall_ms=(time.perf_counter() - t0) * 1e3)
    return ClosRouting(r.plane, r.middle, r.path, info)


def layer1(problem: ClosProblem, time_limit: float = 60.0,
           incumbent: ClosRouting | None = None) -> ClosRouting:
    """Minimum max fabric-link load, proven within ``time_limit`` seconds or reported not
    (the path ILP of the module docstring)."""
    from scipy.sparse import coo_matrix
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

    flow, middle, plane, rows = path_options(problem)
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


def clos_ilp_layer2(problem: ClosProblem, alpha: float, time_limit: float = 60.0,
                    incumbent: ClosRouting | None = None) -> ClosRouting:
    """The exact second layer: among routings with max fabric-link load <= ``alpha``, fewest
    directed fabric links at ``alpha`` (HiGHS MILP), proven within ``time_limit`` or not.

    The path ILP's options x[f, q, m] and, per used hop cell c with n alive members of u
    units, an integer z[c] in [0, n]: the flows m_c of the cell satisfy m_c <= n lo + z[c],
    lo = hi - 1 where hi = floor(alpha u) (the most flows a member may carry), z[c] the
    members at alpha; minimise the sum of z (``ilp.layer2_milp``, shared with the two-tier
    ``ilp_layer2``: there z is one binary per link). When alpha u is not a whole number no
    member can reach alpha exactly: lo = hi and z[c] = 0. Exact at any speeds, bundles or
    not: a cell's members have one speed (a tier has one), and placing its m_c flows least
    loaded member first (``_members``) leaves max(0, m_c - n lo) members at alpha, the fewest
    any choice of members can (the others carry at most lo each). Without bundles z[c] is
    the two-tier binary: load <= alpha - 1 + z.

    ``incumbent`` (default: ``clos_auto``'s routing when its max load is <= alpha; an
    InputError if a given one exceeds it), rebalanced over its members (never worse), gives
    a cutoff (the model asks for fewer links at alpha, so "infeasible" proves it optimal and
    the result is never worse) and the tie-break of ``ilp_layer2`` (flows stay where it has
    them). ``info``: status, links_at_max, bound (the solver's dual bound, capped), proved,
    alpha, objective (= links_at_max), max_link_load, gap, wall_ms; status "infeasible"
    without an incumbent when alpha is below the optimum. Off the request path.

    >>> from controller.model.clos import Clos
    >>> from controller.model.jobs import parse_job
    >>> fab = Clos.fat_tree(4)
    >>> flows = [{"src": a, "dst": b, "bytes": 1, "sport": i} for i, (a, b) in  # l0 to l1
    ...          enumerate([("h0_0", "h1_0"), ("h0_1", "h1_1"), ("h0_0", "h1_1")])]
    >>> p = ClosProblem.build(fab, [parse_job({"id": "j", "flows": flows}, fab)])
    >>> r = clos_ilp_layer2(p, 2.0, 10)  # 3 flows over 2 slots: one up and one down link at 2
    >>> r.info["status"], r.info["links_at_max"], r.info["proved"]
    ('optimal', 2, True)
    """
    check_time_limit(time_limit)
    if incumbent is not None:
        return layer2_exact(problem, alpha, time_limit, incumbent)
    auto = clos_auto(problem, time_limit=min(1.0, time_limit / 4))
    if score(problem, auto)[0] <= alpha + 1e-9:
        return layer2_exact(problem, alpha, time_limit, auto, "auto")
    return layer2_exact(problem, alpha, time_limit, None, None)
