"""Emulation runner: real ryu-manager with mlroute, a Mininet leaf-spine of Open vSwitch
switches, real traffic (RoCE-like or TCP agents), paths proved from switch counters.

    python -m emulation.run --spines 4 --leaves 8 --hosts-per-leaf 2 --bw 10 \\
        --algorithm greedy --mode sr --jobs FILE [--transport auto|roce|tcp] [--compare ecmp]
        [--iterations 3] [--out DIR]

Starts Open vSwitch if needed, the controller (a subprocess stopped by its PID) and the fabric,
pushes the jobs over REST, runs every job at once with one agent per host and job, reads the
ingress rules' and ports' counters, deletes the jobs, and repeats for each algorithm. Writes
``summary.json`` and ``summary.png`` to the output folder and prints the summary table. The
work is the harness's (``emulation/harness/run.py``, where the transports are described); this
module is its command line.

Ctrl-C (or SIGTERM) stops everything: the agents (started in their own sessions, so a signal
to the runner does not reach them) are killed by PID, the jobs are deleted, the fabric and the
controller stopped; a second Ctrl-C during that cleanup is ignored. Exit status 130.
"""
from __future__ import annotations

import argparse
import os
import sys

from controller.errors import InputError
from controller.jsonio import first_paragraph, read_json
from emulation.harness.fabricnet import SWITCH_SNDBUF
from emulation.harness.run import MODES, TRANSPORTS, emulate, format_summary
from emulation.harness.session import install_interrupt_handler


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emulation.run",
                                 description=first_paragraph(__doc__))
    ap.add_argument("--spines", type=int, default=4)
    ap.add_argument("--leaves", type=int, default=8)
    ap.add_argument("--hosts-per-leaf", type=int, default=2)
    ap.add_argument("--bw", type=float, default=10.0, help="Mbit/s on every link")
    ap.add_argument("--algorithm", default="greedy")
    ap.add_argument("--compare", default="", help="more algorithms to run first, e.g. ecmp")
    ap.add_argument("--mode", default="flow", choices=MODES,
                    help="enforcement, passed to the controller (--mlroute-mode)")
    ap.add_argument("--transport", default="auto", choices=TRANSPORTS,
                    help="roce: UDP 4791 with BTH, go-back-N; tcp: TCP ring agents; auto: RoCE "
                         "for UDP and explicit-flow jobs and in host mode")
    ap.add_argument("--roce-window", type=int, default=32, help="packets in flight per QP")
    ap.add_argument("--roce-mtu", type=int, default=4096, help="payload bytes per RoCE packet")
    ap.add_argument("--jobs", required=True)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--out", default=os.path.join("results", "emulation"))
    ap.add_argument("--no-ping", action="store_true")
    ap.add_argument("--switch-sndbuf", type=int, default=SWITCH_SNDBUF,
                    help="bytes of ovs-vswitchd's send buffer, i.e. of all switch queues "
                         "together (0: leave it)")
    args = ap.parse_args(argv)
    algorithms = [a for a in args.compare.split(",") if a] + [args.algorithm]
    install_interrupt_handler()
    try:
        summary = emulate(args.spines, args.leaves, args.hosts_per_leaf, args.bw,
                          read_json(args.jobs, "jobs"), algorithms, args.mode, args.iterations,
                          args.out, ping=not args.no_ping, transport=args.transport,
                          roce_opts={"window": args.roce_window, "mtu": args.roce_mtu},
                          switch_sndbuf=args.switch_sndbuf)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: agents, jobs, fabric and controller stopped", file=sys.stderr)
        return 130
    print(format_summary(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
