"""Benchmark of the controller on an emulated k = 4 fat-tree (20 Open vSwitch switches, 16 hosts,
shaped links): two rings crossing pods, planned by mlroute against the emulation's ECMP.

The workload and the step are ``emulation/harness/fattree_rings.py``'s: two rings of 8 flows
crossing the pods, every flow sending ``--bytes`` at once over TCP, measured ``--runs`` times
with no job under both hashings of the controller's select groups (``per-tier``, then
``polarised``) and with both jobs posted (``--mode`` flow, sr or host). Reported against the
same command's figures:

* planned step / the controller's prediction for it (the job views' ``predicted_allreduce_s``,
  the shared iteration model), target <= 1.10;
* ECMP step / planned step for each hashing, beside the planners' prediction for ECMP and
  polarised ECMP (their hash is not Open vSwitch's: a model of the same kind, not of the same
  collisions);
* per directed switch link, the planned run's bytes against the plan (flows x bytes), target
  within 5% of a flow's bytes on every link.

    python -m benchmarks.fattree [--runs 3] [--bw 10] [--bytes 4000000] [--out bench/fattree.json]

Needs root, Open vSwitch and Mininet.
"""
from __future__ import annotations

import argparse
import os
import sys

from benchmarks.planner import write_result
from emulation.harness.fattree_rings import compare_rings
from emulation.harness.session import install_interrupt_handler


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.fattree",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bw", type=float, default=10.0, help="Mbit/s on every link")
    ap.add_argument("--bytes", type=int, default=4_000_000, help="bytes per flow and step")
    ap.add_argument("--mode", default="flow", choices=["flow", "sr", "host"])
    ap.add_argument("--out", default=os.path.join("bench", "fattree.json"))
    args = ap.parse_args(argv)
    install_interrupt_handler()
    result = compare_rings(args.bw, args.bytes, args.runs, args.mode)
    result["command"] = "python -m benchmarks.fattree " + " ".join(argv or sys.argv[1:])
    write_result(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
