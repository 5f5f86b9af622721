"""The native REST front: one OS thread that accepts every connection, reads each request's
head, answers the published GETs itself and hands any other request to a thread of its own.

Why one thread (issue 38): under ryu-manager the hub thread holds the interpreter lock (GIL)
most of the time, and a native thread gets it back only when the hub lets go (at most a 5 ms
switch interval). A thread per connection took the lock about a dozen times per request
(accept, thread start, read, write, a lingering close waiting for the client's end) and each
time made the hub let go. Here a readiness probe costs a wake for its connection, one for its
request (answered in the same wake with one ``send``) and one for the client's close.

What is answered here: a ``GET`` with no body whose path ``fast`` answers (``Published``), in
HTTP/1.0 or 1.1, with the same status line, headers and body the full handler sends
(``rest._Handler._send``; tests/test_rest_native.py compares them byte for byte but the
date). Anything else (another method, a body, a path not published, a head the parser here
does not take, an answer the socket does not take at once) goes with the bytes read so far to
``handoff``, which serves the connection to its end in a thread. Connections kept alive come
back here after each published answer; an idle one is closed after ``idle_s``.

It uses only unpatched primitives (``bridge.original``): it never waits for the hub.
"""
from __future__ import annotations

import email.utils
import http
import json
import socket
import urllib.parse

from controller.shell.bridge import original

MAX_HEAD = 65536  # a head not ended within this many bytes is handed to the full handler
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n%s")
JSON = "application/json; charset=utf-8"
SERVER = "mlroute "  # as http.server says it: server_version, a space, sys_version ("")


def request_path(target: str) -> str:
    """The request path without its query, percent-decoded as UTF-8 (job ids are)."""
    raw = urllib.parse.urlsplit(target).path if "://" in target else \
        target.split("?", 1)[0].split("#", 1)[0]
    return urllib.parse.unquote_to_bytes(raw).decode("utf-8", "replace")


def refuse(conn, why: str) -> None:
    """Answer 503 with ``why`` and close: the request is not read, only drained for up to 50 ms
    (closing with it unread would reset the connection and could lose the answer), so the
    caller waits at most about a second for a client that does not read."""
    body = (json.dumps({"error": why}) + "\n").encode()
    try:
        conn.settimeout(1.0)
        conn.sendall(BUSY % (len(body), body))
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(0.05)
        for _ in range(16):  # at most 1 MB, 50 ms quiet each
            if not conn.recv(65536):
                break
    except OSError:
        pass
    finally:
        conn.close()


def parse_head(head: bytes) -> tuple[str, str, bool] | None:
    """(path, version, close) of a ``GET`` head without a body, None for anything else (the
    full handler answers it). ``close`` as http.server decides it: HTTP/1.0 closes unless
    ``Connection: keep-alive``, HTTP/1.1 keeps the connection unless ``Connection: close``.

    >>> parse_head(b"GET /v1/ready?x=1 HTTP/1.1\\r\\nHost: a")
    ('/v1/ready', 'HTTP/1.1', False)
    >>> parse_head(b"GET /v1/jobs HTTP/1.0\\r\\nConnection: keep-alive")
    ('/v1/jobs', 'HTTP/1.0', False)
    >>> parse_head(b"POST /v1/jobs HTTP/1.1"), parse_head(b"GET / HTTP/1.1\\r\\nContent-Length: 2")
    (None, None)
    """
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or parts[0] != "GET" or parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
        return None
    fields: dict[str, str] = {}
    if len(lines) > 100:  # http.server's limit on header lines: its 431
        return None
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or name.lower() in fields:
            return None  # folded, malformed or repeated: the full handler says what is wrong
        fields[name.lower()] = value.strip()
    if "transfer-encoding" in fields or "expect" in fields or \
            fields.get("content-length", "0") != "0":
        return None
    conn = fields.get("connection", "").lower()
    close = conn == "close" or (parts[2] == "HTTP/1.0" and conn != "keep-alive")
    return request_path(parts[1]), parts[2], close


def response(status: int, body: bytes, close: bool, date: str) -> bytes:
    """The bytes ``rest._Handler._send`` writes for a JSON answer."""
    return (f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\nServer: {SERVER}\r\n"
            f"Date: {date}\r\nContent-Type: {JSON}\r\nContent-Length: {len(body)}\r\n"
            + ("Connection: close\r\n" if close else "") + "\r\n").encode("latin-1") + body


class _Conn:
    __slots__ = ("sock", "addr", "buf", "last")

    def __init__(self, sock, addr, now: float):
        self.sock, self.addr, self.buf, self.last = sock, addr, bytearray(), now


class Front:
    """``run`` (in a native thread) until ``stop``: serves ``listener``. ``fast(method,
    path)`` gives a published (status, body) or None; ``handoff(conn, addr, buffered)`` serves
    the rest of a connection elsewhere and raises ``RuntimeError`` when it cannot; at most
    ``capacity()`` connections are held here at once (one more is refused with a 503).
    ``hand_all``: every connection is handed as soon as it is accepted (TLS: the bytes are
    not HTTP here)."""

    def __init__(self, listener, fast, handoff, capacity, idle_s: float, on_error,
                 hand_all: bool = False):
        self.listener = listener
        self.hand_all = hand_all
        self.fast, self.handoff, self.capacity = fast, handoff, capacity
        self.idle_s, self.on_error = idle_s, on_error
        self.conns: dict[int, _Conn] = {}
        self._stop = False
        self._clock = original("time").monotonic
        self._poll = original("select").poll()
        self._date = (0, "")

    def stop(self) -> None:
        self._stop = True

    def run(self) -> None:
        sel = original("select")
        self.listener.setblocking(False)
        self._poll.register(self.listener.fileno(), sel.POLLIN)
        sweep = self._clock() + 1.0
        try:
            while not self._stop:
                events = self._poll.poll(500)  # the stop flag, twice a second
                now = self._clock()
                for fd, _ in events:
                    if fd == self.listener.fileno():
                        self._accept(now)
                    elif fd in self.conns:
                        try:
                            self._readable(self.conns[fd], now)
                        except Exception:  # noqa: BLE001 - a bug: log it, keep serving
                            self._drop(self.conns.get(fd))
                            self.on_error("mlroute: REST front failed on a connection")
                if now >= sweep:
                    sweep = now + 1.0
                    for c in [c for c in self.conns.values() if now - c.last > self.idle_s]:
                        self._close(c)
        finally:
            for c in list(self.conns.values()):
                self._close(c)
            self.listener.close()

    def _accept(self, now: float) -> None:
        while True:
            try:
                sock, addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of file descriptors: the listener stays readable, so
                self.on_error("mlroute: REST accept failed")
                original("time").sleep(0.1)  # logged and tried again 0.1 s later
                return
            if not self.capacity():
                refuse(sock, "too many REST connections open: try again")
                continue
            if self.hand_all:
                try:
                    self.handoff(sock, addr, b"", b"", False)
                except RuntimeError:
                    refuse(sock, "no thread to serve this connection: try again")
                continue
            sock.setblocking(False)
            self.conns[sock.fileno()] = _Conn(sock, addr, now)
            self._poll.register(sock.fileno(), original("select").POLLIN)

    def _readable(self, c: _Conn, now: float) -> None:
        try:
            data = c.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(c)
            return
        if not data:  # the client closed
            self._close(c)
            return
        c.buf += data
        c.last = now
        while c.sock is not None:
            end = c.buf.find(b"\r\n\r\n")
            if end < 0 or end > MAX_HEAD:  # a head that long: the full handler's limits
                if end > MAX_HEAD or len(c.buf) > MAX_HEAD:
                    self._hand(c)
                return
            parsed = parse_head(bytes(c.buf[:end]))
            answer = parsed and self.fast("GET", parsed[0])
            if not answer:
                self._hand(c)
                return
            del c.buf[:end + 4]
            close = parsed[2]
            out = response(answer[0], answer[1], close, self._http_date(now))
            try:
                sent = c.sock.send(out)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self._close(c)
                return
            if sent < len(out) or (close and c.buf):  # the rest in a thread, as a handler
                self._hand(c, out[sent:], close)
                return
            if close:
                self._close(c)
                return

    def _http_date(self, now: float) -> str:
        second = int(now)
        if self._date[0] != second:
            self._date = (second, email.utils.formatdate(usegmt=True))
        return self._date[1]

    def _drop(self, c: _Conn | None) -> None:
        """Forget ``c`` here (the socket stays open: closed or handed by the caller)."""
        if c is not None and c.sock is not None:
            self._poll.unregister(c.sock.fileno())
            self.conns.pop(c.sock.fileno(), None)

    def _close(self, c: _Conn) -> None:
        sock = c.sock
        self._drop(c)
        c.sock = None
        try:
            sock.close()
        except OSError:
            pass

    def _hand(self, c: _Conn, pending: bytes = b"", close: bool = False) -> None:
        """Give the connection to ``handoff`` with what was read and not answered (and what
        is still to be sent of an answer); if it cannot, refuse it."""
        sock, buffered = c.sock, bytes(c.buf)
        self._drop(c)
        c.sock = None
        sock.setblocking(True)
        try:
            self.handoff(sock, c.addr, buffered, pending, close)
        except RuntimeError:
            refuse(sock, "no thread to serve this connection: try again")
            self.on_error("mlroute: REST connection from %s refused", c.addr)
