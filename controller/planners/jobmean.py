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

Moves (each evaluated exactly on the prediction of ``objective.JobModel``): a slowed flow of a
slowed job to another usable spine, or swapped with a flow sharing a leaf side with it on that
spine. Accepted when the sum of job slowdowns drops, no job exceeds the current worst, no link
exceeds ``alpha`` flows; ties go to fewer links at ``alpha``. Jobs are visited fewest slowed
flows first (cheapest to free), in rounds, until a round changes nothing or ``budget`` move
evaluations are spent: deterministic.

    >>> from controller.model.fabric import Fabric
    >>> from controller.model.jobs import Job
    >>> from controller.model.problem import Problem
    >>> from controller.planners.objective import JobModel, job_slowdowns
    >>> from controller.planners.repair import Routing
    >>> from controller.model.jobs import Flow
    >>> f = Fabric.generate(2, 2, 3)     # leaf l0 sends 3 flows over 2 spines: one link holds 2
    >>> a = Job("A", explicit=[Flow("A", "h0_0", "h1_0", 1e9), Flow("A", "h0_1", "h1_1", 1e9)])
    >>> b = Job("B", explicit=[Flow("B", "h0_2", "h1_2", 1e9)])
    >>> p = Problem.build(f, [a, b])
    >>> r = Routing(p, [0, 1, 0])        # A's first flow shares spine 0 with B: both at 2x
    >>> moves, how = lower_mean(r, JobModel(p), 2, 100)
    >>> {j: round(v, 2) for j, v in job_slowdowns(p, r.spine).items()}
    {'A': 2.0, 'B': 1.0}
"""
from __future__ import annotations

from collections import Counter

from controller.planners.repair import Routing, bits

EPS = 1e-9


class _JobState:
    """Per link and job the job's worst flow value there; per job a counter of those values
    (its slowdown is the largest, at least 1)."""

    def __init__(self, r: Routing, model):
        self.r, self.model = r, model
        self.at: list[dict] = [{} for _ in r.on]
        self.values: list[Counter] = [Counter() for _ in model.jobs]
        for x, on in enumerate(r.on):
            if on:
                self._set(x, self.link_values(on))

    def link_values(self, on) -> dict:
        out: dict[int, float] = {}
        for f in on:
            j = self.model.job[f]
            v = self.model.value(f, on)
            if v > out.get(j, 0.0):
                out[j] = v
        return out

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
        for x in links:
            self._set(x, self.link_values(self.r.on[x]))


def lower_mean(r: Routing, model, alpha: int, budget: int) -> tuple[int, str]:
    """Apply mean-lowering moves to ``r`` in place (module docstring); (flows moved, how the
    search ended: "local_optimum" or "budget"). Cost: per evaluation O(flows on the <= 8
    links it touches, squared, + their jobs' distinct values)."""
    st = _JobState(r, model)
    S = r.S
    n_jobs = len(model.jobs)
    slow = [st.slowdown(j) for j in range(n_jobs)]
    w_max = max(slow, default=1.0)
    spent = moves = 0
    flows_of: list[list[int]] = [[] for _ in range(n_jobs)]
    for f, j in enumerate(model.job):
        flows_of[j].append(f)

    def hot(f: int) -> bool:
        j = model.job[f]
        return any(st.at[y].get(j, 0.0) > 1.0 + EPS and model.value(f, r.on[y]) > 1.0 + EPS
                   for y in r.links(f, r.spine[f]))

    def evaluate(changes):
        moved = {g for g, _ in changes}
        gains: dict[int, list] = {}
        for g, u in changes:
            for y in r.links(g, u):
                gains.setdefault(y, []).append(g)
        touched = set(gains)
        for g, _ in changes:
            touched.update(r.links(g, r.spine[g]))
        new_at = {}
        for y in touched:
            on = [f for f in r.on[y] if f not in moved] + gains.get(y, [])
            if len(on) > alpha:
                return None
            new_at[y] = st.link_values(on)
        jobs = set()
        for y in touched:
            jobs.update(st.at[y])
            jobs.update(new_at[y])
        delta = 0.0
        for j in jobs:
            c = Counter(st.values[j])
            for y in touched:
                v = st.at[y].get(j)
                if v is not None:
                    c[v] -= 1
                    if not c[v]:
                        del c[v]
                v = new_at[y].get(j)
                if v is not None:
                    c[v] += 1
            s = max(max(c) if c else 1.0, 1.0)
            if s > w_max * (1 + EPS):
                return None
            delta += s - slow[j]
        if delta >= -EPS:
            return None
        at_alpha = sum(len(r.on[y]) == alpha for y in touched)
        new_alpha = sum(sum(1 for f in r.on[y] if f not in moved) + len(gains.get(y, ()))
                        == alpha for y in touched)
        return (round(delta, 12), new_alpha - at_alpha), jobs

    changed = True
    while changed and spent < budget:
        changed = False
        order = sorted((j for j in range(n_jobs) if slow[j] > 1.0 + EPS),
                       key=lambda j: (sum(1 for f in flows_of[j] if hot(f)), j))
        for j in order:
            if spent >= budget or slow[j] <= 1.0 + EPS:
                continue
            for g in [f for f in flows_of[j] if hot(f)]:
                if spent >= budget:
                    break
                t = r.spine[g]
                best, best_key = None, None
                rows = [y // S for y in r.links(g, t)]
                for u in bits(r.usable[g] & ~(1 << t)):
                    cands = [((g, u),)]
                    partners = set()
                    for row in rows:
                        partners.update(r.on[row * S + u])
                    cands += [((g, u), (h, t)) for h in sorted(partners)
                              if r.usable[h] >> t & 1]
                    for ch in cands:
                        if spent >= budget:
                            break
                        spent += 1
                        res = evaluate(ch)
                        if res is not None and (best_key is None or res[0] < best_key):
                            best_key, best = res[0], (ch, res[1])
                if best is None:
                    continue
                ch, jobs = best
                touched = set()
                for h, _ in ch:
                    touched.update(r.links(h, r.spine[h]))
                for h, _ in ch:
                    r._remove(h)
                for h, u in ch:
                    r._add(h, u)
                    touched.update(r.links(h, u))
                st.refresh(touched)
                for k in jobs:
                    slow[k] = st.slowdown(k)
                moves += len(ch)
                changed = True
    return moves, ("budget" if spent >= budget else "local_optimum")
