"""Views do not wait for a change's own work either (``controller/service/servicelock.py``):
while a change plans (``decide``), computes its desired tables, probes host ports or writes
the store, GET answers; what it sees is a committed state, whole (never jobs of the new
change with the version of the old). Every wait here has a timeout: a deadlock fails a test
instead of hanging it."""
from __future__ import annotations

import copy
import threading

import pytest

from controller.model.jobs import parse_job
from controller.service import decide
from controller.service.route_service import RouteService
from controller.service.servicelock import ServiceLock
from emulation.harness.fake_switch import FakeSwitches
from tests.test_views_during_install import WAIT, answered, get, in_thread, post, ring, wired


class Gate:
    """Blocks the calls it wraps at ``entered`` until the test opens it (``open``)."""

    def __init__(self):
        self.entered = threading.Event()
        self._go = threading.Event()

    def open(self) -> None:
        self._go.set()

    def wrap(self, fn):
        def gated(*args, **kwargs):
            self.entered.set()
            assert self._go.wait(WAIT), "the gate was never opened"
            return fn(*args, **kwargs)
        return gated


class BlockingStore:
    """A store whose saves, once ``gate`` is set, wait for it to open (an etcd round trip
    that takes long); keeps every saved document."""

    def __init__(self):
        self.docs: list[dict] = []
        self.gate: Gate | None = None

    def load(self):
        return None

    def save(self, doc):
        if self.gate is not None:
            doc = self.gate.wrap(lambda d: d)(doc)
        self.docs.append(doc)


def start(f, **kw):
    sw = FakeSwitches(f.dpids.values(), fabric=f)
    svc = RouteService(sw, f, **kw)
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    return sw, svc


def committed(svc) -> tuple:
    """(version, job ids, effective fabric) read under the view lock, as a view reads them."""
    with svc.lock.views:
        st = svc.state
        return st.version, tuple(st.jobs), st.fabric


def finish(writer, box):
    writer.join(WAIT)
    assert not writer.is_alive(), "the change did not finish"
    if "error" in box:
        raise box["error"]
    return box["result"]


def test_a_view_answers_while_a_post_plans_and_sees_the_state_before_it(monkeypatch):
    f = wired()
    _, svc = start(f)
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201
    before = {p: get(svc, p) for p in ("/v1/jobs", "/v1/jobs/a", "/v1/routes", "/v1/links")}
    version = svc.state.version
    gate = Gate()
    monkeypatch.setattr(decide, "post_job", gate.wrap(decide.post_job))
    writer, box = in_thread(post, svc, ring("b", ["h0_1", "h1_1", "h2_1", "h3_1"]))
    assert gate.entered.wait(WAIT)
    for path, doc in before.items():  # the planner is blocked: every view answers
        assert answered(get, svc, path) == doc, path
    assert answered(committed, svc)[:2] == (version, ("a",))
    assert writer.is_alive() and svc.lock.change.locked()  # the change holds on
    gate.open()
    assert finish(writer, box)[0] == 201
    assert committed(svc)[:2] == (version + 1, ("a", "b"))


def test_a_view_answers_while_a_port_change_replans(monkeypatch):
    """A link down: the port is noted before the re-plan (views may see it in /v1/fabric);
    the effective fabric and the routes are those before the change until it commits."""
    f = wired()
    _, svc = start(f)
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201
    routes, (version, jobs, fabric) = get(svc, "/v1/routes"), committed(svc)
    gate = Gate()
    monkeypatch.setattr(decide, "topology", gate.wrap(decide.topology))
    l0, port = f.dpids["l0"], f.port("l0", "s0")
    writer, box = in_thread(svc.port_changed, l0, port, False)
    assert gate.entered.wait(WAIT)
    assert answered(get, svc, "/v1/routes") == routes
    seen = answered(get, svc, "/v1/fabric")
    assert port in seen["seen"]["l0"]["ports_down"] and seen["links_down"] == []
    assert answered(committed, svc) == (version, jobs, fabric)
    gate.open()
    finish(writer, box)
    assert committed(svc)[0] > version and get(svc, "/v1/fabric")["links_down"]


def test_a_planner_error_leaves_the_lock_whole_and_the_state_unchanged(monkeypatch):
    f = wired()
    _, svc = start(f)
    version = svc.state.version

    def refused(*_args, **_kw):
        assert not svc.lock.views.locked()  # planned with the state lock let go
        raise decide.ConflictError("refused by the test")
    monkeypatch.setattr(decide, "post_job", refused)
    code, doc = post(svc, ring("b", ["h0_1", "h1_1", "h2_1", "h3_1"]))
    assert code == 409 and "refused by the test" in doc["error"]
    assert not svc.lock.change.locked() and not svc.lock.views.locked()
    assert svc.state.version == version and not svc.state.jobs


def test_a_view_answers_while_the_store_writes_and_sees_the_committed_change():
    f = wired()
    store = BlockingStore()
    _, svc = start(f, store=store)
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201
    version = svc.state.version
    store.gate = gate = Gate()
    writer, box = in_thread(post, svc, ring("b", ["h0_1", "h1_1", "h2_1", "h3_1"]))
    assert gate.entered.wait(WAIT)
    # committed, being stored: a view sees the new job and the new version together
    assert answered(committed, svc)[:2] == (version + 1, ("a", "b"))
    assert {j["id"] for j in answered(get, svc, "/v1/jobs")["jobs"]} == {"a", "b"}
    assert answered(get, svc, "/v1/jobs/b")["id"] == "b"
    assert writer.is_alive() and svc.lock.change.locked()
    gate.open()
    assert finish(writer, box)[0] == 201
    # the document written is the committed state of that change
    assert [j["job"]["id"] for j in store.docs[-1]["jobs"]] == ["a", "b"]
    assert store.docs[-1]["next_number"] == svc.state.next_number


def test_a_view_answers_while_host_mode_waits_for_its_probes():
    f = wired()
    _, svc = start(f, mode="host")
    gate = Gate()
    svc.hostports.probe = gate.wrap(svc.hostports.probe)
    version = svc.state.version
    doc = dict(ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]), proto="udp", dport=4791)
    writer, box = in_thread(post, svc, doc)
    assert gate.entered.wait(WAIT)
    assert answered(get, svc, "/v1/jobs") == {"jobs": []}  # probing: not committed yet
    assert answered(get, svc, "/v1/fabric")["host_mode"]["flows_with_ports"] == 0
    assert svc.state.version == version
    gate.open()
    assert finish(writer, box)[0] == 201
    assert get(svc, "/v1/fabric")["host_mode"]["flows_with_ports"] > 0


def test_views_never_see_half_a_change():
    """A reader takes the view lock again and again while changes run (POSTs, a link down and
    up, a DELETE): each version it sees comes with one set of jobs and one fabric, the new
    version always with the new jobs (never jobs updated but the version not)."""
    f = wired()
    _, svc = start(f, store=BlockingStore())
    seen: dict[int, set] = {}
    stop = threading.Event()
    errors: list[BaseException] = []
    ready = threading.Event()  # the reader took a first look

    def read():
        try:
            while not stop.is_set():
                version, jobs, fabric = committed(svc)
                seen.setdefault(version, set()).add((jobs, id(fabric)))
                ready.set()
                get(svc, "/v1/jobs")
        except BaseException as e:  # noqa: BLE001 - handed to the test
            errors.append(e)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert ready.wait(WAIT)
    changes = []
    try:
        for jid, ranks in (("a", ["h0_0", "h1_0", "h2_0", "h3_0"]),
                           ("b", ["h0_1", "h1_1", "h2_1", "h3_1"])):
            assert post(svc, ring(jid, ranks))[0] == 201
            changes.append(committed(svc))
        for up in (False, True):
            svc.port_changed(f.dpids["l0"], f.port("l0", "s0"), up)
            changes.append(committed(svc))
        assert svc.delete_job("a")["deleted"] == "a"
        changes.append(committed(svc))
    finally:
        stop.set()
        reader.join(WAIT)
    assert not reader.is_alive() and not errors, errors
    bad = {v: s for v, s in seen.items() if len(s) > 1}
    assert not bad, bad
    for version, jobs, fabric in changes:  # what the writer committed is what views saw
        assert seen.get(version, {(jobs, id(fabric))}) == {(jobs, id(fabric))}


def test_decide_reads_the_state_and_mutates_nothing():
    """``decide`` runs with the state lock let go: it must not change what views read."""
    f = wired()
    _, svc = start(f)
    assert answered(post, svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201
    assert answered(post, svc, ring("b", ["h0_1", "h1_1", "h2_1", "h3_1"]))[0] == 201
    st, settings = svc.state, svc.settings
    st.switches[f.dpids["l0"]].ports[f.port("l0", "s0")] = False  # noted, not re-planned

    def snapshot():
        return (st.version, st.next_number, id(st.jobs), list(st.jobs), st.fabric,
                st.declared, copy.deepcopy(st.events), dict(st.counters),
                {d: (s.connected, dict(s.ports)) for d, s in st.switches.items()},
                {k: (id(r), dict(r.routes), r.mode, r.matrix, r.mismatch)
                 for k, r in st.jobs.items()}, list(st.planner_ms))
    before = snapshot()
    job = parse_job(ring("c", ["h0_0", "h2_1"]), st.fabric)
    assert decide.topology(st, settings, svc.clock(), "test").replanned.groups
    decide.post_job(st, settings, job, svc.clock(), svc.switch_name)
    decide.optimize(st, settings)
    decide.reoptimise(st, settings)
    decide.delete_job(st, "a")
    decide.adopt(st, settings, st.declared, svc.clock(), "test")
    assert snapshot() == before


def test_released_pauses_once_for_the_writer_and_read_only_returns():
    pauses = []
    lock = ServiceLock(pause=lambda: pauses.append(lock.views.locked()))
    assert lock.read_only(lambda x: x + 1, 1) == 2 and pauses == []  # not a writer: as is
    with lock:
        assert lock.read_only(lambda: lock.views.locked()) is False
        assert pauses == [False]  # yielded with the state lock let go
        with lock.released():
            assert lock.read_only(len, "ab") == 2  # nested: no second pause
        assert pauses == [False, False] and lock.views.locked()
        with pytest.raises(ValueError):
            lock.read_only(int, "x")
        assert lock.views.locked() and lock.held()
    assert not lock.views.locked() and not lock.change.locked()


EVENTLET = """
import eventlet
eventlet.monkey_patch()
import threading
from controller.service.servicelock import ServiceLock
log = []
lock = ServiceLock(pause=lambda: eventlet.sleep(0))
started = threading.Event()
def writer():
    with lock:
        started.set()
        eventlet.sleep(0)  # the view is now waiting for the state lock
        lock.read_only(lambda: log.append(("planning", list(log))))
        log.append(("writer", lock.held()))
def view():
    started.wait(5)
    with lock.views:
        log.append(("view", lock.held()))
for t in [eventlet.spawn(f) for f in (writer, view)]:
    t.wait()
print(log)
"""


def test_under_eventlet_a_view_runs_as_the_writer_starts_planning():
    """Green threads switch only where one yields: ``pause`` at the start of a part with the
    state lock let go runs the view that waits for it before the (CPU-bound) planning."""
    import os
    import subprocess
    import sys
    pytest.importorskip("eventlet")
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    out = subprocess.run([sys.executable, "-c", EVENTLET], capture_output=True, text=True,
                         timeout=60, env=env, check=True).stdout
    assert out.strip() == str([("view", False), ("planning", [("view", False)]),
                               ("writer", True)])
