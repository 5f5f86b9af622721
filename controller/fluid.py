"""Event-driven fluid model of concurrent training jobs on a routed leaf-spine fabric.

Each job runs iterations: a communication phase (every ring runs the 2(n-1) synchronous steps
of ring All-Reduce; a step ends when its slowest flow ends) followed by the job's compute gap.
Rates are max-min fair on the planned paths (progressive filling, host links included) and are
recomputed at every flow start and finish. Routes come from ``planner(active_jobs) -> Plan``,
called with every started and unfinished job in view at each iteration start and at each
iteration end while another job is still running, as the paper's simulator does; a flow moved
in flight continues its remaining bytes on the new path. Identical planner inputs (the same set
of jobs) reuse the previous plan. The controller uses it to predict All-Reduce times.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from controller.errors import InputError
from controller.fabric import Fabric
from controller.jobs import Job
from controller.links import LinkIndex
from controller.plan import Plan
from controller.rates import max_min_rates
from controller.stats import summarize

TIME_TOL = 1e-9


@dataclass
class _Part:
    path: list[int]
    spine: int | None
    share: float
    remaining: float
    rate: float = 0.0


@dataclass
class _Transfer:
    job: int
    flow: int  # index in the job's flow list
    group: int
    size: float
    start: float
    parts: list[_Part] = field(default_factory=list)


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


class FluidSimulator:
    """Simulate ``jobs`` on ``fabric`` with routes from ``planner(active_jobs) -> Plan``."""

    def __init__(self, fabric: Fabric, jobs: list[Job], planner: Callable[[list[Job]], Plan],
                 iterations: int = 1):
        if iterations < 1:
            raise InputError("iterations must be at least 1")
        self.fabric = fabric
        self.links = LinkIndex(fabric)
        self.capacity = np.full(self.links.count, fabric.link_bps())
        self.planner = planner
        self.iterations = iterations
        self.states = [_JobState(j, j.flows(), _groups(j)) for j in jobs]
        self.active: list[int] = []  # started, unfinished jobs, submission order
        self.transfers: list[_Transfer] = []
        self.plan_cache: dict[tuple, Plan] = {}
        self.planner_ms: list[float] = []
        self.plans_made = 0
        self.fct: list[float] = []
        self.throughput: list[float] = []
        self.now = 0.0

    # ---- routing ----------------------------------------------------------------------------
    def _replan(self) -> None:
        key = tuple(self.active)
        plan = self.plan_cache.get(key)
        if plan is None:
            plan = self.planner([self.states[j].job for j in self.active])
            self.plan_cache[key] = plan
            self.planner_ms.append(plan.runtime_ms)
            self.plans_made += 1
        parts = plan.parts_by_flow()
        offset = 0
        for j in self.active:
            st = self.states[j]
            st.routes = parts[offset:offset + len(st.flows)]
            offset += len(st.flows)
        for tr in self.transfers:  # move in-flight flows whose route changed
            want = self._route(tr.job, tr.flow)
            have = tuple((p.spine, p.share) for p in tr.parts)
            if want != have:
                left = sum(p.remaining for p in tr.parts)
                tr.parts = self._parts(tr.job, tr.flow, left)

    def _route(self, j: int, k: int) -> tuple:
        r = self.states[j].routes[k]
        return ((None, 1.0),) if r is None else tuple(r)

    def _parts(self, j: int, k: int, size: float) -> list[_Part]:
        f = self.states[j].flows[k]
        return [_Part(self.links.path(f.src, f.dst, s), s, share, size * share)
                for s, share in self._route(j, k)]

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
            self.transfers.append(_Transfer(j, k, g, size, self.now, self._parts(j, k, size)))

    def _finish_transfer(self, tr: _Transfer, events: list) -> None:
        duration = self.now - tr.start
        self.fct.append(duration)
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
        events = [(st.job.start_s, j) for j, st in enumerate(self.states)]
        heapq.heapify(events)
        while events or self.transfers:
            parts = [p for tr in self.transfers for p in tr.parts]
            if parts:
                rates = max_min_rates([p.path for p in parts], self.capacity)
                for p, r in zip(parts, rates):
                    p.rate = r
                remaining = np.array([p.remaining for p in parts])
                finish = self.now + remaining / rates
                t_next = float(finish.min())
            else:
                t_next = float("inf")
            if events and events[0][0] <= t_next * (1 + TIME_TOL):
                t_next = min(t_next, events[0][0])
            dt = t_next - self.now
            done_tol = t_next * (1 + TIME_TOL) + 1e-12
            for i, p in enumerate(parts):
                p.remaining = 0.0 if finish[i] <= done_tol else p.remaining - p.rate * dt
            self.now = t_next
            finished = [tr for tr in self.transfers if all(p.remaining <= 0 for p in tr.parts)]
            if finished:
                gone = set(map(id, finished))
                self.transfers = [tr for tr in self.transfers if id(tr) not in gone]
                for tr in finished:
                    self._finish_transfer(tr, events)
            while events and events[0][0] <= self.now * (1 + TIME_TOL) + 1e-12:
                _, j = heapq.heappop(events)
                self._start_iteration(j)
        return self.report()

    def report(self) -> dict:
        bps = self.fabric.link_bps()
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
        }


def predict_allreduce(plan: Plan) -> dict[str, float]:
    """All-Reduce time per job for one iteration on a fixed plan, every job starting at once."""
    jobs = [Job(j.id, rings=j.rings, ring_bytes=j.ring_bytes, explicit=j.explicit,
                proto=j.proto, sport=j.sport, dport=j.dport) for j in plan.problem.jobs]
    result = FluidSimulator(plan.problem.fabric, jobs, lambda _: plan, 1).run()
    return {jid: r["allreduce_s"][0] for jid, r in result["jobs"].items()}


