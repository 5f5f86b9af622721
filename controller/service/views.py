"""The JSON documents of the REST API, read from the state (pure functions, no side effects).

A job whose leaf pair lost every spine shows its flows as ``"unroutable": true`` and its
prediction as null with the reason; every other view keeps working and lists the broken pairs.
"""
from __future__ import annotations

from collections.abc import Callable

from controller.enforcement.desired import job_flow_rules
from controller.enforcement.hostmode import export_lines
from controller.enforcement.modes import mode_of
from controller.enforcement.openflow import COOKIE_STATIC
from controller.enforcement.rules import part_sport
from controller.errors import ConflictError
from controller.model import cuts
from controller.model.intent import UNROUTABLE, JobRecord, flow_key
from controller.planners.plan import part_fields, route_doc
from controller.service import wiring
from controller.service.clos_views import DEFINITION, clos_imbalance, clos_links_view
from controller.service.learning import declared_pairs
from controller.service.state import ControllerState, unroutable_pairs


def need_fabric(state: ControllerState):
    if state.fabric is None:
        raise ConflictError("no fabric declared yet: PUT /v1/fabric first")
    return state.fabric


def fabric_view(state: ControllerState, installed: dict, pending: set,
                last_sync: dict | None = None, elsewhere=lambda dpid: False) -> dict:
    """``ready``: every switch of the fabric synchronised, or (``elsewhere``, shared switch
    mastership) connected and written by the controller that masters it."""
    f, d = state.fabric, state.declared
    seen = {}
    for dpid, s in sorted(state.switches.items()):
        name = f.switch_of_dpid.get(dpid) if f else None
        table = installed.get(dpid)
        seen[name or f"dpid:{dpid:#x}"] = {
            "dpid": dpid, "connected": s.connected, "provisioned": dpid in installed,
            "pending": dpid in pending,
            "ports_up": sorted(p for p, up in s.ports.items() if up),
            "ports_down": sorted(p for p, up in s.ports.items() if not up),
            "rules": None if table is None else len(table.rules),
            "job_rules": None if table is None else sum(
                1 for r in table.rules.values() if r.cookie != COOKIE_STATIC),
            "last_sync": (last_sync or {}).get(dpid)}
    missing, port_issues = [], []
    if f:
        for sw in f.switches():
            s = state.switches.get(f.dpids[sw])
            if s is None or not s.connected:
                missing.append(sw)
                continue
            for peer in f.ports[sw]:
                for port in f.ports_to(sw, peer):  # every member of a bundle
                    if not s.ports.get(port, False):
                        port_issues.append({"switch": sw, "port": port, "peer": peer})
    unknown = [k for k, v in seen.items() if f is None or v["dpid"] not in f.switch_of_dpid]
    return {"declared": d.to_dict() if d else None, "seen": seen,
            "links_down": sorted("-".join(map(str, x)) for x in f.down - d.down) if f else [],
            "unroutable_pairs": unroutable_pairs(state) if f else [],
            "events": state.events[-10:],
            "missing_switches": missing, "ports_not_up": port_issues,
            "unknown_switches": unknown,
            "ready": readiness(state, installed, elsewhere)["ready"]}


def readiness(state: ControllerState, installed: dict, elsewhere=lambda dpid: False) -> dict:
    """GET /v1/ready (and ``ready`` of GET /v1/fabric): whether every switch of the fabric is
    connected and its tables synchronised here (or, ``elsewhere``, by the controller that
    masters it), with the counts; O(switches), for readiness probes polled often (the fabric
    view is O(ports) and about 200 KB at k = 16)."""
    f = state.fabric
    if f is None:
        return {"ready": False, "switches": 0, "connected": 0, "synchronised": 0}
    dpids = f.derived("switch_dpids", lambda f: [f.dpids[sw] for sw in f.switches()])
    seen = state.switches
    connected = synced = 0
    for d in dpids:  # one pass, no call for a switch synchronised here (published often)
        s = seen.get(d)
        connected += s is not None and s.connected
        synced += d in installed or elsewhere(d)
    wired = wiring.ready_fields(state.wiring)  # a declared fabric that disagrees says so
    return {"ready": connected == synced == len(dpids) and not wired.get("wiring_blocks"),
            "switches": len(dpids), "connected": connected, "synchronised": synced, **wired}


def ready_view(state: ControllerState, rec) -> tuple[int, dict]:
    """GET /v1/ready: ``readiness`` with 200 when ready, else 503 (what probes expect) and an
    ``error`` saying how far it is, as every error answer of the API has."""
    doc = readiness(state, rec.installed, rec.elsewhere)
    if doc["ready"]:
        return 200, doc
    doc["error"] = ("not ready: no fabric yet" if not doc["switches"] else
                    f"not ready: {doc['connected']} of {doc['switches']} switches connected, "
                    f"{doc['synchronised']} synchronised")
    if wiring.reason(doc):
        doc["error"] += f"; {wiring.reason(doc)}"
    return 503, doc


def routes_of(state: ControllerState, r: JobRecord, ports: dict | None = None) -> list[dict]:
    """Routes of a job; in host mode each carries the source port its host must use (per
    split part), from ``ports`` ({flow key: (port, ...)}; null while not chosen yet). On a
    multi-plane fabric each route (or split part) names its ``plane`` (as a plan document
    does) and the addresses its ends use there (``src_ip``, ``dst_ip``): the host picks the
    plane by address."""
    f = state.fabric
    out = []
    for flow, parts in r.flows_with_parts():
        if parts == UNROUTABLE:
            doc = route_doc(flow, None)
            doc["unroutable"] = True
        else:
            doc = route_doc(flow, parts, lambda w: part_fields(f, w), part_sport)
            if mode_of(r.mode).host_ports:
                chosen = (ports or {}).get(flow_key(flow)) or ()
                doc.update(proto=flow.proto, dport=flow.dport)
                if "split" in doc:
                    for i, part in enumerate(doc["split"]):
                        part["sport"] = chosen[i] if i < len(chosen) else None
                else:
                    doc["sport"] = chosen[0] if chosen else None
        if parts not in (None, UNROUTABLE) and f is not None and len(f.planes) > 1:
            for part, (where, _) in zip(doc.get("split") or [doc], parts):
                q = state.fabric.part_plane(where)
                part.update(plane=state.fabric.planes[q].name, src_ip=state.fabric.ip_of(flow.src, q),
                            dst_ip=state.fabric.ip_of(flow.dst, q))
        out.append(doc)
    return out


def ports_export(state: ControllerState, r: JobRecord, ports: dict | None = None) -> str:
    """The job's connections as text for a job launcher: a comment line, then per connection
    (flow, or part of a split flow) source IP, destination IP, protocol, source port,
    destination port. Host mode: the chosen ports; other modes: the flows' own."""
    conns = []
    for flow, parts in r.flows_with_parts():
        if parts == UNROUTABLE:
            continue
        planes = [state.fabric.part_plane(where) for where, _ in parts or ()] or [0]
        if mode_of(r.mode).host_ports:
            chosen = (ports or {}).get(flow_key(flow)) or ()
            conns += [(flow, p, q) for p, q in zip(chosen, planes) if p is not None]
        else:
            conns += [(flow, part_sport(flow, i, len(planes)), q) for i, q in enumerate(planes)]
    return (f"# mlroute job {r.job.id} (mode {r.mode}): source_ip destination_ip protocol "
            "source_port destination_port\n" + export_lines(state.fabric, conns))


PAUSE_ROUTES = 256  # routes between two yields of a job's view (12 ms for 992 flows)


def job_view(state: ControllerState, r: JobRecord, prediction: dict,
             ports: dict | None = None, pause: Callable[[], None] | None = None) -> dict:
    """A job's routes with what each entry counted; ``pause()`` every ``PAUSE_ROUTES``
    routes (the shell's yield)."""
    f = state.fabric
    routes = []
    for doc, (flow, parts) in zip(routes_of(state, r, ports), r.flows_with_parts()):
        if parts:
            doc = dict(doc, measured=measured_parts(state, r, flow, parts))
        routes.append(doc)
        if pause is not None and len(routes) % PAUSE_ROUTES == 0:
            pause()
    return {"id": r.job.id, "algorithm": r.algorithm, "mode": r.mode, "number": r.number,
            "created": r.created, "flows": len(routes), "job": r.job.to_dict(),
            "routes": routes, "unroutable_flows": len(r.unroutable()),
            "ideal_s": r.job.ideal_allreduce_s(f.link_bps()),
            "predicted_allreduce_s": prediction.get("seconds"),
            **({"prediction_error": prediction["error"]} if prediction.get("error") else {})}


def jobs_view(state: ControllerState) -> dict:
    return {"jobs": [{"id": r.job.id, "algorithm": r.algorithm, "mode": r.mode,
                      "flows": len(r.routes), "number": r.number, "created": r.created,
                      "unroutable_flows": len(r.unroutable()), "matrix": r.matrix}
                     for r in state.jobs.values()]}


def routes_view(state: ControllerState, ports: dict | None = None) -> dict:
    """``ports``: host mode's chosen ports, {job id: {flow key: (port, ...)}}."""
    ports = ports or {}
    return {"routes": [x for r in state.jobs.values()
                       for x in routes_of(state, r, ports.get(r.job.id))]}


def links_view(state: ControllerState, plan) -> dict:
    """Planned load per directed switch link, in flows and bytes per step (``clos_views``)."""
    need_fabric(state)
    doc = clos_links_view(state, plan)
    doc["summary"]["unroutable_pairs"] = unroutable_pairs(state)
    return doc


def imbalance_view(state: ControllerState) -> dict:
    return {**clos_imbalance(state.telemetry, need_fabric(state)), "definition": DEFINITION}


def measured_parts(state: ControllerState, r: JobRecord, flow, parts) -> list[dict]:
    """Bytes counted by each per-flow entry of the parts, its switch and the next switch it
    sends to (``spine`` too where that is the spine of a two-tier plane)."""
    f = state.fabric
    out = []
    for rule_ in job_flow_rules(f, flow, parts, r.mode, r.number):
        got = state.telemetry.rules.get(rule_.key)
        port = next(a[1] for a in rule_.actions if a[0] == "output")
        at = f.switch_of_dpid[rule_.dpid]
        nxt = f.peer(at, port)
        out.append({"switch": at, "next": nxt, **({"spine": nxt} if f.two_tier_spine(nxt) else {}),
                    "bytes": got[0] if got else None})
    return out


def budget_view(installed: dict, settings, name) -> dict:
    """Flow entries of the fullest switch against the per-switch budget."""
    counts = {name(d): len(t.rules) for d, t in installed.items()}
    fullest = max(counts.items(), key=lambda kv: (kv[1], kv[0]), default=(None, 0))
    budget = settings.max_flow_rules
    return {"max_flow_rules": budget or None, "over_budget": settings.over_budget,
            "fullest_switch": fullest[0], "fullest_rules": fullest[1],
            "switches_over": sorted(k for k, v in counts.items() if budget and v > budget)}


def service_fabric_view(state, reconciler, settings, host_mode: dict, finder, name) -> dict:
    """GET /v1/fabric: the fabric view with the rule budget, host mode and discovery."""
    rec = reconciler
    doc = fabric_view(state, rec.installed, rec.pending, rec.last_sync, rec.elsewhere)
    doc["rule_budget"] = budget_view(rec.installed, settings, name)
    doc["host_mode"] = host_mode
    doc["discovery"] = {**finder.view(), "wiring_problems": finder.problems}
    return doc


def full_job_view(state, r: JobRecord, prediction: dict, ports, link_speed: dict,
                  learning: dict | None = None, pause: Callable[[], None] | None = None) -> dict:
    """GET /v1/jobs/{id}: routes, prediction, where the matrix came from and what was
    measured, the link speed that ideal_s and the prediction assume, and ``learning``
    (``MatrixLearning.explain``: what the learning loop has of the job, None when it does
    not learn); ``pause`` as ``job_view``'s."""
    doc = job_view(state, r, prediction, ports, pause)
    measured = state.measured.get(r.job.id)
    doc.update(matrix=r.matrix, learn=r.learn, members=list(r.members), mismatch=r.mismatch,
               measured_flows=measured.flows_doc(
                   declared_pairs(state.fabric, r),
                   [p.name for p in state.fabric.planes]) if measured else [],
               link_speed=link_speed, learning=learning, **cut_view(state, r))
    return doc


def cut_view(state, r: JobRecord) -> dict:
    """Where routing stops helping the job (``model.cuts``): ``cuts``, the cut-bound cuts it
    is in among the running jobs (its own demand above a cut's capacity, or theirs together),
    each with the placement that would help; ``cut_bound_s``, the least communication time of
    an iteration any routing reaches given its own cuts (null: no flow yet). O(F x planes)."""
    if not r.job.flows():
        return {"cuts": [], "cut_bound_s": None}
    found = cuts.findings(state.fabric, [x.job for x in state.jobs.values()])
    return {"cuts": [d for d in found if r.job.id in d["jobs"]],
            "cut_bound_s": cuts.bounds(state.fabric, [r.job])[r.job.id]}
