"""Host-mode benchmarks (part of ``make bench``): JSON in bench/hostmode.json.

1. ``place``: placing a job of 1,000 RoCEv2 flows in host mode against flow mode, in the same
   process on the fake switch tables (no root): POST time, probes sent, probe rounds, probes
   per flow, switch entries of jobs; and the probes the same flows would need with pair scope
   (a switch whose hash also covers the addresses).
2. ``real``: the same POST against the real controller (ryu-manager, Open vSwitch, Mininet;
   root), where each probe is a packet-out into a leaf and a packet-in from a spine: POST
   milliseconds, host mode over flow mode, probes sent. Each repetition starts cold (the last
   host job's delete removes the pipeline and the learned maps).
   ``place_fat_tree``: the same on a k = 4 fat-tree with 2 hosts per leaf (three tiers; the
   same 16 hosts), with the largest table of each tier.
3. ``rules``: flow entries per leaf in each mode for the paper's largest cells (64 leaves x 32
   spines x 32 hosts, 5 jobs of ring size 2 and 4; 0 and 8 failed spines), computed by the
   rule builders (``controller.enforcement.desired.desired_tables``) from the greedy's routes; and the
   ring-4 cell with 4 and 8 queue pairs (source ports) per ring flow.

The fake-switch part runs on the harness's OpenFlow tables (``emulation/harness/fake_switch.py``).

    python -m benchmarks.hostmode [--repeats 3] [--no-real] [--out bench/hostmode.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

from benchmarks.emulation import cross_leaf_pairs
from controller.enforcement.desired import desired_tables
from controller.enforcement.hostmode import HostPorts
from controller.enforcement.openflow import COOKIE_STATIC
from controller.enforcement.rules import ROCE_DPORT
from controller.model.clos import Clos
from controller.model.intent import JobRecord, flow_key
from controller.model.jobs import Flow, Job
from controller.planners.plan import make_plan
from controller.service import api
from controller.service.route_service import RouteService
from simulation.workloads import generate, paper_models

SHAPE = (4, 8, 2)  # spines, leaves, hosts per leaf: the controller benchmarks' fabric
FLOWS = 1000


def roce_flows(fabric: Clos, n: int) -> list[dict]:
    """n RoCEv2 flows between hosts of different leaves, every (src, dst) pair in turn, each
    flow its own queue pair (distinct source port in the request)."""
    return [{"src": a, "dst": b, "bytes": 1e6, "proto": "udp", "dport": ROCE_DPORT,
             "sport": 1 + k} for k, (a, b) in enumerate(cross_leaf_pairs(fabric, n))]


def _fake_service(fabric, mode):
    from emulation.harness.fake_switch import FakeSwitches
    sw = FakeSwitches(fabric.dpids.values(), fabric=fabric)
    svc = RouteService(sw, fabric, mode=mode, algorithm="greedy")
    for d in fabric.dpids.values():
        svc.switch_connected(d, {p: True for p in fabric.ports[fabric.switch_of_dpid[d]].values()})
    return sw, svc


def _place_modes(fabric, job: dict, repeats: int, out: dict) -> dict:
    """The job POSTed in flow then host mode on fresh fake tables, ``repeats`` times each:
    POST milliseconds, probes, rounds, entries of jobs; into ``out``."""
    n = len(job["flows"])
    for mode in ("flow", "host"):
        ms, probes, rounds, entries = [], [], [], []
        for _ in range(repeats):
            sw, svc = _fake_service(fabric, mode)
            t0 = time.perf_counter()
            status, doc = api.handle(svc, "POST", "/v1/jobs", json.dumps(job).encode())
            ms.append((time.perf_counter() - t0) * 1e3)
            if status != 201:
                raise RuntimeError(f"POST in {mode} mode: {status} {doc.get('error')}")
            probes.append(sw.probes)
            rounds.append(svc.host.probe_rounds)
            entries.append(sum(1 for t in sw.rules.values() for r in t.values()
                               if r.cookie != COOKIE_STATIC))
        out[mode] = {"post_ms_median": round(statistics.median(ms), 1), "probes": probes[0],
                     "probe_rounds": rounds[0], "probes_per_flow": round(probes[0] / n, 3),
                     "job_entries": entries[0]}
    out["host_over_flow_post_ms"] = round(out["host"]["post_ms_median"]
                                          / out["flow"]["post_ms_median"], 2)
    return out


def bench_place(repeats: int = 3, n: int = FLOWS, shape=SHAPE) -> dict:
    fabric = Clos.generate(*shape, 100.0, wiring=True)
    job = {"id": "big", "flows": roce_flows(fabric, n)}
    out = _place_modes(fabric, job, repeats, {"fabric": list(shape), "flows": n,
                                              "repeats": repeats})
    # pair scope: the maps a switch hashing the addresses too would need, same flows
    sw, svc = _fake_service(fabric, "host")
    api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": "w", "flows": job["flows"][:1]}).encode())  # the pipeline in place
    parsed = [Flow("big", f["src"], f["dst"], 1.0, 17, f["sport"], ROCE_DPORT)
              for f in job["flows"]]
    plan = make_plan(fabric, [_job_of(parsed)], "greedy")  # the two-tier planner's spines
    # the controller serves the leaf-spine as a Clos of one plane: parts are paths
    flows = [(("big", flow_key(f)), f, p) for f, p in zip(parsed, plan.path_parts())]
    hp = HostPorts(scope="pair")
    t0 = time.perf_counter()
    hp.place(svc.fabric, flows, sw.probe)
    out["pair_scope"] = {"probes": hp.probes_sent, "probe_rounds": hp.probe_rounds,
                         "probes_per_flow": round(hp.probes_sent / n, 3),
                         "place_ms": round((time.perf_counter() - t0) * 1e3, 1)}
    return out


def bench_place_clos(repeats: int = 3, n: int = FLOWS, k: int = 4, hosts: int = 2) -> dict:
    """``place`` on a k-ary fat-tree (three tiers): host mode's probes are trapped by the
    aggregation switches and the cores, and no switch of any tier holds a job entry; the
    largest table of each tier with the job in host mode."""
    fabric = Clos.fat_tree(k, hosts, 100.0).wire()
    job = {"id": "big", "flows": roce_flows(fabric, n)}
    out = _place_modes(fabric, job, repeats, {"fabric": f"fat-tree k={k}, {hosts} hosts per "
                                              "leaf", "flows": n, "repeats": repeats})
    sw, svc = _fake_service(fabric, "host")
    api.handle(svc, "POST", "/v1/jobs", json.dumps(job).encode())
    out["host"]["switch_entries_max"] = {
        tier: max(len(sw.rules[fabric.dpids[s]]) for s in fabric.switches()
                  if fabric.tier_of[s] == t) for t, tier in enumerate(("leaf", "agg", "core"))}
    return out


def _job_of(flows):
    return Job("big", explicit=list(flows))


def bench_real(outdir: str, repeats: int = 3, n: int = FLOWS, shape=SHAPE) -> dict:
    from emulation.harness.session import Session
    out: dict = {"fabric": list(shape), "flows": n, "repeats": repeats}
    with Session(*shape, 0, outdir, mode="host") as s:
        job = {"flows": roce_flows(s.fabric, n)}
        for mode in ("flow", "host"):
            walls, probes, installs = [], [], []
            for r in range(repeats):
                before = s.ctl.rest("GET", "/v1/fabric")[1]["host_mode"]["probes_sent"]
                t0 = time.perf_counter()
                status, doc = s.ctl.rest("POST", "/v1/jobs", {**job, "id": f"{mode}{r}",
                                                              "mode": mode})
                walls.append((time.perf_counter() - t0) * 1e3)
                if status != 201:
                    raise RuntimeError(f"POST in {mode} mode: {status} {doc.get('error')}")
                probes.append(s.ctl.rest("GET", "/v1/fabric")[1]["host_mode"]["probes_sent"]
                              - before)
                installs.append(doc["rules"]["added"])
                s.ctl.rest("DELETE", f"/v1/jobs/{mode}{r}")
            out[mode] = {"post_ms": [round(x, 1) for x in walls],
                         "post_ms_median": round(statistics.median(walls), 1),
                         "probes": probes, "entries_added": installs}
    out["host_over_flow_post_ms"] = round(out["host"]["post_ms_median"]
                                          / out["flow"]["post_ms_median"], 2)
    return out


def rules_per_leaf(spines: int = 32, leaves: int = 64, hosts: int = 32, jobs: int = 5,
                   ring: int = 4, failed: int = 0, qps: int = 1) -> dict:
    """Flow entries per leaf in each mode for one paper cell, from the greedy's routes;
    ``qps`` > 1 opens that many connections (queue pairs, distinct source ports) per ring
    flow, as collective libraries do to spread a connection over paths."""
    fabric = Clos.generate(spines, leaves, hosts, 100.0, failed, wiring=True)
    job_list = generate(fabric, paper_models(jobs, ring), ring, seed=1234)
    if qps > 1:
        job_list = [Job(j.id, explicit=[Flow(j.id, f.src, f.dst, f.bytes / qps, 17, 1 + q,
                                             ROCE_DPORT) for f in j.flows() for q in range(qps)])
                    for j in job_list]
    parts = make_plan(fabric, job_list, "greedy").path_parts()  # the controller's paths
    out = {"cell": {"spines": spines, "leaves": leaves, "hosts": hosts, "jobs": jobs,
                    "ring": ring, "failed_spines": failed, "qps_per_flow": qps},
           "flows": len(parts), "inter_leaf_flows": sum(1 for p in parts if p)}
    for mode in ("flow", "sr", "host"):
        records, pos = [], 0
        for k, job in enumerate(job_list):
            rec = JobRecord(job, k + 1, "greedy", mode, 0.0)
            for f in job.flows():
                rec.routes[flow_key(f)] = parts[pos]
                pos += 1
            records.append(rec)
        tables = desired_tables(fabric, records)
        per_leaf = [tables[fabric.dpids[l]][0] for l in fabric.leaves]
        totals = [len(r) for r in per_leaf]
        jobs_only = [sum(1 for x in r if x.cookie != COOKIE_STATIC) for r in per_leaf]
        spine_totals = [len(tables[fabric.dpids[s]][0]) for s in fabric.planes[0].aggs[0]]
        out[mode] = {"leaf_entries_max": max(totals), "leaf_entries_mean": round(
                         statistics.mean(totals), 1),
                     "leaf_job_entries_max": max(jobs_only),
                     "leaf_static_entries_max": max(t - j for t, j in zip(totals, jobs_only)),
                     "spine_entries_max": max(spine_totals)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.hostmode", description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-real", action="store_true", help="skip the real-switch benchmark")
    ap.add_argument("--out", default="bench/hostmode.json")
    args = ap.parse_args(argv)
    from emulation.harness.session import install_interrupt_handler
    # Ctrl-C or SIGTERM unwinds through the cleanup, also when started with SIGINT ignored (&)
    install_interrupt_handler()
    result = {"place": bench_place(args.repeats),
              "place_fat_tree": bench_place_clos(args.repeats),
              "rules": [rules_per_leaf(ring=r, failed=x) for r in (2, 4) for x in (0, 8)]
              + [rules_per_leaf(ring=4, qps=q) for q in (4, 8)]}
    if not args.no_real:
        if os.geteuid() != 0:
            print("benchmarks.hostmode: not root, real-switch benchmark skipped", file=sys.stderr)
        else:
            with tempfile.TemporaryDirectory(prefix="mlroute-bench-host-") as tmp:
                result["real"] = bench_real(tmp, args.repeats)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=2)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
