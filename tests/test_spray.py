"""The spraying baseline (controller/planners/spray.py): per-packet spraying over every alive
path as the fluid LP bound, with a goodput penalty; beside every planner in ``compare``."""
import itertools
import json
from unittest import mock

import numpy as np
import pytest
from scipy.optimize import linprog

from controller.cli import main as cli_main
from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem
from controller.model.fluid import predict_allreduce
from controller.model.iteration import TOLERANCE
from controller.model.jobs import Flow, Job
from controller.model.problem import Problem
from controller.planners import lp
from controller.planners.clos_split import fractional_optimum
from controller.planners.plan import make_plan
from controller.planners.registry import names
from controller.planners.spray import (
    coupled_rates,
    slowest_goodput_bps,
    spray,
    spray_plan,
    sprayed_jobs,
)
from simulation.simulate import simulate
from tests.test_cli import compare_table

ELEPHANT = Job("elephant", explicit=[Flow("elephant", "h0_0", "h2_0", 4e9)])


def _fast_nics(fabric: Clos, host_gbps: float = 400.0) -> Clos:
    """``fabric`` with NICs faster than its fabric links: one flow is more than a link."""
    doc = fabric.to_dict()
    doc["link_gbps"] = {"host": host_gbps, "leaf": 100.0, "core": 100.0}
    return Clos.from_dict(doc)


def _ring(fabric: Clos, seed: int, size: int = 8) -> Job:
    hosts = [h for h in fabric.host_leaves if h not in ("h0_0", "h2_0")]
    order = np.random.Generator(np.random.PCG64(seed)).permutation(hosts)[:size]
    return Job(f"ring{seed}", rings=[list(order)], ring_bytes=1e9)


def _two_planes_link_down() -> Clos:
    return Clos.leaf_spine(4, 4, 2, planes=2).with_down({("l0_p0", "s0_p0")})


# (name, fabric): a leaf-spine and a k = 4 fat-tree with 400G NICs on 100G links, two planes
# of a leaf-spine with a link down (a flow on one plane has one port; sprayed, both)
CASES = {"leaf-spine": lambda: _fast_nics(Clos.leaf_spine(4, 4, 2)),
         "fat-tree k=4": lambda: _fast_nics(Clos.fat_tree(4)),
         "two planes, a link down": _two_planes_link_down}


def _jobs(fabric: Clos) -> list[Job]:
    return [ELEPHANT, _ring(fabric, 1), _ring(fabric, 2, 6)]


def path_lp_alpha(problem: ClosProblem) -> float:
    """The fluid LP written out independently: a variable per flow and path (every alive
    member of every hop enumerated, host links included), min z with every directed link
    carrying at most z flows per unit; the flows within a leaf fixed on their plane."""
    L = problem.links
    base = np.zeros(L.count)
    for pos, q in problem.intra.items():
        f = problem.flows[pos]
        base[L.host_up[q, L.host_id[f.src]]] += 1
        base[L.host_down[q, L.host_id[f.dst]]] += 1
    paths, owner = [], []
    for i in range(len(problem)):
        for q in range(len(problem.fabric.planes)):
            hops, usable = problem.options(i, q)
            up, down = problem.host_links(i, q)
            for m in np.flatnonzero(usable):
                alive = [[x for x in h[m] if x >= 0 and L.alive[x]] for h in hops]
                for members in itertools.product(*alive):
                    paths.append([up, *members, down])
                    owner.append(i)
    V = len(paths)
    used = sorted({y for p in paths for y in p} | set(np.flatnonzero(base)))
    row = {y: k for k, y in enumerate(used)}
    a_ub = np.zeros((len(used), V + 1))
    for v, p in enumerate(paths):
        for y in p:
            a_ub[row[y], v] += 1.0 / L.units[y]
    a_ub[:, V] = -1.0
    b_ub = -np.array([base[y] / L.units[y] for y in used])
    a_eq = np.zeros((len(problem), V + 1))
    a_eq[owner, np.arange(V)] = 1.0
    c = np.zeros(V + 1)
    c[V] = 1.0
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=np.ones(len(problem)),
                  bounds=[(0, None)] * (V + 1), method="highs")
    assert res.status == 0
    return float(res.x[V])


@pytest.mark.parametrize("case", CASES)
def test_spray_reaches_the_fluid_lp_optimum(case):
    """alpha, the max load over every link of the sprayed routing (ports included), is the
    optimum of the path LP written out independently; the slowest flow sends at the leaf
    rate over it, and every flow's shares sum to 1."""
    fabric = CASES[case]()
    problem = ClosProblem.build(fabric, _jobs(fabric))
    r = spray(problem)
    assert r.info["alpha"] == pytest.approx(path_lp_alpha(problem), abs=1e-6)
    assert all(sum(w for *_, w in parts) == pytest.approx(1.0) for parts in r.parts)
    plan = spray_plan(fabric, _jobs(fabric), penalty=0.0)
    assert slowest_goodput_bps(plan) == pytest.approx(fabric.link_bps() / r.info["alpha"])


@pytest.mark.parametrize("case", CASES)
def test_spraying_is_never_behind_any_plan_and_beats_an_unsplit_elephant(case):
    """No plan of any registered planner gives its slowest flow more than spraying (the
    coupled model: a flow's parts share one rate), and every unsplit plan gives the elephant,
    larger than one link, less than spraying does."""
    fabric = CASES[case]()
    jobs = _jobs(fabric)
    plan = spray_plan(fabric, jobs, penalty=0.0)
    best = slowest_goodput_bps(plan)
    elephant = coupled_rates(plan)[0]  # the first flow of the first job
    for alg in names(fabric, distinct=True):
        other = make_plan(fabric, jobs, alg)
        rates = coupled_rates(other)
        assert rates.min() <= best * (1 + 1e-9), alg
        if alg != "split":
            assert rates[0] < elephant * (1 - 1e-6), alg


@pytest.mark.parametrize("case", CASES)
def test_ecmp_is_never_better_than_spraying(case):
    fabric = CASES[case]()
    jobs = _jobs(fabric)
    plan = spray_plan(fabric, jobs, penalty=0.0)
    for alg in ("ecmp", "ecmp-polarised"):
        for salt in range(3):
            ecmp = make_plan(fabric, jobs, alg, salt=salt)
            assert ecmp.to_dict()["max_link_load"] >= plan.to_dict()["max_link_load"] - 1e-9
            assert coupled_rates(ecmp).min() <= slowest_goodput_bps(plan) * (1 + 1e-9)


def test_the_fabric_load_is_the_split_lp_optimum():
    """Over the fabric links spraying meets the split LP's optimum where that is above its
    floor of one flow per link, on two tiers (``lp``) and on any Clos (``clos_split``)."""
    fab = Clos.generate(4, 8, 4, failed_spines=1)
    rng = np.random.Generator(np.random.PCG64(3))
    jobs = [Job(f"r{k}", rings=[list(rng.permutation(list(fab.host_leaves))[:12])],
                ring_bytes=1e9) for k in range(4)]
    sprayed = spray(ClosProblem.build(fab, jobs)).info["max_link_load"]
    two = lp.fractional_optimum(Problem.build(fab.as_leaf_spine(), jobs))
    clos = fractional_optimum(ClosProblem.build(fab, jobs))
    assert two > 1 and sprayed == pytest.approx(two, abs=1e-6) == pytest.approx(clos, abs=1e-6)


def test_the_penalty_costs_goodput_not_load():
    """A penalty p sends every byte 1 / (1 - p) times: the same shares and loads, All-Reduce
    times 1 / (1 - p) longer, the slowest goodput (1 - p) of the bound."""
    fabric = _two_planes_link_down()
    jobs = _jobs(fabric)
    free, taxed = spray_plan(fabric, jobs, 0.0), spray_plan(fabric, jobs, 0.05)
    assert taxed.to_dict()["max_link_load"] == free.to_dict()["max_link_load"]
    t0, t1 = free.predicted_times(), taxed.predicted_times()
    assert all(t1[j] == pytest.approx(t0[j] / 0.95) for j in t0)
    assert slowest_goodput_bps(taxed) == pytest.approx(0.95 * slowest_goodput_bps(free))
    assert sprayed_jobs(jobs, 0.05)[0].explicit[0].bytes == pytest.approx(4e9 / 0.95)
    for bad in (-0.1, 1.0, True, "0.1"):
        with pytest.raises(InputError, match="penalty"):
            sprayed_jobs(jobs, bad)


def test_compare_shows_spray_beside_every_planner(tmp_path, capsys):
    """``compare`` prints the row spray after the planners by default (its objective "LP
    bound", its note naming the penalty), takes it in --algorithms and refuses a bad
    --spray-penalty before planning."""
    fab, jobs = tmp_path / "fabric.json", tmp_path / "jobs.json"
    assert cli_main(["fabric", "--fat-tree", "4", "--out", str(fab)]) == 0
    ring = _ring(Clos.fat_tree(4), 1, 16)
    jobs.write_text(json.dumps({"jobs": [ring.to_dict()]}))
    capsys.readouterr()
    assert cli_main(["compare", "--fabric", str(fab), "--jobs", str(jobs),
                     "--algorithms", "ecmp,auto,spray", "--spray-penalty", "0.1"]) == 0
    out = capsys.readouterr().out
    rows = compare_table(out)
    assert list(rows) == ["ideal", "ecmp", "auto", "spray"]
    assert rows["spray"]["objective"] == "LP bound"
    assert rows["spray"]["max"] <= rows["auto"]["max"] <= rows["ecmp"]["max"]
    assert rows["spray"]["slowest"] == pytest.approx(0.9 * 100, rel=1e-3)  # k=4: alpha 1
    assert "--spray-penalty 0.1" in out
    assert cli_main(["compare", "--fabric", str(fab), "--jobs", str(jobs),
                     "--spray-penalty", "1"]) == 2
    assert "penalty" in capsys.readouterr().err


@pytest.mark.parametrize("case", CASES)
def test_the_fluid_simulator_sprays_as_one_transfer(case):
    """The fluid simulator's coupled mode (a split flow one transfer) gives a spray plan the
    rings' times of the shared prediction; the elephant beside them is within 2 x TOLERANCE
    (5.7% and 6.2% slower in the fluid model on the leaf-spine and the fat-tree, where the
    shared prediction averages the rings' steps that it shares links with). Nothing changes
    on an unsplit plan."""
    fabric = CASES[case]()
    jobs = _jobs(fabric)
    plan = spray_plan(fabric, jobs, penalty=0.0)
    fluid, shared = predict_allreduce(plan, coupled=True), plan.predicted_times()
    assert {j: fluid[j] for j in fluid if j != "elephant"} == pytest.approx(
        {j: shared[j] for j in shared if j != "elephant"}, rel=TOLERANCE)
    assert fluid["elephant"] == pytest.approx(shared["elephant"], rel=2 * TOLERANCE)
    auto = make_plan(fabric, jobs, "auto")
    assert predict_allreduce(auto, coupled=True) == predict_allreduce(auto)


def test_simulate_sprays_the_elephant_over_every_path():
    """``simulate`` runs spray in the fluid simulator: the elephant, 4x a fabric link, takes
    a quarter of auto's time (it sprays over the 4 spines), the penalty's bytes included,
    against the jobs' own ideal."""
    fabric = CASES["leaf-spine"]()
    jobs = [ELEPHANT]
    sprayed = simulate(fabric, jobs, "spray", iterations=2, penalty=0.05)
    planned = simulate(fabric, jobs, "auto", iterations=2)
    assert sprayed["penalty"] == 0.05 and sprayed["algorithm"] == "spray"
    mine, theirs = sprayed["jobs"]["elephant"], planned["jobs"]["elephant"]
    assert mine["ideal_s"] == theirs["ideal_s"] == pytest.approx(4e9 / fabric.link_bps("host"))
    assert mine["allreduce_s"] == pytest.approx([t / 4 / 0.95 for t in theirs["allreduce_s"]])


@pytest.mark.slow
def test_make_paper_grids_have_the_spray_row():
    """The realistic grid of ``make paper`` (simulation.paper) has a row spray at the split LP's
    optimum (above one flow per link) and slowdowns at its penalty; the three-tier grid's
    sensitivity scales them by (1 - penalty) / (1 - p) and ties each algorithm at the
    break-even penalty."""
    from simulation.paper import run_realistic_cell
    from simulation.paper_clos import spray_sensitivity
    r = run_realistic_cell({"utilisation": 0.9, "failures": "1 spine + 3 links", "seed": 1},
                           ["auto", "spray"], 20.0, (8, 16, 16), penalty=0.02)
    frac, spray_row = r["bounds"]["fractional"]["value"], r["algorithms"]["spray"]
    assert frac > 1 and spray_row["max_link_load"] == pytest.approx(frac, abs=1e-6)
    assert spray_row["info"]["method"] == "spray" and spray_row["info"]["penalty"] == 0.02
    rows = [{"fabric": "f", "failure": "d", "algorithm": a, "slowdown": j["slowdown"]}
            for a, x in r["algorithms"].items() for j in x["jobs"].values()]
    s = spray_sensitivity(rows, 0.02)
    mean = lambda a: np.mean([x["slowdown"] for x in rows if x["algorithm"] == a])
    assert s["mean_slowdown_at"]["0.02"] == pytest.approx(mean("spray"), abs=1e-4)
    assert s["mean_slowdown_at"]["0.1"] == pytest.approx(mean("spray") * 0.98 / 0.9, abs=1e-4)
    p = s["break_even_penalty"]["f"]["d"]["auto"]
    assert mean("spray") * 0.98 / (1 - p) == pytest.approx(mean("auto"), rel=1e-3)


@pytest.mark.slow
def test_every_realistic_cell_of_make_paper_sprays():
    """Three of the 24 realistic 64 x 32 cells of ``make paper`` failed (a later level's LP
    infeasible, or not finished, by the interior point's own error with the rows at a level
    held at exactly its z): spray answers on them, at the split LP's optimum."""
    from simulation.paper import FAILURES
    from simulation.placement import realistic
    for utilisation, failures, seed in [(0.8, "3 links", 1), (0.9, "1 spine + 3 links", 1)]:
        fabric, jobs = realistic(32, 64, utilisation, seed, *FAILURES[failures], 32)
        info = spray_plan(fabric, jobs).routing.info
        frac = fractional_optimum(ClosProblem.build(fabric, jobs, skip_unroutable=True))
        assert info["max_link_load"] == pytest.approx(frac, abs=1e-5), (failures, info)
        assert info["levels"] > 1  # a level after the bound may end them (lp_stopped)


def test_a_later_level_the_solver_does_not_finish_keeps_the_level_before():
    """The lexicographic levels after the first refine the spread below the bound: one the
    solver fails on, also with the held rows relaxed, ends them with the shares of the level
    before, and says so."""
    from controller.planners import spray as spray_module
    fab = Clos.generate(4, 8, 4, failed_spines=1)
    rng = np.random.Generator(np.random.PCG64(3))
    jobs = [Job(f"r{k}", rings=[list(rng.permutation(list(fab.host_leaves))[:12])],
                ring_bytes=1e9) for k in range(4)]
    problem = ClosProblem.build(fab, jobs)
    whole = spray(problem).info
    solve = spray_module._LexLP._lp
    calls = []

    def failing_after_the_first(self, limit, time_limit):
        calls.append(1)
        if len(calls) > 1:
            raise InputError("spray: the LP ended with status 4 (a stand-in)")
        return solve(self, limit, time_limit)

    with mock.patch.object(spray_module._LexLP, "_lp", failing_after_the_first):
        cut = spray(problem).info
    assert whole["levels"] > 1 and cut["levels"] == 1
    assert len(calls) == 3  # the second level, then again with the held rows relaxed
    assert "status 4" in cut["lp_stopped"]
    assert cut["lp_alpha"] == whole["lp_alpha"]  # the bound stands
    calls.clear()
    with mock.patch.object(spray_module._LexLP, "_lp", lambda *a: (_ for _ in ()).throw(
            InputError("spray: the LP ended with status 2"))), pytest.raises(InputError):
        spray(problem)  # the first level is the bound: no answer without it
