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
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from controller.errors import InputError
from controller.model.fabric import spine_list
from controller.planners.greedy import greedy
from controller.model.loads import link_loads
from controller.model.problem import Assignment, Problem

_STATUS = {0: "optimal", 1: "time_limit", 2: "infeasible", 3: "unbounded", 4: "error"}


def _max_load(problem: Problem, spines: list[int]) -> int:
    up, down = link_loads(problem, Assignment.unsplit(spines))
    return int(max(up.max(initial=0), down.max(initial=0)))


def ilp(problem: Problem, time_limit: float = 60.0, incumbent: list[int] | None = None,
        lower: int = 0) -> Assignment:
    """Minimum max directed-link load, proven within ``time_limit`` seconds or reported not.

    ``incumbent``: a routing to improve on (default: the greedy's); ``lower``: a known lower
    bound on alpha beside the leaf-degree bound. Cost: one MILP with one binary per (flow,
    usable spine); exponential at worst, instant when the LP relaxation already exceeds
    incumbent - 1 (typical with failed spines).

    >>> from controller.model.fabric import Fabric
    >>> from controller.model.jobs import Flow, Job
    >>> f = Fabric.generate(2, 2, 2)
    >>> job = Job("j", explicit=[Flow("j", "h0_0", "h1_0", 1), Flow("j", "h0_1", "h1_1", 1)])
    >>> a = ilp(Problem.build(f, [job]), 5, incumbent=[0, 0])
    >>> a.spines() in ([0, 1], [1, 0]), a.info["status"], a.info["incumbent_from"]
    (True, 'optimal', 'solver')
    """
    if (isinstance(time_limit, bool) or not isinstance(time_limit, (int, float))
            or not math.isfinite(time_limit) or time_limit <= 0):
        raise InputError(f"ILP time limit must be a positive number of seconds, got {time_limit!r}")
    t0 = time.perf_counter()
    source = "given" if incumbent is not None else "greedy"
    incumbent = list(incumbent) if incumbent is not None else greedy(problem).spines()
    upper = _max_load(problem, incumbent)
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
    res = milp(c, constraints=LinearConstraint(a, lb, ub), integrality=np.ones(nx + 1),
               bounds=Bounds(np.concatenate([np.zeros(nx), [lower]]),
                             np.concatenate([np.ones(nx), [upper - 1]])),
               options={"time_limit": max(1e-3, time_limit - (time.perf_counter() - t0)),
                        "disp": False})
    status = _STATUS.get(res.status, "error")
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
        if _max_load(problem, candidate) <= upper:
            spines, source = candidate, "solver"
    value = _max_load(problem, spines)
    bound = lower
    dual = getattr(res, "mip_dual_bound", None)
    if dual is not None and np.isfinite(dual):
        bound = max(bound, min(math.ceil(dual - 1e-6), upper))  # valid below the cutoff only
    if status == "optimal":
        bound = value
    if proved:
        info["proved_by"] = proved
    info.update(status=status, incumbent=value, bound=bound, incumbent_from=source,
                gap=(value - bound) / value if value else 0.0,
                wall_ms=(time.perf_counter() - t0) * 1e3, solver="HiGHS (scipy.optimize.milp)")
    return Assignment.unsplit(spines, info)
