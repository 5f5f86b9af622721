"""One planner registry (issue 37): every planner name the command line and REST accept, what
it is, and how it runs on each shape of fabric.

Two shapes of a fabric (every document loads as a ``Clos``, ``model.clos.load_fabric``; its
shape is the model's answer, asked here only: ``fast_path``, named by ``shape_of``):

* ``two-tier``: a single two-tier plane without bundles (``model.fabric.Fabric``; problems of
  ``model.problem``, a spine per flow). The stronger two-tier algorithms are its fast paths:
  the bitmask greedy, the churn planner and layer 2 (``auto``), the split's McNaughton and
  LP (by bytes too: ``split``, the kernel ``clos_split`` runs there). The controller and the
  offline commands plan a ``Clos`` of one such plane with them (``shape_of``,
  ``planners.leaf_spine``, ``planners.plan.make_plan``). A name without a stronger two-tier
  algorithm runs its Clos planner there too, on the Clos of the plane
  (``leaf_spine.clos_planner``: ``annealing``, ``edge-coloring``, ``ilp``).
* ``Clos``: planes, bundles, three tiers (``model.clos.Clos``; paths of ``model.clospaths``):
  the ``clos_*`` planners.

``planner_for(name, fabric)`` is the one place that refuses a name for a shape: an
``InputError`` naming the algorithm, the shape and the reason (``Way.refused``). Every name
runs on both shapes today. A name means one thing on both; where the two implementations do
not make the same plans on a single two-tier plane, ``Planner.differs`` says how
(tests/test_parity.py pins each difference). On two tiers ``jobs`` is ``auto`` with the jobs
objective (``Way.planned_as``): the controller plans it in that planner's group.

>>> planner_for("ilp", "Clos").__name__
'clos_ilp'
>>> planned_as("jobs", "two-tier"), planned_as("jobs", "Clos")
(('auto', 'jobs'), ('jobs', None))
>>> planner_for("magic", "Clos")  # doctest: +ELLIPSIS
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

TWO_TIER = "two-tier"
CLOS = "Clos"
OBJECTIVES = ("flows", "jobs")  # what auto ranks plans by: link flow counts, or the jobs
SHAPES = {TWO_TIER: "a single two-tier plane (model.fabric.Fabric)",
          CLOS: "planes, bundles or three tiers (model.clos.Clos)"}


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
class Way:
    """How a planner name runs on one shape. ``run`` (a function or its ``Ref``): two-tier
    ``Problem -> Assignment`` (options from ``plan.planner_options``), Clos
    ``ClosProblem -> ClosRouting`` (the run options named in ``takes``: salt, seed,
    max_parts, objective, time_limit); None: refused, and ``refused`` says why.
    ``planned_as``: the name runs as that planner (and the controller plans it in that
    planner's group), with the objective ``objective``."""
    how: str
    run: Callable | Ref | None = None
    takes: tuple[str, ...] = ()
    planned_as: str | None = None
    objective: str | None = None
    refused: str = ""


@dataclass(frozen=True)
class Planner:
    name: str
    what: str
    two_tier: Way
    clos: Way
    differs: str = ""  # how the two ways' plans differ on a single two-tier plane ("": alike)
    objective: str | None = None  # the objective the name fixes (a job may not ask another)

    def on(self, shape: str) -> Way:
        return self.two_tier if shape == TWO_TIER else self.clos


PLANNERS: dict[str, Planner] = {p.name: p for p in (
    Planner("greedy", "the paper's greedy: flows by leaf group, largest first, each on the "
            "option whose busiest link is least loaded",
            Way("planners.greedy (level bitmasks)", _ref("greedy")),
            Way("planners.clos_greedy", _ref("clos_greedy"))),
    Planner("ecmp", "the baseline: a salted hash of each flow's 5-tuple picks its next hops",
            Way("planners.ecmp: the leaf's hash, with the leaf tier's seed (salt/leaf)",
                _ref("ecmp")),
            Way("planners.clos_ecmp: every tier hashes with its own seed", _ref("clos_ecmp"),
                ("salt",))),
    Planner("ecmp-polarised", "ECMP with the same hash value at every tier (Open vSwitch's "
            "default select groups): hash polarisation",
            Way("planners.ecmp, polarised: the leaf's hash, with the salt alone",
                _ref("ecmp", polarised=True)),
            Way("planners.clos_ecmp, polarised", _ref("clos_ecmp", polarised=True), ("salt",))),
    Planner("edge-coloring", "edge colouring tier by tier: each leaf's links differ by at "
            "most one flow",
            Way("planners.clos_tiers.edge_colouring on the plane's Clos "
                "(leaf_spine.clos_planner)",
                _ref("leaf_spine", "clos_planner", algorithm="edge-coloring")),
            Way("planners.clos_tiers.edge_colouring: the equitable and the Koenig colouring "
                "on the alive slots, each with the local search, the better kept",
                _ref("clos_tiers", "edge_colouring"))),
    Planner("annealing", "the paper simulator's simulated annealing, seeded, the best state "
            "kept",
            Way("planners.clos_annealing on the plane's Clos (leaf_spine.clos_planner)",
                _ref("leaf_spine", "clos_planner", algorithm="annealing")),
            Way("planners.clos_annealing: swaps and redraws of (plane, middle)",
                _ref("clos_annealing"), ("seed",))),
    Planner("ilp", "the exact minimum max link load, then the fewest links at it (HiGHS "
            "MILPs) within a time limit, status, bound and gap reported",
            Way("planners.clos_ilp on the plane's Clos (leaf_spine.clos_planner)",
                _ref("leaf_spine", "clos_planner", algorithm="ilp")),
            Way("planners.clos_ilp: (plane, middle) per flow, clos_auto's routing the "
                "incumbent; exact unless bundles of faster links (info exact); then the "
                "layer-2 MILP at that max in the time left, then chains below the max",
                _ref("clos_ilp"), ("time_limit",))),
    Planner("split", "split few flows into at most max_parts parts to reach the fractional "
            "optimum of the max link load (by bytes with objective jobs)",
            Way("planners.split, the two-tier kernel of clos_split: McNaughton or the LP, by "
                "bytes with objective jobs", _ref("split")),
            Way("planners.clos_split: the path LP, by bytes with objective jobs; on a single "
                "two-tier plane its two-tier kernel", _ref("clos_split"),
                ("max_parts", "objective"))),
    Planner("auto", "the default: the best proven unsplit routing, fast, with its lower bound",
            Way("planners.auto: construction, repair, the ILP, layer 2, the jobs search "
                "(objective jobs); the controller runs churn's layer 1 on the request path, "
                "the rest off it", _ref("auto")),
            Way("planners.clos_auto: the tier colouring and the greedy, each improved by the "
                "local search, the better kept; layer 2 by ejection chains, the layer-2 MILP "
                "on small instances; below the max, chains at the next loads down",
                _ref("clos_auto")),
            differs="the same loads (parity tests); Clos auto has no ILP and no jobs "
                    "objective (the controller plans a Clos job's auto by link loads whatever "
                    "its objective)"),
    Planner("jobs", "the job objective: routes by the jobs' predicted iteration slowdowns "
            "(bytes), not by flow counts",
            Way("planners.auto with objective jobs (the controller: the auto group of "
                "objective jobs)", _ref("auto", objective="jobs"), planned_as="auto", objective="jobs"),
            Way("planners.clos_jobs: the lowest mean slowdown under a bound on the worst job, "
                "from the best start of clos_auto, the greedy and the colouring; on a single "
                "two-tier plane auto's (its private kernel)", _ref("clos_jobs")),
            objective="jobs"),
)}


def fast_path(fabric):
    """The two-tier view the fast path plans ``fabric`` on (the model's answer,
    ``Clos.as_leaf_spine``: a single two-tier plane without bundles), None for other fabrics
    and without one: the one question the planners ask of a fabric's shape (``make_plan``,
    ``group_routes``, ``offpath.group_instance``; ``shape_of`` names the answer)."""
    return None if fabric is None else fabric.as_leaf_spine()


def shape_of(fabric) -> str:
    """``two-tier`` for a fabric the fast path plans (``fast_path``: one two-tier plane, a
    ``Fabric`` too), ``Clos`` for other Clos fabrics, ``two-tier`` without one (None); a
    shape's name as it is."""
    if isinstance(fabric, str):
        if fabric not in SHAPES:
            raise ValueError(f"unknown shape {fabric!r}")
        return fabric
    return CLOS if fabric is not None and fast_path(fabric) is None else TWO_TIER


def names(shape=None, distinct: bool = False) -> list[str]:
    """The names that run on ``shape`` (a shape or a fabric; None: on some shape), in registry
    order; ``distinct``: without those planned as another name there (``compare``'s rows)."""
    if shape is None:
        return [n for n, p in PLANNERS.items() if p.two_tier.run or p.clos.run]
    s = shape_of(shape)
    return [n for n, p in PLANNERS.items() if p.on(s).run is not None
            and not (distinct and p.on(s).planned_as)]


def way(name: str, fabric) -> Way:
    """How ``name`` runs on the shape of ``fabric`` (a fabric or a shape), or the InputError
    that refuses it: unknown, or not run on that shape (the reason given)."""
    p = PLANNERS.get(name)
    if p is None:
        raise InputError(f"unknown algorithm {name!r} (choose from {', '.join(names())})")
    s = shape_of(fabric)
    w = p.on(s)
    if w.run is None:
        raise InputError(f"algorithm {name!r} does not run on {s} fabrics ({SHAPES[s]}): "
                         f"{w.refused} (choose from {', '.join(names(s))})")
    return w


def planner_for(name: str, fabric) -> Callable:
    """The planner function of ``name`` on the shape of ``fabric`` (``way``'s refusals),
    imported the first time it is asked for."""
    run = way(name, fabric).run
    return run.load() if isinstance(run, Ref) else run


def planned_as(name: str, fabric) -> tuple[str, str | None]:
    """(planner group, objective it fixes or None) of ``name`` on the shape of ``fabric``:
    ``("auto", "jobs")`` for ``jobs`` on two tiers; the name itself otherwise (unknown names
    too: what refuses them is ``way``)."""
    p = PLANNERS.get(name)
    w = p.on(shape_of(fabric)) if p is not None else None
    if w is None or w.planned_as is None:
        return name, None
    return w.planned_as, w.objective


def clos_options(name: str, **given) -> dict:
    """The run options (salt, seed, max_parts, objective, time_limit) the Clos planner of
    ``name`` takes, of those ``given`` (the others are dropped: a planner without a seed
    ignores it)."""
    return {k: v for k, v in given.items() if k in way(name, CLOS).takes}


def listing() -> str:
    """The names for a help text: comma-separated, then per shape the names it refuses."""
    out = ", ".join(names())
    for s in SHAPES:
        refused = [n for n in names() if PLANNERS[n].on(s).run is None]
        if refused:
            out += f" (not on {s} fabrics: {', '.join(refused)})"
    return out
