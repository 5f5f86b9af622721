"""Issue 23's evidence: per workload pattern (all-to-all, pipeline, hybrid 3D-parallel, byte
mix, realistic ring clusters), per planner, the mean and worst job slowdown in the fluid model
(the reference), the shared prediction's mean (``model.iteration``) and the planning time.

    python -m benchmarks.patterns [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from controller.model.clos import Clos
from controller.model.fluid import predict_allreduce
from controller.model.iteration import slowdown
from controller.planners.plan import make_plan
from simulation.placement import realistic
from simulation.workloads import all_to_all, byte_mix, hybrid, pipeline

PLANNERS = [("ecmp", "ecmp", {}), ("greedy", "greedy", {}), ("edge-coloring", "edge-coloring", {}),
            ("auto", "auto", {"ilp_time_limit": 0}),
            ("auto-jobs", "auto", {"ilp_time_limit": 0, "objective": "jobs"}),
            ("split-flows", "split", {"max_parts": None}),
            ("split-jobs-4", "split", {"max_parts": 4, "objective": "jobs"}),
            ("split-jobs", "split", {"max_parts": None, "objective": "jobs"})]
UNSPLIT = ("ecmp", "greedy", "edge-coloring", "auto", "auto-jobs")


def cases():
    f = Clos.generate(4, 8, 8, 100.0, 1)  # 4 spines, one down; 8 leaves of 8 NICs
    used: set = set()
    yield "all-to-all 16x3", f, all_to_all(f, [16, 16, 16], seed=1)
    yield "pipeline 4x8", f, pipeline(f, [8, 8, 8, 8], seed=2)
    yield "hybrid 3D", f, (hybrid(f, 4, 2, 4, seed=3, used=used)
                           + hybrid(f, 2, 3, 4, seed=4, name="b", used=used))
    yield "byte mix (no failure)", Clos.generate(4, 8, 8), byte_mix(Clos.generate(4, 8, 8),
                                                                    4, 16, seed=5)
    yield "byte mix", f, byte_mix(f, 4, 16, seed=6)
    for seed, (links, dead) in ((1, (0, 0)), (2, (3, 1)), (3, (0, 1))):
        fab, jobs = realistic(8, 16, 0.9, seed, links, dead, 16, models=["bloom"],
                              ring_sizes=(2, 4))
        yield f"realistic 8x16 seed {seed}", fab, jobs


def evaluate(name, fabric, jobs) -> dict:
    row: dict = {"case": name, "jobs": len(jobs), "planners": {}}
    for label, alg, opts in PLANNERS:
        t0 = time.perf_counter()
        plan = make_plan(fabric, jobs, alg, **opts)
        ms = (time.perf_counter() - t0) * 1e3
        ar = predict_allreduce(plan)
        bps = fabric.link_bps()
        fluid = {j.id: slowdown(j, ar[j.id], bps) for j in plan.problem.jobs}
        times = plan.predicted_times()  # the shared prediction on the plan's routes
        pred = {j.id: slowdown(j, times[j.id], bps) for j in plan.problem.jobs}
        row["planners"][label] = {
            "fluid_mean": round(sum(fluid.values()) / len(fluid), 4),
            "fluid_worst": round(max(fluid.values()), 4),
            "predicted_mean": round(sum(pred.values()) / len(pred), 4),
            "max_prediction_error": round(max(abs(pred[j] / fluid[j] - 1) for j in fluid), 4),
            "ms": round(ms, 1)}
    p = row["planners"]
    best_unsplit = min(p[k]["fluid_mean"] for k in UNSPLIT)
    row["auto_jobs_lowest_unsplit_mean"] = p["auto-jobs"]["fluid_mean"] <= best_unsplit + 1e-4
    row["split_jobs_4_not_behind_auto_jobs"] = (p["split-jobs-4"]["fluid_mean"]
                                                <= p["auto-jobs"]["fluid_mean"] + 1e-4)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.patterns")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    rows = [evaluate(*c) for c in cases()]
    doc = {"rows": rows,
           "max_prediction_error": max(v["max_prediction_error"] for r in rows
                                       for v in r["planners"].values()),
           "auto_jobs_lowest_unsplit_mean": all(r["auto_jobs_lowest_unsplit_mean"] for r in rows),
           "split_jobs_4_not_behind_auto_jobs": all(r["split_jobs_4_not_behind_auto_jobs"]
                                                    for r in rows)}
    text = json.dumps(doc, indent=1)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
