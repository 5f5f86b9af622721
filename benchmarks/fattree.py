"""Benchmark of the controller on an emulated k = 4 fat-tree (20 Open vSwitch switches, 16 hosts,
shaped links): two rings crossing pods, planned by mlroute against the emulation's ECMP.

Two jobs of 8 explicit flows each (ring0 over host 0 of every leaf, ring1 over host 1, ring
neighbours in different pods, so every flow crosses the cores). One *step* is every flow of
both rings sending ``--bytes`` at once over TCP (exact counts, ``harness/transfers.py``); its
time is until the last byte arrived. Measured ``--runs`` times with no job (Open vSwitch's
select groups: one hash on every bridge, the polarised ECMP) and with both jobs posted
(``--mode`` flow or sr). Reported against the same command's figures:

* planned step / the controller's prediction for it (the job views' ``predicted_allreduce_s``,
  the shared iteration model), target <= 1.10;
* ECMP step / planned step, beside the planners' prediction for polarised ECMP (its hash is
  not Open vSwitch's: a model of the same kind, not of the same collisions);
* per directed switch link, the planned run's bytes against the plan (flows x bytes), target
  within 5% of a flow's bytes on every link.

    python -m benchmarks.fattree [--runs 3] [--bw 10] [--bytes 4000000] [--out bench/fattree.json]

Needs root, Open vSwitch and Mininet.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

from benchmarks.planner import write_result
from controller.model.iteration import predict_clos_times
from controller.model.jobs import parse_jobs
from controller.planners.clos_plan import make_clos_plan
from emulation.harness.collectives import rank_hosts
from emulation.harness.session import Session, install_interrupt_handler
from emulation.harness.transfers import planned_links, step


def ring_jobs(fabric, nbytes: float) -> dict:
    """Two rings over host 0 and host 1 of every leaf, leaves taking turns by pod."""
    order = rank_hosts(fabric)
    jobs = []
    for k in range(2):
        ring = [h for h in order if h.endswith(f"_{k}")]
        jobs.append({"id": f"ring{k}", "flows": [
            {"src": a, "dst": ring[(i + 1) % len(ring)], "bytes": nbytes}
            for i, a in enumerate(ring)]})
    return {"jobs": jobs}


def per_link_error(carried: dict, routes: list[dict], nbytes: int) -> float:
    """Worst |carried - planned| over every directed switch link, in flows' bytes."""
    plan = planned_links(routes)
    return max(abs(n - plan.get(k, 0) * nbytes) / nbytes for k, n in carried.items())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.fattree",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bw", type=float, default=10.0, help="Mbit/s on every link")
    ap.add_argument("--bytes", type=int, default=4_000_000, help="bytes per flow and step")
    ap.add_argument("--mode", default="flow", choices=["flow", "sr"])
    ap.add_argument("--out", default=os.path.join("bench", "fattree.json"))
    args = ap.parse_args(argv)
    install_interrupt_handler()
    with tempfile.TemporaryDirectory(prefix="mlroute-fattree-") as tmp, \
            Session.fat_tree(4, 2, args.bw, tmp, mode=args.mode) as s:
        doc = ring_jobs(s.fabric, args.bytes)
        flows = [{"src": f["src"], "dst": f["dst"]} for j in doc["jobs"] for f in j["flows"]]
        ecmp = [step(s.net, s.fabric, flows, args.bytes, 5600 + 40 * k)[0] for k in range(args.runs)]
        for job in doc["jobs"]:
            status, answer = s.ctl.rest("POST", "/v1/jobs", job)
            if status != 201:
                raise RuntimeError(f"POST {job['id']}: {status} {answer}")
        views = [s.ctl.rest("GET", f"/v1/jobs/{j['id']}")[1] for j in doc["jobs"]]
        routes = [r for v in views for r in v["routes"]]
        predicted = max(v["predicted_allreduce_s"] for v in views)
        planned, errors = [], []
        for k in range(args.runs):
            seconds, carried = step(s.net, s.fabric, routes, args.bytes, 5800 + 40 * k)
            planned.append(seconds)
            errors.append(per_link_error(carried, routes, args.bytes))
        jobs = parse_jobs(doc, s.fabric)
        polarised = make_clos_plan(s.fabric, jobs, "ecmp-polarised")
        ecmp_model = max(predict_clos_times(polarised.problem, polarised.routing).values())
        max_load = s.ctl.rest("GET", "/v1/links")[1]["summary"]["max_link_load"]
    p_med, e_med = statistics.median(planned), statistics.median(ecmp)
    result = {
        "fabric": "k=4 fat-tree, 2 hosts per leaf", "bw_mbps": args.bw,
        "bytes_per_flow": args.bytes, "mode": args.mode, "runs": args.runs,
        "flows": len(routes), "planned_max_link_load": max_load,
        "ecmp_polarised_model_max_link_load": polarised.to_dict()["max_link_load"],
        "step_s": {"ecmp": [round(x, 3) for x in ecmp], "planned": [round(x, 3) for x in planned]},
        "predicted_planned_s": round(predicted, 4),
        "predicted_ecmp_polarised_s": round(ecmp_model, 4),
        "planned_over_prediction": round(p_med / predicted, 4),
        "ecmp_over_planned": round(e_med / p_med, 4),
        "per_link_error_of_a_flow": [round(x, 4) for x in errors],
        "targets": {
            "planned_over_prediction<=1.10": p_med / predicted <= 1.10,
            "per_link_bytes_within_5pct_of_a_flow": max(errors) <= 0.05},
        "command": "python -m benchmarks.fattree " + " ".join(argv or sys.argv[1:])}
    write_result(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
