"""The realistic placement model: servers, utilisation, failures, seeds, CLI."""
import json
import subprocess
import sys

import numpy as np
import pytest

from controller.errors import InputError
from controller.model.clos import Clos, load_fabric
from controller.model.jobs import parse_jobs
from controller.model.problem import Problem
from simulation.placement import cluster, place, realistic, summary
from simulation.workloads import MODELS


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("utilisation", [0.8, 0.95])
def test_jobs_fill_servers_up_to_the_target(seed, utilisation):
    fabric, jobs = realistic(32, 64, utilisation, seed)
    s = summary(fabric, jobs)
    assert s["servers"] == 256
    smallest = min(m.gpus for m in MODELS.values()) // 8 * 2  # a job of ring size 2
    assert utilisation - smallest / 256 <= s["utilisation"] <= utilisation
    used = [h for j in jobs for h in j.hosts()]
    assert len(used) == len(set(used)), "two jobs share a NIC"
    for j in jobs:
        model = MODELS[j.id.rsplit("-", 1)[0]]
        assert len(j.rings) == model.gpus
        n = len(j.rings[0])
        assert n in (2, 4, 8) and all(len(r) == n for r in j.rings)
        assert j.ring_bytes == pytest.approx(model.shard_bytes)
        assert j.compute_s == model.compute_s
        # whole servers: every server of the job gives all its 8 NICs
        servers = {(fabric.hosts[h], int(h.split("_")[1]) // 8) for h in j.hosts()}
        assert len(servers) * 8 == len(j.hosts())
    Problem.build(fabric.as_leaf_spine(), jobs)  # every flow routable


def test_same_seed_same_cluster_other_seed_other():
    a = realistic(8, 16, 0.9, 7, failed_links=2)
    b = realistic(8, 16, 0.9, 7, failed_links=2)
    c = realistic(8, 16, 0.9, 8, failed_links=2)
    doc = lambda fj: (fj[0].to_dict(), [j.to_dict() for j in fj[1]])
    assert doc(a) == doc(b)
    assert doc(a) != doc(c)


def test_placement_is_fragmented_at_high_utilisation():
    fabric, jobs = realistic(32, 64, 0.9, 1)
    s = summary(fabric, jobs)
    assert s["leaves_shared"] > 32, "random servers: most leaves carry several jobs"
    assert s["inter_leaf_flows"] > 0.9 * s["flows"]


def test_failures_links_and_spines():
    rng = np.random.default_rng(5)
    f = cluster(8, 16, 32, rng, failed_links=5, failed_spines=2)
    dead = [s for s in f.planes[0].aggs[0] if all((l, s) in f.down for l in f.leaves)]
    assert len(dead) == 2
    assert len(f.down) == 2 * 16 + 5
    two = f.as_leaf_spine()  # the two-tier view: each leaf's usable spines
    assert not two.uniform()
    masks = set(two.up_mask)
    assert all(a & b for a in masks for b in masks)


def test_ranks_sorted_by_server_name_or_random():
    f1, j1 = realistic(8, 16, 0.9, 3, rank_order="sorted")
    f2, j2 = realistic(8, 16, 0.9, 3, rank_order="random")
    assert {h for j in j1 for h in j.hosts()} == {h for j in j2 for h in j.hosts()}
    order = {h: i for i, h in enumerate(f1.hosts)}
    first = j1[0].rings[0]
    assert first == sorted(first, key=order.get)
    assert [j.rings for j in j1] != [j.rings for j in j2]


@pytest.mark.parametrize("kwargs, match", [
    ({"utilisation": 0}, "utilisation"),
    ({"utilisation": 1.5}, "utilisation"),
    ({"utilisation": 0.9, "models": ["gpt4"]}, "unknown model"),
    ({"utilisation": 0.9, "ring_sizes": [1]}, "ring sizes"),
    ({"utilisation": 0.9, "server_nics": 7}, "whole 7-NIC servers"),
])
def test_bad_placement_input(kwargs, match):
    f = Clos.generate(4, 4, 32)
    with pytest.raises(InputError, match=match):
        place(f, rng=np.random.default_rng(1), **kwargs)


def test_bad_failures():
    with pytest.raises(InputError, match="spines"):
        cluster(4, 4, 8, np.random.default_rng(1), failed_spines=4)
    with pytest.raises(InputError, match="links"):
        cluster(2, 2, 8, np.random.default_rng(1), failed_links=5)


def test_cli_writes_readme_formats(tmp_path):
    r = subprocess.run([sys.executable, "-m", "simulation.placement", "--spines", "8", "--leaves",
                        "16", "--utilisation", "0.9", "--seed", "1", "--failed-links", "3",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    fabric = load_fabric(json.loads((tmp_path / "fabric.json").read_text()))
    jobs = parse_jobs(json.loads((tmp_path / "jobs.json").read_text()), fabric)
    assert len(jobs) == s["jobs"] and len(fabric.down) == 3 == s["links_down"]
    bad = subprocess.run([sys.executable, "-m", "simulation.placement", "--utilisation", "2",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ")


@pytest.mark.parametrize("failures", ["none", "1 spine + 3 links"])
def test_realistic_grid_cell_is_consistent_with_its_bounds(failures):
    from simulation.paper import ALGORITHMS, run_realistic_cell, unsplit_floor
    r = run_realistic_cell({"utilisation": 0.9, "failures": failures, "seed": 1},
                           ALGORITHMS, 20.0, (8, 16, 16))
    frac, floor = r["bounds"]["fractional"]["value"], unsplit_floor(r)
    assert r["bounds"]["unsplit"]["proven"]
    assert 1.0 <= frac <= floor + 1e-9
    for alg, a in r["algorithms"].items():
        assert a["max_link_load"] >= (frac if alg == "split" else floor) - 1e-6, alg
        for j in a["jobs"].values():
            assert j["slowdown"] >= 1 - 1e-9, alg
    assert r["algorithms"]["split"]["max_link_load"] == pytest.approx(frac, abs=1e-6)
    assert r["algorithms"]["ilp"]["max_link_load"] == floor
