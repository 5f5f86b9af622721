"""Offline planner commands: generate a fabric, plan jobs, compare every algorithm.

    python -m controller fabric --spines 4 --leaves 8 --hosts-per-leaf 2 [--failed-spines K]
    python -m controller plan --fabric F --jobs J [--algorithm auto] [--objective jobs]
                              [--ilp-time-limit S] [--out R]
    python -m controller compare --fabric F --jobs J

Bad input exits with status 2 and one line "error: ..." on stderr.
"""
from __future__ import annotations

import argparse
import json
import sys

from controller.errors import InputError
from controller.model.fabric import Fabric
from controller.model.jobs import Job, parse_jobs
from controller.jsonio import read_json, write_output
from controller.planners.plan import make_plan, planner_options
from controller.planners import ALGORITHMS
from controller.model.rates import max_min_rates


def load_inputs(fabric_path: str, jobs_path: str) -> tuple[Fabric, list[Job]]:
    fabric = Fabric.from_dict(read_json(fabric_path, "fabric"))
    jobs = parse_jobs(read_json(jobs_path, "jobs"), fabric)
    return fabric, jobs


def slowest_rate_gbps(plan) -> float:
    """Smallest max-min rate when the first step of every job starts at once, in Gb/s."""
    from controller.model.links import LinkIndex
    import numpy as np
    links = LinkIndex(plan.problem.fabric)
    paths = []
    for f, parts in zip(plan.problem.flows, plan.parts_by_flow()):
        for s, _ in (parts or ((None, 1.0),)):
            paths.append(links.path(f.src, f.dst, s))
    if not paths:
        return 0.0
    rates = max_min_rates(paths, np.full(links.count, plan.problem.fabric.link_bps()))
    return float(rates.min()) * 8 / 1e9


def compare(fabric: Fabric, jobs: list[Job], algorithms: list[str], seed: int, salt: int,
            ilp_time_limit: float, objective: str = "flows") -> list[dict]:
    """One row per algorithm; ``objective`` applies to auto (the others count flows)."""
    from controller.model.fluid import predict_allreduce
    rows = []
    for alg in algorithms:
        opts = planner_options(alg, seed, salt, ilp_time_limit,
                               objective if alg == "auto" else "flows")
        plan = make_plan(fabric, jobs, alg, **opts)
        doc = plan.to_dict()
        rows.append({"algorithm": alg, "max_link_load": doc["max_link_load"],
                     "links_at_max": doc["links_at_max"],
                     "slowest_gbps": slowest_rate_gbps(plan),
                     "allreduce_s": predict_allreduce(plan),
                     "runtime_ms": plan.runtime_ms, "info": doc.get("info", {})})
    return rows


def format_table(rows: list[dict], jobs: list[Job], link_bps: float) -> str:
    heads = ["algorithm", "max load", "at max", "slowest Gb/s"]
    heads += [f"{j.id} AR s" for j in jobs] + ["runtime ms"]
    lines = [heads, ["ideal", "", "", ""] + [f"{j.ideal_allreduce_s(link_bps):.4g}" for j in jobs]
             + [""]]
    for r in rows:
        lines.append([r["algorithm"], f"{r['max_link_load']:.4g}", str(r["links_at_max"]),
                      f"{r['slowest_gbps']:.4g}"]
                     + [f"{r['allreduce_s'][j.id]:.4g}" for j in jobs]
                     + [f"{r['runtime_ms']:.2f}"])
    widths = [max(len(l[i]) for l in lines) for i in range(len(heads))]
    return "\n".join("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in
                               enumerate(zip(l, widths))) for l in lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m controller", description="mlroute planner")
    sub = ap.add_subparsers(dest="cmd", required=True)
    fab = sub.add_parser("fabric", help="write a regular leaf-spine fabric as JSON")
    fab.add_argument("--spines", type=int, default=4)
    fab.add_argument("--leaves", type=int, default=8)
    fab.add_argument("--hosts-per-leaf", type=int, default=2)
    fab.add_argument("--gbps", type=float, default=100.0)
    fab.add_argument("--failed-spines", type=int, default=0, help="fail the K highest spine ids")
    fab.add_argument("--out")
    for name in ("plan", "compare"):
        p = sub.add_parser(name)
        p.add_argument("--fabric", required=True)
        p.add_argument("--jobs", required=True)
        p.add_argument("--seed", type=int, default=1234, help="annealing seed")
        p.add_argument("--salt", type=int, default=0, help="ECMP hash salt")
        p.add_argument("--ilp-time-limit", type=float, default=60.0,
                       help="seconds for the ILP (auto: its last stage's budget, 0 skips it)")
        p.add_argument("--objective", default="flows",
                       help="auto's objective: flows (max-min link flow counts) or jobs "
                            "(worst job's predicted iteration slowdown)")
        p.add_argument("--out")
        if name == "plan":
            p.add_argument("--algorithm", default="auto", help=", ".join(ALGORITHMS))
        else:
            p.add_argument("--algorithms", default=",".join(ALGORITHMS))
            p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "fabric":
            out = json.dumps(Fabric.generate(args.spines, args.leaves, args.hosts_per_leaf,
                                             args.gbps, args.failed_spines).to_dict(), indent=1)
        else:
            from controller.planners.auto import OBJECTIVES
            if args.objective not in OBJECTIVES:
                raise InputError(f"unknown objective {args.objective!r} "
                                 f"(choose from {', '.join(OBJECTIVES)})")
            fabric, jobs = load_inputs(args.fabric, args.jobs)
            if args.cmd == "plan":
                plan = make_plan(fabric, jobs, args.algorithm,
                                 **planner_options(args.algorithm, args.seed, args.salt,
                                                   args.ilp_time_limit, args.objective))
                out = json.dumps(plan.to_dict(), indent=1)
            else:
                algs = [a.strip() for a in args.algorithms.split(",") if a.strip()]
                for a in algs:
                    if a not in ALGORITHMS:
                        raise InputError(f"unknown algorithm {a!r} (choose from {', '.join(ALGORITHMS)})")
                rows = compare(fabric, jobs, algs, args.seed, args.salt, args.ilp_time_limit,
                               args.objective)
                out = (json.dumps(rows, indent=1) if args.json
                       else format_table(rows, jobs, fabric.link_bps()))
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    write_output(out, args.out)
    return 0
