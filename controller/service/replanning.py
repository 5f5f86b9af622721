"""New routes for running jobs, as a pure function of the fabric, the records and the settings.

Jobs are planned together per group (algorithm, objective): a group's planner sees every flow
of the group at once; ``split`` jobs are planned together per bound on parts (``max_parts``,
absent: the planner's default), since the bound is an option of the whole planner run.
``auto`` starts from the routes in force and moves only what must move or what lowers the max
link load (``planners/churn.py``, its layer-1 stage: about the greedy's time); its later
stages (links at the max, the jobs search, the ILP) run off the request path
(``service/anytime.py``) for the groups marked ``improvable``. The other planners plan
afresh. Flows of a leaf pair with no alive spine get no route (``UNROUTABLE``) instead of
failing the plan. On a Clos fabric (``model.clos``) every group is planned afresh by the Clos
planner of its name (``planners/clos_routes.py``; ``split`` with its group's bound), with no
off-path stages; every running flow is pinned to the plane of its route in force (a connection
is bound to its plane's addresses; a split flow: all its parts to its first part's plane)
unless it has no alive path there: those move, and ``plane_changes`` lists them. Flows given a
plane in ``planes`` (learned flows: the plane their samples came on) are pinned to it instead.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from controller.model.clos import Clos
from controller.model.fabric import Fabric
from controller.model.intent import UNROUTABLE, JobRecord, flow_key
from controller.model.problem import Problem
from controller.planners.churn import replan
from controller.planners.clos_routes import clos_route_parts
from controller.planners.plan import Plan, planner_options, route_doc, run_planner
from controller.planners.split import MAX_PARTS
from controller.service.settings import Settings


@dataclass
class Replanned:
    records: dict[str, JobRecord]  # every record, the re-planned ones with new routes
    groups: list[tuple[str, str]] = field(default_factory=list)  # (algorithm, objective)
    moved_flows: int = 0  # flows of auto groups whose spine changed
    # auto group -> the off-path stages (layer 2, jobs search, ILP) may improve it
    improvable: dict = field(default_factory=dict)
    planner_ms: list = field(default_factory=list)
    # running flows moved to another plane: their route, ``old_plane`` and ``plane`` (names)
    plane_changes: list = field(default_factory=list)


def group_of(r: JobRecord, settings: Settings) -> tuple[str, str]:
    """The planner group of a job: its algorithm and (auto only) its objective."""
    objective = (r.job.options.get("objective", settings.objective)
                 if r.algorithm == "auto" else "flows")
    return r.algorithm, objective


def replan_groups(fabric: Fabric | Clos, records: dict[str, JobRecord], algorithms: set[str],
                  settings: Settings, planes: dict | None = None) -> Replanned:
    """Copies of ``records`` with the jobs of ``algorithms`` re-planned, group by group;
    ``planes``: job id -> per flow the plane to pin it to, -1 free (Clos only).
    O(planner cost of each group)."""
    out = Replanned({k: v.copy() for k, v in records.items()})
    groups: dict[tuple[str, str, int], list[JobRecord]] = {}
    for r in out.records.values():
        if r.algorithm in algorithms:  # -1: split's default bound (max_parts not given)
            bound = r.job.options.get("max_parts", -1) if r.algorithm == "split" else -1
            groups.setdefault((*group_of(r, settings), bound), []).append(r)
    for (alg, objective, bound), group in sorted(groups.items()):
        if isinstance(fabric, Clos):
            flows = [f for r in group for f in r.job.flows()]
            # a running flow stays in the plane of its route in force (split: its first part)
            in_force = [-1 if not p else fabric.part_plane(p[0][0]) for p in _routes(group)]
            given = [q for r in group for q in (planes or {}).get(r.job.id, [-1] * len(
                r.job.flows()))]
            pins = [q if q >= 0 else p for q, p in zip(given, in_force)]
            split_opts = settings.planner_opts.get("split") or {}
            bound = (bound or None) if bound >= 0 else split_opts.get("max_parts", MAX_PARTS)
            parts, ms, unpinned = clos_route_parts(fabric, [r.job for r in group], alg,
                                                   pins=pins, max_parts=bound)
            for pos in unpinned:  # no alive path left in its plane: it moves
                old, new = in_force[pos], fabric.part_plane(parts[pos][0][0])
                if old >= 0 and old != new:  # a connection in force must follow
                    out.plane_changes.append({**route_doc(flows[pos], parts[pos], []),
                                              "old_plane": fabric.planes[old].name,
                                              "plane": fabric.planes[new].name})
            _set_routes(group, parts, out, alg == "auto")
            out.planner_ms.append(ms)
            out.groups.append((alg, objective))
            continue
        problem = Problem.build(fabric, [r.job for r in group], skip_unroutable=True)
        if alg == "auto":  # from the routes in force: move only what must or helps
            previous = _routes(group)
            t0 = time.perf_counter()
            assignment = replan(problem, previous, objective, ilp_time_limit=0,
                                layer1_only=True)
            ms = (time.perf_counter() - t0) * 1e3
            out.moved_flows += assignment.info["moved_flows"]
            info = assignment.info
            out.improvable[(alg, objective)] = not assignment.is_split() and bool(
                info.get("deferred") or (not info.get("optimal") and settings.ilp_budget > 0))
        else:
            opts = dict(settings.planner_opts.get(alg, planner_options(alg)))
            if bound >= 0:
                opts["max_parts"] = bound or None  # 0: no bound
            assignment, ms = run_planner(problem, alg, **opts)
        out.planner_ms.append(ms)
        out.groups.append((alg, objective))
        parts = Plan(alg, problem, assignment, ms).parts_by_flow()
        for pos in problem.unroutable:
            parts[pos] = UNROUTABLE
        _set_routes(group, parts, out, False)
    return out


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
