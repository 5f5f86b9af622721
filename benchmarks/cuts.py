"""Where routing stops helping, on the trace replay (issue 60, item 4): how many jobs of the Crux
trace have an iteration whose demand across a cut exceeds the cut's capacity (a ToR's uplinks,
a pod's links to the cores: ``controller.model.cuts``), and how far the plans are from that
bound.

The trace is replayed as ``simulation.trace_report`` replays it (same fabric, workload, seed
and scenarios), once per algorithm; at every re-plan the jobs that cross the fabric are
checked for cut-bound cuts (``cuts.findings``, with the plan's predicted times). Per scenario
and algorithm: the re-plans and job re-plans (a job's iteration at one re-plan), the jobs with a
cut-bound iteration (its own demand above a cut, or its part of several jobs' demand
together), the findings by kind (leaf, pod; own or shared), the plan's distance to the bound
(planned communication time over the bound, 1: no routing does better), and how many of the
job re-plans slowed by more than 5% were cut-bound (the rest is routing's to remove). A
sensitivity scenario runs the random placement on a fabric with a quarter of the aggregation
switches (2 per pod: a full ToR of 8 hosts has 2 uplinks), where cuts bind.

    python -m benchmarks.cuts [--jobs N] [--days D] [--algorithms auto,ecmp] [--workers W]
        [--out bench/cuts.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from controller.model import cuts, hosttable
from simulation import trace_replay as tr
from simulation.trace_report import commit_id, scenario_name

COMMAND = "python -m benchmarks.cuts --workers 2"
SLOWED = 1.05  # a job re-plan slowed by more than 5% (as trace_report's threshold)
AT_BOUND = 1.01  # a plan within 1% of the cut bound: routing has done what it can
TAPERED = {"aggs_per_pod": 2}  # the sensitivity scenario's fabric (hosttable.Shape)
SCENARIOS = [(p, f, {}) for p, f in tr.SCENARIOS] + [("random", 1.0, TAPERED)]
EXAMPLES = 3  # messages kept per scenario and algorithm


class Tally:
    """What ``replay``'s observer sees at every re-plan, summed."""

    def __init__(self, fabric, workload: tr.Workload):
        self.fabric, self.bps = fabric, fabric.link_bps("host")
        self.replans = self.job_events = self.slowed = self.slowed_bound = 0
        self.jobs: set[str] = set()
        self.bound_jobs: set[str] = set()
        self.bound_events = 0
        self.kinds: dict[str, int] = {}
        self.gaps: list[float] = []  # planned / bound per finding
        self.whole: list[float] = []  # planned / unsplit bound per finding
        self.examples: list[str] = []

    def __call__(self, jobs, times, now) -> None:
        self.replans += 1
        found = cuts.findings(self.fabric, jobs, times=times)
        bound = {jid for d in found for jid in d["jobs"]}
        for job in jobs:
            self.jobs.add(job.id)
            self.job_events += 1
            slowed = times[job.id] > SLOWED * job.ideal_allreduce_s(self.bps)
            self.slowed += slowed
            self.slowed_bound += slowed and job.id in bound
        self.bound_events += len(bound)
        self.bound_jobs |= bound
        for d in found:
            key = f"{d['kind']} {'shared' if d['shared'] else 'own'}"
            self.kinds[key] = self.kinds.get(key, 0) + 1
            if "planned_over_bound" in d:
                self.gaps.append(d["planned_over_bound"])
                self.whole.append(d["planned_over_unsplit"])
            if len(self.examples) < EXAMPLES:
                self.examples.append(d["message"])

    def summary(self) -> dict:
        return {"replans": self.replans, "job_replans": self.job_events,
                "fabric_jobs": len(self.jobs), "cut_bound_jobs": len(self.bound_jobs),
                "cut_bound_job_replans": self.bound_events, "findings": dict(sorted(
                    self.kinds.items())),
                "planned_over_bound": _gaps(self.gaps),
                "planned_over_unsplit_bound": _gaps(self.whole),
                "slowed_job_replans": self.slowed,
                "slowed_and_cut_bound": self.slowed_bound,
                "examples": self.examples}


def _gaps(xs: list[float]) -> dict | None:
    """Mean, median and max of planned / bound over the findings, and the share at the bound."""
    if not xs:
        return None
    g = np.asarray(xs, dtype=float)
    return {"findings": len(g), "mean": round(float(g.mean()), 4),
            "p50": round(float(np.median(g)), 4), "max": round(float(g.max()), 4),
            "at_bound": round(float((g <= AT_BOUND).mean()), 4)}


def _one(task: tuple) -> tuple:
    name, placement, algorithm, trace, shape, seed = task
    fabric = hosttable.load(tr.TOPO, hosttable.Shape(**shape))
    workload = tr.Workload()
    tally = Tally(fabric, workload)
    t0 = time.perf_counter()
    run = tr.replay(trace, fabric, algorithm, workload, placement, seed, observe=tally)
    out = tally.summary()
    out["multi_host_jobs"] = sum(j["hosts"] > 1 for j in run["jobs"])
    out["wall_s"] = round(time.perf_counter() - t0, 2)
    return name, algorithm, out


def run_all(args) -> dict:
    t0 = time.perf_counter()
    algorithms = [a for a in args.algorithms.split(",") if a]
    tasks, scenarios = [], {}
    for placement, speedup, shape in SCENARIOS:
        name = scenario_name(placement, speedup) + (
            ", " + ", ".join(f"{k} {v}" for k, v in shape.items()) if shape else "")
        trace = tr.read_trace(tr.TRACE, args.jobs, args.days, speedup)
        fabric = hosttable.load(tr.TOPO, hosttable.Shape(**shape))
        scenarios[name] = {"placement": placement, "speedup": speedup, "shape": shape,
                           "fabric": fabric.summary(),
                           "oversubscription": hosttable.oversubscription(fabric),
                           "jobs": len(trace), "algorithms": {}}
        tasks += [(name, placement, a, trace, shape, args.seed) for a in algorithms]
    if args.workers > 1:
        with ProcessPoolExecutor(args.workers) as pool:
            done = list(pool.map(_one, tasks))
    else:
        done = [_one(t) for t in tasks]
    for name, algorithm, out in done:
        scenarios[name]["algorithms"][algorithm] = out
        print(f"{name:40s} {algorithm:6s} {out['wall_s']:6.1f} s  cut-bound jobs "
              f"{out['cut_bound_jobs']} of {out['fabric_jobs']}", flush=True)
    return {"command": COMMAND, "seed": args.seed, "commit": commit_id(),
            "trace": {"file": os.path.relpath(tr.TRACE, tr.REPO), "cut": {
                "jobs": args.jobs, "days": args.days}},
            "slowed_threshold": SLOWED, "at_bound_within": AT_BOUND,
            "scenarios": scenarios, "wall_s": round(time.perf_counter() - t0, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cuts",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, help="the first N jobs of the trace")
    ap.add_argument("--days", type=float, help="the jobs that arrive in the first D days")
    ap.add_argument("--algorithms", default="auto,ecmp")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1, help="replays run in parallel")
    ap.add_argument("--out", default=os.path.join(tr.REPO, "bench", "cuts.json"))
    args = ap.parse_args(argv)
    doc = run_all(args)
    with open(args.out, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    print("wrote", args.out, f"({doc['wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
