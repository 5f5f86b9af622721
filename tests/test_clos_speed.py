"""The request path's shortcuts on Clos fabrics (issue 60, item 3) give what the per-flow code
gave: links kept per fabric, routes named in batch, ECMP's hashes in batch, the bound's cuts."""
import random

import numpy as np
import pytest

from controller.model.clos import Clos
from controller.model.clospaths import ClosLinks, ClosProblem, lower_bound
from controller.model.jobs import parse_job
from controller.planners.clos_ecmp import hash_keys
from controller.planners.clos_greedy import clos_greedy
from controller.planners.clos_loads import paths_of
from controller.planners.clos_routes import clos_route_parts, route_paths
from controller.planners.clos_tiers import tier_colouring
from controller.planners.ecmp import flow_hash
from controller.planners.plan import part_path


def fabrics():
    yield Clos.fat_tree(4)
    yield Clos.fat_tree(6, planes=2)
    yield Clos.leaf_spine(4, 6, 3, planes=2)
    yield Clos.from_dict({**Clos.fat_tree(4, planes=2).to_dict(),
                          "bundle": {"leaf": 2, "core": 3}})
    f = Clos.fat_tree(6)
    yield f.with_down([(f.planes[0].leaves[0], f.planes[0].aggs[0][1]),
                       (f.planes[0].aggs[1][0], f.planes[0].cores[0][1])])


def random_job(fab, seed, per_host=2):
    rnd = random.Random(seed)
    hosts = list(fab.host_leaves)
    pairs = [(rnd.choice(hosts), rnd.choice(hosts)) for _ in range(per_host * len(hosts))]
    return parse_job({"id": "j", "flows": [{"src": a, "dst": b, "bytes": 1.0, "sport": i}
                                           for i, (a, b) in enumerate(pairs) if a != b]}, fab)


def slow_bound(problem):
    """``lower_bound`` as it was computed per call before the cuts were kept per fabric."""
    L, f = problem.links, problem.fabric
    src, dst = np.asarray(problem.src), np.asarray(problem.dst)
    best, tiers = 0.0, [(1, L.host_leaf, L.up1, L.down1)]
    if f.tiers == 3 and all(p.cores for p in f.planes):
        tiers.append((2, np.stack([L.pod_of_leaf[q][L.host_leaf[q]]
                                   for q in range(len(f.planes))]), L.up2, L.down2))
    for tier, key, ups, downs in tiers:
        keep = ~(key[:, src] == key[:, dst]).any(axis=0)
        groups, gid = np.unique(key.T, axis=0, return_inverse=True)
        for hosts, tables in ((src[keep], ups), (dst[keep], downs)):
            n = np.bincount(gid.ravel()[hosts], minlength=len(groups))
            alive = sum(((ids >= 0) & L.alive[L.sentinel(ids)]).sum(axis=1) for ids in
                        (t.reshape(t.shape[0], -1)[groups[:, q]] for q, t in enumerate(tables)))
            use = (n > 0) & (alive > 0)
            if use.any():
                unit = f.link_gbps[("host", "leaf", "core")[tier]] / f.link_gbps["leaf"]
                best = max(best, float((-(-n[use] // alive[use])).max() / unit))
    return best


def test_links_are_kept_per_fabric_and_rebuilt_when_it_changed():
    f = Clos.fat_tree(4)
    job = random_job(f, 1)
    a, b = ClosProblem.build(f, [job]), ClosProblem.build(f, [job])
    assert a.links is b.links is ClosLinks.of(f) and a.links.cells() is b.links.cells()
    with pytest.raises(ValueError):  # shared by every problem: read-only
        a.links.alive[0] = False
    f.down_switches.add(f.planes[0].cores[0][0])  # set on a fabric already used
    c = ClosProblem.build(f, [job])
    assert c.links is not a.links and not c.links.alive.all()
    assert ClosProblem.build(f.with_down(()), [job]).links is not c.links


@pytest.mark.parametrize("seed", range(3))
def test_lower_bound_from_the_kept_cuts(seed):
    for fab in fabrics():
        p = ClosProblem.build(fab, [random_job(fab, seed, per_host=seed + 1)],
                              skip_unroutable=True)
        assert lower_bound(p) == slow_bound(p)


def test_routes_named_in_batch_as_part_path_names_them():
    for fab in fabrics():
        p = ClosProblem.build(fab, [random_job(fab, 2)], skip_unroutable=True)
        for r in (clos_greedy(p), tier_colouring(p, "koenig", alive=True)):
            got = route_paths(p, r)
            want = [part_path(p, i, r.plane[i], r.middle[i], r.path[i]) for i in range(len(p))]
            assert got == want
            assert [getattr(x, "members", None) for x in got] == \
                [getattr(x, "members", None) for x in want]
        parts, _, _, _ = clos_route_parts(fab, p.jobs, "greedy")
        r = clos_greedy(p)
        assert [parts[pos] for pos in p.inter] == [
            ((part_path(p, i, r.plane[i], r.middle[i], r.path[i]), 1.0),) for i in range(len(p))]


def test_ecmp_hashes_in_batch_are_flow_hash():
    keys = [("10.0.0.1", "10.0.1.7", 17, 4791, 4791), ("h0_0", "h3_1", 6, 0, 80)]
    for seed in (0, 7, "0/leaf", "3/aggregation"):
        got = hash_keys([f"{s}|{d}|{p}|{a}|{b}|".encode() for s, d, p, a, b in keys], seed)
        assert got.dtype == np.uint64
        assert got.tolist() == [flow_hash(*k, seed) for k in keys]


def test_paths_of_drops_the_missing_hops():
    ids = np.array([[1, 2, 3, 4], [5, -1, -1, 6], [7, 8, 9, 10]])
    assert paths_of(ids) == [(1, 2, 3, 4), (5, 6), (7, 8, 9, 10)]
    assert paths_of(np.zeros((0, 4), dtype=np.int64)) == []
