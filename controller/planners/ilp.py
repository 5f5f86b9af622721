"""The reference optimum for layer 1: minimise the maximum directed-link load exactly (HiGHS MILP).

Binary x[f, s] per flow and usable spine, integer alpha; every flow on one spine; every uplink
and downlink carries at most alpha flows. An incumbent routing (the greedy's unless
one is given) is an upper bound and the leaf-degree bound ceil(d / up links) (or a stronger one
given) a lower bound; when they meet, the incumbent is optimal and the solver is not called.
Otherwise the model asks for alpha <= incumbent - 1 (a cutoff, which is what a warm start
would give the solver; SciPy's milp takes no starting point): "infeasible" then proves the
incumbent optimal, and the result is never worse than the incumbent. Every result reports
status, incumbent, bound, gap and wall time: a run that hit its time limit is never reported
as optimal.
"""
from __future__ import annotations

import math
import time

import numpy as np

from controller.errors import InputError
from controller.model.fabric import spine_list
from controller.model.loads import max_link_flows
from controller.model.problem import Assignment, Problem
from controller.planners.greedy import greedy

_STATUS = {0: "optimal", 1: "time_limit", 2: "infeasible", 3: "unbounded", 4: "error"}


def check_time_limit(time_limit) -> None:
    """An InputError unless ``time_limit`` is a positive finite number of seconds."""
    if (isinstance(time_limit, bool) or not isinstance(time_limit, (int, float))
            or not math.isfinite(time_limit) or time_limit <= 0):
        raise InputError(f"ILP time limit must be a positive number of seconds, got {time_limit!r}")


def run_milp(c, a, lb, ub, integrality, lower, upper, time_limit: float, t0: float):
    """One HiGHS run of scipy's milp with what every exact planner here reports: (result,
    status name, dual bound or None). ``lower``/``upper`` bound the variables; the time
    left of ``time_limit`` counts from ``t0`` (time.perf_counter)."""
    # imported here: scipy.optimize takes about 0.3 s to import, a fifth of the controller's start
    from scipy.optimize import Bounds, LinearConstraint, milp
    res = milp(c, constraints=LinearConstraint(a, lb, ub), integrality=integrality,
               bounds=Bounds(lower, upper),
               options={"time_limit": max(1e-3, time_limit - (time.perf_counter() - t0)),
                        "disp": False})
    dual = getattr(res, "mip_dual_bound", None)
    return res, _STATUS.get(res.status, "error"), (dual if dual is not None
                                                    and np.isfinite(dual) else None)


def layer2_milp(n_flows: int, var_flow, pair_var, pair_res, base, step, z_ub, lower: float,
                top: float, keep, time_limit: float, t0: float):
    """The second layer's MILP, shared by the two-tier (``ilp_layer2``) and the Clos
    (``clos_ilp.clos_ilp_layer2``) planners: binary x[v] per option (``var_flow[v]``: its
    flow, exactly one option per flow), integer z[r] in [0, ``z_ub[r]``] per resource r (a
    directed link, or a bundle's cell): load(r) = sum of x[v] over ``pair_var`` with
    ``pair_res`` r <= ``base[r]`` + ``step[r]`` z[r]; minimise the sum of z (the links at
    alpha) with the count between ``lower`` and ``top`` (the cutoff below an incumbent).
    ``keep`` (booleans per option, or None): a tie-break worth less than 1 in all, options
    kept where the incumbent has them. Returns ``run_milp``'s (result, status, dual bound):
    the dual bound is a lower bound on the count (the tie-break only lowers the objective).
    """
    from scipy.sparse import coo_matrix
    nx, nz = len(var_flow), len(base)
    rows = np.concatenate([var_flow, n_flows + np.asarray(pair_res), n_flows + np.arange(nz),
                           np.full(nz, n_flows + nz)])
    cols = np.concatenate([np.arange(nx), pair_var, nx + np.arange(nz), nx + np.arange(nz)])
    vals = np.concatenate([np.ones(nx + len(pair_var)), -np.asarray(step, dtype=float),
                           np.ones(nz)])
    a = coo_matrix((vals, (rows, cols)), shape=(n_flows + nz + 1, nx + nz)).tocsr()
    lb = np.concatenate([np.ones(n_flows), np.full(nz, -np.inf), [lower]])
    ub = np.concatenate([np.ones(n_flows), base, [top]])
    c = np.concatenate([np.zeros(nx), np.ones(nz)])
    if keep is not None:
        c[:nx] = -np.asarray(keep, dtype=float) / (n_flows + 1)
    return run_milp(c, a, lb, ub, np.ones(nx + nz), np.zeros(nx + nz),
                    np.concatenate([np.ones(nx), z_ub]), time_limit, t0)


def ilp(problem: Problem, time_limit: float = 60.0, incumbent: list[int] | None = None,
        lower: int = 0) -> Assignment:
    """Minimum max directed-link load, proven within ``time_limit`` seconds or reported not.

    ``incumbent``: a routing to improve on (default: the greedy's); ``lower``: a known lower
    bound on alpha beside the leaf-degree bound. Cost: one MILP with one binary per (flow,
    usable spine); exponential at worst, instant when the LP relaxation already exceeds
    incumbent - 1 (typical with failed spines).

    >>> from controller.model.clos import Clos
    >>> from controller.model.jobs import Flow, Job
    >>> f = Clos.generate(2, 2, 2).as_leaf_spine()
    >>> job = Job("j", explicit=[Flow("j", "h0_0", "h1_0", 1), Flow("j", "h0_1", "h1_1", 1)])
    >>> a = ilp(Problem.build(f, [job]), 5, incumbent=[0, 0])
    >>> a.spines() in ([0, 1], [1, 0]), a.info["status"], a.info["incumbent_from"]
    (True, 'optimal', 'solver')
    """
    from scipy.sparse import coo_matrix
    check_time_limit(time_limit)
    t0 = time.perf_counter()
    source = "given" if incumbent is not None else "greedy"
    incumbent = list(incumbent) if incumbent is not None else greedy(problem).spines()
    upper = max_link_flows(problem, incumbent)
    lower = max(problem.lower_bound(), int(lower))
    info = {"time_limit_s": time_limit, "bound": lower, "incumbent": upper}
    if upper <= lower:
        info.update(status="optimal", proved_by="lower_bound", gap=0.0, incumbent_from=source,
                    wall_ms=(time.perf_counter() - t0) * 1e3)
        return Assignment.unsplit(incumbent, info)

    n_spines = len(problem.fabric.spines)
    var_flow, var_spine = [], []
    for k, mask in enumerate(problem.usable):
        for s in spine_list(mask):
            var_flow.append(k)
            var_spine.append(s)
    nx = len(var_flow)
    var_flow_a = np.asarray(var_flow)
    var_spine_a = np.asarray(var_spine)
    src = np.asarray(problem.src_leaf)[var_flow_a]
    dst = np.asarray(problem.dst_leaf)[var_flow_a]
    # rows: one per flow (assignment), then one per used uplink and per used downlink
    n_flows = len(problem)
    up_key = src * n_spines + var_spine_a
    down_key = dst * n_spines + var_spine_a
    up_rows, up_idx = np.unique(up_key, return_inverse=True)
    down_rows, down_idx = np.unique(down_key, return_inverse=True)
    r_up = n_flows + up_idx
    r_down = n_flows + len(up_rows) + down_idx
    n_load_rows = len(up_rows) + len(down_rows)
    cols = np.arange(nx)
    rows = np.concatenate([var_flow_a, r_up, r_down, n_flows + np.arange(n_load_rows)])
    colsall = np.concatenate([cols, cols, cols, np.full(n_load_rows, nx)])
    vals = np.concatenate([np.ones(3 * nx), -np.ones(n_load_rows)])
    a = coo_matrix((vals, (rows, colsall)), shape=(n_flows + n_load_rows, nx + 1)).tocsr()
    lb = np.concatenate([np.ones(n_flows), np.full(n_load_rows, -np.inf)])
    ub = np.concatenate([np.ones(n_flows), np.zeros(n_load_rows)])
    c = np.zeros(nx + 1)
    c[nx] = 1.0
    res, status, dual = run_milp(c, a, lb, ub, np.ones(nx + 1),
                                 np.concatenate([np.zeros(nx), [lower]]),
                                 np.concatenate([np.ones(nx), [upper - 1]]), time_limit, t0)
    spines = incumbent
    proved = None
    if status == "infeasible":  # nothing below the incumbent: the incumbent is optimal
        status, proved = "optimal", "solver_cutoff"
    if res.x is not None:
        x = res.x[:nx]
        chosen = x > 0.5
        candidate = list(incumbent)
        for k, s in zip(var_flow_a[chosen], var_spine_a[chosen]):
            candidate[int(k)] = int(s)
        if max_link_flows(problem, candidate) <= upper:
            spines, source = candidate, "solver"
    value = max_link_flows(problem, spines)
    bound = lower
    if dual is not None:
        bound = max(bound, min(math.ceil(dual - 1e-6), upper))  # valid below the cutoff only
    return _result(spines, info, status, value, bound, source, proved, t0)


def ilp_layer2(problem: Problem, alpha: int, time_limit: float = 60.0,
               incumbent: list[int] | None = None, lower: int = 0) -> Assignment:
    """The exact second layer: among routings with max load ``alpha``, fewest directed links
    carrying ``alpha`` flows (HiGHS MILP), proven within ``time_limit`` seconds or reported not.

    Binary x[f, s] per flow and usable spine, binary z[e] per directed link that some flow can
    use: load(e) <= alpha - 1 + z[e]; minimise the sum of z. ``incumbent`` (a routing with max
    load <= alpha) gives a cutoff: the model asks for fewer links at alpha than it has, so
    "infeasible" proves it optimal and the result is never worse; and a tie-break: among
    optimal counts, as many flows as possible stay where the incumbent has them (fewer moves,
    and the incumbent's other qualities mostly kept); ``lower``: a known lower
    bound on the count (``layer2.layer2_lower_bound``). ``info``: status, incumbent (the count),
    bound, gap, wall_ms, incumbent_from. The reference for tests and benchmarks, off the
    request path: exponential at worst, seconds at 64 x 32.

    >>> from controller.model.clos import Clos
    >>> from controller.model.jobs import Flow, Job
    >>> f = Clos.generate(2, 3, 4).as_leaf_spine()
    >>> job = Job("j", explicit=[Flow("j", "h0_0", "h1_0", 1), Flow("j", "h0_1", "h1_1", 1),
    ...                          Flow("j", "h0_2", "h2_0", 1)])
    >>> a = ilp_layer2(Problem.build(f, [job]), 2, 5)
    >>> a.info["status"], a.info["incumbent"]
    ('optimal', 1)
    """
    check_time_limit(time_limit)
    t0 = time.perf_counter()
    from controller.planners.layer2 import layer2_lower_bound, links_at
    lower = max(int(lower), layer2_lower_bound(problem, alpha))
    upper = None
    if incumbent is not None:
        if max_link_flows(problem, incumbent) > alpha:
            raise InputError(f"incumbent's max load exceeds alpha = {alpha}")
        upper = links_at(problem, incumbent, alpha)
    info = {"time_limit_s": time_limit, "alpha": alpha, "bound": lower, "incumbent": upper}
    if upper is not None and upper <= lower:
        info.update(status="optimal", proved_by="lower_bound", gap=0.0, incumbent_from="given",
                    wall_ms=(time.perf_counter() - t0) * 1e3)
        return Assignment.unsplit(list(incumbent), info)
    n_spines = len(problem.fabric.spines)
    n_links = len(problem.fabric.leaves) * n_spines
    var_flow, var_spine = [], []
    for k, mask in enumerate(problem.usable):
        for s in spine_list(mask):
            var_flow.append(k)
            var_spine.append(s)
    vf, vs = np.asarray(var_flow, dtype=np.int64), np.asarray(var_spine, dtype=np.int64)
    up_key = np.asarray(problem.src_leaf, dtype=np.int64)[vf] * n_spines + vs
    down_key = n_links + np.asarray(problem.dst_leaf, dtype=np.int64)[vf] * n_spines + vs
    links, inv = np.unique(np.concatenate([up_key, down_key]), return_inverse=True)
    nz, n_flows = len(links), len(problem)
    keep = None
    if incumbent is not None:  # tie-break: keep flows where the incumbent has them
        keep = np.asarray(incumbent, dtype=np.int64)[vf] == vs
    res, status, dual = layer2_milp(n_flows, vf, np.tile(np.arange(len(vf)), 2), inv,
                                    np.full(nz, alpha - 1.0), np.ones(nz), np.ones(nz), lower,
                                    (upper - 1) if upper is not None else nz, keep,
                                    time_limit, t0)
    nx = len(vf)
    spines, source, proved = (list(incumbent) if incumbent is not None else None), "given", None
    if status == "infeasible" and upper is not None:
        status, proved = "optimal", "solver_cutoff"
    if res.x is not None:
        candidate = [0] * n_flows
        for k, s in zip(vf[res.x[:nx] > 0.5], vs[res.x[:nx] > 0.5]):
            candidate[int(k)] = int(s)
        if max_link_flows(problem, candidate) <= alpha and (
                upper is None or links_at(problem, candidate, alpha) < upper):
            spines, source = candidate, "solver"
    if spines is None:
        info.update(status=status, incumbent=None, incumbent_from=None, gap=None,
                    wall_ms=(time.perf_counter() - t0) * 1e3)
        return Assignment([], info)
    value = links_at(problem, spines, alpha)
    bound = lower
    if dual is not None:  # the tie-break is worth less than 1 in all
        bound = max(bound, min(math.ceil(dual - 1 + 1e-6), value))
    return _result(spines, info, status, value, bound, source, proved, t0)


def _result(spines, info: dict, status: str, value, bound, source: str, proved, t0: float):
    """The assignment with what both MILPs report: status, incumbent and bound (the
    incumbent itself when proven optimal), the gap and the solver's time."""
    if status == "optimal":
        bound = value
    if proved:
        info["proved_by"] = proved
    info.update(status=status, incumbent=value, bound=bound, incumbent_from=source,
                gap=(value - bound) / value if value else 0.0,
                wall_ms=(time.perf_counter() - t0) * 1e3, solver="HiGHS (scipy.optimize.milp)")
    return Assignment.unsplit(spines, info)
