"""Planner benchmarks (``make bench``): JSON under bench/, figures as ratios to a baseline run in
the same process, since these machines are shared and noisy.

1. Greedy planning time on the largest cells of the paper grid (64 x 32, 2048 NICs), median
   over repeats, as a ratio to ECMP's (a hash per flow) in the same run.
2. Greedy on 256 leaves x 128 spines with 32,768 flows (every NIC in a ring of 8, random
   placement), same ratio, and the peak memory of that run.
3. Greedy's max link load against the ILP on every cell of the paper grid (all jobs at once),
   and on harder random-placement instances where the greedy is not always optimal: cells where
   they differ are listed.
4. Flow splitting against the best unsplit routing with 8 of 32 spines failed, in the fluid
   simulator (All-Reduce time ratio).
5. ``auto`` (when registered): planning time on the paper's largest cells and on realistic
   64 x 32 clusters (``simulation.placement``: 90% of the 8-NIC servers busy, no failure, 3
   single links, 1 spine, 1 spine and 3 links down), median over repeats as a ratio to the
   greedy in the same run, with its ILP stage off (what answers a request) and with its default
   budget; on a 256 x 128 cluster with about 32,000 flows; and how often it proves optimality
   without the ILP (``info["optimal"]``, ``info["stage"]``) on the paper grid and on realistic
   clusters.
6. ``split`` on realistic clusters with failures and on the paper's failed-spine cells: its max
   link load minus the LP's fractional optimum (computed apart), its split flows and parts, and
   its planning time (without a bound on parts: the LP optimum).
7. Layer 2 and the jobs (``bench_layer2``, ``benchmarks.layer2``): links at the max load
   against an exact layer-2 MILP, mean and worst job slowdown per algorithm, ``split``'s gain per
   extra part per flow.
8. The other traffic patterns (``bench_patterns``, ``benchmarks.anytime``): all-to-all,
   pipelines, 3D-parallel models and 100x byte mixes at 64 x 32, with no failure, single links
   and a spine down: the request path of auto and jobs (layer 1 only) as a ratio to the greedy,
   whether it is layer-1 optimal, the off-path stage after it, the prediction's error against
   the fluid model and the mean and worst job slowdown per planner.
   ``--only patterns`` (or ``--only layer2``, section 7) runs one section alone and replaces
   it in an existing ``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import sys
import time
import tracemalloc

import numpy as np

from controller.model.clos import Clos
from controller.model.jobs import Job
from controller.model.loads import load_summary
from controller.model.problem import Problem
from controller.planners import PLANNERS
from controller.planners.lp import fractional_optimum
from controller.planners.plan import run_planner
from simulation.paper import FAILURES, grid
from simulation.placement import cluster, realistic
from simulation.simulate import simulate
from simulation.workloads import generate, paper_models

HAS_AUTO = "auto" in PLANNERS


def problem_of(fabric: Clos, jobs: list[Job]) -> Problem:
    """The two-tier planners' instance of ``jobs`` on the leaf-spine ``fabric`` (its two-tier
    view, ``as_leaf_spine``)."""
    return Problem.build(fabric.as_leaf_spine(), jobs)


def _median_ms(problem: Problem, algorithm: str, repeats: int, **opts) -> float:
    return statistics.median(run_planner(problem, algorithm, **opts)[1] for _ in range(repeats))


def _alpha(problem: Problem, algorithm: str, **opts) -> tuple[float, dict]:
    from controller.model.loads import load_summary
    a, _ = run_planner(problem, algorithm, **opts)
    return load_summary(problem, a)["max_link_load"], a.info


def bench_paper_scale(repeats: int) -> list[dict]:
    out = []
    for failed, ring, jobs in ((0, 4, 5), (8, 4, 5), (0, 8, 3), (8, 8, 3)):
        fabric = Clos.generate(32, 64, 32, 100.0, failed)
        problem = problem_of(fabric, generate(fabric, paper_models(jobs, ring), ring))
        greedy = _median_ms(problem, "greedy", repeats)
        ecmp = _median_ms(problem, "ecmp", repeats)
        row = {"cell": {"failed": failed, "ring": ring, "jobs": jobs}, "flows": len(problem),
               "greedy_ms_median": round(greedy, 3), "ecmp_ms_median": round(ecmp, 3),
               "greedy_over_ecmp": round(greedy / ecmp, 3)}
        if HAS_AUTO:
            row.update(_auto_timing(problem, repeats, greedy))
        out.append(row)
    return out


def _auto_timing(problem: Problem, repeats: int, greedy_ms: float) -> dict:
    """auto's median time with the ILP stage off and with its default budget, as ratios to the
    greedy's median in the same run, and what it reported."""
    fast = _median_ms(problem, "auto", repeats, ilp_time_limit=0)
    full = _median_ms(problem, "auto", max(1, repeats // 5))
    a, _ = run_planner(problem, "auto")
    return {"auto_ms_median": round(fast, 3), "auto_over_greedy": round(fast / greedy_ms, 3),
            "auto_with_ilp_ms_median": round(full, 3),
            "auto_stage": a.info.get("stage"), "auto_optimal": a.info.get("optimal")}


def realistic_instances(spines: int = 32, leaves: int = 64, seeds=(1, 2, 3)) -> list[dict]:
    """Realistic clusters: every failure pattern of the realistic grid, 90% utilisation."""
    out = []
    for name, (links, dead) in FAILURES.items():
        for seed in seeds:
            fabric, jobs = realistic(spines, leaves, 0.9, seed, links, dead)
            out.append({"failures": name, "seed": seed, "problem": problem_of(fabric, jobs)})
    return out


def bench_auto_realistic(repeats: int) -> list[dict]:
    rows = []
    for inst in realistic_instances():
        problem = inst["problem"]
        greedy = _median_ms(problem, "greedy", repeats)
        g, _ = _alpha(problem, "greedy")
        row = {"failures": inst["failures"], "seed": inst["seed"], "flows": len(problem),
               "greedy_ms_median": round(greedy, 3), "greedy_max_load": g}
        row.update(_auto_timing(problem, repeats, greedy))
        row["auto_max_load"], _ = _alpha(problem, "auto")
        rows.append(row)
    return rows


def bench_auto_large(repeats: int) -> dict:
    fabric, jobs = realistic(128, 256, 0.98, 1, nics_per_leaf=128)
    problem = problem_of(fabric, jobs)
    greedy = _median_ms(problem, "greedy", repeats)
    fast = _median_ms(problem, "auto", repeats, ilp_time_limit=0)
    a, _ = run_planner(problem, "auto", ilp_time_limit=0)
    return {"fabric": "256 leaves x 128 spines x 128 NICs, realistic placement at 98%",
            "jobs": len(jobs), "flows": len(problem.flows), "inter_leaf_flows": len(problem),
            "greedy_ms_median": round(greedy, 1), "auto_ms_median": round(fast, 1),
            "auto_over_greedy": round(fast / greedy, 3), "auto_stage": a.info.get("stage"),
            "auto_optimal": a.info.get("optimal"),
            "auto_max_load": load_summary(problem, a)["max_link_load"],
            "lower_bound": problem.lower_bound()}


def bench_auto_proofs() -> dict:
    """How often auto proves optimality with its ILP stage off, and which stage answered."""
    def tally(problems):
        stages: dict[str, int] = {}
        proved = 0
        for problem in problems:
            a, _ = run_planner(problem, "auto", ilp_time_limit=0)
            proved += bool(a.info.get("optimal"))
            stages[a.info.get("stage", "?")] = stages.get(a.info.get("stage", "?"), 0) + 1
        return {"instances": len(problems), "proved_optimal": proved, "stages": stages}
    paper = []
    for cell in grid(True):
        fabric = Clos.generate(32, 64, 32, 100.0, cell["failed"])
        paper.append(problem_of(fabric, generate(fabric, paper_models(cell["jobs"], cell["ring"]),
                                                 cell["ring"])))
    real = [inst["problem"] for inst in realistic_instances(seeds=range(1, 6))]
    small, sparse = [], []
    for seed in range(20):
        fabric = Clos.generate(8, 16, 8, 100.0, failed_spines=seed % 3)
        small.append(problem_of(fabric, random_rings(fabric, 4, seed)))
        # 6 NICs per leaf over 8 spines and 6 single links down: the bound is 1 and the
        # construction often misses it, so repair (or the ILP) has work to do
        fabric = cluster(8, 16, 6, np.random.default_rng(seed), failed_links=6)
        sparse.append(problem_of(fabric, random_rings(fabric, 4, seed)))
    return {"paper_grid": tally(paper), "realistic_64x32": tally(real),
            "random_rings_16x8": tally(small), "random_rings_16x8_6nics_6_links_down": tally(sparse)}


def bench_split_lp() -> list[dict]:
    """split against the LP optimum computed apart, with its split counts and time."""
    cases = [(f"realistic {i['failures']} seed {i['seed']}", i["problem"])
             for i in realistic_instances(seeds=(1, 2)) if i["failures"] != "none"]
    for failed, ring, jobs in ((1, 4, 5), (8, 4, 5)):
        fabric = Clos.generate(32, 64, 32, 100.0, failed)
        cases.append((f"paper failed {failed} ring {ring} jobs {jobs}",
                      problem_of(fabric, generate(fabric, paper_models(jobs, ring), ring))))
    rows = []
    for name, problem in cases:
        a, ms = run_planner(problem, "split", max_parts=None)  # the LP optimum needs any parts
        alpha = load_summary(problem, a)["max_link_load"]
        lp = fractional_optimum(problem)
        rows.append({"instance": name, "flows": len(problem), "method": a.info.get("method"),
                     "max_link_load": alpha, "lp_optimum": round(lp, 9),
                     "distance": round(alpha - lp, 9), "split_flows": a.info["split_flows"],
                     "parts": a.info["subflows"], "max_parts": a.info["max_parts"],
                     "free_flows": a.info.get("free_flows"), "split_ms": round(ms, 1)})
    return rows


def random_rings(fabric: Clos, ring: int, seed: int) -> list[Job]:
    hosts = list(fabric.hosts)
    random.Random(seed).shuffle(hosts)
    rings = [hosts[i:i + ring] for i in range(0, len(hosts) - ring + 1, ring)]
    return [Job("random", rings=rings, ring_bytes=1e9)]


def bench_layer2(ilp_time_limit: float, repeats: int) -> dict:
    """Issue 16's evidence (``benchmarks.layer2``): per algorithm on realistic 64 x 32
    clusters (every failure pattern there, 80 and 95% busy, seed 1) the max load, links at it
    against the exact layer-2 MILP, mean and worst job slowdown, time as a ratio to the
    greedy; and ``split`` with 1-4 and any parts per flow on the failure cells at 95%."""
    from benchmarks import layer2 as l2
    rows, parts = [], []
    for failures in l2.FAILURES:
        for u in (0.8, 0.95):
            inst = l2.instance(failures, u, 1)
            rows.append(l2.evaluate(inst, ilp_time_limit, repeats))
            if u == 0.95 and failures != "none":
                parts.append(l2.split_parts(inst))
    return {"rows": rows, "summary": l2.summarise(rows), "targets": l2.targets(rows),
            "split_parts": parts}


def bench_large(repeats: int) -> dict:
    fabric = Clos.generate(128, 256, 128)
    two = fabric.as_leaf_spine()  # the two-tier view built before the trace: planning only
    tracemalloc.start()
    problem = Problem.build(two, random_rings(fabric, 8, 1))
    run_planner(problem, "greedy")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    greedy = _median_ms(problem, "greedy", repeats)
    ecmp = _median_ms(problem, "ecmp", repeats)
    return {"fabric": "256 leaves x 128 spines x 128 NICs", "flows": len(problem.flows),
            "inter_leaf_flows": len(problem),
            "greedy_ms_median": round(greedy, 1), "ecmp_ms_median": round(ecmp, 1),
            "greedy_over_ecmp": round(greedy / ecmp, 3),
            "peak_traced_mib": round(peak / 2**20, 1)}


def bench_optimality(ilp_time_limit: float) -> dict:
    cells, differ = [], []
    for cell in grid(True):
        fabric = Clos.generate(32, 64, 32, 100.0, cell["failed"])
        problem = problem_of(fabric, generate(fabric, paper_models(cell["jobs"], cell["ring"]),
                                              cell["ring"]))
        g, _ = _alpha(problem, "greedy")
        i, info = _alpha(problem, "ilp", time_limit=ilp_time_limit)
        row = {**cell, "greedy": g, "ilp": i, "status": info["status"], "gap": info["gap"]}
        cells.append(row)
        if info["status"] == "optimal" and g != i:
            differ.append(row)
    random_cells, random_differ = [], []
    for seed in range(10):
        fabric = Clos.generate(8, 16, 8, 100.0, failed_spines=seed % 3)
        problem = problem_of(fabric, random_rings(fabric, 4, seed))
        g, _ = _alpha(problem, "greedy")
        i, info = _alpha(problem, "ilp", time_limit=ilp_time_limit)
        row = {"seed": seed, "failed": seed % 3, "flows": len(problem), "greedy": g, "ilp": i,
               "lower_bound": problem.lower_bound(), "status": info["status"],
               "gap": round(info["gap"], 3), "ilp_ms": round(info["wall_ms"], 1)}
        random_cells.append(row)
        if info["status"] == "optimal" and g != i:
            random_differ.append(row)
    proved = sum(1 for c in cells if c["status"] == "optimal")
    return {"paper_grid": {"cells": len(cells), "ilp_proved_optimal": proved,
                           "greedy_equals_ilp_where_proved": not differ, "differing_cells": differ},
            "random_rings_16x8": {"instances": random_cells,
                                  "greedy_equals_ilp_where_proved": not random_differ,
                                  "differing": len(random_differ)}}


def bench_split(iterations: int) -> list[dict]:
    out = []
    for ring, jobs in ((2, 1), (4, 1), (4, 3), (8, 2)):
        fabric = Clos.generate(32, 64, 32, 100.0, 8)
        workload = generate(fabric, paper_models(jobs, ring), ring)
        means = {}
        for alg in ("greedy", "edge-coloring", "split"):
            r = simulate(fabric, workload, alg, iterations)
            times = [t / j["ideal_s"] for j in r["jobs"].values() for t in j["allreduce_s"]]
            means[alg] = statistics.mean(times)
        best = min(means["greedy"], means["edge-coloring"])
        out.append({"cell": {"failed": 8, "ring": ring, "jobs": jobs},
                    "slowdown_mean": {k: round(v, 4) for k, v in means.items()},
                    "split_over_best_unsplit": round(means["split"] / best, 4)})
    return out


def bench_patterns(repeats: int) -> dict:
    """Section 8 of the module docstring (``benchmarks.anytime.run``)."""
    from benchmarks import anytime
    return anytime.run(repeats)


def pattern_targets(patterns: dict) -> dict:
    s = patterns["summary"]
    return {
        "request_path_over_greedy<=2": {"value": s["request_path_over_greedy_max"],
                                        "ok": s["request_path_over_greedy_max"] <= 2},
        "request_path_layer1_optimal": {"value": f"{s['layer1_optimal']}/{s['cases']}",
                                        "ok": s["layer1_optimal"] == s["cases"]},
        "prediction_within_5%_of_fluid": {"value": s["max_prediction_error"],
                                          "ok": s["max_prediction_error"] <= 0.05}}


def _only(args) -> int:
    """``--only``: run one section (patterns or layer2) and replace it, and its targets, in
    an existing ``--out``."""
    t0 = time.perf_counter()
    if args.only == "patterns":
        section = bench_patterns(max(5, args.repeats // 3))  # sub-ms timings: 10 repeats
        targets = pattern_targets(section)
    else:
        section = bench_layer2(min(args.ilp_time_limit, 30.0), max(3, args.repeats // 6))
        targets = section["targets"]
    section["wall_s"] = round(time.perf_counter() - t0, 1)
    doc = {}
    if os.path.exists(args.out):
        with open(args.out) as fh:
            doc = json.load(fh)
    doc[args.only] = section
    doc.setdefault("targets", {}).update(targets)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(doc, fh, indent=1)
    print(json.dumps(targets, indent=1))
    print(f"written to {args.out} ({args.only} section only)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.planner", description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--ilp-time-limit", type=float, default=60.0)
    ap.add_argument("--out", default="bench/planner.json")
    ap.add_argument("--only", choices=["patterns", "layer2"],
                    help="run one section and replace it in an existing --out")
    args = ap.parse_args(argv)
    if args.only:
        return _only(args)
    t0 = time.perf_counter()
    paper = bench_paper_scale(args.repeats)
    large = bench_large(max(3, args.repeats // 6))
    optimality = bench_optimality(args.ilp_time_limit)
    split = bench_split(3)
    split_lp = bench_split_lp()
    layer2 = bench_layer2(min(args.ilp_time_limit, 30.0), max(3, args.repeats // 6))
    patterns = bench_patterns(max(5, args.repeats // 3))  # sub-ms timings: 10 repeats
    auto = {}
    if HAS_AUTO:
        auto = {"realistic_64x32": bench_auto_realistic(args.repeats),
                "large": bench_auto_large(max(3, args.repeats // 6)),
                "proofs_without_ilp": bench_auto_proofs()}
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    worst_paper = max(c["greedy_ms_median"] for c in paper)
    doc = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "paper_scale": paper, "large": large, "optimality": optimality, "split": split,
        "split_lp": split_lp, "auto": auto, "layer2": layer2, "patterns": patterns,
        "peak_rss_mib": round(rss_mib, 1),
        "targets": {
            "greedy_paper_scale_median_ms<=10": {"value": worst_paper, "ok": worst_paper <= 10},
            "greedy_32768_flows_ms<1000": {"value": large["greedy_ms_median"],
                                           "ok": large["greedy_ms_median"] < 1000},
            "greedy_equals_ilp_on_paper_grid": {
                "value": optimality["paper_grid"]["greedy_equals_ilp_where_proved"],
                "ok": optimality["paper_grid"]["greedy_equals_ilp_where_proved"]},
            "split_over_best_unsplit<=0.75": {
                "value": max(s["split_over_best_unsplit"] for s in split),
                "ok": max(s["split_over_best_unsplit"] for s in split) <= 0.75},
            "split_equals_lp_optimum_within_1e-6": {
                "value": max(abs(r["distance"]) for r in split_lp),
                "ok": max(abs(r["distance"]) for r in split_lp) <= 1e-6},
            "peak_memory_mib<2048": {"value": round(rss_mib, 1), "ok": rss_mib < 2048},
        },
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    if auto:
        worst_paper_auto = max(c["auto_ms_median"] for c in paper)
        worst_real = max(r["auto_ms_median"] for r in auto["realistic_64x32"])
        doc["targets"].update({
            "auto_paper_scale_median_ms<=10": {"value": worst_paper_auto,
                                               "ok": worst_paper_auto <= 10},
            "auto_realistic_64x32_median_ms<=10": {"value": worst_real, "ok": worst_real <= 10},
            "auto_32k_flows_ms<1000": {"value": auto["large"]["auto_ms_median"],
                                       "ok": auto["large"]["auto_ms_median"] < 1000},
            "auto_256x128_ms<200": {"value": auto["large"]["auto_ms_median"],
                                    "ok": auto["large"]["auto_ms_median"] < 200},
            "auto_never_worse_than_greedy_realistic": {
                "value": all(r["auto_max_load"] <= r["greedy_max_load"]
                             for r in auto["realistic_64x32"]),
                "ok": all(r["auto_max_load"] <= r["greedy_max_load"]
                          for r in auto["realistic_64x32"])},
        })
    doc["targets"].update({k: v for k, v in layer2["targets"].items()})
    doc["targets"].update(pattern_targets(patterns))
    doc["wall_s"] = round(time.perf_counter() - t0, 1)
    write_result(doc, args.out)
    return 0


def write_result(doc: dict, path: str) -> None:
    """A benchmark's JSON to ``path`` (folders made), its targets and the path on stdout."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=1)
    print(json.dumps(doc["targets"], indent=1))
    print(f"written to {path}")


if __name__ == "__main__":
    sys.exit(main())
