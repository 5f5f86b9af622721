"""The job-aware tie-break of ``auto`` by flow counts (issue 74): which flow of a leaf pair
takes which of the pair's paths, the link loads left exactly as they are.

Why: flows with the same ends in one plane (source and destination leaf) that exchange their
paths leave every link with the flows it had (the same links, each crossed as often), so the
max link load, the links at it and the whole load vector stay; but who shares a link with
whom, hence the jobs' slowdowns, changes, and the colouring leaves that to chance (the
patterns bench's byte mix with a spine down: mean slowdown 3.2155 by flows, 2.592 with the
jobs objective's search).

How: per group of flows with the same plane and ends, the group's paths, busiest first (the
largest flow count on their links, then the sum, equal paths together), go to its flows in
the order of a key; three keys, each a candidate: the smaller flows first (a small flow sharing
a busy link loses little in absolute time), the jobs the prediction finds fastest first, and
each job's flows together (they share with each other, not with other jobs). A candidate is
kept only when the shared prediction (``model.iteration``, the one the jobs objective ranks
by) gives it a lower mean slowdown and a worst no higher; the best kept wins. The
predictions run within a budget of work, not of time, so the result is the same on a loaded
machine: flow-events (each event of a prediction counts the problem's flows, about 1-2.6 us
of CPU each here), on ``jobs_stop.Clock`` (one that cannot end within it is not started,
one past it is stopped at its next event).

Cost: O(F log F) per candidate and one prediction each, plus one of the routing as it is;
nothing beyond one pass over the flows when no group holds flows of two jobs or two sizes
on paths that differ (a permutation: every leaf pair has one flow, 0.7 ms at k = 32) or when
every job is at its ideal on a single plane (``jobs_stop``: proven without the prediction,
or by the first).

>>> from controller.model.clos import Clos
>>> from controller.model.clospaths import ClosProblem
>>> from controller.model.jobs import Flow, Job
>>> f = Clos.generate(2, 2, 4, 100.0)
>>> big = Job("big", explicit=[Flow("big", f"h0_{i}", f"h1_{i}", 1e9) for i in (0, 1)])
>>> small = Job("small", explicit=[Flow("small", f"h0_{i}", f"h1_{i}", 1e7) for i in (2, 3)])
>>> p = ClosProblem.build(f, [big, small])
>>> path = lambda i, m: tuple(int(h[m][0]) for h in p.hops(i, 0))
>>> r = ClosRouting([0] * 4, [0, 1, 0, 1], [path(i, m) for i, m in enumerate([0, 1, 0, 1])])
>>> t = tiebreak(p, r, work=1e6)
>>> t.info["tiebreak"]["kept"], t.middle
(None, [0, 1, 0, 1])
"""
from __future__ import annotations

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting, link_loads
from controller.model.iteration import predict_clos_times, slowdown
from controller.planners.jobs_stop import Clock, OutOfTime, at_floor, ideal_slowdowns

NOISE = 1e-9  # means closer than this are the prediction's float noise


def groups(problem: ClosProblem, routing: ClosRouting) -> list[list[int]]:
    """The flows (indices) of each (plane, ends) whose paths may be exchanged: two or more
    flows of two jobs or two sizes, on paths that are not all the same. The ends are keyed
    with numpy: only the leaf pairs of two flows or more reach Python (few on a
    permutation)."""
    flows, inter = problem.flows, problem.inter
    plane = np.asarray(routing.plane, dtype=np.int64)
    out = []
    for q in np.unique(plane[plane >= 0]).tolist():
        idx = np.flatnonzero(plane == q)
        a, b, _, _ = problem.end_arrays(q)
        key = a[idx] * (int(b.max()) + 1) + b[idx]
        order = np.argsort(key, kind="stable")
        starts = np.flatnonzero(np.r_[True, np.diff(key[order]) != 0])
        sizes = np.diff(np.r_[starts, len(order)])
        ranked = idx[order].tolist()
        for start, size in zip(starts[sizes > 1].tolist(), sizes[sizes > 1].tolist()):
            run = ranked[start:start + size]
            if len({(flows[inter[i]].job, flows[inter[i]].bytes) for i in run}) > 1 and \
                    len({routing.path[i] for i in run}) > 1:
                out.append(run)
    return out


def regroup(problem: ClosProblem, routing: ClosRouting, found: list[list[int]],
            key) -> ClosRouting:
    """``routing`` with each group's paths, busiest first, given to its flows in ``key``
    order (module docstring); the link loads are unchanged."""
    loads = link_loads(problem, routing)
    out = ClosRouting(list(routing.plane), list(routing.middle), list(routing.path),
                      dict(routing.info))
    for idx in found:
        paths = sorted(((routing.middle[i], routing.path[i]) for i in idx),
                       key=lambda mp: (max(loads[x] for x in mp[1]),
                                       sum(loads[x] for x in mp[1]), mp[0], mp[1]),
                       reverse=True)
        for i, (m, path) in zip(sorted(idx, key=key), paths):
            out.middle[i], out.path[i] = m, path
    return out


def tiebreak(problem: ClosProblem, routing: ClosRouting, work: float) -> ClosRouting:
    """``routing`` with its flows' paths exchanged within their groups where the prediction
    says it lowers the mean slowdown, the worst no higher (module docstring), its
    predictions within ``work`` flow-events (each event of a prediction costs the problem's
    flows); its info gets ``tiebreak``: the candidates predicted, the one kept (None: the
    routing as it was), the means before and after, the work spent and why it stopped."""
    found = groups(problem, routing)
    info: dict = {"groups": len(found), "predicted": 0, "kept": None}
    single = len(problem.fabric.planes) == 1
    if not found or (single and ideal_slowdowns(problem, routing) is not None):
        routing.info["tiebreak"] = info
        return routing
    spent = [0]  # flow-events: a clock that reads the same on a loaded machine
    clock, bps, per_event = Clock(work, now=lambda: spent[0]), \
        problem.fabric.link_bps("host"), max(len(problem), 1)

    def slowdowns(r: ClosRouting) -> dict[str, float]:
        def predict(on_event):
            def event():
                spent[0] += per_event
                on_event()
            times = predict_clos_times(problem, r, event)
            return {j.id: slowdown(j, times[j.id], bps) for j in problem.jobs}
        return clock.run(predict)

    flows = [problem.flows[pos] for pos in problem.inter]
    order = {j.id: k for k, j in enumerate(problem.jobs)}
    best = routing
    try:
        now = slowdowns(routing)
        worst, best_mean = max(now.values()), sum(now.values()) / len(now)
        info["mean_before"] = info["mean_after"] = round(best_mean, 6)
        keys = [("smaller flows busier", lambda i: (flows[i].bytes, order[flows[i].job], i)),
                ("faster jobs busier", lambda i: (now[flows[i].job], order[flows[i].job], i)),
                ("each job together", lambda i: (order[flows[i].job], i))]
        if single and at_floor(now.values()):  # every job at its ideal: nothing to gain
            info["stopped"], keys = "bound", []
        for name, key in keys:
            r = regroup(problem, routing, found, key)
            got = slowdowns(r)
            info["predicted"] += 1
            mean = sum(got.values()) / len(got)
            if max(got.values()) <= worst * (1 + 1e-6) and mean < best_mean - NOISE:
                best, best_mean, info["kept"] = r, mean, name
                info["mean_after"] = round(mean, 6)
    except OutOfTime:
        info["stopped"] = "budget"
    info["work"] = spent[0]
    best.info["tiebreak"] = info
    return best
