"""Learned flows on a fabric of several planes are planned on the plane their framework
uses: the plane most of a pair's sampled bytes came on (``MatrixEstimate.plane_shares``).
A plan on another plane would match none of the job's packets, which would take the hashed
default paths. Fake switches and hand-built sFlow samples, as in
tests/test_learning_service.py."""
import pytest

from controller.model.clos import Clos
from controller.service import learning
from emulation.harness.fake_switch import trace
from tests.test_clos_service import call, start
from tests.test_learning_service import ring_samples, run_traffic


def two_planes():
    f, sw, svc = start(Clos.leaf_spine(2, 4, 1, planes=2, link_gbps=0.02).wire(),
                       learn_window=1.0)
    ring = sorted(f.host_leaves)
    assert call(svc, "POST", "/v1/jobs", {"id": "m", "members": ring})[0] == 201
    return f, sw, svc, ring


def routes_on(f, sw, svc, plane):
    """The learned job's routes, each checked to name ``plane`` and its addresses there and
    to be what a packet sent on that plane's interface follows."""
    view = call(svc, "GET", "/v1/jobs/m")[1]
    assert view["matrix"] == "learned", view.get("learning")
    name = f.planes[plane].name
    assert view["routes"] and {m["plane"] for m in view["measured_flows"]} == {name}
    for route in view["routes"]:
        assert route["plane"] == name, route
        assert (route["src_ip"], route["dst_ip"]) == (f.ip_of(route["src"], plane),
                                                      f.ip_of(route["dst"], plane))
        path, reached, _ = trace(f, sw, route["src"], route["dst"], plane=plane)
        assert reached == route["dst"] and path == route["path"], (route, path)
    return view


def test_a_job_sending_on_plane_1_is_planned_on_plane_1():
    f, sw, svc, ring = two_planes()
    run_traffic(svc, svc.clock, ring_samples(f, ring, plane=1), seconds=6)
    routes_on(f, sw, svc, 1)


@pytest.mark.parametrize("most", [0, 1])
def test_a_pair_mostly_on_one_plane_is_planned_on_it(most):
    """Most bytes on one plane, a few on the other: the plane of most (the few stay on the
    other plane's hashed paths)."""
    f, sw, svc, ring = two_planes()
    samples = (ring_samples(f, ring, data=20, plane=most) +
               ring_samples(f, ring, data=4, acks=0, plane=1 - most))
    run_traffic(svc, svc.clock, samples, seconds=6)
    routes_on(f, sw, svc, most)


def test_a_job_that_reconnects_on_the_other_plane_is_replanned_there():
    """The framework relaunched on plane 1: once plane 0's bytes have decayed (a margin of
    the pair's bytes, not a tie, so sampling noise moves nothing), the flows move, without
    the gain test (the plan in force is not enforced)."""
    f, sw, svc, ring = two_planes()
    run_traffic(svc, svc.clock, ring_samples(f, ring, plane=0), seconds=6)
    routes_on(f, sw, svc, 0)
    run_traffic(svc, svc.clock, ring_samples(f, ring, plane=1), seconds=2)
    assert call(svc, "GET", "/v1/jobs/m")[1]["learning"]["replans"] == 1  # not at once
    run_traffic(svc, svc.clock, ring_samples(f, ring, plane=1), seconds=20)
    view = routes_on(f, sw, svc, 1)
    assert view["learning"]["replans"] == 2 and view["mismatch"]["off_plane_pairs"] == 4
    assert any("runs on another plane than planned" in e["cause"] for e in svc.state.events)


def test_the_prediction_counts_flows_planned_off_their_plane_as_hashed_on_it():
    """What the learning decision predicts now: a learned flow planned on plane 0 whose
    traffic runs on plane 1 runs on plane 1's hashed paths, and the re-plan the prediction
    is made for pins it to plane 1."""
    f, sw, svc, ring = two_planes()
    run_traffic(svc, svc.clock, ring_samples(f, ring, plane=0), seconds=6)
    r = svc.state.jobs["m"]
    on_one = learning.Measured(svc.state.measured["m"].pairs, 1.0,
                               planes={p: {1: 1.0} for p in svc.state.measured["m"].pairs})
    assert learning.off_plane(f, r, on_one) == set(on_one.pairs)
    now = learning._as_planned_now(f, r, on_one, 0)
    assert {f.part_plane(p[0][0]) for p in now.routes.values()} == {1}
    assert on_one.pins(r.job) == [1] * len(r.job.flows())


def test_a_split_route_is_off_plane_only_if_none_of_its_parts_is_on_the_traffics_plane():
    """A learned flow split over both planes (a part on each) whose traffic runs on plane 1
    is on its plane; one whose parts are all on plane 0 is not."""
    f, sw, svc, ring = two_planes()
    run_traffic(svc, svc.clock, ring_samples(f, ring, plane=0), seconds=6)
    r = svc.state.jobs["m"]
    on_one = learning.Measured(svc.state.measured["m"].pairs, 1.0,
                               planes={p: {1: 1.0} for p in svc.state.measured["m"].pairs})
    other = {f"{sw}_p0": f"{sw}_p1" for sw in f.planes[0].switches()
             for sw in [sw.removesuffix("_p0")]}
    key, parts = next(iter(r.routes.items()))
    (path, share), = parts
    r.routes[key] = ((path, 0.5), (tuple(other[x] for x in path), 0.5))
    off = learning.off_plane(f, r, on_one)
    assert off == set(on_one.pairs) - {(key[0], key[1])}
