"""The ``jobs`` objective on every fabric (issue 60): the one jobs search, run by ``jobs`` and
by ``auto`` with objective ``jobs`` on every shape.

What: the routing with the lowest mean predicted job slowdown the search finds, its worst job
never above a bound: the worst slowdown of the start with the lowest mean. Every routing is
scored by the shared prediction (``model.iteration``: max-min fair rates over rings and flows
on their full paths, host links included) as slowdowns (``model.iteration.slowdown``, ideal
at the host links' line rate), ranked by ``objective.rank_key``: within the bound first, then
the mean, then the worst. Mean over jobs, unweighted (``planners.jobmean`` says why).

Starts: ``clos_auto`` (the colouring and the greedy, improved on link loads), the greedy and
the tier colouring, and on small problems the other unsplit planners' plans
(``objective.other_starts``: ECMP, polarised or not, the edge colouring, the annealing; a
flow or two above auto's max load on some link, or an all-to-all over both planes' NICs, they
had the lower mean on 23 of 1,000 random instances, tests/test_jobs_lowest.py); the search
begins at the best ranked, so its result is never behind a start on the mean, nor behind the
start with the best mean on the worst job.

Search: jobs in decreasing slowdown; for each, its flows on a link another flow also uses,
most loaded in bytes first; a flow is tried on the options (plane, middle, each hop's least
loaded member) where no link goes above the start's max link load and whose busiest link in
bytes per unit is less busy than the flow's now, the three least busy first (the guide: each
flow weighs its bytes per iteration, as ``objective.JobModel``; a move it does not favour is
not predicted). A move is kept when the prediction ranks the routing better; the
search restarts from the new slowest job. Jobs at slowdown 1 are left on a single plane;
with several planes a host's NICs together beat its ideal, and they are searched too. Pinned
flows stay in their plane (``ClosLoads.plane_costs`` gives the other planes no option). It
ends at a local optimum or when ``budget`` predictions are spent: deterministic, no wall
clock.

The two-tier kernel (private, a fast path): on a single two-tier plane without bundles
(``Clos.as_leaf_spine``) the same objective runs on the two-tier model, whose moves are
cheaper (``auto`` with objective jobs and no ILP: its routing is the start, the greedy and
edge colouring the other starts, ``objective.improve_jobs`` the search, which lowers the mean
by ``planners.jobmean``'s chains); its routing comes back as this problem's Clos routing.
The parity tests (tests/test_parity.py) hold both shapes to one result.

Why: flow counts treat a probe like a 4 GB All-Reduce chunk; the paths two large rings share
decide their iteration times (``planners.objective`` says more).

Cost: three constructions (seven on small problems), then at most ``budget`` + 7 predictions
(each O(events x rounds x nnz)) and per tried flow O(P x middles x members) for the guide; the
kernel: ``auto``'s layer 1 and layer 2, then at most ``budget`` move evaluations.

References: Crux (Cao et al., SIGCOMM 2024: GPU-intensity priorities); ``planners.objective``
and ``planners.jobmean``.
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
from controller.planners.objective import other_starts, rank_key, worst_bound

# predictions in the search: each costs O(events x rounds x nnz), ~90 ms for 69 flows of an
# all-to-all and 4 rings on a k = 4 fat-tree; most of the gain comes in the first tens
JOB_BUDGET = 60
OPTIONS_PER_FLOW = 3


def clos_slowdowns(problem: ClosProblem, routing: ClosRouting) -> dict[str, float]:
    """Predicted slowdown per job of ``routing`` (1.0: its ideal iteration time)."""
    times = predict_clos_times(problem, routing)
    bps = problem.fabric.link_bps("host")
    return {job.id: slowdown(job, times[job.id], bps) for job in problem.jobs}


def rank(values: dict[str, float]) -> tuple[float, float]:
    """(worst, mean) slowdown, rounded to the prediction's float noise."""
    v = list(values.values()) or [1.0]
    return round(max(v), 9), round(sum(v) / len(v), 9)


def clos_jobs(problem: ClosProblem, budget: int | None = None) -> ClosRouting:
    """The jobs objective's routing of ``problem`` (module docstring). ``budget``: the
    search's predictions (default ``JOB_BUDGET``; the two-tier kernel's move evaluations,
    default ``objective.JOB_BUDGET``). ``info``: the worst, mean and per-job predicted
    slowdown, the start and each start's (worst, mean), the bound on the worst."""
    t0 = time.perf_counter()
    kernel = _two_tier(problem, budget)
    if kernel is not None:
        kernel.info["wall_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
        return kernel
    budget = JOB_BUDGET if budget is None else int(budget)
    starts = {"auto": clos_auto(problem), "greedy": clos_greedy(problem),
              "colouring": tier_colouring(problem)}
    scores = {n: clos_slowdowns(problem, r) for n, r in starts.items()}
    planes = len(problem.fabric.planes)
    for name, other in other_starts(problem, "Clos", scores, planes).items():
        starts[name], scores[name] = other, clos_slowdowns(problem, other)
    bound = worst_bound(scores)
    first = min(scores, key=lambda n: (rank_key(scores[n].values(), bound), n != "auto"))
    start = starts[first]
    cap = score(problem, start)[0]
    r = ClosRouting(list(start.plane), list(start.middle), list(start.path), {})
    current = scores[first]
    moves, used, stopped = 0, 0, "local optimum"
    if len(problem):
        floor = 1.0 if planes == 1 else 0.0  # a host's NICs in several planes beat its ideal
        moves, used, current, stopped = _search(problem, r, current, cap, bound, budget, floor)
    worst, mean = rank(current)
    r.info = {"objective": "jobs", "start": first, "worst_bound": bound,
              "max_link_load_cap": cap, "max_link_load": score(problem, r)[0],
              "worst_slowdown": worst, "mean_slowdown": mean,
              "start_worst_slowdown": rank(scores[first])[0],
              "start_mean_slowdown": rank(scores[first])[1], "predicted_slowdown": current,
              "starts": {n: rank(v) for n, v in scores.items()}, "moves": moves,
              "predictions": used, "budget": budget, "stopped": stopped,
              "wall_ms": round((time.perf_counter() - t0) * 1e3, 3)}
    return r


def _two_tier(problem: ClosProblem, budget: int | None) -> ClosRouting | None:
    """The two-tier kernel's routing of ``problem`` (module docstring), None when the fabric
    is not a single two-tier plane or the two models route other flows."""
    from controller.planners.auto import auto
    from controller.planners.leaf_spine import spine_path, two_tier_problem
    p2 = two_tier_problem(problem)
    if p2 is None:
        return None
    a = auto(p2, ilp_time_limit=0, objective="jobs", job_budget=budget)
    spines = a.spines()
    paths = [spine_path(problem, i, s) for i, s in enumerate(spines)]
    return ClosRouting([0] * len(spines), list(spines), paths, dict(a.info))


def _weights(problem: ClosProblem) -> np.ndarray:
    """Bytes per iteration of every inter-leaf flow: 2(n-1) chunks for a ring's flow."""
    steps = {(j.id, k): 2 * (len(ranks) - 1) for j in problem.jobs
             for k, ranks in enumerate(j.rings)}
    return np.array([problem.flows[pos].bytes * steps.get((problem.flows[pos].job,
                                                            problem.flows[pos].ring), 1)
                     for pos in problem.inter], dtype=float)


def _search(problem, r, current, cap, bound, budget, floor=1.0):
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

    def key(values):
        over, mean, worst = rank_key(values.values(), bound)
        return over, round(mean, 9), worst

    for i, path in enumerate(r.path):
        ids = links_of(i, r.plane[i], path)
        busy[ids] += weight[i] * per_unit[ids]
    flows_of: dict[str, list[int]] = {}
    for i, pos in enumerate(problem.inter):
        flows_of.setdefault(problem.flows[pos].job, []).append(i)
    moves = used = 0
    best = key(current)
    while used < budget:
        improved = False
        for job in sorted(current, key=lambda j: (-current[j], j)):
            if current[job] <= floor + 1e-9:
                break
            cands = []
            for i in flows_of.get(job, []):
                ids = links_of(i, r.plane[i], r.path[i])
                top = float(busy[ids].max())
                if top > weight[i] * float(per_unit[ids].max()) + 1e-9:  # shares a link
                    cands.append((-top, i))
            for top, i in sorted(cands):
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
                    for m in np.flatnonzero((cost <= cap + 1e-9)
                                            & (guide < -top * (1 - 1e-9))).tolist():
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
                    if key(new) < best:
                        current, best, improved = new, key(new), True
                        moves += 1
                        break
                    put(i, q, m, r.path[i], -1.0)
                if improved:
                    break
                put(i, q0, m0, p0, 1.0)
            if improved:
                break
        if not improved:
            break
    return moves, used, current, "budget" if used >= budget else "local optimum"
