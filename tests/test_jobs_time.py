"""Issue 74, point 3: the jobs search within a time budget that scales with the flows. A
mixture of experts of 8,448 flows on 32 x 16 spent 862 s in 60 predictions of about 14 s
each (the budget counted predictions, not their cost). Now every prediction, start and
search of ``clos_jobs`` runs within ``jobs_stop.time_budget`` of the flows (a
``jobs_stop.Clock``, CPU seconds): none is started that the longest so far says cannot end
in time, one that runs past the deadline stops at its next event, and the plan's ``info``
says how long it took, within which budget, where and why it stopped. On a fake clock (one tick per
reading), so these hold on any machine; wall-clock figures are the benchmarks'."""
import pytest

from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem
from controller.planners.clos_auto import clos_auto
from controller.planners.clos_jobs import clos_jobs
from controller.planners.clos_loads import score
from controller.planners.jobs_stop import (
    JOB_TIME_PER_FLOW_S,
    JOB_TIME_S,
    Clock,
    OutOfTime,
    time_budget,
)
from simulation.workloads import byte_mix


class Ticks:
    """A clock that moves one second each time it is read."""

    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def byte_mixes():
    f = Clos.leaf_spine(4, 8, 8)  # a single two-tier plane: the kernel's search is a start
    return ClosProblem.build(f, byte_mix(f, 4, 16, seed=5), skip_unroutable=True)


def test_the_budget_scales_with_the_flows_and_is_reported():
    p = byte_mixes()
    info = clos_jobs(p).info
    assert info["time_budget_s"] == pytest.approx(JOB_TIME_S + JOB_TIME_PER_FLOW_S * len(p))
    assert time_budget(8448) == pytest.approx(JOB_TIME_S + 8448 * JOB_TIME_PER_FLOW_S) \
        and time_budget(8448) < 10.0
    assert 0 < info["time_s"] <= info["time_budget_s"] and info["stopped_at"]
    assert info["all_predictions"] >= info["predictions"] > 0


def test_no_time_for_the_first_prediction_gives_autos_routing_unscored():
    p = byte_mixes()
    r = clos_jobs(p, clock=Clock(0.0, Ticks()))
    info = r.info
    assert info["stopped"] == "time budget" and info["stopped_at"] == "start auto"
    assert info["mean_slowdown"] is None and info["searched"] == [] and info["starts"] == {}
    assert info["skipped_starts"] == ["auto"] and info["all_predictions"] == 0
    assert r.middle == clos_auto(p).middle


def test_a_prediction_past_the_deadline_stops_at_its_next_event():
    clock = Clock(5.0, Ticks())
    events = []

    def predict(on_event):
        for _ in range(100):
            on_event()
            events.append(1)
        return "done"
    with pytest.raises(OutOfTime):
        clock.run(predict)
    assert len(events) < 10 and clock.out and not clock.affords()


def test_every_budget_is_respected_and_reported():
    """A sweep of budgets on the fake clock: the search ends within each (one reading late at
    most), says where, and never ends behind the start it scored; some budgets end it in the
    two-tier kernel's search (a skipped start), some in the search."""
    p = byte_mixes()
    full = clos_jobs(p, clock=Clock(1e9, Ticks())).info
    assert full["stopped"] in ("local optimum", "budget")
    where = set()
    for seconds in range(0, int(full["time_s"]) + 400, 211):
        r = clos_jobs(p, clock=Clock(seconds, Ticks()))
        info = r.info
        assert info["time_s"] <= seconds + 2, (seconds, info["time_s"])
        assert score(p, r)[0] <= info["max_link_load_cap"] + 1e-9
        if info["mean_slowdown"] is not None:
            assert info["mean_slowdown"] <= info["start_mean_slowdown"] + 1e-9
        if seconds < full["time_s"]:
            assert info["stopped"] == "time budget", (seconds, info["stopped"])
        where.add(info["stopped_at"].split(" ")[0])
        if "kernel" in info["skipped_starts"]:
            where.add("kernel")
    assert {"start", "search", "kernel"} <= where, where


def test_off_the_request_path_too():
    p = byte_mixes()
    start = clos_auto(p)
    r = clos_jobs(p, start=start, clock=Clock(3.0, Ticks()))
    assert r.info["stopped"] == "time budget" and r.info["time_s"] <= 5.0
    assert r.middle == start.middle


def test_the_filling_s_one_time_load_is_not_a_prediction_s_cost():
    """``Clock.run`` extrapolates from the longest prediction; the compiled filling's load
    (once per process, about 1 s) inside one is not what the next one costs. A clock of
    its own (the fake ones here) subtracts only what its ``loads`` says, never this
    process's real load."""
    import time

    from controller.model.rates import load_seconds
    loaded = [0.0]
    assert Clock(1.0).loads is load_seconds
    assert Clock(1.0, now=Ticks()).loads() == 0.0
    clock = Clock(100.0, now=Ticks(), loads=lambda: loaded[0])
    assert clock.now is not time.process_time

    def predict(tick):
        loaded[0] += 5.0  # five of the ticks below were the load
        for _ in range(8):
            clock.now()
        return {}
    clock.run(predict)
    assert clock.longest == pytest.approx(9.0 - 5.0)
    clock.run(lambda tick: [clock.now() for _ in range(2)] and {})  # compiled: cheaper
    assert clock.longest == pytest.approx(3.0)  # it replaces the one that switched
    clock.run(lambda tick: [clock.now() for _ in range(1)] and {})
    assert clock.longest == pytest.approx(3.0)  # then the longest, as before


def test_an_expired_clock_stops_the_ejection_chains():
    """``Freeing`` asks ``expired`` before each flow, partner and chain node: with the time
    up, a job is left as it was (no move, the routing unchanged)."""
    from controller.model.jobs import parse_job
    from controller.planners.clos_jobmean import Freeing
    from controller.planners.clos_jobs import clos_slowdowns
    from controller.planners.clos_loads import ClosLoads, empty_routing
    fab = Clos.leaf_spine(2, 3, 2)  # the module doctest's case: freeing moves two flows
    a = {"id": "a", "flows": [{"src": "h0_0", "dst": f"h2_{k}", "bytes": 1e8} for k in (0, 1)]}
    ring = {"id": "r", "collective": "ring_allreduce", "ranks": ["h0_1", "h1_0"], "bytes": 1e9}
    p = ClosProblem.build(fab, [parse_job(d, fab) for d in (a, ring)])

    def routed():
        r, loads = empty_routing(len(p)), ClosLoads(p)
        for i, m in enumerate([0, 1, 0, 0]):
            r.plane[i], r.middle[i], r.path[i] = 0, m, loads.pick(i, 0, m)
            loads.add(i, 0, r.path[i])
        return r, loads
    r, loads = routed()
    assert Freeing(p, r, loads, 2.0).free([2]) and r.middle == [0, 0, 1, 0]
    r, loads = routed()
    before = clos_slowdowns(p, r)
    clock = Clock(0.5, now=Ticks())
    assert Freeing(p, r, loads, 2.0, expired=clock.expired).free([2]) == []
    assert r.middle == [0, 1, 0, 0] and clos_slowdowns(p, r) == before and clock.out
