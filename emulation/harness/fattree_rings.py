"""Two rings across the pods of an emulated k = 4 fat-tree, ECMP against mlroute's plan: what
``benchmarks.fattree`` records and ``python -m emulation.demo --fat-tree`` shows.

Two jobs of 8 explicit flows each (ring0 over host 0 of every leaf, ring1 over host 1, ring
neighbours in different pods, so every flow crosses the cores). One *step* is every flow of
both rings sending ``nbytes`` at once over TCP (exact counts, ``transfers.py``); its time is
until the last byte arrived. Measured ``runs`` times with no job, under both hashings of the
controller's select groups (``--mlroute-ecmp``: ``per-tier``, the aggregation switches'
choice apart from the leaves', then ``polarised``, Open vSwitch's one hash deciding both),
and with both jobs posted in ``mode`` (host mode: the senders bind the source ports the
controller chose).
"""
from __future__ import annotations

import statistics
import tempfile

from controller.enforcement.modes import ECMP_HASHES
from controller.model.iteration import predict_clos_times
from controller.model.jobs import parse_jobs
from controller.planners.plan import make_plan
from emulation.harness.collectives import rank_hosts
from emulation.harness.session import Session
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


def compare_rings(bw: float, nbytes: int, runs: int, mode: str = "flow",
                  progress=None, ports=None) -> dict:
    """ECMP steps, then planned steps, on a fresh fat-tree; the figures with their targets, and
    the bytes every directed switch link carried in the last step of each. ``ports``: the
    controller's (``session.Ports``; None: 8080, 6653, 6343)."""
    with tempfile.TemporaryDirectory(prefix="mlroute-fattree-") as tmp, \
            Session.fat_tree(4, 2, bw, tmp, mode=mode, progress=progress, ports=ports) as s:
        doc = ring_jobs(s.fabric, nbytes)
        flows = [{"src": f["src"], "dst": f["dst"]} for j in doc["jobs"] for f in j["flows"]]
        ecmp, carried_by = {}, {}
        for n, hashing in enumerate(ECMP_HASHES):  # the controller's groups, no job
            if n:
                s.restart_controller(["--mlroute-ecmp", hashing])
            ecmp[hashing] = []
            for k in range(runs):
                seconds, carried_by[hashing] = step(s.net, s.fabric, flows, nbytes,
                                                    5600 + 1000 * n + 40 * k)
                ecmp[hashing].append(seconds)
        for job in doc["jobs"]:
            status, answer = s.ctl.rest("POST", "/v1/jobs", dict(job, mode=mode))
            if status != 201:
                raise RuntimeError(f"POST {job['id']}: {status} {answer}")
        views = [s.ctl.rest("GET", f"/v1/jobs/{j['id']}")[1] for j in doc["jobs"]]
        routes = [r for v in views for r in v["routes"]]
        predicted = max(v["predicted_allreduce_s"] for v in views)
        planned, errors, carried = [], [], {}
        for k in range(runs):
            seconds, carried = step(s.net, s.fabric, routes, nbytes, 7600 + 40 * k)
            planned.append(seconds)
            errors.append(per_link_error(carried, routes, nbytes))
        jobs = parse_jobs(doc, s.fabric)
        models = {h: make_plan(s.fabric, jobs, name) for h, name in
                  (("per-tier", "ecmp"), ("polarised", "ecmp-polarised"))}
        predicted_ecmp = {h: max(predict_clos_times(m.problem, m.routing).values())
                          for h, m in models.items()}
        max_load = s.ctl.rest("GET", "/v1/links")[1]["summary"]["max_link_load"]
        tier = {f"{a}->{b}": s.fabric.tier_of[a] if s.fabric.tier_of[a] < s.fabric.tier_of[b]
                else s.fabric.tier_of[b] for a, b in (k.split("->") for k in carried)}
    p_med = statistics.median(planned)
    return {
        "fabric": "k=4 fat-tree, 2 hosts per leaf", "bw_mbps": bw,
        "bytes_per_flow": nbytes, "mode": mode, "runs": runs,
        "flows": len(routes), "planned_max_link_load": max_load,
        "ecmp_model_max_link_load": {h: m.to_dict()["max_link_load"] for h, m in models.items()},
        "step_s": {"planned": [round(x, 3) for x in planned],
                   **{f"ecmp_{h}": [round(x, 3) for x in v] for h, v in ecmp.items()}},
        "predicted_planned_s": round(predicted, 4),
        "predicted_ecmp_s": {h: round(v, 4) for h, v in predicted_ecmp.items()},
        "planned_over_prediction": round(p_med / predicted, 4),
        "ecmp_over_planned": {h: round(statistics.median(v) / p_med, 4) for h, v in ecmp.items()},
        "per_link_error_of_a_flow": [round(x, 4) for x in errors],
        "link_bytes": {k: {"tier": ("leaf", "core")[tier[k]], "planned": n,
                           "planned_flows": planned_links(routes).get(k, 0),
                           **{f"ecmp_{h}": c.get(k, 0) for h, c in carried_by.items()}}
                       for k, n in sorted(carried.items())},
        "targets": {
            "planned_over_prediction<=1.10": p_med / predicted <= 1.10,
            "per_link_bytes_within_5pct_of_a_flow": max(errors) <= 0.05}}
