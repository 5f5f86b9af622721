"""Event-driven fluid model of concurrent training jobs on a routed fabric: a leaf-spine, or
any Clos fabric (``model.clos``) whose plan gives every flow its links.

Each job runs iterations: a communication phase (every ring runs the 2(n-1) synchronous steps
of ring All-Reduce; a step ends when its slowest flow ends) followed by the job's compute gap.
Rates are max-min fair on the planned paths (progressive filling, host links included) and are
recomputed at every flow start and finish. Routes come from ``planner(active_jobs) -> Plan``,
called with every started and unfinished job in view at each iteration start and at each
iteration end while another job is still running, as the paper's simulator does; a flow moved
in flight continues its remaining bytes on the new path. Identical planner inputs (the same set
of jobs) reuse the previous plan; each job takes the routes the plan gives its id. The
controller uses it to predict All-Reduce times.

A split flow's parts are independent connections by default (``split``'s sub-connections,
each with its own max-min rate and bytes); with ``coupled`` a split flow is one transfer at one
rate, a part of share x carrying x of it (per-packet spraying: ``planners.spray``), its bytes
leaving every part in proportion.

Every event either starts a job iteration or ends at least one flow part (a part that ended
leaves the rate computation at once), so time always advances; runs are bounded by
``max_events`` and raise ``PredictionError`` rather than loop.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from controller.errors import InputError
from controller.model.clos import Clos, as_clos
from controller.model.clospaths import ClosLinks
from controller.model.jobs import Job
from controller.model.rates import max_min_rates, weighted_max_min
from controller.model.stats import summarize


class Plan(Protocol):
    """What the model needs of a plan (``planners.plan.Plan`` is one): the routed problem and
    each flow's parts (kept as a protocol so the model does not import the planners): a
    part is (its link ids, share) on the Clos of ``problem.fabric``."""
    problem: object
    runtime_ms: float

    def parts_by_flow(self) -> list: ...


TIME_TOL = 1e-12  # events this close (relative) count as simultaneous: float rounding only


class PredictionError(InputError):
    """The fluid model could not finish within its event bound, or no flow could progress.

    Raised instead of looping, so a caller reports "no prediction" rather than hanging.
    """


@dataclass
class _Part:
    path: list[int]
    remaining: float
    rate: float = 0.0
    weights: list[float] | None = None  # per link of ``path`` (coupled parts; None: 1 each)


@dataclass
class _Transfer:
    job: int
    flow: int  # index in the job's flow list
    group: int
    size: float
    start: float
    route: tuple = ()  # the (spine, share) parts it was cut into
    parts: list[_Part] = field(default_factory=list)  # unfinished parts only


@dataclass
class _JobState:
    job: Job
    flows: list
    groups: list[tuple[list[int], int]]  # (flow indices, steps)
    iteration: int = 0
    iter_start: float = 0.0
    step: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    groups_left: int = 0
    allreduce: list[float] = field(default_factory=list)
    routes: list | None = None  # per flow: parts tuple or None (intra-leaf)


def _groups(job: Job) -> list[tuple[list[int], int]]:
    if not job.is_collective:
        return [(list(range(len(job.explicit))), 1)]
    out, offset = [], 0
    for ranks in job.rings:
        n = len(ranks)
        out.append((list(range(offset, offset + n)), 2 * (n - 1)))
        offset += n
    return out


def route_options(fabric: Clos) -> int:
    """The most route options a flow has: per plane its middles (``model.clospaths``: the
    aggregation slots of a pod, or the cores), a bound on the parts of a split flow.

    >>> route_options(Clos.fat_tree(4, planes=2)), route_options(Clos.leaf_spine(3, 4, 1))
    (8, 3)
    """
    return sum(max(max(map(len, p.aggs)), sum(map(len, p.cores))) for p in fabric.planes)


def default_max_events(fabric: Clos, jobs: list[Job], iterations: int = 1) -> int:
    """An upper bound on the events of a correct run, so a run past it is a bug, not work.

    Every event pops a job event or finishes at least one part. Job events: one per job and
    iteration. Parts: at most one per route option of a flow (``route_options``: a split
    flow has a part per option it uses) for every transfer (flows x steps x iterations) and for
    every in-flight flow moved at a re-plan (two per job event).
    """
    spines = max(1, route_options(as_clos(fabric)))
    flows = sum(len(j.flows()) for j in jobs)
    transfers = iterations * sum(len(g) * steps for j in jobs for g, steps in _groups(j))
    job_events = len(jobs) * iterations
    return job_events + spines * (transfers + 2 * job_events * flows) + 16


def plan_max_events(plan: Plan) -> int:
    """The exact worst case of events for ``predict_allreduce`` on ``plan``: one per job start
    and one per route part of every step (routes never change, so no flow moves).

    >>> from controller.planners.plan import make_plan
    >>> f = Clos.leaf_spine(2, 4, 1)
    >>> ring = Job("r", rings=[["h0_0", "h1_0", "h2_0", "h3_0"]], ring_bytes=4e6)
    >>> plan_max_events(make_plan(f, [ring], "greedy"))  # 1 start + 6 steps x 4 flows
    25
    """
    parts = plan.parts_by_flow()
    total, offset = len(plan.problem.jobs), 0
    for job in plan.problem.jobs:
        for members, steps in _groups(job):
            total += steps * sum(len(parts[offset + k] or ((None, 1.0),)) for k in members)
        offset += len(job.flows())
    return total


class FluidSimulator:
    """Simulate ``jobs`` on ``fabric`` with routes from ``planner(active_jobs) -> Plan``.

    The plan may cover more jobs than the active ones: each job takes the routes the plan
    gives its id. ``max_events`` bounds the work (default ``default_max_events``); past it,
    ``run`` raises ``PredictionError``. ``on_event()``, if given, is called once per event
    (a caller on a cooperative event loop passes its yield). ``coupled``: a split flow moves
    as one transfer (module docstring).
    """

    def __init__(self, fabric: Clos, jobs: list[Job],
                 planner: Callable[[list[Job]], Plan], iterations: int = 1,
                 max_events: int | None = None, on_event: Callable[[], None] | None = None,
                 coupled: bool = False):
        if iterations < 1:
            raise InputError("iterations must be at least 1")
        ids = [j.id for j in jobs]
        if len(set(ids)) != len(ids):
            raise InputError("jobs: duplicate job id in the simulation")
        self.fabric = fabric
        self._index(fabric)
        self.planner = planner
        self.iterations = iterations
        self.max_events = (default_max_events(fabric, jobs, iterations)
                           if max_events is None else max_events)
        self.on_event = on_event
        self.coupled = coupled
        self.states = [_JobState(j, j.flows(), _groups(j)) for j in jobs]
        self.active: list[int] = []  # started, unfinished jobs, submission order
        self.transfers: list[_Transfer] = []
        self.plan_cache: dict[tuple, Plan] = {}
        self.planner_ms: list[float] = []
        self.plans_made = 0
        self.fct: list[float] = []
        self.done: list[tuple[int, int, float, float]] = []  # (job, flow, start, end) per transfer
        self.throughput: list[float] = []
        self.now = 0.0
        self.events = 0

    # ---- routing ----------------------------------------------------------------------------
    def _index(self, fabric) -> None:
        """The links route parts name: link ids of the plan's fabric (``ClosLinks``), whatever
        planner made the plan (``planners.plan.Plan``); a fabric of the two-tier planners'
        view is indexed as its Clos (``as_clos``), the links its plans give."""
        self.indexed = as_clos(fabric)
        self.links = ClosLinks(self.indexed)
        self.capacity = self.links.capacity_bps()

    def _replan(self) -> None:
        key = tuple(self.active)
        plan = self.plan_cache.get(key)
        if plan is None:
            plan = self.planner([self.states[j].job for j in self.active])
            if plan.problem.fabric is not self.indexed:
                self._index(plan.problem.fabric)
            self.plan_cache[key] = plan
            self.planner_ms.append(plan.runtime_ms)
            self.plans_made += 1
        # routes by job id: the plan's job order need not be the active list's
        parts = plan.parts_by_flow()
        by_id, offset = {}, 0
        for job in plan.problem.jobs:
            n = len(job.flows())
            by_id[job.id] = parts[offset:offset + n]
            offset += n
        for j in self.active:
            st = self.states[j]
            routes = by_id.get(st.job.id)
            if routes is None or len(routes) != len(st.flows):
                raise PredictionError(f"the plan has no routes for the flows of job {st.job.id}")
            st.routes = routes
        for tr in self.transfers:  # move in-flight flows whose route changed
            want = self._route(tr.job, tr.flow)
            if want != tr.route:
                left = sum(p.remaining for p in tr.parts)
                tr.route, tr.parts = want, self._parts(tr.job, tr.flow, left)

    def _route(self, j: int, k: int) -> tuple:
        st = self.states[j]
        r = st.routes[k]
        if r is not None:
            return tuple(r)
        f = st.flows[k]
        if self.fabric.hosts[f.src] != self.fabric.hosts[f.dst]:
            raise PredictionError(f"flow {f.src} -> {f.dst} of job {st.job.id} crosses leaves "
                                  "but the plan gives it no spine")
        L = self.links  # within its leaf: its two host links
        return (((int(L.host_up[0, L.host_id[f.src]]), int(L.host_down[0, L.host_id[f.dst]])),
                 1.0),)

    def _parts(self, j: int, k: int, size: float) -> list[_Part]:
        """The flow's bytes cut by its route's shares; parts with nothing to carry are left out
        (a part with no bytes would finish at every instant and stall time)."""
        f = self.states[j].flows[k]
        route = self._route(j, k)
        if self.coupled and len(route) > 1 and size > 0:  # one part: the links, weighted
            w: dict[int, float] = {}
            for links, share in route:
                for y in links:
                    w[y] = w.get(y, 0.0) + share
            return [_Part(list(w), size, weights=list(w.values()))]
        parts = [_Part(list(s), size * share) for s, share in route
                 if size * share > 0]
        if size > 0 and not parts:
            raise PredictionError(f"flow {f.src} -> {f.dst} of job {f.job}: no route part "
                                  "has a positive share")
        return parts

    # ---- job progress -----------------------------------------------------------------------
    def _start_iteration(self, j: int) -> None:
        st = self.states[j]
        if j not in self.active:
            self.active.append(j)
            self.active.sort()
        self._replan()
        st.iter_start = self.now
        st.step = [0] * len(st.groups)
        st.pending = [0] * len(st.groups)
        st.groups_left = len(st.groups)
        for g in range(len(st.groups)):
            self._start_step(j, g)

    def _start_step(self, j: int, g: int) -> None:
        st = self.states[j]
        flows, _ = st.groups[g]
        st.pending[g] = len(flows)
        for k in flows:
            size = st.flows[k].bytes
            self.transfers.append(_Transfer(j, k, g, size, self.now, self._route(j, k),
                                            self._parts(j, k, size)))

    def _finish_transfer(self, tr: _Transfer, events: list) -> None:
        duration = self.now - tr.start
        self.fct.append(duration)
        self.done.append((tr.job, tr.flow, tr.start, self.now))
        self.throughput.append(tr.size / duration if duration > 0 else float("inf"))
        st = self.states[tr.job]
        st.pending[tr.group] -= 1
        if st.pending[tr.group]:
            return
        st.step[tr.group] += 1
        if st.step[tr.group] < st.groups[tr.group][1]:
            self._start_step(tr.job, tr.group)
            return
        st.groups_left -= 1
        if st.groups_left:
            return
        st.allreduce.append(self.now - st.iter_start)
        st.iteration += 1
        if st.iteration < self.iterations:
            heapq.heappush(events, (self.now + st.job.compute_s, tr.job))
        else:
            self.active.remove(tr.job)
        if self.active:
            self._replan()

    # ---- main loop --------------------------------------------------------------------------
    def run(self) -> dict:
        """Advance event by event. Every event pops a job event or finishes at least one part
        (the first to end), so the loop ends within ``max_events`` unless something is wrong."""
        events = [(st.job.start_s, j) for j, st in enumerate(self.states)]
        heapq.heapify(events)
        while events or self.transfers:
            self.events += 1
            if self.events > self.max_events:
                raise PredictionError(
                    f"the fluid model did not finish within {self.max_events} events "
                    f"(at t = {self.now:.6g} s, {len(self.transfers)} transfers in flight)")
            if self.on_event is not None:
                self.on_event()
            self._step(events)
        return self.report()

    def _step(self, events: list) -> None:
        parts = [p for tr in self.transfers for p in tr.parts]
        t_next, first = float("inf"), -1
        if parts:
            rates = self._rates(parts)
            remaining = np.array([p.remaining for p in parts])
            with np.errstate(divide="ignore"):
                ttf = np.where(rates > 0, remaining / np.where(rates > 0, rates, 1.0), np.inf)
            first = int(np.argmin(ttf))
            t_next = self.now + float(ttf[first])
        close = lambda t: t * (1 + TIME_TOL) + 1e-15
        if events and events[0][0] <= close(t_next):
            if events[0][0] < t_next:
                t_next, first = max(events[0][0], self.now), -1
        if t_next == float("inf"):
            raise PredictionError(f"no flow can progress at t = {self.now:.6g} s")
        if parts:
            dt = t_next - self.now
            left = remaining - rates * dt
            done = (self.now + ttf <= close(t_next)) | (left <= 0)
            if first >= 0:
                done[first] = True  # the part that set the time ends now, whatever rounding says
            for p, r, x, d in zip(parts, rates, left, done):
                p.rate, p.remaining = float(r), 0.0 if d else float(x)
        self.now = t_next
        finished = []
        for tr in self.transfers:
            tr.parts = [p for p in tr.parts if p.remaining > 0]
            if not tr.parts:
                finished.append(tr)
        if finished:
            gone = set(map(id, finished))
            self.transfers = [tr for tr in self.transfers if id(tr) not in gone]
            for tr in finished:
                self._finish_transfer(tr, events)
        while events and events[0][0] <= close(self.now):
            _, j = heapq.heappop(events)
            self._start_iteration(j)

    def _rates(self, parts: list[_Part]) -> np.ndarray:
        """Max-min rates of ``parts``; with coupled parts, weighted by their links' shares."""
        from scipy.sparse import csr_matrix
        if not any(p.weights for p in parts):
            return max_min_rates([p.path for p in parts], self.capacity)
        rows = np.repeat(np.arange(len(parts)), [len(p.path) for p in parts])
        cols = np.fromiter((y for p in parts for y in p.path), dtype=np.int64, count=len(rows))
        vals = np.fromiter((w for p in parts for w in (p.weights or [1.0] * len(p.path))),
                           dtype=float, count=len(rows))
        a = csr_matrix((vals, (rows, cols)), shape=(len(parts), len(self.capacity)))
        return weighted_max_min(a, a.T.tocsr(), self.capacity, np.ones(len(parts), dtype=bool))

    def report(self) -> dict:
        bps = self.fabric.link_bps("host")  # a host's own link
        jobs = {}
        for st in self.states:
            jobs[st.job.id] = {"allreduce_s": st.allreduce, "ideal_s": st.job.ideal_allreduce_s(bps),
                               "iterations": len(st.allreduce)}
        return {
            "jobs": jobs,
            "flows": {"fct_ms": summarize(np.asarray(self.fct) * 1e3),
                      "throughput_gbps": summarize(np.asarray(self.throughput) * 8 / 1e9)},
            "planner_ms": self.planner_ms,
            "plans": self.plans_made,
            "events": self.events,
        }


def predict_allreduce(plan: Plan, max_events: int | None = None,
                      on_event: Callable[[], None] | None = None,
                      coupled: bool = False) -> dict[str, float]:
    """All-Reduce time per job for one iteration on a fixed plan, every job starting at once
    (``coupled``: a split flow moves as one transfer, as a sprayed one does).

    Raises ``PredictionError`` if the fluid model exceeds ``max_events`` (default
    ``plan_max_events(plan)``, what a correct run can need at most) or stalls; ``on_event`` is
    called once per event.

    O(events x max-min cost), events <= ``plan_max_events(plan)``.

    >>> from controller.planners.plan import make_plan
    >>> f = Clos.leaf_spine(2, 4, 1)  # 100 Gb/s links: 12.5 GB/s
    >>> ring = Job("r", rings=[["h0_0", "h1_0", "h2_0", "h3_0"]], ring_bytes=4e6)
    >>> predict_allreduce(make_plan(f, [ring], "greedy"))  # 6 steps x 1 MB at line rate
    {'r': 0.00048}
    """
    jobs = [Job(j.id, rings=j.rings, ring_bytes=j.ring_bytes, explicit=j.explicit,
                proto=j.proto, sport=j.sport, dport=j.dport) for j in plan.problem.jobs]
    bound = plan_max_events(plan) if max_events is None else max_events
    sim = FluidSimulator(plan.problem.fabric, jobs, lambda _: plan, 1, bound, on_event, coupled)
    result = sim.run()
    return {jid: r["allreduce_s"][0] for jid, r in result["jobs"].items()}
