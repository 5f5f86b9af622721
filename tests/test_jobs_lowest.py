"""The jobs objective gives the lowest mean slowdown of all unsplit plans on every shape
(issue 60): random instances (rings, all-to-alls and permutations of different sizes on
fat-trees k = 4 and 8, two-plane leaf-spines and leaf-spines, with links and a switch down),
every unsplit planner the registry offers, each plan's mean predicted slowdown by the jobs
objective's own evaluation (``clos_jobs.clos_slowdowns`` on the plan's full paths, as
tests/test_objective.py).

The sweep behind the test (N seeds from START, one line per instance where ``jobs`` is
behind, then the mean planning time of ``jobs`` and the greedy):

    nice -n 19 .venv/bin/python -m tests.test_jobs_lowest N [START]

Seeds 0-999, 2026-11-28: jobs was behind on 23 (by up to 0.2 in mean slowdown) before it
also started from the other unsplit planners' plans (``objective.other_starts``), on none
after.
"""
from __future__ import annotations

import random
import sys
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from controller.errors import ConflictError
from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem
from controller.model.jobs import parse_job
from controller.planners.clos_jobs import clos_slowdowns
from controller.planners.plan import make_plan, run_options
from controller.planners.registry import names

UNSPLIT = ("greedy", "ecmp", "ecmp-polarised", "edge-coloring", "annealing", "auto", "ilp")
SHAPES = ("fat-tree-4", "fat-tree-8", "two-plane", "leaf-spine")


def fabric_of(shape: str, rnd: random.Random) -> Clos:
    """``shape`` with, drawn by ``rnd``, nothing, one or two links, or a switch, down."""
    fab = {"fat-tree-4": lambda: Clos.fat_tree(4), "fat-tree-8": lambda: Clos.fat_tree(8),
           "two-plane": lambda: Clos.leaf_spine(3, 6, 2, planes=2),
           "leaf-spine": lambda: Clos.leaf_spine(4, 6, 3)}[shape]()
    fault = rnd.choice(("none", "links", "switch"))
    if fault == "none":
        return fab
    p = fab.planes[rnd.randrange(len(fab.planes))]
    uppers = [a for grp in p.aggs for a in grp] + [c for grp in p.cores for c in grp]
    if fault == "switch":
        doc = fab.to_dict()
        doc["down_switches"] = [rnd.choice(uppers[1:])]
        return Clos.from_dict(doc)
    links = [(leaf, a) for i, leaf in enumerate(p.leaves) for a in p.aggs[p.pod_of_leaf[i]]]
    return fab.with_down(set(rnd.sample(links, rnd.randint(1, 2))))


def jobs_of(fab: Clos, rnd: random.Random) -> list:
    """2-5 jobs on disjoint random hosts (most of them): rings, all-to-alls and permutations, of sizes
    1e8-4e9 bytes and compute times 0-1.5 s."""
    hosts = sorted(fab.host_leaves)
    rnd.shuffle(hosts)
    docs = []
    count = rnd.randint(2, 5)
    most = max(3, min(16, len(hosts) // count))
    for n in range(count):
        kind = rnd.choice(("ring", "ring", "a2a", "perm"))
        size = rnd.choice((1e8, 5e8, 2e9, 4e9))
        take = rnd.randint(3, min(most, 8)) if kind == "a2a" else rnd.randint(3, most)
        ranks, hosts = hosts[:take], hosts[take:]
        if len(ranks) < 2:
            break
        doc = {"id": f"{kind}{n}", "compute_s": rnd.choice((0.0, 0.2, 1.0, 1.5))}
        if kind == "ring":
            doc.update(collective="ring_allreduce", ranks=ranks, bytes=size)
        elif kind == "a2a":
            doc["flows"] = [{"src": x, "dst": y, "bytes": size / len(ranks)}
                            for x in ranks for y in ranks if x != y]
        else:
            dst = ranks[1:] + ranks[:1]
            doc["flows"] = [{"src": x, "dst": y, "bytes": size} for x, y in zip(ranks, dst)]
        docs.append(doc)
    return [parse_job(d, fab) for d in docs]


def instance(seed: int, shapes=SHAPES):
    """(shape name, fabric, jobs) of ``seed``: reproducible."""
    rnd = random.Random(seed)
    shape = shapes[seed % len(shapes)]
    while True:  # drawn again until every flow has an alive path
        fab = fabric_of(shape, rnd)
        jobs = jobs_of(fab, rnd)
        try:
            ClosProblem.build(fab, jobs)
            return shape, fab, jobs
        except ConflictError:
            continue


def means(fab: Clos, jobs, ilp_time_limit: float = 2.0) -> tuple[dict, dict]:
    """Mean predicted slowdown and wall time (ms) of every unsplit planner, ``jobs`` included,
    that runs on ``fab``'s shape."""
    out, ms = {}, {}
    for alg in ("jobs",) + UNSPLIT:
        if alg not in names(fab):
            continue
        run = run_options(fab, alg, ilp_time_limit=ilp_time_limit)
        t0 = time.perf_counter()
        plan = make_plan(fab, jobs, run.algorithm, **run.options)
        ms[alg] = (time.perf_counter() - t0) * 1e3
        v = clos_slowdowns(plan.problem, plan.routing)
        out[alg] = sum(v.values()) / len(v) if v else 1.0
    return out, ms


def behind(m: dict) -> dict:
    """The planners whose mean is below ``jobs``' (beyond float noise), and by how much."""
    return {a: m["jobs"] - v for a, v in m.items() if a != "jobs" and v < m["jobs"] - 1e-9}


# the instances where jobs had a higher mean than another unsplit planner before it also
# started from their plans (seeds of ``instance``: ECMP, polarised or not, and the edge
# colouring a flow or two above its start's max load; the annealing spreading an all-to-all
# over both planes' host links, below its ideal, where the search stopped at slowdown 1)
BEHIND = (20, 98, 210, 236, 262, 312, 356, 383)


def check(seed: int) -> None:
    _, fab, jobs = instance(seed)
    m, _ = means(fab, jobs)
    assert not behind(m), (seed, m)


# random instances: a fixed seed set (derandomized, no database: never flakes), the known
# ones always; about 0.3 s an instance
@pytest.mark.slow
@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.integers(0, 399))
def test_jobs_has_the_lowest_mean_slowdown_of_every_unsplit_planner(seed):
    check(seed)


for _seed in BEHIND:  # the known instances, always run first
    test_jobs_has_the_lowest_mean_slowdown_of_every_unsplit_planner = example(_seed)(
        test_jobs_has_the_lowest_mean_slowdown_of_every_unsplit_planner)


@pytest.mark.parametrize("seed", [20, 98])
def test_jobs_is_not_behind_ecmp_or_the_annealing(seed):
    """The fast tier's smoke: a k = 4 fat-tree with a switch down (ECMP polarised had the
    lower mean) and a two-plane leaf-spine (the annealing's)."""
    check(seed)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    n = int(argv[0]) if argv else 120
    start = int(argv[1]) if len(argv) > 1 else 0
    count, gaps, t_jobs, t_greedy = 0, [], 0.0, 0.0
    for seed in range(start, start + n):
        shape, fab, jobs = instance(seed)
        m, ms = means(fab, jobs)
        t_jobs += ms["jobs"]
        t_greedy += ms["greedy"]
        b = behind(m)
        if b:
            count += 1
            gaps.append(max(b.values()))
            print(f"seed {seed} {shape} jobs {m['jobs']:.6f} behind "
                  + ", ".join(f"{a} by {g:.6f}" for a, g in sorted(b.items())), flush=True)
    print(f"{count} of {n} behind; largest gap {max(gaps, default=0):.6f}; "
          f"jobs {t_jobs / n:.1f} ms, greedy {t_greedy / n:.1f} ms per instance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
