"""The job-aware objective: minimise the worst job's predicted iteration-time slowdown.

Flow counts treat a 1 MB probe like a 3.7 GB BLOOM chunk: two BLOOM flows on one link and a
LLaMA flow alone score the same as BLOOM + LLaMA on each link, yet the first doubles BLOOM's
All-Reduce. The job objective uses bytes (the same intuition as Crux's GPU-intensity ranking,
SIGCOMM 2024: protect the jobs whose iteration time suffers most).

Prediction: ``model.iteration.predict_slowdowns`` (max-min fair rates over rings and flows,
host links included, within 5% of the fluid model on every job of every tested pattern). A
job's slowdown is (compute_s + communication time) / (compute_s + ideal communication time).

Search guide (``JobModel``, fast enough to score hundreds of moves): each flow f carries w_f
bytes per iteration (a ring flow 2(n-1) chunks of S/n, an explicit flow its bytes); flows that
share a leaf-spine link share it fairly, so f is done on link e after
tau_f(e) = sum over flows g on e of min(w_g, w_f) / C. The guide ignores host links, so every
routing the search ends with, and every start, is judged by the prediction: the search starts
from the best of auto's routing, the baselines it is given (greedy, edge colouring) and, on
small problems, the other unsplit planners' plans (``other_starts``), and its result replaces
that start only when the prediction ranks it better.

Objective: the mean predicted slowdown over jobs (unweighted, ``planners.jobmean`` says why),
under a bound on the worst job: no worse than the worst job of the best start (the scored
routing with the lowest mean: auto's own or a baseline's), so the result is never behind any
baseline it can score on the mean, nor behind the best of them on the worst job; then the
flow counts (the routing starts at auto's layer-2 optimum and no move takes a link above its
max load; starts of the same mean to 1e-9 are picked by link loads, ``start_key``; last,
``auto``'s layer-2 chains on the result, taken when the prediction ranks them no worse,
``_lower_layers``). Ranking the worst first instead gave byte mixes the lowest worst job but
a higher mean than the greedy.

Search. Phase 1 (worst, which also lowers the mean of the jobs it frees): from the best
start, repeatedly take a link that holds the
worst value and apply the best move of one of its flows to another usable spine, or a swap with
a flow sharing a leaf with it on another spine, that lowers (worst value, number of links
holding it); flow counts break ties between moves. Each move touches at most six links,
evaluated in O(n log n) for the n flows on them. Phase 2 (mean): ``jobmean.lower_mean``
frees whole jobs from their shared links. Both stop at a local optimum or when the budget of
move evaluations is spent (a quarter for phase 1): deterministic, no wall clock. Then
``_lower_layers``: the layer-2 chains once (as auto's) and one more prediction. A start with
every job at its ideal (``at_floor``: the worst and the mean at their lower bounds) is the
result, no other start scored (issue 74). Within ``clos_jobs`` (this search is its two-tier
kernel's) every prediction also runs within its time budget (``jobs_stop.Clock``):
one it does not allow ends the kernel's search, and ``clos_jobs`` goes on without it.

    >>> from controller.model.clos import Clos
    >>> from controller.model.jobs import Job
    >>> from controller.model.problem import Problem
    >>> f = Clos.generate(2, 2, 4).as_leaf_spine()       # 2 spines: leaf l0 sends 4 flows, 2 per link
    >>> def ring(j, i, size, compute):
    ...     return Job(j, rings=[[f"h0_{i}", f"h1_{i}"]], ring_bytes=size, compute_s=compute)
    >>> jobs = [ring("A", 0, 8e9, 1.2), ring("B", 1, 1e8, 1.0), ring("C", 2, 8e9, 1.2),
    ...         ring("D", 3, 1e8, 1.0)]
    >>> p = Problem.build(f, jobs)
    >>> paired_big = [0, 0, 1, 1, 0, 0, 1, 1]            # A and C share spine 0
    >>> round(job_slowdowns(p, paired_big)["A"], 3)      # (1.2 + 2 x 0.64) / (1.2 + 0.64)
    1.348
    >>> spines, info = improve_jobs(p, paired_big)
    >>> round(info["worst_slowdown"], 3), spines[0] != spines[4]   # B: (1 + 2 x 0.008) / 1.008
    (1.008, True)
"""
from __future__ import annotations

from controller.errors import InputError
from controller.model.iteration import predict_times, slowdown
from controller.model.loads import max_link_flows
from controller.model.problem import Problem
from controller.planners.jobs_stop import Clock, at_floor
from controller.planners.repair import Routing, bits

EPS = 1e-9


def iteration_bytes(problem) -> list[float]:
    """Bytes per iteration of every inter-leaf flow of ``problem`` (two-tier or Clos, in
    ``problem.inter`` order): a ring's flow carries 2(n-1) chunks of its bytes (reduce-scatter
    and all-gather), any other flow its bytes once."""
    steps = {(j.id, k): 2 * (len(ranks) - 1) for j in problem.jobs
             for k, ranks in enumerate(j.rings)}
    return [f.bytes * steps.get((f.job, f.ring), 1)
            for f in (problem.flows[pos] for pos in problem.inter)]


class JobModel:
    """Per inter-leaf flow: its job, bytes per iteration; per job: compute and ideal time."""

    def __init__(self, problem: Problem):
        self.capacity = problem.fabric.link_bps()
        self.jobs = [j.id for j in problem.jobs]
        index = {j.id: i for i, j in enumerate(problem.jobs)}
        self.compute, self.ideal = [], []
        for j in problem.jobs:
            if not j.compute_s >= 0:
                raise InputError(f"job {j.id}: compute_s must not be negative, got {j.compute_s!r}")
            self.compute.append(float(j.compute_s))
            self.ideal.append(j.ideal_allreduce_s(self.capacity))
        flows = problem.flows
        self.job = [index[flows[pos].job] for pos in problem.inter]
        self.weight = iteration_bytes(problem)
        # _value(f, (f,)): tau = w / C
        self.alone = [self._slowdown(j, w / self.capacity) for w, j in zip(self.weight, self.job)]
        self._tables: dict[tuple, tuple[dict, dict]] = {}

    def link_table(self, on_link) -> tuple[dict, dict]:
        """(job -> the largest value of its flows, flow -> value) of the flows ``on_link``,
        each as ``value`` gives it, in the order of ``on_link``, kept per tuple of the flows.
        O(n log n) for n flows, not n calls of ``_value``: in increasing weight, a flow's sum
        of min(w_g, w_f) is the lighter flows' weights (added in increasing order, as
        ``_value`` adds them: the same floats) plus w_f for each flow at least as heavy (the
        jobs search builds thousands of tables of 10-20 flows on an all-to-all)."""
        key = tuple(on_link)
        got = self._tables.get(key)
        if got is None:
            weight, job = self.weight, self.job
            if len(key) == 1:
                value = {key[0]: self.alone[key[0]]}
            else:
                value = {}
                order = sorted(key, key=weight.__getitem__)
                n, lighter, i = len(order), 0.0, 0
                while i < n:
                    w = weight[order[i]]
                    k = i
                    while k < n and weight[order[k]] == w:
                        k += 1
                    tau = (lighter + w * (n - i)) / self.capacity
                    for f in order[i:k]:
                        value[f] = self._slowdown(job[f], tau)
                    for f in order[i:k]:
                        lighter += weight[f]
                    i = k
            jobs: dict[int, float] = {}
            flows: dict[int, float] = {}
            for f in key:  # in the set's order
                v = flows[f] = value[f]
                if v > jobs.get(job[f], 0.0):
                    jobs[job[f]] = v
            got = self._tables[key] = (jobs, flows)
        return got

    def value(self, f: int, on_link) -> float:
        """Slowdown of f's job if f's time on a link holding ``on_link`` set it."""
        if len(on_link) == 1:
            return self.alone[f]
        return self._value(f, on_link)

    def value_on(self, f: int, on_link) -> float:
        """``value(f, on_link)``, from the link table when f is among ``on_link``."""
        if len(on_link) == 1:
            return self.alone[f]
        v = self.link_table(on_link)[1].get(f)
        return self._value(f, on_link) if v is None else v

    def _value(self, f: int, on_link) -> float:
        wf = self.weight[f]
        lighter, heavier = 0.0, 0
        for w in sorted(self.weight[g] for g in on_link):  # as ``link_table`` adds them
            if w < wf:
                lighter += w
            else:
                heavier += 1
        return self._slowdown(self.job[f], (lighter + wf * heavier) / self.capacity)

    def _slowdown(self, j: int, tau: float) -> float:
        """Job j's slowdown if its communication took ``tau`` seconds (at least its ideal)."""
        base = self.compute[j] + self.ideal[j]
        if base <= 0:
            return 1.0
        return (self.compute[j] + max(self.ideal[j], tau)) / base

    def link_worst(self, on_link) -> float:
        return max((self.value(f, on_link) for f in on_link), default=0.0)


def job_slowdowns(problem: Problem, routing, clock: Clock | None = None) -> dict[str, float]:
    """Predicted slowdown per job (1.0 = its ideal iteration time) of a routing (a spine or
    parts per inter-leaf flow): ``model.iteration.predict_slowdowns``, the prediction the
    objective, the reports and the benchmarks share (within 5% of the fluid model); within
    ``clock``'s budget if given (``OutOfTime`` otherwise)."""
    bps = problem.fabric.link_bps()

    def predict(on_event=None):
        times = predict_times(problem, routing, on_event)
        return {job.id: slowdown(job, times[job.id], bps) for job in problem.jobs}
    return predict() if clock is None else clock.run(predict)


def rank_key(values, bound: float | None = None) -> tuple:
    """Rank of a routing on the job objective, smaller is better: whether its worst slowdown
    exceeds ``bound`` (beyond a relative 1e-6: the prediction's float noise; no bound: never),
    then the mean, then the worst."""
    values = list(values) or [1.0]
    worst = max(values)
    over = bound is not None and worst > bound * (1 + 1e-6)
    return over, sum(values) / len(values), round(worst, 6)


def start_key(values, bound: float, layers: tuple) -> tuple:
    """Rank of a start: ``rank_key`` with the mean rounded to the prediction's float noise,
    then ``layers`` (max link load, links at it, the sorted load vector): starts the
    prediction cannot tell apart are picked by link loads, alike on both shapes."""
    over, mean, worst = rank_key(values, bound)
    return over, round(mean, 9), worst, layers


def worst_bound(scores: dict) -> float:
    """The worst slowdown of the routing with the lowest mean (then the lowest worst) among
    ``scores`` (name -> job -> slowdown): the bound ``rank_key`` holds the others to."""
    best = min(scores.values(), key=lambda v: rank_key(v.values())[1:])
    return max(best.values(), default=1.0)


# the other unsplit planners (registry names) the jobs search also starts from (issue 60: the
# search's moves never take a link above its start's max load, and ECMP's or the colouring's
# plans, a flow or two higher on some link, had a lower mean on 23 of 1,000 random instances:
# tests/test_jobs_lowest.py), on problems of at most OTHER_STARTS_FLOWS inter-leaf flows:
# their constructions and predictions take 15-25 ms at 100-250 flows (the annealing about
# 12), 55 ms at 450 and 0.3-1.2 s at 1,000-2,000 (an ECMP plan's prediction: many rounds),
# far above the request path's 100 ms at 64 x 32
OTHER_STARTS = ("ecmp", "ecmp-polarised", "edge-coloring", "annealing")
OTHER_STARTS_FLOWS = 256


def other_starts(problem, shape: str, scores: dict, planes: int = 1) -> dict:
    """name -> plan of each ``OTHER_STARTS`` planner on ``problem`` (``shape`` "two-tier": a
    two-tier ``Problem``, the name's kernel, ``leaf_spine.kernel_for``; else the registry's
    planner; default options), or none: above ``OTHER_STARTS_FLOWS`` flows, or when the
    best of the starts scored so far (``scores``: name -> per-job slowdowns) has a mean of 1
    already on a single plane (a job on one NIC never beats its ideal)."""
    if len(problem) > OTHER_STARTS_FLOWS or (planes == 1 and min(
            rank_key(v.values())[1] for v in scores.values()) <= 1.0 + EPS):
        return {}
    if shape == "two-tier":  # a two-tier Problem: each name's kernel
        from controller.planners.leaf_spine import kernel_for as planner_for
    else:
        from controller.planners.registry import planner_for
    return {name: planner_for(name)(problem) for name in OTHER_STARTS}


def _heuristic_slowdowns(problem: Problem, spines: list[int]) -> dict[str, float]:
    """The search's own fast per-link estimate (``JobModel``): spine links only, processor
    sharing by bytes. A guide for moves, not the prediction."""
    model = JobModel(problem)
    return dict(zip(model.jobs, _values(model, Routing(problem, spines))))


def _values(model: JobModel, r: Routing) -> list[float]:
    """Each job's predicted slowdown on routing ``r``, in ``model.jobs`` order."""
    out = [1.0] * len(model.jobs)
    for on_link in r.on:
        if on_link:
            for j, v in model.link_table(on_link)[0].items():
                out[j] = max(out[j], v)
    return out


# move evaluations in all, deterministic: the full jobs search (auto, objective jobs) takes
# 15-87 ms at 64 x 32 (bench/planner.json, section layer2: 10 realistic clusters)
JOB_BUDGET = 600


def improve_jobs(problem: Problem, spines: list[int], budget: int | None = None,
                 time_limit: float | None = None, candidates: dict | None = None,
                 clock: Clock | None = None):
    """The job objective from ``spines`` (module docstring): the new spines and an info dict
    (worst, mean and per-job predicted slowdown, moves made, how it ended, where it started).

    Every routing is scored by the shared prediction (``job_slowdowns``): the search starts
    from the one of ``spines``, ``candidates`` (name -> spines, e.g. the greedy and edge
    colouring) and on small problems ``other_starts`` (ECMP, the Clos edge colouring, the
    annealing: every other unsplit planner but the ILP) with the lowest mean, whose worst
    slowdown bounds the result's (``info["worst_bound"]``): ``jobs`` is never behind a
    baseline it can score on the mean, nor on the worst job behind the baseline with the best
    mean. Its result is kept only when the prediction ranks it better than that start
    (``rank_key``: worst within the bound, then a lower mean). A ``spines`` whose every job
    is at its ideal (``at_floor``) is the result, nothing else scored nor searched
    (``info["job_search"]``: "bound"). ``clock``: every prediction within its time budget
    (``Clock``: ``OutOfTime`` when one is not, for the caller, ``clos_jobs``, to end on).
    """
    from controller.planners.layer2 import vector_key
    budget = JOB_BUDGET if budget is None else int(budget)
    starts = {"start": list(spines)}
    scores = {"start": job_slowdowns(problem, starts["start"], clock)}
    if at_floor(scores["start"].values()):  # the bound: no routing has a lower worst or mean
        v = list(scores["start"].values()) or [1.0]
        return list(spines), {
            "worst_slowdown": max(v), "mean_slowdown": sum(v) / len(v), "job_moves": 0,
            "predicted_slowdown": scores["start"], "job_search": {"worst": "bound",
                                                                  "mean": "bound"},
            "job_start": "start", "worst_bound": max(v),
            "job_start_mean": {"start": round(sum(v) / len(v), 6)}}
    for name, cand in (candidates or {}).items():
        if len(cand) == len(spines) and all(problem.usable[k] >> s & 1
                                            for k, s in enumerate(cand)):
            starts[name] = list(cand)
            scores[name] = job_slowdowns(problem, starts[name], clock)
    for name, a in other_starts(problem, "two-tier", scores).items():
        starts[name] = a.spines()
        scores[name] = job_slowdowns(problem, starts[name], clock)
    bound = worst_bound(scores)
    first = min(starts, key=lambda n: (start_key(scores[n].values(), bound,
                                                 vector_key(problem, starts[n])), n != "start"))
    base = starts[first]
    new_spines, info = _search(problem, base, budget)
    predicted = job_slowdowns(problem, new_spines, clock) if info["job_moves"] else scores[first]
    if info["job_moves"] and (rank_key(predicted.values(), bound)
                              >= rank_key(scores[first].values(), bound)):
        new_spines, predicted = base, scores[first]  # the guide was wrong: keep the start
        info["job_moves"], info["job_search"]["mean"] = 0, "start_kept"
    lowered, predicted = _lower_layers(problem, new_spines, predicted, bound, clock)
    info["job_moves"] += sum(1 for a, b in zip(new_spines, lowered) if a != b)
    new_spines = lowered
    values = list(predicted.values())
    info.update(worst_slowdown=max(values, default=1.0),
                mean_slowdown=sum(values) / len(values) if values else 1.0,
                predicted_slowdown=predicted, job_start=first, worst_bound=bound,
                job_start_mean={n: round(sum(v.values()) / max(1, len(v)), 6)
                                for n, v in scores.items()})
    if first != "start":
        info["job_moves"] += sum(1 for a, b in zip(spines, base) if a != b)
    return new_spines, info


def _lower_layers(problem: Problem, spines: list[int], predicted: dict, bound: float,
                  clock: Clock | None = None):
    """``auto``'s layer-2 chains on the search's result (fewer links at its max, then at the
    loads below; the max kept), taken when the prediction ranks them no worse: the link-load
    layers break the jobs objective's ties, as ``clos_jobs``' final pass does on Clos
    fabrics. (spines, their slowdowns)."""
    from controller.planners.layer2 import fewer_at_level, fewer_below, side_bounds, vector_key
    r = Routing(problem, spines)
    alpha = r.max_load()
    if alpha <= 1:
        return spines, predicted
    fewer_at_level(r, alpha - 1, None, 4096, side_bounds(problem, alpha))
    fewer_below(r, alpha, None, 256, keep_order=False)
    new = list(r.spine)
    key = vector_key(problem, new)
    if key[0] != alpha or key >= vector_key(problem, spines):  # the max stays the search's
        return spines, predicted
    values = job_slowdowns(problem, new, clock)
    if start_key(values.values(), bound, ()) > start_key(predicted.values(), bound, ()):
        return spines, predicted
    return new, values


def _search(problem: Problem, spines: list[int], budget: int):
    """The local search on ``JobModel``'s estimate (phases 1 and 2 of the module docstring):
    at most a quarter of ``budget`` move evaluations lower (worst value, links holding it),
    ``lower_mean`` the rest; deterministic."""
    model = JobModel(problem)
    if max_link_flows(problem, spines) <= 1:  # every flow alone on its links: nothing to gain
        values = [1.0] * len(model.jobs)
        for f, j in enumerate(model.job):
            values[j] = max(values[j], model.alone[f])
        return list(spines), _info(model, values, 0, "local_optimum", "local_optimum")
    r = Routing(problem, spines)
    start = [1.0] * len(model.jobs)  # _values(model, r), and each link's worst value
    worst = {}
    for x, on in enumerate(r.on):
        if on:
            per_job, per_flow = model.link_table(on)
            for j, v in per_job.items():
                start[j] = max(start[j], v)
            worst[x] = max(per_flow.values())
    alpha = r.max_load()
    S = r.S
    version = [0] * (2 * r.n_leaves)  # per leaf-side row: bumped when one of its links changes
    stuck: dict[int, tuple] = {}  # critical link -> (w_max, row versions) when no move helped
    moves_made = 0
    spent = [0]
    first = budget // 4
    while worst and spent[0] < first:
        w_max = max(worst.values())
        if w_max <= 1.0 + EPS:
            break
        crit = sorted(x for x, v in worst.items() if v >= w_max * (1 - EPS))
        applied = False
        for x in crit:
            rows = sorted({y // S for g in r.on[x] for y in r.links(g, x % S)})
            seen = (w_max, tuple(version[row] for row in rows))
            if stuck.get(x) == seen:
                continue  # nothing near x changed since it had no improving move
            if spent[0] >= first:
                break
            move = _best_move(r, model, worst, x, w_max, alpha, spent, first)
            if move is None:
                stuck[x] = seen
                continue
            changes, new_values = move
            for g, _ in changes:
                r.remove_route(g)
            for g, u in changes:
                r.add_route(g, u)
            for y, v in new_values.items():
                version[y // S] += 1
                if r.on[y]:
                    worst[y] = v
                else:
                    worst.pop(y, None)
            moves_made += len(changes)
            applied = True
            break
        if not applied:
            break
    phase1 = "budget" if spent[0] >= first else "local_optimum"
    from controller.planners.jobmean import lower_mean
    mean_moves, phase2, values = lower_mean(r, model, alpha, max(0, budget - spent[0]))
    new_spines = r.spine
    w0, w1 = max(start, default=1.0), max(values, default=1.0)
    if w1 > w0 + EPS or (w1 > w0 - EPS and sum(values) > sum(start) + EPS):
        # phase 1 lowered the links at the worst value, not the worst, and slowed jobs that
        # phase 2 could not free again: the routing it started from is better (seen once in
        # 20 realistic 64 x 32 clusters)
        new_spines, values, moves_made, mean_moves = list(spines), start, 0, 0
        phase2 = "start_kept"
    return new_spines, _info(model, values, moves_made + mean_moves, phase1, phase2)


def _info(model: JobModel, values: list[float], moves: int, phase1: str, phase2: str) -> dict:
    """``improve_jobs``' info: worst, mean and per-job predicted slowdown, how the search went."""
    return {"worst_slowdown": max(values, default=1.0),
            "mean_slowdown": sum(values) / len(values) if values else 1.0,
            "predicted_slowdown": dict(zip(model.jobs, values)), "job_moves": moves,
            "job_search": {"worst": phase1, "mean": phase2}}


def _best_move(r: Routing, model: JobModel, worst: dict, x: int, w_max: float, alpha: int,
               spent: list, limit: int):
    """The best relocation of a flow on critical link ``x``, else its best swap with a flow
    sharing a leaf with it, that lowers (w_max, links at w_max) without a link above
    ``alpha`` flows; None if there is none."""
    S = r.S
    t = x % S
    lim, crit_at = w_max * (1 + EPS), w_max * (1 - EPS)
    memo: dict[tuple, float] = {}

    def evaluate(changes):
        spent[0] += 1
        moved = {g for g, _ in changes}
        gains: dict[int, list] = {}
        for g, u in changes:
            for y in r.links(g, u):
                gains.setdefault(y, []).append(g)
        losses = set()
        for g, _ in changes:
            losses.update(y for y in r.links(g, r.spine[g]) if y not in gains)
        new_values, crit_delta, top, count_top = {}, 0, 0.0, 0
        for y in list(gains) + sorted(losses):  # links gaining flows first: they can fail
            on = tuple(sorted([f for f in r.on[y] if f not in moved] + gains.get(y, [])))
            if len(on) > alpha:
                return None
            v = memo.get(on)
            if v is None:
                v = memo[on] = model.link_worst(on)
            if v > lim:
                return None
            new_values[y] = v
            crit_delta += (v >= crit_at) - (worst.get(y, 0.0) >= crit_at)
            top = max(top, v)
            count_top = max(count_top, len(on))
        if crit_delta >= 0:
            return None
        return (top, count_top), (changes, new_values)

    flows = sorted(r.on[x])
    for swaps in (False, True):
        best, best_key = None, None
        for g in flows:
            rows = [y // S for y in r.links(g, t)]  # both leaf sides of g
            for u in bits(r.usable[g] & ~(1 << t)):
                if not swaps:
                    candidates = [((g, u),)]
                else:
                    partners = set()
                    for row in rows:
                        partners.update(r.on[row * S + u])
                    candidates = [((g, u), (h, t)) for h in sorted(partners)
                                  if h != g and r.usable[h] >> t & 1]
                for changes in candidates:
                    if spent[0] >= limit:
                        break  # the budget ends inside one search too
                    res = evaluate(changes)
                    if res is not None and (best_key is None or res[0] < best_key):
                        best_key, best = res
        if best is not None:
            return best
    return None
