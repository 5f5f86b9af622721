"""A Clos routing back at a given max link load with few moved flows, in two small MILPs:
first the aggregation slot of every flow, then its core within the slot (issue 74).

Why: after a core switch fails on a tightly loaded fat-tree every pod must shift flows out
of the failed core's group, and the leaf links they leave and take are full too: the request
path's local search (``clos_churn.lower_max``) leaves links one flow above the bound, and
the fewest-moves MILP over every (plane, core) option (``clos_ilp_moves``) finds good
answers only after 10-30 s (HiGHS's first incumbents move nearly every flow; SciPy's milp
takes no starting point). The cores of one group are interchangeable at the leaf tier, and
that symmetry is what the big MILP spends its time on. So, as ``clos_tiers`` colours a
fabric tier by tier:

1. slots: a binary per flow and (plane, slot) it can use (for a flow between pods, the
   slot's group of cores); the leaf tier's cells at most their limit, and per (plane, pod,
   slot) up and down, the flows between pods at most the sum of the limits of the group's
   core cells (what the cores can take, a relaxation of stage 2);
2. cores: a binary per flow and option within its slot of stage 1, every cell at most its
   limit.

Each stage maximises the flows kept where they are in ``previous`` (the routes in force:
their slot, then their option), and is penalised form: a cell above its limit in the start
(``previous``, or stage 1's slots) may stay above it at a cost larger than every kept flow,
so the routes in force are a solution and the answer never has more flows above the limit.
A limit is ``floor(alive members x units x alpha)``, as ``clos_ilp_moves``. Flows kept keep
their members; the others take the least loaded ones.

On the replan benchmark's k = 8 fat-tree a failed core switch (71 routes over it, the
request path at 10 for a bound of 9) reached 9 in 1.3-1.9 s with 69 more moves; the MILP
over every option 61 after 30 s. On its loaded k = 16 (16,768 flows, core switch c1_1) 17 for
18 in 19.4 s with 51 moves, most of it the slot MILP, where layer 2's chains take about a
second for 67-70 (bench/replan.json; ``clos_offpath.to_the_bound`` tries them first there).

Cost: stage 1 a binary per flow and slot (F x slots), stage 2 per flow and core of its slot
(F x cores / slots): exponential at worst, both within ``time_limit``; O(F x hops) to read
the routes and name the members.

>>> from controller.model.clos import Clos
>>> from controller.model.clospaths import ClosProblem
>>> from controller.model.jobs import Job
>>> from controller.planners.clos_auto import clos_auto
>>> f = Clos.fat_tree(4)
>>> p = ClosProblem.build(f, [Job("r", rings=[list(f.host_leaves)], ring_bytes=1)])
>>> r = regroup(p, clos_auto(p), 1.0, 10.0)  # at 1 already: nothing moves
>>> r.info["kept"] == len(p), r.info["status"]
(True, 'optimal')
"""
from __future__ import annotations

import time

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting
from controller.planners.clos_ilp_layer2 import path_options
from controller.planners.clos_loads import ClosLoads, score
from controller.planners.ilp import check_time_limit, run_milp


def regroup(problem: ClosProblem, previous: ClosRouting, alpha: float,
            time_limit: float) -> ClosRouting | None:
    """The routing of ``problem`` at max fabric-link load ``alpha`` that the two stages
    (module docstring) find from ``previous`` (the routes in force, ``inter`` order, plane
    -1 for none) within ``time_limit`` s; None when a stage found nothing in time or the
    result is still above ``alpha`` (the slots of stage 1 leave the cores no way). ``info``:
    ``status`` (both stages "optimal", else the first that was not), ``kept`` (flows of
    ``previous`` on their route), ``wall_ms``."""
    check_time_limit(time_limit)
    t0 = time.perf_counter()
    n = len(problem)
    if not n:
        return None
    flow, middle, plane, rows = path_options(problem)
    lim = limits(problem, alpha)
    slot, key, pods = _slots(problem, plane, middle, rows)
    alive = problem.links.alive
    same = ((np.asarray(previous.plane)[flow] == plane)
            & (np.asarray(previous.middle)[flow] == middle))
    home = same & np.array([bool(p) and bool(alive[list(p)].all())
                            for p in previous.path])[flow]
    # stage 1: one variable per (flow, plane, slot)
    uk, first, inv = np.unique(np.stack([flow, plane, slot], axis=1), axis=0,
                               return_index=True, return_inverse=True)
    inv = inv.ravel()
    rows1, lim1 = _slot_cells(problem, rows[first], key[first], pods[first], lim)
    home1 = np.zeros(len(uk), dtype=bool)
    home1[inv[home]] = True
    start = _start(n, flow, home, same)
    choice1, status1 = _penalised(n, uk[:, 0], rows1, lim1, inv[start], home1,
                                  time_limit - (time.perf_counter() - t0))
    if choice1 is None or _excess(rows1, choice1, lim1):
        return None
    # stage 2: the options within each flow's slot
    inside = inv == choice1[flow]
    sel = np.flatnonzero(inside)
    first_in = np.full(n, -1, dtype=np.int64)
    first_in[flow[sel[::-1]]] = sel[::-1]  # the first option in the slot per flow
    start2 = np.where(inside[start], start, first_in)
    pos = np.full(len(flow), -1, dtype=np.int64)
    pos[sel] = np.arange(len(sel))
    left = time_limit - (time.perf_counter() - t0)
    if left <= 0:
        return None
    choice2, status2 = _penalised(n, flow[sel], rows[sel], lim, pos[start2], home[sel], left)
    if choice2 is None or _excess(rows[sel], choice2, lim):
        return None
    chosen = sel[choice2]
    r = _routing(problem, previous, chosen, home, plane, middle)
    if score(problem, r)[0] > alpha + 1e-9:
        return None
    status = next((s for s in (status1, status2) if s != "optimal"), "optimal")
    r.info.update(status=status, kept=int(home[chosen].sum()),
                  wall_ms=round((time.perf_counter() - t0) * 1e3, 3))
    return r


def slot_count(problem: ClosProblem) -> int:
    """Stage 1's binaries at most: flows x the slots of every plane (counted before anything
    is built, as ``clos_auto.option_count`` counts the options)."""
    return len(problem) * sum(int(up.shape[1]) for up in problem.links.up1)


def limits(problem: ClosProblem, alpha: float) -> np.ndarray:
    """Per hop cell (``ClosLinks.cells``) the most flows it takes at max load ``alpha``:
    ``floor(alive members x their capacity units x alpha)``."""
    L = problem.links
    cells = L.cells()
    alive = L.alive[cells.members]
    cap = alive.sum(axis=1) * L.units[np.where(alive, cells.members, 0)].max(axis=1, initial=0)
    return np.floor(cap * alpha + 1e-9)


def _slots(problem: ClosProblem, plane, middle, rows):
    """Per option its slot (the middle inside a pod, the core's group between pods), its
    (plane, slot) and its source and destination pods (-1 inside a pod)."""
    L = problem.links
    slot = middle.copy()
    pods = np.full((len(middle), 2), -1, dtype=np.int64)
    for q in range(len(problem.fabric.planes)):
        sel = np.flatnonzero((plane == q) & (rows[:, 1] >= 0))
        if not len(sel):
            continue
        slot[sel] = L.group_of_core[q][middle[sel]]
        C = L.cells().shape[q][1]
        _, _, bu2, bd2 = L.cells().base[q]
        pods[sel, 0] = (rows[sel, 1] - bu2) // C
        pods[sel, 1] = (rows[sel, 2] - bd2) // C
    return slot, np.stack([plane, slot], axis=1), pods


def _slot_cells(problem: ClosProblem, rows, key, pods, lim):
    """Stage 1's cells per slot option, (V, 4): its leaf up and down cells and, between
    pods, its (plane, pod, slot) up and down aggregates (ids after the hop cells, their
    limit the sum of the group's core cells'); and the limits of all."""
    L = problem.links
    cells = L.cells()
    out = np.full((len(rows), 4), -1, dtype=np.int64)
    out[:, 0], out[:, 1] = rows[:, 0], rows[:, 3]
    extra = []
    inter = np.flatnonzero(pods[:, 0] >= 0)
    for col, side in ((2, 0), (3, 1)):
        if not len(inter):
            break
        ids, where = np.unique(np.stack([key[inter, 0], key[inter, 1], pods[inter, side]],
                                        axis=1), axis=0, return_inverse=True)
        out[inter, col] = len(lim) + sum(map(len, extra)) + where.ravel()
        sums = []
        for q, g, pod in ids.tolist():
            C = cells.shape[q][1]
            base = cells.base[q][2 + side] + pod * C
            sums.append(lim[base + np.flatnonzero(L.group_of_core[q] == g)].sum())
        extra.append(np.asarray(sums, dtype=float))
    return out, np.concatenate([lim, *extra])


def _start(n: int, flow, home, same) -> np.ndarray:
    """Per flow the option of its route in force (``home``), else (none, or not alive) its
    option with that plane and middle (``same``) when it has one, else its first option."""
    start = np.full(n, -1, dtype=np.int64)
    for mask in (home, same):
        v = np.flatnonzero(mask)
        start[flow[v]] = np.where(start[flow[v]] < 0, v, start[flow[v]])
    v = np.arange(len(flow))[::-1]
    first = np.full(n, -1, dtype=np.int64)
    first[flow[v]] = v
    return np.where(start >= 0, start, first)


def _excess(rows, choice, lim) -> int:
    """Flows above the limits over all cells when each flow takes its ``choice``."""
    r = rows[choice]
    load = np.bincount(r[r >= 0], minlength=len(lim))
    return int(np.maximum(load - lim, 0).sum())


def _penalised(n: int, flow, rows, lim, start, home, time_limit: float):
    """One option per flow (``flow[v]``: option v's flow; ``rows``: its cells, -1 for none):
    each cell at most its limit, or (a cell above it in ``start``) above it by at most as
    much at a cost of n + 1 per flow above; maximise the options of ``home`` taken. (the
    chosen option per flow, status), or (None, status) when HiGHS found none in time."""
    from scipy.sparse import coo_matrix
    t0 = time.perf_counter()
    if time_limit <= 0:
        return None, "time_limit"
    r0 = rows[start]
    load = np.bincount(r0[r0 >= 0], minlength=len(lim)).astype(float)
    used, inv = np.unique(rows[rows >= 0], return_inverse=True)
    over = np.maximum(load[used] - lim[used], 0)
    hot = np.flatnonzero(over > 0)
    nx, nz, nu = len(flow), len(hot), len(used)
    var = np.repeat(np.arange(nx), rows.shape[1])[(rows >= 0).ravel()]
    a = coo_matrix((np.concatenate([np.ones(nx + len(var)), -np.ones(nz)]),
                    (np.concatenate([flow, n + inv.ravel(), n + hot]),
                     np.concatenate([np.arange(nx), var, nx + np.arange(nz)]))),
                   shape=(n + nu, nx + nz)).tocsr()
    lb = np.concatenate([np.ones(n), np.full(nu, -np.inf)])
    ub = np.concatenate([np.ones(n), lim[used]])
    c = np.concatenate([-np.asarray(home, dtype=float), np.full(nz, n + 1.0)])
    res, status, _ = run_milp(c, a, lb, ub, np.ones(nx + nz), np.zeros(nx + nz),
                              np.concatenate([np.ones(nx), over[hot]]), time_limit, t0)
    if res.x is None:
        return None, status
    choice = np.full(n, -1, dtype=np.int64)
    picked = np.flatnonzero(res.x[:nx] > 0.5)
    choice[flow[picked]] = picked
    return choice, status


def _routing(problem: ClosProblem, previous: ClosRouting, chosen, home, plane,
             middle) -> ClosRouting:
    """The chosen options (one per flow, ``inter`` order) as a routing: flows on their route
    in force keep its members (placed first), the others take the least loaded ones."""
    n = len(problem)
    r = ClosRouting([-1] * n, [-1] * n, [()] * n, {})
    loads = ClosLoads(problem)
    rest = []
    for i, v in enumerate(chosen.tolist()):
        r.plane[i], r.middle[i] = int(plane[v]), int(middle[v])
        if home[v]:
            r.path[i] = tuple(previous.path[i])
            loads.add(i, r.plane[i], r.path[i])
        else:
            rest.append(i)
    for i in rest:
        r.path[i] = loads.pick(i, r.plane[i], r.middle[i])
        loads.add(i, r.plane[i], r.path[i])
    return r
