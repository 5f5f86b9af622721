"""Benchmark of path sets for spraying NICs (issue 73) on MRC's shape: 8 planes of a two-tier
leaf-spine, 256 spines and 512 leaves of 256 hosts each (131,072 hosts, 6,144 switches).

Per traffic pattern, a job of a few thousand flows posted with ``"spray": true``:

* ``hot``: every host of leaf 0 sends ``--fanout`` (9) flows to hosts of leaf 1: 2,304 flows
  over the 2,048 paths between the two leaves, so ``split`` cuts some (one commodity);
  ``hot_unbounded`` the same with no bound on parts (``"max_parts": 0``, as a NIC that
  sprays needs none: the fractional optimum);
* ``shift``: the first ``--per-leaf`` (8) hosts of every leaf send to the same hosts of the
  next leaf: 4,096 flows over 512 pairs of leaves, nothing to cut (a permutation).

Measured (wall clock, and the process's CPU time: the machine's 2 cores are shared, its load
average before and after is kept): the ``split`` planner's time (``clos_route_parts``, as the
service calls it, the problem's build included), then every flow's path set
(``pathsets.flow_set``) built cold (after the plan: alive paths per pair of leaves and
segment lists computed) and warm (what a second document costs), the selection alone (what
the watches' fingerprints compute), and the SID plan once per fabric; the sets' paths,
planes and entropy values checked on every flow; the process's peak RSS.

    python -m benchmarks.pathsets [--spines 256 --leaves 512 --hosts-per-leaf 256 --planes 8]
                                  [--only hot|hot_unbounded|shift] [--out bench/pathsets.json]

No root. Addresses per plane are assigned here (10.<16 q + k / 65536>.<k / 256>.<k> for host
k): the model's wiring numbers at most 254 hosts a leaf.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time

from controller.enforcement.srv6 import SidPlan
from controller.model.clos import Clos
from controller.model.jobs import Flow, Job
from controller.planners.clos_routes import MAX_PARTS, clos_route_parts
from controller.service import pathsets


def fabric_of(spines: int, leaves: int, hpl: int, planes: int) -> Clos:
    """The leaf-spine with one address per host and plane (see the module text)."""
    f = Clos.leaf_spine(spines, leaves, hpl, planes=planes)
    ips = {h: [f"10.{16 * q + k // 65536}.{k // 256 % 256}.{k % 256}" for q in range(planes)]
           for k, h in enumerate(f.host_leaves)}
    f.wiring = {"host_ip": ips}
    f.__post_init__()
    return f


def hot(f: Clos, hpl: int, fanout: int, **_) -> Job:
    flows = [Flow("hot", f"h0_{m}", f"h1_{(m + j) % hpl}", 1e8, dport=5000 + j)
             for m in range(hpl) for j in range(fanout)]
    return Job("hot", explicit=flows, options={"algorithm": "split", "spray": True})


def shift(f: Clos, leaves: int, per_leaf: int, **_) -> Job:
    flows = [Flow("shift", f"h{i}_{m}", f"h{(i + 1) % leaves}_{m}", 1e8, dport=5000)
             for i in range(leaves) for m in range(per_leaf)]
    return Job("shift", explicit=flows, options={"algorithm": "split", "spray": True})


# name -> (the job, split's bound on parts: None for --max-parts, 0 for none)
PATTERNS = {"hot": (hot, None), "hot_unbounded": (hot, 0), "shift": (shift, None)}


def run(f: Clos, plan: SidPlan, job: Job, max_parts: int | None) -> dict:
    t, c = time.perf_counter(), time.process_time()
    parts, planner_ms, _, info = clos_route_parts(f, [job], "split", max_parts=max_parts)
    plan_s, plan_cpu = time.perf_counter() - t, time.process_time() - c
    flows = job.flows()
    routed = [(fl, p) for fl, p in zip(flows, parts) if p]
    builds, cpu = [], []
    for _ in range(2):  # cold (after the plan), then warm
        t, c = time.perf_counter(), time.process_time()
        sets = [pathsets.flow_set(f, plan, job.id, fl, p) for fl, p in routed]
        builds.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    t = time.perf_counter()
    for fl, p in routed:
        pathsets.selection(f, fl, p)
    select = time.perf_counter() - t
    sizes = [len(s["paths"]) for s in sets]
    planes = [len({x["plane"] for x in s["paths"]}) for s in sets]
    assert all(sum(x["entropy"] for x in s["paths"]) == pathsets.ENTROPY for s in sets)
    assert min(sizes) >= pathsets.LEAST and min(planes) == len(f.planes)
    for s, (_, p) in zip(sets, routed):  # the weights are the plan's shares
        assert sorted(x["weight"] for x in s["paths"] if x["weight"]) == sorted(w for _, w in p)
    n = len(routed)
    return {"flows": len(flows), "routed": n,
            "split_flows": sum(1 for _, p in routed if len(p) > 1),
            "parts": sum(len(p) for _, p in routed),
            "max_parts": max_parts, "max_link_load": info.get("max_link_load"),
            "fractional_optimum": info.get("fractional_optimum"),
            "plan_s": round(plan_s, 3), "plan_cpu_s": round(plan_cpu, 3),
            "planner_ms": round(planner_ms, 1),
            "pathsets_cold_ms": round(builds[0] * 1e3, 1),
            "pathsets_warm_ms": round(builds[1] * 1e3, 1),
            "pathset_cold_us_per_flow": round(builds[0] * 1e6 / n, 1),
            "pathset_warm_us_per_flow": round(builds[1] * 1e6 / n, 1),
            "pathset_cold_cpu_us_per_flow": round(cpu[0] * 1e6 / n, 1),
            "pathset_warm_cpu_us_per_flow": round(cpu[1] * 1e6 / n, 1),
            "selection_ms": round(select * 1e3, 1),
            "paths_per_flow": {"min": min(sizes), "mean": round(statistics.mean(sizes), 2),
                               "max": max(sizes)},
            "planes_per_flow_min": min(planes),
            "entropy_per_flow": pathsets.ENTROPY,
            "set_bytes_per_flow": round(sum(len(json.dumps(s)) for s in sets) / n)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.pathsets",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--spines", type=int, default=256)
    ap.add_argument("--leaves", type=int, default=512)
    ap.add_argument("--hosts-per-leaf", type=int, default=256)
    ap.add_argument("--planes", type=int, default=8)
    ap.add_argument("--fanout", type=int, default=9, help="hot: flows per host of leaf 0")
    ap.add_argument("--per-leaf", type=int, default=8, help="shift: hosts per leaf that send")
    ap.add_argument("--max-parts", type=int, default=MAX_PARTS,
                    help="split's bound on parts per flow (0: none)")
    ap.add_argument("--only", choices=PATTERNS)
    ap.add_argument("--out", default=os.path.join("bench", "pathsets.json"))
    a = ap.parse_args(argv)
    t = time.perf_counter()
    f = fabric_of(a.spines, a.leaves, a.hosts_per_leaf, a.planes)
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    plan = SidPlan.of(f)
    sid_s = time.perf_counter() - t
    doc = {"command": " ".join(["python -m benchmarks.pathsets", *(argv or sys.argv[1:])]),
           "load_average_before": [round(x, 1) for x in os.getloadavg()],
           "fabric": f"{a.planes} planes x leaf-spine {a.spines} spines x {a.leaves} leaves x "
                     f"{a.hosts_per_leaf} hosts", "hosts": len(f.host_leaves),
           "switches": len(f.tier_of), "fabric_build_s": round(build_s, 2),
           "sid_plan_s": round(sid_s, 2), "cpu": os.cpu_count(), "patterns": {}}
    opts = {"hpl": a.hosts_per_leaf, "leaves": a.leaves, "fanout": a.fanout,
            "per_leaf": a.per_leaf}
    for name in [a.only] if a.only else PATTERNS:
        make, bound = PATTERNS[name]
        bound = a.max_parts if bound is None else bound
        doc["patterns"][name] = run(f, plan, make(f, **opts), bound or None)
        print(name, doc["patterns"][name], flush=True)
    doc["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    doc["load_average_after"] = [round(x, 1) for x in os.getloadavg()]  # 2 shared cores
    with open(a.out, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
