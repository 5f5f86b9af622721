"""The load fields of the plan documents on both models (issue 37: one set of fields): ``gap``,
``max_load_by_tier``, ``load_histogram`` and ``imbalance`` of a Clos plan checked against a
computation of their own over link names and ``Clos.neighbours`` (as ``GET /v1/imbalance``
groups the measured bytes), on fat-trees, planes, bundles and failures; the same fields of a
two-tier plan by their definition on a leaf-spine. The two models agreeing on a leaf-spine:
tests/test_parity.py."""
import json
import random
from collections import Counter, defaultdict

import numpy as np
import pytest

from controller.model.clos import Clos
from controller.model.jobs import parse_job
from controller.model.loads import AT_MAX_TOL, links_at_max
from controller.planners.clos_routes import installed_clos_plan
from controller.planners.clos_split_routing import parts_of, split_link_loads, split_score
from controller.planners.plan import make_plan
from tests.clos_checks import permutation


def fabrics() -> dict[str, Clos]:
    ft = Clos.fat_tree(4, hosts_per_leaf=2)
    bundled = Clos.leaf_spine(2, 3, 2, bundle=2).to_dict()
    fast_core = Clos.fat_tree(4, hosts_per_leaf=2, link_gbps=100.0).to_dict()
    return {
        "fat-tree": ft,
        "fat-tree-down": Clos.from_dict({**ft.to_dict(), "down": [["l0", "a0_1"],
                                                                  ["a1_0", "c0_1"]],
                                         "down_switches": ["c1_0"]}),
        "fat-tree-fast-core": Clos.from_dict({**fast_core,
                                              "link_gbps": {"host": 100, "leaf": 100,
                                                            "core": 400}}),
        "fat-tree-2p": Clos.fat_tree(4, hosts_per_leaf=1, planes=2),
        "leaf-spine-bundles-down": Clos.from_dict({**bundled, "down": [["l0", "s1", 1]],
                                                   "bundles": [["l2", "s0", 3]]}),
        "leaf-spine-2p": Clos.leaf_spine(3, 4, 2, planes=2),
    }


def jobs(fabric: Clos, seed: int) -> list:
    """A permutation and a ring of random sizes, so that bytes and flows differ."""
    hosts = sorted(fabric.host_leaves)
    random.Random(seed).shuffle(hosts)
    ring = parse_job({"id": "r", "collective": "ring_allreduce", "ranks": hosts[:6],
                      "bytes": 3e8}, fabric)
    return permutation(fabric, seed) + [ring]


def expected(plan) -> dict:
    """The four fields computed from the routing by link names and the fabric's neighbours."""
    p, r, f = plan.problem, plan.routing, plan.problem.fabric
    loads = split_link_loads(p, r)
    names = p.links.names
    by_tier: dict[str, float] = {}
    for x, name in enumerate(names):
        lower = name.partition("#")[0].split("->")
        if all(s in f.tier_of for s in lower):
            tier = "core" if max(f.tier_of[s] for s in lower) == 2 else "leaf"
            by_tier[tier] = max(by_tier.get(tier, 0.0), float(loads[x]))
    fabric_loads = [float(loads[x]) for x, name in enumerate(names)
                    if all(s in f.tier_of for s in name.partition("#")[0].split("->"))]
    histogram = Counter(round(v, 6) for v in fabric_loads if v > 1e-9)
    totals = {w: defaultdict(float) for w in ("bytes", "flows")}
    for pos, parts in zip(p.inter, parts_of(r)):
        for _, _, path, share in parts:
            for x in path:
                a, b = names[x].partition("#")[0].split("->")
                totals["bytes"][a, b] += share * p.flows[pos].bytes
                totals["flows"][a, b] += share
    imbalance = {}
    for w, total in totals.items():
        imbalance[w] = {}
        for direction in ("uplinks", "downlinks"):
            values, weights = [], []
            for s in f.switches():
                ups = [u for u in f.neighbours(s) if f.tier_of.get(u, -1) > f.tier_of[s]]
                per = [(total[(s, u) if direction == "uplinks" else (u, s)]
                        / len(f.alive_members(s, u))) for u in ups if f.alive_members(s, u)]
                if not ups:
                    continue
                mean = sum(per) / len(per) if per else 0.0
                values.append((max(per) - mean) / mean if mean > 0 else 0.0)
                weights.append(sum(per) if mean > 0 else 0.0)
            imbalance[w][direction] = {
                "max": max(values),
                "mean": sum(v * x for v, x in zip(values, weights)) / sum(weights)
                if sum(weights) else 0.0}
    return {"gap": max(plan.to_dict()["max_link_load"] - plan.to_dict()["lower_bound"], 0.0),
            "max_load_by_tier": by_tier,
            "load_histogram": {str(k): v for k, v in sorted(histogram.items(), reverse=True)},
            "imbalance": imbalance}


@pytest.mark.parametrize("algorithm", ["greedy", "ecmp", "split"])
@pytest.mark.parametrize("name", list(fabrics()))
def test_clos_plan_fields_by_their_definition(name, algorithm):
    fabric = fabrics()[name]
    plan = make_plan(fabric, jobs(fabric, 3), algorithm)
    doc, want = plan.to_dict(), expected(plan)
    assert doc["gap"] == pytest.approx(want["gap"], abs=1e-9)
    assert doc["max_load_by_tier"] == pytest.approx(want["max_load_by_tier"])
    assert max(doc["max_load_by_tier"].values()) == doc["max_link_load"]
    assert set(doc["max_load_by_tier"]) == ({"leaf", "core"} if fabric.tiers == 3 else {"leaf"})
    assert doc["load_histogram"] == want["load_histogram"]
    assert max(map(float, doc["load_histogram"])) == pytest.approx(doc["max_link_load"])
    top = doc["load_histogram"][max(doc["load_histogram"], key=float)]
    # split too: links_at_max (within loads.AT_MAX_TOL, relative) counts the loads a few 1e-9
    # apart that the LP leaves at its max, as the histogram's 1e-6 rounding joins them
    assert top == doc["links_at_max"]
    for w in ("bytes", "flows"):
        for d in ("uplinks", "downlinks"):
            assert doc["imbalance"][w][d] == pytest.approx(want["imbalance"][w][d]), (w, d)
    assert doc["fabric"] == fabric.summary()


def test_aggregation_switches_count_in_the_imbalance():
    """Two flows from l0 of a fat-tree to two other pods: l0 puts one on each uplink (even),
    each of its aggregation switches one on one of its two uplinks (imbalance 1)."""
    fabric = Clos.fat_tree(4, hosts_per_leaf=2)
    job = parse_job({"id": "j", "flows": [{"src": "h0_0", "dst": "h4_0", "bytes": 1e6},
                                          {"src": "h0_1", "dst": "h6_0", "bytes": 1e6}]}, fabric)
    plan = make_plan(fabric, [job], "greedy")
    assert sorted(p[1] for p in (plan.problem.middle_name(i, 0, m)
                                 for i, m in enumerate(plan.routing.middle))) == ["a0_0", "a0_1"]
    doc = plan.to_dict()
    # l0: 0 with weight 2; a0_0 and a0_1: 1 with weight 1 each
    assert doc["imbalance"]["flows"]["uplinks"] == {"max": 1.0, "mean": 0.5}
    assert doc["max_load_by_tier"] == {"leaf": 1.0, "core": 1.0}
    assert doc["load_histogram"] == {"1.0": 8} and doc["links_at_max"] == 8


def test_a_bundle_counts_per_alive_member():
    """Two flows from l0 to l1, the l0-s0 link a bundle of two: the greedy puts one flow on
    each spine. With a member of the bundle down, one flow per alive member on each uplink:
    even; with both up, s0's flow is half a flow per member: (1 - 0.75) / 0.75."""
    doc = {**Clos.leaf_spine(2, 2, 2).to_dict(), "bundles": [["l0", "s0", 2]]}
    pairs = [{"src": "h0_0", "dst": "h1_0", "bytes": 1e6},
             {"src": "h0_1", "dst": "h1_1", "bytes": 1e6}]
    for down, value in (([["l0", "s0", 1]], 0.0), ([], 1 / 3)):
        fabric = Clos.from_dict({**doc, "down": down})
        plan = make_plan(fabric, [parse_job({"id": "j", "flows": pairs}, fabric)],
                              "greedy")
        assert sorted(plan.routing.middle) == [0, 1]
        imb = plan.to_dict()["imbalance"]["flows"]["uplinks"]
        assert imb["max"] == pytest.approx(value)


@pytest.mark.parametrize("failed", [0, 1])
def test_two_tier_fields_by_their_definition(failed):
    fabric = Clos.generate(3, 4, 2, failed_spines=failed)
    hosts = list(fabric.hosts)
    job = parse_job({"id": "r", "collective": "ring_allreduce", "ranks": hosts, "bytes": 1e8},
                    fabric)
    doc = make_plan(fabric, [job], "greedy").to_dict()
    assert doc["gap"] == max(doc["max_link_load"] - doc["lower_bound"], 0)
    assert doc["max_load_by_tier"] == {"leaf": doc["max_link_load"]}
    assert doc["fabric"] == fabric.summary()
    assert set(doc["imbalance"]) == {"bytes", "flows"}


def test_links_at_max_counts_the_links_an_lp_leaves_at_the_max_up_to_rounding():
    """One definition of links at the max in every plan document (``loads.links_at_max``,
    within ``AT_MAX_TOL`` x max(alpha, 1)), not the planners' score (``split_score``, within
    1e-9 absolute): Clos split's LP, asked for its optimum plus 1e-9, leaves loads of 1.5 and
    1.500000001 on a fat-tree, which the score tells apart and the document counts as one max,
    as its histogram (rounded to 1e-6) and the two-tier document do."""
    fabric = fabrics()["fat-tree"]
    plan = make_plan(fabric, jobs(fabric, 0), "split")
    p, r = plan.problem, plan.routing
    fab = split_link_loads(p, r)[p.links.tier > 0]
    doc = plan.to_dict()
    near = (fab < fab.max() - 1e-9) & (fab >= fab.max() - 1e-6)  # at the max up to the LP
    assert doc["max_link_load"] == 1.500000001 and np.any(near)
    assert doc["links_at_max"] == links_at_max(fab, AT_MAX_TOL) == doc["load_histogram"]["1.5"]
    assert split_score(p, r)[1] < doc["links_at_max"]  # 20 against 36 links


def test_a_document_has_one_form_whichever_planners_made_it():
    """A fast-path plan (the two-tier planners, ``two_tier_plan``) and the Clos plan of the
    same routing (as the controller rebuilds it: ``installed_clos_plan``) give one document,
    split shares as planned; the Clos split's plan of the same leaf-spine is the same plan
    (issue 60: ``clos_split`` runs its two-tier kernel there), the lower bound an integer
    (whole flows per link) and the fabric line the leaf-spine's."""
    fabric = Clos.generate(4, 8, 2, failed_spines=1)
    clos = Clos.from_dict(fabric.to_dict())
    hosts = sorted(fabric.hosts)
    docs = [{"id": "r", "collective": "ring_allreduce", "ranks": hosts[6:12], "bytes": 1e8},
            {"id": "a", "flows": [{"src": x, "dst": y, "bytes": 1e7} for x in hosts[:6]
                                  for y in hosts[:6] if x != y]}]  # intra-leaf flows too
    fast = make_plan(fabric, [parse_job(d, fabric) for d in docs], "split")
    assert sum(len(x) > 1 for x in parts_of(fast.routing)) > 1  # some flows split
    on_clos = [parse_job(d, clos) for d in docs]
    parts, pairs = fast.path_parts(), []
    for job in on_clos:
        pairs.append((job, parts[:len(job.flows())]))
        parts = parts[len(job.flows()):]
    a, b = (without_timing(x.to_dict()) for x in (fast, installed_clos_plan(clos, pairs)))
    assert a == b and 1 / 3 in [x["share"] for r in a["routes"] for x in r.get("split", ())]
    other = make_plan(clos, on_clos, "split")
    c = without_timing(other.to_dict())
    assert c == a
    fields = ("lower_bound", "links_at_max", "fabric")
    assert json.dumps([c[k] for k in fields]) == \
        '[3, 18, "4 spines, 8 leaves, 16 hosts (1 spines failed)"]'


def without_timing(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in ("algorithm", "runtime_ms", "info")}
