"""Clos fabrics of every shape (model.clos, model.clospaths) and the path planners on them."""
import itertools
import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.errors import ConflictError, InputError
from controller.model.clos import Clos, load_fabric
from controller.model.clospaths import ClosProblem, link_loads, lower_bound
from controller.model.problem import Problem
from controller.planners.clos_auto import clos_auto, score
from controller.planners.clos_ecmp import clos_ecmp
from controller.planners.clos_greedy import clos_greedy
from controller.planners.clos_tiers import tier_colouring
from controller.planners.greedy import greedy
from tests.clos_checks import check_routes, flows_job, permutation
from tests.helpers import property_twins

PLANNERS = {"greedy": clos_greedy, "colouring": tier_colouring, "auto": clos_auto,
            "ecmp": clos_ecmp, "ecmp-polarised": lambda p: clos_ecmp(p, polarised=True)}


# ---- the document ---------------------------------------------------------------------------
def test_two_tier_documents_keep_their_meaning():
    doc = Clos.generate(4, 8, 2).as_leaf_spine().to_dict()
    loaded = load_fabric(doc)  # a Clos (one model, issue 37) whose two-tier model it reads as
    assert isinstance(loaded, Clos) and loaded.as_leaf_spine() == Clos.generate(4, 8, 2).as_leaf_spine()
    clos = Clos.from_dict(doc)
    assert clos.tiers == 2 and len(clos.planes) == 1
    assert clos.planes[0].aggs == [["s0", "s1", "s2", "s3"]]


def test_both_models_answer_the_shape_questions_alike():
    """Planes, tiers of switches, leaves by pod, switches and hosts on a leaf: the same
    answer from a leaf-spine's ``Fabric`` and its ``Clos``; a fat-tree's by pod and plane."""
    f = Clos.generate(3, 4, 2, wiring=True).as_leaf_spine()
    c = Clos.from_dict(f.to_dict())
    for m in (f, c):
        assert m.plane_count == 1 and m.leaves_by_pod() == [["l0", "l1", "l2", "l3"]]
        assert m.tier_of == {**dict.fromkeys(f.leaves, 0), **dict.fromkeys(f.spines, 1)}
        assert sorted(m.switches()) == sorted(f.spines + f.leaves)
        assert m.hosts_of_leaf["l2"] == ["h2_0", "h2_1"] and list(m.host_leaves) == list(f.hosts)
    with pytest.raises(IndexError):
        f.leaves_by_pod(1)
    t = Clos.fat_tree(4, 1, planes=2)
    assert t.plane_count == 2 and t.leaves_by_pod() == [
        [f"l{i}_p0", f"l{i + 1}_p0"] for i in range(0, 8, 2)]
    assert t.leaves_by_pod(1)[3] == ["l6_p1", "l7_p1"] and t.leaves == [
        leaf for q in (0, 1) for pod in t.leaves_by_pod(q) for leaf in pod]


@pytest.mark.parametrize("fabric", [Clos.fat_tree(4), Clos.fat_tree(6, hosts_per_leaf=2,
                                                                     planes=2),
                                    Clos.leaf_spine(4, 6, 2, planes=2, bundle=2)])
def test_documents_round_trip(fabric):
    doc = fabric.to_dict()
    again = load_fabric(doc)
    assert isinstance(again, Clos) and again.to_dict() == doc


def test_fat_tree_shape():
    f = Clos.fat_tree(8)
    p = f.planes[0]
    assert (len(p.pods), len(p.leaves), sum(map(len, p.aggs)), sum(map(len, p.cores)),
            len(f.host_leaves)) == (8, 32, 32, 16, 128)
    assert "8 pods" in f.summary()


def test_a_single_two_tier_plane_sums_up_as_its_leaf_spine():
    """One line for a leaf-spine on both models (plan documents' ``fabric``): spines, leaves,
    hosts and the spines with no link up; also where no two-tier model exists (bundles, a
    switch down), where a spine with a bundle member alive is up."""
    for f in (Clos.generate(4, 8, 2).as_leaf_spine(), Clos.generate(4, 8, 2, failed_spines=2).as_leaf_spine(),
              Clos.generate(2, 3, 1).as_leaf_spine().with_down({("l0", "s1"), ("l1", "s1"), ("l2", "s1")})):
        c = Clos.from_dict(f.to_dict())
        assert c.summary() == c.as_leaf_spine().summary() == f.summary()
    doc = {**Clos.leaf_spine(3, 2, 1, bundle=2).to_dict(), "down_switches": ["s2"],
           "down": [["l0", "s0", 0], ["l0", "s1", 0], ["l0", "s1", 1], ["l1", "s1"]]}
    c = Clos.from_dict(doc)
    assert c.as_leaf_spine() is None and c.summary() == "3 spines, 2 leaves, 2 hosts (2 spines failed)"
    assert Clos.leaf_spine(3, 2, 1, planes=2).summary().startswith("2 plane(s) x 2 tiers")


def _three_tier(**extra):
    doc = {"pods": {"p0": {"leaves": ["l0", "l1"], "aggs": ["a0", "a1"]},
                    "p1": {"leaves": ["l2", "l3"], "aggs": ["a2", "a3"]}},
           "cores": [["c0"], ["c1"]],
           "hosts": {"h0": "l0", "h1": "l1", "h2": "l2", "h3": "l3"}}
    doc.update(extra)
    return doc


@pytest.mark.parametrize("change, words", [
    ({"hosts": {"h0": "l0", "h1": "nowhere"}}, ["h1", "unknown leaf", "nowhere"]),
    ({"cores": [["c0"], ["c1"], ["c2"]]}, ["3 core groups"]),
    ({"cores": []}, ["not connected"]),
    ({"bundles": [["l0", "a0", 0]]}, ["l0-a0", "positive whole number"]),
    ({"bundles": [["l0", "a2", 2]]}, ["l0", "a2", "not linked"]),
    ({"down": [["l0", "c0"]]}, ["l0", "c0", "not linked"]),
    ({"down": [["l0", "a0", 3]]}, ["member 3", "l0-a0"]),
    ({"down_switches": ["zz"]}, ["zz"]),
    ({"link_gbps": {"leaf": -1}}, ["leaf", "positive"]),
    ({"planes": [{}]}, ["inside a plane"]),
])
def test_bad_documents_name_the_element(change, words):
    with pytest.raises(InputError) as e:
        Clos.from_dict(_three_tier(**change))
    for w in words:
        assert w in str(e.value)


def test_pods_of_unequal_width_name_the_pod():
    doc = _three_tier()
    doc["pods"]["p1"]["aggs"] = ["a2"]
    with pytest.raises(InputError, match="core group 1 does not reach pod p1"):
        Clos.from_dict(doc)


def test_a_host_on_no_leaf_of_a_plane():
    doc = Clos.leaf_spine(2, 2, 1, planes=2).to_dict()
    doc["hosts"]["h0_0"] = ["l0_p0"]
    with pytest.raises(InputError, match="h0_0 needs one leaf in each of the 2 planes"):
        Clos.from_dict(doc)
    doc["hosts"]["h0_0"] = ["l0_p0", "l0_p0"]
    with pytest.raises(InputError, match="h0_0 is attached to unknown leaf .* of plane plane1"):
        Clos.from_dict(doc)


def test_a_pod_cut_off_from_the_core_is_unroutable_with_the_pair_named():
    doc = _three_tier(down_switches=["c0", "c1"])
    fab = Clos.from_dict(doc)
    job = flows_job(fab, [("h0", "h2")])
    with pytest.raises(ConflictError, match="no alive path from h0 to h2"):
        ClosProblem.build(fab, [job])
    p = ClosProblem.build(fab, [job, flows_job(fab, [("h0", "h1")], "k")],
                          skip_unroutable=True)
    assert len(p.unroutable) == 1 and len(p) == 1  # h0 -> h1 stays inside the pod


# ---- routes ---------------------------------------------------------------------------------
def every_planner_routes_alive_up_down_paths(k, planes, failures, seed):
    rnd = random.Random(seed)
    fab = Clos.fat_tree(k, planes=planes)
    doc = fab.to_dict()
    links = [(l, a) for p in fab.planes for i, l in enumerate(p.leaves)
             for a in p.aggs[p.pod_of_leaf[i]]]
    links += [(p.aggs[pod][g], c) for p in fab.planes for pod in range(len(p.pods))
              for g, grp in enumerate(p.cores) for c in grp]
    doc["down"] = [list(x) for x in rnd.sample(links, failures)]
    fab = Clos.from_dict(doc)
    hosts = list(fab.host_leaves)
    pairs = [(rnd.choice(hosts), rnd.choice(hosts)) for _ in range(3 * len(hosts))]
    problem = ClosProblem.build(fab, [flows_job(fab, pairs)], skip_unroutable=True)
    for name, planner in PLANNERS.items():
        check_routes(problem, planner(problem))
    assert score(problem, clos_auto(problem))[0] >= lower_bound(problem) - 1e-9


# 8 examples in the fast tier, the 25 of before in the slow one (issue 60)
test_every_planner_routes_alive_up_down_paths, test_every_planner_routes_alive_up_down_paths_in_full = \
    property_twins((st.sampled_from([4, 6, 8]), st.integers(1, 2), st.integers(0, 3),
                    st.integers(0, 10**6)), 8, 25, deadline=None)(
        every_planner_routes_alive_up_down_paths)


def test_bundles_spread_over_members():
    fab = Clos.leaf_spine(2, 2, 8, bundle=2)
    hosts = list(fab.host_leaves)
    job = flows_job(fab, zip(hosts[:8], hosts[8:]))  # 8 flows leaf 0 -> leaf 1
    p = ClosProblem.build(fab, [job])
    r = clos_auto(p)
    check_routes(p, r)
    assert score(p, r)[0] == lower_bound(p) == 2.0  # 8 flows over 2 spines x 2 links


def test_faster_core_links_carry_more_flows_per_link():
    doc = _three_tier(link_gbps={"host": 100, "leaf": 100, "core": 200})
    doc["hosts"] = {f"h{i}_{m}": f"l{i}" for i in range(4) for m in range(2)}
    fab = Clos.from_dict(doc)
    pairs = [(f"h{i}_{m}", f"h{i + 2}_{m}") for i in range(2) for m in range(2)]
    p = ClosProblem.build(fab, [flows_job(fab, pairs)])
    r = clos_auto(p)
    loads = link_loads(p, r)
    core = p.links.tier == 2
    assert (loads * p.links.units)[core].max() == 2  # 4 flows between the pods, 2 cores
    assert loads[core].max() == 1.0 == score(p, r)[0] == lower_bound(p)  # 2 flows on 200G


# ---- exactness and the baselines --------------------------------------------------------------
@pytest.mark.parametrize("k", [4, 8, 16])
def test_auto_is_optimal_on_fat_tree_permutations(k):
    fab = Clos.fat_tree(k)
    for seed in range(3):
        p = ClosProblem.build(fab, permutation(fab, seed))
        r = clos_auto(p)
        assert r.info["optimal"] and score(p, r)[0] == lower_bound(p) == 1.0


def test_auto_is_optimal_on_two_plane_leaf_spines():
    fab = Clos.leaf_spine(4, 8, 4, planes=2)
    for seed in range(3):
        p = ClosProblem.build(fab, permutation(fab, seed))
        r = clos_auto(p)
        assert r.info["optimal"] and score(p, r)[0] == lower_bound(p)
        used = np.bincount(r.plane, minlength=2)
        assert abs(used[0] - used[1]) <= len(fab.host_leaves) // 2


def test_polarised_ecmp_reaches_one_core_per_group_slot():
    fab = Clos.fat_tree(8)
    p = ClosProblem.build(fab, permutation(fab, 1))
    polar, indep = clos_ecmp(p, polarised=True), clos_ecmp(p)
    inter = [i for i in range(len(p)) if len(polar.path[i]) == 4]
    per_slot = lambda r: len({r.middle[i] for i in inter})
    assert per_slot(polar) <= 4 < per_slot(indep)  # A = 4 slots, (k/2)^2 = 16 cores
    assert score(p, polar)[0] > score(p, indep)[0] > score(p, clos_auto(p))[0]


def test_greedy_matches_the_two_tier_greedy():
    for seed in range(10):
        rnd = random.Random(seed)
        fab = Clos.generate(rnd.randint(2, 6), rnd.randint(2, 8), rnd.randint(1, 4),
                              failed_spines=rnd.randint(0, 1)).as_leaf_spine()
        hosts = list(fab.hosts)
        pairs = [(rnd.choice(hosts), rnd.choice(hosts)) for _ in range(40)]
        spines = greedy(Problem.build(fab, [flows_job(fab, pairs)])).spines()
        clos = Clos.from_dict(fab.to_dict())
        assert clos_greedy(ClosProblem.build(clos, [flows_job(clos, pairs)])).middle == spines


# ---- the commands -----------------------------------------------------------------------------
def _run(*args):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "controller", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_fabric_command_writes_fat_trees_and_planes(tmp_path):
    out = tmp_path / "ft.json"
    r = _run("fabric", "--fat-tree", "4", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "3 tiers" in r.stdout and "4 pods, 16 hosts" in r.stdout
    assert Clos.from_dict(json.loads(out.read_text())).to_dict() == Clos.fat_tree(4).to_dict()
    r = _run("fabric", "--spines", "2", "--leaves", "3", "--hosts-per-leaf", "1", "--planes", "2")
    doc = json.loads(r.stdout)
    assert [len(p["leaves"]) for p in doc["planes"]] == [3, 3]
    assert doc["hosts"]["h0_0"] == ["l0_p0", "l0_p1"]
    r = _run("fabric", "--fat-tree", "5")
    assert r.returncode == 2 and "even k" in r.stderr


@pytest.mark.slow
def test_plan_and_compare_on_a_fat_tree(tmp_path):
    fab = tmp_path / "ft.json"
    _run("fabric", "--fat-tree", "4", "--out", str(fab))
    jobs = tmp_path / "jobs.json"
    ranks = ["h0_0", "h1_0", "h4_0", "h6_0", "h2_1", "h3_1"]
    jobs.write_text(json.dumps({"jobs": [{"id": "r", "collective": "ring_allreduce",
                                          "ranks": ranks, "bytes": 1e8}]}))
    r = _run("plan", "--fabric", str(fab), "--jobs", str(jobs), "--algorithm", "auto")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["max_link_load"] == plan["lower_bound"] == 1.0 and plan["gap"] == 0
    paths = [x["path"] for x in plan["routes"]]
    assert len(paths) == 6 and all(len(p) in (3, 5) for p in paths)
    assert paths[0][0] == "l0" and paths[0][1].startswith("a0_") and paths[0][2] == "l1"
    assert paths[1][0] == "l1" and paths[1][2].startswith("c") and paths[1][4] == "l4"
    r = _run("compare", "--fabric", str(fab), "--jobs", str(jobs), "--json")
    rows = {x["algorithm"]: x for x in json.loads(r.stdout)}
    assert set(rows) >= {"auto", "greedy", "edge-coloring", "ecmp", "ecmp-polarised", "ilp"}
    r = _run("plan", "--fabric", str(fab), "--jobs", str(jobs), "--algorithm", "no-such")
    assert r.returncode == 2 and "unknown algorithm 'no-such'" in r.stderr
    doc = json.loads(fab.read_text())
    doc["cores"][1] = []
    fab.write_text(json.dumps(doc))
    r = _run("plan", "--fabric", str(fab), "--jobs", str(jobs))
    assert r.returncode == 2 and "core group 1" in r.stderr


# ---- the vectorised paths against flow-by-flow references -----------------------------------
def _random_fabric(rnd, k, planes, failures, bundle):
    fab = Clos.fat_tree(k, planes=planes) if k else Clos.leaf_spine(3, 5, 2, planes=planes)
    doc = fab.to_dict()
    if bundle > 1:
        doc["bundle"] = {"leaf": bundle, "core": bundle}
        doc["link_gbps"] = {"host": 100, "leaf": 100, "core": 250}
    fab = Clos.from_dict(doc)
    links = [[l, a, m] for p in fab.planes for i, l in enumerate(p.leaves)
             for a in p.aggs[p.pod_of_leaf[i]] for m in range(bundle)]
    links += [[p.aggs[pod][g], c] for p in fab.planes for pod in range(len(p.pods))
              for g, grp in enumerate(p.cores) for c in grp]
    doc["down"] = rnd.sample(links, failures)
    switches = [a for p in fab.planes for pod in p.aggs for a in pod]
    if rnd.random() < 0.3:
        doc["down_switches"] = [rnd.choice(switches)]
    return Clos.from_dict(doc)


def _naive_usable(problem, i, q):
    L = problem.links
    return np.all([L.alive[L.sentinel(h)].any(axis=1) for h in problem.hops(i, q)], axis=0)


def _naive_greedy(problem):
    """The greedy rule flow by flow: min over members, max over hops, argmin over options
    of (busiest link with the host links, busiest fabric link)."""
    from controller.planners.clos_loads import group_order
    L = problem.links
    load = np.where(L.alive, 0.0, np.inf)
    step = np.append(1.0 / L.units, 1.0)
    P = len(problem.fabric.planes)
    out = {}
    for i in group_order(problem):
        best = ((np.inf, np.inf), -1, -1, ())
        for q in range(P):
            ids = [L.sentinel(h) for h in problem.hops(i, q)]
            fab = np.max([(load[h] + step[h]).min(axis=1) for h in ids], axis=0)
            host = -np.inf
            if P > 1:
                up, down = problem.host_links(i, q)
                host = max(load[up] + step[up], load[down] + step[down])
            for m in range(len(fab)):
                if (max(fab[m], host), fab[m]) < best[0]:
                    path = tuple(int(h[m][np.argmin(load[h[m]] + step[h[m]])]) for h in ids)
                    best = ((max(fab[m], host), fab[m]), q, m, path)
        _, q, m, path = best
        out[i] = (q, m, path)
        ids = list(path) + (list(problem.host_links(i, q)) if P > 1 else [])
        load[ids] += step[ids]
    return [out[i] for i in range(len(problem))]


def _naive_ecmp(problem, salt, polarised):
    from controller.planners.ecmp import flow_hash
    L = problem.links
    out = []
    for i, pos in enumerate(problem.inter):
        f = problem.flows[pos]
        key = (f.src, f.dst, f.proto, f.sport, f.dport)
        h = {t: flow_hash(*key, salt if polarised else f"{salt}/{t}")
             for t in ("plane", "leaf", "aggregation", "member")}
        planes = [q for q in range(len(problem.fabric.planes)) if _naive_usable(problem, i, q).any()]
        q = planes[h["plane"] % len(planes)]
        ok = _naive_usable(problem, i, q)
        a, b, p, s = problem.ends(i, q)
        if p == s:
            slots = np.flatnonzero(ok)
            m = int(slots[h["leaf"] % len(slots)])
        else:
            groups = L.group_of_core[q]
            slots = np.unique(groups[ok])
            g = slots[h["leaf"] % len(slots)]
            cores = np.flatnonzero(ok & (groups == g))
            m = int(cores[h["aggregation"] % len(cores)])
        path = []
        for hop in problem.hops(i, q):
            alive = [int(x) for x in hop[m] if x >= 0 and L.alive[x]]
            path.append(alive[h["member"] % len(alive)])
        out.append((q, m, tuple(path)))
    return out


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([0, 4, 6]), st.integers(1, 2), st.integers(0, 6), st.sampled_from([1, 2]),
       st.integers(0, 10**6))
def test_batch_tables_and_planners_match_flow_by_flow(k, planes, failures, bundle, seed):
    rnd = random.Random(seed)
    fab = _random_fabric(rnd, k, planes, failures, bundle)
    hosts = list(fab.host_leaves)
    pairs = [(rnd.choice(hosts), rnd.choice(hosts)) for _ in range(2 * len(hosts))]
    p = ClosProblem.build(fab, [flows_job(fab, pairs)], skip_unroutable=True)
    for q in range(planes):
        naive = [_naive_usable(p, i, q) for i in range(len(p))]
        assert p.usable_any(q).tolist() == [bool(u.any()) for u in naive]
        for i in range(len(p)):
            assert (p.options(i, q)[1] == naive[i]).all()
            m = np.arange(len(naive[i]))
            assert (p.usable_at(q, np.full(len(m), i), m) == naive[i]).all()
    for f in (p.flows[x] for x in p.unroutable):  # no alive path in any plane
        one = ClosProblem.build(fab, [flows_job(fab, [(f.src, f.dst)])], skip_unroutable=True)
        assert len(one) == 0 and len(one.unroutable) == 1
    r = clos_greedy(p)
    assert list(zip(r.plane, r.middle, r.path)) == _naive_greedy(p)
    for polarised in (False, True):
        e = clos_ecmp(p, salt=seed % 3, polarised=polarised)
        assert list(zip(e.plane, e.middle, e.path)) == _naive_ecmp(p, seed % 3, polarised)


def test_greedy_on_planes_spreads_the_fabric_when_host_links_are_the_busiest():
    """An all-to-all over two planes: every option's busiest link is a host link (3 flows a
    host over 2 interfaces), so the fabric must break the tie; taking the first spine of
    each plane put 2 flows on links that could each carry 1."""
    fab = Clos.leaf_spine(2, 4, 1, planes=2).wire()
    p = ClosProblem.build(fab, [flows_job(fab, itertools.permutations(fab.host_leaves, 2))])
    loads = link_loads(p, clos_greedy(p))[:p.links.count]
    assert loads[p.links.tier > 0].max() == 1.0


def test_greedy_fast_path_makes_the_generic_choices():
    from controller.planners.clos_greedy import place
    from controller.planners.clos_loads import ClosLoads, empty_routing, group_order
    for fab in (Clos.fat_tree(8), Clos.leaf_spine(4, 6, 3)):
        p = ClosProblem.build(fab, permutation(fab, 3) + permutation(fab, 4))
        loads, generic = ClosLoads(p), empty_routing(len(p))
        for i in group_order(p):
            place(loads, generic, i)
        fast = clos_greedy(p)
        assert (fast.plane, fast.middle, fast.path) == (generic.plane, generic.middle,
                                                        generic.path)


@pytest.mark.slow
def test_fabric_command_reads_a_host_table(tmp_path):
    table = tmp_path / "hosts.csv"
    table.write_text("ip,DSW,PSW,ASW\naa11,G,P1,S1\nbb22,G,P1,S2\ncc33,G,P2,S1\n")
    out = tmp_path / "f.json"
    r = _run("fabric", "--host-table", str(table), "--aggs-per-pod", "2",
             "--cores-per-group", "1", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "3 leaves, 4 aggregation switches, 2 cores in 2 groups, 2 pods, 3 hosts" in r.stdout
    assert sorted(Clos.from_dict(json.loads(out.read_text())).hosts) == ["haa11", "hbb22", "hcc33"]
    r = _run("fabric", "--host-table", str(tmp_path / "missing.csv"))
    assert r.returncode == 2 and "missing.csv: No such file" in r.stderr


def test_two_planes_are_wired_with_one_address_per_host_and_plane():
    """``Clos.wire`` on two planes: each host an address and a MAC per plane, the same
    host part in each plane's 10.<16q>.0.0/12; the document round-trips and ``interfaces``
    gives the host and plane of every address. One plane is written as before (strings)."""
    fab = Clos.leaf_spine(2, 3, 2, planes=2).wire()
    assert fab.host_ips["h1_0"] == ("10.0.1.1", "10.16.1.1")
    assert fab.host_macs["h1_0"] == ("02:00:00:00:01:01", "02:00:01:00:01:01")
    assert fab.host_ip["h1_0"] == fab.ip_of("h1_0", 0) and fab.ip_of("h1_0", 1) == "10.16.1.1"
    owner = {ip: (h, q) for h, q, ip, _, _ in fab.interfaces()}
    assert owner["10.16.2.2"] == ("h2_1", 1) and "10.32.0.1" not in owner and len(owner) == 12
    doc = fab.to_dict()
    assert doc["host_ip"]["h0_1"] == ["10.0.0.2", "10.16.0.2"]
    again = load_fabric(json.loads(json.dumps(doc)))
    again.check_wiring()
    assert again.host_ips == fab.host_ips and again.host_macs == fab.host_macs
    one = Clos.fat_tree(4).wire()
    assert all(isinstance(a, str) and a.startswith("10.0.")
               for a in one.to_dict()["host_ip"].values())
    assert all(one.host_ips[h] == (a,) for h, a in one.host_ip.items())


@pytest.mark.parametrize("change, message", [
    (lambda d: d["host_ip"].update(h0_0="10.0.0.1"), r"h0_0 needs one IPv4 address per "
                                                     r"plane \(2\), got '10.0.0.1'"),
    (lambda d: d["host_mac"].update(h0_0=["02:00:00:00:00:01"]), "h0_0 needs one MAC"),
    (lambda d: d["host_ip"].update(h0_0=["10.0.0.1", "10.0.1.1"]),
     "host h0_0 plane 1 and host h1_0 plane 0 share the IPv4 address 10.0.1.1"),
    (lambda d: d["host_ip"].update(h0_0=["10.0.0.1", "10.16.0.x"]),
     "host h0_0 plane 1 has a bad IPv4 address '10.16.0.x'"),
    (lambda d: d["host_mac"].update(h1_0=["02:00:00:00:01:01", "02-00-01-00-01-01"]),
     "host h1_0 plane 1 has a bad MAC address '02-00-01-00-01-01'"),
])
def test_wiring_of_two_planes_names_the_host_and_the_plane(change, message):
    doc = Clos.leaf_spine(2, 2, 1, planes=2).wire().to_dict()
    change(doc)
    with pytest.raises(InputError, match=message):
        load_fabric(doc).check_wiring()


def test_one_plane_takes_one_address_per_host_not_a_list():
    doc = Clos.fat_tree(4).wire().to_dict()
    doc["host_ip"]["h0_0"] = [doc["host_ip"]["h0_0"]]
    with pytest.raises(InputError, match=r"h0_0 needs one IPv4 address \(a string\) in 'host_ip'"):
        load_fabric(doc).check_wiring()


# ---- edge-coloring: one planner on every shape (issue 60) -----------------------------------
def colouring_instances(count: int = 24):
    """Leaf-spines (a spine and links down), fat-trees and two-plane leaf-spines with links
    down, random pairs between their hosts."""
    out = []
    for seed in range(count):
        rnd = random.Random(seed)
        fab = [Clos.generate(rnd.randint(2, 6), rnd.randint(3, 8), 3,
                             failed_spines=rnd.choice([0, 1])),
               Clos.fat_tree(4), Clos.leaf_spine(3, 4, 2, planes=2)][seed % 3]
        fab = fab.with_down(fab.down | set(rnd.sample(fab.links(), rnd.randint(0, 4))))
        hosts = sorted(fab.hosts)
        pairs = [tuple(rnd.sample(hosts, 2)) for _ in range(3 * len(hosts))]
        out.append((fab, ClosProblem.build(fab, [flows_job(fab, pairs)], skip_unroutable=True)))
    return out


def test_edge_coloring_is_never_behind_the_colourings_it_replaced():
    """The name's planner (``clos_tiers.edge_colouring``) against the two-tier Koenig
    colouring (its Koenig candidate on a single plane, flow for flow) and the equitable
    colouring the name ran on Clos fabrics: never a higher (max, links at max) than the
    first, never a higher max than the second."""
    from controller.planners.clos_tiers import edge_colouring
    from controller.planners.edge_coloring import edge_coloring
    for fab, p in colouring_instances():
        new = score(p, edge_colouring(p))
        assert new[0] <= score(p, tier_colouring(p))[0]
        two = fab.as_leaf_spine()
        if two is not None:
            koenig = tier_colouring(p, "koenig", alive=True)
            old = edge_coloring(Problem.build(two, p.jobs, skip_unroutable=True)).spines()
            assert koenig.middle == old and koenig.plane == [0] * len(old)
            assert new <= score(p, koenig)
