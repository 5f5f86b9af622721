"""``benchmarks.jobs_search`` on a small case: both fillings predict the same times, and the
case it measures is the one its docstring names."""
from benchmarks.jobs_search import SIZES, case, prediction
from controller.model import rates
from controller.model.clos import Clos
from simulation.workloads import all_to_all


def test_the_two_fillings_give_the_same_times_and_the_process_keeps_its_own():
    f = Clos.generate(4, 8, 4, failed_spines=2)
    kept = (rates._Filling.kernel, rates._Filling.spent)
    got = prediction(f, all_to_all(f, [6, 5], seed=3))
    assert got["same_times"] is True and got["interpreted_cpu_s"] >= 0
    assert (rates._Filling.kernel, rates._Filling.spent) == kept


def test_the_case_is_ten_all_to_alls_of_8404_flows():
    fabric, jobs = case()
    assert len(jobs) == len(SIZES) == 10
    assert sum(len(j.flows()) for j in jobs) == sum(n * (n - 1) for n in SIZES) == 8404
