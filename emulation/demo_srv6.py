"""``make demo-srv6``: the demo's two rings on a fabric without OpenFlow: Linux routers with
static SRv6 SIDs, ECMP (the kernel's L4 hash) against mlroute's plan pushed by the hosts'
agents (``emulation/harness/routers.py``).

Default fabric: 4 spines, 8 leaves, 2 hosts per leaf, every link shaped to 5 Mbit/s. Two ring
All-Reduce jobs of 8 ranks (host 0 of every leaf, host 1 of every leaf); each step every rank
sends ``--bytes`` to the next one at once, and the step lasts until the last byte arrives
(``transfers.send``). ECMP picks each connection's spine by hashing its ports, so two of a
leaf's flows often share an uplink; the plan gives every leaf's two flows different spines.
``--steps`` steps of each (ECMP's ports change every step); the medians are compared. Results:
``--out``/summary.json (``results/`` is generated and not tracked). Ctrl-C stops everything.

``--fat-tree`` (``make demo-srv6 FABRIC=fattree``): three tiers of routers instead, the k = 4
fat-tree at 20 Mbit/s with real collectives, each job alone: a gloo ring and an Open MPI ring
of 8 and a gloo all-to-all of 8, under ECMP, declared, and learned from their members only,
each job's step against the controller's prediction (``emulation/harness/router_jobs.py``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

from controller.errors import InputError
from controller.jsonio import first_paragraph

SPINES, LEAVES, HOSTS, BW_MBPS, RING_BYTES = 4, 8, 2, 5.0, 2e6
# A step of the two rings shares no link under ECMP when every leaf's two flows hash to
# different spines: (3/4)^8, about 1 step in 10 (3 of 11 in one session's runs): medians of 5
STEPS = 5


def ring_jobs(leaves: int, hosts_per_leaf: int, size: float) -> list[dict]:
    return [{"id": f"ring{k}", "collective": "ring_allreduce",
             "ranks": [f"h{i}_{k}" for i in range(leaves)], "bytes": size}
            for k in range(hosts_per_leaf)]


def ring_routes(jobs: list[dict]) -> list[dict]:
    return [{"src": r[i], "dst": r[(i + 1) % len(r)]} for j in jobs for r in [j["ranks"]]
            for i in range(len(r))]


def run(spines=SPINES, leaves=LEAVES, hosts=HOSTS, bw=BW_MBPS, size=RING_BYTES,
        steps=STEPS, folder=None, probes=True) -> dict:
    """ECMP's and the plan's step times on routers; the summary document."""
    from emulation.harness.fabricnet import wait_until
    from emulation.harness.routers import RouterSession
    from emulation.harness.transfers import send
    from topologies.routers import leaf_spine
    fabric = leaf_spine(spines, leaves, hosts)
    jobs = ring_jobs(leaves, hosts, size)
    routes = ring_routes(jobs)
    folder = folder or tempfile.mkdtemp(prefix="mlroute-demo-srv6-")
    with RouterSession(fabric, folder, bw=bw, probes=probes) as s:
        ecmp = [send(s.net, fabric, routes, int(size), port=5401 + 100 * k) for k in range(steps)]
        for job in jobs:
            s.ctl.client.add_job(job)
        senders = sorted({r["src"] for r in routes})
        wait_until(lambda: all(s.steered(h) for h in senders), 20, interval=0.1,
                   what="every agent's rules")
        before = {x: s.sid_bytes(x) for x in fabric.planes[0].aggs[0]}
        plan = [send(s.net, fabric, routes, int(size), port=6401 + 100 * k) for k in range(steps)]
        spine_bytes = {x: s.sid_bytes(x) - before[x] for x in fabric.planes[0].aggs[0]}
        planned = s.ctl.client.routes()["routes"]
    ideal = size * 8 / (bw * 1e6)
    e, p = statistics.median(ecmp), statistics.median(plan)
    return {"fabric": {"spines": spines, "leaves": leaves, "hosts_per_leaf": hosts,
                       "link_mbps": bw}, "bytes": size, "steps": steps,
            "ideal_s": round(ideal, 3), "ecmp_s": [round(x, 3) for x in ecmp],
            "plan_s": [round(x, 3) for x in plan], "ecmp_median_s": round(e, 3),
            "plan_median_s": round(p, 3), "ecmp_over_plan": round(e / p, 2),
            "spine_sid_bytes": spine_bytes,
            "planned": {f"{r['src']}->{r['dst']}": r.get("path") or r.get("split")
                        for r in planned}}


def table(doc: dict) -> str:
    return "\n".join([
        f"{'routing':<8} {'median step (s)':>16} {'x ideal':>8}",
        f"{'ecmp':<8} {doc['ecmp_median_s']:>16.2f} {doc['ecmp_median_s'] / doc['ideal_s']:>8.2f}",
        f"{'mlroute':<8} {doc['plan_median_s']:>16.2f} {doc['plan_median_s'] / doc['ideal_s']:>8.2f}",
        f"ECMP / plan: {doc['ecmp_over_plan']:.2f}x (ideal step {doc['ideal_s']:.2f} s; "
        f"{doc['steps']} steps each)"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emulation.demo_srv6",
                                 description=first_paragraph(__doc__))
    ap.add_argument("--spines", type=int, default=SPINES)
    ap.add_argument("--leaves", type=int, default=LEAVES)
    ap.add_argument("--hosts-per-leaf", type=int, default=HOSTS)
    ap.add_argument("--bw", type=float, default=BW_MBPS, help="link speed, Mbit/s")
    ap.add_argument("--bytes", type=float, default=RING_BYTES, help="bytes per flow and step")
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--out", default=os.path.join("results", "demo-srv6"))
    ap.add_argument("--no-probes", action="store_true", help="agents without path probes")
    ap.add_argument("--fat-tree", action="store_true",
                    help="the k = 4 fat-tree of routers with real collectives instead")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("demo-srv6: needs root (Mininet)", file=sys.stderr)
        return 2
    if args.fat_tree:
        return fat_tree(args)
    try:
        os.makedirs(args.out, exist_ok=True)
        doc = run(args.spines, args.leaves, args.hosts_per_leaf, args.bw, args.bytes,
                  args.steps, os.path.abspath(args.out), not args.no_probes)
    except KeyboardInterrupt:
        return 130
    except InputError as e:
        print(f"demo-srv6: {e}", file=sys.stderr)
        return 2
    with open(os.path.join(args.out, "summary.json"), "w") as fh:
        json.dump(doc, fh, indent=1)
    print(table(doc))
    return 0


def fat_tree(args) -> int:
    """Real collectives on three tiers of routers; the table and ``--out``/summary.json."""
    from emulation.harness import router_jobs
    try:
        os.makedirs(args.out, exist_ok=True)
        doc = router_jobs.run(os.path.abspath(args.out), steps=args.steps,
                              probes=not args.no_probes,
                              progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    except KeyboardInterrupt:
        return 130
    with open(os.path.join(args.out, "summary.json"), "w") as fh:
        json.dump(doc, fh, indent=1)
    print(router_jobs.table(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
