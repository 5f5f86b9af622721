"""The ``jobs`` objective on every fabric (issue 60): the one jobs search, run by ``jobs`` and
by ``auto`` with objective ``jobs`` on every shape.

What: the routing with the lowest mean predicted job slowdown the search finds, its worst job
never above a bound: the worst slowdown of the start with the lowest mean (of the
constructions: the two-tier kernel's routing below is a search's result, held to the bound,
not setting it). Every routing is scored by the shared prediction (``model.iteration``:
max-min fair rates over rings and flows on their full paths, host links included) as slowdowns
(``model.iteration.slowdown``, ideal at the host links' line rate), ranked by
``objective.rank_key``: within the bound first, then the mean, then the worst. Mean over jobs,
unweighted (``planners.jobmean`` says why).

Starts: ``clos_auto`` (the colouring and the greedy, improved on link loads), the greedy and
the tier colouring, and on small problems the other unsplit planners' plans
(``objective.other_starts``: ECMP, polarised or not, the edge colouring, the annealing; a flow
or two above auto's max load on some link, or an all-to-all over both planes' NICs, they had
the lower mean on 23 of 1,000 random instances, tests/test_jobs_lowest.py); the search begins
at the best ranked, so its result is never behind a construction on the mean, nor behind the
construction with the best mean on the worst job. Starts the prediction ranks alike (means
within 1e-9: float noise) are picked by link loads (``objective.start_key``: the max, the
links at it, the sorted load vector), as the two-tier kernel picks them.

Search: jobs in decreasing slowdown; for each, its flows on a link another flow also uses, most
loaded in bytes first. First the job is freed (``clos_jobmean``, the two-tier kernel's
``jobmean`` chains): each of those flows, the slowest on ``objective.JobModel``'s guide first,
leaves its shared links by an ejection chain (it takes an option of its own, the flow there
moves on the same way), or the flows of other jobs sharing with it leave by such chains, or
failing both it gets lighter partners; a flow lands only where no link goes above the start's
max and no job goes above its level on the guide (a job that loses nothing by sharing, an
all-to-all bound by its hosts' links, takes the others' flows' places), and the whole is
predicted once, only when the job's level on the guide dropped (one move at a time predicts no
gain while another of the job's flows still shares). Else a flow is tried on the options (plane,
middle, each hop's least loaded member) where no link goes above the start's max link load and
whose busiest link in bytes per unit is less busy than the flow's now, the three least busy
first (the guide: each flow weighs its bytes per iteration, as ``objective.JobModel``; a move it
does not favour is not predicted). A job with several flows on shared links first tries them all
at once, each to its best option (one prediction: a job is as slow as its slowest flow, so one
move at a time may predict no gain); where no single move helps either, each of its flows swaps
with a lighter flow of another job at its leaves, all at once (two large rings on one uplink,
the other full: posted one by one on a 2:1 fat-tree, tests/test_clos_offpath.py). A move is kept
when the prediction ranks the routing better (from the routes in force, off the request path:
the mean lower by ``churn.JOB_GAIN_PER_MOVE`` of it per flow the step moves, issue 74); the
search restarts from the new slowest job. Jobs at slowdown 1 are left on a single plane; with
several planes a host's NICs together beat its ideal. Pinned flows stay in their plane
(``ClosLoads.plane_costs`` gives the other planes no option). It ends at a local optimum or when
``budget`` predictions are spent. On small problems (at most ``objective.OTHER_STARTS_FLOWS``
flows) the search runs again from the next best start at the same max (``NEXT_STARTS``; not a
routing already searched) with a budget of its own, and the better result is kept
(``start_key``): the local optima of the mean differ by start (links-down mixed 2 of the 27
parity instances, tests/test_clos_jobmean.py; 48 byte mixes of ``simulation.workloads.byte_mix``
on an 8 x 4 leaf-spine, a spine down or not: the sum of means 88.56 against 89.34 with the
budget the first search left, about 50% more time).

Stopping (issue 74, ``jobs_stop``): a start with every job at slowdown 1.0 on a single plane
is the result (the bound: no other start built or scored, no search), each further start or
search only while none is there; and everything within ``jobs_stop.time_budget`` of the
flows (``Clock``), auto's start unscored (slowdowns None) when not even its prediction fits.

Last, the link-load layers as the tie-break (``_lower_layers``, the two-tier kernel's too):
``clos_auto``'s layer-2 chains on the result, at its max and below (the max kept), taken
when the prediction ranks them no worse; not from the routes in force (no gain to move for).

The two-tier kernel (private, one more start): on a single two-tier plane without bundles
(``Clos.as_leaf_spine``) the two-tier model's own search of the same objective (``auto`` with
objective jobs: ``objective.improve_jobs``, which lowers the mean by ``planners.jobmean``'s
chains on cheaper moves, its ILP stage within ``ilp_time_limit``) gives one more start, ranked
with the others and held to the constructions' bound (when its own worst set the bound, the
search on the patterns bench's byte mix without failure ended at the kernel's mean, 1.743:
every routing of a lower mean was 0.2% above the kernel's worst; it ends at 1.618 now, within
auto's worst); this search then goes on from the best. Before, the kernel's routing was the
result there: the two searches end at different local optima of the mean: on 8 realistic 64 x
32 leaf-spines (two seeds of each failure case of python -m benchmarks.request_path) this
search's was lower on 4, higher on 1 and the same on 3 (kernel withheld). The parity tests
(tests/test_parity.py) hold the search with the kernel withheld to the kernel's max link
load, its worst and mean slowdown no higher (27 instances: 42.851 against 42.866 summed).

Why: flow counts treat a probe like a 4 GB All-Reduce chunk; the paths two large rings share
decide their iteration times (``planners.objective`` says more).

Cost: within ``jobs_stop.time_budget`` of the flows. One construction when auto's start is
at the bound, else three (seven on small problems), then at most ``budget`` + 9 predictions
(each O(events x rounds x nnz)) per start searched (two on small problems), per tried flow
O(P x middles x members) for the guide, per freed job ``clos_jobmean``'s chain searches,
``clos_auto``'s layer-2 chains once per search; on a single two-tier plane the kernel's too.

References: Crux (Cao et al., SIGCOMM 2024); ``planners.objective``, ``planners.jobmean``.
"""
from __future__ import annotations

import time

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting, link_loads, lower_bound
from controller.model.iteration import predict_clos_times, slowdown
from controller.planners.churn import JOB_GAIN_PER_MOVE
from controller.planners.clos_auto import (
    LAYER2_BELOW_WORK,
    LAYER2_BELOW_WORK_PER_FLOW,
    LAYER2_WORK,
    LAYER2_WORK_PER_FLOW,
    clos_auto,
    score,
    two_tier_auto,
)
from controller.planners.clos_greedy import clos_greedy
from controller.planners.clos_ilp_moves import moved_flows
from controller.planners.clos_jobmean import Freeing
from controller.planners.clos_layer2 import fewer_at_max, fewer_below
from controller.planners.clos_loads import ClosLoads
from controller.planners.clos_tiers import tier_colouring
from controller.planners.jobs_stop import Clock, OutOfTime, Run
from controller.planners.jobs_stop import time_budget as time_budget_of
from controller.planners.objective import (
    OTHER_STARTS_FLOWS,
    iteration_bytes,
    other_starts,
    rank_key,
    start_key,
    worst_bound,
)

# predictions in the search: each costs O(events x rounds x nnz), ~90 ms for 69 flows of an
# all-to-all and 4 rings on a k = 4 fat-tree; most of the gain comes in the first tens
JOB_BUDGET = 60
OPTIONS_PER_FLOW = 3
# small problems: starts at the best start's max link load searched after it, each with
# its own budget (their local optima of the mean differ)
NEXT_STARTS = 1


def clos_slowdowns(problem: ClosProblem, routing: ClosRouting,
                   clock: Clock | None = None) -> dict[str, float]:
    """Predicted slowdown per job of ``routing`` (1.0: its ideal iteration time); with
    ``clock`` within its time budget (``objective.Clock``: ``OutOfTime`` otherwise)."""
    bps = problem.fabric.link_bps("host")

    def predict(on_event=None):
        times = predict_clos_times(problem, routing, on_event)
        return {job.id: slowdown(job, times[job.id], bps) for job in problem.jobs}
    return predict() if clock is None else clock.run(predict)


def rank(values: dict[str, float]) -> tuple[float, float]:
    """(worst, mean) slowdown, rounded to the prediction's float noise."""
    v = list(values.values()) or [1.0]
    return round(max(v), 9), round(sum(v) / len(v), 9)


def clos_jobs(problem: ClosProblem, budget: int | None = None,
              start: ClosRouting | None = None, ilp_time_limit: float = 0.0,
              time_budget: float | None = None, clock: Clock | None = None) -> ClosRouting:
    """The jobs objective's routing of ``problem`` (module docstring). ``budget``: each
    start's search's predictions (default ``JOB_BUDGET``; the two-tier kernel's move
    evaluations, default ``objective.JOB_BUDGET``). ``time_budget``: CPU seconds for it all
    (default ``jobs_stop.time_budget`` of the flows), or ``clock`` (a ``jobs_stop.Clock``).
    ``info``: the worst, mean and per-job predicted slowdown, the start and each start's
    (worst, mean), the starts searched from, the bound on the worst, where and why it
    stopped (``jobs_stop.Run.report``). ``start``: the
    routing to search from (the routes in force, off the request path: ``clos_offpath``),
    no other start but, on a single two-tier plane, the two-tier kernel's search from it
    when the prediction ranks its result better (the result then moving fewer flows from
    ``start`` among those ranked alike). ``ilp_time_limit``: the two-tier kernel's ILP
    stage (s, 0: none)."""
    t0 = time.perf_counter()
    if clock is None:
        clock = Clock(time_budget_of(len(problem)) if time_budget is None else time_budget)
    asked, budget = budget, JOB_BUDGET if budget is None else int(budget)
    run = Run(problem, clock, clos_slowdowns)
    if start is not None:
        first, cap = "installed", score(problem, start)[0]
        run.score(first, start)
        if run.open():
            bound = worst_bound(run.scores)
            kernel = run.step("kernel", lambda: _kernel_from(problem, start, asked, clock))
            # a single two-tier plane: the kernel's search from it too, searched on when it
            # found better (another search from it costs as much again: 9-10 s on the planner
            # bench's 16 x 128 byte mixes), at most at the routes' max
            if kernel is not None and _routes(kernel) != _routes(start) \
                    and score(problem, kernel)[0] <= cap + 1e-9:
                values = run.step("kernel", lambda: clos_slowdowns(problem, kernel, clock))
                if values is not None and start_key(values.values(), bound, ()) < start_key(
                        run.scores[first].values(), bound, ()):
                    run.starts["kernel"], run.scores["kernel"] = kernel, values
        searched = list(run.scores)  # from the routes in force: every start, at their max
    else:
        first = "auto"
        run.score(first, clos_auto(problem))
        for name, build in (("greedy", clos_greedy), ("colouring", tier_colouring)):
            if run.open():  # a start only while one can improve on those scored
                run.score(name, build(problem))
        if run.open():
            kernel = run.step("kernel", lambda: two_tier_auto(
                problem, "jobs", ilp_time_limit, job_budget=asked, job_clock=clock))
            if kernel is not None:  # a single two-tier plane: the kernel's search is a start
                run.score("kernel", ClosRouting(kernel.plane, kernel.middle, kernel.path, {}))
        if run.open():
            for name, other in other_starts(problem, "Clos", run.scores, run.planes).items():
                run.score(name, other)
    if first not in run.scores:  # not even the first start's prediction within the budget
        r = _copy(run.starts[first])
        return _finish(problem, r, score(problem, r)[0], run.unscored(first), False, t0)
    starts, scores = run.starts, run.scores
    # the kernel's routing is a search's result, held to the bound, not a start that sets it
    bound = worst_bound({n: v for n, v in scores.items() if n != "kernel"})
    if start is None:
        order = sorted(scores, key=lambda n: (start_key(scores[n].values(), bound,
                                                        layers(problem, starts[n])),
                                              n != "auto")) if len(scores) > 1 else [first]
        cap, searched = score(problem, starts[order[0]])[0], order[:1]
        # small problems: the next starts at that max too, each with its own budget (their
        # local optima of the mean differ), but not a routing already searched (the search
        # would end where it did)
        for n in order[1:] if len(problem) <= OTHER_STARTS_FLOWS else ():
            if len(searched) > NEXT_STARTS:
                break
            if score(problem, starts[n])[0] == cap and all(
                    _routes(starts[n]) != _routes(starts[m]) for m in searched):
                searched.append(n)
    if run.at_bound(scores[searched[0]]) and searched[0] == first:
        # the first start is at the bound (every job at its ideal): auto's routing is
        # layer-2 optimal by flow counts, the routes in force had layer 2 off the path
        r, current, moves, used, name = _copy(starts[first]), scores[first], 0, 0, first
        run.stop("bound", f"start {first}")
    else:
        r, current, moves, used, name = _search_starts(problem, starts, scores, searched,
                                                       cap, bound, budget, start, run)
    worst, mean = rank(current)
    return _finish(problem, r, cap, {
        "objective": "jobs", "stage": "jobs", "start": name, "worst_bound": bound,
        "worst_slowdown": worst, "mean_slowdown": mean,
        "start_worst_slowdown": rank(scores[name])[0],
        "start_mean_slowdown": rank(scores[name])[1], "predicted_slowdown": current,
        "starts": {n: rank(v) for n, v in scores.items()}, "searched": searched,
        "moves": moves, "predictions": used, "budget": budget, **run.report()},
        run.at_bound(current), t0)


def _copy(r: ClosRouting) -> ClosRouting:
    return ClosRouting(list(r.plane), list(r.middle), list(r.path), {})


def _finish(problem: ClosProblem, r: ClosRouting, cap: float, info: dict, ideal: bool,
            t0: float) -> ClosRouting:
    """``r`` with ``info``, its loads, and which layers are proven optimal."""
    alpha, lb = score(problem, r)[0], lower_bound(problem)
    r.info = {**info, "max_link_load_cap": cap, "max_link_load": alpha,
              "lower_bound": round(lb, 9), "optimal": alpha <= lb + 1e-9,
              "optimal_layers": {"max_link_load": alpha <= lb + 1e-9, "worst_slowdown": ideal},
              "budget": info.get("budget", JOB_BUDGET),
              "wall_ms": round((time.perf_counter() - t0) * 1e3, 3)}
    return r


def _kernel_from(problem: ClosProblem, start: ClosRouting, budget: int | None,
                 clock: Clock | None = None):
    """On a single two-tier plane, the two-tier kernel's jobs search from ``start``
    (``objective.improve_jobs``: cheaper moves and ``jobmean``'s chains, which reach local
    optima this search does not, e.g. two large rings sharing the reverse uplinks of a 2 x 2
    leaf-spine with every link at its max) as a routing; None elsewhere, or when a flow of
    ``start`` has no route. ``clock``: its predictions' time budget."""
    from controller.model.problem import Assignment
    from controller.planners.leaf_spine import kernel_routing, two_tier_problem
    from controller.planners.objective import improve_jobs
    p2 = two_tier_problem(problem)
    if p2 is None or min(start.plane, default=0) < 0:
        return None
    spines, info = improve_jobs(p2, list(start.middle), budget, clock=clock)
    return kernel_routing(problem, Assignment.unsplit(spines, info))


def _routes(r: ClosRouting) -> tuple:
    """Every flow's (plane, middle, path) of ``r``, comparable between routings."""
    return tuple(r.plane), tuple(r.middle), tuple(r.path)


def _search_starts(problem: ClosProblem, starts: dict, scores: dict, order: list[str],
                   cap: float, bound: float, budget: int, previous: ClosRouting | None,
                   run: Run):
    """The search (``_search``, then ``_lower_layers``) from each start of ``order`` in turn
    while the best so far is not at the bound and ``run``'s clock affords it, each with
    ``budget`` predictions: (routing, its slowdowns, moves, predictions in all, the start of
    the best result by ``start_key``, link loads breaking ties; ``previous``, the routes in
    force: fewer flows moved from them first). ``run`` records where and why it stopped."""
    planes = len(problem.fabric.planes)
    floor = 1.0 if planes == 1 else 0.0  # a host's NICs in several planes beat its ideal
    best, used = None, 0
    for name in order:
        if best is not None:
            if run.at_bound(best[2]):
                break  # no start can improve on it
            if not run.clock.affords():
                run.stopped, run.stopped_at = "time budget", f"search from {name}"
                break
        r = _copy(starts[name])
        current, moves = scores[name], 0
        if len(problem):
            moves, spent, current, stopped = _search(problem, r, current, cap, bound, budget,
                                                     floor, run.clock, previous is not None)
            used += spent
            run.stopped, run.stopped_at = stopped, f"search from {name}"  # the last search's
            try:  # from the routes in force no tie-break moves running flows (no gain)
                if previous is None:
                    r, current, lowered = _lower_layers(problem, r, current, bound, run.clock)
                    moves += lowered
            except OutOfTime:
                run.stopped, run.stopped_at = "time budget", f"lower layers from {name}"
        key = start_key(current.values(), bound, layers(problem, r))
        if previous is not None:
            key = (*key[:3], len(moved_flows(r, previous)), *key[3:])
        if best is None or key < best[0]:
            best = (key, r, current, moves, name)
        if not len(problem):
            break
    if run.at_bound(best[2]):
        run.stopped, run.stopped_at = "bound", f"search from {best[4]}"
    _, r, current, moves, name = best
    return r, current, moves, used, name


def layers(problem: ClosProblem, r: ClosRouting) -> tuple:
    """(max load on the fabric links, links at it, the sorted load vector) of ``r``, rounded
    to 1e-9: smaller is better on every layer (``layer2.vector_key`` on two tiers)."""
    fab = link_loads(problem, r)[problem.links.tier > 0]
    v = sorted((round(float(x), 9) for x in fab if x > 1e-9), reverse=True)
    top = v[0] if v else 0.0
    return top, sum(1 for x in v if x >= top - 1e-9), tuple(v)


def _lower_layers(problem: ClosProblem, r: ClosRouting, current: dict, bound: float,
                  clock: Clock | None = None):
    """``clos_auto``'s layer-2 chains on the search's result (fewer links at its max, then at
    the loads below; the max kept), taken when the prediction ranks them no worse: the
    link-load layers break the jobs objective's ties, as ``objective``'s final pass does on
    two tiers. (routing, its slowdowns, flows moved). ``clock``: as ``clos_slowdowns``."""
    before = layers(problem, r)
    alpha = before[0]
    if alpha <= 1:
        return r, current, 0
    new = fewer_at_max(problem, r, alpha, work=LAYER2_WORK + int(LAYER2_WORK_PER_FLOW
                                                                * len(problem)))
    new = fewer_below(problem, new, alpha, work=LAYER2_BELOW_WORK
                      + int(LAYER2_BELOW_WORK_PER_FLOW * len(problem)))
    key = layers(problem, new)
    if key[0] != alpha or key >= before:  # the max stays the start's, as in the search
        return r, current, 0
    values = clos_slowdowns(problem, new, clock)
    if start_key(values.values(), bound, ()) > start_key(current.values(), bound, ()):
        return r, current, 0
    return ClosRouting(new.plane, new.middle, new.path, {}), values, len(moved_flows(new, r))


def _search(problem, r, current, cap, bound, budget, floor=1.0, clock: Clock | None = None,
            in_force: bool = False):  # in_force: r is the routes in force (module docstring)
    L = problem.links
    timed_out = [False]

    def predict():  # the prediction of ``r`` within ``clock`` (counted); None: out of time
        nonlocal used
        try:
            got = clos_slowdowns(problem, r, clock)
        except OutOfTime:
            timed_out[0] = True
            return None
        used += 1
        return got

    def left():
        return used < budget and not timed_out[0]

    loads = ClosLoads(problem, r)
    weight = np.array(iteration_bytes(problem), dtype=float)
    per_unit = np.append(1.0 / L.units, 0.0)
    busy = np.zeros(L.count + 1)  # bytes per unit of capacity on every link
    planes = len(problem.fabric.planes)

    def links_of(i, q, path):
        return list(path) + list(problem.host_links(i, q))

    def put(i, q, m, path, sign):
        r.plane[i], r.middle[i], r.path[i] = (q, m, path) if sign > 0 else (r.plane[i],
                                                                             r.middle[i], path)
        loads.add(i, q, path, sign)
        if freeing is not None:
            freeing.track(i, path, sign)
        ids = links_of(i, q, path)
        busy[ids] += sign * weight[i] * per_unit[ids]

    def key(values):
        over, mean, worst = rank_key(values.values(), bound)
        return over, round(mean, 9), worst

    def better(new, m):  # ranked better; in force, the mean lower by the margin for m flows
        return new is not None and key(new) < best and (not in_force or best[1] - key(new)[1]
                                                          >= per_move * m)

    for i, path in enumerate(r.path):
        ids = links_of(i, r.plane[i], path)
        busy[ids] += weight[i] * per_unit[ids]
    freeing = None  # built when a job is first freed: flows on links, the guide
    flows_of: dict[str, list[int]] = {}
    at_leaf: dict[tuple[int, int], list[int]] = {}  # (plane, leaf) -> flows leaving or reaching it
    for i, pos in enumerate(problem.inter):
        flows_of.setdefault(problem.flows[pos].job, []).append(i)
        for q in range(planes):
            a, b = problem.ends(i, q)[:2]
            at_leaf.setdefault((q, a), []).append(i)
            if b != a:
                at_leaf.setdefault((q, b), []).append(i)

    def swaps(i, q0, m0):
        """Lighter flows of other jobs at flow i's leaves, in another middle, whose middle
        each can take of the other (i is out of the loads): the least busy first."""
        a, b, p, s = problem.ends(i, q0)
        job = problem.flows[problem.inter[i]].job
        seen, out = set(), []
        for j in at_leaf.get((q0, a), []) + at_leaf.get((q0, b), []):
            _, _, pj, sj = problem.ends(j, q0)
            if j in seen or weight[j] >= weight[i] or r.plane[j] != q0 or r.middle[j] == m0 \
                    or (pj == sj) != (p == s) or problem.flows[problem.inter[j]].job == job:
                continue  # a middle is an aggregation slot within a pod, a core between
            seen.add(j)
            if np.isfinite(loads.plane_costs(i, q0).ravel()[r.middle[j]]) \
                    and np.isfinite(loads.plane_costs(j, q0).ravel()[m0]):
                out.append((float(busy[links_of(j, q0, r.path[j])].max()), j))
        return [j for _, j in sorted(out)[:OPTIONS_PER_FLOW]]

    def options_of(i, top, q0, m0):
        """Flow i's options (i out of the loads) within the cap whose busiest link in bytes
        per unit is less busy than its own now (``-top``), the least busy first."""
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
        return sorted(options)

    def move_job(cands):
        """Each of a job's flows on shared links (``cands``: (-top, flow)) to its best
        option, all at once: (their slowdowns or None, the moves made)."""
        done = []
        for top, i in cands:
            q0, m0, p0 = r.plane[i], r.middle[i], r.path[i]
            put(i, q0, m0, p0, -1.0)
            got = options_of(i, top, q0, m0)
            if got:
                _, q, m = got[0]
                put(i, q, m, loads.pick(i, q, m), 1.0)
                if loads.fabric_max() <= cap + 1e-9:
                    done.append((i, q0, m0, p0))
                    continue
                put(i, q, m, r.path[i], -1.0)
            put(i, q0, m0, p0, 1.0)
        return (predict() if done else None), done

    def swap_job(flows):
        """Each of ``flows`` (one job's, on shared links) swapped with a lighter flow of
        another job at its leaves, all at once: a job is as slow as its slowest flow, so one
        move or swap at a time predicts no gain where the job's flows all share (two rings
        on one uplink, the other uplink full). (their slowdowns or None, the swaps made)."""
        done, taken = [], set(flows)
        for i in flows:
            q0, m0, p0 = r.plane[i], r.middle[i], r.path[i]
            put(i, q0, m0, p0, -1.0)
            js = [j for j in swaps(i, q0, m0) if j not in taken]
            if not js:
                put(i, q0, m0, p0, 1.0)
                continue
            j = js[0]
            mj, pj = r.middle[j], r.path[j]
            put(j, q0, mj, pj, -1.0)
            put(i, q0, mj, loads.pick(i, q0, mj), 1.0)
            put(j, q0, m0, loads.pick(j, q0, m0), 1.0)
            done.append((i, j, q0, m0, p0, mj, pj))
            taken.add(j)
            if loads.fabric_max() > cap + 1e-9:
                undo([done.pop()])
        return (predict() if done else None), done

    def undo(done):
        for i, j, q0, m0, p0, mj, pj in reversed(done):
            put(i, q0, mj, r.path[i], -1.0)
            put(j, q0, m0, r.path[j], -1.0)
            put(i, q0, m0, p0, 1.0)
            put(j, q0, mj, pj, 1.0)

    moves = used = 0
    best = key(current)
    per_move = JOB_GAIN_PER_MOVE * best[1] if in_force else 0.0
    while left():
        improved = False
        for job in sorted(current, key=lambda j: (-current[j], j)):
            if current[job] <= floor + 1e-9:
                break
            cands = []
            for i in flows_of.get(job, []):
                ids = links_of(i, r.plane[i], r.path[i])
                top = float(busy[ids].max())
                # shares a link (relative: busy drifts by float rounding as flows move)
                if top > weight[i] * float(per_unit[ids].max()) * (1 + 1e-9):
                    cands.append((-top, i))
            if cands and left():
                freeing = freeing or Freeing(problem, r, loads, cap, put, clock and clock.expired)
                freed = freeing.free(flows_of[job])  # its own test of sharing
                new = predict() if freed else None
                if better(new, len({i for i, *_ in freed})):
                    current, best, improved = new, key(new), True
                    moves += len({i for i, *_ in freed})
                    break
                freeing.undo(freed)
            if len(cands) > 1 and left():
                new, moved = move_job(sorted(cands))
                if better(new, len(moved)):
                    current, best, improved = new, key(new), True
                    moves += len(moved)
                    break
                for i, q0, m0, p0 in reversed(moved):
                    put(i, r.plane[i], r.middle[i], r.path[i], -1.0)
                    put(i, q0, m0, p0, 1.0)
            for top, i in sorted(cands):
                if not left():
                    break
                q0, m0, p0 = r.plane[i], r.middle[i], r.path[i]
                put(i, q0, m0, p0, -1.0)
                for _, q, m in options_of(i, top, q0, m0)[:OPTIONS_PER_FLOW]:
                    if not left():
                        break
                    put(i, q, m, loads.pick(i, q, m), 1.0)
                    if loads.fabric_max() > cap + 1e-9:
                        put(i, q, m, r.path[i], -1.0)
                        continue
                    new = predict()
                    if better(new, 1):
                        current, best, improved = new, key(new), True
                        moves += 1
                        break
                    put(i, q, m, r.path[i], -1.0)
                if improved:
                    break
                put(i, q0, m0, p0, 1.0)
            if not improved and cands and left():
                new, swapped = swap_job([i for _, i in sorted(cands)])
                if better(new, 2 * len(swapped)):
                    current, best, improved = new, key(new), True
                    moves += 2 * len(swapped)
                else:
                    undo(swapped)
            if improved:
                break
        if not improved:
            break
    why = "time budget" if timed_out[0] else "budget" if used >= budget else "local optimum"
    return moves, used, current, why
