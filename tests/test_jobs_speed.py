"""The jobs objective's shortcuts (issue 60: the jobs objective at 64 x 32 within 100 ms) give
exactly what the code they replace gave: the prediction's kept layout for unsplit routings
(``model.iteration``), the sparse products without their dispatch (``model.rates``), the link
tables of the search's guide (``objective.JobModel``) and layer 2's skipped chain searches
(``layer2.fewer_at_level``), down to the order of the routing's flow sets."""
import random
import time
from collections import Counter

import numpy as np
import pytest
from scipy.sparse import csr_matrix

from controller.model.clos import Clos
from controller.model.iteration import predict_times, times_on_paths
from controller.model.jobs import Flow, Job
from controller.model.links import LinkIndex
from controller.model.problem import Problem
from controller.model.rates import REL_TOL, weighted_max_min
from controller.planners.greedy import greedy_spines
from controller.planners.layer2 import fewer_at_level, fewer_below
from controller.planners.objective import JobModel
from controller.planners.repair import Routing, bits
from simulation.placement import realistic


def random_problem(seed: int) -> Problem:
    """Rings, explicit flows (some of 0 bytes, some within a leaf) on a leaf-spine with links
    down, flows between leaves with no spine in common left out (``skip_unroutable``)."""
    rnd = random.Random(seed)
    S, L, H = rnd.randint(1, 4), rnd.randint(2, 5), rnd.randint(1, 4)
    f = Clos.generate(S, L, H).as_leaf_spine()
    down = {(f.leaves[rnd.randrange(L)], f.spines[rnd.randrange(S)])
            for _ in range(rnd.randint(0, 2 * S))}
    if down:
        f = f.with_down(down)
    hosts = sorted(f.hosts)
    jobs = []
    for n in range(rnd.randint(1, 5)):
        ranks = list(dict.fromkeys(rnd.choice(hosts) for _ in range(rnd.randint(2, 6))))
        if len(ranks) < 2:
            continue
        if rnd.random() < 0.5:
            rings = [ranks] + ([ranks[::-1]] if rnd.random() < 0.3 else [])
            jobs.append(Job(f"r{n}", rings=rings, ring_bytes=rnd.choice((0.0, 1e6, 3e8)),
                            compute_s=rnd.choice((0.0, 0.5))))
        else:
            jobs.append(Job(f"e{n}", explicit=[
                Flow(f"e{n}", a, b, rnd.choice((0.0, 1e6, 7e8)) * rnd.random())
                for a in ranks for b in ranks if a != b and rnd.random() < 0.6]))
    return Problem.build(f, jobs, skip_unroutable=True)


def paths_prediction(problem: Problem, spines) -> dict:
    """``predict_times`` as it was built before the kept layout: every flow's path listed."""
    links = LinkIndex(problem.fabric)
    parts: list = [None] * len(problem.flows)
    for k, pos in enumerate(problem.inter):
        parts[pos] = ((int(spines[k]), 1.0),)
    unroutable = set(problem.unroutable)
    flow_paths = [None if k in unroutable else
                  [(links.path(f.src, f.dst, s), share) for s, share in (p or ((None, 1.0),))]
                  for k, (f, p) in enumerate(zip(problem.flows, parts))]
    return times_on_paths(problem.jobs, flow_paths,
                          np.full(links.count, problem.fabric.link_bps()))


@pytest.mark.parametrize("seed", range(60))
def test_the_kept_layout_predicts_what_the_paths_predict(seed):
    problem = random_problem(seed)
    rnd = random.Random(seed)
    for _ in range(3):
        spines = [rnd.choice([s for s in range(len(problem.fabric.spines)) if m >> s & 1])
                  for m in problem.usable]
        want = paths_prediction(problem, spines)
        assert predict_times(problem, spines) == want  # exactly: the same sums in one order
        assert predict_times(problem, [((s, 1.0),) for s in spines]) == want


def test_the_kept_layout_on_a_realistic_cluster_with_failures():
    fabric, jobs = realistic(8, 16, 0.9, 3, 3, 1, 16)
    problem = Problem.build(fabric.as_leaf_spine(), jobs)
    spines = greedy_spines(problem)
    assert predict_times(problem, spines) == paths_prediction(problem, spines)


def reference_max_min(a, at, capacity, alive):
    """``weighted_max_min`` with the ``@`` operator (before its products skipped dispatch)."""
    n = a.shape[0]
    rates = np.zeros(n)
    residual = np.asarray(capacity, dtype=float).copy()
    unfrozen = alive.copy()
    for _ in range(n):
        if not unfrozen.any():
            break
        demand = at @ unfrozen.astype(float)
        active = demand > 0
        share = np.full(len(residual), np.inf)
        share[active] = np.maximum(residual[active], 0.0) / demand[active]
        x = share.min()
        bottleneck = share <= x * (1 + REL_TOL) + 1e-300
        newly = ((a @ bottleneck.astype(float)) > 0) & unfrozen
        rates[newly] = x
        unfrozen &= ~newly
        residual -= at @ np.where(newly, x, 0.0)
    return rates


@pytest.mark.parametrize("seed", range(20))
def test_products_without_dispatch_are_the_operators(seed):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(1, 30)), int(rng.integers(1, 20))
    dense = rng.random((n, m)) * (rng.random((n, m)) < 0.3)
    dense[np.arange(n), rng.integers(0, m, n)] += rng.random(n) + 0.1  # every row on a link
    a = csr_matrix(dense)
    capacity = rng.random(m) * 10 + 0.5
    alive = rng.random(n) < 0.8
    got = weighted_max_min(a, a.T.tocsr(), capacity, alive)
    assert np.array_equal(got, reference_max_min(a, a.T.tocsr(), capacity, alive))


@pytest.mark.parametrize("seed", range(30))
def test_link_tables_are_the_values_in_the_sets_order(seed):
    problem = random_problem(seed)
    if not len(problem):
        return
    model = JobModel(problem)
    rnd = random.Random(seed)
    for _ in range(20):
        on = set(rnd.sample(range(len(problem)), rnd.randint(1, min(6, len(problem)))))
        per_job, per_flow = model.link_table(on)
        assert list(per_flow) == list(on)
        for f in on:
            assert per_flow[f] == model.value(f, on) == model.value_on(f, on)
            assert per_job[model.job[f]] == max(model.value(g, on) for g in on
                                                if model.job[g] == model.job[f])


def reference_fewer_at_level(r, c, deadline=None, budget=4096, floor=None):
    """``fewer_at_level`` before sides that cannot take a flow were skipped."""
    r.set_capacity(c, hold=True)
    cleared = 0
    S = r.S
    targets = [y for y, v in enumerate(r.load) if v == c + 1]
    at = Counter(y // S for y in targets)
    for x in targets:
        if deadline is not None and time.perf_counter() > deadline:
            break
        if floor is not None and at[x // S] <= floor[x // S]:
            continue
        r.set_link_capacity(x, c)
        for g in sorted(r.on[x]):
            s = r.remove_route(g)
            if r.insert(g, budget):
                cleared += 1
                at[x // S] -= 1
                break
            r.add_route(g, s)
        else:
            r.set_link_capacity(x, c + 1)
    return cleared


def state(r: Routing) -> tuple:
    return r.spine, r.load, r.cap, r.room, [list(s) for s in r.on]  # the sets' order too


def layer2_instance(seed: int):
    """A small realistic cluster with links and a spine down, flows on random usable spines."""
    rnd = random.Random(seed)
    fabric, jobs = realistic(4, 8, rnd.choice((0.7, 0.9, 1.0)), seed, rnd.randint(0, 4),
                             rnd.randint(0, 1), 16, 4)
    problem = Problem.build(fabric.as_leaf_spine(), jobs, skip_unroutable=True)
    spines = [rnd.choice([s for s in range(len(problem.fabric.spines)) if m >> s & 1])
              for m in problem.usable]
    return problem, spines, rnd


def test_the_instances_reach_sides_without_room():
    hits = 0
    for seed in range(40):
        problem, spines, _ = layer2_instance(seed)
        r = Routing(problem, spines)
        for c in range(max(r.load, default=0), -1, -1):
            r.set_capacity(c, hold=True)
            hits += sum(1 for x, v in enumerate(r.load) if v == c + 1 and not r.room[x // r.S])
    assert hits > 50


@pytest.mark.parametrize("seed", range(40))
def test_skipped_chain_searches_leave_what_they_left(seed):
    problem, spines, rnd = layer2_instance(seed)
    a, b = Routing(problem, spines), Routing(problem, spines)
    for c in range(max(a.load, default=0), -1, -1):  # every level down to 0 (all held)
        budget = rnd.choice((4, 256))
        assert fewer_at_level(a, c, None, budget) == reference_fewer_at_level(b, c, None, budget)
        assert state(a) == state(b)


@pytest.mark.parametrize("seed", range(40))
def test_the_level_one_pass_left_out_changes_only_the_sets_order(seed):
    problem, spines, _ = layer2_instance(seed)
    a, b = Routing(problem, spines), Routing(problem, spines)
    alpha = a.max_load()
    assert fewer_below(a, alpha, None, 256, keep_order=False) == fewer_below(b, alpha, None, 256)
    assert state(a)[:4] == state(b)[:4]
    assert [sorted(s) for s in a.on] == [sorted(s) for s in b.on]


def reference_chain(r: Routing, k: int, budget: int):
    """``Routing._chain`` with every popped link's moves walked again from the start."""
    S, LS, cap, load = r.S, r.LS, r.cap, r.load
    a, b = r.src[k], r.dst[k]
    parent: dict = {}
    queue: list = []
    for u in bits(r.usable[k]):
        x_up, x_down = a * S + u, LS + b * S + u
        full_up, full_down = load[x_up] >= cap[x_up], load[x_down] >= cap[x_down]
        if full_up == full_down:
            continue
        x = x_up if full_up else x_down
        if load[x] == cap[x] and x not in parent:
            parent[x] = (None, k, u)
            queue.append(x)
    head = 0
    while head < len(queue) and head < budget:
        x = queue[head]
        head += 1
        moves, delta = r._path(parent, x)
        moved = {g for g, _ in moves}
        t, row_x = x % S, x // S
        room_x = r._room_row(row_x, delta)
        for g in r.on[x]:
            if g in moved:
                continue
            up_g, down_g = r.src[g] * S + t, LS + r.dst[g] * S + t
            oth = down_g if x == up_g else up_g
            row_o = oth // S
            room_o = r._room_row(row_o, delta)
            cand = r.usable[g] & ~(1 << t)
            both = cand & room_x & room_o
            if both:
                return moves + [(g, (both & -both).bit_length() - 1)]
            for u in bits(cand & (room_x | room_o)):
                y = row_o * S + u if room_x >> u & 1 else row_x * S + u
                if y in parent or load[y] + delta.get(y, 0) != cap[y]:
                    continue
                parent[y] = (x, g, u)
                queue.append(y)
    return None


@pytest.mark.parametrize("seed", range(40))
def test_chains_from_their_parents_moves_are_the_walked_ones(seed):
    problem, spines, rnd = layer2_instance(seed)
    r = Routing(problem, spines)
    for c in range(max(r.load, default=0), 0, -1):
        r.set_capacity(c, hold=rnd.random() < 0.5)
        for k in sorted(rnd.sample(range(len(problem)), min(20, len(problem)))):
            s = r.remove_route(k)
            budget = rnd.choice((3, 64, 4096))
            got = r._chain(k, budget)
            assert got == reference_chain(r, k, budget)
            r.add_route(k, s)
