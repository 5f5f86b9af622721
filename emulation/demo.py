"""``make demo``: ECMP against the greedy on the default fabric, measured in emulation.

Default fabric: 4 spines, 8 leaves, 2 hosts per leaf, every link shaped to 5 Mbit/s, Open vSwitch
in Mininet, the mlroute controller in ryu-manager. Workload: two ring All-Reduce jobs of 8 ranks
(host 0 of every leaf, host 1 of every leaf), 2 MB per ring, so every leaf sends two elephants
over four uplinks and ECMP's hash puts some of them on one link. Each routing runs one iteration
(``--iterations`` for more).
The table shows the measured All-Reduce time, the ideal (shaped line rate), the fluid model's
prediction for the same routes, the planned max link load and the flows whose path the switch
counters proved. Results: results/demo/summary.json and summary.png (``results/`` is generated
and not tracked; the manual's picture is docs/demo.png, copied from a run).

``--fat-tree`` (``make demo-fattree``) is the three-tier demo: a k = 4 fat-tree (20 switches,
16 hosts, 10 Mbit/s), two rings of 8 flows whose neighbours sit in different pods, steps of
both under ECMP (the controller's select groups, hashed per tier and polarised) and under
mlroute's plan (``--mode``, host mode included), with the bytes of every link of both tiers
(``emulation/harness/fattree_rings.py``; results/demo-fattree/summary.json and summary.png,
the manual's picture docs/demo_fattree.png).

``--simulate`` prints the fluid model's comparison only (no root, no Mininet). ``--spines``,
``--leaves``, ``--hosts-per-leaf``, ``--bw`` and ``--bytes`` change the defaults (smaller runs
for tests); ``--rest-port``, ``--of-port`` and ``--sflow-port`` the controller's ports (8080,
6653, 6343: beside a controller that holds them; ``make demo REST_PORT=... OF_PORT=...
SFLOW_PORT=...``). Ctrl-C or SIGTERM stops the agents, the fabric and the controller; exit status 130.
"""
from __future__ import annotations

import argparse
import os
import sys

from controller.errors import InputError
from controller.jsonio import first_paragraph
from emulation.harness.session import Ports

SPINES, LEAVES, HOSTS, BW_MBPS = 4, 8, 2, 5.0
RING_BYTES = 2e6  # 0.4 s per step at 5 Mbit/s
FAT_TREE_MBPS, FAT_TREE_BYTES = 10.0, 4_000_000  # 3.2 s per planned step
DEFAULT_OUT = os.path.join("results", "demo")


def demo_jobs(leaves: int = LEAVES, hosts_per_leaf: int = HOSTS, size: float = RING_BYTES) -> dict:
    return {"jobs": [{"id": f"ring{k}", "collective": "ring_allreduce",
                      "ranks": [f"h{i}_{k}" for i in range(leaves)], "bytes": size}
                     for k in range(hosts_per_leaf)]}


def simulate_only() -> str:
    from controller.cli import compare, format_table
    from controller.model.jobs import parse_jobs
    from emulation.harness.run import prepare_jobs
    from topologies.clos import clos_fabric
    fabric = clos_fabric(SPINES, LEAVES, HOSTS, BW_MBPS)
    jobs = parse_jobs({"jobs": prepare_jobs(demo_jobs(), fabric)}, fabric)  # same 5-tuples
    rows = compare(fabric, jobs, ["ecmp", "greedy"], 1234, 0, 60)
    return format_table(rows, jobs, fabric)


def fat_tree_demo(args, ports: Ports) -> int:
    import json

    from emulation.harness.fattree_rings import compare_rings
    from emulation.harness.plots import fattree_plot
    out = os.path.join("results", "demo-fattree") if args.out == DEFAULT_OUT else args.out
    print(f"fabric: k = 4 fat-tree, 20 switches, 16 hosts, {FAT_TREE_MBPS:g} Mbit/s links; jobs: "
          f"2 rings of 8 flows across the pods, {FAT_TREE_BYTES / 1e6:g} MB per flow and step; "
          f"{args.iterations} steps per routing (ECMP per tier, ECMP polarised, then mlroute in "
          f"{args.mode} mode); "
          "outputs in " + out, flush=True)
    s = compare_rings(FAT_TREE_MBPS, FAT_TREE_BYTES, args.iterations, args.mode,
                      progress=lambda m: print(m, flush=True), ports=ports)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "summary.json"), "w") as fh:
        json.dump(s, fh, indent=1)
    fattree_plot(s, os.path.join(out, "summary.png"))
    for h, ratio in s["ecmp_over_planned"].items():
        print(f"ECMP ({h}): steps {s['step_s'][f'ecmp_{h}']} s, {ratio:.2f}x mlroute's")
    print(f"mlroute: steps {s['step_s']['planned']} s (predicted {s['predicted_planned_s']:g} s, "
          f"planned/predicted {s['planned_over_prediction']:.3f}); every link within "
          f"{max(s['per_link_error_of_a_flow']) * 100:.1f}% of a flow of its plan")
    print(f"results in {out}/summary.json and summary.png")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emulation.demo",
                                 description=first_paragraph(__doc__))
    ap.add_argument("--simulate", action="store_true", help="fluid model only")
    ap.add_argument("--iterations", type=int, default=None,
                    help="iterations per routing (1; with --fat-tree, 2 steps)")
    ap.add_argument("--mode", default="flow", choices=["flow", "sr", "host"])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--fat-tree", action="store_true",
                    help="the three-tier demo: k = 4 fat-tree, two rings across the pods "
                         "(takes --mode, --iterations and --out; its shape, speed and sizes "
                         "are fixed)")
    ap.add_argument("--spines", type=int, default=SPINES)
    ap.add_argument("--leaves", type=int, default=LEAVES)
    ap.add_argument("--hosts-per-leaf", type=int, default=HOSTS)
    ap.add_argument("--bw", type=float, default=BW_MBPS, help="Mbit/s on every link")
    ap.add_argument("--bytes", type=float, default=RING_BYTES, help="bytes per ring")
    ap.add_argument("--rest-port", type=int, default=Ports.rest,
                    help="the controller's REST port (default: %(default)s)")
    ap.add_argument("--of-port", type=int, default=Ports.openflow,
                    help="the controller's OpenFlow port, the switches' (default: %(default)s)")
    ap.add_argument("--sflow-port", type=int, default=Ports.sflow,
                    help="the controller's sFlow port, the switches' target "
                         "(default: %(default)s)")
    args = ap.parse_args(argv)
    ports = Ports(args.rest_port, args.of_port, args.sflow_port)
    if args.iterations is None:
        args.iterations = 2 if args.fat_tree else 1
    if args.simulate and args.fat_tree:
        print("error: --simulate is the two-tier comparison; for three tiers see "
              "docs/tutorials/three-tier.md (python -m controller compare)", file=sys.stderr)
        return 2
    if args.simulate:
        print(simulate_only())
        return 0
    from emulation.harness.run import emulate, format_summary
    from emulation.harness.session import install_interrupt_handler
    install_interrupt_handler()
    if args.fat_tree:
        try:
            return fat_tree_demo(args, ports)
        except KeyboardInterrupt:
            print("interrupted: fabric and controller stopped", file=sys.stderr)
            return 130
    print(f"fabric: {args.spines} spines x {args.leaves} leaves x {args.hosts_per_leaf} hosts, "
          f"{args.bw:g} Mbit/s links; jobs: {args.hosts_per_leaf} rings of {args.leaves} ranks, "
          f"{args.bytes / 1e6:g} MB each; {args.iterations} iteration(s) per routing (ECMP, then "
          "greedy); outputs in " + args.out, flush=True)
    try:
        summary = emulate(args.spines, args.leaves, args.hosts_per_leaf, args.bw,
                          demo_jobs(args.leaves, args.hosts_per_leaf, args.bytes),
                          ["ecmp", "greedy"], args.mode, args.iterations, args.out,
                          ports=ports)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: agents, fabric and controller stopped", file=sys.stderr)
        return 130
    print(format_summary(summary))
    rounds = {r["algorithm"]: r for r in summary["rounds"]}
    slowest = {a: max(sum(j["allreduce_s"]) / len(j["allreduce_s"]) for j in r["jobs"].values())
               for a, r in rounds.items()}
    print(f"greedy is {slowest['ecmp'] / slowest['greedy']:.2f}x faster than ECMP "
          f"(slowest job's mean All-Reduce time); pingall loss {summary['pingall_loss_pct']}%")
    print(f"results in {args.out}/summary.json and summary.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
