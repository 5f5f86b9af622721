"""sr mode on Clos fabrics with bundles (``enforcement.clos_rules``, labels in
``enforcement.clos_labels``): the labels code the members of the hops after the push, so an
all-to-all's packets take their planned member on every hop through the fake switches, with
a stack of at most two labels; without bundles every label and entry is as before."""
import pytest

from controller.enforcement.clos_labels import LABEL_BASE, LABEL_SPACE, LabelSpace
from controller.enforcement.clos_rules import check_mode_on, clos_flow_rules, clos_static_rules
from controller.enforcement.openflow import COOKIE_STATIC, ETH_MPLS
from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.intent import MemberPath
from controller.model.jobs import Flow
from emulation.harness.fake_switch import trace
from tests.test_bundles import all_to_all, bundled_fat_tree, bundled_leaf_spine, call, start


def core_bundles_only() -> Clos:
    """A k = 4 fat-tree whose aggregation-core links are bundles of two, leaf links single."""
    f = Clos.fat_tree(4, 2, link_gbps=0.02)
    f.bundle_default["core"] = 2
    return f.wire()


def mixed_bundles() -> Clos:
    """Leaf links bundles of two, one leaf link of three, core links single but one of three
    and one of two: codes whose members some links do not have."""
    f = Clos.fat_tree(4, 2, link_gbps=0.02)
    f.bundle_default["leaf"] = 2
    f.bundles[("l5", "a2_1")] = 3
    f.bundles[("a1_0", "c0_0")] = 3
    f.bundles[("a3_1", "c1_1")] = 2
    return f.wire()


FABRICS = {"leaf-spine": bundled_leaf_spine, "fat-tree": bundled_fat_tree,
           "core bundles": core_bundles_only, "mixed": mixed_bundles}


def label_entries(rules):
    """Entries of labels (not a host port's drop of MPLS: ``source_check``)."""
    return [r for r in rules if r.match_dict().get("eth_type") == ETH_MPLS
            and "mpls_label" in r.match_dict()]


def follow_sr(f, sw, routes, buckets=(None, 0, 1, 2, 5)):
    """Every route's packet, whatever bucket the select groups would pick, crosses its
    planned switches and members and arrives with no label; the (switch, next, member) used."""
    used = set()
    for r in routes:
        if f.hosts[r["src"]] == f.hosts[r["dst"]]:
            continue
        for b in buckets:
            members = []
            path, reached, labels = trace(f, sw, r["src"], r["dst"], sport=r["sport"], bucket=b,
                                          members=members)
            assert reached == r["dst"] and labels == [], (r, path, reached, labels)
            assert path == r["path"] and members == r["members"], (r, b, path, members)
        used |= {(a, b, m) for a, b, m in zip(path, path[1:], members)}
    return used


def stacks(f, sw):
    """The label stacks that the per-flow entries push."""
    return [[a[2] for a in r.actions if a[:2] == ("set_field", "mpls_label")]
            for d in f.dpids.values() for r in sw.rules[d].values() if r.cookie != COOKIE_STATIC]


@pytest.mark.parametrize("shape", sorted(FABRICS))
def test_sr_packets_follow_their_planned_members(shape):
    f = FABRICS[shape]()
    check_mode_on(f, "sr")
    sw, svc = start(f)
    code, doc = call(svc, "POST", "/v1/jobs", all_to_all(f, mode="sr"))
    assert code == 201, doc
    routes = call(svc, "GET", "/v1/jobs/a")[1]["routes"]
    assert all("members" in r for r in routes if f.hosts[r["src"]] != f.hosts[r["dst"]])
    used = follow_sr(f, sw, routes)
    # several members of a bundle carry planned flows: the labels, not a hash, chose them
    for lo, up in f.links():
        n = f.bundle(lo, up)
        if n > 1 and shape != "mixed":
            assert {m for a, b, m in used if {a, b} == {lo, up}} == set(range(n)), (lo, up)
    assert any(m >= 1 for _, _, m in used)
    got = stacks(f, sw)
    assert got and all(1 <= len(s) <= 2 for s in got)
    if f.tiers == 3:
        assert any(len(s) == 2 for s in got)


@pytest.mark.parametrize("shape, port", [("leaf-spine", ("s0", "l0", 1)),
                                         ("fat-tree", ("c0_1", "a0_0", 1)),
                                         ("core bundles", ("a0_0", "c0_0", 0))])
def test_a_member_down_is_avoided_after_replanning(shape, port):
    f = FABRICS[shape]()
    sw, svc = start(f)
    assert call(svc, "POST", "/v1/jobs", all_to_all(f, mode="sr"))[0] == 201
    at, peer, m = port
    before = follow_sr(f, sw, call(svc, "GET", "/v1/jobs/a")[1]["routes"])
    assert {(at, peer, m), (peer, at, m)} & before  # the member carried planned flows
    svc.port_changed(f.dpids[at], f.ports_to(at, peer)[m], False)
    assert len(call(svc, "GET", "/v1/fabric")[1]["links_down"]) == 1
    used = follow_sr(f, sw, call(svc, "GET", "/v1/jobs/a")[1]["routes"])
    assert not {(at, peer, m), (peer, at, m)} & used
    assert {(a, b) for a, b, _ in used} >= {(at, peer), (peer, at)}  # the link still carries


def test_a_code_whose_member_is_down_falls_back_to_the_alive_members():
    """Before a re-plan, the static entries send a code naming a down member over the alive
    ones (the spine's entry for l0's labels, the core's for a0_0's pod)."""
    f = bundled_fat_tree()
    g = f.with_down({("a0_0", "c0_1", 2)})
    ls = LabelSpace(g)
    assert (ls.bl, ls.bc, ls.leaf_codes) == (2, 3, 6)
    core = {r.match_dict()["mpls_label"]: list(r.actions) for r in clos_static_rules(g, "c0_1")[0]
            if r.match_dict().get("mpls_label", 0) >= LABEL_BASE[0]}
    to = g.ports_to("c0_1", "a0_0")
    for c in range(ls.leaf_codes):
        down_m = ls.down_members(c)[0]
        want = [("output", to[down_m])] if down_m < 2 else [("group", 0x10000)]
        assert core[ls.of("l0", c)] == want, c
    groups = {x.group_id: x for x in clos_static_rules(g, "c0_1")[1]}
    assert [b[0][1] for b in groups[0x10000].buckets] == list(to[:2])
    # a code whose member the (single) link does not have: the plain output
    agg = {r.match_dict()["mpls_label"]: list(r.actions) for r in clos_static_rules(g, "a0_0")[0]
           if r.match_dict().get("mpls_label", 0) >= LABEL_BASE[0]}
    assert agg[ls.of("l0", ls.leaf_code(0, 1))] == [("output", g.port("a0_0", "l0"))]


def test_static_label_entries_grow_by_the_codes():
    """Leaves: C = Bl x Bc pop entries; an aggregation switch: C per leaf of its pod and Bc
    per core of its group; a core: Bc pop entries and C per leaf of the plane."""
    plain, f = Clos.fat_tree(4, 2, link_gbps=0.02).wire(), bundled_fat_tree()
    ls = LabelSpace(f)
    assert (ls.leaf_codes, ls.core_codes) == (6, 3)
    for s in f.switches():
        n0 = len(label_entries(clos_static_rules(plain, s)[0]))
        n = len(label_entries(clos_static_rules(f, s)[0]))
        tier = f.tier_of[s]
        want = {0: 6 * n0, 1: 2 * 6 + 2 * 3, 2: 3 + 8 * 6}[tier]
        assert (n0, n) == ({0: 1, 1: 2 + 2, 2: 1 + 8}[tier], want), s


@pytest.mark.parametrize("f", [Clos.fat_tree(4, 2).wire(), Clos.leaf_spine(2, 4, 2).wire(),
                               Clos.leaf_spine(2, 3, 1, planes=2).wire()], ids=["ft", "ls", "2p"])
def test_without_bundles_a_label_is_its_base_plus_the_switch_index(f):
    ls = LabelSpace(f)
    assert (ls.leaf_codes, ls.core_codes) == (1, 1)
    index = {}
    for s in f.tier_of:
        index[s] = sum(1 for x in index if f.tier_of[x] == f.tier_of[s])
    label = {s: LABEL_BASE[f.tier_of[s]] + i for s, i in index.items()}
    for s in f.switches():
        labels = {r.match_dict()["mpls_label"]: list(r.actions) for r in label_entries(
            clos_static_rules(f, s)[0])}
        tier = f.tier_of[s]
        if tier == 0:
            assert list(labels) == [label[s]] and labels[label[s]] == [("pop_mpls", 0x0800)]
        elif tier == 1:
            down = [x for x in f.neighbours(s) if f.tier_of.get(x) == 0]
            up = [x for x in f.neighbours(s) if f.tier_of.get(x) == 2]
            assert labels == {**{label[x]: [("output", f.port(s, x))] for x in down},
                              **{label[x]: [("output", f.port(s, x))] for x in up}}
        else:
            assert label[s] in labels and len(labels) == 1 + len(f.planes[f.plane_of[s]].leaves)
    p = f.planes[0]
    pod = p.pod_of_leaf
    paths = [[p.leaves[0], p.aggs[0][-1], p.leaves[1]]]
    if p.cores:
        paths.append([p.leaves[0], p.aggs[0][1], p.cores[1][0], p.aggs[pod[-1]][1], p.leaves[-1]])
    for path in paths:
        [r] = clos_flow_rules(f, Flow("j", f.hosts_on[path[0]][0], f.hosts_on[path[-1]][0], 1e6),
                              path, "sr", 1)
        pushed = [a[2] for a in r.actions if a[0] == "set_field"]
        assert pushed == [label[path[-1]]] + ([label[path[2]]] if len(path) == 5 else [])
        assert r.actions[-1] == ("output", f.port(path[0], path[1]))


def test_sr_labels_code_the_members_after_the_push():
    f = bundled_fat_tree()
    ls = LabelSpace(f)
    flow = Flow("j", "h0_0", "h4_0", 1e6)
    path = MemberPath(("l0", "a0_0", "c0_1", "a2_0", "l4"), (0, 2, 0, 0))
    [r] = clos_flow_rules(f, flow, path, "sr", 1)
    assert [a[2] for a in r.actions if a[0] == "set_field"] == [ls.of("l4", 0), ls.of("c0_1", 2)]
    path = MemberPath(("l0", "a0_1", "l1"), (1, 0))
    [r] = clos_flow_rules(f, Flow("j", "h0_0", "h1_0", 1e6), path, "sr", 1)
    assert r.actions[-1] == ("output", f.ports_to("l0", "a0_1")[1])
    with pytest.raises(InputError, match="needs 2 members"):
        clos_flow_rules(f, flow, MemberPath(("l0", "a0_1", "l1"), (1,)), "sr", 1)


def test_a_path_naming_no_members_takes_the_first_alive_member():
    f = bundled_leaf_spine()
    flow = Flow("j", "h0_0", "h1_0", 1e6)
    ls = LabelSpace(f)
    [r] = clos_flow_rules(f, flow, ["l0", "s0", "l1"], "sr", 1)
    assert list(r.actions[1:]) == [("set_field", "mpls_label", ls.of("l1", 0)),
                                   ("output", f.ports_to("l0", "s0")[0])]
    g = f.with_down({("l0", "s0", 0), ("l1", "s0", 0)})
    [r] = clos_flow_rules(g, flow, ["l0", "s0", "l1"], "sr", 1)
    assert list(r.actions[1:]) == [("set_field", "mpls_label", ls.of("l1", 1)),
                                   ("output", f.ports_to("l0", "s0")[1])]


def huge() -> Clos:
    """A k = 4 fat-tree of bundles of 112 links: 8 leaves x 112 x 112 codes > 100000."""
    f = Clos.fat_tree(4, 1, link_gbps=0.02)
    f.bundle_default.update(leaf=112, core=112)
    return f


def test_labels_overflowing_a_tier_refuse_sr_naming_the_fabric_size():
    f = huge()
    assert LabelSpace(f).leaf_codes * 8 > LABEL_SPACE
    with pytest.raises(InputError) as e:
        check_mode_on(f, "sr")
    assert all(w in str(e.value) for w in ("mode sr", "8 leaves", "12544 label codes", "112",
                                           "100352 labels", "100000")), str(e.value)
    check_mode_on(f, "flow")
    f = f.wire()
    with pytest.raises(InputError, match="8 leaves"):
        clos_flow_rules(f, Flow("j", "h0_0", "h1_0", 1e6), MemberPath(("l0", "a0_0", "l1"), (0, 0)),
                        "sr", 1)
    # flow mode still serves it: no switch holds label entries then
    assert not label_entries(clos_static_rules(f, "l0")[0])
    assert not label_entries(clos_static_rules(f, "a0_0")[0])
    _sw, svc = start(f)
    code, doc = call(svc, "POST", "/v1/jobs", {"id": "x", "mode": "sr", "flows": [
        {"src": "h0_0", "dst": "h1_0", "bytes": 1e6}]})
    assert code == 400 and "8 leaves" in doc["error"], doc
