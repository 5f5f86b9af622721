"""Native REST reads (``--mlroute-rest-native-reads``): the views the service publishes when a
writer lets go of the state lock (``published.py``, ``ServiceLock.publish``), the REST server in
native threads answering GET /v1/ready and /v1/jobs from them and handing the rest to the hub
(``bridge.py``); under eventlet (a child process, monkey-patched as ryu-manager does) a GET is
answered while a green thread holds the hub for seconds."""
import http.client
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from controller.model.clos import Clos
from controller.service import api
from controller.service.published import Published
from controller.service.route_service import RouteService
from controller.service.servicelock import ServiceLock
from controller.shell.rest import RestServer
from emulation.harness.fake_switch import FakeSwitches

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def service(connect=True):
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    svc = RouteService(FakeSwitches(f.dpids.values()), f)
    if connect:
        for d in f.dpids.values():
            svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    return svc, f


def job(jid="j1", ranks=("h0_0", "h1_0")):
    return {"id": jid, "collective": "ring_allreduce", "ranks": list(ranks), "bytes": 1e6}


def published(pub, path):
    status, body = pub.answer(path)
    return status, json.loads(body)


def test_publish_hook_runs_with_the_state_lock_held_where_the_writer_lets_go():
    lock = ServiceLock()
    seen = []
    lock.publish = lambda end: seen.append((end, lock.views.locked()))
    with lock:
        with lock.released():
            assert seen == [(False, True)]
            with lock.released():  # nested: a no-op, nothing published
                pass
        assert seen == [(False, True)]
    assert seen == [(False, True), (True, True)]
    with lock.views:  # a view publishes nothing
        pass
    assert len(seen) == 2


def test_a_changes_parts_publish_at_most_every_part_gap_its_end_always():
    from controller.service.published import PART_GAP_S
    svc, _ = service()
    clock = [100.0]
    pub = Published(clock=lambda: clock[0])
    pub.publish(svc.state, svc.reconciler, end=False)  # the first: nothing published yet
    pub.publish(svc.state, svc.reconciler, end=False)  # within PART_GAP_S: skipped
    assert pub.count == 1
    clock[0] += PART_GAP_S
    pub.publish(svc.state, svc.reconciler, end=False)
    pub.publish(svc.state, svc.reconciler, end=True)  # a change's end: always
    assert pub.count == 3 and pub.answer("/v1/ready") is not None


def test_a_failing_publication_does_not_fail_the_change(caplog):
    lock = ServiceLock()
    lock.publish = lambda end: 1 / 0
    with lock:
        pass
    assert not lock.views.locked() and not lock.change.locked()
    assert "publishing the views failed" in caplog.text


def test_published_views_equal_the_locked_views_after_every_change():
    svc, f = service(connect=False)
    pub = Published.attach(svc)
    assert published(pub, "/v1/ready") == svc.ready_view()  # 503: nothing connected
    assert published(pub, "/v1/ready")[0] == 503
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
        assert published(pub, "/v1/ready") == svc.ready_view()
    assert published(pub, "/v1/ready")[0] == 200
    # a client sees its own POST in the next GET: published before the answer goes out
    status, _ = api.handle(svc, "POST", "/v1/jobs", json.dumps(job()).encode())
    assert status == 201
    assert published(pub, "/v1/jobs") == (200, svc.jobs_view())
    assert [j["id"] for j in published(pub, "/v1/jobs/")[1]["jobs"]] == ["j1"]
    api.handle(svc, "DELETE", "/v1/jobs/j1")
    assert published(pub, "/v1/jobs") == (200, {"jobs": []})
    assert pub.answer("/v1/fabric") is None and pub.count > 0


def test_views_published_mid_change_show_the_committed_jobs():
    """At each letting-go inside a change (planning, the tables, the answer), the published
    jobs are the committed ones, as a view under the lock sees them: the previous change's
    before the commit, the new job's after it."""
    svc, _ = service()
    pub = Published.attach(svc)
    api.handle(svc, "POST", "/v1/jobs", json.dumps(job("a")).encode())
    seen, publish = [], svc.lock.publish

    def spy(end):
        publish(True)  # every letting-go, not only one per PART_GAP_S: what each could show
        seen.append([j["id"] for j in published(pub, "/v1/jobs")[1]["jobs"]])
    svc.lock.publish = spy
    status, _ = api.handle(svc, "POST", "/v1/jobs",
                           json.dumps(job("b", ("h0_1", "h1_1"))).encode())
    assert status == 201
    assert seen[0] == ["a"] and seen[-1] == ["a", "b"], seen  # planning let go, then commit
    assert seen == sorted(seen, key=len)  # never back, never a half-committed document


@pytest.fixture
def native():
    svc, _ = service()
    rest = RestServer(svc, "127.0.0.1", 0, native=True)
    rest.sock.settimeout(0.05)
    rest.start()
    try:
        yield rest
    finally:
        rest.stop()


def call(port, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body)
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type"), resp.read()
    finally:
        conn.close()


def test_native_server_answers_published_and_other_requests(native):
    port, svc = native.port, native.service
    status, kind, body = call(port, "GET", "/v1/ready")
    assert (status, json.loads(body)) == svc.ready_view() and kind.startswith("application/json")
    status, _, body = call(port, "POST", "/v1/jobs", json.dumps(job()).encode())
    assert status == 201 and json.loads(body)["id"] == "j1"
    status, _, body = call(port, "GET", "/v1/jobs")
    assert (status, json.loads(body)) == (200, svc.jobs_view())
    status, _, body = call(port, "GET", "/v1/jobs/j1")  # not published: the service answers
    assert status == 200 and json.loads(body)["id"] == "j1"
    assert call(port, "HEAD", "/v1/ready")[0] == 405  # as the API answers it (GET only)
    assert call(port, "GET", "/v1/jobs/")[0] == 200  # one trailing slash, as the routes allow
    assert call(port, "GET", "/v1/jobs//")[0] == call(port, "GET", "/v1/ready//")[0] == 404
    assert call(port, "GET", "/metrics")[0] == 200
    assert call(port, "PUT", "/v1/ready")[0] == 405


EVENTLET_CHILD = textwrap.dedent(r"""
    import eventlet
    eventlet.monkey_patch()
    import http.client, json, sys, threading, time
    from eventlet.patcher import original
    from controller.model.clos import Clos
    from controller.service.route_service import RouteService
    from controller.shell.hub import Hub
    from controller.shell.rest import RestServer
    from emulation.harness.fake_switch import FakeSwitches

    hub = Hub(spawn=eventlet.spawn, sleep=eventlet.sleep, Event=threading.Event)
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    svc = RouteService(FakeSwitches(f.dpids.values()), f, on_progress=lambda: eventlet.sleep(0))
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    rest = RestServer(svc, "127.0.0.1", 0, hub=hub, native=sys.argv[1] == "native")
    rest.start()
    eventlet.sleep(0.2)
    out = {}
    clock = original("time").perf_counter

    def client():  # a native thread: it does not wait for the hub to send and time requests
        conn = http.client.HTTPConnection("127.0.0.1", rest.port, timeout=20)
        conn.sock = original("socket").create_connection(("127.0.0.1", rest.port))
        body = json.dumps({"id": "j1", "collective": "ring_allreduce",
                           "ranks": ["h0_0", "h1_0"], "bytes": 1e6})
        conn.request("POST", "/v1/jobs", body=body)
        resp = conn.getresponse()
        resp.read()  # keep-alive: the same connection for the GET
        out["post"] = resp.status
        original("time").sleep(0.3)  # the hog below has the hub by now
        t0 = clock()
        conn.request("GET", "/v1/jobs")
        resp = conn.getresponse()
        out["get"] = (resp.status, json.loads(resp.read()), clock() - t0)
    t = original("threading").Thread(target=client)
    t.start()
    while "post" not in out:
        eventlet.sleep(0.01)
    end = clock() + 2.0  # a green thread that holds the hub for 2 s without yielding
    while clock() < end:
        pass
    while "get" not in out:  # a green wait: the hub keeps serving (green mode answers now)
        eventlet.sleep(0.01)
    status, doc, seconds = out["get"]
    print(json.dumps({"post": out["post"], "status": status,
                      "jobs": [j["id"] for j in doc["jobs"]], "seconds": seconds}))
""")


@pytest.mark.parametrize("mode", [
    "native",
    # the control (the same GET on the hub waits for the hog: the child does hold the hub),
    # 3 s of a subprocess: in the slow tier (issue 60)
    pytest.param("green", marks=pytest.mark.slow)])
def test_under_eventlet_a_native_get_does_not_wait_for_the_hub(mode):
    env = dict(os.environ, PYTHONPATH=REPO)
    run = subprocess.run([sys.executable, "-c", EVENTLET_CHILD, mode], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert (got["post"], got["status"], got["jobs"]) == (201, 200, ["j1"])
    if mode == "native":
        assert got["seconds"] < 1.0, got  # the hub is held for 2 s meanwhile
    else:
        assert got["seconds"] > 1.0, got  # on the hub: after the hog yields



def test_a_publication_that_fails_sends_readers_to_the_service(monkeypatch):
    svc, _ = service()
    pub = Published.attach(svc)
    assert pub.answer("/v1/ready") is not None
    monkeypatch.setattr("controller.service.views.ready_view",
                        lambda *a: (_ for _ in ()).throw(RuntimeError("a bug")))
    with svc.lock:
        pass  # the change commits; its publication fails (logged by the lock)
    assert pub.current is None and pub.answer("/v1/ready") is None
    monkeypatch.undo()
    with svc.lock:
        pass
    assert published(pub, "/v1/ready") == svc.ready_view()


def test_native_connections_are_capped(monkeypatch):
    """One OS thread per connection served, at most NATIVE_CONNECTIONS: one more request that
    needs a thread is answered 503 at once (accept never waits), published reads are still
    answered by the front, and the thread serves again once free; the front holds at most
    FRONT_CONNECTIONS connections reading their request."""
    import socket

    from controller.shell import rest as rest_mod
    monkeypatch.setattr(rest_mod, "NATIVE_CONNECTIONS", 1)
    monkeypatch.setattr(rest_mod, "FRONT_CONNECTIONS", 3)
    svc, _ = service()
    rest = RestServer(svc, "127.0.0.1", 0, native=True)
    rest.sock.settimeout(0.05)
    rest.start()
    try:
        busy = socket.create_connection(("127.0.0.1", rest.port))  # its thread waits for
        busy.sendall(b"POST /v1/jobs HTTP/1.1\r\nContent-Length: 10\r\n\r\n")  # a body
        deadline = time.monotonic() + 10
        while not rest._open:
            assert time.monotonic() < deadline, "the request was never handed to a thread"
            time.sleep(0.01)
        status, _, body = call(rest.port, "GET", "/v1/fabric")
        assert status == 503 and "try again" in json.loads(body)["error"]
        assert call(rest.port, "GET", "/v1/ready")[0] == 200  # the front's own answer
        idle = [socket.create_connection(("127.0.0.1", rest.port)) for _ in range(3)]
        status, _, body = call(rest.port, "GET", "/v1/ready")  # the front is full
        assert status == 503 and "REST connections open" in json.loads(body)["error"]
        for s in idle + [busy]:
            s.close()
        deadline = time.monotonic() + 10
        while call(rest.port, "GET", "/v1/fabric")[0] != 200:  # the thread comes back
            assert time.monotonic() < deadline, "the thread was never given back"
            time.sleep(0.05)
    finally:
        rest.stop()



BRIDGE_CHILD = textwrap.dedent(r"""
    import eventlet
    eventlet.monkey_patch()
    import json
    from eventlet.patcher import original
    from controller.shell.bridge import HubBridge, Stopping
    bridge = HubBridge(eventlet.spawn)
    eventlet.spawn(bridge.run)
    out = {"calls": 0}
    def native():  # an OS thread calling the hub until the bridge stops under it
        out["first"] = bridge.call(lambda x: x + 1, 1)
        while True:
            try:
                bridge.call(eventlet.sleep, 0.001)
            except Stopping as e:
                out["stopped"] = str(e)
                break
            out["calls"] += 1
        t0 = original("time").monotonic()
        try:
            bridge.call(lambda: 1)
        except Stopping:
            out["after_s"] = original("time").monotonic() - t0
    t = original("threading").Thread(target=native, daemon=True)
    t.start()
    eventlet.sleep(0.3)
    bridge.stop()
    end = original("time").monotonic() + 10
    while t.is_alive() and original("time").monotonic() < end:
        eventlet.sleep(0.05)
    out["thread_ended"] = not t.is_alive()
    print(json.dumps(out))
""")


def test_a_stopped_bridge_answers_its_callers_instead_of_leaving_them_waiting():
    """Under eventlet: calls handed to the hub from an OS thread run there until ``stop``;
    the call in flight or queued when it comes, and every later one, raise ``Stopping``
    instead of waiting for a hub side that has ended."""
    env = dict(os.environ, PYTHONPATH=REPO)
    run = subprocess.run([sys.executable, "-c", BRIDGE_CHILD], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["first"] == 2 and got["calls"] > 0 and got["thread_ended"], got
    assert "stopping" in got["stopped"] and got["after_s"] < 0.1, got


# ---- the front (front.py): one thread answers the published GETs itself -------------------
def raw(port, data: bytes, answers: int = 1, pieces: int = 1) -> list[bytes]:
    """Send ``data`` (in ``pieces``) on one connection; read ``answers`` whole answers."""
    import socket
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        step = -(-len(data) // pieces)
        for i in range(0, len(data), step):
            sock.sendall(data[i:i + step])
            time.sleep(0.01 if pieces > 1 else 0)
        got, out = b"", []
        while len(out) < answers:
            head, sep, rest = got.partition(b"\r\n\r\n")
            if sep:
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                if len(rest) >= length:
                    out.append(head + sep + rest[:length])
                    got = rest[length:]
                    continue
            chunk = sock.recv(65536)
            assert chunk, f"closed after {len(out)} answers: {got!r}"
            got += chunk
        return out
    finally:
        sock.close()


def no_date(answer: bytes) -> bytes:
    return b"\r\n".join(x for x in answer.split(b"\r\n") if not x.startswith(b"Date: "))


@pytest.mark.parametrize("head", [
    b"GET /v1/ready HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /v1/jobs?verbose=1 HTTP/1.1\r\nConnection: close\r\n\r\n",
    b"GET /v1/jobs/ HTTP/1.0\r\n\r\n",
    b"GET /v1/ready HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
])
def test_the_front_answers_byte_for_byte_as_the_full_handler(native, head):
    """The same request to the front (native) and to the full handler (the hub's server, on
    the same service): the same status line, headers and body, the date aside."""
    api.handle(native.service, "POST", "/v1/jobs", json.dumps(job()).encode())
    green = RestServer(native.service, "127.0.0.1", 0)
    green.sock.settimeout(0.05)
    green.start()
    try:
        front, full = raw(native.port, head)[0], raw(green.port, head)[0]
    finally:
        green.stop()
    assert no_date(front) == no_date(full)
    assert b"Date: " in front and front.startswith(b"HTTP/1.1 200 OK\r\n")


def test_the_front_keeps_connections_alive_pipelined_and_hands_the_rest_on(native):
    port = native.port
    get = b"GET /v1/ready HTTP/1.1\r\nHost: x\r\n\r\n"
    # a head in pieces, then two requests in one packet: three answers on one connection
    answers = raw(port, get + get + get, answers=3, pieces=7)
    assert [a.split(b"\r\n")[0] for a in answers] == [b"HTTP/1.1 200 OK"] * 3
    # published GETs, then a POST on the same connection: the POST (with its body, read by
    # the front in part) goes to a thread, which answers it and the GET after it
    body = json.dumps(job("k")).encode()
    post = (b"POST /v1/jobs HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
    answers = raw(port, get + post + b"GET /v1/jobs/k HTTP/1.1\r\n\r\n", answers=3)
    assert [a.split(b"\r\n")[0] for a in answers] == [b"HTTP/1.1 200 OK", b"HTTP/1.1 201 Created",
                                                      b"HTTP/1.1 200 OK"]
    assert json.loads(answers[2].split(b"\r\n\r\n", 1)[1])["id"] == "k"


def test_the_front_hands_a_head_it_cannot_read_to_the_full_handler(native):
    """Malformed or oversized heads get the full handler's JSON 4xx."""
    bad = raw(native.port, b"GET /v1/ready HTTP/1.1 x\r\n\r\n")[0]
    assert bad.startswith(b"HTTP/1.1 400") and b"Bad request" in bad
    long = raw(native.port, b"GET /v1/ready HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n")[0]
    assert long.split(b" ")[1].startswith(b"4") and b'"error"' in long


def test_the_front_closes_idle_connections(native):
    import socket
    native.front.idle_s = 0.2
    sock = socket.create_connection(("127.0.0.1", native.port), timeout=10)
    try:
        assert sock.recv(1) == b""  # closed by the front's sweep (about a second)
    finally:
        sock.close()
    assert not native.front.conns


def test_the_front_lingers_over_a_closed_connection_without_a_thread(native, monkeypatch):
    """Issue 73: a connection answered and closed (``Front.linger``, the woken watches'
    close) waits in the front for the client's end, its input dropped, instead of a thread
    waiting for each client in turn; one whose client never closes goes at ``LINGER_S``."""
    import socket

    from controller.shell import front as front_mod
    monkeypatch.setattr(front_mod, "LINGER_S", 1.5)
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        ends = []
        for _ in range(2):
            client = socket.create_connection(listener.getsockname(), timeout=10)
            ends.append((client, listener.accept()[0]))
    finally:
        listener.close()
    (quits, q_server), (stays, s_server) = ends
    try:
        q_server.sendall(b"answer")
        t = time.monotonic()
        native.front.linger(q_server)
        native.front.linger(s_server)
        assert time.monotonic() - t < 0.1  # the caller does not wait for the clients
        assert quits.recv(16) == b"answer" and quits.recv(16) == b""  # its end shut at once
        quits.sendall(b"more of a body")  # read and dropped, the connection kept
        deadline = time.monotonic() + 5
        while len(native.front.conns) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [c.closing is not None for c in native.front.conns.values()] == [True, True]
        quits.close()
        while len(native.front.conns) > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(native.front.conns) == 1  # closed at the client's end, not its deadline
        assert stays.recv(16) == b""
        while native.front.conns and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not native.front.conns  # the silent client's: closed by the sweep
    finally:
        stays.close()
        quits.close()
