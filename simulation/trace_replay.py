"""Trace-driven cluster evaluation: the Crux trace replayed on the Alibaba cluster's fabric.

The fabric is built from the cluster's host table (``data/traces/lingjun-topo.csv``,
``model.hosttable``: 3 pods, 119 ToRs, 847 hosts; the per-tier counts and speeds the table does
not give are ``hosttable.Shape``). The jobs are the cluster's 2,498 training jobs over 15.9 days
(``data/traces/crux-jobs.csv``: arrival, GPUs, duration). For every algorithm the trace is
replayed from scratch, event by event:

* **Placement** (the original one is not in the trace): a job of g GPUs takes ceil(g / 8) whole
  hosts when they are free, ``locality`` first (the fullest ToR that holds it, else the pod with
  the fewest free hosts that holds it, filling its emptiest-first ToRs, else across pods) or
  ``random`` free hosts. Waiting jobs start in arrival order as soon as they fit (backfilling).
  A job's ring follows its hosts in topology order (pod, ToR), as NCCL orders a ring.
* **Traffic** (``Workload``): a job on two hosts or more is data parallel, one ring All-Reduce
  per iteration per rail; a job on one ToR never reaches the fabric.
* **Re-planning**: whenever the set of jobs that cross the fabric changes, the algorithm routes
  all of them at once, as the controller does on every job change; the shared prediction
  (``model.iteration.predict_clos_times``) gives each job's communication time per iteration
  on that routing, every job starting at once.
* **Progress**: a job progresses at (compute + ideal comm) / (compute + predicted comm) of its
  trace duration per second, taken as its run time without collisions; it ends when its work
  is done, so a slower job leaves later and holds its hosts longer (the placements of the
  algorithms drift apart: each replay is its own cluster history).

Deterministic for a seed (the random placement and the ECMP hash salt); ``auto`` runs its
local search to its local optimum, never to a deadline. Writes ``--out`` (bench/trace_replay.json)
and ``--figure`` (docs/trace_replay_cdf.png)::

    python -m simulation.trace_report [--jobs N] [--days D] [--placement locality|random]
        [--speedup F] [--algorithms ecmp,ecmp-polarised,greedy,auto] [--seed S] [--workers W]

Without ``--placement``/``--speedup`` it runs ``SCENARIOS``: both policies on the trace as it
is, and locality with arrivals 4x faster (the trace fills 9% of the hosts on average).
"""
from __future__ import annotations

import csv
import math
import os
import time
from dataclasses import dataclass, field

import numpy as np

from controller.model.clos import Clos
from controller.model.clospaths import ClosLinks, ClosProblem
from controller.model.iteration import predict_clos_times
from controller.model.jobs import Job
from controller.planners.clos_auto import clos_auto
from controller.planners.clos_ecmp import clos_ecmp
from controller.planners.clos_greedy import clos_greedy

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRACE = os.path.join(REPO, "data", "traces", "crux-jobs.csv")
TOPO = os.path.join(REPO, "data", "traces", "lingjun-topo.csv")
ALGORITHMS = ("ecmp", "ecmp-polarised", "greedy", "auto")
PLACEMENTS = ("locality", "random")
THRESHOLDS = (1.05, 1.10)
SCENARIOS = (("locality", 1.0), ("random", 1.0), ("locality", 4.0))  # (placement, speedup)
AUTO_TIME_LIMIT = 600.0  # auto's local search ends at its local optimum long before this


@dataclass(frozen=True)
class TraceJob:
    id: str
    arrival: float
    gpus: int
    duration: float


def read_trace(path: str = TRACE, jobs: int | None = None, days: float | None = None,
               speedup: float = 1.0) -> list[TraceJob]:
    """The trace's jobs in arrival order, cut to the first ``jobs`` and/or to arrivals before
    ``days`` days; with ``speedup`` F the arrival times divided by F (F times the offered
    load, durations unchanged)."""
    out = []
    with open(path, newline="") as fh:
        for row in csv.reader(fh):
            if not row or row[0].startswith("#"):
                continue
            out.append(TraceJob(f"j{int(row[0])}", float(row[1]), int(math.ceil(float(row[4]))),
                                float(row[5])))
    out.sort(key=lambda j: (j.arrival, int(j.id[1:])))
    if days is not None:
        out = [j for j in out if j.arrival < days * 86400]
    out = out[:jobs] if jobs is not None else out
    if speedup != 1.0:
        if not speedup > 0:
            raise ValueError(f"speedup must be positive, got {speedup!r}")
        out = [TraceJob(j.id, j.arrival / speedup, j.gpus, j.duration) for j in out]
    return out


@dataclass(frozen=True)
class Workload:
    """How a trace job becomes traffic. Data parallel over hosts, tensor parallel over a host's
    ``gpus_per_host`` GPUs (NVLink), so each of the host's ``rails`` NICs all-reduces its
    1/rails shard of the gradients in a ring over its rail. Parameters by GPU count
    (``models``: up to that many GPUs, that many parameters; LLaMA-2 7B/13B/70B), gradients of
    ``bytes_per_param`` (bf16). An iteration's compute is the 6 x params x tokens FLOPs of
    ``tokens_per_host`` tokens per replica at ``gpu_tflops`` achieved per GPU (about half an
    A100's bf16 peak); communication is not overlapped with compute. The ratio of ideal
    communication to compute does not depend on the model size: about 0.12 with the
    defaults (8 x gpu_tflops / (6 x tokens_per_host x the rail's bytes per second))."""
    gpus_per_host: int = 8
    rails: int = 8
    bytes_per_param: float = 2.0
    tokens_per_host: int = 16384
    gpu_tflops: float = 150.0
    models: tuple = ((64, 7e9), (256, 13e9), (1 << 30, 70e9))

    def hosts(self, gpus: int) -> int:
        return max(1, math.ceil(gpus / self.gpus_per_host))

    def params(self, gpus: int) -> float:
        return next(p for up_to, p in self.models if gpus <= up_to)

    def ring_bytes(self, gpus: int) -> float:
        return self.params(gpus) * self.bytes_per_param / self.rails

    def compute_s(self, gpus: int) -> float:
        flops = 6.0 * self.params(gpus) * self.tokens_per_host
        return flops / (self.gpus_per_host * self.gpu_tflops * 1e12)


class Cluster:
    """Free hosts per ToR and the placement policy."""

    def __init__(self, fabric: Clos, policy: str = "locality",
                 rng: np.random.Generator | None = None):
        if policy not in PLACEMENTS:
            raise ValueError(f"placement must be one of {PLACEMENTS}, got {policy!r}")
        self.policy, self.rng = policy, rng or np.random.default_rng(0)
        plane = fabric.planes[0]
        self.leaf_index = {leaf: k for k, leaf in enumerate(plane.leaves)}
        self.pod_of = {leaf: plane.pod_of_leaf[k] for k, leaf in enumerate(plane.leaves)}
        self.leaf_of = dict(fabric.hosts)
        self.free: dict[str, list[str]] = {leaf: [] for leaf in plane.leaves}
        for h in sorted(fabric.hosts, key=self.order):
            self.free[self.leaf_of[h]].append(h)
        self.pods = len(plane.pods)

    def order(self, host: str) -> tuple:
        leaf = self.leaf_of[host]
        return self.pod_of[leaf], self.leaf_index[leaf], host

    def free_count(self) -> int:
        return sum(len(v) for v in self.free.values())

    def place(self, n: int) -> list[str] | None:
        """``n`` free hosts in topology order, or None when fewer are free."""
        if n > self.free_count():
            return None
        if self.policy == "random":
            pool = sorted((h for v in self.free.values() for h in v), key=self.order)
            hosts = [pool[i] for i in self.rng.choice(len(pool), size=n, replace=False)]
        else:
            hosts = self._locality(n)
        for h in hosts:
            self.free[self.leaf_of[h]].remove(h)
        return sorted(hosts, key=self.order)

    def _locality(self, n: int) -> list[str]:
        fits = [leaf for leaf, v in self.free.items() if len(v) >= n]
        if fits:
            leaf = min(fits, key=lambda l: (len(self.free[l]), self.leaf_index[l]))
            return self.free[leaf][:n]
        per_pod = [0] * self.pods
        for leaf, v in self.free.items():
            per_pod[self.pod_of[leaf]] += len(v)
        pods = [p for p in range(self.pods) if per_pod[p] >= n]
        if pods:
            order = [min(pods, key=lambda p: (per_pod[p], p))]
        else:
            order = sorted(range(self.pods), key=lambda p: (-per_pod[p], p))
        hosts: list[str] = []
        for p in order:
            leaves = sorted((l for l in self.free if self.pod_of[l] == p and self.free[l]),
                            key=lambda l: (-len(self.free[l]), self.leaf_index[l]))
            for leaf in leaves:
                hosts += self.free[leaf][:n - len(hosts)]
                if len(hosts) == n:
                    return hosts
        raise AssertionError("free hosts miscounted")

    def release(self, hosts: list[str]) -> None:
        for h in hosts:
            v = self.free[self.leaf_of[h]]
            v.append(h)
            v.sort(key=self.order)


def plan(algorithm: str, problem: ClosProblem, salt: int):
    if algorithm == "ecmp":
        return clos_ecmp(problem, salt)
    if algorithm == "ecmp-polarised":
        return clos_ecmp(problem, salt, polarised=True)
    if algorithm == "greedy":
        return clos_greedy(problem)
    if algorithm == "auto":
        r = clos_auto(problem, time_limit=AUTO_TIME_LIMIT)
        if r.info.get("improve", {}).get("stopped") == "deadline":
            raise RuntimeError("auto stopped at its deadline: the replay would not be "
                               "deterministic")
        return r
    raise ValueError(f"unknown algorithm {algorithm!r} (one of {', '.join(ALGORITHMS)})")


def predict(problem: ClosProblem, routing) -> dict[str, float]:
    """Communication time per job of one iteration on ``routing``: the shared prediction."""
    return predict_clos_times(problem, routing)


@dataclass
class Running:
    tj: TraceJob
    hosts: list[str]
    job: Job | None  # None: the job never reaches the fabric (one host or one ToR)
    start: float
    ideal_s: float = 0.0  # ideal communication time per iteration
    work: float = 0.0  # remaining trace seconds
    rate: float = 1.0
    comm: float = 1.0  # predicted / ideal communication time now
    weighted: dict = field(default_factory=lambda: {"comm": 0.0, "rate": 0.0, "t": 0.0})
    worst_comm: float = 1.0


def replay(trace: list[TraceJob], fabric: Clos, algorithm: str, workload: Workload | None = None,
           placement: str = "locality", seed: int = 0, links: ClosLinks | None = None,
           compare: str | None = None, observe=None) -> dict:
    """Replay ``trace`` with ``algorithm``; per job its start, end, slowdowns. ``compare``: an
    algorithm also planned and predicted at every re-plan on the same jobs (its times are
    reported beside, never used). ``observe(jobs, times, now)``, if given, is called at every
    re-plan with the jobs that cross the fabric and their predicted communication times."""
    links = links or ClosLinks(fabric)
    workload = workload or Workload()
    cluster = Cluster(fabric, placement, np.random.default_rng(seed))
    bps = fabric.link_bps("host")
    salt = seed
    arrivals = list(trace)
    nxt = 0
    queue: list[TraceJob] = []
    running: dict[str, Running] = {}
    done: dict[str, dict] = {}
    now = 0.0
    stats = {"replans": 0, "plan_s": 0.0, "predict_s": 0.0, "max_fabric_jobs": 0,
             "max_flows": 0, "compare": [] if compare else None}
    fabric_set: frozenset = frozenset()
    while nxt < len(arrivals) or queue or running:
        # the next event: an arrival or the earliest end
        t_end, ends = math.inf, []
        for r in running.values():
            t = now + (r.work / r.rate if r.work > 0 else 0.0)
            tol = 1e-9 * max(1.0, t)
            if not ends or t < t_end - tol:
                t_end, ends = t, [r]
            elif t <= t_end + tol:
                ends.append(r)
        t_arr = arrivals[nxt].arrival if nxt < len(arrivals) else math.inf
        if not math.isfinite(min(t_end, t_arr)):
            raise RuntimeError(f"stuck at {now}: {len(queue)} jobs wait that never fit")
        t_next = min(t_end, t_arr)
        dt = t_next - now
        for r in running.values():
            r.work = max(0.0, r.work - r.rate * dt)
            w = r.weighted
            w["comm"] += r.comm * dt
            w["rate"] += dt / r.rate
            w["t"] += dt
        now = t_next
        if t_end <= t_arr:
            for r in ends:
                cluster.release(r.hosts)
                del running[r.tj.id]
                done[r.tj.id] = _result(r, now)
        while nxt < len(arrivals) and arrivals[nxt].arrival <= now:
            queue.append(arrivals[nxt])
            nxt += 1
        queue = _start(queue, cluster, running, workload, now, bps)
        current = frozenset(k for k, r in running.items() if r.job is not None)
        if current != fabric_set:
            fabric_set = current
            times = _replan(running, current, fabric, links, algorithm, salt, stats, bps,
                            compare)
            if observe is not None and times is not None:
                observe([running[k].job for k in sorted(current, key=lambda k: int(k[1:]))],
                        times, now)
    results = [done[j.id] for j in trace]
    stats["plan_s"] = round(stats["plan_s"], 3)
    stats["predict_s"] = round(stats["predict_s"], 3)
    return {"jobs": results, "stats": stats}


def _start(queue, cluster, running, workload, now, bps):
    left = []
    for tj in queue:
        n = workload.hosts(tj.gpus)
        hosts = cluster.place(n)
        if hosts is None:
            left.append(tj)
            continue
        leaves = {cluster.leaf_of[h] for h in hosts}
        job = None
        if len(leaves) > 1:
            idx = int(tj.id[1:])
            job = Job(tj.id, rings=[hosts], ring_bytes=workload.ring_bytes(tj.gpus),
                      compute_s=workload.compute_s(tj.gpus), proto=17,
                      sport=49152 + idx % 16384, dport=4791)  # RoCEv2: a UDP port per job
        r = Running(tj, hosts, job, now, work=tj.duration)
        if job is not None:
            r.ideal_s = job.ideal_allreduce_s(bps)
        running[tj.id] = r
    return left


def _replan(running, current, fabric, links, algorithm, salt, stats, bps, compare):
    """Plan and predict the jobs that cross the fabric; their times (None: no such job)."""
    jobs = [running[k].job for k in sorted(current, key=lambda k: int(k[1:]))]
    if not jobs:
        return None
    t0 = time.perf_counter()
    problem = ClosProblem.build(fabric, jobs, skip_unroutable=True, links=links)
    routing = plan(algorithm, problem, salt)
    t1 = time.perf_counter()
    times = predict(problem, routing)
    t2 = time.perf_counter()
    stats["replans"] += 1
    stats["plan_s"] += t1 - t0
    stats["predict_s"] += t2 - t1
    stats["max_fabric_jobs"] = max(stats["max_fabric_jobs"], len(jobs))
    stats["max_flows"] = max(stats["max_flows"], len(problem))
    for job in jobs:
        r = running[job.id]
        r.comm = times[job.id] / r.ideal_s
        r.rate = (job.compute_s + r.ideal_s) / (job.compute_s + times[job.id])
        r.worst_comm = max(r.worst_comm, r.comm)
    if compare:
        other = predict(problem, plan(compare, problem, salt))
        stats["compare"].append({j.id: [times[j.id], other[j.id]] for j in jobs})
    return times


def _result(r: Running, end: float) -> dict:
    w = r.weighted
    span = end - r.start
    return {"id": r.tj.id, "gpus": r.tj.gpus, "hosts": len(r.hosts),
            "fabric": r.job is not None, "arrival": r.tj.arrival, "start": r.start,
            "end": end, "duration": r.tj.duration,
            "jct_slowdown": span / r.tj.duration if r.tj.duration > 0 else 1.0,
            "comm_slowdown": w["comm"] / w["t"] if w["t"] > 0 else r.comm,
            "worst_comm_slowdown": r.worst_comm}


# ---------------------------------------------------------------- summaries


def percentiles(xs) -> dict:
    a = np.sort(np.asarray(xs, dtype=float))
    if not len(a):
        return {}
    q = {f"p{p}": float(np.percentile(a, p)) for p in (50, 90, 95, 99)}
    return {k: round(v, 6) for k, v in {"mean": float(a.mean()), **q, "max": float(a[-1])}.items()}


def cdf(xs, points: int = 200) -> dict:
    """{"x": values, "y": fraction of values <= x}, at most ``points`` long, ends included."""
    a = np.sort(np.asarray(xs, dtype=float))
    idx = np.unique(np.linspace(0, len(a) - 1, min(points, len(a))).round().astype(int))
    return {"x": [round(float(a[i]), 6) for i in idx],
            "y": [round((i + 1) / len(a), 6) for i in idx]}


def summarise(run: dict) -> dict:
    jobs = run["jobs"]
    net = [j for j in jobs if j["hosts"] > 1]
    out = {"jobs": len(jobs), "multi_host_jobs": len(net),
           "fabric_jobs": sum(j["fabric"] for j in jobs),
           "jct_slowdown": percentiles([j["jct_slowdown"] for j in net]),
           "comm_slowdown": percentiles([j["comm_slowdown"] for j in net]),
           "cdf_jct_slowdown": cdf([j["jct_slowdown"] for j in net]),
           "cdf_comm_slowdown": cdf([j["comm_slowdown"] for j in net]),
           "queue_wait_s_mean": round(float(np.mean([j["start"] - j["arrival"] for j in jobs])), 3),
           "makespan_days": round(max(j["end"] for j in jobs) / 86400, 4)}
    for t in THRESHOLDS:
        slowed = sum(j["jct_slowdown"] > t for j in net)
        out[f"slowed_over_{round((t - 1) * 100)}pct"] = {
            "jobs": slowed, "of_multi_host": round(slowed / max(1, len(net)), 6),
            "of_all": round(slowed / max(1, len(jobs)), 6)}
    return out
