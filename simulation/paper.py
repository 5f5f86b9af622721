"""The paper's evaluation grid and a realistic grid in the fluid simulator: CSV and PNG plots
under results/.

**Paper grid** (paper.md section 8.1): fabric 64 leaves x 32 spines x 32 NICs per leaf at 100
Gb/s; 1-5 jobs; ring size 2, 4, 8 (8 only up to 3 jobs); 0, 1, 4 or 8 failed spines; 11
iterations per job; seed 1234 for the workloads; ECMP, edge colouring, simulated annealing, ILP,
the greedy, our flow splitting and ``auto``. Files ``paper_*``.

**Realistic grid** (``simulation.placement``): the same fabric with jobs on random free 8-NIC
servers at 80, 90 and 95% utilisation, with no failure, 3 single links down, 1 spine down, or 1
spine and 3 links down, two placements (seeds) each: 24 cells. Every algorithm plans all jobs of
a cell at once, each name as the controller runs it (``plan.make_plan``; ``equitable``, a
baseline, is the two-tier equitable colouring alone), and the fluid model runs one iteration
with every job starting together (the moment all jobs communicate). Per job: All-Reduce slowdown
= time / ideal (line rate, no sharing). Two bounds are computed in the same run: the unsplit
optimum of the max link load (the ILP, with its time limit; a cell where it is not proven is
marked and its best bound kept) and the fractional optimum (the LP of
``controller.planners.lp``, never below 1). With one job alone an unsplit routing's slowdown
equals its max link load (paper.md section 4.3), so these are the slowdown floors of unsplit and
split routing at the busiest link; ``vs_unsplit`` and ``vs_fractional`` divide each slowdown by
them. Beside the planners, ``spray``: per-packet spraying over every alive path
(``controller.planners.spray``, the fluid LP bound with every byte sent 1 / (1 - penalty) times,
``--spray-penalty``), its times by the shared prediction's coupled model (a sprayed flow is one
transfer; the fluid model's coupled mode agrees on the tests' cases and is about 100x slower:
10.8 s against 0.1 s on a 32 x 16 cell). Files ``realistic_*``.

The default run is both grids (about 10.5 + 19 minutes on 2 cores: ``wall_s`` in
docs/paper_summary.json and docs/realistic_summary.json); ``--only paper|realistic``
runs one; ``--quick`` runs a small subset of each (under 2 minutes).

    python -m simulation.paper [--quick] [--only realistic] [--iterations 11] [--workers 2]
                              [--ilp-time-limit 60] [--out results]
"""
from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

from tqdm import tqdm

from controller.jsonio import first_paragraph
from controller.model.clos import Clos
from controller.model.fluid import predict_allreduce
from controller.model.problem import Problem
from controller.planners import PLANNERS as REGISTERED
from controller.planners.lp import fractional_optimum
from controller.planners.plan import Plan, make_plan, planner_options, run_planner, two_tier_plan
from controller.planners.spray import DEFAULT_PENALTY, spray_plan
from simulation.placement import realistic, summary
from simulation.plots import unsplit_floor
from simulation.simulate import simulate
from simulation.workloads import generate, paper_models

ALGORITHMS = ["ecmp", "edge-coloring", "annealing", "ilp", "greedy", "split"]
if "auto" in REGISTERED:
    ALGORITHMS.append("auto")
# realistic grid only: planner variants run as (registered planner, its options)
VARIANTS = {"auto-jobs": ("auto", {"objective": "jobs", "ilp_time_limit": 0}),
            "split-unbounded": ("split", {"max_parts": None})}
REALISTIC_EXTRA = ["auto-jobs", "equitable", "split-unbounded", "spray"]
# realistic grid: failure patterns as (failed single links, failed spines)
FAILURES = {"none": (0, 0), "3 links": (3, 0), "1 spine": (0, 1), "1 spine + 3 links": (3, 1)}
UTILISATIONS = (0.8, 0.9, 0.95)
SEEDS = (1, 2)


def grid(full: bool = True) -> list[dict]:
    cells = []
    for failed, ring, jobs in itertools.product((0, 1, 4, 8), (2, 4, 8), (1, 2, 3, 4, 5)):
        if ring == 8 and jobs > 3:
            continue
        cells.append({"failed": failed, "ring": ring, "jobs": jobs})
    if not full:
        cells = [c for c in cells if c["jobs"] in (1, 3) and c["ring"] == 4 and c["failed"] in (0, 8)]
    return cells


def run_cell(cell: dict, algorithm: str, iterations: int, ilp_time_limit: float,
             scale: tuple[int, int, int]) -> dict:
    spines, leaves, nics = scale
    fabric = Clos.generate(spines, leaves, nics, 100.0, cell["failed"])
    jobs = generate(fabric, paper_models(cell["jobs"], cell["ring"]), cell["ring"], seed=1234)
    opts = planner_options(algorithm, 1234, 0, ilp_time_limit)
    first = make_plan(fabric, jobs, algorithm, **opts)  # all jobs at once: loads, ILP status
    t0 = time.perf_counter()
    result = simulate(fabric, jobs, algorithm, iterations, **opts)
    doc = first.to_dict()
    return {"cell": cell, "algorithm": algorithm, "sim_s": time.perf_counter() - t0,
            "models": {j.id: j.id.rsplit("-", 1)[0] for j in jobs},
            "jobs": result["jobs"], "planner_ms": result["planner_ms"],
            "max_link_load": doc["max_link_load"], "links_at_max": doc["links_at_max"],
            "lower_bound": doc["lower_bound"], "info": doc.get("info", {})}


def write_csv(results: list[dict], out: str) -> None:
    with open(os.path.join(out, "paper_allreduce.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["failed", "ring", "jobs", "algorithm", "job", "model", "iteration",
                    "allreduce_s", "ideal_s", "slowdown"])
        for r in results:
            c = r["cell"]
            for jid, j in r["jobs"].items():
                for it, t in enumerate(j["allreduce_s"]):
                    w.writerow([c["failed"], c["ring"], c["jobs"], r["algorithm"], jid,
                                r["models"][jid], it, f"{t:.6f}", f"{j['ideal_s']:.6f}",
                                f"{t / j['ideal_s']:.4f}"])
    with open(os.path.join(out, "paper_plans.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["failed", "ring", "jobs", "algorithm", "max_link_load", "links_at_max",
                    "lower_bound", "ilp_status", "ilp_gap", "planner_calls",
                    "planner_ms_median", "sim_s"])
        for r in results:
            c = r["cell"]
            ms = sorted(r["planner_ms"])
            w.writerow([c["failed"], c["ring"], c["jobs"], r["algorithm"], r["max_link_load"],
                        r["links_at_max"], r["lower_bound"], r["info"].get("status", ""),
                        r["info"].get("gap", ""), len(ms),
                        f"{ms[len(ms) // 2]:.3f}" if ms else "", f"{r['sim_s']:.2f}"])


def realistic_grid(full: bool = True) -> list[dict]:
    cells = [{"utilisation": u, "failures": name, "seed": seed}
             for name in FAILURES for u in UTILISATIONS for seed in SEEDS]
    if not full:
        cells = [c for c in cells if c["utilisation"] == 0.9 and c["seed"] == 1
                 and c["failures"] in ("none", "3 links")]
    return cells


def run_realistic_cell(cell: dict, algorithms: list[str], ilp_time_limit: float,
                       scale: tuple[int, int, int], penalty: float = DEFAULT_PENALTY) -> dict:
    """One realistic cell: bounds (ILP, LP), then every algorithm's plan of all jobs at once and
    its All-Reduce times in the fluid model (one iteration, every job starting together)."""
    spines, leaves, nics = scale
    links, dead = FAILURES[cell["failures"]]
    fabric, jobs = realistic(spines, leaves, cell["utilisation"], cell["seed"], links, dead, nics)
    problem = Problem.build(fabric.as_leaf_spine(), jobs)  # the two-tier planners' instance
    ilp, ilp_ms = run_planner(problem, "ilp", time_limit=ilp_time_limit)
    t0 = time.perf_counter()
    lp = fractional_optimum(problem)
    lp_ms = (time.perf_counter() - t0) * 1e3
    bounds = {"unsplit": {"best": ilp.info["objective"], "bound": ilp.info["bound"],
                          "status": ilp.info["status"],
                          "proven": ilp.info["status"] == "optimal", "ms": round(ilp_ms, 1)},
              "fractional": {"value": round(lp, 9), "ms": round(lp_ms, 1)}}
    ideal = {j.id: j.ideal_allreduce_s(fabric.link_bps()) for j in jobs}
    out = {}
    for alg in algorithms:
        if alg == "spray":
            plan = spray_plan(fabric, jobs, penalty)
            times = plan.predicted_times()
            out[alg] = {"max_link_load": plan.to_dict()["max_link_load"],
                        "links_at_max": plan.to_dict()["links_at_max"],
                        "planner_ms": round(plan.runtime_ms, 3), "info": _brief(plan.routing.info),
                        "jobs": {jid: {"allreduce_s": t, "ideal_s": ideal[jid],
                                       "slowdown": t / ideal[jid]} for jid, t in times.items()}}
            continue
        if alg == "ilp":  # the bound's run: the same planner and time limit
            plan = two_tier_plan(alg, problem, ilp, ilp_ms, fabric)
        elif alg == "equitable":  # a baseline: the two-tier equitable colouring alone
            plan = equitable_plan(problem, fabric)
        else:  # the name as the controller runs it
            base, opts = VARIANTS[alg] if alg in VARIANTS else (
                alg, planner_options(alg, 1234, 0, ilp_time_limit))
            plan = make_plan(fabric, jobs, base, **opts)
        doc = plan.to_dict()
        times = predict_allreduce(plan)
        out[alg] = {"max_link_load": doc["max_link_load"], "links_at_max": doc["links_at_max"],
                    "planner_ms": round(plan.runtime_ms, 3), "info": _brief(plan.routing.info),
                    "jobs": {jid: {"allreduce_s": t, "ideal_s": ideal[jid],
                                   "slowdown": t / ideal[jid]} for jid, t in times.items()}}
    return {"cell": cell, "placement": summary(fabric, jobs), "flows": len(problem),
            "lower_bound": problem.lower_bound(), "bounds": bounds, "algorithms": out,
            "models": {j.id: j.id.rsplit("-", 1)[0] for j in jobs},
            "ring": {j.id: len(j.rings[0]) for j in jobs}}


def equitable_plan(problem: Problem, fabric: Clos) -> Plan:
    """The baseline ``equitable``: the two-tier equitable colouring of ``problem`` alone (no
    registry name runs it), as the plan of ``fabric``, its planner time in ``runtime_ms``."""
    from controller.planners.equitable import equitable
    t0 = time.perf_counter()
    assignment = equitable(problem)
    return two_tier_plan("equitable", problem, assignment, (time.perf_counter() - t0) * 1e3,
                         fabric)


def _brief(info: dict) -> dict:
    """The scalar fields of a planner's info (stage, optimal, split counts, ILP status...)."""
    return {k: v for k, v in info.items() if isinstance(v, (str, int, float, bool)) or v is None}


def write_realistic_csv(results: list[dict], out: str) -> None:
    with open(os.path.join(out, "realistic_allreduce.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["utilisation", "failures", "seed", "algorithm", "job", "model", "ring",
                    "allreduce_s", "ideal_s", "slowdown", "vs_unsplit", "vs_fractional",
                    "unsplit_proven"])
        for r in results:
            c, floor, frac = r["cell"], unsplit_floor(r), r["bounds"]["fractional"]["value"]
            for alg, a in r["algorithms"].items():
                for jid, j in a["jobs"].items():
                    w.writerow([c["utilisation"], c["failures"], c["seed"], alg, jid,
                                r["models"][jid], r["ring"][jid], f"{j['allreduce_s']:.6f}",
                                f"{j['ideal_s']:.6f}", f"{j['slowdown']:.4f}",
                                f"{j['slowdown'] / floor:.4f}", f"{j['slowdown'] / frac:.4f}",
                                r["bounds"]["unsplit"]["proven"]])
    with open(os.path.join(out, "realistic_plans.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["utilisation", "failures", "seed", "jobs", "busy_servers", "flows",
                    "algorithm", "max_link_load", "links_at_max", "planner_ms", "unsplit_opt",
                    "unsplit_bound", "unsplit_proven", "fractional_opt", "worst_slowdown",
                    "stage", "optimal", "split_flows", "subflows"])
        for r in results:
            c, u = r["cell"], r["bounds"]["unsplit"]
            for alg, a in r["algorithms"].items():
                info = a["info"]
                w.writerow([c["utilisation"], c["failures"], c["seed"], r["placement"]["jobs"],
                            r["placement"]["busy_servers"], r["flows"], alg, a["max_link_load"],
                            a["links_at_max"], a["planner_ms"], u["best"], u["bound"],
                            u["proven"], r["bounds"]["fractional"]["value"],
                            f"{max(j['slowdown'] for j in a['jobs'].values()):.4f}",
                            info.get("stage", ""), info.get("optimal", ""),
                            info.get("split_flows", ""), info.get("subflows", "")])


def realistic_table(results: list[dict], algorithms: list[str]) -> dict:
    """Per algorithm: mean All-Reduce slowdown over (cell, job) and of each cell's worst job,
    each also divided by the cell's two bounds (``vs_*``: every job; ``worst_vs_*``: the worst
    job, the one the bounds are about)."""
    table = {}
    for alg in algorithms:
        sl = [j["slowdown"] for r in results for j in r["algorithms"][alg]["jobs"].values()]
        vu = [j["slowdown"] / unsplit_floor(r) for r in results
              for j in r["algorithms"][alg]["jobs"].values()]
        vf = [j["slowdown"] / r["bounds"]["fractional"]["value"] for r in results
              for j in r["algorithms"][alg]["jobs"].values()]
        worst = [max(j["slowdown"] for j in r["algorithms"][alg]["jobs"].values()) for r in results]
        worst_u = [w / unsplit_floor(r) for w, r in zip(worst, results)]
        worst_f = [w / r["bounds"]["fractional"]["value"] for w, r in zip(worst, results)]
        at_opt = sum(1 for r in results
                     if r["algorithms"][alg]["max_link_load"] <= unsplit_floor(r) + 1e-9)
        table[alg] = {"slowdown_mean": round(sum(sl) / len(sl), 4),
                      "worst_job_slowdown_mean": round(sum(worst) / len(worst), 4),
                      "slowdown_max": round(max(sl), 4),
                      "vs_unsplit_mean": round(sum(vu) / len(vu), 4),
                      "vs_fractional_mean": round(sum(vf) / len(vf), 4),
                      "worst_vs_unsplit_mean": round(sum(worst_u) / len(worst_u), 4),
                      "worst_vs_fractional_mean": round(sum(worst_f) / len(worst_f), 4),
                      "cells_at_unsplit_optimum": at_opt, "cells": len(results)}
    return table


def _pool_run(pool, fn, tasks: list[tuple], desc: str) -> list:
    futures = [pool.submit(fn, *t) for t in tasks]
    results = []
    for fut in tqdm(as_completed(futures), total=len(futures), desc=desc, unit="run",
                    file=sys.stderr):
        results.append(fut.result())
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simulation.paper",
                                 description=first_paragraph(__doc__))
    ap.add_argument("--quick", action="store_true", help="a small subset of each grid (smoke test)")
    ap.add_argument("--only", choices=("paper", "realistic"), help="run one grid only")
    ap.add_argument("--iterations", type=int, default=11)
    ap.add_argument("--algorithms", default=",".join(ALGORITHMS))
    ap.add_argument("--ilp-time-limit", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--scale", default="32,64,32", help="spines,leaves,nics-per-leaf")
    ap.add_argument("--spray-penalty", type=float, default=DEFAULT_PENALTY,
                    help="spray: the fraction of the bytes on the wire lost to retransmission "
                         "and reordering")
    ap.add_argument("--out", default="results")
    args = ap.parse_args(argv)
    scale = tuple(int(x) for x in args.scale.split(","))
    algorithms = args.algorithms.split(",")
    unknown = [a for a in algorithms if a not in REGISTERED and a not in VARIANTS
               and a not in ("equitable", "spray")]
    if unknown:
        print(f"error: unknown algorithm {unknown[0]!r}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    from simulation.plots import paper_plots, realistic_plots
    report = {}
    with ProcessPoolExecutor(args.workers) as pool:
        if args.only in (None, "paper"):
            t0 = time.perf_counter()
            tasks = [(c, a, args.iterations, args.ilp_time_limit, scale)
                     for c in grid(not args.quick) for a in algorithms if a in REGISTERED]
            results = _pool_run(pool, run_cell, tasks, "paper grid")
            results.sort(key=lambda r: (tuple(r["cell"].values()),
                                        algorithms.index(r["algorithm"])))
            write_csv(results, args.out)
            pngs = paper_plots(results, args.out)
            summary_doc = {"cells": len(tasks) // len(algorithms), "runs": len(tasks),
                           "iterations": args.iterations, "scale": scale,
                           "wall_s": round(time.perf_counter() - t0, 1), "plots": pngs}
            with open(os.path.join(args.out, "paper_summary.json"), "w") as fh:
                json.dump(summary_doc, fh, indent=1)
            report["paper"] = summary_doc
        if args.only in (None, "realistic"):
            t0 = time.perf_counter()
            cells = realistic_grid(not args.quick)
            real_algs = algorithms + [a for a in REALISTIC_EXTRA if a not in algorithms
                                      and args.algorithms == ",".join(ALGORITHMS)]
            tasks = [(c, real_algs, args.ilp_time_limit, scale, args.spray_penalty) for c in cells]
            results = _pool_run(pool, run_realistic_cell, tasks, "realistic grid")
            order = {json.dumps(c, sort_keys=True): i for i, c in enumerate(cells)}
            results.sort(key=lambda r: order[json.dumps(r["cell"], sort_keys=True)])
            write_realistic_csv(results, args.out)
            pngs = realistic_plots(results, args.out)
            doc = {"cells": len(cells), "scale": scale, "ilp_time_limit_s": args.ilp_time_limit,
                   "unsplit_proven_cells": sum(r["bounds"]["unsplit"]["proven"] for r in results),
                   "table": realistic_table(results, real_algs),
                   "wall_s": round(time.perf_counter() - t0, 1), "plots": pngs}
            with open(os.path.join(args.out, "realistic_summary.json"), "w") as fh:
                json.dump(doc, fh, indent=1)
            os.makedirs(os.path.join(args.out, "raw"), exist_ok=True)  # not kept in git
            with open(os.path.join(args.out, "raw", "realistic_cells.json"), "w") as fh:
                json.dump(results, fh)
            report["realistic"] = doc
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
