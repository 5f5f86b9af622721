"""Run a planner on jobs over a fabric and describe the result in the routes format.

``make_plan`` is the one entry point for every fabric (issue 37): on a single two-tier plane
(``Clos.as_leaf_spine()``) it runs the two-tier planner, the fast path, and gives a ``Plan``;
on other Clos fabrics the Clos planner, a ``ClosPlan`` (``clos_plan``). ``run_options`` gives
each shape the options of one run configuration (seed, salt, ILP time limit, objective,
max_parts) that it takes, and refuses those it does not.

The routes JSON (docs/reference/formats.md) lists one route per flow of every job, in the order
``Job.flows()`` gives, with ``"spine": null`` for intra-leaf flows and ``"split"`` parts for
flows a splitting planner divided.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.fabric import Fabric
from controller.model.iteration import predict_times
from controller.model.jobs import Flow, Job
from controller.model.loads import load_summary, plan_imbalance
from controller.model.problem import Assignment, Problem
from controller.planners.clos_plan import ClosPlan, make_clos_plan
from controller.planners.registry import (
    CLOS,
    OBJECTIVES,
    PLANNERS,
    TWO_TIER,
    planned_as,
    planner_for,
    shape_of,
    way,
)


@dataclass
class Plan:
    algorithm: str
    problem: Problem
    assignment: Assignment
    runtime_ms: float  # the planner alone, not building the problem

    def parts_by_flow(self) -> list[tuple[tuple[int, float], ...] | None]:
        """Per flow of ``problem.flows``: its (spine, share) parts, None for intra-leaf flows."""
        out: list = [None] * len(self.problem.flows)
        for k, pos in enumerate(self.problem.inter):
            out[pos] = self.assignment.parts[k]
        return out

    def routes(self) -> list[dict]:
        spines = self.problem.fabric.spines
        return [route_doc(f, parts, lambda j: {"spine": spines[j]}) for f, parts in
                zip(self.problem.flows, self.parts_by_flow())]

    def predicted_times(self, on_event=None) -> dict[str, float]:
        """The shared prediction per job (``model.iteration.predict_times``), as
        ``ClosPlan.predicted_times`` gives it on a Clos."""
        return predict_times(self.problem, self.assignment.parts, on_event)

    def to_dict(self) -> dict:
        """The plan document; ``ClosPlan.to_dict`` gives the same fields on a Clos (a
        leaf-spine's links are all of the ``leaf`` tier, its switches with uplinks its
        leaves)."""
        doc = {"algorithm": self.algorithm, "routes": self.routes()}
        doc.update(load_summary(self.problem, self.assignment))
        doc.update(runtime_ms=round(self.runtime_ms, 3), flows=len(self.problem.flows),
                   inter_leaf_flows=len(self.problem),
                   imbalance=plan_imbalance(self.problem, self.assignment),
                   fabric=self.problem.fabric.summary())
        if self.assignment.info:
            doc["info"] = self.assignment.info
        return doc


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
    """One route of the routes format; ``where(part)`` gives a part's fields (a plan's
    ``{"spine": name}`` of a spine index, ``path_doc`` of a path, the controller's
    ``views.part_fields``); ``part_sport(flow, i, n)`` adds each split part's source port
    (the controller's sub-connections)."""
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


def run_planner(problem: Problem, algorithm: str, **options) -> tuple[Assignment, float]:
    """The assignment and the planner's wall time in ms (``registry.planner_for`` on a single
    two-tier plane: an unknown name is an InputError)."""
    fn = planner_for(algorithm, TWO_TIER)
    t0 = time.perf_counter()
    assignment = fn(problem, **options)
    return assignment, (time.perf_counter() - t0) * 1e3


def make_plan(fabric: Clos | Fabric, jobs: list[Job], algorithm: str = "greedy",
              **options) -> Plan | ClosPlan:
    """The plan of ``jobs`` on any fabric by the planner ``algorithm`` with its ``options``
    (``run_options`` makes them from a run configuration). On a single two-tier plane (a
    ``Clos`` whose ``as_leaf_spine()`` is one, or that ``Fabric``) the two-tier planner: a
    ``Plan`` of spine indices on the two-tier model; on other Clos fabrics the Clos planner
    (``clos_plan.make_clos_plan``: ``salt`` and the options it takes): a ``ClosPlan``. A name
    unknown, or refused on the shape, is an InputError (``registry.planner_for``).

    >>> c = Clos.leaf_spine(2, 2, 1)
    >>> ring = Job("r", rings=[["h0_0", "h1_0"]], ring_bytes=1e6)
    >>> type(make_plan(c, [ring], "greedy")).__name__, make_plan(c, [ring]).routes()[0]
    ('Plan', {'job': 'r', 'src': 'h0_0', 'dst': 'h1_0', 'spine': 's0'})
    >>> type(make_plan(Clos.leaf_spine(2, 2, 1, planes=2), [ring], "greedy")).__name__
    'ClosPlan'
    """
    two = fabric.as_leaf_spine()
    if two is None:
        return make_clos_plan(fabric, jobs, algorithm, **options)
    problem = Problem.build(two, jobs)
    assignment, ms = run_planner(problem, algorithm, **options)
    return Plan(algorithm, problem, assignment, ms)


class Run(NamedTuple):
    """What ``make_plan`` runs for a run configuration (``run_options``): the planner, the
    objective it plans with and its options."""
    algorithm: str
    objective: str
    options: dict


def run_shape(fabric, max_parts: int | None = None) -> str:
    """The shape of ``fabric`` (``registry.shape_of``; a shape's name as it is), refusing a run
    option the shape cannot take: ``max_parts``, the two-tier split's bound, on a Clos."""
    shape = shape_of(fabric)
    if shape == CLOS and max_parts is not None:
        raise InputError("--max-parts applies to single-plane two-tier fabrics")
    return shape


def run_options(fabric, algorithm: str, seed: int = 1234, salt: int = 0,
                ilp_time_limit: float = 60.0, objective: str | None = None,
                max_parts: int | None = None) -> Run:
    """``algorithm`` with one run configuration on the shape of ``fabric`` (a fabric or a
    shape), each option where the shape takes it (``run_shape`` refuses the others first):

    * two tiers: ``planner_options`` (the objective to auto and split, ``max_parts`` to
      split; its refusals);
    * Clos: the salt, the seed and the ILP's time limit (``make_clos_plan`` gives a planner
      those it takes). The objective ``jobs`` is the jobs planner's (asked of auto, it runs
      that planner); every other planner plans with its own, another is refused. An unknown
      name is refused before the objective.

    >>> run_options("Clos", "auto", objective="jobs")[:2], run_options("two-tier", "jobs")[:2]
    (('jobs', 'jobs'), ('jobs', 'jobs'))
    """
    if run_shape(fabric, max_parts) == TWO_TIER:
        return Run(algorithm, objective or planned_as(algorithm, TWO_TIER)[1] or "flows",
                   planner_options(algorithm, seed, salt, ilp_time_limit, objective, max_parts))
    way(algorithm, CLOS)
    run = "jobs" if algorithm == "auto" and objective == "jobs" else algorithm
    own = PLANNERS[run].objective or "flows"
    if objective not in (None, own):
        raise InputError(f"on this fabric --objective {objective} applies to plan with "
                         "algorithm auto (jobs runs the jobs planner)")
    return Run(run, own, {"salt": salt, "seed": seed, "time_limit": ilp_time_limit})


def planner_options(algorithm: str, seed: int = 1234, salt: int = 0,
                    ilp_time_limit: float = 60.0, objective: str | None = None,
                    max_parts: int | None = None) -> dict:
    """The options each two-tier planner takes, from a run configuration. Only ``auto`` (and
    the churn planner) and ``split`` (byte-aware) take the job objective (None: flows): asking
    another algorithm for it is an error; ``jobs`` is auto with the jobs objective, which it
    fixes. ``max_parts`` (split only; None: split's default, 0: no bound)."""
    if objective is not None and objective not in OBJECTIVES:
        raise InputError(f"unknown objective {objective!r} (choose from {', '.join(OBJECTIVES)})")
    base, fixed = planned_as(algorithm, TWO_TIER)
    if fixed is not None:
        if objective not in (None, fixed):
            raise InputError(f"algorithm {algorithm!r} plans with objective {fixed!r}, not "
                             f"{objective!r} (algorithm 'auto' takes either)")
        objective = fixed
    objective = objective or "flows"
    if objective != "flows" and base not in ("auto", "split"):
        raise InputError(f"objective {objective!r} needs algorithm 'auto' or 'split' "
                         f"(got {algorithm!r})")
    if max_parts is not None and (isinstance(max_parts, bool) or not isinstance(max_parts, int)
                                  or max_parts < 0):
        raise InputError(f"max_parts must be an integer >= 0 (0: no bound), got {max_parts!r}")
    split_opts: dict = {"objective": objective}
    if max_parts is not None:
        split_opts["max_parts"] = max_parts or None
    return {"annealing": {"seed": seed}, "ecmp": {"salt": salt},
            "ilp": {"time_limit": ilp_time_limit}, "split": split_opts,
            "auto": {"ilp_time_limit": ilp_time_limit, "objective": objective}}.get(base, {})


def make_replan(fabric: Fabric, jobs: list[Job], previous: list, objective: str = "flows",
                ilp_time_limit: float = 0.0) -> Plan:
    """A plan grown from the installed routing (``controller.planners.churn.replan``): ``previous`` holds,
    per flow of ``jobs`` (routes order), its installed parts or None for a new flow. The plan's
    ``assignment.info`` reports ``moved_flows`` and ``moved`` (flow positions)."""
    from controller.planners.churn import replan
    problem = Problem.build(fabric, jobs)
    t0 = time.perf_counter()
    assignment = replan(problem, previous, objective, ilp_time_limit)
    return Plan("auto", problem, assignment, (time.perf_counter() - t0) * 1e3)
