"""One fabric model offline too (issues 37, 60): every fabric document loads as a ``Clos``, a
generated leaf-spine is one, and ``make_plan`` is the one entry point, each name's one planner
on the Clos problem (on a single two-tier plane its private two-tier kernel where it has one),
with the same plans and documents as when the offline tools ran the two-tier planners there.

What must hold: a two-tier document loads as the Clos of the ``Fabric`` it reads as (that
model's checks and messages); ``Clos.generate`` builds the paper's leaf-spine itself (failed
spines, wiring); a plan on the Clos equals the plan on its ``Fabric`` and the two-tier
kernel's plan of the same jobs; ``run_options`` gives each planner the run options it takes,
in one dialect on every fabric, and refuses the others; the fluid model runs a Clos with
either kind of plan.
"""
import json

import pytest

from controller import cli
from controller.errors import InputError
from controller.model.clos import Clos, as_clos, load_fabric
from controller.model.fluid import FluidSimulator, predict_allreduce
from controller.model.problem import Problem
from controller.planners.plan import (
    make_plan,
    planner_options,
    run_options,
    run_planner,
    run_shape,
    two_tier_plan,
)
from controller.planners.registry import CLOS, TWO_TIER
from simulation.simulate import simulate
from tests.helpers import ring_job

RINGS = [ring_job([f"h{i}_0" for i in range(6)], size=4e6, jid="a"),
         ring_job(["h0_1", "h3_1", "h1_1", "h4_1", "h2_1", "h5_1"], size=1e6, jid="b")]


def without_runtime(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in ("runtime_ms", "info")}


# ---- loading and generating -----------------------------------------------------------------
def test_every_document_loads_as_a_clos_and_a_two_tier_one_is_its_fabric():
    made = Clos.generate(3, 6, 2, failed_spines=1, wiring=True).as_leaf_spine()
    got = load_fabric(json.loads(json.dumps(made.to_dict())))
    assert got.is_clos and got.as_leaf_spine() == made
    assert got.to_dict() == as_clos(made).to_dict()
    for clos in (Clos.fat_tree(4), Clos.leaf_spine(2, 3, 1, planes=2)):
        assert load_fabric(clos.to_dict()).to_dict() == clos.to_dict()


@pytest.mark.parametrize("change, message", [
    ({"spines": []}, "fabric: 'spines' must be a non-empty list of non-empty names"),
    ({"hosts": {"h0_0": "lx"}}, "fabric: host h0_0 is attached to unknown leaf 'lx'"),
    ({"down": [["l0", "l1"]]}, "fabric: 'down' names 'l0' and 'l1', which are not linked"),
    ({"link_gbps": 0}, "fabric: link_gbps must be a positive number, got 0"),
])
def test_a_two_tier_document_is_refused_with_what_is_wrong(change, message):
    """One loader (``Clos.from_dict``) for every document: a two-tier one's errors name the
    problem as a three-tier one's do."""
    doc = {**Clos.generate(2, 2, 1).as_leaf_spine().to_dict(), **change}
    with pytest.raises(InputError) as e:
        load_fabric(doc)
    assert str(e.value) == message


def test_generate_builds_the_papers_leaf_spine_as_documented():
    """Names, failed spines (every link of the last ones) and the wiring docs/reference/
    formats.md documents: spines 0x10000 + j, leaves 0x20000 + i, leaf i reaches spine j on
    port j + 1 and host k on port S + k + 1, spine j leaf i on port i + 1, host k of leaf i
    10.<i/256>.<i%256>.<k+1> and 02:00:00:<i/256>:<i%256>:<k+1>; its two-tier view gives it
    back (``as_clos``)."""
    c = Clos.generate(3, 300, 2, failed_spines=1, wiring=True)
    p = c.planes[0]
    assert p.aggs == [["s0", "s1", "s2"]] and p.leaves == [f"l{i}" for i in range(300)]
    assert c.down == {(f"l{i}", "s2") for i in range(300)}
    assert c.host_leaves["h299_1"] == ("l299",)
    assert (c.dpids["s2"], c.dpids["l299"]) == (0x10002, 0x20000 + 299)
    assert (c.port("l5", "s1"), c.port("l5", "h5_1"), c.port("s1", "l5")) == (2, 5, 6)
    assert (c.host_ip["h299_1"], c.host_mac["h299_1"]) == ("10.1.43.2", "02:00:00:01:2b:02")
    two = c.as_leaf_spine()
    assert two.spines == ["s0", "s1", "s2"] and as_clos(two) is c
    assert as_clos(c.with_down(set()).as_leaf_spine()).down == set()
    assert Clos.generate(2, 2, 0).host_leaves == {}
    with pytest.raises(InputError, match="cannot fail 5 of 4 spines"):
        Clos.generate(4, 2, 1, failed_spines=5)


def test_the_fabric_command_writes_a_leaf_spine_as_before(capsys):
    assert cli.main(["fabric", "--spines", "3", "--leaves", "11", "--failed-spines", "1"]) == 0
    assert capsys.readouterr().out == json.dumps(Clos.generate(3, 11, 2, 100.0, 1).as_leaf_spine().to_dict(),
                                                 indent=1) + "\n"


# ---- the one entry point --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["greedy", "ecmp", "edge-coloring", "annealing", "ilp",
                                  "split", "auto", "jobs"])
def test_a_plan_on_a_two_tier_clos_is_the_plan_on_its_fabric(name):
    """And the plan the two-tier kernel makes of the same jobs (``run_planner``: the offline
    tools' fast path before issue 60): the same routes and document."""
    f = Clos.generate(3, 6, 2, failed_spines=1).as_leaf_spine()
    c = as_clos(f)
    opts = planner_options(name, ilp_time_limit=5.0)
    on_clos, on_fabric = make_plan(c, RINGS, name, **opts), make_plan(f, RINGS, name, **opts)
    assert on_clos.problem.fabric is c and on_fabric.problem.fabric is c  # as_clos(f): cached
    assert without_runtime(on_clos.to_dict()) == without_runtime(on_fabric.to_dict())
    assert predict_allreduce(on_clos) == predict_allreduce(on_fabric)
    problem = Problem.build(f, RINGS)
    kernel = two_tier_plan(name, problem, run_planner(problem, name, **opts)[0], 0.0, c)
    assert without_runtime(on_clos.to_dict()) == without_runtime(kernel.to_dict())


def test_a_plan_on_another_clos_is_the_clos_planners():
    c = Clos.leaf_spine(3, 6, 2, bundle=2)
    assert c.as_leaf_spine() is None
    got = make_plan(c, RINGS, "annealing", seed=7, salt=3)
    want = make_plan(c, RINGS, "annealing", salt=3, seed=7)
    assert without_runtime(got.to_dict()) == without_runtime(want.to_dict())


def test_run_options_are_one_dialect_on_every_fabric():
    """Each planner takes the run options of its registry entry, whatever the fabric (the
    shape only names the controller's default objective, ``cli.default_objective``)."""
    f = Clos.generate(2, 4, 1)
    t = Clos.fat_tree(4)
    assert run_shape(f) == TWO_TIER and run_shape(t) == CLOS
    for fab in (f, t):
        assert run_options(fab, "split", seed=3, objective="jobs", max_parts=2) == (
            "split", "jobs", {"objective": "jobs", "max_parts": 2})
        assert run_options(fab, "auto", ilp_time_limit=0) == (
            "auto", "flows", {"ilp_time_limit": 0, "objective": "flows"})
        assert run_options(fab, "annealing", seed=3, salt=2, ilp_time_limit=7) == (
            "annealing", "flows", {"seed": 3})
        assert run_options(fab, "ilp", ilp_time_limit=7) == ("ilp", "flows", {"time_limit": 7})
        jobs = {"ilp_time_limit": 60.0, "objective": "jobs"}  # one run: auto's of objective jobs
        assert run_options(fab, "auto", objective="jobs") == ("auto", "jobs", jobs)
        assert run_options(fab, "jobs") == ("jobs", "jobs", jobs)
        assert run_options(fab, "split", max_parts=0).options["max_parts"] is None  # no bound
    assert run_options(f, "split", seed=3, objective="jobs", max_parts=2).options == \
        planner_options("split", 3, 0, 60.0, "jobs", 2)


@pytest.mark.parametrize("args, message", [
    (("split",), "max_parts must be an integer >= 0"),
    (("magic",), "unknown algorithm 'magic'"),
    (("magic", None), "unknown algorithm 'magic'"),
    (("greedy", None), "objective 'jobs' needs algorithm 'auto' or 'split'"),
])
@pytest.mark.parametrize("fabric", [Clos.generate(2, 4, 1), Clos.fat_tree(4)],
                         ids=["two-tier", "fat-tree"])
def test_an_option_a_planner_cannot_take_is_refused(fabric, args, message):
    name, max_parts = args[0], (args[1] if len(args) > 1 else -1)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_options(fabric, name, objective="jobs" if len(args) > 1 else None,
                    max_parts=max_parts)


# ---- the fluid model on a Clos --------------------------------------------------------------
def test_the_fluid_model_runs_a_two_tier_clos_on_its_fast_path_plans():
    f = Clos.generate(3, 6, 2, failed_spines=1).as_leaf_spine()
    c = as_clos(f)
    for name in ("greedy", "split"):
        got, want = simulate(c, RINGS, name, iterations=2), simulate(f, RINGS, name, iterations=2)
        assert got["jobs"] == want["jobs"] and got["events"] == want["events"]
    plan = make_plan(c, RINGS, "greedy")  # a Clos plan on the same fabric: its link ids
    sim = FluidSimulator(c, RINGS, lambda _: plan)
    assert sim.run()["jobs"]["a"]["allreduce_s"][0] > 0 and sim.indexed is c
