"""Bundles (parallel links between two switches) in the controller: the wiring declares a
bundle's ports as a list in member order (``model.clos_wiring``), and the shared port helpers
(``model.fabric.HostLookup``) read it."""
import pytest

from controller.errors import InputError
from controller.model.clos import Clos


def bundled_fat_tree() -> Clos:
    """A k = 4 fat-tree with a two-link and a three-link bundle, of unequal sizes."""
    f = Clos.fat_tree(4, 2, link_gbps=0.02)
    f.bundles[("l0", "a0_1")] = 2
    f.bundles[("a0_0", "c0_1")] = 3
    return f.wire()


def test_wire_numbers_members_consecutively_and_round_trips():
    f = Clos.leaf_spine(2, 3, 2, bundle=2).wire()
    assert f.ports["l0"] == {"s0": [1, 2], "s1": [3, 4], "h0_0": 5, "h0_1": 6}
    assert f.ports["s1"] == {"l0": [1, 2], "l1": [3, 4], "l2": [5, 6]}
    assert f.port("l0", "s1") == 3 and f.ports_to("l0", "s1") == (3, 4)
    assert f.ports_to("l0", "h0_0") == (5,)
    assert f.peer("l0", 4) == "s1" and f.member("l0", 4) == 1 and f.member("l0", 5) == 0
    back = Clos.from_dict(f.to_dict())
    assert back.to_dict() == f.to_dict() and back.ports_to("s1", "l2") == (5, 6)
    t = bundled_fat_tree()
    assert t.ports["l0"] == {"a0_0": 1, "a0_1": [2, 3], "h0_0": 4, "h0_1": 5}
    assert t.ports["c0_1"]["a0_0"] == [1, 2, 3] and t.ports["c0_1"]["a1_0"] == 4
    assert Clos.from_dict(t.to_dict()).to_dict() == t.to_dict()


def test_single_links_are_wired_as_before():
    f = Clos.fat_tree(4, 2).wire()
    assert all(isinstance(p, int) for ports in f.ports.values() for p in ports.values())


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["ports"]["l0"].update(s1=3), ["l0", "2 port number(s) for s1", "3"]),
    (lambda d: d["ports"]["l0"].update(s1=[3, 4, 7]), ["l0", "2 port number(s) for s1"]),
    (lambda d: d["ports"]["l0"].update(s1=[3, 5]), ["l0", "port number twice"]),
    (lambda d: d["ports"]["l0"].update(h0_0=[5]), ["l0", "single link to h0_0", "not a list"]),
    (lambda d: d["ports"]["s0"].update(l1=[3, "x"]), ["s0", "no port number for l1"]),
])
def test_bundle_wiring_errors_name_the_switch(edit, words):
    doc = Clos.leaf_spine(2, 3, 2, bundle=2).wire().to_dict()
    edit(doc)
    with pytest.raises(InputError) as e:
        Clos.from_dict(doc)
    assert all(w in str(e.value) for w in words), str(e.value)


# ---- the controller on a fabric with bundles (fake switches) -------------------------------
import json  # noqa: E402

from controller.enforcement.desired import desired_tables  # noqa: E402
from controller.enforcement.openflow import COOKIE_STATIC  # noqa: E402
from controller.service import api  # noqa: E402
from controller.service.admission import over_budget  # noqa: E402
from controller.service.route_service import RouteService  # noqa: E402
from controller.service.store import StateStore  # noqa: E402
from emulation.harness.fake_switch import FakeSwitches, trace  # noqa: E402
from tests.helpers import FakeClock  # noqa: E402


def bundled_leaf_spine() -> Clos:
    return Clos.leaf_spine(2, 3, 2, link_gbps=0.02, bundle=2).wire()


FABRICS = {"leaf-spine": bundled_leaf_spine, "fat-tree": bundled_fat_tree}


def start(f, store=None, **kw):
    sw = FakeSwitches(f.dpids.values(), fabric=f)
    clock = FakeClock(100.0)
    svc = RouteService(sw, f, store=store, clock=clock, sleep=clock.sleep, **kw)
    for d in f.dpids.values():
        name = f.switch_of_dpid[d]
        svc.switch_connected(d, {p: True for peer in f.ports[name] for p in f.ports_to(name, peer)})
    return sw, svc


def call(svc, method, path, doc=None):
    return api.handle(svc, method, path, None if doc is None else json.dumps(doc).encode())


def all_to_all(f, jid="a", **opts):
    hosts = sorted(f.host_leaves)
    return {"id": jid, "flows": [{"src": a, "dst": b, "bytes": 1e6, "sport": 7000}
                                 for a in hosts for b in hosts if a != b], **opts}


def follow(f, sw, routes):
    """Every route's packet crosses its planned switches and members; the members used."""
    used = set()
    for r in routes:
        members = []
        path, reached, _ = trace(f, sw, r["src"], r["dst"], sport=r["sport"], members=members)
        assert reached == r["dst"], r
        if f.hosts[r["src"]] == f.hosts[r["dst"]]:
            assert "members" not in r and r["spine"] is None
            continue
        assert path == r["path"] and members == r["members"], (r, path, members)
        used |= {(a, b, m) for a, b, m in zip(path, path[1:], members)}
    return used


@pytest.mark.parametrize("shape", sorted(FABRICS))
def test_flow_mode_packets_follow_their_planned_members(shape):
    f = FABRICS[shape]()
    sw, svc = start(f)
    code, doc = call(svc, "POST", "/v1/jobs", all_to_all(f))
    assert code == 201, doc
    routes = call(svc, "GET", "/v1/jobs/a")[1]["routes"]
    used = follow(f, sw, routes)
    # both members of a bundle carry planned flows (l0-a0_1 and a0_0-c0_1 on the fat-tree)
    lo, up = ("l0", "s0") if shape == "leaf-spine" else ("l0", "a0_1")
    assert {m for a, b, m in used if (a, b) == (lo, up)} == {0, 1}
    if shape == "fat-tree":
        assert {m for a, b, m in used if (a, b) == ("a0_0", "c0_1")} == {0, 1, 2}
    # the links view lists members, with the planned flows on each
    links = {x["link"]: x for x in call(svc, "GET", "/v1/links")[1]["links"]}
    assert f"{lo}->{up}" in links and f"{lo}->{up}#1" in links
    assert links[f"{lo}->{up}"]["flows"] > 0 and links[f"{lo}->{up}#1"]["flows"] > 0


def test_groups_have_a_bucket_per_alive_member_and_a_member_down_is_avoided():
    f = bundled_leaf_spine()
    sw, svc = start(f)
    l0, s0 = f.dpids["l0"], f.dpids["s0"]
    buckets = lambda d, g: {b[0][1] for b in sw.groups[d][g].buckets}
    assert buckets(l0, 1) == {1, 2, 3, 4}  # every member of both uplinks
    assert call(svc, "POST", "/v1/jobs", all_to_all(f))[0] == 201
    # member 1 of l0-s0 goes down at the spine's end: the link stays up with member 0
    svc.port_changed(s0, f.ports_to("s0", "l0")[1], False)
    fabric = call(svc, "GET", "/v1/fabric")[1]
    assert fabric["links_down"] == ["l0-s0-1"]
    assert buckets(l0, 1) == {1, 3, 4}
    # the spine's bundle group towards l0 is gone: one alive member, a plain output
    assert 0x10000 not in sw.groups[s0] and buckets(s0, 0x10001) == {3, 4}
    routes = call(svc, "GET", "/v1/jobs/a")[1]["routes"]
    used = follow(f, sw, routes)
    assert ("l0", "s0", 1) not in used and ("s0", "l0", 1) not in used
    assert ("l0", "s0", 0) in used
    # the whole bundle down: the link is down
    svc.port_changed(s0, f.ports_to("s0", "l0")[0], False)
    assert call(svc, "GET", "/v1/fabric")[1]["links_down"] == ["l0-s0"]
    used = follow(f, sw, call(svc, "GET", "/v1/jobs/a")[1]["routes"])
    assert not {(a, b) for a, b, _ in used} & {("l0", "s0"), ("s0", "l0")}


def test_host_mode_is_served_with_bundles_and_a_bit_space_overflow_is_refused():
    f = bundled_fat_tree()
    sw, svc = start(f)
    # host mode codes the members into its source ports (tests/test_bundles_host.py)
    flows = [{**x, "dport": 80} for x in all_to_all(f)["flows"]]
    code, doc = call(svc, "POST", "/v1/jobs", {"id": "h", "flows": flows, "mode": "host"})
    assert code == 201, doc
    # sr pins the members with its labels (tests/test_bundles_sr.py)
    code, doc = call(svc, "POST", "/v1/jobs", all_to_all(f, mode="sr"))
    assert code == 201, doc
    # bundles too large for the 14 bits of host mode's ports: refused by name, nothing changes
    big = Clos.leaf_spine(2, 3, 2, link_gbps=0.02)
    big.bundles[("l0", "s0")] = 128
    sw, svc = start(big.wire())
    before = sw.snapshot()
    code, doc = call(svc, "POST", "/v1/jobs", all_to_all(big, mode="host"))
    assert code == 400 and "mode host" in doc["error"] and "15 in all" in doc["error"], doc
    assert "flow or sr mode" in doc["error"], doc
    assert sw.snapshot() == before and call(svc, "GET", "/v1/jobs")[1] in ([], {"jobs": []})


def test_the_rule_budget_counts_the_pinned_entries_at_every_tier():
    f = bundled_leaf_spine()
    sw, svc = start(f)
    assert call(svc, "POST", "/v1/jobs", all_to_all(f))[0] == 201
    records = svc.state.jobs
    tables = desired_tables(f, records.values())
    jobs_at = {f.switch_of_dpid[d]: sum(1 for x in rules if x.cookie != COOKIE_STATIC) for d, (rules, _) in
               tables.items()}
    # every inter-leaf flow: one entry at its source leaf and one at its spine (bundle of two)
    assert sum(jobs_at[s] for s in ("s0", "s1")) == 24 and jobs_at["l0"] == 8
    over = over_budget(f, {}, records, 10, lambda d: f.switch_of_dpid[d])
    assert {o["switch"] for o in over} >= {"s0", "s1"}
    # a job whose per-flow entries take a spine over the budget falls back to host mode,
    # which pins members with static entries only (32 at a spine: 2 protocols x 2 member
    # codes per host below it, the probe trap and the static entries; in flow mode 40: the
    # job's 36 and 4 static)
    many = {"id": "m", "flows": [dict(x, dport=d, proto="tcp") for x in all_to_all(f)["flows"]
                                 for d in (80, 81, 82)]}
    sw2, svc2 = start(f, max_flow_rules=36, over_budget="host")
    code, doc = call(svc2, "POST", "/v1/jobs", many)
    assert code == 201 and doc["mode"] == "host" and "over_budget" in doc, doc
    assert all(x.cookie == COOKIE_STATIC for t in sw2.rules.values() for x in t.values())
    for r in call(svc2, "GET", "/v1/jobs/m")[1]["routes"]:
        members = []
        path, reached, _ = trace(f, sw2, r["src"], r["dst"], sport=r["sport"], dport=r["dport"],
                                 members=members)
        assert reached == r["dst"] and (path, members) == (r.get("path", path),
                                                           r.get("members", members)), r
    # without the fallback, the refusal advises host mode
    _, svc3 = start(f, max_flow_rules=36)
    code, doc = call(svc3, "POST", "/v1/jobs", many)
    assert code == 409 and "over its budget" in doc["error"] and '"mode": "host"' in doc["error"]


def test_members_survive_a_restart(tmp_path):
    f = bundled_leaf_spine()
    path = str(tmp_path / "state.json")
    sw, svc = start(f, store=StateStore(path))
    assert call(svc, "POST", "/v1/jobs", all_to_all(f))[0] == 201
    routes = call(svc, "GET", "/v1/jobs/a")[1]["routes"]
    stored = StateStore(str(path)).load()
    assert any(len(part) == 3 for _, parts in stored["jobs"][0]["routes"] if parts
               for part in parts)
    svc2 = RouteService(sw, f, store=StateStore(path), clock=svc.clock, sleep=svc.sleep)
    assert call(svc2, "GET", "/v1/jobs/a")[1]["routes"] == routes


# ---- discovery: parallel cables are a bundle -------------------------------------------------
from controller.discovery.planes import recognise_planes  # noqa: E402
from controller.discovery.tiers import recognise_clos  # noqa: E402
from controller.discovery.topology import Topology  # noqa: E402


def observe(f, missing=(), t=None):
    """What the shell feeds for wired fabric ``f``: every port up, LLDP both ways on every
    member of every link but the ``missing`` (lower, upper, member) ones (their cable pulled:
    both ports down), every host interface heard."""
    t = t or Topology()
    pulled = {(sw, f.ports_to(sw, n)[m]) for lo, up, m in missing for sw, n in ((lo, up), (up, lo))}
    for sw in f.switches():
        t.switch_up(f.dpids[sw], {p: (sw, p) not in pulled for n in f.ports[sw]
                                  for p in f.ports_to(sw, n)}, 0)
    for lo, up in f.links():
        for m, (a, b) in enumerate(zip(f.ports_to(lo, up), f.ports_to(up, lo))):
            if (lo, up, m) not in missing:
                t.link_seen(f.dpids[lo], a, f.dpids[up], b, 0)
                t.link_seen(f.dpids[up], b, f.dpids[lo], a, 0)
    for h, _q, ip, mac, leaf in f.interfaces():
        t.host_seen(f.dpids[leaf], f.port(leaf, h), mac, ip, 0)
    return t


DISCOVERED = {"leaf-spine": bundled_leaf_spine, "fat-tree": bundled_fat_tree,
              "two planes": lambda: Clos.leaf_spine(2, 3, 1, planes=2, bundle=3).wire(),
              "two fat-tree planes": lambda: _two_plane_fat_tree()}


def _two_plane_fat_tree() -> Clos:
    f = Clos.fat_tree(4, 1, planes=2)
    f.bundle_default["core"] = 2
    return f.wire()


@pytest.mark.parametrize("shape", sorted(DISCOVERED))
def test_discovery_gives_the_bundled_fabric_back(shape):
    f = DISCOVERED[shape]()
    # bundles of unequal size are used as seen and named (the fat-tree's two)
    odd = [("unequal_bundle", "l0"), ("unequal_bundle", "a0_0")] if shape == "fat-tree" else []
    gbps = f.link_gbps["leaf"]  # probes cannot measure it
    got, problems = recognise_planes(observe(f), link_gbps=gbps)
    assert [(p["kind"], p["switch"]) for p in problems] == odd
    assert got.to_dict() == f.to_dict()
    # again with the last recognition: nothing moves
    again, problems = recognise_planes(observe(f), previous=got)
    assert [(p["kind"], p["switch"]) for p in problems] == odd
    assert again.to_dict() == f.to_dict()


def test_a_member_lost_after_recognition_is_a_member_down():
    f = bundled_leaf_spine()
    first, _ = recognise_clos(observe(f))
    got, problems = recognise_clos(observe(f, missing={("l1", "s0", 1)}), previous=first)
    assert problems == [] and got.down == {("l1", "s0", 1)}
    assert got.ports == f.ports and got.alive_members("l1", "s0") == (0,)


def test_a_pair_with_fewer_cables_is_reported_and_used_as_seen():
    f = bundled_leaf_spine()
    got, problems = recognise_clos(observe(f, missing={("l1", "s0", 1)}))
    assert [(p["kind"], p["switch"]) for p in problems] == [("unequal_bundle", "l1")]
    assert "leaf l1 has 1 link(s) to spine s0 where most pairs of its tier have 2" \
        in problems[0]["detail"]
    assert got.bundle("l1", "s0") == 1 and got.bundle("l0", "s0") == 2
    assert got.ports["l1"]["s0"] == 1 and got.ports["s0"]["l1"] == 3


@pytest.mark.parametrize("shape", ["leaf-spine", "fat-tree"])
def test_the_controller_finds_bundles_with_no_file_and_pins_their_members(shape):
    """Zero configuration on the fake switches: LLDP over every member and ARP from every
    host give the bundled fabric; an all-to-all's packets follow their planned members."""
    from tests.test_zero_config import found_with_no_file
    f = FABRICS[shape]()
    svc, sw, _clock = found_with_no_file(f, 0.02)
    view = call(svc, "GET", "/v1/fabric")[1]
    assert view["declared"] == f.to_dict() and view["ready"]
    odd = ["unequal_bundle", "unequal_bundle"] if shape == "fat-tree" else []
    assert [p["kind"] for p in view["discovery"]["wiring_problems"]] == odd
    code, doc = call(svc, "POST", "/v1/jobs", all_to_all(f))
    assert code == 201, doc
    follow(f, sw, call(svc, "GET", "/v1/jobs/a")[1]["routes"])


def test_the_mininet_topology_builds_one_link_per_member_on_its_ports(monkeypatch):
    """``topologies/clos.py``'s ``bundles`` topology (no Mininet run): the Topo's links and
    ports are the wiring's, a bundle's members as parallel links; ``--bundle`` writes it."""
    pytest.importorskip("mininet.topo")
    import topologies.clos as tc
    f = tc.planes_fabric(1, 2, 3, 2, 0, bundle=2)
    topo = tc.BundlesTopo(2, 3, 2, 2)
    got = sorted((a, b, info["port1"], info["port2"]) if a in f.tier_of
                 else (b, a, info["port2"], info["port1"])
                 for a, b, info in topo.links(withInfo=True))
    want = sorted([(lo, up, p, q) for lo, up in f.links()
                   for p, q in zip(f.ports_to(lo, up), f.ports_to(up, lo))]
                  + [(leaf, h, f.port(leaf, h), 0) for h, (leaf,) in f.host_leaves.items()])
    assert got == want and len(got) == 2 * 3 * 2 + 6
    assert {s: topo.nodeInfo(s)["dpid"] for s in topo.switches()} == {
        s: f"{d:016x}" for s, d in f.dpids.items()}
    out = []
    monkeypatch.setattr(tc, "write_output", lambda text, *a, **k: out.append(text))
    assert tc.main(["--spines", "2", "--leaves", "3", "--hosts-per-leaf", "2",
                    "--bundle", "2"]) == 0
    assert Clos.from_dict(json.loads(out[0])).to_dict() == f.to_dict()


def _one_plane_bundled(q: int) -> Clos:
    """Two planes of 2 spines x 4 leaves, bundles of 2 in plane ``q`` only."""
    doc = Clos.leaf_spine(2, 4, 1, planes=2).to_dict()
    other = doc["planes"][q]
    doc["bundles"] = [[leaf, spine, 2] for leaf in other["leaves"] for spine in other["spines"]]
    return Clos.from_dict(doc).wire()


@pytest.mark.parametrize("q", [0, 1])
def test_a_bundled_plane_beside_one_of_single_links_comes_back(q):
    """The plane with single links is recognised alone as a two-tier fabric: its pairs count
    with one link each when the planes are joined, whichever plane comes first."""
    f = _one_plane_bundled(q)
    got, problems = recognise_planes(observe(f), link_gbps=f.link_gbps["leaf"])
    assert problems == []
    assert {link: got.bundle(*link) for link in got.links()} == \
        {link: f.bundle(*link) for link in f.links()}
    assert got.ports == f.ports and got.host_ips == f.host_ips


def test_a_core_bundle_size_on_two_tiers_bundles_nothing():
    """A leaf-spine declared with a core tier's bundle size has no bundle: sr mode serves it
    and its routes name no members."""
    doc = Clos.leaf_spine(2, 4, 1).wire().to_dict()
    doc["bundle"] = {"core": 2}
    f = Clos.from_dict(doc)
    assert not f.bundled
    _sw, svc = start(f)
    code, body = call(svc, "POST", "/v1/jobs", all_to_all(f, mode="sr"))
    assert code == 201, body
    assert all("members" not in r for r in body["routes"])


def test_imbalance_counts_a_bundle_per_alive_member():
    """A bundle of two carrying twice a single link's bytes is balanced; the same bytes over a
    bundle with one member down are not (its one alive member carries them all)."""
    doc = Clos.leaf_spine(2, 3, 2, link_gbps=0.02, bundle=2).to_dict()
    f = Clos.from_dict({**doc, "bundles": [["l0", "s0", 1]]}).wire()
    sw, svc = start(f)
    leaf = "l0"
    zero = {p: 0 for peer in f.ports[leaf] for p in f.ports_to(leaf, peer)}
    sent = {f.ports_to(leaf, "s0")[0]: 1000, **{p: 1000 for p in f.ports_to(leaf, "s1")}}
    svc.port_stats(f.dpids[leaf], zero, now=1.0)
    svc.port_stats(f.dpids[leaf], {**zero, **sent}, now=2.0)
    up = call(svc, "GET", "/v1/imbalance")[1]["window"]["uplinks"]["per_switch"]
    assert up[leaf] == pytest.approx(0.0)
    down = Clos.from_dict({**doc, "down": [["l0", "s1", 1]]}).wire()
    sw, svc = start(down)
    svc.port_stats(down.dpids[leaf], zero, now=1.0)
    svc.port_stats(down.dpids[leaf], {**zero, **{p: 1000 for p in down.ports_to(leaf, "s0")},
                                      down.ports_to(leaf, "s1")[0]: 2000}, now=2.0)
    up = call(svc, "GET", "/v1/imbalance")[1]["window"]["uplinks"]["per_switch"]
    assert up[leaf] == pytest.approx(1 / 3)  # per member 1000 and 2000: mean 1500, max 2000
