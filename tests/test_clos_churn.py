"""Churn-aware re-planning on Clos fabrics (planners/clos_churn.py): after a core link fails
only the flows over it move (or a few more, each lowering the max link load), the max is never
above a fresh clos_auto plan's, and on restore nothing moves unless that lowers the max."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem, flow_links
from controller.model.jobs import Flow, Job
from controller.planners.clos_auto import clos_auto, score
from controller.planners.clos_churn import clos_replan, previous_routes
from controller.planners.clos_loads import empty_routing
from controller.planners.clos_routes import clos_route_parts


def jobs_on(f: Clos) -> list[Job]:
    """A ring over one host of every leaf (neighbours in other pods) and an all-to-all
    among the last host of every other leaf."""
    leaves = f.leaves
    pods = len(f.planes[0].pods)
    per_pod = len(leaves) // pods
    order = [leaves[p * per_pod + j] for j in range(per_pod) for p in range(pods)]
    ring = Job("ring", rings=[[f.hosts_of_leaf[leaf][0] for leaf in order]], ring_bytes=1)
    a2a_hosts = [f.hosts_of_leaf[leaf][-1] for leaf in leaves[::2]]
    a2a = Job("a2a", explicit=[Flow("a2a", s, d, 1) for s in a2a_hosts for d in a2a_hosts
                               if s != d])
    return [ring, a2a]


@pytest.fixture(autouse=True)
def work_bounds_not_clocks(monkeypatch):
    """The search's and the fewest-moves MILP's time guards far off (and ``plan``'s
    deadline): the work bounds and the MILP decide, not the load of the machine the tests
    share (at a load of 7 on 2 cores the 1 s deadline cut the MILP short: 41 moves for 18)."""
    from controller.planners import clos_churn
    monkeypatch.setattr(clos_churn, "SEARCH_LIMIT", 30.0)
    monkeypatch.setattr(clos_churn, "MOVES_MILP_S", 30.0)


def plan(f: Clos, jobs, previous=None, time_limit: float = 60.0):
    p = ClosProblem.build(f, jobs, skip_unroutable=True)
    prev = empty_routing(len(p)) if previous is None else previous_routes(p, previous)
    return p, clos_replan(p, prev, time_limit=time_limit)


def names(p: ClosProblem, r) -> list:
    """The routing as the controller keeps it: per flow ((switch names, 1.0),)."""
    out: list = [None] * len(p.flows)
    for i, pos in enumerate(p.inter):
        out[pos] = ((tuple(p.middle_name(i, r.plane[i], r.middle[i])), 1.0),)
    return out


def crossing(parts: list, link: tuple[str, str]) -> int:
    """Flows whose path uses ``link`` either way."""
    lo, up = link
    return sum(1 for x in parts if x and any(
        {a, b} == {lo, up} for a, b in zip(x[0][0], x[0][0][1:])))


@pytest.mark.parametrize("k", [4, 8])
def test_a_core_link_failure_moves_the_flows_over_it_and_restore_moves_none(k):
    f = Clos.fat_tree(k)
    jobs = jobs_on(f)
    p0, r0 = plan(f, jobs)
    before = names(p0, r0)
    for path in [x[0][0] for x in before if x and len(x[0][0]) == 5][::7]:
        link = (path[1], path[2])
        down = f.with_down([link])
        p1, r1 = plan(down, jobs, before)
        info = r1.info
        over = crossing(before, link)
        assert info["forced"] == over
        fresh = score(p1, clos_auto(p1))[0]
        assert info["max_link_load"] <= fresh + 1e-9  # never worse than a fresh plan
        if info["source"] == "installed":  # only the flows over it, or moves that lowered it
            assert over <= info["moved_flows"] <= over + info["search_moves"]
        after = names(p1, r1)
        for x in after:  # nothing over the dead link
            assert not x or all({a, b} != set(link) for a, b in zip(x[0][0], x[0][0][1:]))
        p2, r2 = plan(f, jobs, after)  # restored: nothing moves unless the max drops
        if r2.info["moved_flows"]:
            assert r2.info["max_link_load"] < info["max_link_load"] - 1e-9
        else:
            assert names(p2, r2) == after


def test_fewer_moves_than_a_fresh_plan_on_k8():
    f = Clos.fat_tree(8)
    jobs = jobs_on(f)
    p0, r0 = plan(f, jobs)
    before = names(p0, r0)
    moved = forced = 0
    for path in [x[0][0] for x in before if x and len(x[0][0]) == 5][::40]:
        p1, r1 = plan(f.with_down([(path[1], path[2])]), jobs, before)
        moved += r1.info["moved_flows"]
        forced += r1.info["forced"]
    assert forced <= moved <= 2 * forced


@pytest.fixture
def loaded_k8():
    """benchmarks.scale's k = 8 case: a ring of 128 across pods and an all-to-all of 32
    (1,120 flows) in force as auto planned them, and a0_0-c0_0 down: the flows put back by
    the greedy leave links one flow above the bound (9). The work bounds and the MILP decide,
    not the machine's load (``work_bounds_not_clocks``)."""
    from benchmarks.scale import all_to_all_job, ring_job
    from controller.model.jobs import parse_job
    f = Clos.fat_tree(8)
    jobs = [parse_job(ring_job(f), f), parse_job(all_to_all_job(f), f)]
    p0 = ClosProblem.build(f, jobs)
    before = names(p0, clos_auto(p0, time_limit=0.0))
    return f.with_down([("a0_0", "c0_0")]), jobs, before


def test_a_failed_core_link_on_a_loaded_k8_moves_few_flows(loaded_k8):
    """Single moves and chains of two cannot lower those links; the fresh plan that was
    taken instead moved about 860 routes for the same max. Ejection chains or the fewest-
    moves MILP reach the bound from the routes in force."""
    down, jobs, before = loaded_k8
    p1, r1 = plan(down, jobs, before)  # the work bounds end it, not a clock
    assert r1.info["max_link_load"] == score(p1, clos_auto(p1))[0] == 9
    assert r1.info["source"] in ("installed", "fewest moves"), r1.info["moved_flows"]
    assert r1.info["forced"] <= r1.info["moved_flows"] <= 64


def test_the_fewest_moves_milp_keeps_what_a_fresh_plan_sent_home_cannot(loaded_k8):
    from controller.planners.clos_churn import home
    from controller.planners.clos_ilp_moves import fewest_moves
    down, jobs, before = loaded_k8
    p = ClosProblem.build(down, jobs, skip_unroutable=True)
    prev = previous_routes(p, before)
    fresh = clos_auto(p)
    home(p, fresh, prev, score(p, fresh)[0])
    few = fewest_moves(p, prev, score(p, fresh)[0], 30.0)
    assert few.info["status"] == "optimal" and score(p, few)[0] <= score(p, fresh)[0]
    kept_fresh = sum(tuple(fresh.path[i]) == tuple(prev.path[i]) for i in range(len(p)))
    assert few.info["kept"] >= len(p) - 64 > kept_fresh + 400
    assert all(not set(x) & set(np.flatnonzero(~p.links.alive).tolist()) for x in few.path)


def test_nothing_changed_nothing_moves():
    f = Clos.fat_tree(4, 2)
    jobs = jobs_on(f)
    parts, _, _, _ = clos_route_parts(f, jobs, "auto")
    again, _, _, _ = clos_route_parts(f, jobs, "auto", previous=parts)
    assert again == parts


def test_a_new_job_leaves_the_running_routes_in_place_when_the_bound_holds():
    """A one-flow job with a path that no running flow uses (the bound holds without a
    move) moves no running flow. Which leaves such a path joins depends on the ring's
    routes: every other leaf is tried as the destination."""
    f = Clos.fat_tree(4)
    ring, a2a = jobs_on(f)
    parts, _, _, _ = clos_route_parts(f, [ring], "auto")
    used = {hop for part in parts for path, _ in part for hop in zip(path, path[1:])}
    graph = nx.Graph(f.links())
    free = [leaf for leaf in f.leaves[1:] if any(
        not set(zip(path, path[1:])) & used
        for path in nx.all_shortest_paths(graph, f.leaves[0], leaf))]
    assert free, "the ring leaves no free path from the first leaf"
    for leaf in free:
        small = Job("b", explicit=[Flow("b", f.hosts_of_leaf[f.leaves[0]][1],
                                        f.hosts_of_leaf[leaf][1], 1)])
        both, _, _, _ = clos_route_parts(f, [ring, small], "auto", previous=parts + [None])
        assert both[:len(parts)] == parts and both[-1], leaf


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_random_failures_keep_alive_routes_and_stay_valid(data):
    f = Clos.fat_tree(4)
    jobs = jobs_on(f)
    p0, r0 = plan(f, jobs)
    before = names(p0, r0)
    links = f.links()
    down = data.draw(st.sets(st.sampled_from(links), max_size=4))
    fab = f.with_down(down)
    p1 = ClosProblem.build(fab, jobs, skip_unroutable=True)
    prev = previous_routes(p1, before)
    r1 = clos_replan(p1, prev)
    alive = p1.links.alive
    left = 0  # flows that left an alive route in force
    for i in range(len(p1)):
        assert r1.path[i], "every routable flow placed"
        assert alive[flow_links(p1, r1, i)].all()
        if prev.plane[i] >= 0 and alive[list(prev.path[i])].all():
            left += r1.path[i] != prev.path[i]
    if r1.info["source"] == "installed":  # each by a move of the search that lowered the max
        assert left <= r1.info["search_moves"]
    # valid: every path is the route of its flow over its (plane, middle)
    assert previous_routes(p1, names(p1, r1)).path == r1.path
    assert r1.info["max_link_load"] <= score(p1, clos_auto(p1))[0] + 1e-9


@pytest.mark.parametrize("link", [("a3_2", "c2_1"), ("a0_3", "c3_0"), ("a3_3", "c3_0")])
def test_a_failed_core_link_on_a_loaded_k8_moves_at_most_twice_the_routes_over_it(loaded_k8,
                                                                                  link):
    """Issue 74: core links failed on the loaded k = 8 fat-tree: the re-plan moved 57 and 58
    routes for the 18 over a3_2-c2_1 and a0_3-c3_0 and left a3_3-c3_0's at 10, one above the
    bound. Now flows moved for a level a later move settled go home (``clos_homing``), the
    search moves flows already off their route first, and where it still moves more than
    twice the routes over the link (or misses the bound) the fewest-moves MILP over its
    neighbourhood decides."""
    _, jobs, before = loaded_k8
    p1, r1 = plan(Clos.fat_tree(8).with_down([link]), jobs, before)
    info = r1.info
    assert info["forced"] == crossing(before, link) > 0
    assert info["max_link_load"] == info["lower_bound"] == 9
    assert info["forced"] <= info["moved_flows"] <= 2 * info["forced"], info["why"]
    assert info["why"].startswith(f"{info['moved_flows']} running flows moved: "
                                  f"{info['forced']} lost their route")


def test_a_new_job_moves_running_flows_only_where_that_lowers_the_max():
    """Issue 74: an all-to-all of 64 hosts posted beside a running ring of 512 on a k = 16
    fat-tree moved 53 of the ring's flows (the fresh plan, sent home) although keeping the
    ring and placing the new flows around it meets the same max."""
    from benchmarks.scale import all_to_all_job, ring_job
    from controller.model.jobs import parse_job
    f = Clos.fat_tree(16)
    ring, a2a = parse_job(ring_job(f, 512), f), parse_job(all_to_all_job(f, 64), f)
    p0, r0 = plan(f, [ring])
    running = names(p0, r0)
    p1, r1 = plan(f, [ring, a2a], running + [None] * len(a2a.flows()))
    assert r1.info["moved_flows"] == 0, r1.info["why"]
    assert r1.info["new_flows"] == len(a2a.flows())
    assert r1.info["max_link_load"] <= score(p1, clos_auto(p1, layer1_only=True))[0] + 1e-9
    assert names(p1, r1)[:len(running)] == running
