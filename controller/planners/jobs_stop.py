"""Where the jobs search stops (issue 74): at the bound, or at its time budget.

The bound (``at_floor``, ``ideal_slowdowns``): on a single plane no job beats its ideal
iteration time (a job on one NIC sends at most at its line rate), so a routing with every job
at slowdown 1.0 has its worst and mean slowdowns at their lower bounds: nothing is left to
search for. ``clos_jobs`` then builds and scores no other start (before, a k = 32
permutation's search scored the greedy's and the colouring's too: 311 ms against the flows
objective's 20 ms); ``objective.improve_jobs``, the two-tier kernel's, scores no baseline.
``ideal_slowdowns`` proves the bound without the prediction where every link carries no more
flows than its capacity at the host line rate.

The time budget (``time_budget``, ``Clock``): the search's predictions each cost
O(events x rounds x nnz), 30 ms on a permutation of 8,000 flows, 5-14 s on a congested
all-to-all of as many (a mixture of experts of 8,448 flows spent 862 s in its 60
predictions), so a count of predictions bounds no time. ``JOB_TIME_S`` and
``JOB_TIME_PER_FLOW_S`` per inter-leaf flow, in CPU seconds of the planning process
(``time.process_time``: other processes on a loaded machine stretch the wall time, not the
budget, so the result stays that of an idle machine), bound everything ``clos_jobs`` does.

``Run``: the starts of one ``clos_jobs`` call, scored within its clock, and where and why it
stopped (the plan's ``info``: ``stopped``, ``stopped_at``, ``time_budget_s``, ``time_s``,
``all_predictions``, ``longest_prediction_s``, ``skipped_starts``).
"""
from __future__ import annotations

import time
from itertools import chain

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting
from controller.model.rates import load_seconds

EPS = 1e-9
# the budget: 3 s and 0.5 ms per inter-leaf flow (8,448 flows: 7.2 s, so that `mlroute plan`
# ends within 10 s). Was 5 s: the compiled filling (``model.rates_kernel``) made predictions
# on large problems ten times cheaper. The planner bench's off-path jobs searches took
# 0.3-10.6 s (byte mixes of 2,024 flows the longest: 6.0 s then, the same routing); the 27
# parity instances' mixtures on k = 4 fat-trees 1.2-1.4 s
JOB_TIME_S = 3.0
JOB_TIME_PER_FLOW_S = 0.5e-3


def time_budget(flows: int) -> float:
    """CPU seconds the jobs search of a problem of ``flows`` inter-leaf flows may take."""
    return round(JOB_TIME_S + JOB_TIME_PER_FLOW_S * flows, 6)


class OutOfTime(Exception):
    """A prediction the time budget (``Clock``) did not allow, or stopped at its deadline."""


class Clock:
    """A time budget: ``seconds`` from now on ``now`` (default ``time.process_time``; tests: a
    fake). ``run`` makes one prediction unless the longest so far would end past the
    deadline, and stops it at its first event past the deadline (``model.iteration``'s
    ``on_event``); both raise ``OutOfTime``. So nothing is started that cannot end in time,
    and one prediction dearer than the whole budget ends at the deadline, not minutes
    later."""

    def __init__(self, seconds: float, now=time.process_time, loads=None):
        self.seconds, self.now = float(seconds), now
        # CPU seconds spent loading the compiled filling (``rates.load_seconds``), left out
        # of a prediction's cost; on another clock (a test's) only what ``loads`` says
        self.loads = loads or (load_seconds if now is time.process_time else lambda: 0.0)
        self.start = now()
        self.deadline = self.start + self.seconds
        self.predictions = 0  # made to their end
        self.longest = 0.0  # the longest of them, s
        self._switched = False  # the longest is the one that loaded the compiled filling
        self.out = False  # a prediction was refused or stopped

    def affords(self) -> bool:
        """Whether a prediction as long as the longest so far ends by the deadline."""
        return not self.out and self.now() + self.longest <= self.deadline

    def run(self, predict):
        """``predict(on_event)`` within the budget (class docstring)."""
        if not self.affords():
            self.out = True
            raise OutOfTime("no time left for a prediction")

        def tick():
            if self.expired():
                raise OutOfTime("a prediction reached the deadline")
        t, loading = self.now(), self.loads()
        got = predict(tick)
        self.predictions += 1
        # the filling's one-time load is not what the next one costs; nor is the prediction
        # that loaded it (interpreted until then): the next one's cost replaces it
        loaded = self.loads() - loading
        cost = self.now() - t - loaded
        self.longest = cost if self._switched else max(self.longest, cost)
        self._switched = loaded > 0
        return got

    def elapsed(self) -> float:
        return self.now() - self.start

    def expired(self) -> bool:
        """Whether the deadline has passed (then no prediction runs either): for the work
        between predictions, the ejection chains of ``clos_jobmean.Freeing``."""
        if not self.out and self.now() > self.deadline:
            self.out = True
        return self.out


def at_floor(values) -> bool:
    """Whether every job of ``values`` (slowdowns) is at its ideal, 1.0: on a single plane the
    worst and the mean at their lower bounds."""
    return all(v <= 1.0 + EPS for v in values)


def ideal_slowdowns(problem: ClosProblem, routing: ClosRouting) -> dict[str, float] | None:
    """Every job at slowdown 1.0, what the prediction gives (to its float noise), when
    ``routing`` proves it without the prediction: a single plane, every flow routed, every
    host link of the host line rate and no link carrying more flows than its capacity in
    host line rates, host links included (a permutation on a fat-tree at its max of 1).
    Then every flow (every ring) runs at the host line rate from start to end, so each job
    takes its ideal time: a ring 2(n-1) chunks at line rate, an explicit flow its bytes, and
    each NIC carries one flow of the problem in each direction. None otherwise. O(F + links)
    numpy (tests/test_jobs_bound.py holds it to the prediction)."""
    L = problem.links
    if len(problem.fabric.planes) != 1 or problem.unroutable or len(problem.inter) + len(
            problem.intra) != len(problem.flows) or min(routing.plane, default=0) < 0:
        return None
    host, capacity = problem.fabric.link_bps("host"), L.capacity_bps()
    ids = np.fromiter(chain.from_iterable(routing.path), dtype=np.int64)
    counts = np.bincount(ids, minlength=L.count).astype(float)
    if np.any(counts * host > capacity * (1 + 1e-9)):  # a fabric link shared: no proof
        return None
    intra = [problem.flows[pos] for pos in problem.intra]
    src = np.concatenate([np.asarray(problem.src, dtype=np.int64),
                          np.array([L.host_id[f.src] for f in intra], dtype=np.int64)])
    dst = np.concatenate([np.asarray(problem.dst, dtype=np.int64),
                          np.array([L.host_id[f.dst] for f in intra], dtype=np.int64)])
    counts += np.bincount(L.host_up[0, src], minlength=L.count)
    counts += np.bincount(L.host_down[0, dst], minlength=L.count)
    hosts = np.concatenate([L.host_up[0], L.host_down[0]])
    hosts = hosts[hosts >= 0]
    if not np.allclose(capacity[hosts], host, rtol=1e-9, atol=0.0) \
            or np.any(counts * host > capacity * (1 + 1e-9)):
        return None
    return {job.id: 1.0 for job in problem.jobs}


class Run:
    """The starts of one ``clos_jobs`` call, each scored by ``predict(problem, routing,
    clock)`` within ``clock``, and where and why it stopped (``stopped``): "bound" (every
    job at its ideal on a single plane), "local optimum", "budget" (``budget`` predictions in
    a start's search), "time budget" (the clock's); ``stopped_at``: the start being scored,
    the search or the lower layers it ended in."""

    def __init__(self, problem: ClosProblem, clock: Clock, predict):
        self.problem, self.clock, self.predict = problem, clock, predict
        self.planes = len(problem.fabric.planes)
        self.starts: dict = {}
        self.scores: dict = {}
        self.stopped: str | None = None
        self.stopped_at: str | None = None
        self.skipped: list[str] = []  # starts not scored for the time budget

    def at_bound(self, values: dict) -> bool:
        """Every job at its ideal, the lower bound of each job's slowdown on a single plane
        (with several, a host's NICs together beat it: no bound)."""
        return self.planes == 1 and at_floor(values.values())

    def open(self) -> bool:
        """Whether another start may still improve: none scored is at the bound, and the
        time budget has not ended the run."""
        return self.stopped is None and not any(self.at_bound(v) for v in self.scores.values())

    def stop(self, why: str, where: str) -> None:
        if self.stopped is None:
            self.stopped, self.stopped_at = why, where

    def step(self, name: str, fn):
        """``fn()``, or None (and the run stopped) when the time budget ends it."""
        if self.stopped is not None:
            return None
        try:
            return fn()
        except OutOfTime:
            self.stop("time budget", f"start {name}")
            self.skipped.append(name)
            return None

    def score(self, name: str, routing: ClosRouting) -> None:
        """Start ``name``: ``routing`` with its prediction (``ideal_slowdowns`` when it
        proves every job at its ideal), unless the time budget ends it."""
        self.starts[name] = routing
        values = ideal_slowdowns(self.problem, routing) if self.planes == 1 else None
        if values is None:
            values = self.step(name, lambda: self.predict(self.problem, routing, self.clock))
        if values is not None:
            self.scores[name] = values

    def report(self) -> dict:
        c = self.clock
        return {"stopped": self.stopped or "local optimum", "stopped_at": self.stopped_at,
                "time_budget_s": round(c.seconds, 6), "time_s": round(c.elapsed(), 6),
                "all_predictions": c.predictions,
                "longest_prediction_s": round(c.longest, 6), "skipped_starts": self.skipped}

    def unscored(self, first: str) -> dict:
        """The ``info`` of start ``first`` kept when not even its prediction fitted the time
        budget: no slowdown known (None), nothing searched (``clos_jobs`` adds the loads)."""
        self.stop("time budget", f"start {first}")
        self.skipped += [first] if first not in self.skipped else []
        return {"objective": "jobs", "stage": "jobs", "start": first, "worst_bound": None,
                "worst_slowdown": None, "mean_slowdown": None, "start_worst_slowdown": None,
                "start_mean_slowdown": None, "predicted_slowdown": None, "starts": {},
                "searched": [], "moves": 0, "predictions": 0, **self.report()}
