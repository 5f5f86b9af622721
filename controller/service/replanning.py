"""New routes for running jobs, as a pure function of the fabric, the records and the settings.

Jobs are planned together per group (algorithm, objective): a group's planner sees every flow
of the group at once; the algorithm is the planner a job's name runs as on the fabric's shape
(``registry.planned_as``: on two tiers ``jobs`` joins auto's group of objective jobs);
``split`` jobs are planned together per bound on parts
(``max_parts``, absent: the planner's default), since the bound is an option of the whole
planner run.
``auto`` starts from the routes in force and moves only what must move or what lowers the max
link load (``planners/churn.py``, its layer-1 stage: about the greedy's time); its later
stages (links at the max, the jobs search, the ILP) run off the request path
(``service/anytime.py``) for the groups marked ``improvable``. The other planners plan
afresh. Flows of a leaf pair with no alive spine get no route (``UNROUTABLE``) instead of
failing the plan. A Clos of one two-tier plane is planned so too, as a leaf-spine
(``planners/leaf_spine_routes.py``: its routes stay paths). On other Clos fabrics (``model.clos``)
``auto`` groups start from the routes in force too (``planners/clos_churn.py``: alive routes
stay, new and broken flows go the greedy's way, others move only when that lowers the max link
load, a fresh ``clos_auto`` plan only when strictly lower on it); every other group is planned
afresh by the Clos planner of its name (``planners/clos_routes.py``; ``split`` with its
group's bound, the others with the options they take of ``Settings.planner_opts``: salt,
seed, ILP time limit); no off-path stages. Every running flow is pinned to the plane of
its route in force (a connection is bound to its plane's addresses; a split flow with parts in
several planes stays free) unless it has no alive path there: those move, and
``plane_changes`` lists them (and every part of a split flow that went to another plane, by
its ``part`` index: its sub-connection follows; a split flow's parts keep their places where
they can, ``_keep_order``). Flows given a plane in ``planes`` (learned flows: the plane their
samples came on) are pinned to it instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from controller.enforcement.rules import part_sport
from controller.model.clos import Clos
from controller.model.intent import JobRecord, flow_key
from controller.planners.clos_routes import clos_route_parts
from controller.planners.leaf_spine import two_tier
from controller.planners.leaf_spine_routes import leaf_spine_route_parts
from controller.planners.plan import planner_options, route_doc
from controller.planners.registry import planned_as
from controller.planners.split import MAX_PARTS
from controller.service.settings import Settings


@dataclass
class Replanned:
    records: dict[str, JobRecord]  # every record, the re-planned ones with new routes
    groups: list[tuple[str, str]] = field(default_factory=list)  # (algorithm, objective)
    moved_flows: int = 0  # flows of auto groups whose route (spine, Clos path) changed
    # auto group -> the off-path stages (layer 2, jobs search, ILP) may improve it
    improvable: dict = field(default_factory=dict)
    planner_ms: list = field(default_factory=list)
    # running flows moved to another plane: their route, ``old_plane`` and ``plane`` (names)
    plane_changes: list = field(default_factory=list)


def group_of(r: JobRecord, settings: Settings, fabric=None) -> tuple[str, str]:
    """The planner group of a job on ``fabric`` (its shape; None: two tiers): the planner its
    algorithm runs as there (``registry.planned_as``: on two tiers ``jobs`` is auto's group of
    objective jobs) and (auto only) its objective."""
    alg, fixed = planned_as(r.algorithm, fabric)
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
    wanted = {planned_as(a, fabric)[0] for a in algorithms}
    groups: dict[tuple[str, str, int], list[JobRecord]] = {}
    for r in out.records.values():
        key = group_of(r, settings, fabric)
        if key[0] in wanted:  # -1: split's default bound (max_parts not given)
            bound = r.job.options.get("max_parts", -1) if key[0] == "split" else -1
            groups.setdefault((*key, bound), []).append(r)
    two = two_tier(fabric)  # None: the Clos planners (else its leaf-spine, ``Fabric``)
    for (alg, objective, bound), group in sorted(groups.items()):
        if two is None:
            flows = [f for r in group for f in r.job.flows()]
            # a running flow stays in the plane of its route in force (split: of its parts;
            # one split over several planes stays free, ``_parts_moved`` lists what moves)
            before = _routes(group)
            in_force = [_plane_in_force(fabric, p) for p in before]
            given = [q for r in group for q in (planes or {}).get(r.job.id, [-1] * len(
                r.job.flows()))]
            pins = [q if q >= 0 else p for q, p in zip(given, in_force)]
            opts = dict(settings.planner_opts.get(alg) or {})  # those the planner takes
            split_opts = settings.planner_opts.get("split") or {}
            opts["max_parts"] = ((bound or None) if bound >= 0
                                 else split_opts.get("max_parts", MAX_PARTS))
            parts, ms, unpinned = clos_route_parts(fabric, [r.job for r in group], alg,
                                                   pins=pins, previous=before, **opts)
            parts = [_keep_order(fabric, old, new) for old, new in zip(before, parts)]
            for pos in unpinned:  # no alive path left in its plane: it moves
                old, new = in_force[pos], fabric.part_plane(parts[pos][0][0])
                if old >= 0 and len(parts[pos]) > 1:  # split: each part that left it
                    out.plane_changes += [
                        _part_moved(fabric, flows[pos], parts[pos], i, old)
                        for i, (where, _) in enumerate(parts[pos])
                        if fabric.part_plane(where) != old]
                elif old >= 0 and old != new:  # a connection in force must follow
                    out.plane_changes.append({**route_doc(flows[pos], parts[pos]),
                                              "old_plane": fabric.planes[old].name,
                                              "plane": fabric.planes[new].name})
            out.plane_changes += _parts_moved(fabric, flows, before, parts, unpinned)
            _set_routes(group, parts, out, alg == "auto")
            out.planner_ms.append(ms)
            out.groups.append((alg, objective))
            continue
        opts = dict(settings.planner_opts.get(alg, planner_options(alg)))
        if bound >= 0:
            opts["max_parts"] = bound or None  # 0: no bound
        parts, ms, info = leaf_spine_route_parts(two, [r.job for r in group], alg, objective,
                                                 _routes(group), opts)
        if alg == "auto":  # churn's layer 1 moved only what must or helps
            out.moved_flows += info["moved_flows"]
            out.improvable[(alg, objective)] = not info["split"] and bool(
                info.get("deferred") or (not info.get("optimal") and settings.ilp_budget > 0))
        out.planner_ms.append(ms)
        out.groups.append((alg, objective))
        _set_routes(group, parts, out, False)
    return out


def _plane_in_force(fabric: Clos, parts) -> int:
    """The plane a running flow is pinned to: its route's (all its parts'); -1 (free) with
    no route in force or parts in several planes."""
    planes = {fabric.part_plane(where) for where, _ in parts or ()}
    return planes.pop() if len(planes) == 1 else -1


def _keep_order(fabric: Clos, old, new):
    """A split flow's new parts in the order of its parts in force: part i keeps its path,
    else its plane, where a new part has it (its sub-connection then stays as it is); the
    others fill the free places in the planner's order."""
    if not old or not new or len(new) < 2:
        return new
    left, slots = list(new), [None] * len(new)
    for key in (tuple, fabric.part_plane):  # the same path, then the same plane
        for i, (was, _) in enumerate(old[:len(new)]):
            j = next((j for j, (w, _) in enumerate(left) if slots[i] is None
                      and key(w) == key(was)), None)
            if j is not None:
                slots[i] = left.pop(j)
    rest = iter(left)
    return tuple(x if x is not None else next(rest) for x in slots)


def _parts_moved(fabric: Clos, flows: list, before: list, after: list, unpinned) -> list:
    """Split flows (kept in their plane) whose part i went to another plane: one entry per
    such part, its ``part`` index, ``old_plane`` and ``plane`` (its sub-connection follows)."""
    out, skip = [], set(unpinned)
    for pos, (old, new) in enumerate(zip(before, after)):
        if pos in skip or not old or not new or max(len(old), len(new)) < 2:
            continue
        for i, ((was, _), (now, _)) in enumerate(zip(old, new)):
            if fabric.part_plane(was) != fabric.part_plane(now):
                out.append(_part_moved(fabric, flows[pos], new, i, fabric.part_plane(was)))
    return out


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


def _set_routes(group: list[JobRecord], parts: list, out: Replanned, count: bool) -> None:
    """The group's flows take ``parts`` (in flow order); ``count``: moved flows counted."""
    pos = 0
    for r in group:
        for f in r.job.flows():
            key = flow_key(f)
            if count and key in r.routes and r.routes[key] != parts[pos]:
                out.moved_flows += 1
            r.routes[key] = parts[pos]
            pos += 1
