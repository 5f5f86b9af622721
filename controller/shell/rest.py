"""The REST and web server, on the standard library alone (no SDN framework): /v1/* goes to
``controller.service.api.handle``, /metrics to the Prometheus exposition, / and /web/{name} to
the live view's files.

One connection per thread of the given ``Hub`` (green threads under ryu-manager, native threads
under os-ken and in tests); the accept loop polls a stop flag, so it ends without killing
anything.

``native``: the server runs in native OS threads even under eventlet (``bridge.py``): one
thread, the front (``front.py``), accepts every connection and answers GET /v1/ready and GET
/v1/jobs from the views the service publishes (``Published.attach``) without waiting for the
hub; a connection with any other request goes to a thread of its own, whose calls into the
service are handed to the hub (``HubBridge``) and answered as before. An agent's segments
watch whose document has not changed is parked in the front (no thread, no polling) until a
change of its host's document wakes it (``Published.on_hosts`` -> ``Front.wake``) or its wait
ends (304): parked watches do not count against ``NATIVE_CONNECTIONS``, and at most
``WOKEN_THREADS`` woken ones are served at once, so operators and reports keep threads.

Every answer is JSON or a known file: malformed requests get a 4xx with ``{"error": ...}``,
an internal error a 500 with its class name, never a traceback.

Who may do what (``credentials.py``): with no credential configured every caller may do
everything (the demo, on the loopback; said at start). Once an admin token, host secrets or
client certificates are configured, every request under /v1 and /metrics needs a credential
(``Authorization: Bearer <credential>``, compared in constant time, or a verified client
certificate naming a host), except GET /v1/ready, /v1/openapi.json and /metrics with
``open_health``; a host's credential reaches only ``/v1/hosts/{its name}/...``. A refused
request is answered 401 or 403 before its body is read, and counted per host it named
(``refusals``).

``tls`` (an ``ssl.SSLContext``): every connection is TLS; the front then hands each one to a
thread of its own, where the handshake (at most ``HANDSHAKE_S``) and the request are served.
"""
from __future__ import annotations

import http.server
import io
import json
import logging
import os
import socket
import time

from controller.errors import InputError
from controller.service import api, credentials, watches
from controller.service.metrics import exposition
from controller.service.published import Published
from controller.shell.bridge import HubBridge, Stopping, native_thread, original
from controller.shell.front import JSON, LINGER_S, Front, request_path
from controller.shell.hub import THREADS, Hub
from controller.shell.restsecurity import cert_host, more_files
from controller.shell.woken import WokenWatches

LOG = logging.getLogger("mlroute")
WEB_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "service", "web")
WEB_FILES = {"index.html": "text/html; charset=utf-8",  # the live view, served as it is
             "app.js": "application/javascript; charset=utf-8",
             "style.css": "text/css; charset=utf-8"}
TOKEN_ENV = "MLROUTE_TOKEN"
IDLE_TIMEOUT = 60.0  # seconds an idle keep-alive connection is kept
LINGER_QUIET_S = 0.25  # a closing connection drains for at most LINGER_S (front's), 0.25 s quiet
LINGER_BYTES = 16 << 20  # ... and at most this much of what the client still sends
HANDSHAKE_S = 10.0  # a TLS client has this long to finish its handshake
REFUSALS_KEPT = 4096  # hosts whose refused requests are remembered (the most recent)
NATIVE_CONNECTIONS = 256  # ``native``: connections served by a thread at once; one more
# request that needs a thread is answered 503 at once and closed (published reads need none)
FRONT_CONNECTIONS = 16384  # ``native``: connections the front holds while it reads their
# request (parked watches apart); one more is answered 503 at once
WOKEN_THREADS = 128  # ``native``: woken watches served at once (the rest wait in the front),
# so that operators' requests and agents' reports keep threads of their own
MAX_WATCHES = 60000  # ``native``: watches parked at once (a file descriptor each)


def write_token(token: str | None, token_file: str | None, environ=os.environ) -> str | None:
    """The write token: ``--mlroute-token``, else the first line of ``--mlroute-token-file``,
    else the environment variable MLROUTE_TOKEN (neither of the last two shows in ``ps``)."""
    if token:
        return token
    if token_file:
        try:
            with open(token_file, encoding="utf-8") as fh:
                text = fh.readline().strip()
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"--mlroute-token-file {token_file}: {e}") from None
        if not text:
            raise InputError(f"--mlroute-token-file {token_file}: the file holds no token")
        return text
    return environ.get(TOKEN_ENV) or None


def _linger_close(conn) -> None:
    """Close a connection without losing the answer: stop sending, then read and drop what the
    client still sends (a body refused unread, e.g. an upload over the limit) until it stops,
    at most ``LINGER_S`` and ``LINGER_BYTES``. Closing with unread input makes the kernel reset
    the connection, and a client still sending its body then loses the 413 before reading it
    (a lingering close, as HTTP servers do)."""
    try:
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(LINGER_QUIET_S)
        deadline, got = time.monotonic() + LINGER_S, 0
        while time.monotonic() < deadline and got < LINGER_BYTES:
            data = conn.recv(65536)
            if not data:
                break
            got += len(data)
    except OSError:  # reset, timed out (the client is quiet) or gone: nothing to wait for
        pass
    finally:
        try:
            conn.close()
        except OSError:
            pass


class RestServer:
    def __init__(self, service, host: str, port: int, token: str | None = None,
                 hub: Hub = THREADS, native: bool = False,
                 policy: credentials.Policy | None = None, tls=None):
        self.service = service
        self.policy = policy or credentials.Policy(admin_token=token)
        self.tls = tls  # an ssl.SSLContext (server side), or None: plain HTTP
        # host named -> its last refusal and a count (the service shows them in /v1/ready)
        self.refusals: dict[str, dict] = {}
        service.credential_refusals = self.refusals
        self.hub = hub
        self._stop = False
        self.native = native
        # native: connections in OS threads, the hub's work through the bridge
        self.bridge = HubBridge(hub.spawn) if native else None
        self.published = Published.attach(service) if native else None
        self._open: set = set()  # ``native``: connections served by a thread (shut by ``stop``)
        sock = original("socket") if native else socket
        family = sock.AF_INET6 if ":" in host else sock.AF_INET
        self.sock = sock.socket(family, sock.SOCK_STREAM)
        self.sock.setsockopt(sock.SOL_SOCKET, sock.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(128)
        self.sock.settimeout(0.5)  # the accept loop looks at the stop flag twice a second
        self.port = self.sock.getsockname()[1]
        self.front = Front(self.sock, self.fast, self._handoff, self._capacity, IDLE_TIMEOUT,
                           self.log_exception, hand_all=tls is not None, watch=self._watch,
                           version=lambda host: watches.of(service).peek(host),
                           hand_limit=lambda: len(self._open) < WOKEN_THREADS,
                           max_watches=MAX_WATCHES) if native else None
        # answers them in batches; closes in the front (``Front.linger``: no thread waits)
        self.woken = WokenWatches(self, self.front.linger) if native else None
        if native:
            self.front.serve_woken = self.woken.put
            self.published.on_hosts = self.front.wake  # a change wakes its hosts' watches
            more_files()

    def serve(self) -> None:
        """Accept connections until ``stop``, each served by a thread of the hub (``native``:
        the front's ``run`` instead). An accept that fails (out of file descriptors) is
        logged and tried again 0.1 s later."""
        try:
            while not self._stop:
                try:
                    conn, addr = self.sock.accept()
                except (TimeoutError, BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    if self._stop:
                        break
                    self.log_exception("mlroute: REST accept failed")
                    self.hub.sleep(0.1)
                    continue
                conn.settimeout(IDLE_TIMEOUT)
                self.hub.spawn(self._connection, conn, addr)
        finally:
            self.sock.close()

    def start(self) -> None:
        """Serve: in a green thread of the hub, or (``native``) in an OS thread, with the
        bridge's hub side in a green thread and a thread answering woken watches."""
        if self.native:
            self.hub.spawn(self.bridge.run)
            native_thread(self.front.run)
            native_thread(self.woken.run)
        else:
            self.hub.spawn(self.serve)

    def stop(self) -> None:
        """Stop accepting; with ``native``, end the connections being served (their
        requests handed to the hub get a 503) and the bridge."""
        self._stop = True
        if self.front is not None:
            self.front.stop()
        if self.bridge is not None:
            self.bridge.stop()
        for conn in list(self._open):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def on_hub(self, fn, *args):
        """``fn(*args)`` where the service may be used: here, or on the hub (``native``)."""
        return fn(*args) if self.bridge is None else self.bridge.call(fn, *args)

    def fast(self, method: str, path: str) -> tuple[int, bytes] | None:
        """A published answer (``native`` only), None when the request needs the service or a
        credential (the full handler checks it)."""
        if self.published is None or method != "GET":
            return None
        if self.policy.closed and credentials.decide(
                self.policy, credentials.ANONYMOUS, method, *api.route(method, path)):
            return None
        return self.published.answer(path)

    def refuse_reason(self, method: str, route: str | None, params: dict,
                      authorization: str | None, conn) -> tuple[int, str] | None:
        """None when the request may go on, else (401 or 403, why), counted per host named
        in its path (a host whose agent holds a wrong credential shows in /v1/ready)."""
        return self.authorise(method, route, params, authorization, conn)[0]

    def authorise(self, method: str, route: str | None, params: dict,
                  authorization: str | None, conn):
        """(``refuse_reason``'s answer, the request's principal or None)."""
        if not self.policy.closed:
            return None, None
        principal = credentials.who(authorization, cert_host(conn), self.policy.host_secrets,
                                    self.policy.admin_token)
        refused = credentials.decide(self.policy, principal, method, route, params)
        if refused is not None and params.get("host"):
            host = str(params["host"])[:credentials.MAX_HOST_NAME]
            seen = self.refusals.pop(host, {"count": 0})
            self.refusals[host] = {"status": refused[0], "error": refused[1],
                                   "count": seen["count"] + 1, "at": time.time()}
            while len(self.refusals) > REFUSALS_KEPT:
                self.refusals.pop(next(iter(self.refusals)))
        return refused, principal

    def log_exception(self, fmt: str, *args) -> None:
        """LOG.exception, from a native thread through the hub (logging's locks are green
        under eventlet: a native thread must not wait for one)."""
        if self.bridge is None:
            LOG.exception(fmt, *args)
            return
        import traceback
        text = traceback.format_exc()
        self.bridge.post(lambda: LOG.error(fmt + "\n%s", *args, text))

    def _capacity(self) -> bool:
        """Whether the front may hold one more connection (``FRONT_CONNECTIONS`` reading
        their request; the watches it parks apart): a connection there costs a file
        descriptor, a thread is what ``NATIVE_CONNECTIONS`` counts (``_handoff``)."""
        return len(self.front.conns) - self.front.watching < FRONT_CONNECTIONS

    def _watch(self, path: str, fields: dict) -> tuple[str, str, float] | None:
        """(host, version held, seconds) of a watch the front may park: a segments watch
        (``api.watch_of``; a plain read holds version "") its credential may make; None for
        any other request (the full handler answers it, a refusal included)."""
        route, params = api.route("GET", path)
        if route != "get_segments":
            return None
        # a plain read too: it waits in the front's queue for a thread like a woken watch
        # (1,024 agents starting at once found every connection taken: 503s and retries)
        watch = api.watch_of({"If-None-Match": fields.get("if-none-match", ""),
                              "Prefer": fields.get("prefer", "")}) or ("", 0.0)
        if self.policy.closed:
            principal = credentials.who(fields.get("authorization"), None,
                                        self.policy.host_secrets, self.policy.admin_token)
            if credentials.decide(self.policy, principal, "GET", route, params) is not None:
                return None
        return params["host"], watch[0], watch[1]

    def _handoff(self, conn, addr, buffered: bytes, pending: bytes, close: bool) -> None:
        """The front's way out: serve ``conn`` in a thread of its own (``RuntimeError``: no
        thread to be had, ``NATIVE_CONNECTIONS`` serving already: the front answers 503)."""
        if len(self._open) >= NATIVE_CONNECTIONS:
            raise RuntimeError("every REST thread is busy")
        self._open.add(conn)
        try:
            native_thread(self._connection, conn, addr, buffered, pending, close)
        except RuntimeError:
            self._open.discard(conn)
            raise

    def _connection(self, conn, addr, buffered: bytes = b"", pending: bytes = b"",
                    close: bool = False) -> None:
        """Serve ``conn`` to its end: send what the front left ``pending`` of an answer, then
        (unless ``close``) read requests, ``buffered`` first."""
        raw = conn
        try:
            if self.tls is not None:
                conn.settimeout(HANDSHAKE_S)
                conn = self.tls.wrap_socket(conn, server_side=True)
            conn.settimeout(IDLE_TIMEOUT)
            if pending:
                conn.sendall(pending)
            if not close:
                _Handler(conn, addr, self, buffered)
        except OSError:  # the client went away
            pass
        except Exception:  # noqa: BLE001 - a bug: log it, keep serving others
            self.log_exception("mlroute: REST connection from %s failed", addr)
        finally:
            _linger_close(conn)
            self._open.discard(raw)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mlroute"
    sys_version = ""

    def __init__(self, conn, addr, rest: RestServer, buffered: bytes = b""):
        self.rest = rest
        self.buffered = buffered  # what the front read of the connection (``front.py``)
        super().__init__(conn, addr, rest)

    def setup(self) -> None:
        super().setup()
        if self.buffered:  # read what the front read first, then the socket
            self.rfile.close()
            self.rfile = io.BufferedReader(_Prefixed(self.buffered,
                                                     self.connection.makefile("rb", 0)))

    def log_message(self, fmt, *args) -> None:
        if self.rest.bridge is not None and self.rest.bridge.eventlet:
            return  # no logging from a native thread under eventlet (bridge.py): not worth a hop
        LOG.debug("mlroute: REST %s: " + fmt, self.address_string(), *args)

    def send_error(self, code, message=None, explain=None) -> None:
        """http.server's own errors (malformed request line, headers too long) as JSON."""
        self.close_connection = True
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            self.request_version = "HTTP/1.0"  # unparsed: answer with a status line anyway
        if code >= 500:  # http.server's 505 (HTTP version): the client's fault all the same
            code, message = 400, f"{code} {message or ''}".strip()
        text = message or self.responses.get(code, ("error",))[0]
        self._send(code, {"error": f"{text}"})

    def _send(self, status: int, doc, headers: dict | None = None) -> None:
        if isinstance(doc, bytes):
            body, kind = doc, (headers or {}).pop("Content-Type", "application/octet-stream")
        elif isinstance(doc, str):  # a text document (GET /v1/jobs/{id}/ports)
            body, kind = doc.encode(), "text/plain; charset=utf-8"
        else:
            body, kind = (json.dumps(doc) + "\n").encode(), JSON  # a shell prompt after curl
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _path(self) -> str:
        return request_path(self.path)

    def _route(self) -> None:
        try:
            path = self._path()
            if path.startswith("/v1/"):
                self._api(path)
            elif path in ("/", "/metrics") or path.startswith("/web/"):
                self._read_body()  # none expected; read so the connection stays in step
                if self.command not in ("GET", "HEAD"):
                    self._send(405, {"error": f"method {self.command} not allowed on {path} "
                                              "(allowed: GET, HEAD)"}, {"Allow": "GET, HEAD"})
                elif path == "/metrics" and (refused := self.rest.refuse_reason(
                        self.command, "metrics", {}, self.headers.get("Authorization"),
                        self.connection)):
                    self._send(refused[0], {"error": refused[1]})
                elif path == "/metrics":
                    body, kind = self.rest.on_hub(exposition, self.rest.service)
                    self._send(200, body, {"Content-Type": kind})
                else:
                    self._web(path[len("/web/"):] if path != "/" else "index.html")
            else:
                self._read_body()
                self._send(404, {"error": f"no such resource: {path}"})
        except _BadRequest as e:
            self.close_connection = True
            self._send(400, {"error": str(e)})
        except OSError:
            raise
        except Stopping as e:
            self.close_connection = True
            self._send(503, {"error": str(e)})
        except Exception as e:  # noqa: BLE001 - a bug: say so without a traceback, log it
            self.rest.log_exception("mlroute: REST %s %s failed", self.command, self.path)
            self.close_connection = True
            self._send(500, {"error": f"internal error: {type(e).__name__}"})

    def __getattr__(self, name: str):
        """Every method goes to ``_route`` (an unknown one gets its 405 with ``Allow`` there)."""
        if name.startswith("do_"):
            return self._route
        raise AttributeError(name)

    def _api(self, path: str) -> None:
        allowed = api.allowed(path)
        if allowed and self.command not in allowed:  # before the token: nothing to protect
            self.close_connection = True  # the body is left unread
            self._send(405, {"error": f"method {self.command} not allowed on {path} (allowed: "
                                      f"{', '.join(allowed)})"}, {"Allow": ", ".join(allowed)})
            return
        route, params = api.route(self.command, path)
        authorization = self.headers.get("Authorization")
        refused, principal = self.rest.authorise(self.command, route, params, authorization,
                                                 self.connection)
        if refused is not None:
            self.close_connection = True  # the body is left unread
            self._send(refused[0], {"error": refused[1]},
                       {"WWW-Authenticate": "Bearer"} if refused[0] == 401 else None)
            return
        body = self._read_body()
        if body is None:
            self._send(413, {"error": f"request body larger than {api.MAX_BODY} bytes"})
            return
        fast = self.rest.fast(self.command, path)
        if fast is not None:  # published by the service (``native``): bytes as they are
            self._send(fast[0], fast[1], {"Content-Type": JSON})
            return
        headers = {k.title(): v for k, v in self.headers.items()}
        secrets = self.rest.policy.host_secrets
        if principal is not None and principal.kind == "host" and not authorization and secrets:
            # a host named by its certificate: a standby forwards its request to the master
            # with the host's credential, which the master checks (a certificate is not sent)
            headers["Authorization"] = \
                f"Bearer {credentials.host_credential(secrets[0], principal.host)}"
        status, doc = self.rest.on_hub(api.handle, self.rest.service, self.command, path, body,
                                       headers)
        self._send(status, doc)

    def _read_body(self) -> bytes | None:
        """The request body, read at most up to the limit (None: larger; the connection is
        then closed). A declared length over the limit is refused unread; a chunked body is
        read as it comes."""
        chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        declared = self.headers.get("Content-Length")
        if chunked:
            return self._read_chunked()
        if declared is None:
            return b""
        try:
            length = int(declared)
            if length < 0:
                raise ValueError
        except ValueError:
            raise _BadRequest(f"bad Content-Length {declared!r}") from None
        if length > api.MAX_BODY:
            self.close_connection = True
            return None
        body = self.rfile.read(length)
        if len(body) < length:
            self.close_connection = True
        return body

    def _read_chunked(self) -> bytes | None:
        chunks, got = [], 0
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
                if size < 0:
                    raise ValueError
            except ValueError:
                raise _BadRequest("bad chunked request body") from None
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailer lines
                    pass
                return b"".join(chunks)
            got += size
            if got > api.MAX_BODY:
                self.close_connection = True
                return None
            chunks.append(self.rfile.read(size))
            self.rfile.readline(8)  # CRLF after the chunk

    def _web(self, name: str) -> None:
        """One file of the live view; only the names in WEB_FILES (no path from the request)."""
        kind = WEB_FILES.get(name)
        if kind is None:
            self._send(404, {"error": f"no such resource: /web/{name}"})
            return
        with open(os.path.join(WEB_DIR, name), "rb") as fh:
            body = fh.read()
        # no-cache: a new version shows at the next reload
        self._send(200, body, {"Content-Type": kind, "Cache-Control": "no-cache"})


class _BadRequest(Exception):
    pass


class _Prefixed(io.RawIOBase):
    """A connection's input: ``prefix`` (bytes already read), then ``raw`` (its socket)."""

    def __init__(self, prefix: bytes, raw):
        self._prefix, self._raw = memoryview(prefix), raw

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int | None:
        if self._prefix.nbytes:
            n = min(len(b), self._prefix.nbytes)
            b[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        return self._raw.readinto(b)

    def close(self) -> None:
        self._raw.close()
        super().close()
