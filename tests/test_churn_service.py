"""Re-plans in the controller move few flows (auto's churn planner), reported as moved_flows."""
from controller.service import api
from controller.service.metrics import exposition
from tests.test_control_plane import post, ring, start, wired


def spines_of(svc):
    return {(r.job.id, k): p for r in svc.state.jobs.values() for k, p in r.routes.items()}


def test_new_job_moves_nothing_link_down_moves_crossing_flows_link_up_reoptimises():
    f = wired(4, 4, 4)
    sw, svc = start(f)
    assert svc.settings.algorithm == "auto"
    status, view = post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))
    assert status == 201 and view["moved_flows"] == 0
    before = spines_of(svc)
    status, view = post(svc, ring("b", ["h0_1", "h2_1", "h1_1", "h3_1"], sport=7))
    assert status == 201 and view["moved_flows"] == 0
    assert all(spines_of(svc)[k] == p for k, p in before.items())
    # take down a link that a flow of job a uses
    (leaf, spine) = next(p[0][0][:2]  # a part is its path: leaf, spine, leaf
                         for r in svc.state.jobs.values() for fl, p in r.flows_with_parts() if p)
    before = spines_of(svc)
    port = f.port(leaf, spine)
    svc.port_changed(f.dpids[leaf], port, False)
    event = svc.state.events[-1]
    crossing = sum(1 for r in svc.state.jobs.values() for fl, p in r.flows_with_parts()
                   if p and before[(r.job.id, fl.five_tuple())] != p)
    assert event["moved_flows"] == crossing >= 1
    svc.port_changed(f.dpids[leaf], port, True)
    assert svc.state.events[-1]["links_up"] == [f"{leaf}-{spine}"]
    assert b"mlroute_moved_flows" in exposition(svc)[0]
    status, doc = api.handle(svc, "POST", "/v1/optimize")
    assert status == 200 and doc["moved_flows"] == 0  # nothing left to gain


def test_objective_field_is_checked():
    f = wired(2, 4, 2)
    _, svc = start(f)
    status, doc = post(svc, ring("a", ["h0_0", "h1_0"], objective="latency"))
    assert status == 400 and "unknown objective 'latency'" in doc["error"]
    status, doc = post(svc, ring("a", ["h0_0", "h1_0"], objective="jobs", algorithm="greedy"))
    assert status == 400 and "needs algorithm 'auto'" in doc["error"]
    status, doc = post(svc, ring("a", ["h0_0", "h1_0"], objective="jobs", compute_s=1.0))
    assert status == 201 and doc["job"]["objective"] == "jobs"


def test_a_replan_says_why_it_moved_running_flows():
    """The planner's sentence (``clos_churn.why_moved``) reaches the POST answer, the
    optimisation's answer and the failure's event, on two tiers and on a fat-tree (issue 74)."""
    from controller.model.clos import Clos
    for f in (wired(4, 4, 4), Clos.fat_tree(4, 2, 0.01).wire()):
        sw, svc = start(f)
        hosts = sorted(f.host_leaves)
        status, view = post(svc, ring("a", hosts[::2]))
        assert status == 201 and "moved_why" not in view  # nothing ran: nothing to say
        status, view = post(svc, ring("b", hosts[1::2], sport=7))
        assert status == 201 and view["moved_why"].startswith("no running flow moved; max link")
        part = next(p[0][0] for r in svc.state.jobs.values() for _, p in r.flows_with_parts()
                    if p)
        lower, upper = part[0], part[1]  # a leaf's uplink some flow takes
        before = spines_of(svc)
        svc.port_changed(f.dpids[lower], f.port(lower, upper), False)
        event = svc.state.events[-1]
        lost = sum(1 for r in svc.state.jobs.values() for fl, p in r.flows_with_parts()
                   if p and before[(r.job.id, fl.five_tuple())] != p)
        assert event["links_down"] == [f"{lower}-{upper}"] and lost >= 1
        assert event["moved_why"].startswith(f"{event['moved_flows']} running flows moved: ")
        assert " lost their route" in event["moved_why"], event["moved_why"]
        status, doc = api.handle(svc, "POST", "/v1/optimize")
        assert status == 200 and doc["moved_why"].startswith("no running flow moved"), doc
