"""The controller on a three-tier fabric (``model.clos``), against fake OpenFlow tables: jobs
posted over REST are planned by the Clos planners, installed at every tier and followed by
their packets in flow and sr modes; a link down re-plans what crossed it; a restart changes
nothing; an unknown algorithm is a 400 that changes nothing (every name runs on Clos), and the
ILP runs there. Host mode on three tiers: tests/test_clos_hostmode.py; split plans:
tests/test_clos_split_service.py."""
import json

import pytest

from controller.model.clos import Clos
from controller.service import api
from controller.service.route_service import RouteService
from controller.service.store import StateStore
from emulation.harness.fake_switch import FakeSwitches, trace
from tests.clos_checks import CROSS_POD_RING
from tests.helpers import FakeClock


def start(fabric=None, store=None, **kw):
    f = fabric or Clos.fat_tree(4, 2, link_gbps=0.02).wire()
    sw = FakeSwitches(f.dpids.values(), fabric=f)
    clock = FakeClock(100.0)
    svc = RouteService(sw, f, store=store, clock=clock, sleep=clock.sleep, **kw)
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    return f, sw, svc


def call(svc, method, path, doc=None):
    return api.handle(svc, method, path, None if doc is None else json.dumps(doc).encode())


def ring(hosts, jid="r", **opts):
    return {"id": jid, "collective": "ring_allreduce", "ranks": hosts, "bytes": 1e6, **opts}


CROSS_PODS = CROSS_POD_RING


def tables(sw):
    return {d: dict(t) for d, t in sw.rules.items()}


@pytest.mark.parametrize("mode", ["flow", "sr"])
def test_a_ring_across_pods_follows_its_planned_paths(mode):
    f, sw, svc = start()
    code, doc = call(svc, "POST", "/v1/jobs", ring(CROSS_PODS, mode=mode))
    assert code == 201, doc
    view = call(svc, "GET", "/v1/jobs/r")[1]
    assert view["predicted_allreduce_s"] > 0 and view["unroutable_flows"] == 0
    for route in view["routes"]:
        path, reached, labels = trace(f, sw, route["src"], route["dst"])
        assert reached == route["dst"] and labels == []
        assert path == route["path"], (route, path)
    # every ring flow leaves its pod: its own core; the plan's loads say so too
    cores = [r["path"][2] for r in view["routes"]]
    assert len(cores) == 8 and all(c.startswith("c") for c in cores)
    links = call(svc, "GET", "/v1/links")[1]
    assert links["summary"]["max_link_load"] == 1.0
    assert {x["tier"] for x in links["links"]} == {"leaf", "core"}
    assert sum(x["flows"] for x in links["links"] if x["tier"] == "core") == 8 * 2


def test_delete_leaves_only_the_static_tables():
    f, sw, svc = start()
    static = tables(sw)
    assert call(svc, "POST", "/v1/jobs", ring(CROSS_PODS))[0] == 201
    assert tables(sw) != static
    assert call(svc, "DELETE", "/v1/jobs/r")[0] == 200
    assert tables(sw) == static


def mpls_entries(sw) -> dict:
    """Per switch, its entries that match an MPLS label (sr's static label entries)."""
    return {d: sum(1 for r in t.values() if "mpls_label" in r.match_dict())
            for d, t in sw.rules.items()}


def test_sr_label_entries_are_held_while_an_sr_job_runs():
    """Flow mode holds no label entry (on a k = 16 fat-tree they would be 10,432 of 19,072
    static entries, most at the cores); the first sr job brings them, a flow job beside it
    keeps them no longer than the sr job, and a controller whose default mode is sr holds
    them from the start."""
    f, sw, svc = start()
    static = tables(sw)
    assert not any(mpls_entries(sw).values())
    assert call(svc, "POST", "/v1/jobs", ring(CROSS_PODS, mode="sr"))[0] == 201
    held = mpls_entries(sw)
    cores = [f.dpids[c] for c, t in f.tier_of.items() if t == 2]
    assert all(held[d] == 1 + len(f.leaves) for d in cores)  # its own, every leaf's
    for route in call(svc, "GET", "/v1/jobs/r")[1]["routes"]:
        path, reached, _ = trace(f, sw, route["src"], route["dst"])
        assert reached == route["dst"] and path == route["path"], (route, path)
    assert call(svc, "POST", "/v1/jobs", ring(CROSS_PODS[::-1], jid="q"))[0] == 201
    assert call(svc, "DELETE", "/v1/jobs/r")[0] == 200
    assert not any(mpls_entries(sw).values())
    assert call(svc, "DELETE", "/v1/jobs/q")[0] == 200
    assert tables(sw) == static
    _, sr_sw, _ = start(f, mode="sr")
    assert mpls_entries(sr_sw) == held


def test_a_core_link_down_replans_the_flows_that_crossed_it():
    f, sw, svc = start()
    assert call(svc, "POST", "/v1/jobs", ring(CROSS_PODS))[0] == 201
    routes = call(svc, "GET", "/v1/jobs/r")[1]["routes"]
    agg, core = routes[0]["path"][1], routes[0]["path"][2]
    svc.port_changed(f.dpids[agg], f.port(agg, core), False)
    view = call(svc, "GET", "/v1/jobs/r")[1]
    assert view["unroutable_flows"] == 0
    for route in view["routes"]:
        assert (agg, core) not in zip(route["path"], route["path"][1:])
        path, reached, _ = trace(f, sw, route["src"], route["dst"])
        assert reached == route["dst"] and path == route["path"]
    assert call(svc, "GET", "/v1/fabric")[1]["links_down"] == [f"{agg}-{core}"]


def test_a_switch_lost_with_its_links_is_replanned_once_for_all_of_them():
    """Every link of an aggregation switch down together (a switch that powers off): one
    re-plan whose event names them, routes and packets off the switch."""
    f, sw, svc = start()
    assert call(svc, "POST", "/v1/jobs", ring(CROSS_PODS))[0] == 201
    agg = call(svc, "GET", "/v1/jobs/r")[1]["routes"][0]["path"][1]
    ends = [(f.dpids[agg], f.port(agg, peer)) for peer in f.neighbours(agg)]
    ends += [(f.dpids[peer], f.port(peer, agg)) for peer in f.neighbours(agg)]
    events = len(call(svc, "GET", "/v1/fabric")[1]["events"])
    svc.ports_changed([(dpid, port, False, None) for dpid, port in ends])
    fabric = call(svc, "GET", "/v1/fabric")[1]
    new = fabric["events"][events:]
    assert len(new) == 1 and new[0]["cause"].startswith("ports ") and new[0]["cause"].endswith(
        f"and {len(ends) - 3} more"), new
    assert sorted(fabric["links_down"]) == sorted(
        "-".join(sorted((agg, peer), key=lambda x: f.tier_of[x])) for peer in f.neighbours(agg))
    for route in call(svc, "GET", "/v1/jobs/r")[1]["routes"]:
        assert agg not in route["path"]
        path, reached, _ = trace(f, sw, route["src"], route["dst"])
        assert reached == route["dst"] and path == route["path"]


def test_a_restart_from_the_state_file_changes_no_table(tmp_path):
    path = str(tmp_path / "state.json")
    f, sw, svc = start(store=StateStore(path))
    assert call(svc, "POST", "/v1/jobs", ring(CROSS_PODS, mode="sr"))[0] == 201
    before, routes = tables(sw), call(svc, "GET", "/v1/routes")[1]
    sent = svc.counters["messages_sent"]
    svc2 = RouteService(sw, f, store=StateStore(path), clock=svc.clock, sleep=svc.sleep)
    for d in f.dpids.values():
        svc2.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    assert call(svc2, "GET", "/v1/routes")[1] == routes
    assert tables(sw) == before and svc2.counters["rules_installed"] == 0, sent


@pytest.mark.parametrize("opts, text", [
    ({"algorithm": "magic"}, "unknown algorithm 'magic'"),
])
def test_what_three_tiers_do_not_run_is_a_400_that_changes_nothing(opts, text):
    f, sw, svc = start()
    assert call(svc, "POST", "/v1/jobs", ring(CROSS_PODS[:4], "a"))[0] == 201
    before = tables(sw)
    code, doc = call(svc, "POST", "/v1/jobs", ring(CROSS_PODS[4:], "b", **opts))
    assert code == 400 and text in doc["error"], doc
    assert tables(sw) == before and list(svc.jobs) == ["a"]


@pytest.mark.parametrize("fab", [lambda: Clos.leaf_spine(2, 4, 2, planes=2, link_gbps=0.02),
                                 lambda: Clos.fat_tree(4, 1, planes=2, link_gbps=0.02)],
                         ids=["leaf-spine", "fat-tree"])
@pytest.mark.parametrize("mode", ["flow", "sr"])
def test_two_planes_are_served(fab, mode):
    """A ring posted by plane-1 addresses on a two-plane fabric: every route names its plane
    and the addresses of its ends there, and a packet sent with them (the host's interface to
    that plane) follows the planned path; both planes carry flows; the launcher's export
    writes each connection's plane addresses."""
    f, sw, svc = start(fab().wire())
    hosts = sorted(f.host_leaves, key=lambda h: (h.split("_")[1], h))  # across leaves
    code, doc = call(svc, "POST", "/v1/jobs",
                     ring([f.ip_of(h, 1) for h in hosts], mode=mode))
    assert code == 201, doc
    view = call(svc, "GET", "/v1/jobs/r")[1]
    assert view["job"]["rings"] == [hosts]  # any plane's address names its host
    a2a = [{"src": a, "dst": b, "bytes": 1e6, "sport": 7000} for a in hosts for b in hosts
           if a != b]
    assert call(svc, "POST", "/v1/jobs", {"id": "a2a", "flows": a2a, "mode": mode})[0] == 201
    names = {p.name: q for q, p in enumerate(f.planes)}
    used = set()
    for jid in ("r", "a2a"):
        routes = call(svc, "GET", f"/v1/jobs/{jid}")[1]["routes"]
        for route in routes:
            if f.hosts[route["src"]] == f.hosts[route["dst"]]:
                assert "plane" not in route  # within a leaf: the host's default interface
                continue
            q = names[route["plane"]]
            assert (route["src_ip"], route["dst_ip"]) == (f.ip_of(route["src"], q),
                                                          f.ip_of(route["dst"], q))
            path, reached, labels = trace(f, sw, route["src"], route["dst"], plane=q,
                                          sport=route.get("sport", 1234))
            assert reached == route["dst"] and labels == [] and path == route["path"], route
            used.add(q)
        lines = call(svc, "GET", f"/v1/jobs/{jid}/ports")[1].splitlines()[1:]
        assert sorted(tuple(x.split()[:2]) for x in lines) == sorted(
            (r.get("src_ip", f.ip_of(r["src"])), r.get("dst_ip", f.ip_of(r["dst"])))
            for r in routes)
    assert used == {0, 1}


def test_arp_is_answered_in_the_address_plane_only():
    f, sw, svc = start(Clos.leaf_spine(2, 2, 1, planes=2).wire())
    leaf0, leaf1 = (f.dpids[f.host_leaves["h1_0"][q]] for q in (0, 1))
    assert svc.arp_answer(f.ip_of("h0_0", 1), leaf1) == f.mac_of("h0_0", 1)
    assert svc.arp_answer(f.ip_of("h0_0", 0), leaf0) == f.mac_of("h0_0", 0)
    assert svc.arp_answer(f.ip_of("h0_0", 1), leaf0) is None  # a plane-1 address on plane 0


def test_crossed_wiring_is_refused_by_name():
    f = Clos.leaf_spine(2, 2, 2, planes=2).wire()
    f.host_leaves["h0_1"] = (f.host_leaves["h0_1"][0], f.host_leaves["h1_0"][1])
    with pytest.raises(Exception, match="crossed wiring"):
        start(f)


def test_a_pair_with_no_alive_path_on_any_plane_is_refused_naming_every_plane_leaf():
    f = Clos.leaf_spine(2, 2, 1, planes=2).wire()
    doc = f.to_dict()
    doc["down"] = [[f"l0_p{q}", f"s{j}_p{q}"] for q in (0, 1) for j in (0, 1)]
    f, _sw, svc = start(Clos.from_dict(doc))
    code, answer = call(svc, "POST", "/v1/jobs", {"id": "x", "flows": [
        {"src": "h0_0", "dst": "h1_0", "bytes": 1e6}]})
    assert (code, answer["error"]) == (409, "no alive path between leaves l0_p0 / l0_p1 and "
                                             "l1_p0 / l1_p1 (flow h0_0 -> h1_0 of job x)")


def test_a_job_declared_by_its_members_is_learned_and_planned_over_three_tiers():
    """sFlow samples of a ring across pods (every bridge samples: five per packet between
    pods): the members-only job is learned with the ring's pairs and routed over the cores."""
    from types import SimpleNamespace
    f, sw, svc = start(learn_window=1.0)
    ip = f.host_ip
    ring = [(a, CROSS_PODS[(i + 1) % 8]) for i, a in enumerate(CROSS_PODS)]
    samples = [SimpleNamespace(src=ip[a], dst=ip[b], frame_length=9000, sampling_rate=16)
               for a, b in ring] * 20
    code, doc = call(svc, "POST", "/v1/jobs", {"id": "m", "members": CROSS_PODS})
    assert code == 201 and doc["matrix"] == "learning", doc
    for _ in range(12):
        svc.traffic_samples(samples)
        svc.clock.sleep(0.5)
        svc.tick(probe=False)
    view = call(svc, "GET", "/v1/jobs/m")[1]
    assert view["matrix"] == "learned" and view["learning"]["replans"] == 1, view["learning"]
    assert {(r["src"], r["dst"]) for r in view["routes"]} == set(ring)
    for route in view["routes"]:
        path, reached, _ = trace(f, sw, route["src"], route["dst"])
        assert reached == route["dst"] and path == route["path"] and len(path) == 5


def test_samples_on_both_planes_add_up_to_one_matrix_per_host_pair():
    """A members-only ring whose hosts send half their traffic on each plane (each plane's
    addresses): one learned flow per host pair, its bytes the sum over the planes."""
    from types import SimpleNamespace
    f, sw, svc = start(Clos.leaf_spine(2, 4, 1, planes=2, link_gbps=0.02).wire(),
                       learn_window=1.0)
    hosts = sorted(f.host_leaves)
    ring = [(a, hosts[(i + 1) % len(hosts)]) for i, a in enumerate(hosts)]
    samples = [SimpleNamespace(src=f.ip_of(a, q), dst=f.ip_of(b, q), frame_length=9000,
                               sampling_rate=16) for a, b in ring for q in (0, 1)] * 10
    assert call(svc, "POST", "/v1/jobs", {"id": "m", "members": hosts})[0] == 201
    for _ in range(12):
        svc.traffic_samples(samples)
        svc.clock.sleep(0.5)
        svc.tick(probe=False)
    view = call(svc, "GET", "/v1/jobs/m")[1]
    assert view["matrix"] == "learned", view.get("learning")
    measured = {(x["src"], x["dst"]): x for x in view["measured_flows"]}
    assert set(measured) == set(ring)
    # 20 samples a pair per half second (10 per plane), 9000 bytes x 16 each, 2 per window;
    # every bridge samples: 3 sampling points a packet (leaf, spine, leaf)
    want = 2 * 20 * 9000 * 16 / 3
    assert all(abs(x["bytes"] - want) < 0.01 * want for x in measured.values()), measured


def test_metrics_and_imbalance_cover_both_tiers():
    from prometheus_client.parser import text_string_to_metric_families

    from controller.service.metrics import exposition
    f, sw, svc = start()
    assert call(svc, "POST", "/v1/jobs", ring(CROSS_PODS))[0] == 201
    agg = "a0_0"
    ports = {p: 0 for p in f.ports[agg].values()}
    svc.port_stats(f.dpids[agg], ports, now=1.0)
    svc.port_stats(f.dpids[agg], {**ports, f.port(agg, "c0_0"): 4000}, now=2.0)
    fams = {m.name: m for m in text_string_to_metric_families(exposition(svc)[0].decode())}
    planned = {(s.labels["link"], s.labels["tier"]): s.value
               for s in fams["mlroute_planned_link_flows"].samples}
    assert sum(v for (_, tier), v in planned.items() if tier == "core") == 16
    assert sum(v for (_, tier), v in planned.items() if tier == "leaf") == 16
    measured = {s.labels["link"]: s.value for s in fams["mlroute_measured_link_bps"].samples}
    assert measured[f"{agg}->c0_0"] == pytest.approx(32000)
    imb = call(svc, "GET", "/v1/imbalance")[1]
    assert imb["window"]["uplinks"]["per_switch"][agg] == pytest.approx(1.0)
    assert "aggregation" in imb["definition"]


def test_ring_order_advice_on_three_tiers_has_its_bound_and_prediction():
    f, sw, svc = start()
    scattered = ["h0_0", "h4_0", "h0_1", "h4_1", "h2_0", "h6_0", "h2_1", "h6_1"]
    code, doc = call(svc, "POST", "/v1/advise", ring(scattered, "x"))
    assert code == 200, doc
    job = doc["jobs"]["x"]
    assert job["inter_leaf_flows"]["advised"] < job["inter_leaf_flows"]["given"]
    t = job["predicted_allreduce_s"]
    assert 0 < t["advised"] <= t["given"] and doc["lower_bound"]["advised"] >= 1


@pytest.mark.parametrize("mode", ["flow", "sr", "host"])
def test_running_flows_keep_their_plane_until_it_has_no_path(mode):
    """Sticky planes: a running connection is bound to its plane's addresses. A ring and an
    all-to-all on two planes; one plane-0 uplink of a leaf down re-plans what crossed it
    within its plane (no flow changes plane); the leaf's last plane-0 uplink down leaves its
    host's plane-0 flows no path: those, and only those, move to plane 1, and the event
    lists them in ``plane_changes`` (in host mode ``port_changes`` too, port changed or
    not)."""
    f, sw, svc = start(Clos.leaf_spine(2, 4, 2, planes=2, link_gbps=0.02).wire())
    hosts = sorted(f.host_leaves, key=lambda h: (h.split("_")[1], h))  # across leaves
    extra = {"proto": "tcp", "dport": 80} if mode == "host" else {}
    code, doc = call(svc, "POST", "/v1/jobs", ring(hosts, mode=mode, **extra))
    assert code == 201 and doc["plane_changes"] == [], doc
    a2a = [{"src": a, "dst": b, "bytes": 1e6, "sport": 7000, **extra} for a in hosts
           for b in hosts if f.hosts[a] != f.hosts[b]]
    code, doc = call(svc, "POST", "/v1/jobs", {"id": "a2a", "flows": a2a, "mode": mode})
    assert code == 201 and doc["plane_changes"] == [], doc

    def planes():
        out = {}
        for jid in ("r", "a2a"):
            for route in call(svc, "GET", f"/v1/jobs/{jid}")[1]["routes"]:
                q = next(q for q, p in enumerate(f.planes) if p.name == route["plane"])
                path, reached, _ = trace(f, sw, route["src"], route["dst"], plane=q,
                                         sport=route.get("sport", 1234))
                assert reached == route["dst"] and path == route["path"], route
                out[(jid, route["src"], route["dst"])] = route["plane"]
        return out

    before = planes()
    assert set(before.values()) == {"plane0", "plane1"}
    leaf = f.host_leaves[hosts[0]][0]
    first, last = sorted(s for s in f.neighbours(leaf) if s in f.tier_of)
    svc.port_changed(f.dpids[leaf], f.port(leaf, first), False)
    event = svc.state.events[-1]
    assert event["links_down"] == [f"{leaf}-{first}"] and event["replanned"], event
    assert planes() == before and "plane_changes" not in event
    svc.port_changed(f.dpids[leaf], f.port(leaf, last), False)
    event, after = svc.state.events[-1], planes()
    cut = set(f.hosts_on[leaf])  # the leaf's hosts: plane 0 no longer reaches them
    assert after == {k: "plane1" if cut & set(k[1:]) else q for k, q in before.items()}
    moved = {k for k in before if before[k] != after[k]}
    assert moved and {(c["job"], c["src"], c["dst"]) for c in event["plane_changes"]} == moved
    assert all((c["old_plane"], c["plane"]) == ("plane0", "plane1") and
               c["path"][0] == f.host_leaves[c["src"]][1] for c in event["plane_changes"])
    from tests.test_openapi import _validator
    assert all(_validator("PlaneChange").is_valid(c) for c in event["plane_changes"])
    if mode == "host":
        ports = {(c["job"], c["src"], c["dst"]): c for c in event["port_changes"]}
        assert moved <= set(ports) and all(ports[k]["plane"] == "plane1" for k in moved)
    assert call(svc, "POST", "/v1/optimize")[1]["plane_changes"] == []
