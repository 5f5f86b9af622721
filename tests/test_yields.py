"""Long computations of the controller yield as they go (issue 38): under eventlet a REST
request is answered only where the green thread doing the work yields (the service's
``on_progress``, the shell's ``hub.sleep(0)``), so a long stretch without one delays every
request arriving meanwhile. Each test records where the service yields and checks the work
is cut where it was one piece; ``benchmarks/controlplane.py`` measures the stretches at
k = 16 (``emulation/harness/stretches.py``)."""
from __future__ import annotations

import json
import sys

from controller.model.clos import Clos
from controller.service import api
from controller.service.metrics import exposition
from controller.service.route_service import RouteService
from emulation.harness.fake_switch import FakeSwitches
from tests.helpers import FakeClock


class Yields:
    """An ``on_progress`` that records, at each call, the function that called it (the
    service lock's ``released`` skipped: the code around it) and whether the state lock was
    held then."""

    def __init__(self):
        self.svc: RouteService | None = None
        self.log: list[tuple[str, bool]] = []

    def __call__(self) -> None:
        frame = sys._getframe(1)
        while frame.f_code.co_filename.endswith(("servicelock.py", "contextlib.py", "pacing.py")):
            frame = frame.f_back
        held = self.svc is not None and self.svc.lock.views.locked()  # None: being built
        self.log.append((frame.f_code.co_name, held))

    def where(self) -> list[str]:
        return [w for w, _ in self.log]


def service(f, **kw) -> tuple[FakeSwitches, RouteService, Yields]:
    sw = FakeSwitches(f.dpids.values(), fabric=f)
    yields = Yields()
    clock = FakeClock()
    svc = RouteService(sw, f, clock=clock, sleep=clock.sleep, on_progress=yields, **kw)
    yields.svc = svc
    for name in f.switches():
        svc.switch_connected(f.dpids[name], {p: True for p in f.ports[name].values()})
    return sw, svc, yields


def post(svc, doc) -> dict:
    code, view = api.handle(svc, "POST", "/v1/jobs", json.dumps(doc).encode())
    assert code == 201, view
    return view


def test_the_metrics_page_reads_the_state_in_parts_and_yields_between_them():
    """The page was one stretch (47 ms at k = 16): now three holds of the state lock, a
    yield with the lock let go after each and after each family formatted."""
    f = Clos.fat_tree(4).wire()
    _, svc, yields = service(f)
    post(svc, {"id": "r", "collective": "ring_allreduce", "ranks": sorted(f.host_leaves)[:8],
               "bytes": 1e6})
    yields.log.clear()
    page = exposition(svc)[0].decode()
    at = [held for w, held in yields.log if w == "collect"]
    assert len(at) >= 3 + 20 and not any(at)  # every part and family; the lock let go
    assert "mlroute_planned_link_flows" in page and "mlroute_unroutable_flows" in page
    assert "mlroute_path_imbalance" in page and "mlroute_rules_installed " in page


def lose(f, svc, sw: str) -> None:
    """``sw`` lost as one that powers off: its connection drops, then its neighbours'
    reports of their ports to it, down, in one batch (as the shell hands them over)."""
    svc.switch_disconnected(f.dpids[sw])
    svc.ports_changed([(f.dpids[n], f.port(n, sw), False, None) for n in f.neighbours(sw)
                       if n in f.dpids], svc.clock())


def test_a_switch_loss_re_plan_yields_between_switches_tables_and_diffs(monkeypatch):
    """On a k = 4 fat-tree (20 switches) a lost aggregation switch's re-plan yields, with the
    state lock let go, between switches while it computes their static entries, joins them with the jobs'
    entries and diffs them against the shadows: at k = 16 with an entry per host each of
    these was one stretch of 35-85 ms. The threshold is lowered to one entry here."""
    from controller.enforcement import pacing
    monkeypatch.setattr(pacing, "PAUSE_ENTRIES", 1)
    f = Clos.fat_tree(4).wire()
    sw, svc, yields = service(f)
    hosts = sorted(f.host_leaves)
    post(svc, {"id": "r", "collective": "ring_allreduce", "ranks": hosts, "bytes": 1e6})
    yields.log.clear()
    lose(f, svc, "a0_0")
    assert svc.state.events[-1]["error"] is None and svc.state.events[-1]["moved_flows"] > 0
    where = yields.where()
    changed = 1 + 2 + 2  # a0_0's leaves and cores, a0_0 itself: their static entries change
    assert where.count("clos_static_update") >= changed
    assert where.count("tables") >= changed  # joined with the jobs' entries, switch by switch
    assert where.count("_diffs") >= changed - 1  # a0_0 is not connected: not diffed
    assert not any(held for _, held in yields.log)  # every yield with the state lock let go


def test_a_posted_job_answer_yields_every_few_hundred_routes_a_view_does_not(monkeypatch):
    """The answer to a POST (its routes with what each entry counted: 12 ms for 992 flows at
    k = 16) is built with the state lock let go and yields every ``PAUSE_ROUTES`` routes; a
    GET of the job, which holds the lock, does not yield (views waiting for the lock could
    not run, the writer's work could)."""
    from controller.service import views
    monkeypatch.setattr(views, "PAUSE_ROUTES", 16)
    f = Clos.fat_tree(4).wire()
    _, svc, yields = service(f)
    hosts = sorted(f.host_leaves)
    yields.log.clear()
    view = post(svc, {"id": "a2a", "flows": [{"src": a, "dst": b, "bytes": 1e6}
                                             for a in hosts for b in hosts if a != b]})
    assert view["flows"] == 240
    at = [held for w, held in yields.log if w == "job_view"]
    assert len(at) == 240 // 16 and not any(at)
    yields.log.clear()
    assert api.handle(svc, "GET", "/v1/jobs/a2a")[1]["routes"] == view["routes"]
    assert "job_view" not in yields.where()


def test_the_static_entries_pause_by_time_as_well_as_by_entries(monkeypatch):
    """Switches do not weigh the same (an aggregation switch's static entries at k = 16 took
    ten times a leaf's: 32 of them between two pauses were one stretch of 110 ms): the pacer
    also pauses once ``PAUSE_S`` went by. With no time allowed it pauses after every switch;
    with a minute and no entry threshold, never."""
    from controller.enforcement import pacing
    from controller.enforcement.clos_rules import clos_static_update
    f = Clos.fat_tree(4).wire()
    for budget, entries, expected in ((0.0, 10 ** 9, len(f.tier_of)), (60.0, 10 ** 9, 0)):
        monkeypatch.setattr(pacing, "PAUSE_S", budget)
        monkeypatch.setattr(pacing, "PAUSE_ENTRIES", entries)
        calls = []
        clos_static_update(f, pause=lambda: calls.append(1))
        assert len(calls) == expected
