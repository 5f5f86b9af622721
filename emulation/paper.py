"""The paper's evaluation grid in the fluid simulator: CSV and PNG plots under results/.

Grid (paper.md section 8.1): fabric 64 leaves x 32 spines x 32 NICs per leaf at 100 Gb/s; 1-5
jobs; ring size 2, 4, 8 (8 only up to 3 jobs); 0, 1, 4 or 8 failed spines; 11 iterations per
job; seed 1234 for the workloads; ECMP, edge colouring, simulated annealing, ILP, the greedy, and
our flow splitting. The default run is the whole grid (it fits in well under 20 minutes on 2
cores); ``--quick`` runs a small subset for smoke tests.

    python -m emulation.paper [--quick] [--iterations 11] [--workers 2] [--out results]
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

from controller.fabric import Fabric
from controller.plan import make_plan, planner_options
from emulation.simulate import simulate
from emulation.workloads import generate, paper_models

ALGORITHMS = ["ecmp", "edge-coloring", "annealing", "ilp", "greedy", "split"]
LABELS = {"ecmp": "ECMP", "edge-coloring": "Edge colouring", "annealing": "Sim. annealing",
          "ilp": "ILP", "greedy": "Greedy (ours)", "split": "Split (Ethereal-like)"}


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
    fabric = Fabric.generate(spines, leaves, nics, 100.0, cell["failed"])
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emulation.paper", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a 4-cell subset (smoke test)")
    ap.add_argument("--iterations", type=int, default=11)
    ap.add_argument("--algorithms", default=",".join(ALGORITHMS))
    ap.add_argument("--ilp-time-limit", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--scale", default="32,64,32", help="spines,leaves,nics-per-leaf")
    ap.add_argument("--out", default="results")
    args = ap.parse_args(argv)
    scale = tuple(int(x) for x in args.scale.split(","))
    algorithms = args.algorithms.split(",")
    os.makedirs(args.out, exist_ok=True)
    tasks = [(c, a) for c in grid(not args.quick) for a in algorithms]
    t0 = time.perf_counter()
    results = []
    with ProcessPoolExecutor(args.workers) as pool:
        futures = [pool.submit(run_cell, c, a, args.iterations, args.ilp_time_limit, scale)
                   for c, a in tasks]
        for fut in tqdm(as_completed(futures), total=len(futures), desc="paper grid",
                        unit="run", file=sys.stderr):
            results.append(fut.result())
    results.sort(key=lambda r: (tuple(r["cell"].values()), algorithms.index(r["algorithm"])))
    write_csv(results, args.out)
    from emulation.plots import paper_plots
    pngs = paper_plots(results, args.out)
    summary = {"cells": len(tasks) // len(algorithms), "runs": len(tasks),
               "iterations": args.iterations, "scale": scale,
               "wall_s": round(time.perf_counter() - t0, 1), "plots": pngs}
    with open(os.path.join(args.out, "paper_summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
