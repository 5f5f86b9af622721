"""The REST/web server (``controller/shell/rest.py``, no SDN framework) against a real service on
the fake switch tables, over real sockets: files, metrics, the API, the write token (command
line, file, environment; a non-ASCII header is a 401), 405 with ``Allow``, body limits (413
before reading a large declared length; chunked bodies read and limited), malformed requests
answered in JSON, never a traceback."""
import http.client
import json
import os
import socket
import threading

import pytest

from controller.errors import InputError
from controller.model.clos import Clos
from controller.service import api
from controller.service.route_service import RouteService
from controller.shell.rest import WEB_DIR, RestServer, write_token
from emulation.harness.fake_switch import FakeSwitches

TOKEN = "s3cret-token"


@pytest.fixture
def server():
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, f)
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    rest = RestServer(svc, "127.0.0.1", 0, TOKEN)
    rest.sock.settimeout(0.05)  # the accept loop sees stop() within 0.05 s, not 0.5 s
    thread = threading.Thread(target=rest.serve, daemon=True)
    thread.start()
    try:
        yield rest
    finally:
        rest.stop()
        thread.join(timeout=5)
        assert not thread.is_alive(), "the accept loop did not end"


def call(rest, method, path, body=None, headers=None, chunked=False, auth=True):
    """One request; with ``auth`` it carries the admin token unless ``headers`` name one
    (reads need a credential too once one is configured)."""
    headers = dict(headers or {})
    if auth:
        headers.setdefault("Authorization", f"Bearer {TOKEN}")
    conn = http.client.HTTPConnection("127.0.0.1", rest.port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers, encode_chunked=chunked)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, dict(resp.getheaders()), data
    finally:
        conn.close()


def raw(rest, request: bytes) -> bytes:
    """Send bytes as they are (what http.client refuses to send); the answer's bytes."""
    with socket.create_connection(("127.0.0.1", rest.port), timeout=10) as s:
        s.sendall(request)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


def job(jid="j1"):
    return json.dumps({"id": jid, "collective": "ring_allreduce", "ranks": ["h0_0", "h1_0"],
                       "bytes": 1e6}).encode()


def test_files_metrics_and_reads(server):
    status, headers, body = call(server, "GET", "/")
    with open(os.path.join(WEB_DIR, "index.html"), "rb") as fh:
        assert (status, body) == (200, fh.read())
    assert headers["Content-Type"].startswith("text/html")
    assert headers["Cache-Control"] == "no-cache"
    status, headers, body = call(server, "GET", "/web/app.js")
    assert status == 200 and headers["Content-Type"].startswith("application/javascript")
    for path in ("/web/../app.py", "/web/nothing.js", "/nothing", "/v1/nothing/here"):
        status, headers, body = call(server, "GET", path)
        assert status == 404 and "error" in json.loads(body), path
    status, headers, body = call(server, "GET", "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert b"mlroute_" in body
    status, _, body = call(server, "GET", "/v1/fabric?x=1")  # a query is not part of the path
    assert status == 200 and json.loads(body)["declared"]
    status, headers, body = call(server, "HEAD", "/")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0


def test_writes_need_the_token_and_jobs_round_trip(server):
    status, _, body = call(server, "POST", "/v1/jobs", job(), auth=False)
    assert status == 401 and "Bearer" in json.loads(body)["error"]
    status, _, body = call(server, "GET", "/v1/jobs", auth=False)  # reads need it too
    assert status == 401 and "Bearer" in json.loads(body)["error"]
    assert call(server, "GET", "/v1/ready", auth=False)[0] in (200, 503)  # open: probes
    assert call(server, "GET", "/metrics", auth=False)[0] == 200
    status, _, body = call(server, "POST", "/v1/jobs", job(), {"Authorization": "Bearer nope"})
    assert status == 401
    status, _, body = call(server, "POST", "/v1/jobs", job(),
                           {"Authorization": f"Bearer {TOKEN}"})
    assert status == 201, body
    status, _, body = call(server, "GET", "/v1/jobs/j1")
    assert status == 200 and json.loads(body)["id"] == "j1"
    status, headers, body = call(server, "GET", "/v1/jobs/j1/ports")
    assert status == 200 and headers["Content-Type"].startswith("text/plain") and body
    status, _, body = call(server, "GET", "/v1/jobs/%E2%82%AC")  # UTF-8 in the path
    assert status == 404 and "no job '€'" in json.loads(body)["error"]
    status, _, _ = call(server, "DELETE", "/v1/jobs/j1",
                        headers={"Authorization": f"Bearer {TOKEN}"})
    assert status == 200
    assert call(server, "GET", "/v1/jobs/j1")[0] == 404


@pytest.mark.parametrize("field, doc", [
    ("bytes", {"ranks": ["h0_0", "h1_0", "h2_0"], "bytes": 1e308}),
    ("bytes", {"ranks": ["h0_0", "h1_0", "h2_0"], "bytes": 2e15}),
    ("bytes", {"flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1e300}]}),
    ("bytes", {"members": ["h0_0", "h1_0"], "bytes": 1e308}),
    ("compute_s", {"ranks": ["h0_0", "h1_0"], "bytes": 1e6, "compute_s": 1e300}),
    ("start_s", {"ranks": ["h0_0", "h1_0"], "bytes": 1e6, "start_s": 2e9}),
])
def test_numbers_past_their_bound_are_a_400_naming_the_field_and_change_nothing(server, field,
                                                                              doc):
    """Issue 59, item 7: a job with bytes 1e308 was accepted and every other job's prediction
    became None. Bounds of docs/reference/limits.md: a 400 naming the field; nothing changes."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert call(server, "POST", "/v1/jobs", job("ok"), auth)[0] == 201
    before = (call(server, "GET", "/v1/jobs")[2], dict(server.service.installed))
    status, _, body = call(server, "POST", "/v1/jobs", json.dumps({"id": "big", **doc}).encode(),
                           auth)
    assert status == 400 and f"{field} must be at most" in json.loads(body)["error"], body
    assert (call(server, "GET", "/v1/jobs")[2], dict(server.service.installed)) == before
    assert json.loads(call(server, "GET", "/v1/jobs/ok")[2])["predicted_allreduce_s"] > 0


def test_non_ascii_or_malformed_authorization_is_401_not_500(server):
    for value in ("Bearer \u20ac".encode(), b"\xff\xfe\x00garbage", b"Bearer " + TOKEN.encode()
                  + b"\xc3"):
        answer = raw(server, b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: " + value +
                     b"\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
        assert b"Traceback" not in answer


def test_405_carries_allow(server):
    status, headers, body = call(server, "PATCH", "/v1/jobs", b"{}")
    assert status == 405 and headers["Allow"] == "GET, POST"
    assert "not allowed" in json.loads(body)["error"]
    status, headers, _ = call(server, "PUT", "/v1/jobs/x", b"{}",
                              {"Authorization": f"Bearer {TOKEN}"})
    assert status == 405 and headers["Allow"] == "DELETE, GET"
    status, headers, _ = call(server, "POST", "/metrics", b"")
    assert status == 405 and headers["Allow"] == "GET, HEAD"
    status, headers, _ = call(server, "BREW", "/v1/optimize")  # a method nobody serves
    assert status == 405 and headers["Allow"] == "POST"
    assert api.allowed("/v1/optimize") == ["POST"] and api.allowed("/v1/none") == []


def test_body_limits(server):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    # a declared length over the limit is refused before a byte of the body is sent
    answer = raw(server, b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                 TOKEN.encode() + b"\r\nContent-Length: %d\r\n\r\n" % (api.MAX_BODY + 1))
    assert answer.startswith(b"HTTP/1.1 413") and b"larger than" in answer
    # chunked bodies are read as they come: a small one is a job, a large one a 413
    status, _, body = call(server, "POST", "/v1/jobs", iter([job("c1")[:10], job("c1")[10:]]),
                           auth, chunked=True)
    assert status == 201, body
    big = (b"x" * 65536 for _ in range(api.MAX_BODY // 65536 + 2))
    status, _, body = call(server, "POST", "/v1/jobs", big, auth, chunked=True)
    assert status == 413
    for bad in (b"-1", b"ten"):
        answer = raw(server, b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                     TOKEN.encode() + b"\r\nContent-Length: " + bad + b"\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 400") and b"Content-Length" in answer
    answer = raw(server, b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                 TOKEN.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
    assert answer.startswith(b"HTTP/1.1 400")


def test_malformed_requests_get_json_never_a_traceback(server):
    for request in (b"NONSENSE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"\x16\x03\x01\x00\xa5\r\n\r\n",
                    b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n",
                    b"GET /v1/jobs/a%0Ab%00 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"):
        answer = raw(server, request)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.split(b" ")[1][:1] == b"4", answer[:200]
        assert "error" in json.loads(body), answer[:200]
        assert b"Traceback" not in answer


def test_concurrent_requests(server):
    results = []

    def get():
        results.append(call(server, "GET", "/v1/jobs")[0])
    threads = [threading.Thread(target=get) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert results == [200] * 16


def test_keep_alive_serves_several_requests_on_one_connection(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        for _ in range(3):
            conn.request("GET", "/v1/fabric", headers={"Authorization": f"Bearer {TOKEN}"})
            resp = conn.getresponse()
            assert resp.status == 200 and json.loads(resp.read())
    finally:
        conn.close()


def test_write_token_sources(tmp_path):
    path = tmp_path / "token"
    path.write_text("from-file\nignored\n")
    env = {"MLROUTE_TOKEN": "from-env"}
    assert write_token("cli", str(path), env) == "cli"
    assert write_token(None, str(path), env) == "from-file"
    assert write_token(None, None, env) == "from-env"
    assert write_token(None, None, {}) is None
    with pytest.raises(InputError, match="no such file|No such file"):
        write_token(None, str(tmp_path / "missing"), env)
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(InputError, match="holds no token"):
        write_token(None, str(tmp_path / "empty"), env)


def test_ready_answers_a_readiness_probe_as_the_fabric_view_says():
    """GET /v1/ready: 503 until every switch is connected and synchronised, then 200; the
    counts say how far it is, and ``ready`` is the fabric view's own."""
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    svc = RouteService(FakeSwitches(f.dpids.values()), f)
    n = len(f.dpids)

    def probe():
        code, doc = api.handle(svc, "GET", "/v1/ready")
        assert doc["ready"] is svc.fabric_view()["ready"] is (code == 200)
        assert ("error" in doc) is (code == 503)  # as every error answer of the API
        return code, doc

    assert probe() == (503, {"ready": False, "switches": n, "connected": 0, "synchronised": 0,
                             "error": f"not ready: 0 of {n} switches connected, 0 synchronised"})
    dpids = sorted(f.dpids.values())
    for d in dpids[:-1]:
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    code, doc = probe()
    assert (code, doc["connected"], doc["synchronised"]) == (503, n - 1, n - 1)
    svc.switch_connected(dpids[-1], {p: True for p in f.ports[f.switch_of_dpid[dpids[-1]]].values()})
    assert probe() == (200, {"ready": True, "switches": n, "connected": n, "synchronised": n})
    svc.switch_disconnected(dpids[0])
    code, doc = probe()
    assert code == 503 and doc["connected"] == n - 1 and doc["synchronised"] == n - 1


def test_ready_without_a_fabric_is_503(server):
    svc = RouteService(FakeSwitches([]), None)
    assert api.handle(svc, "GET", "/v1/ready") == (
        503, {"ready": False, "switches": 0, "connected": 0, "synchronised": 0,
              "error": "not ready: no fabric yet"})
    status, _, data = call(server, "GET", "/v1/ready")  # the served one: synchronised
    assert status == 200 and json.loads(data)["ready"] is True
