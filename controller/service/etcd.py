"""etcd for redundant controllers: ``etcd3gw`` (OpenStack's client of etcd's v3 JSON gateway,
plain HTTP through ``requests``) with the little mlroute needs on top of it.

What etcd3gw lacks, and this module adds:

* errors that name the URL (``EtcdUnavailable``: not reachable; ``EtcdError``: etcd said no),
  whatever etcd3gw or ``requests`` raised;
* revisions: a put's revision, and a range read with the store's revision (the watch starts
  there), both through a one-operation transaction, since etcd3gw's ``put`` and ``get`` drop
  the response header;
* transactions as values (``compare_create``: a key's creation revision, 0 for absent, which
  is both the create-if-absent election and the fence of a save) and their parsed results;
* a lease grant that returns the TTL etcd granted (it raises small TTLs to its minimum) and a
  keep-alive with its own short timeout;
* a watch that ends when its stream breaks or etcd cancels it: etcd3gw's watch keeps waiting
  silently after etcd dies (measured: its iterator never returned, and missed every later
  event, after etcd was killed and restarted), so a controller would never see a new master.

    >>> c = Etcd("http://127.0.0.1:2379")                       # doctest: +SKIP
    >>> rev = c.put(b"/a", b"1"); c.get(b"/a").value            # doctest: +SKIP
    b'1'
"""
from __future__ import annotations

import base64
import functools
import json
import os
import socket
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple


class _Gw(NamedTuple):
    etcd3gw: object
    requests: object
    errors: object  # etcd3gw.exceptions
    Lease: type  # etcd3gw.lease.Lease


@functools.cache
def _gw() -> _Gw:
    """etcd3gw and requests (and etcd3gw's errors and leases), imported with the first etcd
    client: a controller without redundant controllers never needs them, and their imports
    took about 60 ms of every start."""
    import etcd3gw
    import requests
    from etcd3gw import exceptions
    from etcd3gw.lease import Lease
    return _Gw(etcd3gw, requests, exceptions, Lease)


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


def _kv(d: dict) -> KeyValue:
    """A key-value of the gateway (base64 text, 64-bit integers as strings, defaults left out)."""
    return KeyValue(base64.b64decode(d.get("key", "")), base64.b64decode(d.get("value", "")),
                    int(d.get("create_revision", 0)), int(d.get("mod_revision", 0)),
                    int(d.get("version", 0)), int(d.get("lease", 0)))


def prefix_end(prefix: bytes) -> bytes:
    """The ``range_end`` that makes a range cover every key starting with ``prefix`` (etcd's
    rule: the prefix with its last byte below 0xff incremented). O(len(prefix)).

    >>> prefix_end(b"/mlroute/"), prefix_end(b"a\\xff"), prefix_end(b"\\xff")
    (b'/mlroute0', b'b', b'\\x00')
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


def compare_older(key: bytes, revision: int) -> dict:
    """Compare: the key was last written before ``revision`` (or does not exist)."""
    return {"target": "MOD", "key": _b64(key), "result": "LESS", "mod_revision": str(revision)}


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


@dataclass
class TxnResult:
    succeeded: bool
    revision: int  # the store's revision after the transaction
    responses: list  # per operation: KeyValues of a range, revision of a put


class Etcd:
    """One etcd server through etcd3gw. ``timeout`` (seconds) bounds every call but a watch's
    wait for changes; it may be changed at any time."""

    def __init__(self, url: str, timeout: float = 2.0, ca_file: str | None = None,
                 cert_file: str | None = None, key_file: str | None = None):
        """``https://`` URLs: etcd's certificate checked against ``ca_file`` (else the
        system's CAs); ``cert_file`` and ``key_file``: the client certificate etcd asks for
        with ``--client-cert-auth``."""
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"etcd URL {url!r}: expected http://HOST:PORT or "
                             "https://HOST:PORT (the JSON gateway)")
        if (ca_file or cert_file) and parsed.scheme != "https":
            raise ValueError(f"etcd URL {url!r}: a CA or client certificate needs https://")
        if bool(cert_file) != bool(key_file):
            raise ValueError("etcd: a client certificate needs its key, and a key its "
                             "certificate")
        for path in (ca_file, cert_file, key_file):
            if path and not os.path.isfile(path):
                raise ValueError(f"etcd: no file {path}")
        self.url = url.rstrip("/")
        etcd3gw = _gw().etcd3gw
        self.gw = etcd3gw.client(parsed.hostname, parsed.port or 2379, protocol=parsed.scheme,
                                 ca_cert=ca_file, cert_key=key_file, cert_cert=cert_file,
                                 timeout=timeout,
                                 api_path="/v3/")  # etcd >= 3.4; no /version round trip
        # the environment's proxies and CA bundle (REQUESTS_CA_BUNDLE wins over a session's
        # own CA in requests) are not etcd's: its URL, CA and certificate are given here
        self.gw.session.trust_env = False

    @property
    def timeout(self) -> float:
        return self.gw.timeout

    @timeout.setter
    def timeout(self, value: float) -> None:
        self.gw.timeout = value

    def __repr__(self) -> str:
        return f"Etcd({self.url!r})"

    def _call(self, fn, *args, timeout: float | None = None, **kwargs):
        """Run an etcd3gw call (with another timeout on a client sharing the connections),
        naming the URL in any error."""
        etcd3gw, requests, gw_errors, _ = _gw()
        gw = self.gw
        if timeout is not None and timeout != gw.timeout:
            gw = etcd3gw.client(gw.host, gw.port, protocol=gw.protocol, timeout=timeout,
                                api_path="/v3/", session=gw.session)
        try:
            return fn(gw, *args, **kwargs)
        except (gw_errors.ConnectionFailedError, gw_errors.ConnectionTimeoutError,
                requests.RequestException, ValueError) as e:
            raise EtcdUnavailable(f"etcd at {self.url} is unreachable "
                                  f"({_reason(e)})") from None
        except gw_errors.Etcd3Exception as e:
            raise EtcdError(f"etcd at {self.url}: {_reason(e)}") from None

    # ---- status and reads (etcd3gw) --------------------------------------------------------
    def status(self, timeout: float | None = None) -> dict:
        """The server's version, leader and revision; raises EtcdUnavailable if unreachable."""
        return self._call(lambda gw: gw.status(), timeout=timeout)

    def get(self, key: bytes) -> KeyValue | None:
        found = self._call(lambda gw: gw.get(key, metadata=True))
        if not found:
            return None
        value, meta = found[0]
        return KeyValue(meta["key"], value, int(meta.get("create_revision", 0)),
                        int(meta.get("mod_revision", 0)), int(meta.get("version", 0)),
                        int(meta.get("lease", 0)))

    # ---- what etcd3gw lacks: revisions and transactions ------------------------------------
    def put(self, key: bytes, value: bytes, lease: int = 0) -> int:
        """Store ``value`` under ``key``; returns the new revision."""
        return self.txn([], [op_put(key, value, lease)]).revision

    def range(self, key: bytes, range_end: bytes | None = None) -> tuple[list[KeyValue], int]:
        """(key-values, revision of the store) of one key or of [key, range_end)."""
        r = self.txn([], [op_range(key, range_end)])
        return r.responses[0], r.revision

    def prefix(self, prefix: bytes) -> tuple[list[KeyValue], int]:
        return self.range(prefix, prefix_end(prefix))

    def txn(self, compare: list[dict], success: list[dict], failure: list[dict] = ()
            ) -> TxnResult:
        """If every comparison holds run ``success``, else ``failure``, atomically."""
        doc = self._call(lambda gw: gw.transaction({"compare": list(compare),
                                                    "success": list(success),
                                                    "failure": list(failure)}))
        out = []
        for r in doc.get("responses", []):
            if "response_range" in r:
                out.append([_kv(d) for d in r["response_range"].get("kvs", [])])
            else:
                out.append(int(r["response_put"]["header"]["revision"]))
        return TxnResult(bool(doc.get("succeeded", False)), int(doc["header"]["revision"]), out)

    # ---- leases ----------------------------------------------------------------------------
    def grant(self, ttl: int) -> tuple[int, int]:
        """A new lease: (id, granted TTL). etcd raises TTLs below its minimum (about 1.5 times
        its election timeout, 2 s by default) to that minimum; etcd3gw's ``lease`` drops it."""
        doc = self._call(lambda gw: gw.post(gw.get_url("/lease/grant"),
                                            json={"TTL": int(ttl), "ID": 0}))
        if doc.get("error"):
            raise EtcdError(f"etcd at {self.url}: lease grant: {doc['error']}")
        return int(doc["ID"]), int(doc["TTL"])

    def keepalive(self, lease: int, timeout: float | None = None) -> int:
        """Refresh a lease; returns its TTL, 0 if the lease expired or never existed."""
        return max(0, self._call(lambda gw: _gw().Lease(lease, gw).refresh(), timeout=timeout))

    def revoke(self, lease: int) -> bool:
        """End a lease now, deleting its keys; False if it had already ended."""
        try:
            return self._call(lambda gw: _gw().Lease(lease, gw).revoke())
        except EtcdUnavailable:
            raise
        except EtcdError as e:
            if "lease not found" in str(e):
                return False
            raise

    # ---- watches ---------------------------------------------------------------------------
    def watch(self, key: bytes, range_end: bytes | None = None, start_revision: int = 0
              ) -> Watch:
        """Changes of ``key`` (or [key, range_end)) from ``start_revision`` on (0: from now)."""
        return Watch(self, key, range_end, start_revision)


def _reason(e: Exception) -> str:
    """The useful part of an etcd3gw or requests error: etcd's own message if it sent one."""
    text = getattr(e, "detail_text", None) or str(e) or type(e).__name__
    try:
        text = json.loads(text).get("error", text)
    except (ValueError, AttributeError):
        pass
    return str(text)


class Watch:
    """An open ``/v3/watch`` stream on the client's connections. Iterate for lists of events
    (one list per revision etcd reports); ``close`` from another thread ends the iteration. A
    closed or broken stream ends the iteration with ``EtcdUnavailable``; a start revision that
    etcd compacted away, or a watch etcd cancelled, raises ``EtcdError`` (read the keys again
    and watch from the revision of that read)."""

    def __init__(self, client: Etcd, key: bytes, range_end: bytes | None, start_revision: int):
        self.client = client
        self.closed = False
        self.revision = 0  # of the last message received (progress, even without events)
        body = op_range(key, range_end)["request_range"]
        if start_revision:
            body["start_revision"] = str(start_revision)
        gw, requests = client.gw, _gw().requests
        try:
            # connect and first answer within the timeout, then wait for changes forever
            self.resp = gw.session.post(gw.get_url("/watch"), json={"create_request": body},
                                        stream=True, timeout=(gw.timeout, None))
            if self.resp.status_code != 200:
                raise EtcdError(f"etcd at {client.url}: watch: HTTP {self.resp.status_code} "
                                f"{self.resp.text[:200]}")
            self.lines = self.resp.iter_lines(chunk_size=None)
            first = self._message()
            if not first.get("created"):
                raise EtcdError(f"etcd at {client.url}: watch not created: {first}")
        except requests.RequestException as e:
            raise EtcdUnavailable(f"etcd at {client.url} is unreachable ({e})") from None

    def _message(self) -> dict:
        line = b""
        while not line.strip():
            line = next(self.lines, None)
            if line is None:
                raise EtcdUnavailable(f"etcd at {self.client.url} closed the watch")
        doc = json.loads(line)
        if "error" in doc:
            err = doc["error"]
            # etcd stopping: the gateway's own connection closes ("grpc: the client connection
            # is closing", CANCELLED, HTTP 408) or is gone (UNAVAILABLE, 503); a deadline (504)
            unavailable = isinstance(err, dict) and (err.get("http_code") in (408, 503, 504) or
                                                     err.get("grpc_code") in (1, 4, 14))
            raise (EtcdUnavailable if unavailable else EtcdError)(
                f"etcd at {self.client.url}: watch: {err}")
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
                    if isinstance(e, (OSError, _gw().requests.RequestException, ValueError)):
                        raise EtcdUnavailable(f"etcd at {self.client.url}: watch broken "
                                              f"({e})") from None
                    raise
                events = [Event("delete" if e.get("type") == "DELETE" else "put", _kv(e["kv"]))
                          for e in result.get("events", [])]
                if events:
                    yield events
        finally:
            self.resp.close()

    def close(self) -> None:
        """End the watch; safe from any thread: the stream's socket is shut down, so the
        reading thread wakes up (and closes the response)."""
        self.closed = True
        try:
            fd = socket.dup(self.resp.raw._fp.fileno())  # http.client's, as etcd3gw does
        except (AttributeError, OSError, ValueError):
            return  # already closed
        s = socket.socket(fileno=fd)
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            s.close()
