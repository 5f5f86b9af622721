"""Issue 23's request path at 64 x 32 (2,048 NICs) on the new traffic patterns: all-to-all
(mixture of experts), pipelines, 3D-parallel models and 100x byte mixes, with no failure, 3
single links, one spine, and one spine and 3 links down.

Per case: the controller's request path for ``auto`` (``churn.replan(layer1_only=True)``,
both objectives: the same stage) as a ratio to the greedy's time in the same run (medians),
when every job is new (a re-plan of all) and when the last job is posted on top of the
others' routes; whether its answer is layer-1 optimal (max link load at the lower bound);
the off-path stage that follows (from the routes the request path installed, as
``offpath.group_instance`` runs it: by flow counts ``plan_off_path``, by the jobs objective
``clos_offpath``'s stages, here in this process: its time, whether ``churn.worth_moving``
applies it, the flows it moves); and per
planner the fluid model's mean and worst job slowdown (the reference) with the shared
prediction's largest error against it (``model.iteration``).

    python -m benchmarks.anytime [--repeats N] [--small] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

from controller.model.fluid import predict_allreduce
from controller.model.iteration import predict_slowdowns, slowdown
from controller.model.problem import Assignment, Problem
from controller.planners.churn import align_spines, plan_rank, replan, worth_moving
from controller.planners.leaf_spine import flow_spine_parts, path_parts
from controller.planners.offpath import group_instance, plan_off_path
from controller.planners.plan import run_planner, two_tier_plan
from simulation.placement import cluster
from simulation.workloads import all_to_all, byte_mix, hybrid, pipeline

FAILURES = {"none": (0, 0), "3 links": (3, 0), "1 spine": (0, 1), "1 spine + 3 links": (3, 1)}
BASELINES = ("ecmp", "greedy", "edge-coloring")


def workloads(fabric, small: bool = False) -> dict:
    """Pattern name -> jobs, sized for 64 leaves x 32 NICs (``small``: 16 x 8)."""
    if small:
        used: set = set()
        return {"all-to-all 3x12": all_to_all(fabric, [12, 12, 8], seed=1),
                "pipeline 8x8": pipeline(fabric, [8] * 8, seed=2),
                "hybrid 3D": hybrid(fabric, 4, 2, 4, seed=3, used=used),
                "byte mix 4x32": byte_mix(fabric, 4, 32, seed=4)}
    used = set()
    return {"all-to-all 8x32": all_to_all(fabric, [32] * 8, seed=1),
            "pipeline 64x16": pipeline(fabric, [16] * 64, seed=2),
            "hybrid 3D 2 models": (hybrid(fabric, 8, 4, 8, seed=3, used=used)
                                   + hybrid(fabric, 4, 8, 8, seed=4, name="b", used=used)),
            "byte mix 16x128": byte_mix(fabric, 16, 128, seed=5)}


def cases(small: bool = False):
    spines, leaves, nics = (8, 16, 8) if small else (32, 64, 32)
    for failures, (links, dead) in FAILURES.items():
        fabric = cluster(spines, leaves, nics, np.random.default_rng(7), links, dead)
        for pattern, jobs in workloads(fabric, small).items():
            yield pattern, failures, fabric, jobs


def _ms(fn, repeats: int) -> float:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out)


def _parts(problem: Problem, a: Assignment) -> list:
    return flow_spine_parts(problem, a)


def _off_path(fabric, two, problem: Problem, jobs, start: Assignment, objective: str) -> list:
    """The spines the off-path stage of ``objective`` finds from ``start``, as the service
    runs it in its child (``offpath.group_instance``): by flow counts the two-tier stages
    (``plan_off_path``), by the jobs objective the Clos ones (``clos_offpath``); on this
    single two-tier plane a Clos routing's middle is the spine."""
    if objective == "flows":
        return plan_off_path(problem, _parts(problem, start), objective).spines()
    routes = [path_parts(two, f, p) for f, p in zip(problem.flows, _parts(problem, start))]
    found = group_instance(fabric, jobs, routes, objective)
    better = found.stages(found.problem, found.previous, objective)
    assert found.problem.inter == problem.inter, "the two models number other flows"
    return list(better.middle)


def _slowdowns(problem: Problem, a: Assignment) -> dict:
    plan = two_tier_plan("x", problem, a)
    ar = predict_allreduce(plan)
    bps = problem.fabric.link_bps()
    fluid = {j.id: slowdown(j, ar[j.id], bps) for j in problem.jobs}
    pred = predict_slowdowns(problem, a.parts)
    return {"fluid_mean": round(sum(fluid.values()) / len(fluid), 4),
            "fluid_worst": round(max(fluid.values()), 4),
            "prediction_error": round(max(abs(pred[j] / fluid[j] - 1) for j in fluid), 4)}


def evaluate(pattern: str, failures: str, fabric, jobs, repeats: int) -> dict:
    two = fabric.as_leaf_spine()  # the leaf-spine as the two-tier planners take it
    problem = Problem.build(two, jobs)
    new = [None] * len(problem.flows)
    greedy_ms = _ms(lambda: run_planner(problem, "greedy"), repeats)
    layer1 = {o: replan(problem, new, o, layer1_only=True) for o in ("flows", "jobs")}
    all_ms = {o: _ms(lambda o=o: replan(problem, new, o, layer1_only=True), repeats)
              for o in ("flows", "jobs")}
    # the last job posted on top of the others' routes (the request path's first plan)
    head = Problem.build(two, jobs[:-1])
    installed = _parts(head, replan(head, [None] * len(head.flows), "jobs", layer1_only=True))
    previous = installed + [None] * (len(problem.flows) - len(installed))
    last_ms = _ms(lambda: replan(problem, previous, "jobs", layer1_only=True), repeats)
    last = replan(problem, previous, "jobs", layer1_only=True)
    row = {"pattern": pattern, "failures": failures, "jobs": len(jobs),
           "inter_leaf_flows": len(problem), "greedy_ms": round(greedy_ms, 2),
           "request_path": {
               "auto_ms": round(all_ms["flows"], 2), "jobs_ms": round(all_ms["jobs"], 2),
               "auto_over_greedy": round(all_ms["flows"] / greedy_ms, 2),
               "jobs_over_greedy": round(all_ms["jobs"] / greedy_ms, 2),
               "last_job_ms": round(last_ms, 2),
               "last_job_over_greedy": round(last_ms / greedy_ms, 2),
               "layer1_optimal": bool(layer1["jobs"].info["optimal"]
                                      and last.info["optimal"]),
               "max_link_load": layer1["jobs"].info["max_link_load"],
               "lower_bound": layer1["jobs"].info["lower_bound"]},
           "off_path": {}, "planners": {}}
    after = {}
    for objective in ("flows", "jobs"):
        start = layer1[objective]
        t0 = time.perf_counter()
        spines = _off_path(fabric, two, problem, jobs, start, objective)
        ms = (time.perf_counter() - t0) * 1e3
        spines = align_spines(problem, spines, start.spines())
        before_rank = plan_rank(problem, start.spines(), objective)
        after_rank = plan_rank(problem, spines, objective)
        applied = worth_moving(before_rank, after_rank, objective)
        after[objective] = Assignment.unsplit(spines if applied else start.spines())
        row["off_path"][objective] = {
            "ms": round(ms, 1), "applied": applied,
            "moved_flows": sum(1 for a, b in zip(start.spines(), spines) if a != b)
            if applied else 0,
            "rank_before": [round(x, 4) for x in before_rank],
            "rank_after": [round(x, 4) for x in after_rank]}
    planners = {name: run_planner(problem, name)[0] for name in BASELINES}
    planners["auto request path"] = layer1["flows"]
    planners["auto after off-path"] = after["flows"]
    planners["jobs after off-path"] = after["jobs"]
    for name, a in planners.items():
        row["planners"][name] = _slowdowns(problem, a)
    p = row["planners"]
    base_mean = min(p[b]["fluid_mean"] for b in BASELINES)
    base_worst = min(p[b]["fluid_worst"] for b in BASELINES)
    row["jobs_mean_over_best_baseline"] = round(p["jobs after off-path"]["fluid_mean"]
                                                / base_mean, 4)
    row["jobs_worst_over_best_baseline"] = round(p["jobs after off-path"]["fluid_worst"]
                                                 / base_worst, 4)
    return row


def run(repeats: int = 5, small: bool = False) -> dict:
    rows = [evaluate(*c, repeats) for c in cases(small)]
    rp = [r["request_path"] for r in rows]
    return {
        "fabric": "16 leaves x 8 spines x 8 NICs" if small else
                  "64 leaves x 32 spines x 32 NICs",
        "rows": rows,
        "summary": {
            "request_path_over_greedy_max": max(max(x["auto_over_greedy"], x["jobs_over_greedy"],
                                                    x["last_job_over_greedy"]) for x in rp),
            "request_path_over_greedy_median": statistics.median(
                x["jobs_over_greedy"] for x in rp),
            "layer1_optimal": sum(x["layer1_optimal"] for x in rp), "cases": len(rows),
            "off_path_jobs_ms_max": max(r["off_path"]["jobs"]["ms"] for r in rows),
            "off_path_jobs_ms_median": statistics.median(r["off_path"]["jobs"]["ms"]
                                                         for r in rows),
            "off_path_jobs_applied": sum(r["off_path"]["jobs"]["applied"] for r in rows),
            "max_prediction_error": max(v["prediction_error"] for r in rows
                                        for v in r["planners"].values()),
            "jobs_mean_over_best_baseline_max": max(r["jobs_mean_over_best_baseline"]
                                                    for r in rows),
            "jobs_worst_over_best_baseline_max": max(r["jobs_worst_over_best_baseline"]
                                                     for r in rows)}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.anytime")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--small", action="store_true", help="16 x 8 instead of 64 x 32")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    doc = run(args.repeats, args.small)
    doc["wall_s"] = round(time.perf_counter() - t0, 1)
    text = json.dumps(doc, indent=1)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    print(json.dumps(doc["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
