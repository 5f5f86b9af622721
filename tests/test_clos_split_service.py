"""``split`` enforced on Clos fabrics (``model.clos``), against fake OpenFlow tables: a job whose
degrees leave a leaf's uplinks unevenly loaded is accepted, some flow is cut into parts, and
every part's packets (the sub-connection of source port ``rules.part_sport``) follow that
part's path in flow and sr modes (members pinned on a fabric with bundles, ports learned by
probes in host mode); the rule budget counts every part; a link down re-plans; a restart
installs nothing; bad bounds are still a 400."""
import json
from collections import Counter

import pytest

from controller.enforcement.desired import desired_tables
from controller.enforcement.openflow import COOKIE_STATIC
from controller.model.clos import Clos
from controller.model.jobs import parse_job
from controller.service import api
from controller.service.route_service import RouteService
from controller.service.store import StateStore
from emulation.harness.fake_switch import FakeSwitches, trace
from tests.helpers import FakeClock


def fat_tree() -> Clos:
    return Clos.fat_tree(4, 2, link_gbps=0.02).wire()


def two_planes() -> Clos:
    return Clos.leaf_spine(2, 2, 3, planes=2, link_gbps=0.02).wire()  # per plane 2 spines


def bundled() -> Clos:
    return Clos.leaf_spine(2, 3, 2, link_gbps=0.02, bundle=2).wire()  # every link: 2 members


# per fabric, (source, destination) pairs that one leaf's uplinks cannot carry evenly unsplit:
# 3 flows out of l0 over 2 uplinks (fat-tree: across pods), 6 over 2 planes x 2 spines, 5 over
# 2 bundles of 2 members (the fractional optima 1.5, 1.5 and 1.25 against 2 unsplit)
FABRICS = {
    "fat-tree": (fat_tree, [("h0_0", "h4_0"), ("h0_1", "h4_1"), ("h0_0", "h5_0")]),
    "two-plane leaf-spine": (two_planes, [(f"h0_{k}", f"h1_{k}") for k in range(3)] * 2),
    "bundled leaf-spine": (bundled, [("h0_0", "h1_0"), ("h0_1", "h1_1"), ("h0_0", "h2_0"),
                                     ("h0_1", "h2_1"), ("h0_0", "h1_1")]),
}
SERVED = [("fat-tree", "flow"), ("fat-tree", "sr"), ("two-plane leaf-spine", "flow"),
          ("two-plane leaf-spine", "sr"), ("bundled leaf-spine", "flow"),
          ("bundled leaf-spine", "sr")]


def start(f, store=None, **kw):
    sw = FakeSwitches(f.dpids.values(), fabric=f)
    clock = FakeClock(100.0)
    svc = RouteService(sw, f, store=store, clock=clock, sleep=clock.sleep, **kw)
    connect(f, svc)
    return sw, svc


def connect(f, svc):
    for d in f.dpids.values():
        name = f.switch_of_dpid[d]
        svc.switch_connected(d, {p: True for peer in f.ports[name] for p in f.ports_to(name, peer)})


def call(svc, method, path, doc=None):
    return api.handle(svc, method, path, None if doc is None else json.dumps(doc).encode())


def job(shape, jid="s", **opts):
    pairs = FABRICS[shape][1]
    return {"id": jid, "algorithm": "split", **opts,
            "flows": [{"src": a, "dst": b, "bytes": 1e6, "dport": 5000 + k}
                      for k, (a, b) in enumerate(pairs)]}


def parts_of(route) -> list[dict]:
    """A route's parts, each with its source port (an unsplit route: the flow's own)."""
    return route.get("split") or [route]


def follow(f, sw, routes) -> int:
    """Every part's packet, sent with the part's source port from the host's interface to the
    part's plane, crosses the part's planned switches (and members); returns the parts."""
    planes = [p.name for p in f.planes]
    n = 0
    for r in routes:
        for part in parts_of(r):
            members = []
            plane = planes.index(part["plane"]) if "plane" in part else 0
            path, reached, labels = trace(f, sw, r["src"], r["dst"], sport=part.get("sport", 0),
                                          dport=r["dport"], plane=plane, members=members)
            assert reached == r["dst"] and labels == [], (r, part, path)
            assert path == part["path"], (r, part, path)
            if "members" in part:
                assert members == part["members"], (part, members)
            n += 1
    return n


def tables(sw):
    return {d: dict(t) for d, t in sw.rules.items()}


def job_entries(sw) -> int:
    return sum(1 for t in sw.rules.values() for x in t.values() if x.cookie != COOKIE_STATIC)


@pytest.mark.parametrize("shape, mode", SERVED)
def test_split_parts_follow_their_paths(shape, mode):
    f = FABRICS[shape][0]()
    sw, svc = start(f)
    code, doc = call(svc, "POST", "/v1/jobs", job(shape, mode=mode))
    assert code == 201, doc
    view = call(svc, "GET", "/v1/jobs/s")[1]
    assert view["algorithm"] == "split" and view["unroutable_flows"] == 0
    routes = view["routes"]
    split = [r for r in routes if "split" in r]
    assert split, routes
    for r in split:
        assert len({p["sport"] for p in r["split"]}) == len(r["split"]) > 1
        assert {p["sport"] for p in r["split"]} == {40000 + i for i in range(len(r["split"]))}
        assert sum(p["share"] for p in r["split"]) == pytest.approx(1.0)
        assert len({tuple(p["path"]) for p in r["split"]}) == len(r["split"])
    parts = follow(f, sw, routes)
    assert parts > len(routes)
    # the plan's loads count the parts' shares: 1.5, below any unsplit routing (2); with
    # bundles the split planner's member choice leaves a member at 1.5 (its LP: 1.25 a bundle)
    links = call(svc, "GET", "/v1/links")[1]
    assert links["summary"]["max_link_load"] == pytest.approx(1.5)
    assert view["predicted_allreduce_s"] > 0
    if len(f.planes) > 1:  # parts name their plane and the addresses of their ends there
        assert all("src_ip" in p and "plane" in p for r in split for p in r["split"])
    # the launcher's export lists one connection per part, with the part's source port
    lines = call(svc, "GET", "/v1/jobs/s/ports")[1].splitlines()[1:]
    assert len(lines) == parts
    assert {int(x.split()[3]) for x in lines} >= {p["sport"] for r in split for p in r["split"]}


@pytest.mark.parametrize("shape, mode", SERVED)
def test_the_rule_budget_counts_every_part(shape, mode):
    f = FABRICS[shape][0]()
    sw, svc = start(f)
    assert call(svc, "POST", "/v1/jobs", job(shape, mode=mode))[0] == 201
    routes = call(svc, "GET", "/v1/jobs/s")[1]["routes"]
    parts = sum(len(parts_of(r)) for r in routes)
    # sr: one entry per part at its source leaf; flow: one more at the source aggregation
    # switch of a path across pods, or with bundles at the spine (onto a bundle of 2 members)
    per_part = {"sr": 1, "flow": 1 if shape == "two-plane leaf-spine" else 2}
    assert job_entries(sw) == parts * per_part[mode]
    want = desired_tables(f, svc.state.jobs.values())
    jobs_at = {f.switch_of_dpid[d]: sum(1 for x in rules if x.cookie != COOKIE_STATIC)
               for d, (rules, _) in want.items()}
    firsts = Counter(p["path"][0] for r in routes for p in parts_of(r))
    assert all(jobs_at[leaf] == n for leaf, n in firsts.items()), (firsts, jobs_at)
    assert sum(jobs_at.values()) == parts * per_part[mode]
    # a budget one below the fullest switch that the job adds to refuses it, naming the
    # switch's job entries (a switch over it with static entries alone is not refused; an sr
    # job adds sr's label entries too, static ones, the cores' most of all)
    sizes = {f.switch_of_dpid[d]: len(rules) for d, (rules, _) in want.items()}
    before = {f.switch_of_dpid[d]: len(rules) for d, (rules, _) in desired_tables(f, []).items()}
    grows = {name: n for name, n in sizes.items() if n > before[name]}
    assert (mode == "sr") == any(not jobs_at[name] for name in grows), grows  # the labels
    most = max(grows.values())
    fullest = min(name for name, n in grows.items() if n == most)
    _, tight = start(f, max_flow_rules=most - 1)
    code, doc = call(tight, "POST", "/v1/jobs", job(shape, mode=mode))
    assert code == 409, doc
    assert f"switch {fullest} would hold {most} flow entries ({jobs_at[fullest]} of jobs" \
        in doc["error"], doc
    _, enough = start(f, max_flow_rules=most)
    assert call(enough, "POST", "/v1/jobs", job(shape, mode=mode))[0] == 201


@pytest.mark.parametrize("shape, mode", SERVED)
def test_a_link_down_replans_the_parts_that_crossed_it(shape, mode):
    f = FABRICS[shape][0]()
    sw, svc = start(f)
    assert call(svc, "POST", "/v1/jobs", job(shape, mode=mode))[0] == 201
    route = next(r for r in call(svc, "GET", "/v1/jobs/s")[1]["routes"] if "split" in r)
    path = route["split"][0]["path"]
    a, b = path[-3], path[-2]  # the down hop into the last switch before the destination leaf
    for p in f.ports_to(a, b):
        svc.port_changed(f.dpids[a], p, False)
    view = call(svc, "GET", "/v1/jobs/s")[1]
    assert view["unroutable_flows"] == 0
    for r in view["routes"]:
        for part in parts_of(r):
            assert (a, b) not in zip(part["path"], part["path"][1:]), part
    follow(f, sw, view["routes"])


@pytest.mark.parametrize("shape, mode", SERVED)
def test_a_restart_from_the_state_file_installs_nothing(shape, mode, tmp_path):
    f = FABRICS[shape][0]()
    store = str(tmp_path / "state.json")
    sw, svc = start(f, store=StateStore(store))
    assert call(svc, "POST", "/v1/jobs", job(shape, mode=mode))[0] == 201
    before, routes = tables(sw), call(svc, "GET", "/v1/routes")[1]
    clock = FakeClock(200.0)
    svc2 = RouteService(sw, f, store=StateStore(store), clock=clock, sleep=clock.sleep)
    connect(f, svc2)
    assert call(svc2, "GET", "/v1/routes")[1] == routes
    assert tables(sw) == before and svc2.counters["rules_installed"] == 0
    assert any("split" in r for r in call(svc2, "GET", "/v1/jobs/s")[1]["routes"])


@pytest.mark.parametrize("max_parts, most", [(1, 1), (2, 2), (0, 2)])
def test_max_parts_bounds_the_parts_on_a_clos(max_parts, most):
    f = fat_tree()
    sw, svc = start(f)
    code, doc = call(svc, "POST", "/v1/jobs", job("fat-tree", max_parts=max_parts))
    assert code == 201 and doc["job"]["max_parts"] == max_parts, doc
    assert max(len(p) for p in svc.state.jobs["s"].routes.values()) == most
    follow(f, sw, call(svc, "GET", "/v1/jobs/s")[1]["routes"])


@pytest.mark.parametrize("opts, status, text", [
    ({"max_parts": -1}, 400, "'max_parts' must be an integer >= 0"),
    ({"max_parts": 2.5}, 400, "'max_parts' must be an integer >= 0"),
    ({"max_parts": True}, 400, "'max_parts' must be an integer >= 0"),
    ({"max_parts": 2, "algorithm": "greedy"}, 400, "max_parts needs algorithm 'split'"),
    ({"algorithm": "magic"}, 400, "unknown algorithm 'magic'"),
])
def test_bad_input_is_a_4xx_that_changes_nothing(opts, status, text):
    f = bundled()
    sw, svc = start(f)
    assert call(svc, "POST", "/v1/jobs", job("bundled leaf-spine", "a"))[0] == 201
    before = tables(sw)
    code, doc = call(svc, "POST", "/v1/jobs", {**job("bundled leaf-spine", "b"), **opts,
                                               "flows": [{"src": "h2_0", "dst": "h1_0", "bytes": 1e6}]})
    assert code == status and text in doc["error"], doc
    assert tables(sw) == before and list(svc.jobs) == ["a"]


def test_host_mode_gives_every_part_a_port_its_packets_follow():
    f = fat_tree()
    sw, svc = start(f)
    code, doc = call(svc, "POST", "/v1/jobs", {
        **job("fat-tree", mode="host"),
        "flows": [{**x, "proto": "udp", "dport": 4791} for x in job("fat-tree")["flows"]]})
    assert code == 201, doc
    routes = call(svc, "GET", "/v1/jobs/s")[1]["routes"]
    split = [r for r in routes if "split" in r]
    assert split and job_entries(sw) == 0  # no per-flow entry anywhere
    for r in routes:
        for part in parts_of(r):
            assert part["sport"] is not None, r
            path, reached, _ = trace(f, sw, r["src"], r["dst"], proto=17, sport=part["sport"],
                                     dport=4791)
            assert reached == r["dst"] and path == part["path"], (r, part, path)
    assert all(len({p["sport"] for p in r["split"]}) == len(r["split"]) for r in split)


# ---- a split over two planes: each part's connection is bound to its plane's addresses -----
def one_spine_planes() -> Clos:
    return Clos.leaf_spine(1, 2, 3, planes=2, link_gbps=0.02).wire()  # l0's uplinks: 1 a plane


def three_flows(jid="s"):
    return {"id": jid, "algorithm": "split", "flows": [
        {"src": f"h0_{k}", "dst": f"h1_{k}", "bytes": 1e6, "dport": 5000 + k} for k in range(3)]}


def planes_of(route) -> list[str]:
    return [p["plane"] for p in parts_of(route)]


def test_a_split_over_two_planes_keeps_its_parts_when_planned_again():
    f = one_spine_planes()
    sw, svc = start(f)
    assert call(svc, "POST", "/v1/jobs", three_flows())[0] == 201
    routes = call(svc, "GET", "/v1/jobs/s")[1]["routes"]
    across = [r for r in routes if len(set(planes_of(r))) > 1]
    assert across, routes  # 3 flows over 2 uplinks: one flow is cut over both planes
    follow(f, sw, routes)
    # another split job re-plans the group: the split flow stays split, its parts in place
    code, doc = call(svc, "POST", "/v1/jobs", {**three_flows("t"), "flows": [
        {"src": "h1_0", "dst": "h0_0", "bytes": 1e6}]})
    assert code == 201 and doc["plane_changes"] == [], doc
    again = call(svc, "GET", "/v1/jobs/s")[1]["routes"]
    assert [[(p["path"], p.get("sport")) for p in parts_of(r)] for r in again] == \
        [[(p["path"], p.get("sport")) for p in parts_of(r)] for r in routes]
    # plane 0's uplink of l0 down: every flow of l0 goes to plane 1
    leaf = f.planes[0].leaves[0]
    spine = next(p["path"][1] for r in routes for p in parts_of(r) if p["path"][0] == leaf)
    svc.port_changed(f.dpids[leaf], f.port(leaf, spine), False)
    after = call(svc, "GET", "/v1/jobs/s")[1]["routes"]
    assert all(planes_of(r) == [f.planes[1].name] for r in after), after
    follow(f, sw, after)


def test_parts_in_force_keep_their_places_and_moves_are_listed():
    from controller.planners.group_routes import keep_order as _keep_order
    from controller.service.replanning import _parts_moved
    f = one_spine_planes()
    p0, p1 = ("l0_p0", "s0_p0", "l1_p0"), ("l0_p1", "s0_p1", "l1_p1")
    old = ((p1, 0.5), (p0, 0.5))
    assert _keep_order(f, old, ((p0, 0.6), (p1, 0.4))) == ((p1, 0.4), (p0, 0.6))
    assert _keep_order(f, old, ((p0, 1.0),)) == ((p0, 1.0),)  # one part: as planned
    flow = parse_job(three_flows(), f).flows()[2]
    moved = _parts_moved(f, [flow], [old], [((p0, 0.5), (p1, 0.5))], [])
    assert [(m["part"], m["sport"], m["path"], m["old_plane"], m["plane"]) for m in moved] == [
        (0, 40000, list(p0), "plane1", "plane0"), (1, 40001, list(p1), "plane0", "plane1")]
    assert moved[0]["dport"] == 5002 and "split" not in moved[0]
    assert _parts_moved(f, [flow], [old], [old], []) == []
    assert _parts_moved(f, [flow], [old], [((p0, 0.5), (p1, 0.5))], [0]) == []  # listed whole



def test_flows_whose_plane_fails_are_listed_part_by_part():
    """Plane 0 lost at l0 at once (both uplinks): every flow of l0 that was there moves to
    plane 1 and is listed, a flow that the new plan splits once per part (with its port)."""
    from controller.service.replanning import replan_groups
    f = two_planes()
    _sw, svc = start(f)
    doc = {"id": "s", "algorithm": "split", "flows": [
        {"src": f"h0_{k % 3}", "dst": f"h1_{k % 3}", "bytes": 1e6, "dport": 5000 + k}
        for k in range(5)]}  # 5 flows: 1.25 on each of 4 uplinks, 2.5 on plane 1's 2
    assert call(svc, "POST", "/v1/jobs", doc)[0] == 201
    routes = call(svc, "GET", "/v1/jobs/s")[1]["routes"]
    was = {r["dport"] for r in routes if "plane0" in planes_of(r)}
    assert was and any("split" in r for r in routes)
    leaf = f.planes[0].leaves[0]
    down = f.with_down({(leaf, s) for s in f.neighbours(leaf) if s in f.tier_of})
    out = replan_groups(down, svc.state.jobs, {"split"}, svc.settings)
    assert {m["dport"] for m in out.plane_changes} == was
    assert any("part" in m for m in out.plane_changes)  # the flow split over both planes
    for m in out.plane_changes:
        assert m["old_plane"] == "plane0" and m["plane"] == "plane1" and m["path"][0] != leaf
        if "part" in m:
            assert m["sport"] == 40000 + m["part"]
    new = [out.records["s"].routes[k] for k in out.records["s"].routes]
    assert all(down.part_plane(w) == 1 for parts in new for w, _ in parts)
    assert any(len(parts) > 1 for parts in new)


def test_a_part_past_port_65535_is_a_400_naming_the_flow():
    """Three flows out of l0 over two uplinks, the first from source port 65535: a split
    would give its second part port 65536; refused, nothing installed."""
    f = fat_tree()
    sw, svc = start(f)
    before = tables(sw)
    doc = job("fat-tree")
    doc["flows"] = [dict(x, sport=65535 if k == 0 else 1000 * (k + 1))
                    for k, x in enumerate(doc["flows"])]
    code, answer = call(svc, "POST", "/v1/jobs", doc)  # the planner cuts the first flow
    assert code == 400 and "65535" in answer["error"] and "h0_0 -> h4_0" in answer["error"], answer
    assert tables(sw) == before and not svc.jobs


def test_a_part_whose_port_another_flow_takes_is_named_in_the_conflict():
    """Job o's flow from port 7001 and a split job's flow from 7000 cut in two (its parts
    from 7000 and 7001) between the same hosts: the 409 names the split part and its port."""
    f = fat_tree()
    sw, svc = start(f)
    other = {"id": "o", "flows": [{"src": "h0_0", "dst": "h4_0", "bytes": 1e6, "sport": 7001}]}
    assert call(svc, "POST", "/v1/jobs", other)[0] == 201
    doc = job("fat-tree")
    doc["flows"] = [dict(x, sport=7000 + 1000 * k) for k, x in enumerate(doc["flows"])]
    doc["flows"][0].pop("dport")
    code, answer = call(svc, "POST", "/v1/jobs", doc)  # the planner cuts the first flow
    assert code == 409, answer
    assert "split, its part from source port 7001" in answer["error"], answer
    assert "p .. p + n - 1" in answer["error"]
