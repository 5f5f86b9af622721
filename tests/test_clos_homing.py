"""Flows sent back to their routes in force (planners/clos_homing.py): never above the max
given, a flow that lost its route never goes home, and only free flows are pushed aside."""
from __future__ import annotations

from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem, ClosRouting
from controller.model.jobs import Flow, Job
from controller.planners.clos_auto import clos_auto
from controller.planners.clos_homing import send_home
from controller.planners.clos_loads import ClosLoads, score


def shuffled(p: ClosProblem, r: ClosRouting, flows: list[int]) -> ClosRouting:
    """``r`` with each of ``flows`` on the next middle of its plane."""
    out = ClosRouting(list(r.plane), list(r.middle), list(r.path), {})
    for i in flows:
        width = ClosLoads(p).plane_costs(i, out.plane[i]).size
        out.middle[i] = (out.middle[i] + 1) % width
        out.path[i] = ClosLoads(p).pick(i, out.plane[i], out.middle[i])
    return out


def problem() -> ClosProblem:
    f = Clos.fat_tree(4)
    hosts = [h for leaf in f.leaves for h in f.hosts_of_leaf[leaf]]
    job = Job("a", explicit=[Flow("a", s, d, 1) for s in hosts[::2] for d in hosts[1::3]
                             if s != d])
    return ClosProblem.build(f, [job])


def test_moved_flows_go_home_without_raising_the_max():
    p = problem()
    before = clos_auto(p)
    after = shuffled(p, before, list(range(0, len(p), 3)))
    value = score(p, after)[0]
    moved = sum(a != b for a, b in zip(after.path, before.path))
    back = send_home(p, after, before, value, set())
    assert back > 0
    assert score(p, after)[0] <= value + 1e-9
    assert sum(a != b for a, b in zip(after.path, before.path)) == moved - back


def test_a_flow_that_lost_its_route_never_goes_home_and_home_flows_stay():
    p = problem()
    before = clos_auto(p)
    after = shuffled(p, before, [0, 1, 2])
    home_before = {i for i in range(len(p)) if after.path[i] == before.path[i]}
    send_home(p, after, before, score(p, after)[0], {0})
    assert after.path[0] != before.path[0]  # "lost": free to move, never home
    assert all(after.path[i] == before.path[i] for i in home_before)
