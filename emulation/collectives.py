"""Real collective libraries in the emulation, from the command line (root): an All-Reduce of
PyTorch gloo or of Open MPI (ring forced) with one rank per Mininet host, against the real
controller, for each scenario (a way of telling the controller about the job).

    python -m emulation.collectives --library gloo --scenario ecmp,correct,rank_order [--mib 4]

Prints one JSON line per scenario and repetition. The work is the harness's
(``emulation/harness/collectives.py``); ``python -m benchmarks.collectives`` measures it.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from emulation.harness.collectives import LIBRARIES, LOG_ROOT, SCENARIOS, missing, rank_hosts
from emulation.harness.session import Session, install_interrupt_handler


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emulation.collectives", description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", default="gloo", choices=LIBRARIES)
    ap.add_argument("--scenario", default="ecmp,correct,rank_order",
                    help=f"comma-separated, of {', '.join(SCENARIOS)}")
    ap.add_argument("--mib", type=int, default=4)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--bw", type=float, default=20)
    ap.add_argument("--shape", default="2,4,2", help="spines,leaves,hosts per leaf")
    args = ap.parse_args(argv)
    scenarios = args.scenario.split(",")
    bad = [s for s in scenarios if s not in SCENARIOS]
    if bad:
        ap.error(f"unknown scenario {bad[0]!r} (one of {', '.join(SCENARIOS)})")
    why = missing(args.library)
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    install_interrupt_handler()
    shape = tuple(int(x) for x in args.shape.split(","))
    run_dir = os.path.join(LOG_ROOT, time.strftime("%Y%m%d-%H%M%S") + f"-{args.library}")
    with Session(*shape, args.bw, run_dir, progress=lambda m: print(m, file=sys.stderr)) as s:
        hosts = rank_hosts(s.fabric)
        for k in range(args.repeat):
            for name in scenarios:
                res = SCENARIOS[name](s, args.library, hosts, args.mib, args.iters,
                                      os.path.join(run_dir, f"{name}-{k}"))
                print(json.dumps({"scenario": name, **{x: res[x] for x in (
                    "times", "sums_ok", "direction", "imbalance", "uplinks", "pairs")}}),
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
