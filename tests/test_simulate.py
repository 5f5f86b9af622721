import pytest

from controller.model.clos import Clos
from controller.model.fluid import predict_allreduce
from controller.model.jobs import Job
from controller.planners.plan import make_plan
from simulation.simulate import simulate
from simulation.workloads import MODELS, generate, paper_models
from tests.helpers import fabric, flows_job, ring_job


def test_collision_free_ring_meets_closed_form_ideal():
    f = fabric(4, 8, 2)
    job = ring_job([f"h{i}_0" for i in range(8)], size=8e9)
    result = simulate(f, [job], "greedy", iterations=2)
    ideal = 2 * 7 * (8e9 / 8) / f.link_bps()
    assert result["jobs"]["r"]["ideal_s"] == pytest.approx(ideal)
    assert result["jobs"]["r"]["allreduce_s"] == pytest.approx([ideal, ideal], rel=1e-9)
    assert result["flows"]["fct_ms"]["count"] == 2 * 14 * 8


def test_collisions_scale_time_by_max_link_load():
    # one spine: the 4 flows leaving leaf 0 share the uplink, alpha = 4 -> 4x the ideal
    f = fabric(1, 2, 4)
    job = Job("x", rings=[[f"h0_{k}", f"h1_{k}"] for k in range(4)], ring_bytes=2e9)
    result = simulate(f, [job], "greedy")
    ideal = job.ideal_allreduce_s(f.link_bps())
    assert result["jobs"]["x"]["allreduce_s"][0] == pytest.approx(4 * ideal)


def test_compute_gap_and_start_time_do_not_count():
    f = fabric(2, 2, 1)
    job = Job("g", rings=[["h0_0", "h1_0"]], ring_bytes=1e9, start_s=3.0, compute_s=5.0)
    result = simulate(f, [job], "greedy", iterations=3)
    times = result["jobs"]["g"]["allreduce_s"]
    assert len(times) == 3
    assert times == pytest.approx([job.ideal_allreduce_s(f.link_bps())] * 3)


def test_max_min_unequal_flows_finish_and_release_bandwidth():
    # two flows of different sizes on one uplink: the small one ends at 2*small/C, then the
    # big one runs alone; explicit-flow job ends when the last flow ends
    f = fabric(1, 2, 2)
    job = Job("e", explicit=flows_job([("h0_0", "h1_0"), ("h0_1", "h1_1")]).explicit)
    job.explicit[1] = type(job.explicit[1])("e", "h0_1", "h1_1", 3e9)
    job.explicit[0] = type(job.explicit[0])("e", "h0_0", "h1_0", 1e9)
    result = simulate(f, [job], "greedy")
    c = f.link_bps()
    assert result["jobs"]["e"]["allreduce_s"][0] == pytest.approx(4e9 / c)
    assert result["flows"]["fct_ms"]["min"] == pytest.approx(2e9 / c * 1e3)


def test_split_beats_unsplit_with_failed_spines():
    f = Clos.generate(8, 4, 8, 100.0, failed_spines=2)  # Delta 8 over 6 spines
    # 8 rings, ring k joins host k of every leaf: each leaf sends 8 flows to the next one
    jobs = [Job("d", rings=[[f"h{i}_{k}" for i in range(4)] for k in range(8)], ring_bytes=1e9)]
    ar = {}
    for alg in ("edge-coloring", "split"):
        r = simulate(f, jobs, alg)
        ar[alg] = r["jobs"][jobs[0].id]["allreduce_s"][0]
    assert ar["split"] <= 0.75 * ar["edge-coloring"]


def test_replanning_when_a_job_ends_moves_flows_in_flight():
    # two jobs share leaf 0's uplinks; a short job ends and the long one keeps going
    f = fabric(2, 3, 4)
    long = Job("long", explicit=flows_job([("h0_0", "h1_0"), ("h0_1", "h2_0")], 4e9).explicit)
    short = Job("short", explicit=flows_job([("h0_2", "h1_1"), ("h0_3", "h2_1")], 1e9, "short").explicit)
    long.explicit = [type(x)("long", x.src, x.dst, x.bytes) for x in long.explicit]
    r = simulate(f, [long, short], "greedy")
    assert r["plans"] == 2  # both jobs, then the long one alone
    assert r["jobs"]["long"]["allreduce_s"][0] > 0


def test_predict_allreduce_matches_simulation():
    f = fabric(2, 4, 2)
    jobs = [ring_job([f"h{i}_0" for i in range(4)])]
    plan = make_plan(f, jobs, "ecmp")
    pred = predict_allreduce(plan)
    sim = simulate(f, [Job(j.id, rings=j.rings, ring_bytes=j.ring_bytes) for j in jobs], "ecmp")
    assert pred["r"] == pytest.approx(sim["jobs"]["r"]["allreduce_s"][0])


def test_workload_generator_places_paper_jobs():
    f = Clos.generate(32, 64, 32)
    jobs = generate(f, paper_models(5, 4), 4, seed=1234)
    assert [j.id for j in jobs] == ["bloom-0", "llama2-70b-1", "gpt3-2", "bloom-3", "gpt3-4"]
    used = [h for j in jobs for r in j.rings for h in r]
    assert len(used) == len(set(used))  # no NIC shared
    bloom = jobs[0]
    assert len(bloom.rings) == 48 and all(len(r) == 4 for r in bloom.rings)
    assert bloom.ring_bytes == pytest.approx(MODELS["bloom"].shard_bytes)
    assert 1 + 1.239 <= bloom.start_s <= 10 + 1.239
    # every ring flow crosses leaves (replicas take whole leaves)
    assert all(f.hosts[a] != f.hosts[b] for j in jobs for x in j.flows() for a, b in [(x.src, x.dst)])
    again = generate(f, paper_models(5, 4), 4, seed=1234)
    assert [j.rings for j in again] == [j.rings for j in jobs]


def test_workload_too_big_is_an_error():
    from controller.errors import InputError
    with pytest.raises(InputError, match="the jobs need 512 hosts .* the fabric has 32 hosts"):
        generate(Clos.generate(4, 4, 8), ["llama2-70b"], 4)
    # enough hosts in all (144 for 144) but not in the shape a replica takes
    with pytest.raises(InputError, match="not enough free NICs to place a bloom replica "
                                         r"\(48 NICs on one leaf\); the jobs need 144 hosts"):
        generate(Clos.generate(2, 2, 72), ["bloom"], 3)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("alg", ["split", "annealing", "greedy", "ecmp"])
def test_replanning_with_moves_in_flight_ends_within_the_event_bound(alg):
    # jobs on shared hosts start at different times and re-plan at every start and end, so
    # flows (split ones too) move in flight; every iteration still ends, no faster than ideal
    import random

    from controller.model.fluid import default_max_events
    rng = random.Random(5)
    f = Clos.generate(2, 3, 4, 100.0)  # leaves send more flows than spines: split splits
    hosts = list(f.hosts)
    jobs = [Job(f"j{k}", rings=[rng.sample(hosts, rng.randint(3, 6))], ring_bytes=4e6 * (k + 1),
                start_s=1e-4 * k, compute_s=2e-4) for k in range(5)]
    r = simulate(f, jobs, alg, iterations=2)
    assert r["plans"] > 1
    assert r["events"] <= default_max_events(f, jobs, 2)
    for j in jobs:
        times = r["jobs"][j.id]["allreduce_s"]
        assert len(times) == 2
        assert min(times) >= j.ideal_allreduce_s(f.link_bps()) * (1 - 1e-9)
