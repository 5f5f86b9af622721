"""The three-tier and multi-plane grid of ``make paper``: jobs of the paper's models on random
free servers of fat-trees and two-plane leaf-spines, every path planner against both ECMPs.

**Fabrics** (100 Gb/s on every tier): a k = 16 fat-tree (16 pods, 128 leaves of 8 NICs, 64
aggregation switches, 64 cores: full bisection); the same with 4 cores per group instead of 8
(the core tier 2:1 oversubscribed); a two-plane leaf-spine of 32 leaves x 16 spines per plane
with 16 NICs per leaf (every NIC one port per plane).
**Jobs**: ``simulation.placement.place`` (the realistic grid's model: GPT-3, BLOOM and
LLaMA2-70B data-parallel rings over 8-NIC servers chosen at random among the free ones) at 80 and
90% of the servers. **Failures**: none, or one core (spine of plane 0) down plus 3 random links
of the leaf tier. Two seeds per cell: 3 x 2 x 2 x 2 = 24 cells.
**Algorithms**: ``ecmp`` (an independent hash per tier), ``ecmp-polarised`` (one hash, as Open
vSwitch's select groups), ``greedy``, ``edge-coloring`` (tier by tier) and ``auto``; beside them
``spray``, per-packet spraying over every alive path (``controller.planners.spray``: the fluid
LP bound, every byte sent 1 / (1 - penalty) times, ``--spray-penalty``). Every algorithm plans
all jobs of a cell at once; the iteration model (``predict_clos_times``, checked against
SimGrid; for spray its coupled form, a sprayed flow one transfer) gives each job's All-Reduce
time with every job communicating together; slowdown = that time / the ideal (line rate, no
sharing).

Files under ``--out`` (``results/``): ``clos_jobs.csv`` (a row per cell, algorithm and job),
``clos_summary.json`` (per algorithm: mean, median, p95 and worst slowdown; max load / lower
bound; planning ms; ``spray``: its penalty, its mean slowdown at other penalties, and per fabric
and failure pattern the break-even penalty against each algorithm), ``clos_slowdown_cdf.png``.

    python -m simulation.paper_clos [--quick] [--spray-penalty P] [--out results]
"""
from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import sys
import time

import numpy as np

from controller.model.clos import Clos
from controller.model.iteration import predict_clos_times
from controller.planners.plan import make_plan
from controller.planners.spray import DEFAULT_PENALTY, spray_plan
from simulation.placement import place

ALGORITHMS = ("ecmp", "ecmp-polarised", "greedy", "edge-coloring", "auto", "spray")
SENSITIVITY = (0.0, 0.01, 0.02, 0.05, 0.1)  # spray penalties the summary shows
FABRICS = {
    "fat-tree k=16": lambda: Clos.fat_tree(16),
    "fat-tree k=16, core 2:1": lambda: Clos.fat_tree(16, cores_per_group=4),
    "2 planes, 32x16": lambda: Clos.leaf_spine(16, 32, 16, planes=2),
}
UTILISATIONS = (0.8, 0.9)
FAILURES = ("none", "1 core + 3 links")


def with_failures(fabric: Clos, rng: np.random.Generator) -> Clos:
    """One core (spine of plane 0) and 3 random leaf-tier links down."""
    doc = fabric.to_dict()
    plane = fabric.planes[0]
    top = [c for g in plane.cores for c in g] or plane.aggs[0]
    dead = top[int(rng.integers(len(top)))]
    links = [(l, a) for i, l in enumerate(plane.leaves) for a in plane.aggs[plane.pod_of_leaf[i]]
             if a != dead]
    doc["down"] = [list(links[int(k)]) for k in rng.choice(len(links), 3, replace=False)]
    doc["down_switches"] = [dead]
    return Clos.from_dict(doc)


def cell(fabric_name: str, utilisation: float, failure: str, seed: int,
         penalty: float = DEFAULT_PENALTY) -> list[dict]:
    rng = np.random.Generator(np.random.PCG64(seed))
    fabric = FABRICS[fabric_name]()
    if failure != "none":
        fabric = with_failures(fabric, rng)
    jobs = place(fabric, utilisation, rng)
    bps = fabric.link_bps("host")
    rows = []
    for alg in ALGORITHMS:
        if alg == "spray":
            plan = spray_plan(fabric, jobs, penalty)
            times = plan.predicted_times()
        else:
            plan = make_plan(fabric, jobs, alg, salt=seed)
            times = predict_clos_times(plan.problem, plan.routing)
        doc = plan.to_dict()
        for job in jobs:
            rows.append({"fabric": fabric_name, "utilisation": utilisation, "failure": failure,
                         "seed": seed, "algorithm": alg, "job": job.id,
                         "slowdown": round(times[job.id] / job.ideal_allreduce_s(bps), 6),
                         "max_link_load": doc["max_link_load"], "lower_bound": doc["lower_bound"],
                         "runtime_ms": doc["runtime_ms"]})
    return rows


def summarise(rows: list[dict]) -> dict:
    out = {}
    for alg in ALGORITHMS:
        mine = [r for r in rows if r["algorithm"] == alg]
        s = np.array([r["slowdown"] for r in mine])
        cells = {(r["fabric"], r["utilisation"], r["failure"], r["seed"]): r for r in mine}
        ratio = [r["max_link_load"] / r["lower_bound"] for r in cells.values() if r["lower_bound"]]
        out[alg] = {"jobs": len(mine), "mean_slowdown": round(float(s.mean()), 4),
                    "median_slowdown": round(float(np.median(s)), 4),
                    "p95_slowdown": round(float(np.percentile(s, 95)), 4),
                    "worst_slowdown": round(float(s.max()), 4),
                    "cells_at_lower_bound": sum(1 for x in ratio if x <= 1 + 1e-9),
                    "cells": len(cells),
                    "mean_max_load_over_bound": round(float(np.mean(ratio)), 4),
                    "median_runtime_ms": round(float(np.median(
                        [r["runtime_ms"] for r in cells.values()])), 2)}
    return out


def spray_sensitivity(rows: list[dict], penalty: float) -> dict:
    """Spray at other penalties and where it ties each algorithm. Every byte of a sprayed
    flow is sent 1 / (1 - p) times, so its times scale by exactly (1 - penalty) / (1 - p)
    (tests/test_spray.py); the break-even penalty against an algorithm of mean slowdown m is
    1 - (spray's mean at p = 0) / m, per fabric and failure pattern: a larger penalty makes
    the algorithm's plan faster on average, 0 means that no penalty leaves spraying ahead."""
    def mean(alg, where=lambda r: True):
        return float(np.mean([r["slowdown"] for r in rows if r["algorithm"] == alg and where(r)]))
    free = lambda where=lambda r: True: mean("spray", where) * (1 - penalty)
    others = [a for a in dict.fromkeys(r["algorithm"] for r in rows) if a != "spray"]
    cells = {(r["fabric"], r["failure"]): lambda x, f=r["fabric"], d=r["failure"]:
             (x["fabric"], x["failure"]) == (f, d) for r in rows}
    even: dict = {}
    for (f, d), where in cells.items():
        even.setdefault(f, {})[d] = {a: round(1 - free(where) / mean(a, where), 4) for a in others}
    return {"penalty": penalty,
            "mean_slowdown_at": {f"{p:g}": round(free() / (1 - p), 4) for p in SENSITIVITY},
            "break_even_penalty": even}


def plot(rows: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for alg in ALGORITHMS:
        s = np.sort([r["slowdown"] for r in rows if r["algorithm"] == alg])
        ax.step(s, np.arange(1, len(s) + 1) / len(s), where="post", label=alg)
    ax.set_xlabel("All-Reduce slowdown (time / ideal)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title("Three-tier and two-plane fabrics (make paper)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simulation.paper_clos", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one seed, 80%% only, no failures")
    ap.add_argument("--spray-penalty", type=float, default=DEFAULT_PENALTY, metavar="P",
                    help="spray: the fraction of the bytes on the wire lost to retransmission "
                         f"and reordering (default: {DEFAULT_PENALTY:g})")
    ap.add_argument("--out", default="results")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    grid = list(itertools.product(FABRICS, UTILISATIONS, FAILURES, (1, 2)))
    if args.quick:
        grid = [c for c in grid if c[1] == 0.8 and c[2] == "none" and c[3] == 1]
    rows = [r for c in grid for r in cell(*c, args.spray_penalty)]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "clos_jobs.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    summary = {"cells": len(grid), "algorithms": summarise(rows),
               "spray": spray_sensitivity(rows, args.spray_penalty),
               "wall_s": round(time.perf_counter() - t0, 1)}
    with open(os.path.join(args.out, "clos_summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    plot(rows, os.path.join(args.out, "clos_slowdown_cdf.png"))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
