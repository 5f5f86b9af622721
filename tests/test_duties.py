"""Probe duties (issue 73): every link of the fabric crossed by the probes of at least two
hosts, links down included, with alive paths for every alive link when something is down;
few paths per host; the hosts' documents carry them and a failure changes few of them."""
from __future__ import annotations

import json
import random

import pytest

from controller.agent.steering import MAX_PROBES
from controller.model.clos import Clos
from controller.service import api, duties
from controller.service.pathstate import MAX_PATHS
from tests.test_pathstate import fat_tree
from tests.test_srv6 import service_on

FABRICS = {"fat-tree k=4": lambda: Clos.fat_tree(4), "fat-tree k=8": lambda: Clos.fat_tree(8),
           "fat-tree k=16": lambda: Clos.fat_tree(16),
           "leaf-spine 8x16": lambda: Clos.leaf_spine(8, 16, 4),
           "leaf-spine 2x2": lambda: Clos.leaf_spine(2, 2, 1),
           "three tiers, 2 hosts a leaf": lambda: Clos.fat_tree(8, hosts_per_leaf=2)}


def with_failures(f: Clos, seed: int) -> Clos:
    """``f`` with 2% of its links and one switch above the leaves down."""
    rnd = random.Random(seed)
    links = f.links()
    g = f.with_down(set(rnd.sample(links, max(1, len(links) // 50))))
    g.down_switches = {rnd.choice([s for s in f.switches() if f.tier_of[s] > 0])}
    return g


def all_duties(f: Clos) -> dict:
    return {h: duties.of(f, h) for h in f.host_leaves}


def check_paths(f: Clos, got: dict) -> None:
    """Each duty starts at its host's leaf, follows cables up then down (a shortest path
    between two leaves) and ends at another host's leaf."""
    for host, paths in got.items():
        for path, dst in paths:
            assert path[0] in f.host_leaves[host] and path[-1] in f.host_leaves[dst]
            assert dst != host and len(path) in (3, 5)
            tiers = [f.tier_of[s] for s in path]
            top = len(path) // 2
            assert tiers == list(range(top + 1)) + list(range(top - 1, -1, -1)), path
            for a, b in zip(path, path[1:]):
                assert b in f.neighbours(a), (a, b)


def uncoverable(f: Clos) -> set:
    """The alive links that fewer than two hosts can cross by an alive shortest path between
    leaves (every such path enumerated with networkx: small fabrics only)."""
    import networkx as nx
    g = nx.Graph((a, b) for a, b in f.links())
    can = {link: set() for link in f.links()}
    leaves = [l for l in f.leaves if f.hosts_on.get(l)]
    for i, s in enumerate(leaves):
        for t in leaves[i + 1:]:
            for path in nx.all_shortest_paths(g, s, t):
                links = [(a, b) if f.tier_of[a] < f.tier_of[b] else (b, a)
                         for a, b in zip(path, path[1:])]
                if all(f.alive_members(*l) for l in links):
                    for l in links:
                        can[l] |= set(f.hosts_on[s]) | set(f.hosts_on[t])
    return {l for l, hosts in can.items() if f.alive_members(*l) and len(hosts) < 2}


def told_apart_from_none(f: Clos, got: dict) -> list:
    """The links whose failure the probes cannot tell from another's: every path crossing
    the link also crosses that other link (the smallest explanation would blame both)."""
    on: dict = {}
    for paths in got.values():
        for path, _ in paths:
            hops = frozenset((a, b) if f.tier_of[a] < f.tier_of[b] else (b, a)
                             for a, b in zip(path, path[1:]))
            for hop in hops:
                on.setdefault(hop, []).append(hops)
    return [l for l in f.links() if frozenset.intersection(*on[l]) - {l}]


@pytest.mark.parametrize("name", FABRICS)
def test_every_link_is_crossed_by_two_hosts_and_duties_are_few(name):
    f = FABRICS[name]()
    got = all_duties(f)
    check_paths(f, got)
    crossed = duties.crossings(f, got)
    assert min(len(hosts) for hosts in crossed.values()) >= duties.COVER
    if name != "leaf-spine 2x2":  # there every path crosses both links of its spine
        assert not told_apart_from_none(f, got)
    per_host = [len(p) for p in got.values()]
    links, hosts = len(f.links()), len(f.host_leaves)
    assert max(per_host) <= 2 * duties.COVER * links / hosts + 4, (max(per_host), links, hosts)


@pytest.mark.parametrize("name", FABRICS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_with_failures_every_alive_link_has_two_alive_crossings(name, seed):
    f = with_failures(FABRICS[name](), seed)
    got = all_duties(f)
    check_paths(f, got)
    alive = duties.alive_crossings(f, got)
    short = {l for l in f.links() if f.alive_members(*l) and len(alive[l]) < duties.COVER}
    assert not short - (uncoverable(f) if len(f.leaves) <= 32 else set())
    assert min(len(h) for h in duties.crossings(f, got).values()) >= duties.COVER  # down too


def test_a_failure_changes_only_a_few_hosts_duties():
    f = Clos.fat_tree(16)
    before = all_duties(f)
    link = next(l for l in f.links() if f.tier_of[l[1]] == 2)
    after = all_duties(f.with_down({link}))
    moved = {h for h in before if before[h] != after[h]}
    assert 0 < len(moved) <= 8 and all(after[h][:len(before[h])] == before[h] for h in moved)
    assert not duties.extras(f)


def test_the_hosts_documents_watch_every_link_twice():
    """Through the REST API: every host's document, no job running, lists probes whose paths
    cross every link of the fabric for at least two hosts (before, only the paths of a
    host's own flows were probed: a link no job crosses was never watched)."""
    svc = service_on(fat_tree(4))
    f = svc.state.fabric
    crossed = {link: set() for link in f.links()}
    for host in f.host_leaves:
        doc = api.handle(svc, "GET", f"/v1/hosts/{host}/segments")[1]
        for p in doc["probes"]:
            assert p["path"][0] == f.hosts[host] and p["back"] and p["sids"]
            for a, b in zip(p["path"], p["path"][1:]):
                crossed[(a, b) if f.tier_of[a] < f.tier_of[b] else (b, a)].add(host)
    assert min(len(h) for h in crossed.values()) >= 2


def test_a_link_failure_wakes_only_the_hosts_whose_documents_changed():
    svc = service_on(fat_tree(4))
    f = svc.state.fabric
    before = {h: api.handle(svc, "GET", f"/v1/hosts/{h}/segments")[1] for h in f.host_leaves}
    lower, upper = "a0_0", "c0_0"
    svc.ports_changed([(f.dpids[lower], p, False, None) for p in f.ports_to(lower, upper)])
    after = {h: api.handle(svc, "GET", f"/v1/hosts/{h}/segments")[1] for h in f.host_leaves}
    woke = {h for h in f.host_leaves if after[h]["version"] != before[h]["version"]}
    differ = {h for h in f.host_leaves if after[h]["probes"] != before[h]["probes"]}
    assert differ and woke == differ  # the new duties' hosts, and only they
    assert len(woke) < len(f.host_leaves) // 2


def test_the_probes_a_document_holds_fit_one_report():
    """The controller sends at most what one report may hold, and the agent reads as much."""
    assert MAX_PATHS == MAX_PROBES
    svc = service_on(fat_tree(4))
    hosts = sorted(svc.state.fabric.host_leaves)
    flows = [{"src": "h0_0", "dst": d, "bytes": 1e6} for d in hosts if d != "h0_0"]
    status, view = api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": "fan", "mode": "srv6", "flows": flows}).encode())
    assert status == 201, view
    doc = api.handle(svc, "GET", "/v1/hosts/h0_0/segments")[1]
    paths = [p["path"] for p in doc["probes"]]
    assert len(paths) == len({tuple(p) for p in paths}) <= MAX_PATHS
    assert {tuple(f["path"]) for f in doc["flows"] if not f.get("reverse")} <= set(map(tuple, paths))
