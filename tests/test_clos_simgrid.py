"""The prediction on Clos paths (model.iteration.predict_clos_times) against SimGrid, an
independent max-min simulator, on small fat-trees and two-plane leaf-spines with bundles,
faster core links and failures: explicit flows agree within 1e-6 (the same max-min fluid
model), ring All-Reduces (SimGrid runs every step, the model averages a ring's steps) within
the model's tolerance."""
import random

import pytest

from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem, flow_links
from controller.model.iteration import TOLERANCE, predict_clos_times
from controller.model.jobs import Flow, Job
from controller.planners.clos_auto import clos_auto
from controller.planners.clos_ecmp import clos_ecmp
from tests.test_simgrid import MISSING, UNIT, oracle

pytestmark = [pytest.mark.skipif(MISSING is not None, reason=MISSING or ""),
              pytest.mark.timeout(120)]


def _fabric(rng: random.Random) -> Clos:
    if rng.random() < 0.5:
        doc = Clos.fat_tree(4, hosts_per_leaf=rng.randint(1, 2)).to_dict()
        doc["link_gbps"] = {"host": 8e-3, "leaf": 8e-3, "core": rng.choice([8e-3, 16e-3])}
        doc["bundle"] = {"core": rng.randint(1, 2)}
        if rng.random() < 0.5:
            doc["down"] = [["a0_0", "c0_0"]]
    else:
        doc = Clos.leaf_spine(2, 3, 2, planes=2, bundle=rng.randint(1, 2)).to_dict()
        doc["link_gbps"] = 8e-3
        if rng.random() < 0.5:
            doc["down"] = [["l0_p1", "s1_p1"]]
    return Clos.from_dict(doc)


def _instance(seed: int, rings: bool):
    rng = random.Random(seed)
    fab = _fabric(rng)
    hosts = list(fab.host_leaves)
    jobs = []
    for k in range(rng.randint(2, 3)):
        jid = f"j{k}"
        if rings:
            ranks = rng.sample(hosts, rng.randint(2, 4))
            jobs.append(Job(jid, rings=[ranks], ring_bytes=float(12 * UNIT * rng.randint(1, 8))))
        else:
            flows = [Flow(jid, *rng.sample(hosts, 2), float(UNIT * rng.randint(1, 40)))
                     for _ in range(rng.randint(1, 5))]
            jobs.append(Job(jid, explicit=flows))
    problem = ClosProblem.build(fab, jobs)
    routing = clos_auto(problem) if seed % 2 else clos_ecmp(problem, salt=seed)
    return problem, routing


def _oracle_doc(problem: ClosProblem, routing):
    """Every transfer of every step as an oracle flow; a ring step after the ring's previous."""
    L = problem.links
    index = {pos: i for i, pos in enumerate(problem.inter)}

    def path(k: int, f: Flow) -> list[int]:
        if k in index:
            return [int(x) for x in flow_links(problem, routing, index[k])]
        q = problem.intra[k]
        return [int(L.host_up[q, L.host_id[f.src]]), int(L.host_down[q, L.host_id[f.dst]])]
    doc = {"links": [float(c) for c in L.capacity_bps()], "flows": []}
    ids_of_job: dict[str, list[int]] = {}
    pos = 0
    for job in problem.jobs:
        flows = job.flows()
        if job.is_collective:
            before: list[int] = []
            for _ in range(job.steps()):
                now = []
                for k, f in enumerate(flows):
                    now.append(len(doc["flows"]))
                    doc["flows"].append({"path": path(pos + k, f), "after": before,
                                         "bytes": int(job.ring_bytes / len(flows))})
                before = now
                ids_of_job.setdefault(job.id, []).extend(now)
        else:
            for k, f in enumerate(flows):
                ids_of_job.setdefault(job.id, []).append(len(doc["flows"]))
                doc["flows"].append({"path": path(pos + k, f), "bytes": int(f.bytes),
                                     "after": []})
        pos += len(flows)
    return doc, ids_of_job


@pytest.mark.parametrize("seed", range(8))
def test_explicit_flows_on_clos_paths_match_simgrid(seed):
    problem, routing = _instance(seed, rings=False)
    doc, ids = _oracle_doc(problem, routing)
    finish = oracle(doc)["finish"]
    times = predict_clos_times(problem, routing)
    for jid, flows in ids.items():
        assert times[jid] == pytest.approx(max(finish[i] for i in flows), rel=1e-6)


@pytest.mark.parametrize("seed", range(8))
def test_rings_on_clos_paths_within_the_model_tolerance(seed):
    problem, routing = _instance(seed, rings=True)
    doc, ids = _oracle_doc(problem, routing)
    finish = oracle(doc)["finish"]
    times = predict_clos_times(problem, routing)
    for jid, flows in ids.items():
        assert times[jid] == pytest.approx(max(finish[i] for i in flows), rel=TOLERANCE)


@pytest.mark.parametrize("seed", range(8))
def test_the_fluid_model_on_clos_paths_matches_simgrid_step_by_step(seed):
    """The event-driven fluid model (model.fluid), which runs every ring step as SimGrid does,
    on a Clos plan: every job's All-Reduce time within 1e-6."""
    from controller.model.fluid import predict_allreduce
    from controller.planners.plan import Plan
    problem, routing = _instance(seed, rings=seed % 2 == 0)
    doc, ids = _oracle_doc(problem, routing)
    finish = oracle(doc)["finish"]
    fluid = predict_allreduce(Plan("x", problem, routing, 0.0))
    for jid, flows in ids.items():
        assert fluid[jid] == pytest.approx(max(finish[i] for i in flows), rel=1e-6)
