"""Path sets for NICs that spray (issue 73): a job posted with ``"spray": true`` gives each of
its flows, in its source's segments document, a weighted set of paths with at least one per
plane and 8 or more in all, weights the plan's shares and entropy values summing to 256; the
kernel agent still takes the document; the watches wake the source when its set changes.

srv6 mode on several planes is refused at admission until the agent steers per plane: these
tests lift that refusal inside the test only (``multi_plane``)."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from controller.agent import steering
from controller.enforcement.srv6 import SidPlan, segments
from controller.model.clos import Clos
from controller.model.jobs import Flow
from controller.service import api, duties, pathsets, watches
from tests.test_srv6 import service_on, wired


@pytest.fixture
def multi_plane():
    """srv6 mode on a fabric of several planes (accepted since the agent steers per
    plane)."""


def post(svc, doc) -> tuple[int, dict]:
    return api.handle(svc, "POST", "/v1/jobs", json.dumps(doc).encode())


def hot_pair_job(**opts) -> dict:
    """20 flows from l0's 5 hosts to l1's over 8 planes x 2 spines (16 paths): split cuts
    some (the fractional optimum 1.25 against 2 unsplit)."""
    return {"id": "mrc", "algorithm": "split", "max_parts": 0, **opts,
            "flows": [{"src": f"h0_{k}", "dst": f"h1_{(k + j) % 5}", "bytes": 1e6,
                       "dport": 6000 + 5 * k + j} for k in range(5) for j in range(4)]}


@pytest.mark.parametrize("weights", [[1.0], [0.5, 0.5], [1 / 3] * 3, [0.6, 0.3, 0.1, 0, 0],
                                     [1e-4, 1 - 1e-4], [0.01] * 100, [0.0, 0.0]])
def test_entropy_counts_sum_to_the_entropy_and_keep_every_positive_share(weights):
    got = pathsets.entropy_counts(weights)
    positive = [w > 0 for w in weights]
    assert sum(got) == (pathsets.ENTROPY if any(positive) else 0)
    assert all(n >= 1 for n, p in zip(got, positive) if p)
    assert all(n == 0 for n, p in zip(got, positive) if not p)
    whole = sum(weights) or 1
    assert all(abs(n - pathsets.ENTROPY * w / whole) < 2 for n, w in zip(got, weights))


def test_a_spraying_jobs_document_has_a_weighted_path_set_on_every_plane(multi_plane):
    fabric = wired(Clos.leaf_spine(2, 2, 5, planes=8))
    svc = service_on(fabric)
    status, view = post(svc, hot_pair_job(spray=True))
    assert status == 201, view
    plan = SidPlan.of(fabric)
    parts = Counter()
    for src in [f"h0_{k}" for k in range(5)]:
        doc = api.handle(svc, "GET", f"/v1/hosts/{src}/segments")[1]
        assert len(doc["sprays"]) == 4  # the host's four flows
        parts.update(check_sets(fabric, plan, doc, src))
        read = steering.read(doc)  # the kernel agent takes it and steers the parts only
        assert read.steers == steering.read({**doc, "sprays": []}).steers
    assert max(parts) > 1  # some flow was split: its weights are the plan's shares
    assert "sprays" not in api.handle(svc, "GET", "/v1/hosts/h1_0/segments")[1]  # a receiver


def check_sets(fabric, plan, doc: dict, src: str) -> Counter:
    """Every path set of ``doc`` as the module text says; per flow its count of parts."""
    parts = Counter()
    for s in doc["sprays"]:
        paths = s["paths"]
        assert len(paths) >= 8 and {p["plane"] for p in paths} == set(range(8))
        assert sum(p["entropy"] for p in paths) == s["entropy"] == 256
        assert len({tuple(p["path"]) for p in paths}) == len(paths)
        mine = [f for f in doc["flows"] if f["dport"] == s["dport"] and not f.get("reverse")]
        parts[len(mine)] += 1
        planned = {tuple(f["path"]): f["share"] for f in mine}  # what the kernel agent gets
        assert {tuple(p["path"]): p["weight"] for p in paths if p["weight"]} == planned
        for p in paths:
            q = p["plane"]
            assert p["path"][0] == fabric.host_leaves[src][q]
            assert p["path"][-1] == fabric.host_leaves[s["dst"]][q]
            assert p["dst_ip"] == fabric.ip_of(s["dst"], q)
            assert p["sids"] == segments(plan, p["path"], None, s["dst"]).sids
            assert (p["entropy"] > 0) == (p["weight"] > 0)
    return parts


def test_a_job_that_does_not_spray_leaves_the_documents_as_they_were(multi_plane):
    svc = service_on(wired(Clos.leaf_spine(2, 2, 5, planes=8)))
    assert post(svc, hot_pair_job())[0] == 201
    assert "sprays" not in api.handle(svc, "GET", "/v1/hosts/h0_0/segments")[1]


@pytest.mark.parametrize("opts, why", [({"spray": "yes"}, "'spray' must be true or false"),
                                       ({"spray": True, "mode": "flow"},
                                        "spray needs mode 'srv6'")])
def test_spray_is_refused_where_it_cannot_apply(opts, why):
    svc = service_on(wired(Clos.leaf_spine(2, 2, 2)))
    before = api.handle(svc, "GET", "/v1/jobs")[1]
    status, doc = post(svc, {"id": "s", "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1e6}],
                             **opts})
    assert status == 400 and why in doc["error"], doc
    assert api.handle(svc, "GET", "/v1/jobs")[1] == before


def test_standby_paths_go_round_the_planes_and_avoid_dead_links():
    fabric = wired(Clos.leaf_spine(4, 2, 1, planes=2))
    flow = Flow("j", "h0_0", "h1_0", 1e6)
    parts = ((("l0_p0", "s1_p0", "l1_p0"), 0.75), (("l0_p0", "s2_p0", "l1_p0"), 0.25))
    chosen = pathsets.selection(fabric, flow, parts)
    assert [w for *_, w in chosen] == [0.75, 0.25] + [0.0] * 6  # 8 paths: the parts first
    assert Counter(q for q, *_ in chosen) == {0: 4, 1: 4}  # then the emptier plane first
    assert len({p for _, p, *_ in chosen}) == 8
    fabric.down = {("l0_p1", "s0_p1")}
    fabric.__post_init__()
    chosen = pathsets.selection(fabric, flow, parts)
    assert ("l0_p1", "s0_p1", "l1_p1") not in {p for _, p, *_ in chosen}
    assert Counter(q for q, *_ in chosen) == {0: 4, 1: 3}  # all that is alive, under 8
    assert pathsets.flow_set(fabric, SidPlan.of(fabric), "j", flow, parts)["paths"][0][
        "entropy"] == 192


def test_flows_spread_their_standby_paths_over_the_middles():
    fabric = wired(Clos.leaf_spine(16, 2, 16, planes=8))
    firsts = set()
    for k in range(16):
        flow = Flow("j", f"h0_{k}", f"h1_{k}", 1e6)
        chosen = pathsets.selection(fabric, flow, ((("l0_p0", "s0_p0", "l1_p0"), 1.0),))
        firsts |= {p[1] for q, p, *_ in chosen if q == 3}
    assert len(firsts) >= 8  # not the same first spines for every flow (issue 73, item 2)


def test_the_watch_wakes_a_spraying_source_when_its_standby_path_dies(multi_plane):
    fabric = wired(Clos.leaf_spine(2, 2, 5, planes=8))
    svc = service_on(fabric)
    assert post(svc, {"id": "one", "spray": True,
                      "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1e6}]})[0] == 201
    before = api.handle(svc, "GET", "/v1/hosts/h0_0/segments")[1]
    standby = next(p["path"] for p in before["sprays"][0]["paths"]
                   if not p["weight"] and p["plane"] == 5)
    prints = watches.fingerprints(svc.state)
    leaf, spine = standby[0], standby[1]
    svc.ports_changed([(fabric.dpids[leaf], p, False, None)
                       for p in fabric.ports_to(leaf, spine)])
    after = api.handle(svc, "GET", "/v1/hosts/h0_0/segments")[1]
    # its part and its probe duties are as they were: the path set alone changed
    assert after["flows"] == before["flows"] and "h0_0" not in duties.extras(svc.state.fabric)
    assert after["version"] != before["version"]
    assert watches.fingerprints(svc.state)["h0_0"] != prints["h0_0"]
    again = [p for p in after["sprays"][0]["paths"] if p["plane"] == 5]
    assert again and all(p["path"][:2] != [leaf, spine] for p in again)  # the other spine
