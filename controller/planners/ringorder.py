"""Ring order advice (the TotientPerms idea of TopoOpt, paper.md section 9.3): a ring All-Reduce
gives the same result in any rank order, so choose the order that crosses fewest leaves.

A ring of n ranks on k > 1 leaves needs at least k inter-leaf flows (each leaf entered and left
once), and then every leaf sends and receives exactly one flow of the ring: the smallest possible
contribution to every leaf's degree, hence to the lower bound ceil(degree / up links) and to the
collisions a planner must resolve. Per ring the candidates are, in order of preference:

* the given order (kept whenever nothing better exists);
* a stride p coprime to n (member i sends to member i + p mod n, which is again one ring of n
  members exactly when gcd(p, n) = 1: phi(n) strides, p and n - p give the same ring reversed),
  the smallest p that reaches the fewest inter-leaf flows of all candidates;
* the ranks grouped by leaf (ranks on one leaf adjacent, leaves in order of first appearance),
  which always reaches k.

The advice reports per ring the order, the method and the inter-leaf flows before and after,
and per job the predicted All-Reduce time before and after (fluid model, one iteration, every
job starting at once, both plans made by the same planner).
"""
from __future__ import annotations

from math import gcd

import numpy as np

from controller.errors import InputError
from controller.model.clos import Clos, as_clos
from controller.model.cuts import findings
from controller.model.jobs import Job


def inter_leaf_flows(fabric: Clos, ranks: list[str]) -> int:
    """Flows of the ring ``ranks`` (rank i -> i+1 mod n) whose ends are on different leaves."""
    leaf = [fabric.leaf_of(h) for h in ranks]
    n = len(leaf)
    return sum(1 for i in range(n) if leaf[i] != leaf[(i + 1) % n])


def stride_order(ranks: list[str], p: int) -> list[str]:
    """The ring i -> i + p as a rank order: ranks[0], ranks[p], ranks[2p], ... (gcd(p, n) = 1)."""
    n = len(ranks)
    if gcd(p, n) != 1:
        raise InputError(f"ring order: stride {p} is not coprime to ring size {n}")
    return [ranks[(i * p) % n] for i in range(n)]


def grouped_order(fabric: Clos, ranks: list[str]) -> list[str]:
    """Ranks of one leaf adjacent, leaves in order of first appearance, ranks in given order."""
    first: dict[str, int] = {}
    for h in ranks:
        first.setdefault(fabric.leaf_of(h), len(first))
    return sorted(ranks, key=lambda h: first[fabric.leaf_of(h)])  # stable


def advise_ring(fabric: Clos, ranks: list[str]) -> dict:
    """The best order of one ring: ``{"order", "method", "stride", "inter_leaf_flows":
    {"given", "advised"}}``. O(n^2) for a ring of n ranks (phi(n) strides of n flows).

    Ranks on leaves [l0, l1, l0, l1] cross 4 times; no stride does better (3 is 1 reversed)
    and grouping gives [l0, l0, l1, l1], 2 crossings:

    >>> f = Clos.leaf_spine(2, 2, 2)
    >>> a = advise_ring(f, ["h0_0", "h1_0", "h0_1", "h1_1"])
    >>> a["method"], a["order"], a["inter_leaf_flows"]
    ('leaf-grouped', ['h0_0', 'h0_1', 'h1_0', 'h1_1'], {'given': 4, 'advised': 2})
    """
    n = len(ranks)
    given = inter_leaf_flows(fabric, ranks)
    best = {"order": list(ranks), "method": "given", "stride": 1, "flows": given}
    for p in range(2, n // 2 + 1):
        if gcd(p, n) != 1:
            continue
        order = stride_order(ranks, p)
        flows = inter_leaf_flows(fabric, order)
        if flows < best["flows"]:
            best = {"order": order, "method": "stride", "stride": p, "flows": flows}
    order = grouped_order(fabric, ranks)
    flows = inter_leaf_flows(fabric, order)
    if flows < best["flows"]:
        best = {"order": order, "method": "leaf-grouped", "stride": None, "flows": flows}
    return {"order": best["order"], "method": best["method"], "stride": best["stride"],
            "inter_leaf_flows": {"given": given, "advised": best["flows"]}}


def apply_advice(job: Job, advice: dict) -> Job:
    """A copy of ``job`` with the advised rank order of every ring (``advice`` of one job)."""
    rings = [r["order"] for r in advice["rings"]]
    return Job(job.id, rings=rings, ring_bytes=job.ring_bytes, explicit=list(job.explicit),
               start_s=job.start_s, compute_s=job.compute_s, proto=job.proto, sport=job.sport,
               dport=job.dport, options=dict(job.options))


def advise_order(fabric: Clos, jobs: list[Job], algorithm: str = "auto",
                 predict: bool = True, **options) -> dict:
    """Ring order advice for every ring of every collective job (explicit-flow jobs are left as
    they are), with the saving in inter-leaf flows and, with ``predict``, in predicted time.

    Returns ``{"jobs": {id: {"rings": [advise_ring(...), ...], "inter_leaf_flows": {"given",
    "advised"}, "predicted_allreduce_s": {"given", "advised"}}}, "inter_leaf_flows": {...},
    "max_leaf_degree": {...}, "lower_bound": {...}, "cuts": {...}, "algorithm": ...}``; the
    predictions plan all jobs together with ``algorithm`` (``options`` go to the planner) by
    the one entry point (``plan.make_plan``) and are the fluid model's
    (``fluid.predict_allreduce``), on every shape; the bound is the path lower bound of the max
    link load (``clospaths.lower_bound``); ``cuts`` the cut-bound cuts of the jobs in either
    order (``model.cuts.findings``: where no routing meets a job's ideal, and the placement
    that would), with each plan's distance to their bound when predicted.
    Cost: O(sum n^2) for the orders, plus two plans and two predictions with ``predict``.

    Example: two 4-rank rings over leaves l0, l1 given as [l0, l1, l0, l1] cross 8 times;
    grouped they cross 4 times and each leaf sends 2 flows instead of 4.
    """
    advised_jobs, out = [], {}
    for job in jobs:
        if not job.is_collective:
            advised_jobs.append(job)
            continue
        rings = [advise_ring(fabric, r) for r in job.rings]
        doc = {"rings": rings,
               "inter_leaf_flows": {k: sum(r["inter_leaf_flows"][k] for r in rings)
                                    for k in ("given", "advised")}}
        out[job.id] = doc
        advised_jobs.append(apply_advice(job, doc))
    result = {"algorithm": algorithm, "jobs": out,
              "inter_leaf_flows": {k: sum(d["inter_leaf_flows"][k] for d in out.values())
                                   for k in ("given", "advised")}}
    for name, js in (("given", jobs), ("advised", advised_jobs)):
        for key, value in _bounds(fabric, js).items():
            result.setdefault(key, {})[name] = value
    predicted: dict = {}
    if predict and out:
        from controller.model.fluid import predict_allreduce
        from controller.planners.plan import make_plan
        for name, js in (("given", jobs), ("advised", advised_jobs)):
            times = predicted[name] = predict_allreduce(make_plan(fabric, js, algorithm, **options))
            for jid, doc in out.items():
                doc.setdefault("predicted_allreduce_s", {})[name] = times[jid]
        for doc in out.values():
            t = doc["predicted_allreduce_s"]
            t["saving_s"] = t["given"] - t["advised"]
    result["cuts"] = {name: findings(as_clos(fabric), js, times=predicted.get(name))
                      for name, js in (("given", jobs), ("advised", advised_jobs))}
    return result


def _bounds(fabric, jobs: list[Job]) -> dict:
    """``advise_order``'s figures of ``jobs``: the most inter-leaf flows that leave (or enter)
    one leaf of a plane, and the path lower bound of the max link load (``clospaths``)."""
    from controller.model.clospaths import ClosProblem, lower_bound
    problem = ClosProblem.build(as_clos(fabric), jobs)
    leaf, ends = problem.links.host_leaf, (problem.src, problem.dst)
    degree = max((int(np.bincount(leaf[q][e]).max()) for q in range(len(leaf)) for e in ends
                  if len(e)), default=0)
    bound = lower_bound(problem)  # whole flows per link where the cut has one speed
    return {"max_leaf_degree": degree, "lower_bound": int(bound) if bound.is_integer() else bound}
