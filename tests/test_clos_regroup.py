"""The two-stage MILP to a max link load with few moves (``planners/clos_regroup.py``,
issue 74): where the request path's search leaves a failure one flow above the bound,
slots then cores reach it from the routes in force."""
import numpy as np

from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem, lower_bound
from controller.model.jobs import Job
from controller.planners.clos_auto import clos_auto
from controller.planners.clos_churn import clos_replan
from controller.planners.clos_ilp_moves import fewest_moves, moved_flows
from controller.planners.clos_loads import score
from controller.planners.clos_offpath import MOVES_PER_EXCESS, excess
from controller.planners.clos_regroup import limits, regroup
from tests.test_clos_offpath import _core_switch_down


def test_a_failed_core_switch_back_at_the_bound_with_the_fewest_moves():
    """k = 4: a core switch failed under a ring of 16 and an all-to-all of 6. The request
    path (greedy, ``lower_max``'s chains, its neighbourhood MILP) stays at 5 for a bound of
    4; the two stages reach 4 moving 9 routes, as many as the MILP over every option proves
    fewest, and the flows they keep keep their members."""
    case = _core_switch_down(4, 16, 6)
    p, r = case["_p"], case["_r"]
    bound = lower_bound(p)
    assert score(p, r)[0] == bound + 1  # lower_max could not
    got = regroup(p, r, bound, 10.0)
    assert got is not None and score(p, got)[0] <= bound
    assert got.info["status"] == "optimal"
    moved = moved_flows(got, r)
    exact = fewest_moves(p, r, bound, 10.0)
    assert exact.info["status"] == "optimal"
    assert len(moved) == len(moved_flows(exact, r)) <= MOVES_PER_EXCESS * excess(p, r, bound)
    assert got.info["kept"] == len(p) - len(moved)
    kept = set(range(len(p))) - set(moved)
    assert all(got.path[i] == r.path[i] for i in kept)
    # below the bound there is no routing: None, the routes in force untouched
    paths = list(r.path)
    assert regroup(p, r, bound - 1, 10.0) is None and r.path == paths


def test_at_the_max_already_nothing_moves_and_pins_hold():
    """Two planes, each flow pinned to the plane of its route (a running connection): a
    routing at the max asked for keeps every flow; after a core of plane 0 failed, the
    routing at the bound keeps every flow in its plane, on alive links, every cell at most
    its limit."""
    f = Clos.fat_tree(4, planes=2)
    hosts = sorted(f.host_leaves)
    job = Job("r", rings=[hosts], ring_bytes=1)
    r = clos_auto(ClosProblem.build(f, [job]))
    pins = [-1] * len(job.flows())
    p0 = ClosProblem.build(f, [job])
    for i, pos in enumerate(p0.inter):
        pins[pos] = r.plane[i]
    p = ClosProblem.build(f, [job], pins=pins)
    top = score(p, r)[0]
    same = regroup(p, r, top, 10.0)
    assert same.info["kept"] == len(p) and moved_flows(same, r) == []
    down = f.with_down([x for x in f.links() if "c0_0_p0" in x])
    q = ClosProblem.build(down, [job], pins=pins, skip_unroutable=True)
    after = clos_replan(q, r, layer1_only=True)
    got = regroup(q, after, lower_bound(q), 10.0)
    assert got is not None and score(q, got)[0] <= lower_bound(q)
    assert all(got.plane[i] == q.pin[i] for i in range(len(q)))
    assert all(q.links.alive[list(path)].all() for path in got.path)
    cells = q.links.cells().cell_of[[x for path in got.path for x in path]]
    assert (np.bincount(cells, minlength=len(limits(q, 1.0))) <= limits(q, lower_bound(q))).all()
    assert after.info["forced"] > 0  # the failure took routes: the case is not empty
