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
import heapq
import http
import itertools
import json
import socket
import urllib.parse
from collections import deque

from controller.client import keep_alive
from controller.shell.bridge import original

MAX_HEAD = 65536  # a head not ended within this many bytes is handed to the full handler
LINGER_S = 2.0  # a connection closed by ``linger`` waits at most this long for the client's end
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n%s")
JSON = "application/json; charset=utf-8"
# TCP keepalive on every connection the front accepts (idle s, interval s, probes): a watch is
# held for minutes (``api.WATCH_MAX_S``), and a peer that died without a FIN (its host down, a
# partition) is closed by the kernel about 90 s after its last packet instead of holding its
# slot for the whole wait; a probe a minute per idle socket, no wake of this thread (issue 73)
KEEPALIVE = (60, 10, 3)
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
    ``parse_request`` gives its header fields too.

    >>> parse_head(b"GET /v1/ready?x=1 HTTP/1.1\\r\\nHost: a")
    ('/v1/ready', 'HTTP/1.1', False)
    >>> parse_head(b"GET /v1/jobs HTTP/1.0\\r\\nConnection: keep-alive")
    ('/v1/jobs', 'HTTP/1.0', False)
    >>> parse_head(b"POST /v1/jobs HTTP/1.1"), parse_head(b"GET / HTTP/1.1\\r\\nContent-Length: 2")
    (None, None)
    """
    parsed = parse_request(head)
    return parsed and parsed[:3]


def parse_request(head: bytes) -> tuple[str, str, bool, dict] | None:
    """``parse_head``'s (path, version, close) and the header fields, names in lower case."""
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
    return request_path(parts[1]), parts[2], close, fields


def not_modified(version: str, close: bool, date: str) -> bytes:
    """A watch that saw no change (RFC 7232 304: no body), with the version it holds."""
    return (f"HTTP/1.1 304 Not Modified\r\nServer: {SERVER}\r\nDate: {date}\r\n"
            f'ETag: "{version}"\r\n' + ("Connection: close\r\n" if close else "")
            + "\r\n").encode("latin-1")


def response(status: int, body: bytes, close: bool, date: str) -> bytes:
    """The bytes ``rest._Handler._send`` writes for a JSON answer."""
    return (f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\nServer: {SERVER}\r\n"
            f"Date: {date}\r\nContent-Type: {JSON}\r\nContent-Length: {len(body)}\r\n"
            + ("Connection: close\r\n" if close else "") + "\r\n").encode("latin-1") + body


class _Conn:
    __slots__ = ("sock", "addr", "buf", "last", "watch", "queued", "closing", "due")

    def __init__(self, sock, addr, now: float):
        self.sock, self.addr, self.buf, self.last = sock, addr, bytearray(), now
        self.watch = None  # parked: (host, version held, deadline, close)
        self.queued = False  # a woken watch waiting for a thread (``Front.backlog``)
        self.closing = None  # ``linger``: the time it is closed at the latest
        self.due = None  # (time, n) of its one live entry in ``Front._due``


class _Epoll:
    """``select.poll``'s interface (milliseconds) over epoll."""

    def __init__(self):
        self.ep = original("select").epoll()

    def register(self, fd: int, events: int) -> None:
        self.ep.register(fd, events)

    def unregister(self, fd: int) -> None:
        self.ep.unregister(fd)

    def poll(self, ms: int):
        return self.ep.poll(ms / 1000)


class Front:
    """``run`` (in a native thread) until ``stop``: serves ``listener``. ``fast(method,
    path)`` gives a published (status, body) or None; ``handoff(conn, addr, buffered)`` serves
    the rest of a connection elsewhere and raises ``RuntimeError`` when it cannot; at most
    ``capacity()`` connections are held here at once (one more is refused with a 503).
    ``hand_all``: every connection is handed as soon as it is accepted (TLS: the bytes are
    not HTTP here).

    Watches (``watch(path, fields)`` -> (host, version held, seconds) or None; ``version(host)``
    the host's document version now): a watch whose host's document is still the one it
    holds is parked here, costing a file descriptor and no thread, until ``wake`` names its
    host or its wait ends (answered 304 here). A woken watch goes to ``serve_woken`` with the
    others woken at once (``woken.py`` answers them in batches); without it, each is handed
    as any request, at most ``hand_limit()`` at once, the rest queued. No polling per watch:
    one wake per change of the hosts' documents."""

    def __init__(self, listener, fast, handoff, capacity, idle_s: float, on_error,
                 hand_all: bool = False, watch=None, version=None,
                 hand_limit=lambda: True, max_watches: int = 65536, serve_woken=None):
        self.listener = listener
        keep_alive(listener, KEEPALIVE)  # what it accepts: a dead watcher found by the kernel
        self.hand_all = hand_all
        self.watch, self.version, self.hand_limit = watch, version, hand_limit
        # serve_woken(items): answers woken watches elsewhere, in batches; each item is
        # (socket, address, request bytes read, close, host), the socket given away (it
        # comes back through ``adopt`` when kept alive). None: each handed as a request.
        self.serve_woken = serve_woken
        self.adopting: deque = deque()  # (socket, address, bytes read) given back
        self.max_watches = max_watches
        self.parked: dict[str, set] = {}  # host -> its parked connections
        self.watching = 0  # connections parked
        self.woken: deque = deque()  # hosts named by ``wake`` (another thread's)
        self.backlog: deque = deque()  # woken connections waiting for a thread
        self._wake_r, self._wake_w = original("os").pipe()
        original("os").set_blocking(self._wake_r, False)
        original("os").set_blocking(self._wake_w, False)
        self.fast, self.handoff, self.capacity = fast, handoff, capacity
        self.idle_s, self.on_error = idle_s, on_error
        self.conns: dict[int, _Conn] = {}
        # (time, n, connection): a time at or before the connection's next deadline (its
        # wait's end, its idle timeout, its lingering's end); one live entry a connection
        # (``_Conn.due``), stale ones skipped, the heap rebuilt when they outnumber the live
        self._due: list = []
        self._n = itertools.count()
        self._stop = False
        self._clock = original("time").monotonic
        self._poll = _Epoll() if hasattr(original("select"), "epoll") else \
            original("select").poll()  # epoll: thousands of parked watches cost no scan
        self._date = (0, "")

    def stop(self) -> None:
        self._stop = True

    def wake(self, hosts) -> None:
        """The documents of ``hosts`` changed (any thread): their parked watches answer."""
        self.woken.extend(hosts)
        self._nudge()

    def adopt(self, sock, addr, buffered: bytes) -> None:
        """A connection served elsewhere comes back (any thread): kept alive, read here."""
        self.adopting.append((sock, addr, buffered))
        self._nudge()

    def linger(self, sock) -> None:
        """Close ``sock``, answered, without losing the answer (any thread): its sending end
        shut now, what the client still sends read and dropped here until it closes, at most
        ``LINGER_S``. Why here: ``rest._linger_close`` waits in its thread for the client's
        end, and the woken watches' thread waited so for each of a ring's 512 agents in turn
        (0.43 s of the 0.47 s after the POST's answer, issue 73)."""
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:  # the client went away: nothing to wait for
            sock.close()
            return
        self.adopting.append((sock, None, None))
        self._nudge()

    def _nudge(self) -> None:
        try:
            original("os").write(self._wake_w, b"w")
        except BlockingIOError:  # the pipe is full: a wake is pending anyway
            pass

    def run(self) -> None:
        sel = original("select")
        self.listener.setblocking(False)
        self._poll.register(self.listener.fileno(), sel.POLLIN)
        self._poll.register(self._wake_r, sel.POLLIN)
        sweep = self._clock() + 1.0
        try:
            while not self._stop:
                # the stop flag twice a second; a backlog of woken watches every 10 ms
                events = self._poll.poll(10 if self.backlog else 500)
                now = self._clock()
                for fd, _ in events:
                    if fd == self.listener.fileno():
                        self._accept(now)
                    elif fd == self._wake_r:
                        self._woken()
                    elif fd in self.conns:
                        try:
                            self._readable(self.conns[fd], now)
                        except Exception:  # noqa: BLE001 - a bug: log it, keep serving
                            self._drop(self.conns.get(fd))
                            self.on_error("mlroute: REST front failed on a connection")
                self._hand_backlog()
                if now >= sweep:
                    sweep = now + 1.0
                    self._sweep(now)
        finally:
            for c in list(self.conns.values()):
                self._close(c)
            self.listener.close()
            for fd in (self._wake_r, self._wake_w):
                original("os").close(fd)

    def _sweep(self, now: float) -> None:
        """Idle connections closed; watches whose wait ended answered 304 (no change);
        lingering ones closed at their deadline. Only the connections with a deadline due
        are looked at (``_due``, a heap): a second with none due costs nothing, however many
        watches are parked (every connection was looked at each second: 8,192 at k = 32)."""
        while self._due and self._due[0][0] <= now:
            _when, n, c = heapq.heappop(self._due)
            if c.due is None or c.due[1] != n:
                continue  # stale: an earlier entry replaced it
            c.due = None
            if c.sock is None or self.conns.get(c.sock.fileno()) is not c:
                continue  # closed or given away since
            due = self._deadline(c)
            if due <= now:
                if c.closing is not None:
                    self._close(c)
                elif c.watch is not None:
                    self._answer_unchanged(c, now)
                else:
                    self._close(c)
            if c.sock is not None and self.conns.get(c.sock.fileno()) is c:
                self._at(c, self._deadline(c))

    def _deadline(self, c: _Conn) -> float:
        if c.closing is not None:
            return c.closing
        if c.watch is not None:
            return c.watch[2]
        return c.last + self.idle_s

    def _at(self, c: _Conn, when: float) -> None:
        """Look at ``c`` at ``when`` at the latest: a new entry only when ``when`` comes before
        its live one (a later deadline is found when that one is due, and pushed then), so
        a kept-alive connection's watches, one after another, keep one live entry, not one
        each (the heap grew by one per watch, issue 73)."""
        if c.due is not None and c.due[0] <= when:
            return
        c.due = (when, next(self._n))
        heapq.heappush(self._due, (*c.due, c))
        if len(self._due) > 2 * len(self.conns) + 64:  # mostly stale: keep the live ones
            self._due = [(*x.due, x) for x in self.conns.values() if x.due is not None]
            heapq.heapify(self._due)

    def _woken(self) -> None:
        try:
            while original("os").read(self._wake_r, 65536):
                pass
        except BlockingIOError:
            pass
        now = self._clock()
        while self.adopting:
            sock, addr, buffered = self.adopting.popleft()
            sock.setblocking(False)
            c = self.conns[sock.fileno()] = _Conn(sock, addr, now)
            self._poll.register(sock.fileno(), original("select").POLLIN)
            if buffered is None:  # ``linger``
                c.closing = now + LINGER_S
            self._at(c, c.closing or now + self.idle_s)
            if buffered:
                self._readable(c, now, buffered)
        conns: list = []  # every host's at once: one batch, not one a host
        while self.woken:
            conns.extend(c for c in self.parked.pop(self.woken.popleft(), ()) if c.sock)
        if conns:
            self._give(conns)

    def _give(self, conns) -> None:
        """Parked (or just read) watches whose document changed: to ``serve_woken`` in one
        batch, or each to a thread (the backlog) without it."""
        batch = []
        for c in list(conns):
            host, _held, _deadline, close = c.watch
            self._unpark(c)
            if self.serve_woken is None:
                self._queue(c)
                continue
            sock, buffered = c.sock, bytes(c.buf)
            self._drop(c)
            c.sock = None
            sock.setblocking(True)
            batch.append((sock, c.addr, buffered, close, host))
        if batch:
            self.serve_woken(batch)

    def _queue(self, c: _Conn) -> None:
        c.queued = True
        self.backlog.append(c)

    def _hand_backlog(self) -> None:
        """Woken watches to threads, as many as ``hand_limit`` lets at once."""
        while self.backlog and self.hand_limit():
            c = self.backlog.popleft()
            c.queued = False
            if c.sock is not None:
                self._hand(c)

    def _park(self, c: _Conn, host: str, held: str, wait: float, close: bool,
              now: float) -> None:
        c.watch = (host, held, now + wait, close)
        self._at(c, now + wait)
        self.parked.setdefault(host, set()).add(c)
        self.watching += 1
        if self.version(host) != held:  # changed since it was looked at: no wake comes
            self._give([c])

    def _unpark(self, c: _Conn) -> None:
        if c.watch is not None:
            host = c.watch[0]
            held = self.parked.get(host)
            if held is not None:
                held.discard(c)
                if not held:
                    del self.parked[host]
            c.watch = None
            self.watching -= 1

    def _answer_unchanged(self, c: _Conn, now: float) -> None:
        """A parked watch's wait ended with no change: 304, then the connection goes on."""
        _host, held, _deadline, close = c.watch
        self._unpark(c)
        end = c.buf.find(b"\r\n\r\n")
        del c.buf[:end + 4]
        c.last = now
        if self._send(c, not_modified(held, close, self._http_date(now)), close) and c.buf:
            self._readable(c, now, b"")  # a request that came meanwhile

    def _send(self, c: _Conn, out: bytes, close: bool) -> bool:
        """Send an answer made here; True when the connection stays here to be read on (else
        it was closed, or handed to a thread with the rest of the answer)."""
        try:
            sent = c.sock.send(out)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._close(c)
            return False
        if sent < len(out) or (close and c.buf):  # the rest in a thread, as a handler
            self._hand(c, out[sent:], close)
            return False
        if close:
            self._close(c)
            return False
        return True

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
            c = self.conns[sock.fileno()] = _Conn(sock, addr, now)
            self._poll.register(sock.fileno(), original("select").POLLIN)
            self._at(c, now + self.idle_s)

    def _readable(self, c: _Conn, now: float, data: bytes | None = None) -> None:
        if data is None:
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
        if c.closing is not None:  # lingering: dropped (a bound: ``LINGER_S``)
            return
        c.buf += data
        c.last = now
        if c.watch is not None or c.queued:
            return  # parked or woken: what follows is read once the watch is answered
        while c.sock is not None:
            end = c.buf.find(b"\r\n\r\n")
            if end < 0 or end > MAX_HEAD:  # a head that long: the full handler's limits
                if end > MAX_HEAD or len(c.buf) > MAX_HEAD:
                    self._hand(c)
                return
            parsed = parse_request(bytes(c.buf[:end]))
            watch = parsed and self.watch is not None and self.watching < self.max_watches \
                and self.watch(parsed[0], parsed[3])
            if watch:
                host, held, wait = watch
                self._park(c, host, held, wait, parsed[2], now)
                return
            answer = parsed and self.fast("GET", parsed[0])
            if not answer:
                self._hand(c)
                return
            del c.buf[:end + 4]
            close = parsed[2]
            if not self._send(c, response(answer[0], answer[1], close, self._http_date(now)),
                              close):
                return

    def _http_date(self, now: float) -> str:
        second = int(now)
        if self._date[0] != second:
            self._date = (second, email.utils.formatdate(usegmt=True))
        return self._date[1]

    def _drop(self, c: _Conn | None) -> None:
        """Forget ``c`` here (the socket stays open: closed or handed by the caller)."""
        if c is not None:
            self._unpark(c)
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
