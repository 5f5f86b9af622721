"""The job-aware tie-break of ``auto`` by flow counts (issue 74, point 5;
``planners/clos_tiebreak.py``): flows of a leaf pair exchange their paths, every link keeps
the flows it had, and the jobs' predicted slowdowns only go down."""
import numpy as np
import pytest

from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem, link_loads
from controller.planners.clos_auto import clos_auto
from controller.planners.clos_jobs import clos_slowdowns
from controller.planners.clos_objective import auto_by_objective
from controller.planners.clos_tiebreak import groups, tiebreak
from simulation.workloads import byte_mix, pipeline
from tests.clos_checks import permutation


def mean(values: dict) -> float:
    return sum(values.values()) / len(values)


CASES = [(f"byte mix {seed} dead {dead}", 4, 8, 8, dead, lambda f, s=seed: byte_mix(f, 4, 16, seed=s))
         for seed in (3, 6, 10) for dead in (0, 1)] + \
        [(f"pipeline {seed}", 4, 8, 8, 1, lambda f, s=seed: pipeline(f, [8] * 4, seed=s))
         for seed in (0, 2)]


@pytest.mark.parametrize("name, spines, leaves, hosts, dead, jobs", CASES,
                         ids=[c[0] for c in CASES])
def test_every_link_keeps_its_flows_and_no_slowdown_rises(name, spines, leaves, hosts, dead,
                                                          jobs):
    f = Clos.generate(spines, leaves, hosts, 100.0, dead)
    p = ClosProblem.build(f, jobs(f), skip_unroutable=True)
    before = clos_auto(p, ilp_time_limit=0)
    after = tiebreak(p, before, work=1e9)
    assert np.array_equal(link_loads(p, after, hosts=True), link_loads(p, before, hosts=True))
    s0, s1 = clos_slowdowns(p, before), clos_slowdowns(p, after)
    assert max(s1.values()) <= max(s0.values()) * (1 + 1e-6)
    assert mean(s1) <= mean(s0) + 1e-9
    info = after.info["tiebreak"]
    assert (after is before) == (info["kept"] is None)
    if info["kept"]:
        assert mean(s1) == pytest.approx(info["mean_after"], abs=1e-6) and mean(s1) < mean(s0)


def test_the_patterns_byte_mix_with_a_spine_down_is_lowered_by_the_flows_objective():
    """The patterns bench's byte mix with a spine down: 3.2155 by flow counts alone, lower
    with the tie-break, the max link load as it was; and a pipeline of 4 jobs from 2.25."""
    f = Clos.generate(4, 8, 8, 100.0, 1)
    for jobs, was in ((byte_mix(f, 4, 16, seed=6), 3.2155), (pipeline(f, [8] * 4, seed=2), 2.25)):
        p = ClosProblem.build(f, jobs, skip_unroutable=True)
        counts = clos_auto(p, ilp_time_limit=0)
        r = auto_by_objective(p, objective="flows")
        assert mean(clos_slowdowns(p, counts)) == pytest.approx(was, abs=1e-4)
        assert mean(clos_slowdowns(p, r)) < was - 0.1, r.info["tiebreak"]
        assert r.info["max_link_load"] == counts.info["max_link_load"]


def test_a_permutation_costs_no_prediction():
    f = Clos.fat_tree(8)
    p = ClosProblem.build(f, permutation(f, 2))
    r = auto_by_objective(p, objective="flows")
    assert r.info["tiebreak"] == {"groups": 0, "predicted": 0, "kept": None}
    assert groups(p, r) == []


def test_the_tiebreak_stops_at_its_budget():
    f = Clos.generate(4, 8, 8, 100.0, 1)
    p = ClosProblem.build(f, byte_mix(f, 4, 16, seed=6), skip_unroutable=True)
    r = clos_auto(p, ilp_time_limit=0)
    middles = list(r.middle)
    out = tiebreak(p, r, work=0)
    assert out.middle == middles and out.info["tiebreak"]["stopped"] == "budget"
    assert out.info["tiebreak"]["kept"] is None


def test_the_benchmark_compares_both_in_one_run(tmp_path):
    from benchmarks.tiebreak import main
    out = tmp_path / "tiebreak.json"
    assert main(["--quick", "--out", str(out)]) == 0
    import json
    doc = json.loads(out.read_text())
    s = doc["summary"]
    assert s["loads_equal"] and s["higher_mean"] == s["higher_worst"] == 0
    assert s["lower_mean"] >= 2 and s["with"]["mean_sum"] < s["without"]["mean_sum"]
