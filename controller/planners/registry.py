"""One planner registry (issues 37, 60): every planner name the command line and REST accept,
what it is, and the one function that runs it on every fabric.

A name runs one algorithm, on one problem type: the Clos planner (``ClosProblem ->
ClosRouting``, ``model.clospaths``) on any ``model.clos.Clos`` (a leaf-spine is one, of a
single two-tier plane). Where a two-tier algorithm is faster or stronger on a single two-tier
plane, it is that planner's private kernel: compiled from the plane's two-tier instance inside
the same function (``leaf_spine.kernel_routing``; tests/test_parity.py holds each kernel and
the planner's own algorithm to the same plans there, and pins each difference). The
controller plans a name in the group of the planner it runs as (``runs_as``: ``jobs`` in
the auto group of objective jobs, whose jobs search runs off the request path). ``TWO_TIER`` and
``CLOS`` name the two shapes for the controller's choices (``leaf_spine.shape_of``); a
planner does not ask them.

``Planner.takes`` names the run options its function accepts (``clos_options`` passes those
only): ``salt`` (ECMP's hash), ``seed`` (the annealing's), ``max_parts`` and ``objective``
(split's; auto's objective: ``jobs`` runs the jobs planner), ``time_limit`` (the exact ILP's
MILPs) and ``ilp_time_limit`` (auto's ILP stage on a single two-tier plane; 0: none).
``objective``: the objective the name fixes (a job may not ask another).

>>> planner_for("ilp").__name__
'clos_ilp'
>>> planner_for("jobs").keywords
{'objective': 'jobs'}
>>> planner_for("magic")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
controller.errors.InputError: unknown algorithm 'magic' (choose from greedy, ecmp, ...)
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from importlib import import_module
from typing import NamedTuple

from controller.errors import InputError

OBJECTIVES = ("flows", "jobs")  # what auto ranks plans by: link flow counts, or the jobs
TWO_TIER = "two-tier"  # a fabric's shape, for the controller's choices (leaf_spine.shape_of)
CLOS = "Clos"


class Ref(NamedTuple):
    """A planner function named by its module, imported when first asked for
    (``planner_for``): the registry, and the options' help texts built from it when the
    controller starts, import no planner (numpy, scipy, networkx: about 0.2 s)."""
    module: str
    name: str
    keywords: tuple[tuple[str, object], ...] = ()

    def load(self) -> Callable:
        fn = getattr(import_module(f"controller.planners.{self.module}"), self.name)
        return partial(fn, **dict(self.keywords)) if self.keywords else fn


def _ref(module: str, name: str | None = None, **keywords) -> Ref:
    return Ref(module, name or module, tuple(sorted(keywords.items())))


@dataclass(frozen=True)
class Planner:
    name: str
    what: str
    how: str  # the algorithm, and its private two-tier kernel if it has one
    run: Ref  # the Clos planner: ClosProblem -> ClosRouting
    takes: tuple[str, ...] = ()  # its run options (module docstring)
    objective: str | None = None  # the objective the name fixes (a job may not ask another)


PLANNERS: dict[str, Planner] = {p.name: p for p in (
    Planner("greedy", "the paper's greedy: flows by leaf group, largest first, each on the "
            "option whose busiest link is least loaded",
            "planners.clos_greedy (on a single two-tier plane the choices of the two-tier "
            "planners.greedy)", _ref("clos_greedy")),
    Planner("ecmp", "the baseline: a salted hash of each flow's 5-tuple picks its next hops",
            "planners.clos_ecmp: every tier hashes with its own seed", _ref("clos_ecmp"),
            ("salt",)),
    Planner("ecmp-polarised", "ECMP with the same hash value at every tier (Open vSwitch's "
            "default select groups): hash polarisation",
            "planners.clos_ecmp, polarised", _ref("clos_ecmp", polarised=True), ("salt",)),
    Planner("edge-coloring", "edge colouring tier by tier: each leaf's links differ by at "
            "most one flow",
            "planners.clos_tiers.edge_colouring: the equitable and the Koenig colouring on the "
            "alive slots, each with the local search, the better kept",
            _ref("clos_tiers", "edge_colouring")),
    Planner("annealing", "the paper simulator's simulated annealing, seeded, the best state "
            "kept", "planners.clos_annealing: swaps and redraws of (plane, middle)",
            _ref("clos_annealing"), ("seed",)),
    Planner("ilp", "the exact minimum max link load, then the fewest links at it (HiGHS "
            "MILPs) within a time limit, status, bound and gap reported",
            "planners.clos_ilp: (plane, middle) per flow, clos_auto's routing the incumbent; "
            "exact unless bundles of faster links (info exact); then the layer-2 MILP at that "
            "max in the time left, then chains below the max", _ref("clos_ilp"),
            ("time_limit",)),
    Planner("split", "split few flows into at most max_parts parts to reach the fractional "
            "optimum of the max link load (by bytes with objective jobs)",
            "planners.clos_split: the path LP, by bytes with objective jobs; on a single "
            "two-tier plane planners.split (McNaughton or its LP)", _ref("clos_split"),
            ("max_parts", "objective")),
    Planner("auto", "the default: the best proven unsplit routing, fast, with its lower bound",
            "planners.clos_auto: the tier colouring and the greedy, each improved by the local "
            "search, the better kept; layer 2 by ejection chains, the layer-2 MILP on small "
            "instances; below the max, chains at the next loads down. On a single two-tier "
            "plane planners.auto: construction, repair, the ILP stage (ilp_time_limit), "
            "layer 2. With objective jobs: the jobs planner (planners.clos_objective "
            "chooses)", _ref("clos_objective", "auto_by_objective"),
            ("ilp_time_limit", "objective")),
    Planner("jobs", "the job objective: routes by the jobs' predicted iteration slowdowns "
            "(bytes), not by flow counts",
            "planners.clos_jobs (auto with objective jobs), the lowest mean slowdown under a "
            "bound on the worst job; on a single two-tier plane planners.auto with objective "
            "jobs (its ILP stage within ilp_time_limit)",
            _ref("clos_objective", "auto_by_objective", objective="jobs"),
            ("ilp_time_limit",), objective="jobs"),
)}


def names(fabric=None, distinct: bool = False) -> list[str]:
    """Every planner name, in registry order (every name runs on every fabric: ``fabric`` is
    ignored); ``distinct``: without the names that run another's planner (``runs_as``)."""
    return [n for n in PLANNERS if not distinct or runs_as(n)[0] == n]


def planner(name: str) -> Planner:
    """The registry's entry of ``name``; an unknown name is an InputError naming the choices."""
    p = PLANNERS.get(name)
    if p is None:
        raise InputError(f"unknown algorithm {name!r} (choose from {', '.join(names())})")
    return p


def planner_for(name: str) -> Callable:
    """The planner of ``name`` (``ClosProblem -> ClosRouting``), imported the first time it
    is asked for; an unknown name is an InputError."""
    return planner(name).run.load()


def runs_as(name: str) -> tuple[str, str | None]:
    """(the name whose planner ``name`` runs, the objective it fixes or None): ``("auto",
    "jobs")`` for ``jobs``; the name itself otherwise (unknown names too: ``planner``
    refuses them)."""
    p = PLANNERS.get(name)
    if p is None or p.objective is None:
        return name, None
    base = p.run._replace(keywords=())
    return next((n for n, q in PLANNERS.items() if q.run == base), name), p.objective


def clos_options(name: str, **given) -> dict:
    """The run options (module docstring) the planner of ``name`` takes, of those ``given``
    (the others are dropped: a planner without a seed ignores it)."""
    return {k: v for k, v in given.items() if k in planner(name).takes}


def listing() -> str:
    """The names for a help text: comma-separated."""
    return ", ".join(names())
