"""Rule builders and the service, checked on the fake switch tables (no Open vSwitch)."""
import json

import pytest

from controller.enforcement.openflow import COOKIE_STATIC, ETH_ARP, job_cookie
from controller.model.clos import Clos
from controller.service import api
from controller.service.route_service import RouteService
from emulation.harness.fake_switch import FakeSwitches, trace


def spines(fabric: Clos) -> list[str]:
    """The spines of a leaf-spine's one plane (its one pod's aggregation switches)."""
    return fabric.planes[0].aggs[0]


def wired(spines=2, leaves=4, hosts=2, **kw):
    return Clos.generate(spines, leaves, hosts, 0.01, wiring=True, **kw)


@pytest.fixture
def env():
    f = wired()
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, f, dead_after=0.0)  # a lost switch is dead at once
    for d in f.dpids.values():
        svc.switch_connected(d, {})
    return f, sw, svc


def ring(jid, ranks, **extra):
    return {"id": jid, "collective": "ring_allreduce", "ranks": ranks, "bytes": 8e6, **extra}


def test_unplanned_traffic_reaches_every_host_over_every_bucket(env):
    f, sw, _ = env
    for src in f.hosts:
        for dst in f.hosts:
            if src == dst:
                continue
            for bucket in range(len(spines(f))):
                path, reached, labels = trace(f, sw, src, dst, bucket=bucket)
                assert reached == dst and labels == []
                if f.hosts[src] != f.hosts[dst]:
                    assert len(path) == 3 and path[1] in spines(f)
                    assert path[1] == spines(f)[bucket]  # ECMP group: one bucket per uplink


def test_arp_goes_to_controller_and_spine_traffic_never_bounces(env):
    f, sw, svc = env
    out = sw.process(f.dpids["l0"], {"in_port": 3, "eth_type": ETH_ARP, "mpls": []})
    assert out and out[0][0] == "controller"
    assert svc.arp_answer(f.host_ip["h2_1"]) == f.host_mac["h2_1"]
    assert svc.arp_answer("192.0.2.1") is None
    # a packet for a host of another leaf arriving from a spine is dropped, not sent back up
    pkt = {"in_port": f.port("l0", "s0"), "eth_type": 0x0800, "ipv4_src": f.host_ip["h1_0"],
           "ipv4_dst": f.host_ip["h2_0"], "ip_proto": 6, "sport": 1, "dport": 2, "mpls": []}
    assert sw.process(f.dpids["l0"], pkt) == []


@pytest.mark.parametrize("mode", ["flow", "sr"])
def test_planned_flows_cross_their_planned_spine(env, mode):
    f, sw, svc = env
    status, doc = api.handle(svc, "POST", "/v1/jobs",
                             json.dumps(ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"], mode=mode)).encode())
    assert status == 201, doc
    status, doc2 = api.handle(svc, "POST", "/v1/jobs", json.dumps(
        ring("b", ["h0_1", "h1_1", "h2_1", "h3_1"], mode=mode, proto="udp", dport=4791,
             sport=50000)).encode())
    assert status == 201, doc2
    routes = api.handle(svc, "GET", "/v1/routes")[1]["routes"]
    assert len(routes) == 8
    spines_used = {}
    for r in routes:
        proto = r.get("proto", 6)
        for bucket in range(2):  # planned flows must not depend on the default group
            path, reached, labels = trace(f, sw, r["src"], r["dst"], proto=proto,
                                          sport=r.get("sport", 1234), dport=r.get("dport", 80),
                                          bucket=bucket)
            assert reached == r["dst"] and labels == []
            assert path == [f.hosts[r["src"]], r["spine"], f.hosts[r["dst"]]]
        key = f.hosts[r["src"]]
        spines_used.setdefault(key, []).append(r["spine"])
    # greedy: the two flows leaving each leaf take different spines
    assert all(len(set(v)) == 2 for v in spines_used.values())
    rules = [x for x in sw.rules[f.dpids["l0"]].values() if x.cookie != COOKIE_STATIC]
    assert len(rules) == 2
    if mode == "sr":
        assert all(any(a[0] == "push_mpls" for a in x.actions) for x in rules)
    # per-flow state only at ingress leaves
    for s in spines(f):
        assert all(x.cookie == COOKIE_STATIC for x in sw.rules[f.dpids[s]].values())


def test_split_flow_parts_take_their_spines():
    f = wired(spines=3, leaves=2, hosts=4)
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, f, algorithm="split")
    for d in f.dpids.values():
        svc.switch_connected(d, {})
    job = {"id": "s", "flows": [{"src": f"h0_{k}", "dst": f"h1_{k}", "bytes": 3e6, "proto": "tcp",
                                 "dport": 5001} for k in range(4)]}
    status, doc = api.handle(svc, "POST", "/v1/jobs", json.dumps(job).encode())
    assert status == 201, doc
    split = [r for r in doc["routes"] if "split" in r]
    assert split, "4 flows over 3 spines: the leftover matching is split"
    for r in split:
        for part in r["split"]:
            path, reached, _ = trace(f, sw, r["src"], r["dst"], sport=part["sport"], dport=5001)
            assert reached == r["dst"] and path[1] == part["spine"]


def test_delete_removes_exactly_that_job(env):
    f, sw, svc = env
    before_rules, before_groups = sw.snapshot()
    assert api.handle(svc, "POST", "/v1/jobs", b'{"id": "keep", "flows": [{"src": "h0_0", '
                      b'"dst": "h3_1", "bytes": 1000}]}')[0] == 201
    with_keep = sw.snapshot()
    assert api.handle(svc, "POST", "/v1/jobs", b'{"id": "gone", "flows": [{"src": "h1_0", '
                      b'"dst": "h2_1", "bytes": 1000, "proto": "udp", "dport": 9}]}')[0] == 201
    number = svc.jobs["gone"].number
    assert any(x.cookie == job_cookie(number) for x in sw.rules[f.dpids["l1"]].values())
    status, doc = api.handle(svc, "DELETE", "/v1/jobs/gone")
    assert status == 200 and doc["rules"]["removed"] == 1
    assert sw.snapshot() == with_keep
    assert api.handle(svc, "DELETE", "/v1/jobs/keep")[0] == 200
    assert sw.snapshot() == (before_rules, before_groups)
    assert api.handle(svc, "DELETE", "/v1/jobs/keep")[0] == 404


@pytest.mark.parametrize("method, path, body, status", [
    ("POST", "/v1/jobs", b"{nope", 400),
    ("POST", "/v1/jobs", b"", 400),
    ("POST", "/v1/jobs", b'{"id": "x", "ranks": ["h0_0", "zz"], "bytes": 1}', 400),
    ("POST", "/v1/jobs", b'{"id": "x", "ranks": ["h0_0", "h1_0"], "bytes": -1}', 400),
    ("POST", "/v1/jobs", b'{"id": "x", "ranks": ["h0_0", "h1_0"], "bytes": 1, "mode": "x"}', 400),
    ("POST", "/v1/jobs", b'{"id": "x", "ranks": ["h0_0", "h1_0"], "bytes": 1, "algorithm": "x"}', 400),
    ("POST", "/v1/jobs", b'{"id": "x", "ranks": ["h0_0", "h1_0"], "bytes": 1, "extra": 1}', 400),
    ("POST", "/v1/jobs", b'[1, 2]', 400),
    ("POST", "/v1/jobs", b'{"id": "a", "ranks": ["h0_1", "h1_1"], "bytes": 1}', 409),  # duplicate
    ("POST", "/v1/jobs", b'{"id": "c", "ranks": ["h0_0", "h1_0"], "bytes": 1}', 409),  # same match
    ("GET", "/v1/jobs/none", b"", 404),
    ("DELETE", "/v1/jobs/none", b"", 404),
    ("PATCH", "/v1/jobs", b"", 405),
    ("GET", "/v1/nothing", b"", 404),
    ("PUT", "/v1/fabric", b'{"spines": []}', 400),
    ("PUT", "/v1/fabric", b'{"spines": ["s0"], "leaves": ["l0"], "hosts": {}}', 400),  # no wiring
    ("PUT", "/v1/fabric", json.dumps(wired(3, 4, 2).to_dict()).encode(), 409),  # jobs run
])
def test_bad_requests_change_nothing(env, method, path, body, status):
    f, sw, svc = env
    assert api.handle(svc, "POST", "/v1/jobs",
                      b'{"id": "a", "ranks": ["h0_0", "h1_0", "h2_0"], "bytes": 3e6}')[0] == 201
    before = sw.snapshot()
    jobs_before = api.handle(svc, "GET", "/v1/jobs")[1]
    code, doc = api.handle(svc, method, path, body)
    assert code == status and isinstance(doc.get("error"), str) and doc["error"]
    assert sw.snapshot() == before
    assert api.handle(svc, "GET", "/v1/jobs")[1] == jobs_before


def test_install_failure_rolls_back(env):
    f, sw, svc = env
    assert api.handle(svc, "POST", "/v1/jobs",
                      b'{"id": "a", "ranks": ["h0_0", "h1_0", "h2_0", "h3_0"], "bytes": 3e6}')[0] == 201
    before = sw.snapshot()
    sw.fail = {f.dpids["l2"]}
    code, doc = api.handle(svc, "POST", "/v1/jobs",
                           b'{"id": "b", "ranks": ["h0_1", "h1_1", "h2_1", "h3_1"], "bytes": 3e6}')
    assert code == 409 and "rejected" in doc["error"]
    # the failing switch may have kept a half-applied batch; the service undid it everywhere
    svc_jobs = api.handle(svc, "GET", "/v1/jobs")[1]["jobs"]
    assert [j["id"] for j in svc_jobs] == ["a"]
    assert sw.snapshot() == before


def test_same_plan_twice_sends_nothing(env):
    f, sw, svc = env
    assert api.handle(svc, "POST", "/v1/jobs",
                      b'{"id": "a", "ranks": ["h0_0", "h1_0", "h2_0", "h3_0"], "bytes": 3e6}')[0] == 201
    sent = len(sw.sent)
    before = sw.snapshot()
    code, doc = api.handle(svc, "POST", "/v1/optimize")
    assert code == 200 and doc["rules"] == {"added": 0, "removed": 0, "switches": 0}
    assert len(sw.sent) == sent and sw.snapshot() == before


def test_disconnected_leaf_makes_its_pairs_unroutable(env):
    f, sw, svc = env
    svc.switch_disconnected(f.dpids["l3"])
    before = sw.snapshot()
    code, doc = api.handle(svc, "POST", "/v1/jobs",
                           b'{"id": "a", "flows": [{"src": "h3_0", "dst": "h1_0", "bytes": 5}]}')
    assert code == 409 and "no alive path between leaves l3 and l1" in doc["error"]
    assert sw.snapshot() == before
    code, _ = api.handle(svc, "POST", "/v1/jobs",
                         b'{"id": "b", "flows": [{"src": "h0_0", "dst": "h2_0", "bytes": 5}]}')
    assert code == 201


def _planned_rule(sw, f, flow_src, flow_dst):
    """The job rule an IPv4 packet of the flow hits at its ingress leaf (None: static only)."""
    pkt = {"in_port": f.port(f.hosts[flow_src], flow_src), "eth_type": 0x0800,
           "ipv4_src": f.host_ip[flow_src], "ipv4_dst": f.host_ip[flow_dst], "ip_proto": 6,
           "sport": 1, "dport": 2, "mpls": []}
    r = sw._lookup(f.dpids[f.hosts[flow_src]], 0, dict(pkt, mpls=[]))
    return r if r is not None and r.cookie != COOKIE_STATIC else None


def test_link_down_replans_make_before_break():
    f = wired(spines=3, leaves=4, hosts=2)
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, f)
    for d in f.dpids.values():
        svc.switch_connected(d, {})
    for k in range(2):
        assert api.handle(svc, "POST", "/v1/jobs", json.dumps(
            ring(f"r{k}", [f"h{i}_{k}" for i in range(4)])).encode())[0] == 201
    routes = api.handle(svc, "GET", "/v1/routes")[1]["routes"]
    victim = routes[0]
    leaf, spine = f.hosts[victim["src"]], victim["spine"]
    tables = {d: dict(r) for d, r in sw.rules.items()}
    mark = len(sw.sent)
    svc.port_changed(f.dpids[leaf], f.port(leaf, spine), False)
    new_routes = api.handle(svc, "GET", "/v1/routes")[1]["routes"]
    assert all(not (f.hosts[r["src"]] == leaf and r["spine"] == spine) and
               not (f.hosts[r["dst"]] == leaf and r["spine"] == spine) for r in new_routes)
    msgs = sw.sent[mark:]
    kinds = [m.kind for m in msgs]
    assert "flow_delete" not in kinds[:max(i for i, k in enumerate(kinds) if k == "flow_add") + 1]
    # replay message by message: every planned flow keeps a planned rule at its ingress
    for m in msgs:
        t = tables[m.dpid]
        if m.kind == "flow_add":
            t[m.rule.key] = m.rule
        elif m.kind == "flow_delete":
            t.pop(m.rule.key, None)
        saved = sw.rules
        sw.rules = tables
        try:
            for r in routes:
                assert _planned_rule(sw, f, r["src"], r["dst"]) is not None
        finally:
            sw.rules = saved
    # the ECMP group of that leaf lost the dead uplink's bucket, spines stopped using the link
    group = sw.groups[f.dpids[leaf]][1]
    assert ("output", f.port(leaf, spine)) not in [b[0] for b in group.buckets]
    for r in new_routes:
        path, reached, _ = trace(f, sw, r["src"], r["dst"])
        assert reached == r["dst"] and path[1] == r["spine"]
    view = api.handle(svc, "GET", "/v1/fabric")[1]
    assert view["links_down"] == [f"{leaf}-{spine}"]
    event = view["events"][-1]
    assert event["links_down"] == [f"{leaf}-{spine}"] and event["replanned"] == ["auto"]
    # the link comes back: ECMP uses it at once, planned flows at the next re-plan
    svc.port_changed(f.dpids[leaf], f.port(leaf, spine), True)
    assert api.handle(svc, "GET", "/v1/fabric")[1]["links_down"] == []
    assert len(sw.groups[f.dpids[leaf]][1].buckets) == 3
    assert api.handle(svc, "GET", "/v1/routes")[1]["routes"] == new_routes
    assert api.handle(svc, "POST", "/v1/optimize")[0] == 200


def test_spine_disconnect_moves_every_flow_off_it(env):
    f, sw, svc = env
    for k in range(2):
        assert api.handle(svc, "POST", "/v1/jobs", json.dumps(
            ring(f"r{k}", [f"h{i}_{k}" for i in range(4)])).encode())[0] == 201
    svc.switch_disconnected(f.dpids["s0"])
    routes = api.handle(svc, "GET", "/v1/routes")[1]["routes"]
    assert {r["spine"] for r in routes} == {"s1"}
    assert svc.counters["failures_handled"] == 1 and svc.state.recovery_ms


def test_restart_restores_jobs_and_rules(env, tmp_path):
    from controller.service.store import StateStore
    f = wired()
    first = FakeSwitches(f.dpids.values())
    svc = RouteService(first, f, store=StateStore(str(tmp_path / "state.db")))
    for d in f.dpids.values():
        svc.switch_connected(d, {})
    assert api.handle(svc, "POST", "/v1/jobs", json.dumps(
        ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"], mode="sr")).encode())[0] == 201
    assert api.handle(svc, "POST", "/v1/jobs", b'{"id": "b", "flows": [{"src": "h0_1", '
                      b'"dst": "h2_1", "bytes": 7, "proto": "udp", "dport": 4791}]}')[0] == 201
    # a new controller process: same fabric, same state file, switches reconnect
    second = FakeSwitches(f.dpids.values())
    svc2 = RouteService(second, f, store=StateStore(str(tmp_path / "state.db")))
    for d in f.dpids.values():
        svc2.switch_connected(d, {})
    assert second.snapshot() == first.snapshot()
    assert api.handle(svc2, "GET", "/v1/routes") == api.handle(svc, "GET", "/v1/routes")
    assert api.handle(svc2, "POST", "/v1/jobs", b'{"id": "c", "flows": [{"src": "h1_1", '
                      b'"dst": "h3_1", "bytes": 7}]}')[1]["number"] == 3
    with pytest.raises(Exception, match="another fabric"):
        RouteService(FakeSwitches([]), wired(3, 4, 2), store=StateStore(str(tmp_path / "state.db")))


def test_views(env):
    f, sw, svc = env
    api.handle(svc, "POST", "/v1/jobs", b'{"id": "a", "ranks": ["h0_0", "h1_0", "h2_0", "h3_0"], '
                                        b'"bytes": 4e6, "algorithm": "ecmp"}')
    code, job = api.handle(svc, "GET", "/v1/jobs/a")
    assert code == 200 and job["algorithm"] == "ecmp" and len(job["routes"]) == 4
    assert job["predicted_allreduce_s"] >= job["ideal_s"] > 0
    links = api.handle(svc, "GET", "/v1/links")[1]
    assert sum(l["flows"] for l in links["links"] if "->s" in l["link"]) == 4
    view = api.handle(svc, "GET", "/v1/fabric")[1]
    assert view["ready"] and not view["missing_switches"]


def test_unplanned_traffic_avoids_a_spine_that_lost_its_link_to_the_destination():
    f = wired(3, 4, 2)
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, f)
    for d in f.dpids.values():
        svc.switch_connected(d, {})
    svc.port_changed(f.dpids["l2"], f.port("l2", "s0"), False)
    for src in ("h0_0", "h1_1", "h3_0"):
        for dst in ("h2_0", "h2_1"):
            for bucket in range(3):  # every bucket of every group
                path, reached, _ = trace(f, sw, src, dst, bucket=bucket)
                assert reached == dst and path[1] != "s0", (src, dst, path)
    # other destinations still use every alive uplink
    assert {trace(f, sw, "h0_0", "h1_0", bucket=b)[0][1] for b in range(3)} == {"s0", "s1", "s2"}
