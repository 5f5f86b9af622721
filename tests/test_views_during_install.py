"""Views do not wait for the switches (``controller/service/servicelock.py``): while a change
waits for its barrier replies, GET answers with the committed state of the change before it,
and the next change (a port change) starts only once this one committed."""
from __future__ import annotations

import json
import threading
import time

import pytest

from controller.errors import InstallError
from controller.model.clos import Clos
from controller.service import api
from controller.service.metrics import exposition
from controller.service.route_service import RouteService
from controller.service.servicelock import ServiceLock
from emulation.harness.fake_switch import FakeSwitches

WAIT = 10.0  # a bound for every wait in these tests (a deadlock fails them instead of hanging)


class SlowBarriers(FakeSwitches):
    """Fake switches whose installs, once ``hold()`` is called, wait for ``release()``
    before they apply and confirm (a barrier reply that is late)."""

    def __init__(self, dpids):
        super().__init__(dpids)
        self.held = threading.Event()  # an install is waiting for its barrier
        self._go = threading.Event()
        self._holding, self._after = False, 0
        self.installs = 0  # install calls that waited

    def hold(self, after: int = 0) -> None:
        """Hold installs from the next one on, or after letting ``after`` through."""
        self._after, self._holding, self.installs = after, True, 0
        self.held.clear()
        self._go.clear()

    def release(self) -> None:
        self._holding = False
        self._go.set()

    def install(self, batches):
        if self._holding and self._after > 0:
            self._after -= 1
        elif self._holding:
            self.installs += 1
            self.held.set()
            assert self._go.wait(WAIT), "never released"
        super().install(batches)

    def read_tables(self, dpid):
        if self._holding:  # a table read's replies come late too
            self.held.set()
            assert self._go.wait(WAIT), "never released"
        return super().read_tables(dpid)


def wired():
    return Clos.generate(2, 4, 2, 0.01, wiring=True)


def start(f):
    sw = SlowBarriers(f.dpids.values())
    svc = RouteService(sw, f)
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    return sw, svc


def post(svc, doc):
    return api.handle(svc, "POST", "/v1/jobs", json.dumps(doc).encode())


def ring(jid, ranks):
    return {"id": jid, "collective": "ring_allreduce", "ranks": ranks, "bytes": 8e6}


def in_thread(fn, *args):
    """Run ``fn`` in a thread; (thread, result box): box holds its result or error."""
    box: dict = {}

    def run():
        try:
            box["result"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def answered(fn, *args, within: float = WAIT):
    """``fn(*args)`` from another thread, which must return within ``within`` seconds."""
    t, box = in_thread(fn, *args)
    t.join(within)
    assert not t.is_alive(), f"{getattr(fn, '__name__', fn)} did not answer in {within} s"
    if "error" in box:
        raise box["error"]
    return box["result"]


def job_ids(svc) -> set[str]:
    return {j["id"] for j in answered(get, svc, "/v1/jobs")["jobs"]}


def shadow(svc) -> dict:
    """The reconciler's shadow flow tables, copied under the view lock."""
    with svc.lock.views:
        return {d: dict(t.rules) for d, t in svc.reconciler.installed.items()}


def job_rules(fabric_view) -> int:
    return sum(s["job_rules"] or 0 for s in fabric_view["seen"].values())


def get(svc, path):
    code, doc = api.handle(svc, "GET", path)
    assert code == 200, (path, doc)
    return doc


def test_views_answer_while_a_change_waits_for_its_barriers_with_the_state_before_it():
    f = wired()
    sw, svc = start(f)
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201
    version = svc.state.version
    before = {p: get(svc, p) for p in ("/v1/jobs", "/v1/jobs/a", "/v1/routes", "/v1/links")}
    rules_before = job_rules(get(svc, "/v1/fabric"))
    sw.hold()
    writer, box = in_thread(post, svc, ring("b", ["h0_1", "h1_1", "h2_1", "h3_1"]))
    assert sw.held.wait(WAIT)
    # the POST waits for its additions' barriers: every view answers, with job a alone
    for path, doc in before.items():
        assert answered(get, svc, path) == doc, path
    assert job_rules(answered(get, svc, "/v1/fabric")) == rules_before
    assert b"mlroute_jobs 1.0" in answered(exposition, svc)[0]
    with pytest.raises(Exception, match="no job"):
        answered(svc.job_view, "b")
    assert svc.state.version == version and writer.is_alive()
    sw.release()
    writer.join(WAIT)
    assert box["result"][0] == 201
    assert job_ids(svc) == {"a", "b"}
    assert svc.state.version > version


def test_a_view_between_additions_and_deletions_sees_the_old_intent_and_both_tables():
    """Make before break: once a re-plan's additions are confirmed, the shadow tables hold old
    and new entries together while the deletions wait; the intent (routes) is still the old."""
    f = wired()
    sw, svc = start(f)
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201
    routes, tables = get(svc, "/v1/routes"), shadow(svc)
    sw.hold(after=1)  # the additions go through; the deletions wait
    writer, box = in_thread(svc.port_changed, f.dpids["l0"], f.port("l0", "s0"), False)
    assert sw.held.wait(WAIT)
    assert answered(get, svc, "/v1/routes") == routes
    during = answered(shadow, svc)
    # the shadow is what the switches hold: the confirmed additions, not the deletions yet
    assert during != tables and during == {d: sw.rules[d] for d in during}
    sw.release()
    writer.join(WAIT)
    assert not writer.is_alive() and "error" not in box
    assert get(svc, "/v1/routes") != routes and shadow(svc) != during


def test_a_port_change_during_the_wait_is_applied_after_the_change_committed():
    f = wired()
    sw, svc = start(f)
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201
    order: list[str] = []
    commit, noted = svc.tx._commit, svc.finder.port_changed

    def recorded_commit(change, *args):
        order.append(f"commit {change.cause}")
        return commit(change, *args)

    def recorded_port(*args):
        order.append("port noted")
        return noted(*args)
    svc.tx._commit, svc.finder.port_changed = recorded_commit, recorded_port
    sw.hold()
    writer, wbox = in_thread(post, svc, ring("b", ["h0_1", "h1_1", "h2_1", "h3_1"]))
    assert sw.held.wait(WAIT)
    port, pbox = in_thread(svc.port_changed, f.dpids["l0"], f.port("l0", "s0"), False)
    time.sleep(0.3)
    # the port change waits for the whole POST: nothing of it happened yet
    assert port.is_alive() and order == []
    assert svc.state.switches[f.dpids["l0"]].ports[f.port("l0", "s0")] is True
    assert job_ids(svc) == {"a"}
    sw.release()
    writer.join(WAIT)
    port.join(WAIT)
    assert not writer.is_alive() and not port.is_alive()
    assert "error" not in wbox and "error" not in pbox and wbox["result"][0] == 201
    assert order[0].startswith("commit") and order[1] == "port noted", order
    assert any(o.startswith("commit port") for o in order[2:]), order
    # the re-plan saw job b: no flow of either job crosses the link that went down
    for jid in ("a", "b"):
        for r in get(svc, f"/v1/jobs/{jid}")["routes"]:
            assert not (r.get("spine") == "s0" and f.hosts[r["src"]] == "l0"), r


def test_a_view_answers_while_a_queued_switch_is_read_under_the_lock():
    """``drain`` (after a change, or a takeover) reads queued switches under the lock: the
    read lets views in too, which see the switch still queued, not provisioned."""
    f = wired()
    sw, svc = start(f)
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201
    l1 = f.dpids["l1"]
    with svc.lock:
        svc.reconciler.connected(l1)  # as a reconnect queues it

    def drain():
        with svc.lock:
            svc.tx.drain()
    sw.hold()
    writer, box = in_thread(drain)
    assert sw.held.wait(WAIT)
    seen = answered(get, svc, "/v1/fabric")["seen"]["l1"]
    assert seen["pending"] is True and seen["provisioned"] is False  # queued, being read
    sw.release()
    writer.join(WAIT)
    assert not writer.is_alive() and "error" not in box
    seen = get(svc, "/v1/fabric")["seen"]["l1"]
    assert seen["provisioned"] is True and not seen["pending"]


def test_a_failed_install_leaves_the_lock_free_and_the_state_unchanged():
    f = wired()
    sw, svc = start(f)
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201
    version = svc.state.version
    sw.fail.add(f.dpids["l1"])
    code, doc = post(svc, ring("b", ["h0_1", "h1_1", "h2_1", "h3_1"]))
    assert code >= 500 or code == 409 or "rejected" in json.dumps(doc), (code, doc)
    assert svc.state.version == version
    assert not svc.lock.change.locked() and not svc.lock.views.locked()
    assert job_ids(svc) == {"a"}
    assert post(svc, ring("b", ["h0_1", "h1_1", "h2_1", "h3_1"]))[0] == 201


def test_waiting_lets_go_only_for_the_writer_and_only_once():
    lock = ServiceLock()
    with lock.waiting():  # nobody holds it: nothing to let go of
        assert not lock.views.locked()
    with lock:
        assert lock.views.locked() and lock.held()

        def other():  # another thread is not the writer: its waiting is a no-op
            with lock.waiting():
                return lock.views.locked()
        assert answered(other) is True
        with lock.waiting():
            assert not lock.views.locked() and lock.change.locked()
            with lock.waiting():  # nested: still let go, taken back once
                assert not lock.views.locked()
            assert not lock.views.locked()
            assert answered(lock.views.acquire, False)  # a view takes it meanwhile
            lock.views.release()
        assert lock.views.locked()
        with pytest.raises(InstallError):
            with lock.waiting():
                raise InstallError("no barrier")
        assert lock.views.locked() and lock.held()
    assert not lock.views.locked() and not lock.change.locked() and not lock.held()


EVENTLET = """
import eventlet
eventlet.monkey_patch()  # as Ryu's hub does: threading is green
import threading
from controller.service.servicelock import ServiceLock
lock, go, waiting, log = ServiceLock(), threading.Event(), threading.Event(), []
def writer():
    with lock:
        with lock.waiting():
            waiting.set()
            go.wait(5)
        log.append(("writer", lock.held()))
def view():
    waiting.wait(5)
    with lock.views:
        log.append(("view", lock.held()))
    go.set()
def writer2():
    waiting.wait(5)
    with lock:
        log.append(("writer2", lock.held()))
for t in [eventlet.spawn(f) for f in (writer, view, writer2)]:
    t.wait()
print(log)
"""


def test_under_eventlet_green_threads_a_view_runs_while_the_writer_waits():
    """Ryu's hub: green threads on a monkey-patched ``threading`` (``get_ident`` of the green
    thread); a second change still waits for the first."""
    import os
    import subprocess
    import sys
    pytest.importorskip("eventlet")
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    out = subprocess.run([sys.executable, "-c", EVENTLET], capture_output=True, text=True,
                         timeout=60, env=env, check=True).stdout
    assert out.strip() == str([("view", False), ("writer", True), ("writer2", True)])
