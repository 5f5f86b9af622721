"""Clos plans as the controller's routes and back (planners/clos_routes.py): the round trip
keeps every route, flows without a route in force are left out of the rebuilt plan."""
import pytest

from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.intent import UNROUTABLE
from controller.model.jobs import parse_job
from controller.planners.clos_routes import ENFORCED, clos_route_parts, installed_clos_plan

RANKS = ["h0_0", "h2_0", "h4_0", "h6_0", "h1_1", "h3_1", "h5_1", "h7_1"]


def ring(f):
    return parse_job({"id": "r", "collective": "ring_allreduce", "ranks": RANKS,
                      "bytes": 1e6}, f)


@pytest.mark.parametrize("algorithm", ENFORCED)
def test_parts_round_trip_through_the_rebuilt_plan(algorithm):
    f = Clos.fat_tree(4, 2)
    job = ring(f)
    parts, _, _ = clos_route_parts(f, [job], algorithm)
    plan = installed_clos_plan(f, [(job, parts)])
    assert [tuple(r["path"]) for r in plan.routes()] == [p[0][0] for p in parts]


def test_a_flow_without_a_route_is_left_out():
    f = Clos.fat_tree(4, 2)
    job = ring(f)
    parts, _, _ = clos_route_parts(f, [job], "greedy")
    parts[3] = UNROUTABLE
    parts[5] = ((("l0", "a0_0", "l1"), 1.0),)  # not a route of that flow
    plan = installed_clos_plan(f, [(job, parts)])
    assert len(plan.problem) == 6 and plan.problem.unroutable == [3, 5]
    assert len(plan.routing.path) == 6


def test_split_is_refused_by_name():
    f = Clos.fat_tree(4, 2)
    with pytest.raises(InputError, match="not enforced on Clos"):
        clos_route_parts(f, [ring(f)], "split")
