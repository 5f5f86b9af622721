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

Cost: O(events x rounds x nnz), events <= entities, rounds <= distinct rates per event.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.sparse import csr_matrix

from controller.model.jobs import Job
from controller.model.links import LinkIndex
from controller.model.problem import Problem
from controller.model.rates import weighted_max_min

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
    parts = _parts_per_flow(problem, routing)
    links = LinkIndex(problem.fabric)
    unroutable = set(problem.unroutable)
    flow_paths = [None if k in unroutable else
                  [(links.path(f.src, f.dst, s), share) for s, share in (p or ((None, 1.0),))]
                  for k, (f, p) in enumerate(zip(problem.flows, parts))]
    return times_on_paths(problem.jobs, flow_paths,
                          np.full(links.count, problem.fabric.link_bps()), on_event)


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
    times = {job.id: 0.0 for job in jobs}
    if not ents:
        return times
    rows = np.repeat(np.arange(len(ents)), [len(w) for _, _, w in ents])
    cols = np.fromiter((y for _, _, w in ents for y in w), dtype=np.int64, count=len(rows))
    vals = np.fromiter((v for _, _, w in ents for v in w.values()), dtype=float, count=len(rows))
    a = csr_matrix((vals, (rows, cols)), shape=(len(ents), len(capacity)))
    at = a.T.tocsr()
    remaining = np.array([w for _, w, _ in ents], dtype=float)
    alive = np.ones(len(ents), dtype=bool)
    job_of = [j for j, _, _ in ents]
    now = 0.0
    for _ in range(len(ents)):
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
