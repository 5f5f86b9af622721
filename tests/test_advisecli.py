"""``advisecli.predicted_times``: the jobs search's own prediction, in seconds again, is the
one a new prediction gives (so ``mlroute plan`` does not predict twice)."""
import pytest

from controller.advisecli import predicted_times
from controller.model.clos import Clos
from controller.planners.plan import make_plan
from simulation.workloads import all_to_all


def _fabrics():
    ft = Clos.fat_tree(4)
    return [("leaf-spine, spines down", Clos.generate(4, 8, 4, failed_spines=2)),
            ("fat-tree, a link down", ft.with_down({(ft.planes[0].leaves[0],
                                                     ft.planes[0].aggs[0][0])})),
            ("two planes", Clos.leaf_spine(3, 6, 4, planes=2))]


@pytest.mark.parametrize("name, fab", _fabrics(), ids=[n for n, _ in _fabrics()])
def test_the_search_s_prediction_is_a_new_one(name, fab, monkeypatch):
    jobs = all_to_all(fab, [6, 5], seed=3)
    for j in jobs[:1]:
        j.compute_s = 0.02  # a compute phase: the seconds are not the slowdowns
    plan = make_plan(fab, jobs, "auto", objective="jobs", ilp_time_limit=0)
    fresh = plan.predicted_times()
    assert isinstance(plan.routing.info.get("predicted_slowdown"), dict)
    monkeypatch.setattr(type(plan), "predicted_times",
                        lambda self, on_event=None: pytest.fail("predicted again"))
    got = predicted_times(plan)
    assert got.keys() == fresh.keys()
    for jid, t in fresh.items():
        assert got[jid] == pytest.approx(t, rel=1e-9, abs=1e-12)


def test_a_plan_without_the_search_s_prediction_is_predicted():
    fab = Clos.generate(4, 8, 4, failed_spines=2)
    plan = make_plan(fab, all_to_all(fab, [6, 5], seed=3), "greedy")
    assert predicted_times(plan) == plan.predicted_times()
