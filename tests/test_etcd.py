"""The etcd adapter (etcd3gw plus what it lacks) against a real etcd (Debian's etcd-server,
started on loopback ports with a temporary data directory); skipped without the etcd binary."""
import json
import os
import threading
import time
import types

import pytest

from controller.service import etcd as e
from emulation.harness.ha import ETCD, EtcdServer
from emulation.harness.ports import free_port

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def server(etcd_server):
    return etcd_server


@pytest.fixture
def c(server, request):
    client = e.Etcd(server.url)
    client.gw.delete_prefix(b"/t/")  # etcd3gw's own call
    return client


def test_put_get_range_and_delete(c):
    r1 = c.put(b"/t/a", b"1")
    r2 = c.put(b"/t/b", b"\x00\xff binary")
    assert r2 == r1 + 1
    kv = c.get(b"/t/b")
    assert kv.value == b"\x00\xff binary" and kv.create_revision == r2 and kv.version == 1
    c.put(b"/t/a", b"2")
    a = c.get(b"/t/a")
    assert a.value == b"2" and a.create_revision == r1 and a.version == 2
    kvs, rev = c.prefix(b"/t/")
    assert [k.key for k in kvs] == [b"/t/a", b"/t/b"] and rev >= r2 + 1
    assert c.get(b"/t/none") is None
    assert c.gw.delete(b"/t/a") and c.get(b"/t/a") is None


def test_txn_creates_a_key_once(c):
    first = c.txn([e.compare_create(b"/t/m", 0)], [e.op_put(b"/t/m", b"x")],
                  [e.op_range(b"/t/m")])
    assert first.succeeded and first.responses == [first.revision]
    second = c.txn([e.compare_create(b"/t/m", 0)], [e.op_put(b"/t/m", b"y")],
                   [e.op_range(b"/t/m")])
    assert not second.succeeded
    (kv,), = second.responses
    assert kv.value == b"x" and kv.create_revision == first.revision
    fenced = c.txn([e.compare_create(b"/t/m", first.revision)], [e.op_put(b"/t/s", b"ok")])
    assert fenced.succeeded and c.get(b"/t/s").value == b"ok"
    stale = c.txn([e.compare_create(b"/t/m", first.revision - 1)], [e.op_put(b"/t/s", b"no")])
    assert not stale.succeeded and c.get(b"/t/s").value == b"ok"


def test_a_lease_keeps_its_keys_until_revoked(c):
    lease, ttl = c.grant(5)
    assert ttl == 5
    c.put(b"/t/l", b"v", lease)
    assert c.get(b"/t/l").lease == lease
    assert c.keepalive(lease) == 5
    assert c.revoke(lease)
    assert c.get(b"/t/l") is None
    assert c.keepalive(lease) == 0  # gone
    assert not c.revoke(lease)


@pytest.mark.slow
def test_an_expired_lease_takes_its_keys_with_it(c):
    lease, ttl = c.grant(1)
    assert ttl >= 1  # etcd raises it to its minimum (2 s with default timing)
    c.put(b"/t/x", b"v", lease)
    deadline = time.monotonic() + ttl + 3
    while c.get(b"/t/x") is not None:
        assert time.monotonic() < deadline, "lease did not expire"
        time.sleep(0.1)
    assert c.keepalive(lease) == 0


def test_watch_sees_puts_and_deletes_from_a_revision(c):
    rev = c.put(b"/t/w1", b"before")
    w = c.watch(b"/t/", e.prefix_end(b"/t/"), start_revision=rev)
    seen = []

    def read():
        for events in w:
            seen.extend((ev.kind, ev.kv.key, ev.kv.value) for ev in events)
            if len(seen) >= 3:
                return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    c.put(b"/t/w2", b"after")
    c.gw.delete(b"/t/w1")
    t.join(10)
    w.close()
    assert seen == [("put", b"/t/w1", b"before"), ("put", b"/t/w2", b"after"),
                    ("delete", b"/t/w1", b"")]


def test_close_ends_a_waiting_watch(c):
    w = c.watch(b"/t/quiet")
    done = threading.Event()
    t = threading.Thread(target=lambda: (list(w), done.set()), daemon=True)
    t.start()
    time.sleep(0.2)
    assert not done.is_set()
    w.close()
    assert done.wait(5)


def test_a_watch_ends_when_etcd_dies(tmp_path):
    """What etcd3gw's own watch misses (it keeps waiting after the stream broke): the
    iteration ends with EtcdUnavailable, so a controller reads again and watches anew."""
    if not os.path.exists(ETCD):
        pytest.skip("etcd is not installed (apt-get install etcd-server)")
    with EtcdServer(str(tmp_path)) as s:
        c = e.Etcd(s.url)
        w = c.watch(b"/d/", e.prefix_end(b"/d/"))
        out = []

        def read():
            try:
                for events in w:
                    out.extend(events)
            except e.EtcdError as err:
                out.append(err)

        t = threading.Thread(target=read, daemon=True)
        t.start()
        c.put(b"/d/a", b"1")
        deadline = time.monotonic() + 5  # the event first (a loaded machine delays it)
        while not out and time.monotonic() < deadline:
            time.sleep(0.01)
        s.stop()
        t.join(5)
        assert not t.is_alive(), "the watch kept waiting after etcd died"
        assert [ev.kv.key for ev in out[:-1]] == [b"/d/a"]
        assert isinstance(out[-1], e.EtcdUnavailable) and s.url in str(out[-1])


def test_unreachable_etcd_is_named():
    url = f"http://127.0.0.1:{free_port()}"
    c = e.Etcd(url, timeout=1)
    with pytest.raises(e.EtcdUnavailable, match=f"etcd at {url} is unreachable"):
        c.status()
    with pytest.raises(e.EtcdUnavailable, match="unreachable"):
        c.watch(b"/x")
    with pytest.raises(ValueError, match="expected http://HOST:PORT or https://HOST:PORT"):
        e.Etcd("ftp://x:1")
    with pytest.raises(ValueError, match="no file"):
        e.Etcd("https://x:1", ca_file="/nonexistent/ca.pem")


def test_prefix_end():
    assert e.prefix_end(b"/a/") == b"/a0"
    assert e.prefix_end(b"a\xff") == b"b"
    assert e.prefix_end(b"\xff\xff") == b"\0"


@pytest.mark.parametrize("error, unavailable", [
    # what etcd 3.4's gateway sent when etcd stopped under a running watch (seen in CI)
    ({"grpc_code": 1, "http_code": 408, "message": "grpc: the client connection is closing",
      "http_status": "Request Timeout"}, True),
    ({"grpc_code": 14, "http_code": 503, "message": "transport is closing"}, True),
    ({"grpc_code": 3, "http_code": 400, "message": "invalid range"}, False),
])
def test_a_watch_stream_error_says_whether_etcd_is_gone(error, unavailable):
    """A stream that ends with the gateway's error line: etcd stopping is EtcdUnavailable (a
    controller watches anew once it is back), anything else etcd said is EtcdError."""
    w = object.__new__(e.Watch)
    w.client, w.closed, w.revision = e.Etcd("http://127.0.0.1:1"), False, 0
    w.resp = types.SimpleNamespace(close=lambda: None)  # the stream: its lines below
    w.lines = iter([json.dumps({"result": {"header": {"revision": "7"}, "events": [
        {"kv": {"key": "L2QvYQ==", "value": "MQ==", "mod_revision": "7"}}]}}).encode(),
        json.dumps({"error": error}).encode()])
    out = []
    with pytest.raises(e.EtcdError) as err:
        for events in w:
            out.extend(events)
    assert [ev.kv.key for ev in out] == [b"/d/a"]
    assert isinstance(err.value, e.EtcdUnavailable) is unavailable
    assert "http://127.0.0.1:1" in str(err.value)


def test_a_controller_without_redundancy_imports_no_etcd_client():
    """etcd3gw and requests come with the first etcd client: not in a controller's start."""
    import subprocess
    import sys
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import sys, controller.shell.core; "
            "print(*(m in sys.modules for m in ('etcd3gw', 'requests')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True,
                         text=True, timeout=120, env=dict(os.environ, PYTHONPATH=repo))
    assert out.returncode == 0 and out.stdout.split() == ["False", "False"], out.stderr
