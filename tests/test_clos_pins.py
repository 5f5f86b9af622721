"""Sticky planes (``ClosProblem.build(..., pins=...)``): a running connection is bound to its
plane's addresses, so every Clos planner keeps a pinned flow in its plane; a pin to a plane
where the flow has no alive path is dropped, and said (``unpinned``)."""
import numpy as np
import pytest

from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem
from controller.planners.clos_ilp import clos_ilp
from controller.planners.clos_routes import clos_route_parts
from controller.planners.registry import names, planner_for
from tests.clos_checks import check_routes, flows_job

FABRICS = {"leaf-spine": lambda: Clos.leaf_spine(2, 4, 1, planes=2).wire(),
           "fat-tree": lambda: Clos.fat_tree(4, 1, planes=2)}
PLANNERS = {n: planner_for(n) for n in names()} | {"ilp": lambda p: clos_ilp(p, 10)}
ENFORCED = names()  # the controller enforces every Clos planner's routes


def all_to_all(fabric):
    hosts = sorted(fabric.host_leaves)
    return [flows_job(fabric, [(a, b) for a in hosts for b in hosts])]


def contrary_pins(fabric, jobs, algorithm):
    """Every other flow pinned to the plane the unpinned planner does not give it, the
    others free: without pins most pinned flows would end elsewhere."""
    parts, _, _, _ = clos_route_parts(fabric, jobs, algorithm)
    pins = [-1] * len(parts)
    for pos, p in enumerate(parts):
        if p and pos % 2 == 0:
            pins[pos] = 1 - fabric.part_plane(p[0][0])
    return pins


@pytest.mark.parametrize("crowded", [False, True], ids=["contrary", "all-in-plane-1"])
@pytest.mark.parametrize("fab", FABRICS, ids=list(FABRICS))
@pytest.mark.parametrize("algorithm", PLANNERS)
def test_every_planner_keeps_pinned_flows_in_their_plane(fab, algorithm, crowded):
    """Pins against the planner's own choice, or every flow in plane 1 (the max load
    doubles, so the ILP and the LP search below it and must not leave the plane)."""
    f = FABRICS[fab]()
    jobs = all_to_all(f)
    pins = [1] * len(jobs[0].flows()) if crowded else contrary_pins(f, jobs, algorithm)
    p = ClosProblem.build(f, jobs, pins=pins)
    assert p.unpinned == [] and (p.pin >= 0).sum() == sum(x >= 0 for x in pins)
    r = PLANNERS[algorithm](p)
    check_routes(p, r)
    split = getattr(r, "parts", None)
    for i, pos in enumerate(p.inter):
        if pins[pos] >= 0:
            assert r.plane[i] == pins[pos], (algorithm, i)
            assert split is None or {q for q, *_ in split[i]} == {pins[pos]}  # every part
    assert len(set(r.plane)) == 1 + (not crowded)  # the free flows still use both planes
    if algorithm == "edge-coloring":  # coloured in their plane, not left to the greedy
        assert r.info["greedy_placed"] == 0


@pytest.mark.parametrize("fab", FABRICS, ids=list(FABRICS))
@pytest.mark.parametrize("algorithm", ENFORCED)
def test_clos_route_parts_passes_the_pins(fab, algorithm):
    f = FABRICS[fab]()
    jobs = all_to_all(f)
    pins = contrary_pins(f, jobs, algorithm)
    parts, _, unpinned, _ = clos_route_parts(f, jobs, algorithm, pins=pins)
    assert unpinned == []
    assert all(f.part_plane(parts[pos][0][0]) == q for pos, q in enumerate(pins) if q >= 0)


@pytest.mark.parametrize("fab", FABRICS, ids=list(FABRICS))
def test_a_pin_to_a_plane_without_alive_path_is_dropped_and_said(fab):
    """Plane 0's leaf of h0_0 loses every uplink: flows of h0_0 pinned to plane 0 can only
    stay routed in plane 1, so their pins are dropped (``unpinned``) and they move; a flow
    pinned to plane 1 and every flow not touching h0_0 stay where pinned."""
    f = FABRICS[fab]()
    leaf = f.host_leaves["h0_0"][0]
    f = f.with_down({(leaf, up) for up in f.neighbours(leaf) if up in f.tier_of
                     and f.tier_of[up] == 1})
    jobs = all_to_all(f)
    flows = jobs[0].flows()
    pins = [0] * len(flows)
    touches = [pos for pos, x in enumerate(flows) if "h0_0" in (x.src, x.dst)]
    pins[touches[0]] = 1
    for algorithm in ENFORCED:
        parts, _, unpinned, _ = clos_route_parts(f, jobs, algorithm, pins=pins)
        assert unpinned == touches[1:], algorithm
        for pos, p in enumerate(parts):
            assert f.part_plane(p[0][0]) == (1 if pos in touches else 0), (algorithm, pos)


def test_a_flow_with_no_alive_path_anywhere_is_unroutable_not_unpinned():
    f = Clos.leaf_spine(2, 4, 1, planes=2).wire()
    dead = {(leaf, s) for leaf in f.host_leaves["h0_0"] for s in f.neighbours(leaf)
            if s in f.tier_of and f.tier_of[s] == 1}
    f = f.with_down(dead)
    jobs = all_to_all(f)
    p = ClosProblem.build(f, jobs, skip_unroutable=True, pins=[0] * len(jobs[0].flows()))
    assert p.unpinned == [] and len(p.unroutable) == 6 and (p.pin == 0).all()
    assert len(p.pin) == len(p.inter) == 6


def test_pins_are_checked():
    f = Clos.leaf_spine(2, 4, 1, planes=2).wire()
    jobs = all_to_all(f)
    for bad in ([2] * 12, [0] * 11, [-2] * 12):
        with pytest.raises(InputError, match="pins"):
            ClosProblem.build(f, jobs, pins=bad)
    assert ClosProblem.build(f, jobs, pins=np.full(12, -1)).pin is None  # none pinned
