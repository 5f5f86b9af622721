"""New routes for running jobs, as a pure function of the fabric, the records and the settings.

Jobs are planned together per group (algorithm, objective): a group's planner sees every flow
of the group at once; the algorithm is the planner a job's name runs as (``registry.runs_as``: ``jobs`` joins
auto's group of objective jobs);
``split`` jobs are planned together per bound on parts
(``max_parts``, absent: the planner's default), since the bound is an option of the whole
planner run.
``auto`` starts from the routes in force and moves only what must move or what lowers the max
link load; the other planners plan afresh. One call plans a group on any shape
(``planners/group_routes.py``): on a single two-tier plane the two-tier planners (churn's
layer 1 for ``auto``, about the greedy's time), elsewhere the Clos planners (``clos_churn``'s
layer 1 for ``auto``: alive routes stay, new and broken flows go the greedy's way); on both,
auto's later stages (links at the max, the jobs search, and on two tiers the ILP) run off the
request path (``service/anytime.py``) for the groups marked ``improvable``; ``split`` with its group's
bound and the others with the options they take of ``Settings.planner_opts``. Flows of a
leaf pair with no alive path get no route (``UNROUTABLE``) instead of failing the plan.
Every running flow is pinned to the plane of its route in force (a connection is bound to
its plane's addresses; a split flow with parts in several planes stays free) unless it has no
alive path there: those move, and ``plane_changes`` lists them (and every part of a split
flow that went to another plane, by its ``part`` index: its sub-connection follows; a split
flow's parts keep their places where they can, ``group_routes.keep_order``). Flows given a
plane in ``planes`` (learned flows: the plane their samples came on) are pinned to it
instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from controller.enforcement.rules import part_sport
from controller.model.clos import Clos
from controller.model.intent import JobRecord, flow_key
from controller.planners.group_routes import group_routes
from controller.planners.plan import route_doc
from controller.planners.registry import runs_as
from controller.service.settings import Settings


@dataclass
class Replanned:
    records: dict[str, JobRecord]  # every record, the re-planned ones with new routes
    groups: list[tuple[str, str]] = field(default_factory=list)  # (algorithm, objective)
    moved_flows: int = 0  # flows of auto groups whose route (spine, Clos path) changed
    # auto group -> why it moved the running flows it moved (``clos_churn.why_moved``)
    why: dict = field(default_factory=dict)
    # auto group -> the off-path stages (layer 2, jobs search, ILP) may improve it
    improvable: dict = field(default_factory=dict)
    planner_ms: list = field(default_factory=list)
    # running flows moved to another plane: their route, ``old_plane`` and ``plane`` (names)
    plane_changes: list = field(default_factory=list)


def group_of(r: JobRecord, settings: Settings) -> tuple[str, str]:
    """The planner group of a job: the planner its algorithm runs as (``registry.runs_as``:
    ``jobs`` is auto's group of objective jobs) and (auto only) its objective."""
    alg, fixed = runs_as(r.algorithm)
    if fixed is not None:
        return alg, fixed
    objective = (r.job.options.get("objective", settings.objective)
                 if alg == "auto" else "flows")
    return alg, objective


def replan_groups(fabric: Clos, records: dict[str, JobRecord], algorithms: set[str],
                  settings: Settings, planes: dict | None = None) -> Replanned:
    """Copies of ``records`` with the jobs of ``algorithms`` re-planned, group by group (a
    group is a planner: ``group_of``); ``planes``: job id -> per flow the plane to pin it to,
    -1 free (Clos only). O(planner cost of each group)."""
    out = Replanned({k: v.copy() for k, v in records.items()})
    wanted = {runs_as(a)[0] for a in algorithms}
    groups: dict[tuple[str, str, int], list[JobRecord]] = {}
    for r in out.records.values():
        key = group_of(r, settings)
        if key[0] in wanted:  # -1: split's default bound (max_parts not given)
            bound = r.job.options.get("max_parts", -1) if key[0] == "split" else -1
            groups.setdefault((*key, bound), []).append(r)
    for (alg, objective, bound), group in sorted(groups.items()):
        flows = [f for r in group for f in r.job.flows()]
        # a running flow stays in the plane of its route in force (split: of its parts;
        # one split over several planes stays free, ``_parts_moved`` lists what moves)
        before = _routes(group)
        in_force = [_plane_in_force(fabric, p) for p in before]
        given = [q for r in group for q in (planes or {}).get(r.job.id, [-1] * len(
            r.job.flows()))]
        pins = [q if q >= 0 else p for q, p in zip(given, in_force)]
        got = group_routes(fabric, [r.job for r in group], alg, objective, before, pins=pins,
                           bound=bound, planner_opts=settings.planner_opts,
                           ilp_budget=settings.ilp_budget)
        parts = got.parts
        for pos in got.unpinned:  # no alive path left in its plane: it moves
            old, new = in_force[pos], fabric.part_plane(parts[pos][0][0])
            if old >= 0 and len(parts[pos]) > 1:  # split: each part that left it
                out.plane_changes += [
                    _part_moved(fabric, flows[pos], parts[pos], i, old)
                    for i, (where, _) in enumerate(parts[pos])
                    if fabric.part_plane(where) != old]
            elif old >= 0 and old != new:  # a connection in force must follow
                out.plane_changes.append(_flow_moved(fabric, flows[pos], parts[pos], old))
        out.plane_changes += _parts_moved(fabric, flows, before, parts, got.unpinned)
        _set_routes(group, parts)
        out.moved_flows += got.moved_flows
        if alg == "auto":
            out.improvable[(alg, objective)] = got.improvable
            if got.why:
                out.why[(alg, objective)] = got.why
        out.planner_ms.append(got.ms)
        out.groups.append((alg, objective))
    return out


def _plane_in_force(fabric: Clos, parts) -> int:
    """The plane a running flow is pinned to: its route's (all its parts'); -1 (free) with
    no route in force or parts in several planes."""
    planes = {fabric.part_plane(where) for where, _ in parts or ()}
    return planes.pop() if len(planes) == 1 else -1


def _parts_moved(fabric: Clos, flows: list, before: list, after: list, unpinned) -> list:
    """Split flows (kept in their plane) whose part i went to another plane: one entry per
    such part, its ``part`` index, ``old_plane`` and ``plane`` (its sub-connection follows).
    A split flow planned whole again is one entry without ``part`` (its one connection)
    when its first part's plane changed."""
    out, skip = [], set(unpinned)
    for pos, (old, new) in enumerate(zip(before, after)):
        if pos in skip or not old or not new or max(len(old), len(new)) < 2:
            continue
        if len(new) == 1:
            was = fabric.part_plane(old[0][0])
            if was != fabric.part_plane(new[0][0]):
                out.append(_flow_moved(fabric, flows[pos], new, was))
            continue
        for i, ((was, _), (now, _)) in enumerate(zip(old, new)):
            if fabric.part_plane(was) != fabric.part_plane(now):
                out.append(_part_moved(fabric, flows[pos], new, i, fabric.part_plane(was)))
    return out


def _flow_moved(fabric: Clos, flow, parts, old: int) -> dict:
    """The ``plane_changes`` entry of a whole flow now on ``parts`` (one part), out of plane
    ``old``: its route, ``old_plane`` and ``plane``."""
    return {**route_doc(flow, parts), "old_plane": fabric.planes[old].name,
            "plane": fabric.planes[fabric.part_plane(parts[0][0])].name}


def _part_moved(fabric: Clos, flow, parts, i: int, old: int) -> dict:
    """The ``plane_changes`` entry of part i of a split flow, out of plane ``old``: the
    part's route (``path``, ``members``), its sub-connection's ports and ``part``."""
    doc = route_doc(flow, (parts[i],))
    doc.update(proto=flow.proto, sport=part_sport(flow, i, len(parts)), dport=flow.dport,
               part=i, old_plane=fabric.planes[old].name,
               plane=fabric.planes[fabric.part_plane(parts[i][0])].name)
    return doc


def _routes(group: list[JobRecord]) -> list:
    """The routes in force of the group's flows, in flow order (None: none yet)."""
    return [r.routes.get(flow_key(f)) for r in group for f in r.job.flows()]


def _set_routes(group: list[JobRecord], parts: list) -> None:
    """The group's flows take ``parts`` (in flow order)."""
    pos = 0
    for r in group:
        for f in r.job.flows():
            r.routes[flow_key(f)] = parts[pos]
            pos += 1
