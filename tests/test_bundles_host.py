"""Host mode on fabrics with bundles (``enforcement.clos_hostmode``: member fields), against fake
OpenFlow tables: the source port the controller chooses codes the planned member of every bundle
hop above the bits that choose the hops, so an all-to-all's packets follow their paths and
members with no per-flow entry; a member down re-plans onto the alive ones and changes the
ports; a restart installs nothing; a fabric whose fields do not fit below bit 14 is refused by
name; without bundles the static entries are those of before."""
import hashlib

import pytest

from controller.enforcement.clos_hostmode import MemberBits, clos_host_static_rules, reached
from controller.enforcement.clos_rules import check_mode_on, clos_all_static
from controller.enforcement.hostmode import PORT_MAX, PORT_MIN, PortMap, choose_ports, map_key, port_changes
from controller.enforcement.openflow import COOKIE_STATIC
from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.intent import MemberPath
from controller.model.jobs import Flow
from controller.service.route_service import RouteService
from controller.service.store import StateStore
from emulation.harness.fake_switch import trace
from tests.helpers import FakeClock
from tests.test_bundles import bundled_fat_tree, bundled_leaf_spine, call, start
from tests.test_prefixes import forwarding
from tests.test_source_check import as_before


def core_bundled_fat_tree() -> Clos:
    """Every aggregation-core link a bundle of two, and one leaf link a bundle of three."""
    f = Clos.fat_tree(4, 2, link_gbps=0.02)
    f.bundle_default["core"] = 2
    f.bundles[("l2", "a1_0")] = 3
    return f.wire()


def two_plane_leaf_spine() -> Clos:
    return Clos.leaf_spine(2, 3, 2, planes=2, link_gbps=0.02, bundle=2).wire()


FABRICS = {"leaf-spine": bundled_leaf_spine, "fat-tree": bundled_fat_tree,
           "core-bundled fat-tree": core_bundled_fat_tree, "two-plane leaf-spine": two_plane_leaf_spine}


def all_to_all(f, jid="a", proto="tcp"):
    hosts = sorted(f.host_leaves)
    dport = 4791 if proto == "udp" else 80
    return {"id": jid, "mode": "host", "flows": [
        {"src": a, "dst": b, "bytes": 1e6, "proto": proto, "dport": dport}
        for a in hosts for b in hosts if a != b]}


def follow(f, sw, routes) -> set:
    """Every route's packet, sent with its source port, crosses its planned switches and
    members; returns the (switch, next switch, member) hops used."""
    used, planes = set(), [p.name for p in f.planes]
    for r in routes:
        members = []
        plane = planes.index(r["plane"]) if "plane" in r else 0
        path, got, _ = trace(f, sw, r["src"], r["dst"], proto=r["proto"], sport=r["sport"],
                             dport=r["dport"], plane=plane, members=members)
        assert got == r["dst"], r
        if "path" not in r:
            continue
        assert path == r["path"] and members == r["members"], (r, path, members)
        used |= {(a, b, m) for a, b, m in zip(path, path[1:], members)}
    return used


def per_flow_entries(sw) -> int:
    return sum(1 for t in sw.rules.values() for x in t.values() if x.cookie != COOKIE_STATIC)


@pytest.mark.parametrize("shape", sorted(FABRICS))
@pytest.mark.parametrize("proto", ["tcp", "udp"])
def test_an_all_to_all_follows_its_paths_and_members_with_no_per_flow_entry(shape, proto):
    f = FABRICS[shape]()
    sw, svc = start(f)
    code, doc = call(svc, "POST", "/v1/jobs", all_to_all(f, proto=proto))
    assert code == 201, doc
    routes = call(svc, "GET", "/v1/jobs/a")[1]["routes"]
    assert per_flow_entries(sw) == 0
    used = follow(f, sw, routes)
    ports = [(r["src"], r["sport"]) for r in routes]
    assert len(set(ports)) == len(ports) and all(PORT_MIN <= p <= PORT_MAX for _, p in ports)
    # every member of some bundle carries planned flows, up and down
    lo, up = {"leaf-spine": ("l0", "s0"), "fat-tree": ("a0_0", "c0_1"),
              "core-bundled fat-tree": ("l2", "a1_0"), "two-plane leaf-spine": ("l0_p1", "s1_p1")}[shape]
    size = f.bundle(lo, up)
    assert {m for a, b, m in used if (a, b) == (lo, up)} == set(range(size)), used
    assert {m for a, b, m in used if (a, b) == (up, lo)} == set(range(size)), used
    if shape == "core-bundled fat-tree":  # the core -> aggregation switch hop too
        assert {m for a, b, m in used if f.tier_of[a] == 2} == {0, 1}


def test_a_member_down_is_avoided_and_the_ports_change():
    f = bundled_leaf_spine()
    sw, svc = start(f)
    assert call(svc, "POST", "/v1/jobs", all_to_all(f))[0] == 201
    before = {(r["src"], r["dst"]): r for r in call(svc, "GET", "/v1/jobs/a")[1]["routes"]}
    assert any(r.get("members", [None])[0] == 1 and r["path"][:2] == ["l0", "s0"]
               for r in before.values())
    svc.port_changed(f.dpids["s0"], f.ports_to("s0", "l0")[1], False)  # member 1 of l0-s0
    after = call(svc, "GET", "/v1/jobs/a")[1]["routes"]
    used = follow(f, sw, after)
    assert ("l0", "s0", 1) not in used and ("s0", "l0", 1) not in used
    assert ("l0", "s0", 0) in used and per_flow_entries(sw) == 0
    moved = [c for e in svc.state.events for c in e.get("port_changes", [])]
    assert moved and all(c["sport"] != c["old_sport"] for c in moved)
    # a flow that kept its path but changed a member got a new port
    same_path = [c for c in moved if before[(c["src"], c["dst"])]["path"] == c["path"]]
    assert same_path and all(c["members"] != before[(c["src"], c["dst"])]["members"]
                             for c in same_path), moved
    # the member back: the planner may use it again, the packets still follow
    svc.port_changed(f.dpids["s0"], f.ports_to("s0", "l0")[1], True)
    follow(f, sw, call(svc, "GET", "/v1/jobs/a")[1]["routes"])


def test_a_restart_installs_nothing_and_keeps_the_ports(tmp_path):
    f = bundled_fat_tree()
    store = str(tmp_path / "state.json")
    sw, svc = start(f, store=StateStore(store))
    assert call(svc, "POST", "/v1/jobs", all_to_all(f))[0] == 201
    before = {d: dict(t) for d, t in sw.rules.items()}
    routes = call(svc, "GET", "/v1/routes")[1]
    clock = FakeClock(200.0)
    svc2 = RouteService(sw, f, store=StateStore(store), clock=clock, sleep=clock.sleep)
    for d in f.dpids.values():
        name = f.switch_of_dpid[d]
        svc2.switch_connected(d, {p: True for peer in f.ports[name] for p in f.ports_to(name, peer)})
    assert {d: dict(t) for d, t in sw.rules.items()} == before
    assert svc2.counters["rules_installed"] == 0
    again = call(svc2, "GET", "/v1/routes")[1]
    assert again == routes
    follow(f, sw, again["routes"])


def test_split_parts_in_host_mode_follow_their_members():
    from tests.test_clos_split_service import bundled, job, parts_of
    f = bundled()
    sw, svc = start(f)
    code, doc = call(svc, "POST", "/v1/jobs", job("bundled leaf-spine", mode="host"))
    assert code == 201, doc
    routes = call(svc, "GET", "/v1/jobs/s")[1]["routes"]
    assert any("split" in r for r in routes) and per_flow_entries(sw) == 0
    for r in routes:
        for part in parts_of(r):
            members = []
            path, got, _ = trace(f, sw, r["src"], r["dst"], sport=part["sport"], dport=r["dport"],
                                 members=members)
            assert got == r["dst"] and path == part["path"] and members == part["members"], part


def test_a_fabric_whose_member_fields_do_not_fit_is_refused_by_name():
    f = Clos.leaf_spine(2, 3, 2)
    f.bundles[("l0", "s0")] = 128  # 7 bits up and 7 down, above the leaf's bit: 15 bits
    with pytest.raises(InputError) as e:
        check_mode_on(f, "host")
    text = str(e.value)
    assert "mode host" in text and "15 in all" in text and "7, 0, 0, 7" in text, text
    f.bundles[("l0", "s0")] = 64  # 6 + 6 + 1 = 13 bits: served
    check_mode_on(f, "host")
    assert MemberBits(f).span == 1 << 2


def test_bits_layout_and_entry_counts():
    f = bundled_fat_tree()  # l0-a0_1: 2 links, a0_0-c0_1: 3 links
    b = MemberBits(f)
    assert (b.base, b.widths, b.shifts) == (2, (1, 2, 2, 1), (2, 3, 5, 7))
    count = {s: len(clos_host_static_rules(f, s)) for s in ("l0", "a0_0", "c0_1")}
    # leaf: 2 protocols x 2 buckets x 2 codes of field 0
    assert count["l0"] == 2 * 2 * 2
    # aggregation switch: the probe trap, 2 protocols x 2 codes of field 3 per leaf of its pod
    # (2 leaves: a prefix each, model.prefixes), and a class table: 2 protocols x 2 buckets x 4
    # codes, other IPv4, a prefix per other pod (3)
    assert count["a0_0"] == 1 + 2 * 2 * 2 + (2 * 2 * 4 + 1 + 3)
    # core: the probe trap, 2 protocols x 4 codes of field 2 per pod of the plane (4 prefixes)
    assert count["c0_1"] == 1 + 4 * 2 * 4


def test_a_probe_over_another_member_than_its_code_is_not_learned():
    f = bundled_fat_tree()
    agg = f.dpids["a0_1"]
    assert reached(f, "l0", agg, f.ports_to("a0_1", "l0")[0]) == ("a0_1",)
    assert reached(f, "l0", agg, f.ports_to("a0_1", "l0")[1]) is None
    core = f.dpids["c0_1"]
    assert reached(f, "l0", core, f.ports_to("c0_1", "a0_0")[0]) == ("a0_0", "c0_1")
    assert reached(f, "l0", core, f.ports_to("c0_1", "a0_0")[2]) is None
    down = f.with_down({("l0", "a0_1", 0)})  # code 0 falls back to the first alive member
    assert reached(down, "l0", agg, f.ports_to("a0_1", "l0")[1]) == ("a0_1",)


# sha256 of what the static and host-mode entries did as the builders wrote them before member
# fields (and leaf and pod prefixes) existed: per switch, each apart, the entries matching on
# more than the destination (a prefix counted as the per-host entries it stands for), and per
# table and host address the entry that takes it (``tests.test_prefixes.forwarding``), the
# leaves' source check taken out (``tests.test_source_check.as_before``)
UNBUNDLED = {
    "fat-tree": (lambda: Clos.fat_tree(4, 2).wire(), "008e1bdc8e46ab50"),
    "fat-tree k=6": (lambda: Clos.fat_tree(6, 1).wire(), "016b29235e36f688"),
    # (leaf-spine: b04d84cc7dd64054 with its spines at 0x30000 + j, their datapath ids before)
    "leaf-spine": (lambda: Clos.leaf_spine(3, 4, 2).wire(), "3f5d015366be2a91"),
    "two-plane": (lambda: Clos.fat_tree(4, 1, planes=2).wire(), "7e0f6ad96cde3a20"),
    "degraded": (lambda: Clos.fat_tree(4, 2).wire().with_down({("a1_0", "c0_0"), ("l0", "a0_0")}),
                 "eaa7f9511c13c8d3"),
}


@pytest.mark.parametrize("shape", sorted(UNBUNDLED))
def test_without_bundles_the_static_entries_are_unchanged(shape):
    make, digest = UNBUNDLED[shape]
    f = make()
    assert MemberBits(f).width == 0
    static = clos_all_static(f)

    def what(sw, rules):
        other, by_address = forwarding(f, sw, as_before(f, sw, rules))
        return sorted(map(repr, other)), sorted(by_address.items())
    out = repr([(sw, what(sw, static[f.dpids[sw]][0]), what(sw, clos_host_static_rules(f, sw)),
                 static[f.dpids[sw]][1]) for sw in f.switches()])
    assert hashlib.sha256(out.encode()).hexdigest()[:16] == digest


def test_the_port_codes_the_members_and_a_member_change_changes_it():
    f = bundled_leaf_spine()  # 2 spines: leaf bit 0, member fields 0 and 3 at bits 1 and 2
    flow = Flow("j", "h0_0", "h1_0", 1.0, 6, 0, 80)

    def parts(members):
        return ((MemberPath(("l0", "s1", "l1"), members), 1.0),)
    key = map_key(f, flow, "leaf", parts((0, 0))[0])
    maps = {key: PortMap({49152: ("s0",), 49153: ("s1",), 49160: ("s0",), 49161: ("s1",)}, 4)}
    first, missing = choose_ports(f, [("a", flow, parts((1, 0)))], maps)
    assert first == {"a": (49153 | 2,)} and not missing
    same, _ = choose_ports(f, [("a", flow, parts((1, 0)))], maps, previous=first)
    assert same == first
    moved, _ = choose_ports(f, [("a", flow, parts((1, 1)))], maps, previous=first)
    assert moved == {"a": (49153 | 2 | 4,)}
    assert port_changes(first, moved, set()) == [("a", 0, 49155, 49159)]
    # the port is unique per host: a taken port moves the part to the next probed one
    other, _ = choose_ports(f, [("a", flow, parts((1, 1)))], maps, taken=[("h0_0", 6, 49159)])
    assert other == {"a": (49161 | 6,)}


def test_bundles_too_wide_for_host_mode_leave_flow_and_sr_jobs_served():
    """Member fields past 14 bits (bundles of 16 at both tiers of a fat-tree: 4 x 4 bits
    above 3): host mode is a 400 naming the bits, while flow and sr jobs are planned and
    installed (the check of host mode ran on every POST and raised a 500)."""
    f = Clos.fat_tree(4, 1, link_gbps=0.02)
    f.bundle_default = {"leaf": 16, "core": 16}
    f = f.wire()
    sw, svc = start(f)
    for mode in ("flow", "sr"):
        code, doc = call(svc, "POST", "/v1/jobs", all_to_all(f, mode) | {"mode": mode})
        assert code == 201 and per_flow_entries(sw) > 0, doc
        assert call(svc, "DELETE", f"/v1/jobs/{mode}")[0] == 200
    code, doc = call(svc, "POST", "/v1/jobs", all_to_all(f, "host") | {"mode": "host"})
    assert code == 400 and "bits" in doc["error"] and "mode host" in doc["error"], doc
    assert not svc.jobs and per_flow_entries(sw) == 0
