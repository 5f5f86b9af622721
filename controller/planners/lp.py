"""The fractional (splittable) optimum of the max directed-link load, as a linear program.

Variables x[f, s] >= 0 for every inter-leaf flow f and usable spine s (the share of f on s);
every flow's shares sum to 1; every uplink (a, s) and downlink (s, b) carries at most alpha flow
units. Minimising alpha gives the load that ideal spraying reaches; ``split`` reaches it with few
split flows. HiGHS's dual simplex (``scipy.optimize.linprog(method="highs-ds")``) returns a basic
(vertex) solution, whose number of non-zero shares is at most the number of tight rows; the
min-alpha LP runs HiGHS's interior point method with crossover, much faster on this degenerate
problem.

The optimum is never taken below ``floor`` (1 by default): a part cannot send faster than its
flow's NIC, so a load below one flow per link gives no faster transfer.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from controller.errors import InputError
from controller.model.problem import Problem

TOL = 1e-9


@dataclass
class LPResult:
    status: str  # "optimal", "infeasible", "time_limit" or "error"
    alpha: float  # the max link load reached (the target when one was given)
    flow: np.ndarray  # per variable: inter-leaf flow index
    spine: np.ndarray  # per variable: spine
    x: np.ndarray | None  # per variable: share (None unless a solution was found)
    ms: float


def variables(problem: Problem, flows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(flow, spine) of every variable x[f, s], f in ``flows``, s usable for f. O(sum |usable|)."""
    n_spines = len(problem.fabric.spines)
    ok = np.zeros((len(flows), n_spines), dtype=bool)
    for lo in range(0, n_spines, 62):  # 62-bit chunks of the masks fit int64
        width = min(62, n_spines - lo)
        chunk = np.array([(problem.usable[k] >> lo) & ((1 << width) - 1) for k in flows],
                         dtype=np.int64).reshape(-1, 1)
        ok[:, lo:lo + width] = (chunk >> np.arange(width, dtype=np.int64)) & 1 == 1
    rows, cols = np.nonzero(ok)
    return np.asarray(flows, dtype=np.int64)[rows], cols.astype(np.int64)


def solve(problem: Problem, flows, base_up: np.ndarray | None = None,
          base_down: np.ndarray | None = None, target: float | None = None,
          prefer: dict[int, int] | None = None, floor: float = 1.0,
          time_limit: float | None = None) -> LPResult:
    """Shares for the flows in ``flows`` on top of fixed loads ``base_up``/``base_down``
    (arrays leaves x spines, the other flows' loads).

    Without ``target``: minimise alpha >= ``floor``. With it: find shares under ``target`` on
    every link, maximising the shares that stay on ``prefer[f]`` (the flow's current spine),
    which keeps most flows whole and in place. Complexity: one HiGHS dual-simplex solve of
    sum |usable| variables and |flows| + (touched links) rows.

    Example: two flows l0 -> l1 with usable spines {s0, s1} and a third l0 -> l2 with only s0:
    alpha = 1.5 (the third takes s0, the first two split the rest).
    """
    t0 = time.perf_counter()
    flows = np.asarray(flows, dtype=np.int64)
    vf, vs = variables(problem, flows)
    if len(flows) == 0:
        shape = (len(problem.fabric.leaves), len(problem.fabric.spines))
        up = np.zeros(shape) if base_up is None else base_up
        down = np.zeros(shape) if base_down is None else base_down
        alpha = max(floor, float(max(up.max(initial=0), down.max(initial=0))))
        return LPResult("optimal", alpha if target is None else target, vf, vs, np.zeros(0), 0.0)
    local = np.full(len(problem), -1, dtype=np.int64)
    local[flows] = np.arange(len(flows))
    keep = None
    if target is not None and prefer:
        keep = np.array([prefer.get(int(f), -1) for f in vf]) == vs
    src = np.asarray(problem.src_leaf, dtype=np.int64)
    dst = np.asarray(problem.dst_leaf, dtype=np.int64)
    status, alpha, x = _solve(problem, src[vf], dst[vf], vs, local[vf], np.ones(len(flows)),
                              base_up, base_down, target, keep, floor, time_limit)
    return LPResult(status, alpha, vf, vs, x, (time.perf_counter() - t0) * 1e3)


def _solve(problem, src, dst, spine, row, demand, base_up, base_down, target, keep, floor,
           time_limit, weight=None):
    """The LP over variables (src leaf, dst leaf, spine, demand row): (status, alpha, x).
    ``weight``: per variable, what one unit of it puts on its links (default 1: flow units)."""
    # imported here: scipy.optimize takes about 0.3 s to import, a fifth of the controller's start
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix
    nx = len(spine)
    shape = (len(problem.fabric.leaves), len(problem.fabric.spines))
    base_up = np.zeros(shape) if base_up is None else base_up
    base_down = np.zeros(shape) if base_down is None else base_down
    n_spines = shape[1]
    up_rows, up_idx = np.unique(src * n_spines + spine, return_inverse=True)
    down_rows, down_idx = np.unique(dst * n_spines + spine, return_inverse=True)
    n_links = len(up_rows) + len(down_rows)
    fixed = np.concatenate([base_up.ravel()[up_rows], base_down.ravel()[down_rows]])
    link_row = np.concatenate([up_idx, len(up_rows) + down_idx])
    cols = np.arange(nx)
    with_alpha = target is None
    n_cols = nx + (1 if with_alpha else 0)
    rows_ub = [link_row]
    cols_ub = [cols, cols]
    vals_ub = [np.ones(2 * nx) if weight is None else np.tile(np.asarray(weight, float), 2)]
    if with_alpha:
        rows_ub.append(np.arange(n_links))
        cols_ub.append(np.full(n_links, nx))
        vals_ub.append(-np.ones(n_links))
        b_ub = -fixed
    else:
        b_ub = target - fixed
    a_ub = coo_matrix((np.concatenate(vals_ub), (np.concatenate(rows_ub), np.concatenate(cols_ub))),
                      shape=(n_links, n_cols)).tocsr()
    a_eq = coo_matrix((np.ones(nx), (row, cols)), shape=(len(demand), n_cols)).tocsr()
    c = np.zeros(n_cols)
    if with_alpha:
        c[nx] = 1.0
    elif keep is not None:
        c[:nx] = -keep.astype(float)
    bounds = [(0, None)] * nx + ([(floor, None)] if with_alpha else [])
    options = {"presolve": True}
    if time_limit is not None:
        if not time_limit > 0:
            raise InputError(f"LP time limit must be positive, got {time_limit!r}")
        options["time_limit"] = float(time_limit)
    # min alpha is very degenerate: the interior point method (with crossover) is several
    # times faster there; the dual simplex is fast on the "stay in place" LP
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=demand, bounds=bounds,
                  method="highs-ipm" if with_alpha else "highs-ds", options=options)
    status = {0: "optimal", 1: "time_limit", 2: "infeasible"}.get(res.status, "error")
    if res.status != 0:
        return status, float("nan"), None
    x = np.clip(res.x[:nx], 0.0, None)
    return "optimal", float(res.x[nx]) if with_alpha else float(target), x


def fractional_optimum(problem: Problem, floor: float = 1.0, time_limit: float | None = None) -> float:
    """min over splittable routings of the max directed-link load, at least ``floor``.

    Flows with the same leaves and usable spines are interchangeable in the LP, so they are
    merged into one commodity with their count as demand (exact): ring jobs on 8-NIC servers
    have about 8 flows per commodity. One dual-simplex solve of (commodities x usable spines)
    variables (HiGHS interior point with crossover: about 1 s at 64 x 32 on 2 cores). Example: 5
    flows out of one leaf over 4 spines give 1.25.
    """
    if not len(problem):
        return 0.0
    keys: dict[tuple, int] = {}
    demand: list[float] = []
    for a, b, m in zip(problem.src_leaf, problem.dst_leaf, problem.usable):
        i = keys.setdefault((a, b, m), len(keys))
        if i == len(demand):
            demand.append(0.0)
        demand[i] += 1.0
    reps = {i: None for i in range(len(keys))}
    for k, (a, b, m) in enumerate(zip(problem.src_leaf, problem.dst_leaf, problem.usable)):
        i = keys[(a, b, m)]
        if reps[i] is None:
            reps[i] = k
    first = np.array([reps[i] for i in range(len(keys))], dtype=np.int64)
    vf, vs = variables(problem, first)
    local = np.full(len(problem), -1, dtype=np.int64)
    local[first] = np.arange(len(first))
    src = np.asarray(problem.src_leaf, dtype=np.int64)
    dst = np.asarray(problem.dst_leaf, dtype=np.int64)
    status, alpha, _ = _solve(problem, src[vf], dst[vf], vs, local[vf], np.asarray(demand),
                              None, None, None, None, floor, time_limit)
    if status != "optimal":
        raise InputError(f"fractional optimum: the LP ended with status {status}")
    return alpha


def fractional_lower_bound(problem: Problem, floor: float = 1.0, weight=None) -> float:
    """A cheap lower bound on ``fractional_optimum``: for every leaf and every usable-spine
    mask m of its flows, (its flows whose usable spines lie in m) / |m|, out and in; with
    ``weight`` (one per flow) their weights' sum, a bound on ``weighted_split_lp``.

    O(flows x distinct masks per leaf). On a fabric where every leaf sees the same spines it is
    max(Delta / S', floor), the exact optimum.
    """
    best = floor if len(problem) else 0.0
    weight = [1] * len(problem) if weight is None else weight
    for leaves in (problem.src_leaf, problem.dst_leaf):
        per_leaf: dict[int, dict[int, float]] = {}
        for a, m, w in zip(leaves, problem.usable, weight):
            d = per_leaf.setdefault(a, {})
            d[m] = d.get(m, 0) + w
        for counts in per_leaf.values():
            union = 0
            for m in counts:
                union |= m
            masks = set(counts) | {union}
            for m in masks:
                inside = sum(c for mm, c in counts.items() if mm & ~m == 0)
                best = max(best, inside / bin(m).count("1"))
    return best


def weighted_split_lp(problem: Problem, weight, floor: float = 0.0,
                      time_limit: float | None = None) -> tuple[float, np.ndarray, np.ndarray,
                                                                  np.ndarray]:
    """min over splittable routings of the max directed-link *weighted* load, every flow f
    putting ``weight[f]`` per unit share on its links (e.g. seconds of its bytes at line rate):
    (alpha, flow, spine, share) of the vertex solution. One HiGHS solve of sum |usable|
    variables. Flows with the same leaves, usable spines and weight are merged (exact)."""
    weight = np.asarray(weight, dtype=float)
    keys: dict[tuple, int] = {}
    rep: list[int] = []
    members: list[list[int]] = []
    for k, (a, b, m) in enumerate(zip(problem.src_leaf, problem.dst_leaf, problem.usable)):
        i = keys.setdefault((a, b, m, float(weight[k])), len(keys))
        if i == len(rep):
            rep.append(k)
            members.append([])
        members[i].append(k)
    first = np.array(rep, dtype=np.int64)
    vf, vs = variables(problem, first)
    local = np.full(len(problem), -1, dtype=np.int64)
    local[first] = np.arange(len(first))
    src = np.asarray(problem.src_leaf, dtype=np.int64)
    dst = np.asarray(problem.dst_leaf, dtype=np.int64)
    demand = np.array([len(m) for m in members], dtype=float)
    status, alpha, x = _solve(problem, src[vf], dst[vf], vs, local[vf], demand, None, None,
                              None, None, floor, time_limit, weight=weight[vf])
    if status != "optimal":
        raise InputError(f"weighted split: the LP ended with status {status}")
    # a commodity's shares go to its flows whole where possible (McNaughton-like fill)
    flows, spines, shares = [], [], []
    for i, ks in enumerate(members):
        sel = np.flatnonzero(local[vf] == i)
        pieces = [(int(vs[v]), float(x[v])) for v in sel if x[v] > TOL]
        fill, pos = 0.0, 0
        for s, amount in pieces:
            while amount > TOL and pos < len(ks):
                take = min(amount, 1.0 - fill)
                flows.append(ks[pos])
                spines.append(s)
                shares.append(take)
                amount -= take
                fill += take
                if fill >= 1.0 - TOL:
                    pos, fill = pos + 1, 0.0
    return alpha, np.array(flows, dtype=np.int64), np.array(spines, dtype=np.int64), \
        np.array(shares)
