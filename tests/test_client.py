"""The REST client (controller/client.py) against a recording stdlib server: every endpoint's
method and path, the token on writes only, errors with status and message, timeouts, an
unreachable controller, failover to the next URL."""
import socket
import threading
import time

import pytest

from controller.client import (
    Client,
    ControllerError,
    ControllerUnreachable,
    members_job,
    read_token,
)
from emulation.harness.ports import free_port
from tests.fake_controller import FakeController


@pytest.fixture
def fake():
    with FakeController(token="tok") as f:
        yield f


def test_every_endpoint_method_and_path(fake):
    c = Client(fake.url, token="tok", timeout=5)
    job = members_job("j/1 x", ["10.0.0.1", "h1_0"], bytes_hint=4e6, learn=False,
                      algorithm="greedy", mode=None)
    assert job == {"id": "j/1 x", "members": ["10.0.0.1", "h1_0"], "bytes": 4e6,
                   "learn": False, "algorithm": "greedy"}
    assert c.add_job(job)["id"] == "j/1 x"
    assert c.jobs()["jobs"][0]["id"] == "j/1 x"
    assert c.job("j/1 x")["job"] == job
    assert c.job_ports("j/1 x").startswith("# source_ip")
    c.fabric(), c.put_fabric({"spines": 1}), c.routes(), c.links(), c.imbalance()
    c.cluster(), c.openapi(), c.optimize(), c.advise({"id": "a"})
    assert c.segments("h0_0")["version"] == "e:1"
    assert c.report_probes("h0_0", [{"path": ["l0", "s0"], "ok": True}])["links_down"] == []
    assert c.report_traffic("h0_0", {"interval_s": 1, "pairs": []})["pairs"] == 1
    assert c.report_ports("h0_0", [{"job": "p", "part": 0, "sport": 49152}])["ports"] == 1
    assert c.ready() == {"ready": False, "switches": 2, "connected": 1, "synchronised": 0}
    assert c.metrics() == "mlroute_jobs 1\n"
    assert c.delete_job("j/1 x") == {"deleted": "j/1 x"}
    seen = [(r["method"], r["path"]) for r in fake.requests]
    assert seen == [("POST", "/v1/jobs"), ("GET", "/v1/jobs"), ("GET", "/v1/jobs/j%2F1%20x"),
                    ("GET", "/v1/jobs/j%2F1%20x/ports"), ("GET", "/v1/fabric"),
                    ("PUT", "/v1/fabric"), ("GET", "/v1/routes"), ("GET", "/v1/links"),
                    ("GET", "/v1/imbalance"), ("GET", "/v1/cluster"),
                    ("GET", "/v1/openapi.json"), ("POST", "/v1/optimize"),
                    ("POST", "/v1/advise"), ("GET", "/v1/hosts/h0_0/segments"),
                    ("POST", "/v1/hosts/h0_0/probes"), ("POST", "/v1/hosts/h0_0/traffic"),
                    ("POST", "/v1/hosts/h0_0/ports"), ("GET", "/v1/ready"), ("GET", "/metrics"),
                    ("DELETE", "/v1/jobs/j%2F1%20x")]
    # one method per route the controller serves (a new route needs a client method)
    from controller.service import api
    templated = {(m, p.replace("j%2F1%20x", "{id}").replace("h0_0", "{host}")) for m, p in seen}
    assert set(api.routes()) <= templated
    for r in fake.requests:  # the credential goes with every request: reads need it too
        assert r["headers"].get("Authorization") == "Bearer tok"
    assert fake.requests[0]["body"] == job
    assert fake.requests[0]["headers"]["Content-Type"] == "application/json"


def test_http_errors_carry_status_and_message(fake):
    c = Client(fake.url, token="tok", timeout=5)
    c.add_job({"id": "a", "members": ["x", "y"]})
    with pytest.raises(ControllerError) as e:
        c.add_job({"id": "a", "members": ["x", "y"]})
    assert e.value.status == 409 and e.value.message == "job 'a' already exists"
    assert str(e.value) == f"POST {fake.url}/v1/jobs: HTTP 409: job 'a' already exists"
    assert not isinstance(e.value, OSError)
    with pytest.raises(ControllerError) as e:
        c.job("nope")
    assert e.value.status == 404 and "no job 'nope'" in str(e.value)
    with pytest.raises(ControllerError) as e:  # no token: 401, nothing changed
        Client(fake.url, timeout=5).delete_job("a")
    assert e.value.status == 401 and "Bearer" in e.value.message
    assert list(fake.jobs) == ["a"]
    assert c.request("GET", "/v1/jobs/nope")[0] == 404  # the raw call never raises on status
    c.add_job({"id": "é x", "members": ["x", "y"]})
    assert c.request("GET", "/v1/jobs/é x")[1]["id"] == "é x"  # left unquoted: quoted here
    assert fake.requests[-1]["path"] == "/v1/jobs/%C3%A9%20x"


def test_unreachable_and_failover(fake):
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ControllerUnreachable) as e:
        Client(dead, timeout=2).jobs()
    assert e.value.status is None and "unreachable" in str(e.value) and dead in str(e.value)
    assert isinstance(e.value, OSError) and isinstance(e.value, ControllerError)
    c = Client(f"{dead}, {fake.url}", token="tok", timeout=2)  # refused: the next one answers
    assert c.jobs() == {"jobs": []}
    assert [r["path"] for r in fake.requests] == ["/v1/jobs"]


def test_timeout_is_bounded():
    """A server that accepts and never answers: the call fails after about the timeout."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    try:
        t0 = time.monotonic()
        with pytest.raises(ControllerUnreachable) as e:
            Client(f"http://127.0.0.1:{srv.getsockname()[1]}", timeout=0.5).add_job({"id": "x"})
        assert time.monotonic() - t0 < 3
        assert "timed out" in str(e.value)
    finally:
        srv.close()


def test_a_watch_reads_for_minutes_but_connects_within_connect_s_with_keepalive(monkeypatch):
    """Issue 73: an agent's watch reads for 130 s. A controller address that drops connection
    attempts (here: a listener whose backlog is full) is left after ``CONNECT_S`` and the next
    URL answers; the connection a request reads from has TCP keepalive (``KEEPALIVE``), so a
    lost controller machine is found by the kernel, and the read timeout is the watch's."""
    import controller.client as client
    monkeypatch.setattr(client, "CONNECT_S", 0.5)
    seen = []
    original = client.keep_alive

    def record(sock, timing):
        original(sock, timing)
        seen.append((sock.gettimeout(), sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                     [sock.getsockopt(socket.IPPROTO_TCP, getattr(socket, name)) for name in
                      ("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT")]))
    monkeypatch.setattr(client, "keep_alive", record)
    full = socket.socket()
    full.bind(("127.0.0.1", 0))
    full.listen(0)
    queued = [socket.create_connection(full.getsockname(), timeout=1)]  # the backlog: full
    try:
        with FakeController() as f:
            c = Client(f"http://127.0.0.1:{full.getsockname()[1]},{f.url}", timeout=5)
            t0 = time.monotonic()
            assert c.segments("h1", held="v1", wait=120)["version"] == "e:1"  # the fake's
            assert time.monotonic() - t0 < 3  # not the watch's 125 s of reading
            assert seen and seen[-1] == (125.0, 1, list(client.KEEPALIVE))
            assert c._order()[0][2] == int(f.url.rsplit(":", 1)[1])  # the full one goes last
    finally:
        for q in queued:
            q.close()
        full.close()


def test_slow_answer_within_timeout_is_fine():
    with FakeController(delay=0.3) as f:
        assert Client(f.url, timeout=5).jobs() == {"jobs": []}


def test_non_json_error_body_and_bad_urls():
    def serve(sock):
        conn, _ = sock.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\n"
                     b"Content-Length: 11\r\n\r\nproxy says!")
        conn.close()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    t = threading.Thread(target=serve, args=(s,), daemon=True)
    t.start()
    try:
        with pytest.raises(ControllerError) as e:
            Client(f"127.0.0.1:{s.getsockname()[1]}", timeout=5).fabric()  # scheme optional
        assert e.value.status == 502 and e.value.message == "proxy says!"
    finally:
        t.join(5)
        s.close()
    for bad in ("ftp://x", "", "http://:80", "http://h:99999"):
        with pytest.raises(ValueError):
            Client(bad)
    with pytest.raises(ValueError):
        Client("http://h", timeout=0)
    with pytest.raises(ValueError):
        Client("http://h").job("")


def test_read_token(tmp_path):
    f = tmp_path / "tok"
    f.write_text("s3cret\nignored\n")
    assert read_token("a", str(f), env={}) == "a"
    assert read_token(None, str(f), env={}) == "s3cret"
    assert read_token(env={"MLROUTE_TOKEN_FILE": str(f), "MLROUTE_TOKEN": "b"}) == "s3cret"
    assert read_token(env={"MLROUTE_TOKEN": "b"}) == "b"
    assert read_token(env={}) is None
    with pytest.raises(ValueError, match="cannot read token file"):
        read_token(None, str(tmp_path / "missing"), env={})
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        read_token(None, str(tmp_path / "empty"), env={})


def test_forwarding_headers_override(fake):
    """A standby forwards the client's own Authorization and its marker header, body as is."""
    c = Client(fake.url, timeout=5)
    status, doc = c.request("POST", "/v1/jobs", body=b'{"id": "f", "members": ["a", "b"]}',
                            headers={"Authorization": "Bearer tok", "X-Mlroute-Forwarded": "c1"})
    assert status == 201 and doc["id"] == "f"
    assert fake.requests[-1]["headers"]["X-Mlroute-Forwarded"] == "c1"
