"""Decisions: pure functions of the state, the settings, an input and the time, each returning
one ``Change`` (or None when nothing changes). None of them sends, stores or waits; the
service applies what they return (``transaction.py``).
"""
from __future__ import annotations

from controller.enforcement.modes import FlowMode, mode_of
from controller.errors import ConflictError, InputError, NotFoundError
from controller.model.clos import Clos, as_clos
from controller.model.intent import JobRecord, flow_key, members_of
from controller.model.jobs import Job
from controller.planners.offpath import OffPath, group_instance
from controller.planners.registry import runs_as
from controller.planners.ringorder import advise_ring, apply_advice
from controller.service import admission, wiring
from controller.service.change import Change
from controller.service.learning import Measured, learned_job
from controller.service.replanning import Replanned, group_of, replan_groups
from controller.service.settings import Settings
from controller.service.state import ControllerState, effective_fabric


def post_job(state: ControllerState, settings: Settings, job: Job, now: float,
             name=hex) -> Change:
    """A new job, planned with the running jobs of its algorithm; admitted within the rule
    budget and routable as a whole, else an error naming the problem."""
    fabric = state.fabric
    algorithm, mode = admission.check_new_job(job, state.jobs, settings)
    admission.check_on_fabric(fabric, job.id, algorithm, mode)
    answer: dict = {}
    if job.options.get("ring_order") == "advised" and job.is_collective:
        advice = {"rings": [advise_ring(fabric, r) for r in job.rings]}
        job = apply_advice(job, advice)
        answer["ring_order_advice"] = advice
    learn = job.options.get("learn", True)
    members = tuple(job.members) or tuple(sorted(job.hosts()))
    matrix = "learning" if job.members else "declared"
    record = JobRecord(job, state.next_number, algorithm, mode, now, matrix=matrix,
                       learn=learn, members=members)
    records = dict(state.jobs)
    records[job.id] = record
    planned = replan_groups(fabric, records, {algorithm}, settings)
    answer.update(admission.admit(fabric, state.jobs, planned.records, job.id, settings, name))
    admission.check_routable(fabric, planned.records[job.id])
    wiring.check_job(fabric, state.wiring, planned.records[job.id],  # 409: it disagrees
                     frozenset(d for d, seen in state.switches.items() if seen.connected))
    return with_why(Change(f"job {job.id} added", planned.records, replanned=planned,
                           new_job=job.id, answer=answer))


def with_why(change: Change) -> Change:
    """``change`` with the re-plan's ``moved_why`` in its answer, when it has one (a POST
    or an optimisation says how many running flows it moved and why; events say it too)."""
    if change.moved_why:
        change.answer["moved_why"] = change.moved_why
    return change


def delete_job(state: ControllerState, job_id: str) -> Change:
    if job_id not in state.jobs:
        raise NotFoundError(f"no job {job_id!r}")
    return Change(f"job {job_id} deleted",
                  {k: v for k, v in state.jobs.items() if k != job_id})


def optimize(state: ControllerState, settings: Settings) -> Change:
    """Every running job re-planned together (per planner group)."""
    planned = replan_groups(state.fabric, state.jobs,
                            {r.algorithm for r in state.jobs.values()}, settings)
    return with_why(Change("re-planned on request", planned.records, replanned=planned))


def reoptimise(state: ControllerState, settings: Settings) -> Change | None:
    """Links came back and stayed up for the hold-down time: the auto groups re-planned from
    their routes in force (flows move only where that lowers the objective)."""
    if not any(group_of(r, settings)[0] == "auto" for r in state.jobs.values()):
        return None
    planned = replan_groups(state.fabric, state.jobs, {"auto"}, settings)
    return Change(f"links up for {settings.hold_down:g} s: re-optimised", planned.records,
                  replanned=planned, event={})


def ports_cause(declared: Clos | None, changes: list[tuple]) -> str | None:
    """The cause of a topology change that port changes (dpid, port, up, ...) make: the
    switch links among them, named; None if none is a switch link (host ports).

    >>> f = Clos.leaf_spine(1, 2, 1).wire()
    >>> ports_cause(f, [(f.dpids["l0"], 1, False), (f.dpids["l1"], 1, False)])
    'ports l0:1 to s0 down, l1:1 to s0 down'
    >>> ports_cause(f, [(f.dpids["l0"], 2, False)]) is None  # its host's port
    True
    """
    links = [f"{sw}:{port} to {peer} {'up' if up else 'down'}"
             for sw, port, peer, up in switch_link_reports(declared, changes)]
    if not links:
        return None
    more = f" and {len(links) - 3} more" if len(links) > 3 else ""
    return f"port{'s' if len(links) > 1 else ''} " + ", ".join(links[:3]) + more


def switch_link_reports(fabric: Clos | None, changes: list[tuple]):
    """(switch, port, peer switch, up) of the port changes (dpid, port, up, ...) that are
    switch links of ``fabric`` (host ports and unknown switches left out)."""
    for dpid, port, up, *_ in changes if fabric is not None else ():
        sw = fabric.switch_of_dpid.get(dpid)
        if sw is not None and (peer := fabric.peer(sw, port)) in fabric.dpids:
            yield sw, port, peer, up


def switch_going(fabric: Clos | None, changes: list[tuple]) -> bool:
    """Whether port-down reports (dpid, port, up, ...) may be the first of a lost switch's:
    neighbours report their links to a switch that did not report its side of them, and
    others of its links still up are not reported yet. A lost switch cannot report; its
    neighbours do, over their own connections, and Open vSwitch spread them at k = 16 over
    0.13-0.33 s in bursts, sometimes a single report first: the shell waits for
    the rest, so that one re-plan moves every flow off the switch. A link failure is reported
    by its two ends: once both came, no wait (the first alone waits for the other).

    >>> f = Clos.fat_tree(4).wire()
    >>> down = lambda *pairs: [(f.dpids[a], f.port(a, b), False) for a, b in pairs]
    >>> switch_going(f, down(("l0", "a0_0"), ("a0_0", "l0")))  # a link's two ends
    False
    >>> switch_going(f, down(("l0", "a0_0")))  # one end so far: a0_0 may be lost
    True
    >>> switch_going(f, down(("l0", "a0_0"), ("l1", "a0_0")))  # 2 of a0_0's 4 links
    True
    >>> switch_going(f, down(*((n, "a0_0") for n in ("l0", "l1", "c0_0", "c0_1"))))
    False
    >>> switch_going(f.with_down({("l0", "a0_0")}), down(("l1", "a0_0"), ("c0_0", "a0_0"),
    ...                                                  ("c0_1", "a0_0")))  # l0's was down
    False
    """
    by: dict[str, set[str]] = {}  # switch -> neighbours that reported their link to it down
    for sw, _port, peer, up in switch_link_reports(fabric, changes):
        if not up:
            by.setdefault(peer, set()).add(sw)
    if not by:
        return False
    tier = fabric.tier_of
    return any(not any(x in by.get(r, ()) for r in seen) and any(
        n not in seen and fabric.alive_members(*sorted((x, n), key=tier.get))
        for n in fabric.neighbours(x) if n in fabric.dpids) for x, seen in by.items())


def topology(state: ControllerState, settings: Settings, now: float, cause: str,
             declared: Clos | None = None, force: bool = False,
             detected: float | None = None) -> Change | None:
    """The effective fabric recomputed from the switches seen (and ``declared``, when a
    fabric is declared or discovered). Jobs crossing links that went down are re-planned (per
    planner group); flows that had no alive spine are planned as soon as one returns; auto
    groups move back onto returned links at once when there is no hold-down. None: nothing
    changed. ``detected``: when the change reached the controller (in the event)."""
    declared = declared or state.declared
    fabric = effective_fabric(declared, state.switches, now, settings.dead_after,
                              state.presumed_down if declared is state.declared else frozenset())
    before = state.fabric.down if state.fabric is not None else fabric.down
    if fabric.down == before and not force:
        return None
    went_down, came_up = fabric.down - before, before - fabric.down
    algs = {r.algorithm for r in state.jobs.values()
            if (went_down and crosses(fabric, r, went_down)) or (came_up and r.unroutable())
            or (came_up and group_of(r, settings)[0] == "auto"
                and settings.hold_down <= 0)}
    planned = replan_groups(fabric, state.jobs, algs, settings)
    event = {"links_down": sorted("-".join(map(str, x)) for x in went_down),
             "links_up": sorted("-".join(map(str, x)) for x in came_up)}
    if detected is not None:
        event["detected"] = detected
    return Change(cause, planned.records, fabric=fabric,
                  declared=declared if declared is not state.declared else None,
                  replanned=planned, offline_check=False, fabric_stands=True, event=event)


def crosses(fabric: Clos, r: JobRecord, links: set[tuple[str, str]]) -> bool:
    """Whether a job has a flow part on one of ``links`` ((lower, upper) pairs)."""
    for flow, parts in r.flows_with_parts():
        for where, _ in parts or ():  # a path, leaf to leaf: up, then down
            top = len(where) // 2
            hops = list(zip(where[:top], where[1:top + 1]))
            hops += [(lo, up) for up, lo in zip(where[top:], where[top + 1:])]
            members = members_of(where)  # bundles: the member each hop takes
            hops += [h + (m,) for h, m in zip(hops, members or ())]
            if any(h in links for h in hops):
                return True
    return False


def declare_fabric(state: ControllerState, fabric: Clos, settings: Settings,
                   now: float) -> Change:
    """A fabric declared over REST (only while no job runs), served as a ``Clos``."""
    fabric = as_clos(fabric)
    check_servable(fabric)
    if state.jobs:
        raise ConflictError("fabric: delete the running jobs before replacing the fabric")
    effective = effective_fabric(fabric, state.switches, now, settings.dead_after)
    return Change("fabric declared", {}, fabric=effective, declared=fabric,
                  offline_check=False)


def check_servable(fabric: Clos) -> None:
    """The fabric is wired and, with several planes, its hosts share a leaf in every plane or
    in none: two hosts on one leaf in one plane only make a flow between them leaf-local
    there and not elsewhere, and the planners do not model such crossed wiring.

    >>> check_servable(Clos.leaf_spine(2, 2, 1, planes=2).wire())
    >>> crossed = Clos.leaf_spine(2, 2, 2, planes=2).wire()
    >>> crossed.host_leaves["h0_1"] = ("l0_p0", "l1_p1")
    >>> check_servable(crossed)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    controller.errors.InputError: fabric: hosts h0_0 and h0_1 share leaf l0_p0 in plane 0 ...
    """
    if not fabric.wired:
        raise InputError("fabric: the controller needs dpids, ports, host_ip and host_mac")
    if len(fabric.planes) > 1:
        for q in range(len(fabric.planes)):
            first: dict[str, str] = {}
            for h, leaves in sorted(fabric.host_leaves.items()):
                other = first.setdefault(leaves[q], h)
                for r, leaf in enumerate(leaves):
                    if leaf != fabric.host_leaves[other][r]:
                        raise InputError(
                            f"fabric: hosts {other} and {h} share leaf {leaves[q]} in plane {q} "
                            f"but not in plane {r} (crossed wiring is not served)")


def adopt(state: ControllerState, settings: Settings, fabric: Clos, now: float,
          cause: str) -> Change:
    """A discovered fabric. With jobs running it must keep every switch, port and host they
    know (it may add hosts and switches and change which links are down), else the fabric in
    use stays and the change is an error event only. It is served as a ``Clos``."""
    fabric = as_clos(fabric)
    if state.declared is not None and state.jobs and not extends(state.declared, fabric):
        raise ConflictError("the discovered wiring changes switches or hosts that running "
                            "jobs use: kept the fabric in use; delete the jobs to adopt it")
    return topology(state, settings, now, cause, declared=fabric, force=True)


def extends(old: Clos, new: Clos) -> bool:
    """``new`` keeps every switch, port, host and address of ``old`` (links may differ).

    >>> f = Clos.generate(2, 2, 1, wiring=True)
    >>> extends(f, Clos.generate(2, 3, 1, wiring=True))  # a leaf more: kept
    True
    >>> extends(f, f.with_down({("l0", "s1")}))  # a link down: kept
    True
    >>> extends(f, Clos.generate(3, 2, 1, wiring=True))  # a spine more moves ports
    False
    """
    if any(new.tier_of.get(s) != t or new.plane_of.get(s) != old.plane_of[s]
           for s, t in old.tier_of.items()):
        return False
    if any(new.dpids.get(k) != v for k, v in old.dpids.items()):
        return False
    kept = set(new.interfaces())  # every plane's leaf, address and MAC of every host
    for host, plane, ip, mac, leaf in old.interfaces():
        if ((host, plane, ip, mac, leaf) not in kept or
                new.ports.get(leaf, {}).get(host) != old.ports[leaf].get(host)):
            return False
    return all(new.ports.get(sw, {}).get(peer) == port
               for sw, ports in old.ports.items() for peer, port in ports.items()
               if peer in old.dpids)


def improved(state: ControllerState, group: list[JobRecord], instance: OffPath, better,
             objective: str = "flows") -> Change | None:
    """An off-path plan of one auto group (``better``, a routing of ``instance.problem``,
    the group's instance from ``improvable_group``) as a change, when it is worth moving
    running flows for on the group's objective (``instance.paths``, ``churn.moving_gain``: a
    gain that grows with the flows moved); None when it is not. The answer's
    ``moved_flows`` and ``moved_why`` are the decision's: the flows it weighed, and why."""
    flows = _group_flows(group)
    found = instance.paths(instance.problem, better, instance.previous, objective)
    if found is None:
        return None
    rank_before, rank_after, moved = found.before, found.after, found.moved
    records = {k: v.copy() for k, v in state.jobs.items()}
    for pos, new in found.paths.items():  # the served Clos keeps routes as paths
        r, f = flows[pos]
        records[r.job.id].routes[flow_key(f)] = new
    stage = "ILP" if better.info.get("off_path") == "ilp" else "planning"
    answer = {"moved_flows": moved, "max_link_load_after": rank_after[-2],
              "links_at_max_after": rank_after[-1],
              "optimal": bool(better.info.get("optimal")),
              "moved_why": found.why}
    if objective == "jobs":
        answer.update(mean_slowdown_before=round(rank_before[0], 6),
                      mean_slowdown_after=round(rank_after[0], 6),
                      worst_slowdown_before=round(rank_before[1], 6),
                      worst_slowdown_after=round(rank_after[1], 6))
    # counted as moved flows (event, counters); improvable stays empty: nothing left to do
    replanned = Replanned(records, groups=[(runs_as(group[0].algorithm)[0],
                                            objective)], moved_flows=moved)
    return Change(f"off-path {stage} found a better routing", records, replanned=replanned,
                  event={}, answer=answer)


def improvable_group(state: ControllerState, settings: Settings, key: tuple[str, str]):
    """(group, its instance: ``offpath.group_instance``) of one auto group to improve off
    the request path, or None when it cannot be (gone, or a flow without a route or split)."""
    group = [r for r in state.jobs.values() if group_of(r, settings) == key]
    if not group:
        return None
    found = group_instance(state.fabric, [r.job for r in group],
                           [r.routes.get(flow_key(f)) for r, f in _group_flows(group)], key[1])
    return None if found is None else (group, found)


def _group_flows(group: list[JobRecord]) -> list:
    """The group's (record, flow) pairs, in the order its instance numbers its flows."""
    return [(r, f) for r in group for f in r.job.flows()]


def learned(state: ControllerState, settings: Settings, job_id: str, measured: Measured,
            cause: str, mismatch: dict | None, also: dict | None = None) -> Change:
    """A job's matrix replaced by the flows measured between its members, planned with the
    running jobs of its algorithm. A learned job never takes host mode: the frameworks open
    their connections from ports they choose themselves. ``also`` (job id -> ``Measured``):
    other jobs re-planned on their measured matrices in the same plan (what the learning
    decision predicts when several jobs send pairs their plans lack). Each learned flow is
    pinned to the plane its traffic uses (``Measured.pins``)."""
    changed = {**(also or {}), job_id: measured}
    records = dict(state.jobs)
    for jid, m in changed.items():
        r = state.jobs[jid].copy()
        r.job, r.matrix, r.routes = learned_job(r, m), "learned", {}
        if mode_of(r.mode).host_ports:
            r.mode = FlowMode.name
        records[jid] = r
    records[job_id].mismatch = mismatch
    answer = {"mode_reason": "learned flows are matched per host pair (flow mode): the "
                             "framework chooses its own source ports"} \
        if mode_of(state.jobs[job_id].mode).host_ports else {}
    planned = replan_groups(state.fabric, records, {records[j].algorithm for j in changed},
                            settings, {j: m.pins(records[j].job) for j, m in changed.items()})
    admission.admit(state.fabric, state.jobs, planned.records, job_id, settings)
    return Change(cause, planned.records, replanned=planned, answer=answer,
                  event={"job": job_id, "mismatch": mismatch, **answer})
