"""The one prediction of a job's iteration: communication time and slowdown on a routing.

Shared by the ``jobs`` objective (``planners.objective``), the planners' reports, the
controller's job view (``service.predictions``) and the benchmarks, and checked against the
fluid model (``model.fluid``, the reference) on every workload pattern (rings, several rings,
all-to-all, pipelines, hybrid 3D-parallel, byte mixes, compute gaps): tests/test_iteration.py
holds it within ``TOLERANCE`` of the fluid model's All-Reduce time on every job.

Model: every job starts its iteration at once (as ``fluid.predict_allreduce``). Each flow runs
on its full path, host links included (a NIC shared by several flows of one host is a link
like any other), cut into its route's parts. The unit of progress is an *entity*: a ring of a
collective (its flows move in lock step, 2(n-1) chunks of S/n each, since a ring step waits for
its slowest flow) or one explicit flow (it moves its bytes once). An entity has one rate x; a
part with share w of one of its flows puts w * x on every link of its path. Rates are max-min
fair over entities (weighted progressive filling) and recomputed whenever an entity ends, so
there is one event per distinct end time instead of one per flow and step: what the fluid
model does, with a ring's steps averaged (a ring's fast flows use their spare time in the
fluid model; here they send at the ring's pace).

A job's time is the end of its last entity; its slowdown
(compute_s + time) / (compute_s + ideal All-Reduce), ideal at line rate without sharing.

Cost: O(events x rounds x nnz), events <= entities, rounds <= distinct rates per event. An
unsplit routing (a spine per flow) is laid out from what does not depend on it, built once
per problem and kept for the last few (the jobs objective scores 3-5 routings of one
problem): the same entities, links and weights in the same order, so the same figures.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from controller.model.jobs import Job
from controller.model.links import LinkIndex
from controller.model.problem import Problem
from controller.model.rates import weighted_max_min

if TYPE_CHECKING:  # scipy where it is used: the controller's start loads no scipy (issue 74)
    from scipy.sparse import csr_matrix

TOLERANCE = 0.05  # relative, against the fluid model's time of every job (tested)


def _parts_per_flow(problem: Problem, routing) -> list:
    """Per flow of ``problem.flows``: its (spine, share) parts, None for intra-leaf flows and
    flows with no route (unroutable). ``routing``: per inter-leaf flow a spine or parts."""
    out: list = [None] * len(problem.flows)
    for k, pos in enumerate(problem.inter):
        r = routing[k]
        out[pos] = ((int(r), 1.0),) if isinstance(r, (int, np.integer)) else tuple(r)
    return out


def _entities(jobs: list[Job], flow_paths: list):
    """(job index, work in bytes per flow unit, {link: weight}) per entity; ``flow_paths``:
    per flow of the jobs (``Job.flows()`` order) its (links, share) parts, None: no route."""
    ents = []
    pos = 0
    for j, job in enumerate(jobs):
        flows = job.flows()
        if job.is_collective:
            groups, offset = [], pos
            for ranks in job.rings:
                n = len(ranks)
                groups.append((range(offset, offset + n), 2 * (n - 1) * job.ring_bytes / n))
                offset += n
        else:
            groups = [([pos + k], f.bytes) for k, f in enumerate(flows)]
        for members, work in groups:
            weights: dict[int, float] = {}
            for k in members:
                for path, share in (flow_paths[k] or ()):
                    for y in path:
                        weights[y] = weights.get(y, 0.0) + share
            if weights and work > 0:
                ents.append((j, work, weights))
        pos += len(flows)
    return ents


def predict_times(problem: Problem, routing,
                  on_event: Callable[[], None] | None = None) -> dict[str, float]:
    """Communication time per job (seconds) for one iteration, every job starting at once.
    ``routing``: per inter-leaf flow (``problem.inter`` order) a spine or its parts;
    ``on_event()``, if given, is called once per event (a cooperative event loop's yield)."""
    capacity_bps = problem.fabric.link_bps()
    spines = _unsplit(routing, len(problem.inter))
    if spines is not None:  # the same entities and matrix, built from the kept layout
        layout = _layout(problem)
        built = layout.matrix(spines) if layout.valid else None
        if built is not None:
            return _run(problem.jobs, *built, np.full(layout.count, capacity_bps), on_event)
    parts = _parts_per_flow(problem, routing)
    links = LinkIndex(problem.fabric)
    unroutable = set(problem.unroutable)
    flow_paths = [None if k in unroutable else
                  [(links.path(f.src, f.dst, s), share) for s, share in (p or ((None, 1.0),))]
                  for k, (f, p) in enumerate(zip(problem.flows, parts))]
    return times_on_paths(problem.jobs, flow_paths, np.full(links.count, capacity_bps), on_event)


def _unsplit(routing, n: int) -> np.ndarray | None:
    """The spine per inter-leaf flow when ``routing`` gives each one spine (an int, or one
    part of share 1.0: the same paths and weights), else None."""
    if len(routing) != n:
        return None
    try:
        if all(type(r) is int for r in routing):
            return np.array(routing, dtype=np.int64).reshape(n)
        out = np.empty(n, dtype=np.int64)
        for k, r in enumerate(routing):
            if isinstance(r, (int, np.integer)):
                out[k] = r
            elif (isinstance(r, (tuple, list)) and len(r) == 1 and len(r[0]) == 2
                  and isinstance(r[0][0], (int, np.integer)) and r[0][1] == 1.0):
                out[k] = r[0][0]
            else:
                return None
    except (OverflowError, TypeError):  # no spine id: the general path answers
        return None
    return out


class _Layout:
    """What ``predict_times`` builds per call that does not depend on an unsplit routing:
    the entities (``_entities``' order, work, job) and, per entity, the links its members'
    paths cross in order: host links fixed, spine links a base plus the flow's spine."""

    def __init__(self, problem: Problem):
        links = LinkIndex(problem.fabric)
        self.count = links.count
        S, host_id, flows = links.n_spines, links.host_id, problem.flows
        # entities as _entities makes them: a ring's members, or one explicit flow
        first, size, work, job_of = [], [], [], []
        pos = 0
        for j, job in enumerate(problem.jobs):
            if job.is_collective:
                for ranks in job.rings:
                    n = len(ranks)
                    first.append(pos)
                    size.append(n)
                    work.append(2 * (n - 1) * job.ring_bytes / n)
                    job_of.append(j)
                    pos += n
            else:
                for f in job.explicit:
                    first.append(pos)
                    size.append(1)
                    work.append(f.bytes)
                    job_of.append(j)
                    pos += 1
        self.valid = pos == len(flows)  # the jobs' flows are the problem's (not changed since)
        if not self.valid or not first:
            self.work, self.job_of = [], []
            return
        routable = np.ones(len(flows), dtype=bool)
        routable[np.asarray(problem.unroutable, dtype=np.int64)] = False
        size_arr = np.asarray(size, dtype=np.int64)
        # kept when a member has a path and there is work (work > 0, as _entities asks)
        keep = (np.add.reduceat(routable.astype(np.int64), np.asarray(first, dtype=np.int64))
                > 0) & np.array([w > 0 for w in work], dtype=bool)
        renumber = np.cumsum(keep) - 1
        flow_ent = np.repeat(np.arange(len(size)), size_arr)
        inc = np.flatnonzero(routable & keep[flow_ent])
        inter = np.full(len(flows), -1, dtype=np.int64)
        inter[np.asarray(problem.inter, dtype=np.int64)] = np.arange(len(problem.inter))
        hs = np.array([host_id[flows[k].src] for k in inc], dtype=np.int64)
        hd = np.array([host_id[flows[k].dst] for k in inc], dtype=np.int64)
        i = inter[inc]
        m = i >= 0
        c = np.where(m, 4, 2)  # per flow its path: host up, host down[, leaf up, spine down]
        at = np.cumsum(c) - c
        self.ent = np.repeat(renumber[flow_ent[inc]], c)
        base = np.empty(int(c.sum()), dtype=np.int64)
        base[at] = hs
        base[at + 1] = links.n_hosts + hd
        leaf_of = np.asarray(links.leaf_of_host, dtype=np.int64)
        base[at[m] + 2] = links.up0 + leaf_of[hs[m]] * S
        base[at[m] + 3] = links.down0 + leaf_of[hd[m]] * S
        self.base = base
        self.spine_slot = np.concatenate([at[m] + 2, at[m] + 3])
        self.spine_flow = np.concatenate([i[m], i[m]])
        self.work = [w for w, k in zip(work, keep) if k]
        self.job_of = [j for j, k in zip(job_of, keep) if k]

    def matrix(self, spines: np.ndarray) -> tuple | None:
        """(entity x link weights, work per entity, job per entity) of ``spines``: the values
        ``times_on_paths`` builds from the same paths, in the same order; None when a spine
        names no link (the general path then fails as before)."""
        n_ents = len(self.work)
        if not n_ents:
            return None, np.zeros(0), []
        link = self.base.copy()
        link[self.spine_slot] += spines[self.spine_flow]
        if len(link) and (link.min() < 0 or link.max() >= self.count):
            return None
        keys = self.ent * self.count + link
        uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        weights = np.bincount(inverse.ravel(), minlength=len(uniq)).astype(float)
        order = np.argsort(first, kind="stable")  # each entity's links in first-seen order
        keys = uniq[order]
        from scipy.sparse import csr_matrix
        a = csr_matrix((weights[order], (keys // self.count, keys % self.count)),
                       shape=(n_ents, self.count))
        return a, np.array(self.work, dtype=float), self.job_of


_LAYOUTS: list = []  # (weak reference to the problem, its inputs' identity, layout), newest last


def _layout(problem: Problem) -> _Layout:
    """``problem``'s layout, kept for the few problems used last (a planner predicts the same
    problem several times); rebuilt when its jobs, flows or fabric were replaced."""
    key = (id(problem.fabric), id(problem.flows), len(problem.flows), id(problem.unroutable),
           len(problem.unroutable), id(problem.inter), len(problem.inter),
           tuple((id(j), id(j.rings), id(j.explicit), j.ring_bytes,
                  tuple(len(r) for r in j.rings), len(j.explicit)) for j in problem.jobs))
    for ref, k, layout in _LAYOUTS:
        if ref() is problem and k == key:
            return layout
    layout = _Layout(problem)
    try:
        ref = weakref.ref(problem)
    except TypeError:  # not weakly referable: not kept
        return layout
    _LAYOUTS[:] = [e for e in _LAYOUTS if e[0]() is not None and e[0]() is not problem][-7:]
    _LAYOUTS.append((ref, key, layout))
    return layout


def predict_clos_times(problem, routing, on_event: Callable[[], None] | None = None
                       ) -> dict[str, float]:
    """``predict_times`` on a Clos fabric (``model.clospaths``): ``routing`` a ClosRouting;
    links have their own capacities (tiers of different speeds, bundles' members)."""
    from controller.model.clospaths import flow_links
    L = problem.links
    index = {pos: i for i, pos in enumerate(problem.inter)}
    flow_paths: list = []
    for k, f in enumerate(problem.flows):
        if k in index:
            flow_paths.append([(flow_links(problem, routing, index[k]), 1.0)])
        elif k in problem.intra:
            q = problem.intra[k]
            flow_paths.append([([int(L.host_up[q, L.host_id[f.src]]),
                                 int(L.host_down[q, L.host_id[f.dst]])], 1.0)])
        else:
            flow_paths.append(None)
    return times_on_paths(problem.jobs, flow_paths, L.capacity_bps(), on_event)


def predict_clos_split_times(problem, routing, on_event: Callable[[], None] | None = None
                             ) -> dict[str, float]:
    """``predict_clos_times`` on a routing whose flows may be split (``parts``, per
    inter-leaf flow its (plane, middle, member links, share): ``planners.clos_split``);
    a routing without parts goes to ``predict_clos_times``."""
    parts = getattr(routing, "parts", None)
    if parts is None:
        return predict_clos_times(problem, routing, on_event)
    L = problem.links
    index = {pos: i for i, pos in enumerate(problem.inter)}
    flow_paths: list = []
    for k, f in enumerate(problem.flows):
        i, q = index.get(k), problem.intra.get(k)
        if i is not None:
            ends = [problem.host_links(i, pq) for pq, _, _, _ in parts[i]]
            flow_paths.append([([up, *path, down], share) for (up, down), (_, _, path, share)
                               in zip(ends, parts[i])])
        elif q is not None:
            flow_paths.append([([int(L.host_up[q, L.host_id[f.src]]),
                                 int(L.host_down[q, L.host_id[f.dst]])], 1.0)])
        else:
            flow_paths.append(None)
    return times_on_paths(problem.jobs, flow_paths, L.capacity_bps(), on_event)


def times_on_paths(jobs: list[Job], flow_paths: list, capacity: np.ndarray,
                   on_event: Callable[[], None] | None = None) -> dict[str, float]:
    """The model itself: ``flow_paths`` per flow its (link ids, share) parts (None: no
    route), ``capacity`` bytes per second per link id."""
    ents = _entities(jobs, flow_paths)
    if not ents:
        return {job.id: 0.0 for job in jobs}
    rows = np.repeat(np.arange(len(ents)), [len(w) for _, _, w in ents])
    cols = np.fromiter((y for _, _, w in ents for y in w), dtype=np.int64, count=len(rows))
    vals = np.fromiter((v for _, _, w in ents for v in w.values()), dtype=float, count=len(rows))
    from scipy.sparse import csr_matrix
    a = csr_matrix((vals, (rows, cols)), shape=(len(ents), len(capacity)))
    remaining = np.array([w for _, w, _ in ents], dtype=float)
    return _run(jobs, a, remaining, [j for j, _, _ in ents], capacity, on_event)


def _run(jobs: list[Job], a: csr_matrix | None, remaining: np.ndarray, job_of: list,
         capacity: np.ndarray, on_event: Callable[[], None] | None = None) -> dict[str, float]:
    """The events: rates max-min fair over the entities (rows of ``a``) still running, until
    each has sent its ``remaining`` work; per job the end of its last entity."""
    times = {job.id: 0.0 for job in jobs}
    if not job_of:
        return times
    at = a.T.tocsr()
    alive = np.ones(len(job_of), dtype=bool)
    now = 0.0
    for _ in range(len(job_of)):
        if not alive.any():
            break
        if on_event is not None:
            on_event()
        rates = weighted_max_min(a, at, capacity, alive)
        with np.errstate(divide="ignore", invalid="ignore"):
            ttf = np.where(alive & (rates > 0), remaining / np.where(rates > 0, rates, 1.0), np.inf)
        dt = float(ttf.min())
        if not np.isfinite(dt):
            raise ValueError("an entity cannot progress")
        done = alive & (ttf <= dt * (1 + 1e-9) + 1e-15)
        now += dt
        remaining = np.where(alive, remaining - rates * dt, remaining)
        for e in np.flatnonzero(done):
            jid = jobs[job_of[e]].id
            times[jid] = max(times[jid], now)
        alive &= ~done
    return times


def slowdown(job: Job, time_s: float, link_bps: float) -> float:
    """(compute_s + time) / (compute_s + ideal), 1.0 for a job with neither."""
    base = job.compute_s + job.ideal_allreduce_s(link_bps)
    return (job.compute_s + time_s) / base if base > 0 else 1.0


def predict_slowdowns(problem: Problem, routing) -> dict[str, float]:
    """Predicted slowdown per job (1.0 = its ideal iteration time) of ``routing``."""
    bps = problem.fabric.link_bps()
    times = predict_times(problem, routing)
    return {job.id: slowdown(job, times[job.id], bps) for job in problem.jobs}
