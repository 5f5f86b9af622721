"""The fluid model against SimGrid (an independent max-min simulator) on random small
instances: ring All-Reduce steps and explicit flows, split and unsplit routes, shared hosts.
Every transfer's start and end must agree within 1e-6 relative.

SimGrid runs in Debian's /usr/bin/python3 (package python3-simgrid) through
tests/simgrid_oracle.py; the tests skip when it is not installed.
"""
import json
import os
import random
import subprocess

import pytest

from controller.model.clos import Clos
from controller.model.fabric import Fabric
from controller.model.fluid import FluidSimulator, _groups
from controller.model.jobs import Flow, Job
from controller.model.links import LinkIndex
from controller.model.problem import Assignment, Problem
from controller.planners.leaf_spine import flow_spine_parts
from controller.planners.plan import Plan, two_tier_plan
from tests.helpers import two_tier_view

SYSTEM_PYTHON = "/usr/bin/python3"
ORACLE = os.path.join(os.path.dirname(__file__), "simgrid_oracle.py")
UNIT = 8000  # bytes: sizes are multiples, shares multiples of 1/8, so every part is whole bytes


def _simgrid_missing() -> str | None:
    if not os.path.exists(SYSTEM_PYTHON):
        return f"{SYSTEM_PYTHON} does not exist"
    try:
        r = subprocess.run([SYSTEM_PYTHON, "-c", "import simgrid"], capture_output=True,
                           timeout=30)
    except subprocess.TimeoutExpired:
        return f"{SYSTEM_PYTHON} -c 'import simgrid' did not answer"
    if r.returncode:
        return (f"{SYSTEM_PYTHON} cannot import simgrid (apt-get install python3-simgrid): "
                f"{r.stderr.decode(errors='replace').strip().splitlines()[-1:]}")
    return None


MISSING = _simgrid_missing()
pytestmark = [pytest.mark.skipif(MISSING is not None, reason=MISSING or ""),
              pytest.mark.timeout(60)]


def oracle(doc: dict) -> dict:
    r = subprocess.run([SYSTEM_PYTHON, ORACLE], input=json.dumps(doc).encode(),
                       capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return json.loads(r.stdout)


def random_instance(seed: int):
    """A small fabric (some links down), ring and explicit jobs on shared hosts, and routes
    split at random into eighths over usable spines."""
    rng = random.Random(seed)
    spines, leaves, per_leaf = rng.choice([1, 2, 3, 3]), rng.randint(2, 3), rng.randint(1, 3)
    f = Clos.generate(spines, leaves, per_leaf, 8e-3).as_leaf_spine()  # 1 MB/s links
    down = {(leaf, s) for leaf in f.leaves for s in f.spines[1:] if rng.random() < 0.2}
    f = f.with_down(down)
    hosts = list(f.hosts)
    jobs = []
    for k in range(rng.randint(2, 4)):
        jid = f"j{k}"
        if len(hosts) < 2:
            break
        if rng.random() < 0.6:
            rings = [rng.sample(hosts, rng.randint(2, min(4, len(hosts))))
                     for _ in range(rng.randint(1, 2))]
            # 12 x UNIT x m: every ring's chunk (bytes / ring size 2, 3 or 4) is whole units
            jobs.append(Job(jid, rings=rings, ring_bytes=float(12 * UNIT * rng.randint(1, 10))))
        else:
            flows = []
            for _ in range(rng.randint(1, 5)):
                s, d = rng.sample(hosts, 2)
                flows.append(Flow(jid, s, d, float(UNIT * rng.randint(1, 40))))
            jobs.append(Job(jid, explicit=flows))
    if not jobs:
        jobs = [Job("j0", explicit=[Flow("j0", hosts[0], hosts[-1], float(UNIT))])]
    li = f.leaf_index
    routes = []
    for j in jobs:
        for fl in j.flows():
            a, b = li[f.leaf_of(fl.src)], li[f.leaf_of(fl.dst)]
            if a == b:
                routes.append(None)
                continue
            usable = [s for s in range(len(f.spines)) if f.usable_mask(a, b) >> s & 1]
            spines = rng.sample(usable, rng.randint(1, min(len(usable), 3)))
            cuts = sorted(rng.sample(range(1, 8), len(spines) - 1))
            eighths = [b - a for a, b in zip([0] + cuts, cuts + [8])]
            routes.append(tuple((s, e / 8) for s, e in zip(spines, eighths)))
    problem = Problem.build(f, jobs)
    plan = two_tier_plan("random", problem, Assignment([routes[i] for i in problem.inter]))
    return f, jobs, plan


def oracle_instance(f: Fabric, jobs: list[Job], plan: Plan):
    """Every part of every transfer of every step as an oracle flow; a step's parts come after
    all parts of the previous step of the same ring. Returns the doc and, per (job, flow),
    the oracle flow ids of each step."""
    links = LinkIndex(f)
    parts = flow_spine_parts(*two_tier_view(plan))  # spines, as the oracle's links
    doc = {"links": [f.link_bps()] * links.count, "flows": []}
    steps_of: dict[tuple[int, int], list[list[int]]] = {}
    offset = 0
    for j, job in enumerate(jobs):
        flows = job.flows()
        for members, steps in _groups(job):
            before: list[int] = []
            for _ in range(steps):
                now = []
                for k in members:
                    fl, route = flows[k], parts[offset + k] or ((None, 1.0),)
                    ids = []
                    for spine, share in route:
                        size = fl.bytes * share
                        assert size == round(size)
                        ids.append(len(doc["flows"]))
                        doc["flows"].append({"path": links.path(fl.src, fl.dst, spine),
                                             "bytes": int(round(size)), "after": before})
                    steps_of.setdefault((j, k), []).append(ids)
                    now += ids
                before = now
        offset += len(flows)
    return doc, steps_of


@pytest.mark.parametrize("seed", range(14))
def test_fluid_model_matches_simgrid(seed):
    f, jobs, plan = random_instance(seed)
    sim = FluidSimulator(f, jobs, lambda _: plan)
    result = sim.run()
    doc, steps_of = oracle_instance(f, jobs, plan)
    got = oracle(doc)
    fluid: dict[tuple[int, int], list] = {}
    for j, k, start, end in sorted(sim.done, key=lambda x: x[2]):
        fluid.setdefault((j, k), []).append((start, end))
    assert set(fluid) == set(steps_of)
    for key, steps in steps_of.items():
        want = [(got["start"][ids[0]], max(got["finish"][i] for i in ids)) for ids in steps]
        assert len(fluid[key]) == len(want)
        for (s, e), (ws, we) in zip(fluid[key], want):
            assert s == pytest.approx(ws, rel=1e-6, abs=1e-12), key
            assert e == pytest.approx(we, rel=1e-6), key
    for j, job in enumerate(jobs):
        end = max(max(got["finish"][i] for i in ids)
                  for (jj, _), steps in steps_of.items() if jj == j for ids in steps)
        assert result["jobs"][job.id]["allreduce_s"][0] == pytest.approx(end, rel=1e-6)


def test_oracle_two_flows_on_one_link():
    # the configuration of environment.md section 9: two 1 MB flows on a 1 MB/s link
    got = oracle({"links": [1e6], "flows": [{"path": [0], "bytes": 1000000, "after": []},
                                            {"path": [0], "bytes": 500000, "after": []}]})
    assert got["finish"] == pytest.approx([1.5, 1.0], rel=1e-9)
