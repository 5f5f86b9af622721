"""The one plan of jobs on any fabric (issues 37, 60), and the routes format it is described in.

``make_plan`` is the one entry point: every fabric is a ``model.clos.Clos``, and every planner
name runs its Clos planner on the Clos problem (``registry.planner_for``; on a single two-tier
plane a planner with a faster two-tier kernel runs it inside, ``planners.leaf_spine``). The
result is a ``Plan``: a ``ClosProblem`` and its ``ClosRouting`` (``ClosSplitRouting`` when
flows are split), whose document (``Plan.to_dict``) has one form. ``run_options`` gives a
planner the options of one run configuration (seed, salt, ILP time limit, objective,
max_parts) that it takes, and refuses those that do not apply: one dialect on every fabric,
the two-tier kernels' too (``planner_options``). ``two_tier_plan`` expresses a kernel's
assignment of a two-tier ``Problem`` as the one ``Plan`` (``run_planner``'s callers, the
benchmarks and the simulations).

The routes JSON (docs/reference/formats.md) lists one route per flow of every job, in the order
``Job.flows()`` gives, with ``"spine": null`` for intra-leaf flows and ``"split"`` parts for
flows a splitting planner divided. A route on a two-tier plane names its ``"spine"``; over
three tiers ``"path"``, the switches from the source leaf to the destination leaf (both
included); ``"plane"`` names the plane when there are several, ``"members"`` the bundle
member of each hop when a bundle has several links.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

from controller.errors import InputError
from controller.model.clos import Clos, as_clos
from controller.model.clospaths import ClosProblem, ClosRouting, flow_links, lower_bound
from controller.model.fabric import Fabric
from controller.model.intent import MemberPath, members_of
from controller.model.iteration import predict_clos_split_times
from controller.model.jobs import Flow, Job
from controller.model.loads import bound_doc, clos_plan_imbalance, links_at_max, load_fields
from controller.model.problem import Assignment, Problem
from controller.planners.clos_split_routing import (
    ClosSplitRouting,
    parts_of,
    split_link_loads,
    split_link_totals,
)
from controller.planners.leaf_spine import flow_spine_parts, kernel_for, path_parts, shape_of
from controller.planners.registry import OBJECTIVES, clos_options, planner, planner_for, runs_as


@dataclass
class Plan:
    """A plan of jobs on a Clos fabric of any shape: ``problem`` the jobs' flows on
    ``problem.fabric``, ``routing`` per flow that leaves its leaf its plane, middle and member
    links (a ``ClosSplitRouting`` when flows are split, ``routing.info`` what the planner
    reports). Its document has one form whichever planners made it (the two-tier fast path,
    ``two_tier_plan``, or the Clos planners): see ``to_dict``."""
    algorithm: str
    problem: ClosProblem
    routing: ClosRouting
    runtime_ms: float  # the planner alone, not building the problem

    def parts_by_flow(self) -> list[tuple | None]:
        """Per flow of ``problem.flows`` its ((link ids, host links included), share) parts,
        None for a flow without a route (unroutable): what the fluid model (``model.fluid``)
        runs a plan on."""
        p, r = self.problem, self.routing
        index = {pos: i for i, pos in enumerate(p.inter)}
        L = p.links
        out: list = []
        for k, f in enumerate(p.flows):
            if k in index and isinstance(r, ClosSplitRouting):
                i = index[k]
                out.append(tuple((tuple(int(x) for x in (p.host_links(i, q)[0], *path,
                                                         p.host_links(i, q)[1])), w)
                                 for q, _, path, w in r.parts[i]))
            elif k in index:
                out.append(((tuple(int(x) for x in flow_links(p, r, index[k])), 1.0),))
            elif k in p.intra:
                q = p.intra[k]
                out.append((((int(L.host_up[q, L.host_id[f.src]]),
                               int(L.host_down[q, L.host_id[f.dst]])), 1.0),))
            else:
                out.append(None)
        return out

    def path_parts(self) -> list[tuple | None]:
        """Per flow of ``problem.flows`` its parts in the controller's form (``model.intent``):
        ((switch names, source leaf to destination leaf), share), a ``MemberPath`` on a fabric
        with bundles; None within a leaf and for a flow without a route."""
        p = self.problem
        out: list = [None] * len(p.flows)
        for i, (pos, parts) in enumerate(zip(p.inter, parts_of(self.routing))):
            out[pos] = tuple((part_path(p, i, q, m, links), w) for q, m, links, w in parts)
        return out

    def routes(self) -> list[dict]:
        """The routes format (module docstring), one route per flow; a split flow's parts
        with their shares as planned (unrounded: they sum to 1, as the controller installs
        and serves them)."""
        p, r = self.problem, self.routing
        index = {pos: i for i, pos in enumerate(p.inter)}
        several = len(p.fabric.planes) > 1
        out = []
        for k, f in enumerate(p.flows):
            i = index.get(k)
            if i is None:
                doc = route_doc(f, None)
                q = p.intra.get(k)
                if several and q is not None:
                    doc["plane"] = p.fabric.planes[q].name
                out.append(doc)
                continue
            parts = r.parts[i] if isinstance(r, ClosSplitRouting) else ()
            if len(parts) > 1:  # a split flow: its parts instead of "spine" / "path"
                out.append(route_doc(f, [((q, m, path), w) for q, m, path, w in parts],
                                     lambda x, i=i: _route(p, i, *x, several)))
            else:
                out.append(route_doc(f, (((r.plane[i], r.middle[i], r.path[i]), 1.0),),
                                     lambda x, i=i: _route(p, i, *x, several)))
        return out

    def predicted_times(self, on_event=None) -> dict[str, float]:
        """The shared prediction per job on the plan's routes, split ones by share
        (``model.iteration.predict_clos_split_times``)."""
        return predict_clos_split_times(self.problem, self.routing, on_event)

    def to_dict(self) -> dict:
        """The plan document, in one form on every fabric and from every planner: the loads
        over the fabric links (``loads.load_fields``), ``max_link_load`` rounded to 1e-9 and
        ``links_at_max`` within ``loads.AT_MAX_TOL`` of it (``loads.links_at_max``), the lower
        bound (``clospaths.lower_bound``) an integer when whole (``loads.bound_doc``), the
        imbalance over the uplinks of every leaf and aggregation switch
        (``loads.clos_plan_imbalance``; on a single two-tier plane the leaves' uplinks, every
        link of the ``leaf`` tier) and the fabric's ``Clos.summary`` (a single two-tier plane
        reads as its leaf-spine)."""
        p, r = self.problem, self.routing
        bound = lower_bound(p)
        loads = split_link_loads(p, r)
        alpha, at_max = max_load(loads[p.links.tier > 0])
        totals = {w: split_link_totals(p, r, w) for w in ("bytes", "flows")}
        doc = {"algorithm": self.algorithm, "routes": self.routes(),
               "max_link_load": alpha, "links_at_max": at_max,
               "lower_bound": bound_doc(bound), **load_fields(alpha, bound, loads, p.links.tier),
               "runtime_ms": round(self.runtime_ms, 3), "flows": len(p.flows),
               "inter_leaf_flows": len(p), "imbalance": clos_plan_imbalance(p.links, totals),
               "fabric": p.fabric.summary()}
        if r.info:
            doc["info"] = r.info
        return doc


def max_load(fabric_loads) -> tuple[float, int]:
    """The max load over the fabric links (rounded to 1e-9) and the links at it (within
    ``loads.AT_MAX_TOL``): the plan document's ``max_link_load`` and ``links_at_max``, and
    ``GET /v1/links``'s summary.

    >>> import numpy as np
    >>> max_load(np.array([1.5, 1.4999999999, 0.5]))
    (1.5, 2)
    """
    alpha = round(float(fabric_loads.max()), 9) if fabric_loads.size else 0.0
    return alpha, links_at_max(fabric_loads)


def part_path(problem: ClosProblem, i: int, q: int, m: int, links) -> tuple:
    """Flow i's part over middle m of plane q with member ``links``, as the controller keeps
    it (``model.intent``): its switch names, source leaf to destination leaf, a
    ``MemberPath`` naming each hop's member on a fabric with bundles."""
    path = tuple(problem.middle_name(i, q, m))
    if not problem.fabric.bundled:
        return path
    return MemberPath(path, (int(problem.links.member_of[x]) for x in links))


def _route(p: ClosProblem, i: int, q: int, m: int, path, several: bool) -> dict:
    """The route fields of flow i over middle m of plane q with member links ``path``."""
    doc: dict = {}
    switches = p.middle_name(i, q, m)
    if len(switches) == 3 and not p.fabric.planes[q].cores:
        doc["spine"] = switches[1]
    else:
        doc["path"] = switches
    if several:
        doc["plane"] = p.fabric.planes[q].name
    members = [_member(p, x) for x in path]
    if any(members):
        doc["members"] = members
    return doc


def _member(problem: ClosProblem, link: int) -> int:
    _, _, m = problem.links.names[link].partition("#")
    return int(m) if m else 0


def path_doc(path) -> dict:
    """A route part's fields for a Clos path of switch names (and its bundle members)."""
    members = getattr(path, "members", None)
    return {"path": list(path), **({"members": list(members)} if members is not None else {})}


def part_fields(fabric, path) -> dict:
    """A routed part's fields in the controller's views (``fabric``: a ``Clos``, as the
    controller serves every fabric): its ``path`` (switch names, source leaf to destination
    leaf), ``members`` on bundles, and ``spine`` on a two-tier plane (as plan documents name
    it there)."""
    doc = path_doc(path)
    if len(path) == 3 and fabric.two_tier_spine(path[1]):
        doc["spine"] = path[1]
    return doc


def route_doc(flow: Flow, parts, where=path_doc, part_sport=None) -> dict:
    """One route of the routes format; ``where(part)`` gives a part's fields (a plan's route
    fields, ``path_doc`` of a path, the controller's ``views.part_fields``);
    ``part_sport(flow, i, n)`` adds each split part's source port (the controller's
    sub-connections)."""
    r = {"job": flow.job, "src": flow.src, "dst": flow.dst}
    if (flow.proto, flow.sport, flow.dport) != (6, 0, 0):
        r.update(proto=flow.proto, sport=flow.sport, dport=flow.dport)
    if parts is None:
        r["spine"] = None
    elif len(parts) == 1:
        r.update(where(parts[0][0]))
    else:
        r["split"] = [{**where(s), "share": share} for s, share in parts]
        if part_sport is not None:
            for i, part in enumerate(r["split"]):
                part["sport"] = part_sport(flow, i, len(parts))
    return r


def routing_of(problem: ClosProblem, given: list) -> ClosRouting:
    """The routing of parts in the controller's form (``Plan.path_parts``), per flow of
    ``problem.flows``: flows without a route (none, or no alive path) or whose parts are not
    routes of theirs (a fabric changed under a stored state) leave ``problem.inter``
    (``keep_only``); a ``ClosSplitRouting`` when some flow has several parts. O(parts x hops).
    """
    keep, plane, middle, path, split = [], [], [], [], []
    for i, pos in enumerate(problem.inter):
        parts = given[pos]
        if not parts:
            continue
        mine = [_part(problem, i, where, share) for where, share in parts]
        if any(x is None for x in mine):
            continue
        keep.append(i)
        plane.append(mine[0][0])
        middle.append(mine[0][1])
        path.append(mine[0][2])
        split.append(mine)
    if len(keep) != len(problem.inter):
        problem.keep_only(keep)
    if any(len(x) > 1 for x in split):  # some flow split: its parts with their shares
        return ClosSplitRouting(plane, middle, path, {}, split)
    return ClosRouting(plane, middle, path)


def _part(problem: ClosProblem, i: int, where, share: float) -> tuple | None:
    """(plane, middle, member link ids, share) of flow i's part over ``where`` (switch names,
    members kept on a fabric with bundles); None when that is not a route of the flow."""
    q, m = _middle(problem, i, where)
    if m is None:
        return None
    hops, _ = problem.options(i, q)
    members = members_of(where)
    if not members or len(members) != len(hops) or any(
            not 0 <= x < h.shape[1] or h[m][x] < 0 for h, x in zip(hops, members)):
        members = [0] * len(hops)  # no members kept (no bundles), or not of this fabric
    return q, m, tuple(int(h[m][x]) for h, x in zip(hops, members)), float(share)


def _middle(problem: ClosProblem, i: int, names) -> tuple[int, int | None]:
    """(plane, middle) of flow i's route through ``names``; middle None when the names are
    not a route of that flow (a fabric changed under a stored state)."""
    f = problem.fabric
    q = f.plane_of.get(names[0], 0)
    plane = f.planes[q]
    a, b, p, r = problem.ends(i, q)
    if len(names) == 3 and names[0] == plane.leaves[a] and names[2] == plane.leaves[b]:
        return q, plane.aggs[p].index(names[1]) if names[1] in plane.aggs[p] else None
    if len(names) == 5 and names[2] in problem.links.core_names[q]:
        m = problem.links.core_names[q].index(names[2])
        return q, m if list(names) == problem.middle_name(i, q, m) else None
    return q, None


def two_tier_plan(algorithm: str, problem: Problem, assignment: Assignment,
                  runtime_ms: float = 0.0, fabric: Clos | None = None) -> Plan:
    """A two-tier planner's ``assignment`` of ``problem`` as the one ``Plan``: its parts as
    Clos paths (``leaf_spine.path_parts``, as the controller enforces them) routed on
    ``fabric`` (the Clos of ``problem.fabric``: ``as_clos`` unless given); ``info`` kept.
    O(parts x hops) after the Clos problem's build."""
    clos = fabric if fabric is not None else as_clos(problem.fabric)
    two = problem.fabric
    paths = [path_parts(two, f, x) for f, x in zip(problem.flows,
                                                    flow_spine_parts(problem, assignment))]
    cp = ClosProblem.build(clos, problem.jobs, skip_unroutable=True)
    routing = routing_of(cp, paths)
    routing.info = assignment.info
    return Plan(algorithm, cp, routing, runtime_ms)


def run_planner(problem: Problem, algorithm: str, **options) -> tuple[Assignment, float]:
    """The assignment of ``algorithm``'s two-tier kernel (``leaf_spine.kernel_for``: an
    unknown name is an InputError) on ``problem`` and its wall time in ms."""
    fn = kernel_for(algorithm)
    t0 = time.perf_counter()
    assignment = fn(problem, **options)
    return assignment, (time.perf_counter() - t0) * 1e3


def make_plan(fabric: Clos | Fabric, jobs: list[Job], algorithm: str = "greedy",
              **options) -> Plan:
    """The plan of ``jobs`` on ``fabric`` (a ``Fabric``: its Clos of one plane) by the planner
    of ``algorithm`` (``registry.planner_for``: an unknown name is an InputError) with the run
    options it takes of ``options`` (``run_options`` makes them from a run configuration).

    >>> c = Clos.leaf_spine(2, 2, 1)
    >>> ring = Job("r", rings=[["h0_0", "h1_0"]], ring_bytes=1e6)
    >>> make_plan(c, [ring], "greedy").routes()[0]
    {'job': 'r', 'src': 'h0_0', 'dst': 'h1_0', 'spine': 's0'}
    >>> make_plan(Clos.leaf_spine(2, 2, 1, planes=2), [ring], "greedy").routes()[0]["plane"]
    'plane0'
    """
    fn = planner_for(algorithm)
    problem = ClosProblem.build(as_clos(fabric), jobs)
    t0 = time.perf_counter()
    routing = fn(problem, **clos_options(algorithm, **options))
    return Plan(algorithm, problem, routing, (time.perf_counter() - t0) * 1e3)


class Run(NamedTuple):
    """What ``make_plan`` runs for a run configuration (``run_options``): the planner, the
    objective it plans with and its options."""
    algorithm: str
    objective: str
    options: dict


run_shape = shape_of  # the shape the controller's default objective depends on (cli.default_objective)


def run_options(fabric, algorithm: str, seed: int = 1234, salt: int = 0,
                ilp_time_limit: float = 60.0, objective: str | None = None,
                max_parts: int | None = None) -> Run:
    """``algorithm`` with one run configuration, on any fabric (``fabric`` is not asked: every
    option applies everywhere): ``planner_options`` (its refusals), and for a name that fixes
    its objective that objective too, so that the run it is (``registry.runs_as``: jobs is
    auto with objective jobs) has one set of options (``compare`` plans it once).

    >>> run_options(None, "auto", objective="jobs").options == run_options(None, "jobs").options
    True
    >>> run_options(None, "jobs")
    Run(algorithm='jobs', objective='jobs', options={'ilp_time_limit': 60.0, 'objective': 'jobs'})
    """
    options = planner_options(algorithm, seed, salt, ilp_time_limit, objective, max_parts)
    fixed = runs_as(algorithm)[1]
    if fixed is not None:
        options["objective"] = fixed
    return Run(algorithm, objective or fixed or "flows", options)


def planner_options(algorithm: str, seed: int = 1234, salt: int = 0,
                    ilp_time_limit: float = 60.0, objective: str | None = None,
                    max_parts: int | None = None) -> dict:
    """The run options ``algorithm`` takes (``registry.Planner.takes``) from a run
    configuration: its planner's, and its two-tier kernel's (``leaf_spine.kernel_for``: the
    same names), each name's own (the controller's ``Settings.planner_opts``). Only ``auto``
    and ``split`` (byte-aware) take the job objective (None: flows): asking another algorithm
    for it is an error; ``jobs`` fixes it. ``max_parts`` (split only; None: split's default,
    0: no bound).

    >>> planner_options("jobs", ilp_time_limit=3), planner_options("ecmp", salt=5)
    ({'ilp_time_limit': 3}, {'salt': 5})
    """
    p = planner(algorithm)
    if objective is not None and objective not in OBJECTIVES:
        raise InputError(f"unknown objective {objective!r} (choose from {', '.join(OBJECTIVES)})")
    if p.objective is not None and objective not in (None, p.objective):
        raise InputError(f"algorithm {algorithm!r} plans with objective {p.objective!r}, not "
                         f"{objective!r} (algorithm 'auto' takes either)")
    if objective not in (None, "flows", p.objective) and "objective" not in p.takes:
        raise InputError(f"objective {objective!r} needs algorithm 'auto' or 'split' "
                         f"(got {algorithm!r})")
    if max_parts is not None and (isinstance(max_parts, bool) or not isinstance(max_parts, int)
                                  or max_parts < 0):
        raise InputError(f"max_parts must be an integer >= 0 (0: no bound), got {max_parts!r}")
    given = {"seed": seed, "salt": salt, "time_limit": ilp_time_limit,
             "ilp_time_limit": ilp_time_limit, "objective": objective or "flows"}
    if max_parts is not None:
        given["max_parts"] = max_parts or None  # 0: no bound
    return clos_options(algorithm, **given)


def make_replan(fabric: Fabric, jobs: list[Job], previous: list,
                ilp_time_limit: float = 0.0) -> Plan:
    """A plan grown from the installed routing (``controller.planners.churn.replan``) on a
    single two-tier plane (``fabric``: its two-tier model): ``previous`` holds, per flow of
    ``jobs`` (routes order), its installed spine parts or None for a new flow. The plan's
    ``routing.info`` reports ``moved_flows`` and ``moved`` (flow positions). By flow counts
    (the jobs objective from routes in force: ``clos_offpath``)."""
    from controller.planners.churn import replan
    problem = Problem.build(fabric, jobs)
    t0 = time.perf_counter()
    assignment = replan(problem, previous, "flows", ilp_time_limit)
    return two_tier_plan("auto", problem, assignment, (time.perf_counter() - t0) * 1e3)
