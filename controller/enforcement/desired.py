"""What the fabric should look like, computed from the state alone (pure functions).

``desired_tables``: every switch's flow and group entries (static entries plus the ingress rules
of every planned flow). ``installed_plan``: the running jobs and their routes as one ``Plan``,
for link loads and predictions; flows of a leaf pair with no alive spine are left out of it.
"""
from __future__ import annotations

from dataclasses import replace

from controller.enforcement.clos_hostmode import clos_host_static_rules
from controller.enforcement.clos_rules import clos_all_static, clos_flow_rules
from controller.enforcement.modes import mode_of
from controller.enforcement.rules import all_static, flow_rules, part_sport
from controller.errors import ConflictError
from controller.model.clos import Clos
from controller.model.fabric import Fabric
from controller.model.intent import UNROUTABLE, flow_key
from controller.model.problem import Assignment, Problem
from controller.planners.clos_routes import installed_clos_plan
from controller.planners.plan import Plan

Tables = dict  # dpid -> (list[FlowRule], list[GroupEntry])


def desired_tables(fabric: Fabric | Clos, records, host: bool | None = None,
                   ecmp: str = "per-tier") -> Tables:
    """Static entries plus every job's flow rules, per switch. Two flows with the same match
    are a conflict naming both jobs. The host-mode pipeline is static too, present while a
    job runs in host mode (``host`` None) or when asked. ``ecmp``: the aggregation switches'
    hashing on a Clos (``clos_rules.ECMP_HASHES``). O(static entries + planned parts)."""
    records = list(records)
    if host is None:
        host = any(mode_of(r.mode).host_ports for r in records)
    if isinstance(fabric, Clos):
        static = clos_all_static(fabric, ecmp)
        if host:
            for sw in fabric.switches():
                static[fabric.dpids[sw]][0].extend(clos_host_static_rules(fabric, sw))
    else:
        static = all_static(fabric, host)
    want = {dpid: (list(rules), list(groups)) for dpid, (rules, groups) in static.items()}
    owner: dict[tuple, str] = {}
    for r in records:
        for flow, parts in r.flows_with_parts():
            for x in job_flow_rules(fabric, flow, parts, r.mode, r.number):
                what = f"{_named(flow, parts, x)} of job {r.job.id}"
                if x.key in owner:
                    split = " (a flow split into n parts takes source ports p .. p + n - 1)" \
                        if "split" in what + owner[x.key] else ""
                    raise ConflictError(f"{what} has the same match as {owner[x.key]}: give "
                                        f"the flows distinct ports{split}")
                owner[x.key] = what
                want[x.dpid][0].append(x)
    return want


def _named(flow, parts, entry) -> str:
    """A flow as a conflict names it: a part of a split flow with its source port."""
    out = f"flow {flow.src} -> {flow.dst}"
    if parts and len(parts) > 1:
        match = dict(entry.match)
        out += f" (split, its part from source port {match.get('tcp_src', match.get('udp_src'))})"
    return out


def job_flow_rules(fabric: Fabric | Clos, flow, parts, mode: str, number: int) -> list:
    """The entries of one planned flow (``parts`` as the intent keeps them), on either model.
    On a Clos, a split flow's part i is the sub-connection of source port
    ``part_sport(flow, i, parts)``: its entries match that port on the part's path."""
    if isinstance(fabric, Clos):
        if not parts or len(parts) == 1:
            return clos_flow_rules(fabric, flow, parts[0][0] if parts else None, mode, number)
        return [x for i, (path, _) in enumerate(parts) for x in clos_flow_rules(
            fabric, replace(flow, sport=part_sport(flow, i, len(parts))), path, mode, number)]
    return flow_rules(fabric, flow, parts, mode, number)


def installed_plan(fabric: Fabric | Clos, records):
    """All running jobs with their installed routes as one Plan (a ``ClosPlan`` on a Clos
    fabric; None without jobs). Flows with no alive spine (or no route yet) are not part
    of it."""
    records = list(records)
    if not records:
        return None
    if isinstance(fabric, Clos):
        return installed_clos_plan(fabric, [(r.job, [p for _, p in r.flows_with_parts()])
                                            for r in records])
    problem = Problem.build(fabric, [r.job for r in records], skip_unroutable=True)
    routes = {}
    for r in records:
        for f in r.job.flows():
            routes[(r.job.id, flow_key(f))] = r.routes.get(flow_key(f))
    keep, parts = [], []
    for k, pos in enumerate(problem.inter):
        f = problem.flows[pos]
        p = routes.get((f.job, flow_key(f)))
        if p is None or p == UNROUTABLE:
            continue
        keep.append(k)
        parts.append(p)
    if len(keep) != len(problem.inter):
        problem = Problem(problem.fabric, problem.jobs, problem.flows,
                          [problem.inter[k] for k in keep], [problem.src_leaf[k] for k in keep],
                          [problem.dst_leaf[k] for k in keep], [problem.usable[k] for k in keep],
                          sorted(set(problem.unroutable) |
                                 (set(problem.inter) - {problem.inter[k] for k in keep})))
    return Plan("installed", problem, Assignment(parts), 0.0)
