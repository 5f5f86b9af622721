"""``make demo``: ECMP against the greedy on the default fabric, with a workload where ECMP's
hash puts two ring flows on one link.

Default fabric: 4 spines, 8 leaves, 2 hosts per leaf. Workload: two ring All-Reduce jobs, each
with one rank per leaf (host 0 of every leaf, host 1 of every leaf), so every leaf sends two
elephants over four uplinks. The table shows the ideal All-Reduce time, the fluid simulator's
prediction for each routing and the maximum link load.
"""
from __future__ import annotations

import argparse
import json
import sys

from controller.cli import compare
from controller.fabric import Fabric
from controller.jobs import parse_jobs


def demo_jobs(leaves: int = 8, hosts_per_leaf: int = 2, size: float = 50e6) -> dict:
    return {"jobs": [{"id": f"ring{k}", "collective": "ring_allreduce",
                      "ranks": [f"h{i}_{k}" for i in range(leaves)], "bytes": size}
                     for k in range(hosts_per_leaf)]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emulation.demo", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    fabric = Fabric.generate(4, 8, 2, link_gbps=100.0)
    jobs = parse_jobs(demo_jobs(), fabric)
    rows = compare(fabric, jobs, ["ecmp", "greedy"], seed=1234, salt=0, ilp_time_limit=60)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print("fabric: 4 spines x 8 leaves x 2 hosts, 100 Gb/s; jobs: 2 rings of 8 ranks, 50 MB each")
    print(f"{'routing':<8} {'max link load':>13} {'ideal s':>9} " +
          " ".join(f"{j.id + ' predicted s':>17}" for j in jobs))
    for r in rows:
        ideal = jobs[0].ideal_allreduce_s(fabric.link_bps())
        print(f"{r['algorithm']:<8} {r['max_link_load']:>13g} {ideal:>9.4f} " +
              " ".join(f"{r['allreduce_s'][j.id]:>17.4f}" for j in jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
