"""The two-tier fast path on a Clos fabric (issue 37): where the two models meet.

A ``model.clos.Clos`` of one two-tier plane, without bundles, failed switches or a host link
speed of its own, is also a ``model.fabric.Fabric`` (``Clos.as_leaf_spine``), and there the
two-tier algorithms are the stronger ones: the bitmask greedy, churn's re-plans that move
few flows and layer 2 (``auto``), the split's McNaughton and LP (the kernel of
``clos_split``, by bytes too), the jobs search. The controller plans such a fabric with them
(``service.replanning``, the off-path stages of ``service.decide``), so that a leaf-spine
declared in either form is planned alike.

A route part is kept in the form of the fabric in use: a path of switch names on a ``Clos``
(source leaf, spine, destination leaf), a spine index on a ``Fabric``. ``spine_parts`` and
``path_parts`` turn one into the other at the planner's boundary, ``flow_spine_parts`` gives a
two-tier assignment's parts per flow. O(parts) each.

The fast path's question (``fast_path``, named by ``shape_of``): the two-tier view of a
fabric, or None. The registry's planners ask it inside: a Clos planner with a faster or
stronger two-tier kernel runs that kernel on a single two-tier plane (``two_tier_problem``,
then ``kernel_routing``: ``clos_auto``, ``clos_split``, ``clos_jobs``; not the greedy and
ECMP, whose Clos planners make the same choices faster even before the two-tier build).
``KERNELS`` (``kernel_for``) names each planner name's kernel for the callers that plan a
two-tier ``Problem`` themselves (``plan.run_planner``: the controller's request path,
``leaf_spine_routes``, the benchmarks and the simulations); a name without a two-tier
algorithm of its own runs its Clos planner there (``clos_planner``: ``annealing``,
``edge-coloring``, ``ilp``: one algorithm, one result). Their options are the run options
(``plan.planner_options``).

>>> from controller.model.clos import Clos
>>> from controller.model.jobs import Flow
>>> c = Clos.leaf_spine(2, 2, 1).wire()
>>> two = c.as_leaf_spine()
>>> two.spines, Clos.fat_tree(4).as_leaf_spine() is None, two.as_leaf_spine() is two
(['s0', 's1'], True, True)
>>> f = Flow("j", "h0_0", "h1_0", 1.0)
>>> spine_parts(two, ((("l0", "s1", "l1"), 1.0),))
((1, 1.0),)
>>> path_parts(two, f, ((1, 1.0),))
((('l0', 's1', 'l1'), 1.0),)
>>> spine_parts(two, None), spine_parts(two, ()), path_parts(two, f, None)
(None, (), None)
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial

from controller.errors import ConflictError
from controller.model.clos import as_clos
from controller.model.clospaths import ClosProblem, ClosRouting
from controller.model.fabric import Fabric
from controller.model.jobs import Flow
from controller.model.problem import Assignment, Problem
from controller.planners.registry import CLOS, TWO_TIER, Ref, clos_options, planner, planner_for

# name -> its two-tier kernel (Problem -> Assignment): the module docstring
KERNELS = {"greedy": Ref("greedy", "greedy"), "ecmp": Ref("ecmp", "ecmp"),
           "ecmp-polarised": Ref("ecmp", "ecmp", (("polarised", True),)),
           "split": Ref("split", "split"), "auto": Ref("auto", "auto"),
           "jobs": Ref("auto", "auto", (("objective", "jobs"),))}


def kernel_for(name: str) -> Callable:
    """The two-tier kernel of ``name`` (``KERNELS``; else its Clos planner on the plane's Clos,
    ``clos_planner``), imported when first asked for; an unknown name is an InputError."""
    planner(name)
    return KERNELS[name].load() if name in KERNELS else partial(clos_planner, algorithm=name)


def fast_path(fabric):
    """The two-tier view the fast path plans ``fabric`` on (the model's answer,
    ``Clos.as_leaf_spine``: a single two-tier plane without bundles), None for other fabrics
    and without one: the one question the planners ask of a fabric's shape."""
    return None if fabric is None else fabric.as_leaf_spine()


def shape_of(fabric) -> str:
    """``two-tier`` for a fabric the fast path plans (``fast_path``; a ``Fabric`` too, and
    None), ``Clos`` for other Clos fabrics; a shape's name as it is."""
    if isinstance(fabric, str):
        if fabric not in (TWO_TIER, CLOS):
            raise ValueError(f"unknown shape {fabric!r}")
        return fabric
    return CLOS if fabric is not None and fast_path(fabric) is None else TWO_TIER


def spine_parts(two: Fabric, parts):
    """A route in force as two-tier parts: a path's spine by its index in ``two``; spine
    indices, None (within a leaf) and () (no alive spine) as they are. A path that is not
    leaf, spine, leaf of ``two`` (a fabric changed under a stored state) gives None: no route
    in force, the flow is planned afresh."""
    if not parts:
        return parts
    out = []
    for where, share in parts:
        if isinstance(where, tuple):
            if len(where) != 3 or where[1] not in two.spine_index:
                return None
            where = two.spine_index[where[1]]
        out.append((where, share))
    return tuple(out)


def path_parts(two: Fabric, flow: Flow, parts):
    """Two-tier parts as Clos paths of ``flow``: (its source leaf, the spine, its destination
    leaf); None and () as they are."""
    if not parts:
        return parts
    a, b = two.hosts[flow.src], two.hosts[flow.dst]
    return tuple(((a, two.spines[j], b), share) for j, share in parts)


def flow_spine_parts(problem: Problem, assignment: Assignment) -> list:
    """Per flow of ``problem.flows`` its (spine, share) parts in ``assignment`` (aligned with
    ``problem.inter``); None within a leaf and for unroutable flows."""
    out: list = [None] * len(problem.flows)
    for k, pos in enumerate(problem.inter):
        out[pos] = assignment.parts[k]
    return out


def two_tier_problem(problem: ClosProblem) -> Problem | None:
    """The other direction of ``clos_planner``: the two-tier problem of the same jobs on the
    plane of ``problem``'s fabric, for a private two-tier kernel (module docstring); None when
    the fabric is not a single two-tier plane or the two models route other flows. O(the
    problem's build)."""
    two = fast_path(problem.fabric)
    if two is None:
        return None
    p2 = Problem.build(two, problem.jobs, skip_unroutable=True)
    return p2 if p2.inter == problem.inter else None


def spine_path(problem: ClosProblem, i: int, spine: int) -> tuple[int, ...]:
    """Flow ``i``'s hops (link members) through ``spine`` on a single two-tier plane, whose
    middles are its spines in the same order: a kernel's spine as the Clos routing's path."""
    return tuple(int(h[spine][0]) for h in problem.options(i, 0)[0])


def kernel_routing(problem: ClosProblem, assignment: Assignment) -> ClosRouting:
    """A two-tier kernel's unsplit ``assignment`` of ``two_tier_problem(problem)`` as this
    problem's routing (its spines the plane's middles, in the same order), its info kept (a
    copy). O(flows x hops)."""
    spines = assignment.spines()
    return ClosRouting([0] * len(spines), list(spines),
                       [spine_path(problem, i, s) for i, s in enumerate(spines)],
                       dict(assignment.info))


def clos_planner(problem: Problem, algorithm: str, **options) -> Assignment:
    """The Clos planner of ``algorithm`` (``registry.planner_for``, the run options it takes of
    ``options``) on a two-tier ``problem``: run on the same flows on the Clos of
    the plane (``as_clos``), its routing as the spine per flow (aligned with
    ``problem.inter``), its info kept. O(the Clos problem's build + the planner).

    >>> from controller.model.jobs import Job
    >>> from controller.model.clos import Clos
    >>> two = Clos.leaf_spine(2, 2, 1).wire().as_leaf_spine()
    >>> ring = Job("r", rings=[["h0_0", "h1_0"]], ring_bytes=1e6)
    >>> a = clos_planner(Problem.build(two, [ring]), "annealing", seed=3)
    >>> a.spines(), a.info["seed"], a.info["steps"]
    ([0, 0], 3, 917)
    """
    fabric = problem.fabric
    cp = ClosProblem.build(as_clos(fabric), problem.jobs, skip_unroutable=True)
    if cp.inter != problem.inter:  # the two models' routability differ: a bug, not an input
        raise ConflictError(f"{algorithm}: the Clos of the plane routes other flows")
    routing = planner_for(algorithm)(cp, **clos_options(algorithm, **options))
    spines = [fabric.spine_index[cp.middle_name(i, q, m)[1]]
              for i, (q, m) in enumerate(zip(routing.plane, routing.middle))]
    return Assignment.unsplit(spines, routing.info)
