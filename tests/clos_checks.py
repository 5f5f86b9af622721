"""Shared checks of the Clos tests: jobs of host pairs, random permutations, and the route
checker every path planner's test runs (valid alive up-down paths, loads that add up)."""
import random

import numpy as np

from controller.model.clospaths import flow_links, link_loads
from controller.model.jobs import parse_job

# a ring of the k = 4 fat-tree with 2 hosts per leaf whose neighbours sit in different pods
CROSS_POD_RING = ["h0_0", "h2_0", "h4_0", "h6_0", "h1_1", "h3_1", "h5_1", "h7_1"]


def flows_job(fabric, pairs, jid="j"):
    return parse_job({"id": jid, "flows": [{"src": a, "dst": b, "bytes": 1e6}
                                           for a, b in pairs if a != b]}, fabric)


def permutation(fabric, seed):
    hosts = list(fabric.host_leaves)
    perm = hosts[:]
    random.Random(seed).shuffle(perm)
    return [flows_job(fabric, zip(hosts, perm))]


def check_routes(problem, r):
    """Every route is an alive up-down path from the source's leaf to the destination's leaf
    in its plane, and the loads add up."""
    L, fab = problem.links, problem.fabric
    for i, path in enumerate(r.path):
        q = r.plane[i]
        names = [L.names[x] for x in flow_links(problem, r, i)]
        hops = [n.split("#")[0].split("->") for n in names]
        for (_, b), (c, _) in zip(hops, hops[1:]):
            assert b == c, names
        src, dst = L.hosts[problem.src[i]], L.hosts[problem.dst[i]]
        assert hops[0][0] == src and hops[-1][1] == dst
        assert hops[1][0] == fab.host_leaves[src][q]
        tiers = [fab.tier_of[h[1]] for h in hops[1:-1]]
        top = tiers.index(max(tiers))
        assert tiers[:top + 1] == sorted(tiers[:top + 1]) and len(set(tiers[:top + 1])) == top + 1
        assert tiers[top:] == sorted(tiers[top:], reverse=True)
        assert all(L.alive[x] for x in path)
    loads = link_loads(problem, r)
    assert np.isclose((loads * L.units).sum(), sum(len(p) for p in r.path))
