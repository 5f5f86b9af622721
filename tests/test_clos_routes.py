"""Clos plans as the controller's routes and back (planners/clos_routes.py): the round trip
keeps every route, flows without a route in force are left out of the rebuilt plan."""
import pytest

from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.intent import UNROUTABLE
from controller.model.jobs import parse_job
from controller.planners.clos_routes import clos_route_parts, installed_clos_plan
from controller.planners.registry import names

RANKS = ["h0_0", "h2_0", "h4_0", "h6_0", "h1_1", "h3_1", "h5_1", "h7_1"]


def ring(f):
    return parse_job({"id": "r", "collective": "ring_allreduce", "ranks": RANKS,
                      "bytes": 1e6}, f)


@pytest.mark.parametrize("algorithm", names())
def test_parts_round_trip_through_the_rebuilt_plan(algorithm):
    f = Clos.fat_tree(4, 2)
    job = ring(f)
    parts, _, _, _ = clos_route_parts(f, [job], algorithm)
    plan = installed_clos_plan(f, [(job, parts)])
    assert [tuple(r["path"]) for r in plan.routes()] == [p[0][0] for p in parts]


def test_a_flow_without_a_route_is_left_out():
    f = Clos.fat_tree(4, 2)
    job = ring(f)
    parts, _, _, _ = clos_route_parts(f, [job], "greedy")
    parts[3] = UNROUTABLE
    parts[5] = ((("l0", "a0_0", "l1"), 1.0),)  # not a route of that flow
    plan = installed_clos_plan(f, [(job, parts)])
    assert len(plan.problem) == 6 and plan.problem.unroutable == [3, 5]
    assert len(plan.routing.path) == 6


def test_an_unknown_planner_is_refused_by_name():
    """Every name runs on Clos: the one refusal is the registry's, of an unknown name."""
    f = Clos.fat_tree(4, 2)
    with pytest.raises(InputError, match="unknown algorithm 'magic' .choose from greedy"):
        clos_route_parts(f, [ring(f)], "magic")


def test_split_parts_round_trip_with_their_shares():
    f = Clos.fat_tree(4, 2)
    job = parse_job({"id": "s", "flows": [{"src": a, "dst": b, "bytes": 1e6, "dport": 5000 + k}
                                          for k, (a, b) in enumerate([("h0_0", "h4_0"),
                                                                      ("h0_1", "h4_1"),
                                                                      ("h0_0", "h5_0")])]}, f)
    parts, _, _, _ = clos_route_parts(f, [job], "split")
    split = [p for p in parts if len(p) > 1]  # l0's 3 flows over its 2 uplinks
    assert split and all(sum(w for _, w in p) == pytest.approx(1.0) for p in split)
    assert all(len({path for path, _ in p}) == len(p) for p in split)  # a path per part
    plan = installed_clos_plan(f, [(job, parts)])
    assert plan.to_dict()["max_link_load"] == pytest.approx(1.5)  # the parts' shares counted
    assert [len(r.get("split", [r])) for r in plan.routes()] == [len(p) for p in parts]
    assert max(len(p) for p in clos_route_parts(f, [job], "split", max_parts=1)[0]) == 1
