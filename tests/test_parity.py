"""Parity of the two fabric models (issues 37, 60): the same leaf-spine served as ``Fabric``
(``model.problem``, each name's private two-tier kernel: ``leaf_spine.kernel_for``, as
``plan.run_planner``'s callers and the controller's request path run it) and as ``Clos``
(``model.clospaths``, each name's one planner: ``plan.make_plan``), loaded from one document;
the names are the one registry's (``planners.PLANNERS``).

What must hold, the contract of every private kernel: on a single two-tier plane a name's
kernel and its planner make plans of the same quality (the max link load; then the links at
it; then the whole sorted load vector), and where the code claims the same choices
(``greedy``; ``ecmp`` and ``ecmp-polarised``, whose two-tier hash is the Clos leaf tier's) the
same spine for every flow; where a kernel stops short of a layer its planner reaches
(``NO_WORSE``: ``split`` below the max), the planner is held to no worse than the kernel on
it (below the links at the max, on all but ``SORTED_BEHIND`` instances: neither claims it);
a name whose objective is not the link loads (``MEAN_NO_WORSE``: ``jobs``, the mean predicted
job slowdown) is held to the same max link load, then to a worst and a mean slowdown
no higher than the kernel's: below the max its loads only break the mean's ties, and the two
searches end at different local optima of the mean, each with its own links at the max.
Routes may differ in tie-breaks elsewhere, so the others are
compared by loads only. The planner runs with its kernel withheld (``two_tier_problem``
answering None): its own algorithm, the one other fabrics get, is held to the kernel (where a
kernel runs privately, a plan on the plane is the kernel's: tests/test_one_model.py).

Every difference known today is a test marked ``xfail(strict=True)`` whose reason names the
gap: it fails (so the suite goes red) the day the gap closes, and the mark must then go.
Controller parity (enforcement modes, views): tests/test_parity_service.py.
"""
import functools
import json
import random
from unittest import mock

import numpy as np
import pytest

from controller.model.clos import Clos
from controller.model.fabric import Fabric
from controller.model.jobs import parse_job
from controller.model.loads import AT_MAX_TOL, links_at_max, sorted_load_vector
from controller.model.problem import Problem
from controller.planners import PLANNERS, leaf_spine
from controller.planners.clos_jobs import clos_slowdowns, rank
from controller.planners.clos_split_routing import split_link_loads
from controller.planners.plan import make_plan, planner_options, run_planner, two_tier_plan
from controller.planners.registry import names
from tests.helpers import two_tier_view

COMMON = names()  # every name has a kernel on a single two-tier plane (its own, or its planner)
ILP_SECONDS = 30.0  # the ILPs' time limit: these instances solve in well under a second

# per planner, what differs today between its kernel and its planner, by layer of the objective
LAYER_GAPS: dict[str, dict[str, str]] = {"max_link_load": {}, "links_at_max": {},
                                          "sorted_loads": {}}
# planners whose own algorithm is held to no worse than its kernel on a layer (the sorted load
# vectors compared lexicographically, max-min fairness's order), not to the same plan: split's
# kernel stops at the max (its McNaughton or spine LP leaves the links at it wherever its
# colour classes or vertex fall), the path LP holds only the links at the max in every optimum
NO_WORSE = {"split"}
# below the links at the max neither split claims an optimum: step 3 holds the other cells at
# the midpoint of the max and their least max, and the preference LP's vertex there depends on
# the unsplit start's routes. On 81 instances (these fabrics and kinds, seeds 0-8) the Clos
# split's sorted vector is behind the kernel's on 4 and ahead on 44 (3 and 45 before the tier
# colouring by Euler partitions); on these 27, behind on links-down mixed 0 only. Held: at
# most this many behind, and more ahead than behind
SORTED_BEHIND = {"split": 1}
# planners whose objective ranks the mean predicted job slowdown before the loads below the
# max (module docstring): the max the same, the worst and the mean slowdown no higher; on
# these 27 clos_jobs' mean is lower on 4 (42.851 against 42.866 summed), and where it
# concentrates a job on shared links it may leave more links at the max (links-down mixed 1:
# 10 against 4), the same on 22
MEAN_NO_WORSE = {"jobs"}
LOAD_NAMES = [a for a in COMMON if a not in MEAN_NO_WORSE]


# ---- instances ----------------------------------------------------------------------------
def fabrics() -> list[tuple[str, Fabric]]:
    """A 4 x 8 leaf-spine of 2 hosts per leaf: intact, a whole spine down, five links down."""
    intact = Clos.generate(4, 8, 2).as_leaf_spine()
    links = intact.with_down({("l0", "s1"), ("l2", "s1"), ("l3", "s0"), ("l5", "s2"),
                              ("l5", "s3")})
    return [("intact", intact), ("spine-down", Clos.generate(4, 8, 2, failed_spines=1).as_leaf_spine()),
            ("links-down", links)]


def job_docs(hosts: list[str], kind: str, seed: int) -> list[dict]:
    """Rings, an all-to-all, or both with intra-leaf flows, on hosts drawn by ``seed``."""
    rnd = random.Random(seed)
    hosts = sorted(hosts)
    rnd.shuffle(hosts)
    rings = [{"id": f"r{n}", "collective": "ring_allreduce", "ranks": hosts[5 * n:5 * n + 5],
              "bytes": 4e8 * (n + 1)} for n in range(3)]
    a2a = hosts[:8] if kind == "a2a" else hosts[8:14]
    all_to_all = {"id": "a", "flows": [{"src": x, "dst": y, "bytes": 1e8 * (1 + rnd.random())}
                                       for x in a2a for y in a2a if x != y]}
    if kind == "rings":
        return rings
    if kind == "a2a":
        return [all_to_all]
    local = {"id": "m", "flows": [{"src": "h0_0", "dst": "h0_1", "bytes": 1e7, "dport": 7},
                                  {"src": "h7_1", "dst": "h7_0", "bytes": 1e7, "dport": 7}]}
    return [{**rings[0], "ranks": hosts[:8]}, all_to_all, local]


INSTANCES = [(name, kind, seed) for name, _ in fabrics() for kind in ("rings", "a2a", "mixed")
             for seed in range(3)]


def twins(fabric: Fabric):
    """The fabric and its Clos, from the same document."""
    clos = Clos.from_dict(fabric.to_dict())
    assert clos.tiers == 2 and len(clos.planes) == 1 and not clos.bundled
    return fabric, clos


def kernel_plan(fab: Fabric, clos, jobs, algorithm: str, **options):
    """The plan of the two-tier kernel of ``algorithm`` (``run_planner``) on the two-tier
    problem of ``jobs``, routed on ``clos``."""
    problem = Problem.build(fab, jobs)
    return two_tier_plan(algorithm, problem, run_planner(problem, algorithm, **options)[0],
                         0.0, clos)


def plans(fabric: Fabric, kind: str, seed: int, algorithm: str):
    """(plan of the two-tier kernel, plan of the planner on the Clos) of the same jobs, each
    parsed against its own model."""
    fab, clos = twins(fabric)
    docs = job_docs(list(fab.hosts), kind, seed)
    # no ILP stage (auto's runs only within a time budget): plans that do not depend on time
    opts = planner_options(algorithm, ilp_time_limit=ILP_SECONDS if algorithm == "ilp" else 0.0)
    plan = kernel_plan(fab, clos, [parse_job(d, fab) for d in docs], algorithm, **opts)
    with mock.patch.object(leaf_spine, "two_tier_problem", lambda problem: None):
        cplan = make_plan(clos, [parse_job(d, clos) for d in docs], algorithm, **opts)
    return plan, cplan


@functools.cache
def planned(name: str, kind: str, seed: int, algorithm: str):
    """``plans`` of an instance, computed once for every layer."""
    return plans(dict(fabrics())[name], kind, seed, algorithm)


@functools.cache
def loads(name: str, kind: str, seed: int, algorithm: str) -> tuple[np.ndarray, np.ndarray]:
    """Flows on every directed leaf-spine link, sorted descending, of each plan."""
    plan, cplan = planned(name, kind, seed, algorithm)
    two = np.array(sorted_load_vector(*two_tier_view(plan)))
    p = cplan.problem
    clos = split_link_loads(p, cplan.routing)[p.links.tier > 0]  # the fabric links only
    return two, np.sort(clos)[::-1]


def layer(name: str, vector: np.ndarray):
    """One layer of the objective, computed alike for both plans."""
    if name == "max_link_load":
        return round(float(vector.max()), 6)
    if name == "links_at_max":
        return round(float(vector.max()), 6), links_at_max(vector, AT_MAX_TOL)
    return [round(float(x), 6) for x in vector if x > 1e-9]


def params(names, gaps: dict):
    return [pytest.param(a, marks=pytest.mark.xfail(strict=True, reason=gaps[a]))
            if a in gaps else a for a in names]


# ---- the registry --------------------------------------------------------------------------
def test_every_planner_is_tested():
    assert {"greedy", "ecmp", "auto", "split", "jobs"} <= set(COMMON) == set(PLANNERS)


# ---- loads --------------------------------------------------------------------------------
def _check_layer(layer_name: str, algorithm: str):
    differ, ahead = [], 0
    for instance in INSTANCES:
        two, clos = loads(*instance, algorithm)
        a, b = layer(layer_name, two), layer(layer_name, clos)
        if (b > a) if algorithm in NO_WORSE else (a != b):
            differ.append((*instance, a, b))
        ahead += algorithm in NO_WORSE and b < a
    allowed = SORTED_BEHIND.get(algorithm, 0) if layer_name == "sorted_loads" else 0
    assert len(differ) <= allowed and (not differ or ahead > len(differ)), \
        f"{algorithm}: {len(differ)} of {len(INSTANCES)} differ: {differ[:3]}"


@pytest.mark.parametrize("algorithm", params(COMMON, LAYER_GAPS["max_link_load"]))
def test_same_max_link_load(algorithm):
    _check_layer("max_link_load", algorithm)


@pytest.mark.parametrize("algorithm", params(LOAD_NAMES, LAYER_GAPS["links_at_max"]))
def test_same_links_at_the_max(algorithm):
    _check_layer("links_at_max", algorithm)


@pytest.mark.parametrize("algorithm", params(LOAD_NAMES, LAYER_GAPS["sorted_loads"]))
def test_same_sorted_load_vector(algorithm):
    _check_layer("sorted_loads", algorithm)


@pytest.mark.parametrize("algorithm", sorted(MEAN_NO_WORSE))
def test_no_higher_worst_or_mean_slowdown(algorithm):
    """The objective's layers after the max: neither the worst job's predicted slowdown nor
    the mean over jobs higher (``clos_jobs.clos_slowdowns`` of both routings on the Clos
    problem: one prediction for both)."""
    differ = []
    for instance in INSTANCES:
        plan, cplan = planned(*instance, algorithm)
        p = cplan.problem
        kernel, clos = (rank(clos_slowdowns(p, x.routing)) for x in (plan, cplan))
        if clos[0] > kernel[0] + 1e-9 or clos[1] > kernel[1] + 1e-9:
            differ.append((*instance, kernel, clos))
    assert not differ, f"{algorithm}: {len(differ)} of {len(INSTANCES)} behind: {differ[:3]}"


# ---- the same choices where the code claims them ------------------------------------------
def spine_per_flow(plan, cplan) -> tuple[list, list]:
    """Per flow (job order) the spine name it crosses, None within a leaf, in both plans."""
    two = [None if parts is None else parts[0][0][1] for parts in plan.path_parts()]
    p, r = cplan.problem, cplan.routing
    clos: list = [None] * len(p.flows)
    for i, pos in enumerate(p.inter):
        clos[pos] = p.middle_name(i, r.plane[i], r.middle[i])[1]
    return two, clos


@pytest.mark.parametrize("name, kind, seed", INSTANCES)
def test_greedy_makes_the_same_choices(name, kind, seed):
    plan, cplan = plans(dict(fabrics())[name], kind, seed, "greedy")
    two, clos = spine_per_flow(plan, cplan)
    assert len(two) == len(clos) > 0 and any(two)
    assert two == clos
    assert plan.routes() == cplan.routes()  # the routes documents too: "spine" on two tiers


@pytest.mark.parametrize("salt", [0, 3])
@pytest.mark.parametrize("algorithm", ["ecmp", "ecmp-polarised"])
def test_the_ecmps_hash_alike(algorithm, salt):
    """One hash at the leaf on two tiers, with the seed of the Clos planner's leaf tier."""
    for name, fabric in fabrics():
        for kind in ("rings", "a2a", "mixed"):
            fab, clos = twins(fabric)
            docs = job_docs(list(fab.hosts), kind, 1)
            plan = kernel_plan(fab, clos, [parse_job(d, fab) for d in docs], algorithm,
                               salt=salt)
            cplan = make_plan(clos, [parse_job(d, clos) for d in docs], algorithm, salt=salt)
            assert spine_per_flow(plan, cplan)[0] == spine_per_flow(plan, cplan)[1], (name, kind)


def test_ecmp_by_name_makes_the_same_choices():
    plan, cplan = plans(dict(fabrics())["intact"], "a2a", 0, "ecmp")
    two, clos = spine_per_flow(plan, cplan)
    assert any(two) and two == clos


# ---- the plan documents -------------------------------------------------------------------
# every field but runtime_ms and info (each planner's): one document form for every plan, the
# fabric's summary line too (a single two-tier plane reads as its leaf-spine on both models)
SHARED_FIELDS = ("algorithm", "routes", "max_link_load", "links_at_max", "lower_bound", "gap",
                 "max_load_by_tier", "load_histogram", "flows", "inter_leaf_flows", "imbalance",
                 "fabric")


@pytest.mark.parametrize("name", ["intact", "links-down"])
def test_plan_documents_agree_on_their_shared_fields(name):
    plan, cplan = plans(dict(fabrics())[name], "mixed", 2, "greedy")
    a, b = plan.to_dict(), cplan.to_dict()
    assert a["inter_leaf_flows"] < a["flows"]  # the intra-leaf flows are in both
    assert {k: a[k] for k in SHARED_FIELDS} == {k: b[k] for k in SHARED_FIELDS}
    assert json.dumps(a["lower_bound"]) == json.dumps(b["lower_bound"])  # 2, not 2 and 2.0


def test_plan_documents_have_the_same_fields():
    plan, cplan = plans(dict(fabrics())["intact"], "rings", 0, "greedy")
    a, b = plan.to_dict(), cplan.to_dict()
    assert set(a) - {"info"} == set(b) - {"info"} >= set(SHARED_FIELDS)
    assert [k for k in a if k != "info"] == [k for k in b if k != "info"]  # in one order too


@pytest.mark.parametrize("name", ["intact", "links-down"])
def test_ecmp_polarised_by_name_makes_the_same_choices(name):
    """The two-tier kernel of the name is the two-tier ecmp with the salt alone: the polarised
    hash."""
    plan, cplan = plans(dict(fabrics())[name], "a2a", 0, "ecmp-polarised")
    two, clos = spine_per_flow(plan, cplan)
    assert any(two) and two == clos
