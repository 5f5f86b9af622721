"""The reference optimum for layer 1: minimise the maximum directed-link load exactly (HiGHS MILP).

Binary x[f, s] per flow and usable spine, integer alpha; every flow on one spine; every uplink
and downlink carries at most alpha flows. The greedy's alpha is an upper bound and the leaf-degree
bound ceil(d / up links) a lower bound; when they meet, the greedy routing is optimal and the
solver is not called. Every result reports status, incumbent, bound, gap and wall time: a run
that hit its time limit is never reported as optimal.
"""
from __future__ import annotations

import math
import time

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from controller.fabric import spine_list
from controller.planners.greedy import greedy
from controller.loads import link_loads
from controller.problem import Assignment, Problem

_STATUS = {0: "optimal", 1: "time_limit", 2: "infeasible", 3: "unbounded", 4: "error"}


def _max_load(problem: Problem, spines: list[int]) -> int:
    up, down = link_loads(problem, Assignment.unsplit(spines))
    return int(max(up.max(initial=0), down.max(initial=0)))


def ilp(problem: Problem, time_limit: float = 60.0) -> Assignment:
    t0 = time.perf_counter()
    incumbent = greedy(problem).spines()
    upper = _max_load(problem, incumbent)
    lower = problem.lower_bound()
    info = {"time_limit_s": time_limit, "bound": lower, "incumbent": upper}
    if upper <= lower:
        info.update(status="optimal", proved_by="lower_bound", gap=0.0,
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
                             np.concatenate([np.ones(nx), [upper]])),
               options={"time_limit": float(time_limit), "disp": False})
    status = _STATUS.get(res.status, "error")
    spines = incumbent
    source = "greedy"
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
        bound = max(bound, math.ceil(dual - 1e-6))
    if status == "optimal":
        bound = value
    info.update(status=status, incumbent=value, bound=bound, incumbent_from=source,
                gap=(value - bound) / value if value else 0.0,
                wall_ms=(time.perf_counter() - t0) * 1e3, solver="HiGHS (scipy.optimize.milp)")
    return Assignment.unsplit(spines, info)
