"""Routes of one planner group on any fabric, from the routes in force: the one call the
service makes to re-plan a group (``service.replanning``), whatever the fabric's shape.

On a single two-tier plane the two-tier planners run (the fast path,
``leaf_spine_routes.leaf_spine_route_parts``: ``auto`` by churn's layer 1), on other Clos
fabrics the Clos planners (``clos_routes.clos_route_parts``: ``auto`` by ``clos_churn``'s
layer 1; flows pinned to planes). On both, auto's later stages (layer 2, the jobs search) run
off the request path (``planners.offpath``). Either way parts are Clos paths, a split flow's
parts keep their places where they can (``keep_order``: a part's sub-connection then stays as
it is), and an ``auto`` group's moved flows are those whose route in force changed. A job
named ``jobs`` plans in the auto group of objective jobs (``registry.runs_as``), so that the
request path's layer 1 and the off-path stages serve it.

>>> from controller.model.clos import Clos
>>> from controller.model.jobs import Flow, Job
>>> job = Job("j", explicit=[Flow("j", "h0_0", "h1_0", 1.0), Flow("j", "h0_0", "h0_1", 1.0)])
>>> for fab in (Clos.leaf_spine(2, 2, 2), Clos.fat_tree(4)):
...     got = group_routes(fab, [job], "auto", "flows", [None, None])
...     print(len(got.parts[0][0][0]), got.parts[1], got.moved_flows, got.unpinned)
3 None 0 []
3 None 0 []
"""
from __future__ import annotations

from typing import NamedTuple

from controller.model.clos import Clos
from controller.model.jobs import Job
from controller.planners.clos_routes import clos_route_parts
from controller.planners.leaf_spine import fast_path
from controller.planners.leaf_spine_routes import leaf_spine_route_parts
from controller.planners.plan import planner_options
from controller.planners.split import MAX_PARTS


class GroupRoutes(NamedTuple):
    parts: list  # per flow of the jobs, in order: ((path, share), ...), None, UNROUTABLE
    ms: float  # the planner alone
    unpinned: list[int]  # flows whose plane pin was dropped: no alive path left there
    moved_flows: int  # auto: flows whose route in force changed (0 for the other names)
    improvable: bool  # auto: its off-path stages may still improve it
    why: str = ""  # auto: why it moved the running flows it moved (the planner's info["why"])


def group_routes(fabric: Clos, jobs: list[Job], algorithm: str, objective: str, before: list,
                 pins: list[int] | None = None, bound: int = -1,
                 planner_opts: dict | None = None, ilp_budget: float = 0.0) -> GroupRoutes:
    """The routes of ``jobs``, one planner group, by ``algorithm`` (``objective``: auto's).
    ``before``: per flow its route in force (None: none yet); ``pins``: per flow the plane
    it must stay in, -1 free (Clos planners); ``bound``: split's ``max_parts`` (-1: the
    planner's default, 0: no bound); ``planner_opts``: per name the options it takes
    (``Settings.planner_opts``); ``ilp_budget`` > 0: a group auto's layer 1 left short of
    its optimum is improvable off the path. O(the planner's cost)."""
    planner_opts = planner_opts or {}
    two = fast_path(fabric)
    if two is None:
        opts = dict(planner_opts.get(algorithm) or {})
        split = planner_opts.get("split") or {}
        opts["max_parts"] = (bound or None) if bound >= 0 else split.get("max_parts", MAX_PARTS)
        parts, ms, unpinned, info = clos_route_parts(fabric, jobs, algorithm, pins=pins,
                                                     previous=before, layer1_only=True, **opts)
        improvable = algorithm == "auto" and bool(info.get("deferred"))
    else:
        opts = dict(planner_opts.get(algorithm, planner_options(algorithm)))
        if bound >= 0:
            opts["max_parts"] = bound or None  # 0: no bound
        parts, ms, info = leaf_spine_route_parts(two, jobs, algorithm, objective, before, opts)
        unpinned = []
        improvable = algorithm == "auto" and not info["split"] and bool(
            info.get("deferred") or (not info.get("optimal") and ilp_budget > 0))
    moved, running = 0, before.count(None) < len(before)
    if running:  # else nothing in force: nothing to keep
        parts = [keep_order(fabric, old, new) for old, new in zip(before, parts)]
        if algorithm == "auto":
            moved = sum(old is not None and old != new for old, new in zip(before, parts))
    why = info.get("why", "") if algorithm == "auto" and running else ""
    return GroupRoutes(parts, ms, unpinned, moved, improvable, why)


def keep_order(fabric: Clos, old, new):
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
