"""Run the fluid simulator (``controller/model/fluid.py``) with one of the planners, from the command
line: per job and iteration the All-Reduce time, per flow FCT and throughput, per planner call
its runtime. ``spray`` is the per-packet spraying baseline (``controller.planners.spray``): every
flow one transfer over its parts (the simulator's coupled mode), with the bytes on the wire of
its goodput penalty; its ideal stays the jobs' own.

    python -m simulation.simulate --fabric F --jobs J --algorithm greedy --iterations 3
"""
from __future__ import annotations

import argparse
import json
import sys

from controller import __version__
from controller.errors import InputError
from controller.jsonio import HelpFormatter, write_output
from controller.model.clos import Clos
from controller.model.fluid import FluidSimulator
from controller.model.jobs import Job
from controller.planners.plan import Plan, make_plan, planner_options
from controller.planners.registry import listing
from controller.planners.spray import DEFAULT_PENALTY, spray_plan, sprayed_jobs

SPRAY = "spray"


def simulate(fabric: Clos, jobs: list[Job], algorithm: str = "greedy", iterations: int = 1,
             **options) -> dict:
    """Simulate with one of the registered planners (options go to the planner), or spray
    (option ``penalty``, default ``spray.DEFAULT_PENALTY``)."""
    if algorithm == SPRAY:
        penalty = options.get("penalty", DEFAULT_PENALTY)
        wire = sprayed_jobs(jobs, penalty)  # the simulator moves the bytes on the wire
        result = FluidSimulator(fabric, wire, lambda active: spray_plan(fabric, active, 0.0),
                                iterations, coupled=True).run()
        bps = fabric.link_bps("host")
        for job in jobs:
            result["jobs"][job.id]["ideal_s"] = job.ideal_allreduce_s(bps)
        return result | {"algorithm": algorithm, "penalty": penalty}

    def planner(active: list[Job]) -> Plan:
        return make_plan(fabric, active, algorithm, **options)
    result = FluidSimulator(fabric, jobs, planner, iterations).run()
    result["algorithm"] = algorithm
    return result


def main(argv=None) -> int:
    from controller.cli import load_inputs
    ap = argparse.ArgumentParser(prog="python -m simulation.simulate",
                                 formatter_class=HelpFormatter,
                                 description="Run the fluid simulator with one of the "
                                             "planners: per job and iteration the All-Reduce "
                                             "time, per flow FCT and throughput, per planner "
                                             "call its runtime.")
    ap.add_argument("--version", action="version", version=f"mlroute-simulate {__version__}")
    ap.add_argument("--fabric", required=True, metavar="FILE", help="fabric document")
    ap.add_argument("--jobs", required=True, metavar="FILE", help="jobs document")
    ap.add_argument("--algorithm", default="greedy",
                    help=f"planner: {listing()}; or "
                         f"{SPRAY}, per-packet spraying over every alive path (the fluid LP "
                         "bound less its goodput penalty)")
    ap.add_argument("--iterations", type=int, default=1, help="training iterations simulated")
    ap.add_argument("--seed", type=int, default=1234, help="annealing seed")
    ap.add_argument("--salt", type=int, default=0, help="ECMP hash salt")
    ap.add_argument("--ilp-time-limit", type=float, default=60.0, metavar="S",
                    help="seconds for the ILP")
    ap.add_argument("--spray-penalty", type=float, default=DEFAULT_PENALTY, metavar="P",
                    help="spray: the fraction of the bytes on the wire lost to retransmission "
                         f"and reordering, in [0, 1) (default: {DEFAULT_PENALTY:g})")
    ap.add_argument("--out", metavar="FILE",
                    help="write the result to FILE and print one line saying so (default: "
                         "print it)")
    args = ap.parse_args(argv)
    try:
        fabric, jobs = load_inputs(args.fabric, args.jobs)
        opts = ({"penalty": args.spray_penalty} if args.algorithm == SPRAY else
                planner_options(args.algorithm, args.seed, args.salt, args.ilp_time_limit))
        result = simulate(fabric, jobs, args.algorithm, args.iterations, **opts)
        write_output(json.dumps(result, indent=2), args.out,
                     f"{args.algorithm}, {len(result['jobs'])} jobs, {args.iterations} "
                     f"iteration(s), {result.get('plans', 0)} plan(s)")
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
