"""The ``jobs`` objective on any Clos fabric: lower the worst job's predicted slowdown, then
the mean, never raising the max link load of ``auto``.

What: starts from the best, by the prediction, of ``clos_auto``, the greedy and the tier
colouring among those whose max fabric-link load is at most ``auto``'s (the cap); then a
bounded local search. Every routing is scored by the shared prediction
(``model.iteration.predict_clos_times``, max-min fair rates over rings and flows on their full
paths, host links included) as slowdowns (``model.iteration.slowdown``, ideal at the host
links' line rate), ranked by (worst slowdown, mean slowdown), smaller first.

Search: jobs in decreasing slowdown; for each, its flows on a link another flow also uses,
most loaded in bytes first; a flow is tried on the options (plane, middle, each hop's least
loaded member) where no link goes above the cap, the three with the least busy links in bytes
per unit first (the guide: each flow weighs its bytes per iteration, as
``planners.objective.JobModel``). A move is kept when the prediction ranks the routing better;
the search restarts from the new worst job. Pinned flows stay in their plane: every start
honours the pins and ``ClosLoads.plane_costs`` gives the other planes no option. It ends at a
local optimum or when ``budget`` predictions are spent: deterministic, no wall clock. So the
result never raises the max link load above the cap and is never behind its start on the worst
slowdown (nor the mean).

Why: flow counts treat a probe like a 4 GB All-Reduce chunk; on three tiers the paths two
large rings share decide their iteration times (the two-tier ``objective`` says more).

Cost: three constructions, then at most ``budget`` + 3 predictions (each
O(events x rounds x nnz)) and per tried flow O(P x middles x members) for the guide.

References: Crux (Cao et al., SIGCOMM 2024: GPU-intensity priorities); the two-tier
``planners.objective`` and ``planners.jobmean``.
"""
from __future__ import annotations

import time

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting
from controller.model.iteration import predict_clos_times, slowdown
from controller.planners.clos_auto import clos_auto, score
from controller.planners.clos_greedy import clos_greedy
from controller.planners.clos_loads import ClosLoads
from controller.planners.clos_tiers import tier_colouring

JOB_BUDGET = 200  # predictions in the search; k = 8 fat-tree, 4 rings: tens of ms (few needed)
OPTIONS_PER_FLOW = 3


def clos_slowdowns(problem: ClosProblem, routing: ClosRouting) -> dict[str, float]:
    """Predicted slowdown per job of ``routing`` (1.0: its ideal iteration time)."""
    times = predict_clos_times(problem, routing)
    bps = problem.fabric.link_bps("host")
    return {job.id: slowdown(job, times[job.id], bps) for job in problem.jobs}


def rank(values: dict[str, float]) -> tuple[float, float]:
    """(worst, mean) slowdown, rounded to the prediction's float noise: smaller is better."""
    v = list(values.values()) or [1.0]
    return round(max(v), 9), round(sum(v) / len(v), 9)


def clos_jobs(problem: ClosProblem, budget: int = JOB_BUDGET) -> ClosRouting:
    t0 = time.perf_counter()
    auto = clos_auto(problem)
    cap = score(problem, auto)[0]
    starts = {"auto": auto, "greedy": clos_greedy(problem), "colouring": tier_colouring(problem)}
    scores = {n: clos_slowdowns(problem, r) for n, r in starts.items()
              if score(problem, r)[0] <= cap + 1e-9}
    first = min(scores, key=lambda n: (rank(scores[n]), n != "auto"))
    start = starts[first]
    r = ClosRouting(list(start.plane), list(start.middle), list(start.path), {})
    current = scores[first]
    moves, used, stopped = 0, 0, "local optimum"
    if len(problem):
        moves, used, current, stopped = _search(problem, r, current, cap, budget)
    worst, mean = rank(current)
    r.info = {"objective": "jobs", "start": first, "max_link_load_cap": cap,
              "max_link_load": score(problem, r)[0], "worst_slowdown": worst,
              "mean_slowdown": mean, "start_worst_slowdown": rank(scores[first])[0],
              "start_mean_slowdown": rank(scores[first])[1], "predicted_slowdown": current,
              "starts": {n: rank(v) for n, v in scores.items()}, "moves": moves,
              "predictions": used, "budget": budget, "stopped": stopped,
              "wall_ms": round((time.perf_counter() - t0) * 1e3, 3)}
    return r


def _weights(problem: ClosProblem) -> np.ndarray:
    """Bytes per iteration of every inter-leaf flow: 2(n-1) chunks for a ring's flow."""
    steps = {(j.id, k): 2 * (len(ranks) - 1) for j in problem.jobs
             for k, ranks in enumerate(j.rings)}
    return np.array([problem.flows[pos].bytes * steps.get((problem.flows[pos].job,
                                                            problem.flows[pos].ring), 1)
                     for pos in problem.inter], dtype=float)


def _search(problem, r, current, cap, budget):
    L = problem.links
    loads = ClosLoads(problem, r)
    weight = _weights(problem)
    per_unit = np.append(1.0 / L.units, 0.0)
    busy = np.zeros(L.count + 1)  # bytes per unit of capacity on every link
    planes = len(problem.fabric.planes)

    def links_of(i, q, path):
        return list(path) + list(problem.host_links(i, q))

    def put(i, q, m, path, sign):
        r.plane[i], r.middle[i], r.path[i] = (q, m, path) if sign > 0 else (r.plane[i],
                                                                             r.middle[i], path)
        loads.add(i, q, path, sign)
        ids = links_of(i, q, path)
        busy[ids] += sign * weight[i] * per_unit[ids]

    for i, path in enumerate(r.path):
        ids = links_of(i, r.plane[i], path)
        busy[ids] += weight[i] * per_unit[ids]
    job_of = [problem.flows[pos].job for pos in problem.inter]
    flows_of: dict[str, list[int]] = {}
    for i, j in enumerate(job_of):
        flows_of.setdefault(j, []).append(i)
    moves = used = 0
    best = rank(current)
    while used < budget:
        improved = False
        for job in sorted(current, key=lambda j: (-current[j], j)):
            if current[job] <= 1.0 + 1e-9:
                break
            cands = []
            for i in flows_of.get(job, []):
                ids = links_of(i, r.plane[i], r.path[i])
                top = float(busy[ids].max())
                if top > weight[i] * float(per_unit[ids].max()) + 1e-9:  # shares a link
                    cands.append((-top, i))
            for _, i in sorted(cands):
                if used >= budget:
                    break
                q0, m0, p0 = r.plane[i], r.middle[i], r.path[i]
                put(i, q0, m0, p0, -1.0)
                options = []
                for q in range(planes):
                    cost = loads.plane_costs(i, q).ravel()
                    hops, _ = problem.options(i, q)
                    hops = [L.sentinel(h) for h in hops]
                    guide = np.max([np.min(busy[h] + weight[i] * per_unit[h]
                                           + np.where(L.alive[h], 0, np.inf), axis=1)
                                    for h in hops], axis=0)
                    for m in np.flatnonzero(cost <= cap + 1e-9).tolist():
                        if (q, m) != (q0, m0):
                            options.append((float(guide[m]), q, m))
                for _, q, m in sorted(options)[:OPTIONS_PER_FLOW]:
                    if used >= budget:
                        break
                    put(i, q, m, loads.pick(i, q, m), 1.0)
                    if loads.fabric_max() > cap + 1e-9:
                        put(i, q, m, r.path[i], -1.0)
                        continue
                    used += 1
                    new = clos_slowdowns(problem, r)
                    if rank(new) < best:
                        current, best, improved = new, rank(new), True
                        moves += 1
                        break
                    put(i, q, m, r.path[i], -1.0)
                if improved:
                    break
                put(i, q0, m0, p0, 1.0)
            if improved:
                break
        if not improved:
            return moves, used, current, "local optimum"
    return moves, used, current, "budget"
