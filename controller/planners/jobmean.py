"""The job objective's second phase: lower the mean predicted slowdown over jobs by
concentrating the unavoidable shared links on few jobs.

Why: with one whole spine down, every full leaf must put two flows on one link. If those pairs
belong to many jobs, every one of them runs at 2x; if they belong to few, the others run at 1x.
A job's slowdown is the max over its flows (a ring step waits for its slowest flow), so a job
that already has one slowed flow loses nothing when it takes another: moving a slowed flow of a
job off its shared link, or swapping it with a flow of an already-slowed job, frees the first
job at no cost to the second.

Mean over jobs, unweighted: a job's iteration time is what its users wait for whatever its
size, and this is what the evaluation reports (mean over jobs of the All-Reduce slowdown).
Weighting by GPUs would push every shared link onto the smallest jobs.

Move ("free a job"): for every slowed flow g of a slowed job, either (1) g leaves its shared
link by an alternating chain under capacity 1 where links holding more keep their count (the
Kempe move of edge colouring: whoever takes a place comes from a chain, and the link g left
may take another flow), or (2) each flow sharing a link with g whose job is slowed already
moves directly to the least-loaded spine where it stays within ``alpha`` and slows nobody new.
A step counts only if g ends alone, no job exceeds the current worst and no unslowed job gets
slowed; the whole job's move is kept when the sum of slowdowns (on ``objective.JobModel``'s
prediction) drops, else undone. Jobs are visited fewest slowed flows first (cheapest to free),
in rounds, until a round frees nothing or ``budget`` steps are spent: deterministic.

    >>> from controller.model.clos import Clos
    >>> from controller.model.jobs import Job
    >>> from controller.model.problem import Problem
    >>> from controller.planners.objective import JobModel, job_slowdowns
    >>> from controller.planners.repair import Routing
    >>> from controller.model.jobs import Flow
    >>> f = Clos.generate(2, 2, 3).as_leaf_spine()     # leaf l0 sends 3 flows over 2 spines: one link holds 2
    >>> a = Job("A", explicit=[Flow("A", "h0_0", "h1_0", 1e9), Flow("A", "h0_1", "h1_1", 1e9)])
    >>> b = Job("B", explicit=[Flow("B", "h0_2", "h1_2", 1e9)])
    >>> p = Problem.build(f, [a, b])
    >>> r = Routing(p, [0, 1, 0])        # A's first flow shares spine 0 with B: both at 2x
    >>> moves, how, slow = lower_mean(r, JobModel(p), 2, 100)
    >>> {j: round(v, 2) for j, v in job_slowdowns(p, r.spine).items()}
    {'A': 2.0, 'B': 1.0}
"""
from __future__ import annotations

from collections import Counter

from controller.planners.repair import Routing, bits

EPS = 1e-9
CHAIN_LINKS = 256  # links one chain search may visit


class _JobState:
    """Per link and job the job's worst flow value there; per job a counter of those values
    (its slowdown is the largest, at least 1)."""

    def __init__(self, r: Routing, model):
        self.r, self.model = r, model
        self.at: list[dict] = [{} for _ in r.on]
        self.values: list[Counter] = [Counter() for _ in model.jobs]
        at, values, table = self.at, self.values, model.link_table
        for x, on in enumerate(r.on):
            if on:  # _set on an empty link
                vals = at[x] = table(on)[0]
                for j, v in vals.items():
                    values[j][v] += 1

    def link_values(self, on) -> dict:
        """Job -> its worst flow value on a link holding ``on`` (shared: never changed)."""
        return self.model.link_table(on)[0]

    def _set(self, x: int, vals: dict) -> None:
        for j, v in self.at[x].items():
            c = self.values[j]
            c[v] -= 1
            if not c[v]:
                del c[v]
        self.at[x] = vals
        for j, v in vals.items():
            self.values[j][v] += 1

    def slowdown(self, j: int) -> float:
        c = self.values[j]
        return max(max(c) if c else 1.0, 1.0)

    def refresh(self, links) -> None:
        at, on = self.at, self.r.on
        for x in links:
            vals = self.link_values(on[x])
            if vals is not at[x] and vals != at[x]:  # the same values: the counters stay
                self._set(x, vals)


def lower_mean(r: Routing, model, alpha: int, budget: int) -> tuple[int, str, list]:
    """Apply mean-lowering moves to ``r`` in place (module docstring); (flows moved, how the
    search ended: "local_optimum" or "budget", the predicted slowdown per job). Cost per
    budget unit: one chain search of at
    most ``CHAIN_LINKS`` links or one direct move, and the refresh of the links it touched
    (O(flows on them, squared))."""
    st = _JobState(r, model)
    load = r.load
    n_jobs = len(model.jobs)
    slow = [st.slowdown(j) for j in range(n_jobs)]
    w_max = max(slow, default=1.0)
    spent = moves = 0
    flows_of: list[list[int]] = [[] for _ in range(n_jobs)]
    for f, j in enumerate(model.job):
        flows_of[j].append(f)

    S, LS, src, dst, spine, on, at = r.S, r.LS, r.src, r.dst, r.spine, r.on, st.at
    job_of, alone, table = model.job, model.alone, model.link_table
    lim = 1.0 + EPS

    def hot(f: int) -> bool:
        """Whether a link of f holds its job above 1 and f's own value there is above 1."""
        j, s = job_of[f], spine[f]
        for y in (src[f] * S + s, LS + dst[f] * S + s):  # r.links(f, s)
            if at[y].get(j, 0.0) > lim:
                o = on[y]
                if (alone[f] if len(o) == 1 else table(o)[1][f]) > lim:  # value_on
                    return True
        return False

    def undo(log, n: int) -> None:
        while len(log) > n:
            h, old = log.pop()
            touched = set(r.links(h, r.spine[h])) | set(r.links(h, old))
            r.remove_route(h)
            r.add_route(h, old)
            st.refresh(touched)

    usable = r.usable = list(r.usable)  # masked per search below, restored after
    r.set_capacity(1, hold=True)  # shared links may change flows, never gain one

    def fine(jobs) -> bool:
        """No job above the worst, no job slowed that was not."""
        return all(st.slowdown(k) <= (w_max if slow[k] > 1.0 + EPS else 1.0) * (1 + EPS)
                   for k in jobs)

    def move_partner(g: int, t: int, log: list) -> bool:
        """Move away, directly, each flow sharing a link with g whose job is slowed already, to
        a spine where it stays within alpha and slows no other job (it may share there with a
        flow of its own job: concentration). True when g ends alone on its links."""
        nonlocal spent
        for x in r.links(g, t):
            for h in sorted(r.on[x] - {g}):
                if slow[model.job[h]] <= 1.0 + EPS:
                    continue
                hl = r.links(h, t)
                h0, h1 = hl[0] - t, hl[1] - t
                for u in sorted(bits(usable[h] & ~(1 << t)),
                                key=lambda u: (max(load[h0 + u], load[h1 + u]), u)):
                    if max(load[h0 + u], load[h1 + u]) + 1 > alpha:
                        break
                    if spent >= budget:
                        return False
                    spent += 1
                    touched = set(hl) | {y - t + u for y in hl}
                    jobs = {k for y in touched for k in st.at[y]}
                    r.remove_route(h)
                    r.add_route(h, u)
                    st.refresh(touched)
                    jobs.update(k for y in touched for k in st.at[y])
                    if fine(jobs):
                        log.append((h, t))
                        break
                    r.remove_route(h)
                    r.add_route(h, t)
                    st.refresh(touched)
                if all(len(r.on[y]) == 1 or model.value_on(g, r.on[y]) <= 1.0 + EPS
                       for y in r.links(g, t)):
                    return True
        return False

    def by_chain(g: int, t: int, log: list) -> bool:
        """g off spine t by a chain under the held capacities (layer 2 kept)."""
        r.remove_route(g)
        usable[g] &= ~(1 << t)
        moved: list = []
        ok = bool(usable[g]) and r.insert(g, CHAIN_LINKS, moved)
        usable[g] |= 1 << t
        if not ok:
            r.add_route(g, t)
            return False
        log.append((g, t))
        log.extend(moved)
        return True

    def free(j: int) -> int:
        """Tentatively move every slowed flow of job j off its shared link by a chain (the
        Kempe move of edge colouring: the flow that takes its place comes from a chain through
        links holding one flow), kept when the sum of the affected jobs' slowdowns drops,
        else undone. Flows moved (0 if undone)."""
        nonlocal spent
        log: list = []
        affected = {j}
        for g in [f for f in flows_of[j] if hot(f)]:
            if not hot(g):
                continue
            if spent >= budget:
                break
            spent += 1
            t = r.spine[g]
            mark = len(log)
            for attempt in attempts:
                if not attempt(g, t, log):
                    undo(log, mark)
                    continue
                touched = set()
                for h, old in log[mark:]:
                    touched.update(r.links(h, old))
                    touched.update(r.links(h, r.spine[h]))
                for y in touched:
                    affected.update(st.at[y])
                st.refresh(touched)
                for y in touched:
                    affected.update(st.at[y])
                if (max(model.value_on(g, r.on[y]) for y in r.links(g, r.spine[g])) <= 1.0 + EPS
                        and fine(affected)):
                    break
                undo(log, mark)
            else:
                break  # g stays slowed: job j cannot be freed this way
        after = sum(st.slowdown(k) for k in affected)
        if log and after < sum(slow[k] for k in affected) - EPS:
            for k in affected:
                slow[k] = st.slowdown(k)
            return len(log)
        undo(log, 0)
        return 0

    attempts = (by_chain, move_partner)
    changed = True
    while changed and spent < budget:
        changed = False
        order = sorted((j for j in range(n_jobs) if slow[j] > 1.0 + EPS),
                       key=lambda j: (sum(1 for f in flows_of[j] if hot(f)), j))
        for j in order:
            if spent >= budget:
                break
            if slow[j] > 1.0 + EPS:
                n = free(j)
                moves += n
                changed = changed or n > 0
    return (moves, "budget" if spent >= budget else "local_optimum",
            [st.slowdown(j) for j in range(n_jobs)])
