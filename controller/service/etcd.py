"""A small client for etcd's v3 API through its JSON gateway (plain HTTP POSTs, standard library
only): key-value (put, range, delete, txn), leases (grant, keep-alive, revoke) and watches (the
streaming ``/v3/watch`` endpoint, one JSON message per line).

Why not a gRPC client: the maintained Python clients pull in grpcio (a large native wheel) for
what is here about 200 lines of urllib; the PyPI ``etcd3`` package is unmaintained and pins an
old protobuf. The gateway is part of every etcd 3.x server (Debian's ``etcd-server`` 3.4), so
nothing has to run beside it. Keys and values travel base64-encoded; 64-bit integers arrive as
JSON strings, and fields at their default value (0, false, PUT) are left out by the gateway.

    >>> c = Etcd("http://127.0.0.1:2379")                       # doctest: +SKIP
    >>> rev = c.put(b"/a", b"1"); c.get(b"/a").value            # doctest: +SKIP
    b'1'

Every call raises ``EtcdUnavailable`` (naming the URL) when etcd cannot be reached in time and
``EtcdError`` when it answers with an error.
"""
from __future__ import annotations

import base64
import http.client
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Iterator


class EtcdError(RuntimeError):
    """etcd answered with an error (the message is etcd's)."""


class EtcdUnavailable(EtcdError):
    """etcd could not be reached (connection refused, timed out, closed)."""


@dataclass(frozen=True)
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int


@dataclass(frozen=True)
class Event:
    """One change seen by a watch: ``kind`` is "put" or "delete" (a deleted key has no value)."""
    kind: str
    kv: KeyValue


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def _kv(d: dict) -> KeyValue:
    return KeyValue(_unb64(d.get("key")), _unb64(d.get("value")),
                    int(d.get("create_revision", 0)), int(d.get("mod_revision", 0)),
                    int(d.get("version", 0)), int(d.get("lease", 0)))


def prefix_end(prefix: bytes) -> bytes:
    """The ``range_end`` that makes a range cover every key starting with ``prefix`` (etcd's
    rule: the prefix with its last byte below 0xff incremented). O(len(prefix)).

    >>> prefix_end(b"/mlroute/")
    b'/mlroute0'
    """
    p = bytearray(prefix)
    while p:
        if p[-1] < 0xFF:
            p[-1] += 1
            return bytes(p)
        p.pop()
    return b"\0"  # every key


# ---- transaction building blocks ---------------------------------------------------------------
def compare_create(key: bytes, revision: int) -> dict:
    """Compare: the key was created at ``revision`` (0: the key does not exist)."""
    return {"target": "CREATE", "key": _b64(key), "result": "EQUAL",
            "create_revision": str(revision)}


def compare_value(key: bytes, value: bytes) -> dict:
    return {"target": "VALUE", "key": _b64(key), "result": "EQUAL", "value": _b64(value)}


def op_put(key: bytes, value: bytes, lease: int = 0) -> dict:
    body = {"key": _b64(key), "value": _b64(value)}
    if lease:
        body["lease"] = str(lease)
    return {"request_put": body}


def op_range(key: bytes, range_end: bytes | None = None) -> dict:
    body = {"key": _b64(key)}
    if range_end is not None:
        body["range_end"] = _b64(range_end)
    return {"request_range": body}


def op_delete(key: bytes) -> dict:
    return {"request_delete_range": {"key": _b64(key)}}


@dataclass
class TxnResult:
    succeeded: bool
    revision: int  # the store's revision after the transaction
    responses: list  # per operation: list of KeyValue for a range, revision for a put, else None


class Etcd:
    def __init__(self, url: str, timeout: float = 2.0):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(f"etcd URL {url!r}: expected http://HOST:PORT (the JSON gateway; "
                             "TLS is not supported by this client)")
        self.url = url.rstrip("/")
        self.host, self.port = parsed.hostname, parsed.port or 2379
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"Etcd({self.url!r})"

    def _post(self, path: str, body: dict, timeout: float | None = None) -> dict:
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            try:
                text = json.loads(text).get("error", text)
            except ValueError:
                pass
            raise EtcdError(f"etcd at {self.url}: {path}: {text}") from None
        except (OSError, http.client.HTTPException, ValueError) as e:
            reason = getattr(e, "reason", e)
            raise EtcdUnavailable(f"etcd at {self.url} is unreachable ({reason})") from None

    # ---- maintenance ---------------------------------------------------------------------
    def status(self, timeout: float | None = None) -> dict:
        """The server's version, leader and revision; raises EtcdUnavailable if unreachable."""
        return self._post("/v3/maintenance/status", {}, timeout)

    # ---- key-value -------------------------------------------------------------------------
    def put(self, key: bytes, value: bytes, lease: int = 0) -> int:
        """Store ``value`` under ``key``; returns the new revision."""
        body = op_put(key, value, lease)["request_put"]
        return int(self._post("/v3/kv/put", body)["header"]["revision"])

    def range(self, key: bytes, range_end: bytes | None = None) -> tuple[list[KeyValue], int]:
        """(key-values, revision of the store) of one key or of [key, range_end)."""
        doc = self._post("/v3/kv/range", op_range(key, range_end)["request_range"])
        return [_kv(d) for d in doc.get("kvs", [])], int(doc["header"]["revision"])

    def prefix(self, prefix: bytes) -> tuple[list[KeyValue], int]:
        return self.range(prefix, prefix_end(prefix))

    def get(self, key: bytes) -> KeyValue | None:
        kvs, _ = self.range(key)
        return kvs[0] if kvs else None

    def delete(self, key: bytes, range_end: bytes | None = None) -> int:
        """Delete one key (or a range); returns how many keys went."""
        body = {"key": _b64(key)}
        if range_end is not None:
            body["range_end"] = _b64(range_end)
        return int(self._post("/v3/kv/deleterange", body).get("deleted", 0))

    def txn(self, compare: list[dict], success: list[dict], failure: list[dict] = ()
            ) -> TxnResult:
        """If every comparison holds run ``success``, else ``failure``, atomically."""
        doc = self._post("/v3/kv/txn", {"compare": list(compare), "success": list(success),
                                        "failure": list(failure)})
        out = []
        for r in doc.get("responses", []):
            if "response_range" in r:
                out.append([_kv(d) for d in r["response_range"].get("kvs", [])])
            elif "response_put" in r:
                out.append(int(r["response_put"]["header"]["revision"]))
            else:
                out.append(None)
        return TxnResult(bool(doc.get("succeeded", False)), int(doc["header"]["revision"]), out)

    # ---- leases ----------------------------------------------------------------------------
    def grant(self, ttl: int) -> tuple[int, int]:
        """A new lease: (id, granted TTL). etcd raises TTLs below its minimum (about 1.5 times
        its election timeout, 2 s by default) to that minimum."""
        doc = self._post("/v3/lease/grant", {"TTL": str(int(ttl))})
        if doc.get("error"):
            raise EtcdError(f"etcd at {self.url}: lease grant: {doc['error']}")
        return int(doc["ID"]), int(doc["TTL"])

    def keepalive(self, lease: int, timeout: float | None = None) -> int:
        """Refresh a lease; returns its TTL, 0 if the lease expired or never existed."""
        doc = self._post("/v3/lease/keepalive", {"ID": str(lease)}, timeout)
        return int(doc.get("result", {}).get("TTL", 0))

    def revoke(self, lease: int) -> bool:
        """End a lease now, deleting its keys; False if it had already ended."""
        try:
            self._post("/v3/lease/revoke", {"ID": str(lease)})
        except EtcdUnavailable:
            raise
        except EtcdError as e:
            if "lease not found" in str(e):
                return False
            raise
        return True

    # ---- watches ---------------------------------------------------------------------------
    def watch(self, key: bytes, range_end: bytes | None = None, start_revision: int = 0
              ) -> "Watch":
        """Changes of ``key`` (or [key, range_end)) from ``start_revision`` on (0: from now)."""
        return Watch(self, key, range_end, start_revision)


class Watch:
    """An open ``/v3/watch`` stream. Iterate for lists of events (one list per revision etcd
    reports); ``close`` from another thread ends the iteration. A closed or broken stream ends
    the iteration with ``EtcdUnavailable``; a start revision that etcd compacted away raises
    ``EtcdError`` (read the keys again and watch from the revision of that read)."""

    def __init__(self, client: Etcd, key: bytes, range_end: bytes | None, start_revision: int):
        self.client = client
        self.closed = False
        self.revision = 0  # of the last message received (progress, even without events)
        body = {"key": _b64(key)}
        if range_end is not None:
            body["range_end"] = _b64(range_end)
        if start_revision:
            body["start_revision"] = str(start_revision)
        try:
            self.conn = http.client.HTTPConnection(client.host, client.port,
                                                   timeout=client.timeout)
            self.conn.request("POST", "/v3/watch", json.dumps({"create_request": body}),
                              {"Content-Type": "application/json"})
            self.resp = self.conn.getresponse()
            first = self._message()
            if not first.get("created"):
                raise EtcdError(f"etcd at {client.url}: watch not created: {first}")
            self.conn.sock.settimeout(None)  # from now on wait for changes as long as it takes
        except (OSError, http.client.HTTPException) as e:
            self.conn.close()
            raise EtcdUnavailable(f"etcd at {client.url} is unreachable ({e})") from None

    def _message(self) -> dict:
        line = self.resp.readline()
        if not line:
            raise EtcdUnavailable(f"etcd at {self.client.url} closed the watch")
        doc = json.loads(line)
        if "error" in doc:
            raise EtcdError(f"etcd at {self.client.url}: watch: {doc['error']}")
        result = doc.get("result", {})
        self.revision = int(result.get("header", {}).get("revision", self.revision))
        if int(result.get("compact_revision", 0)):
            raise EtcdError(f"etcd at {self.client.url}: watch: revision compacted "
                            f"(oldest kept {result['compact_revision']})")
        if result.get("canceled"):
            raise EtcdError(f"etcd at {self.client.url}: watch canceled: "
                            f"{result.get('cancel_reason', '')}")
        return result

    def __iter__(self) -> Iterator[list[Event]]:
        try:
            while not self.closed:
                try:
                    result = self._message()
                except Exception as e:  # noqa: BLE001 - any failure after close is the close
                    if self.closed:
                        return
                    if isinstance(e, EtcdError):
                        raise
                    if isinstance(e, (OSError, http.client.HTTPException, ValueError)):
                        raise EtcdUnavailable(f"etcd at {self.client.url}: watch broken "
                                              f"({e})") from None
                    raise
                events = [Event("delete" if e.get("type") == "DELETE" else "put", _kv(e["kv"]))
                          for e in result.get("events", [])]
                if events:
                    yield events
        finally:
            self.conn.close()

    def close(self) -> None:
        """End the watch; safe from any thread (the reading thread closes the connection)."""
        self.closed = True
        sock = getattr(getattr(self, "conn", None), "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
