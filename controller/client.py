"""The one REST client of the mlroute controller, for the command line, the emulation, the
framework integrations and a standby's forwarding.

Standard library only (``http.client``): it also runs under the system Python next to
``python3-torch`` and on a Slurm controller host, where the venv's packages are not installed.
Every call has a timeout (per blocking socket operation). Every request carries
``Authorization: Bearer <token>`` when a token is given (the admin token, or a host agent's
own credential: ``mlroute agent-credential HOST``). ``https://`` URLs are verified against the
system's CAs or ``ca_file``; ``cert_file`` and ``key_file`` present a client certificate.
An HTTP error answer raises ``ControllerError`` with the status and the server's
``{"error": ...}`` message; a controller that cannot be reached raises
``ControllerUnreachable`` (also an ``OSError``, as the callers that poll a starting
controller expect).

    c = Client("http://127.0.0.1:8080", token="s3cret")
    c.add_job(members_job("j", ["10.0.0.1", "h1_0"], bytes_hint=4e6))
    c.delete_job("j")

Several base URLs separated by commas (redundant controllers) are tried in order when one
refuses the connection; a standby forwards writing requests to the master itself. A URL that
did not answer (refused, or connected and silent until the timeout) goes last for the next
``SUSPECT_S`` seconds, so a frozen controller costs one timeout, not one per request; a read
(GET) it did not answer is asked of the next URL at once.

Why a connect timeout of its own and TCP keepalive (``CONNECT_S``, ``KEEPALIVE``): an agent's
watch asks the controller to hold its answer for minutes and reads for as long. A controller
address that drops connection attempts is left after ``CONNECT_S``, not after the watch's
read timeout, and a controller machine lost while it holds the watch (no FIN, no RST) is found
by the kernel's keepalive about 25 s after its last packet. A controller whose process froze
on a live machine answers keepalives: only the read timeout finds it.
"""
from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import time
import urllib.parse

DEFAULT_TIMEOUT = 30.0
SUSPECT_S = 30.0  # a URL that did not answer is tried last for this long
CONNECT_S = 10.0  # a connection (and its TLS handshake) made within this long, else next URL
KEEPALIVE = (10, 5, 3)  # TCP keepalive of a request's connection: idle s, interval s, probes
SEGMENTS_MAX_BYTES = 16 << 20  # the largest segments document an agent reads
WRITE_METHODS = ("POST", "PUT", "DELETE", "PATCH")


class ControllerError(Exception):
    """The controller answered with an error status (``status``, ``message`` from its
    ``{"error": ...}``, the whole answer in ``doc``), or could not be reached (status None)."""

    def __init__(self, message: str, status: int | None = None, method: str = "",
                 url: str = "", doc=None):
        self.message, self.status, self.method, self.url, self.doc = (message, status, method,
                                                                      url, doc)
        where = f"{method} {url}".strip()
        head = f"{where}: " if where else ""
        super().__init__(f"{head}HTTP {status}: {message}" if status is not None
                         else f"{head}{message}")


class ControllerUnreachable(ControllerError, ConnectionError):
    """No answer: connection refused, name not resolved, timed out, connection cut."""


def read_token(token: str | None = None, token_file: str | None = None,
               env: dict | None = None) -> str | None:
    """The write token: ``token``, else the first line of ``token_file``, else the
    MLROUTE_TOKEN / MLROUTE_TOKEN_FILE environment variables; None when none is set. A token
    file that cannot be read raises ValueError naming it."""
    env = os.environ if env is None else env
    if token:
        return token
    path = token_file or env.get("MLROUTE_TOKEN_FILE")
    if path:
        try:
            with open(path) as fh:
                text = fh.readline().strip()
        except OSError as e:
            raise ValueError(f"cannot read token file {path}: {e.strerror}") from None
        if not text:
            raise ValueError(f"token file {path} is empty")
        return text
    return env.get("MLROUTE_TOKEN") or None


def tls_context(ca_file: str | None = None, cert_file: str | None = None,
                key_file: str | None = None) -> ssl.SSLContext:
    """A client's TLS context: the server verified against ``ca_file`` (else the system's
    CAs) and its name; ``cert_file`` (and ``key_file``) presented as a client certificate.
    Raises ValueError naming a file that cannot be loaded."""
    try:
        ctx = ssl.create_default_context(cafile=ca_file)
        if cert_file:
            ctx.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as e:
        raise ValueError(f"TLS: cannot load {ca_file or ''} {cert_file or ''}: {e}") from None
    return ctx


def members_job(job_id: str, members: list[str], bytes_hint: float | None = None,
                learn: bool | None = None, **options) -> dict:
    """A job declared by its members only (the controller measures its matrix):
    ``{"id", "members", "bytes"?, "learn"?}`` plus options such as algorithm or mode."""
    doc = {"id": job_id, "members": list(members)}
    if bytes_hint is not None:
        doc["bytes"] = bytes_hint
    if learn is not None:
        doc["learn"] = bool(learn)
    doc.update({k: v for k, v in options.items() if v is not None})
    return doc


def keep_alive(sock, idle_interval_count: tuple[int, int, int]) -> None:
    """TCP keepalive on ``sock`` (idle seconds, seconds between probes, probes): a peer gone
    without a FIN is closed by the kernel. On a listening socket Linux passes it on to every
    connection accepted from it. Where the system lacks the timing options only the default
    timing applies."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in zip(("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT"),
                           idle_interval_count):
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def _base(url: str) -> tuple[str, str, int, str]:
    if "://" not in url:
        url = "http://" + url
    p = urllib.parse.urlsplit(url)
    if p.scheme not in ("http", "https") or not p.hostname:
        raise ValueError(f"controller URL {url!r}: expected http://HOST[:PORT]")
    try:
        port = p.port or (443 if p.scheme == "https" else 80)
    except ValueError:
        raise ValueError(f"controller URL {url!r}: bad port") from None
    return p.scheme, p.hostname, port, p.path.rstrip("/")


def _decode(status: int, content_type: str, raw: bytes):
    """JSON answers as documents, text ones (job ports, metrics) as str; an error answer that
    is not JSON becomes {"error": text}."""
    text = raw.decode("utf-8", "replace")
    if "json" in content_type or (not content_type and text.lstrip()[:1] in ("{", "[")):
        try:
            return json.loads(text) if text.strip() else {}
        except ValueError:
            pass
    if status >= 400:
        return {"error": text.strip() or http.client.responses.get(status, "error")}
    return text


class Client:
    """A client of one controller (or of redundant ones, comma-separated URLs)."""

    def __init__(self, url: str, token: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 ca_file: str | None = None, cert_file: str | None = None,
                 key_file: str | None = None):
        urls = [u.strip() for u in str(url).split(",") if u.strip()]
        if not urls:
            raise ValueError("no controller URL given")
        self.bases = [_base(u) for u in urls]
        self.url = ",".join(urls)
        self.token = token
        self.timeout = float(timeout)
        if not self.timeout > 0:
            raise ValueError(f"timeout must be positive, not {timeout!r}")
        self.suspect: dict[tuple, float] = {}  # base -> monotonic time until it goes last
        self.tls = None
        if any(b[0] == "https" for b in self.bases) or ca_file or cert_file:
            self.tls = tls_context(ca_file, cert_file, key_file)

    def _order(self) -> list[tuple]:
        """The bases, those that did not answer lately last (each group in given order)."""
        now = time.monotonic()
        return sorted(self.bases, key=lambda b: self.suspect.get(b, 0.0) > now)

    # ---- the transport -------------------------------------------------------------------
    def request(self, method: str, path: str, doc=None, body: bytes | None = None,
                headers: dict | None = None, timeout: float | None = None,
                max_bytes: int | None = None) -> tuple[int, object]:
        """(status, answer) whatever the status; ``path`` as quoted as it comes (what is left
        unquoted, spaces or non-ASCII, is quoted here). ``doc`` is sent
        as JSON, ``body`` as it is. ``headers`` override the defaults (a forwarding standby
        passes the client's Authorization). Raises ControllerUnreachable without an answer,
        ControllerError for an answer longer than ``max_bytes`` (not read further)."""
        if doc is not None:
            body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        out = {"Accept": "application/json, text/plain"}
        if body is not None:
            out["Content-Type"] = "application/json"
        if self.token:
            out["Authorization"] = f"Bearer {self.token}"
        out.update(headers or {})
        timeout = self.timeout if timeout is None else timeout
        path = urllib.parse.quote(path, safe="/?=&%:~+,;@!$'()*[]")  # spaces, non-ASCII
        last = None
        for base in self._order():
            scheme, host, port, prefix = base
            url = f"{scheme}://{host}:{port}{prefix}{path}"
            made = min(timeout, CONNECT_S)
            conn = (http.client.HTTPSConnection(host, port, timeout=made, context=self.tls)
                    if scheme == "https" else
                    http.client.HTTPConnection(host, port, timeout=made))
            try:
                try:
                    conn.connect()
                    conn.sock.settimeout(timeout)  # each read from here on
                    keep_alive(conn.sock, KEEPALIVE)
                except ssl.SSLError as e:  # a certificate refused: the next would be too
                    raise ControllerUnreachable(f"TLS: {_reason(e)}", None, method,
                                                url) from None
                except OSError as e:  # refused, unresolved: nothing was sent, try the next
                    self.suspect[base] = time.monotonic() + SUSPECT_S
                    last = ControllerUnreachable(f"controller unreachable ({_reason(e)})",
                                                 None, method, url)
                    continue
                try:
                    conn.request(method, prefix + path, body=body, headers=out)
                    resp = conn.getresponse()
                    raw = resp.read() if max_bytes is None else resp.read(max_bytes + 1)
                except (OSError, http.client.HTTPException) as e:
                    self.suspect[base] = time.monotonic() + SUSPECT_S
                    last = ControllerUnreachable(f"no answer from the controller "
                                                 f"({_reason(e)})", None, method, url)
                    if method.upper() in WRITE_METHODS:  # it may have been done: not twice
                        raise last from None
                    continue
                self.suspect.pop(base, None)
                if max_bytes is not None and len(raw) > max_bytes:
                    raise ControllerError(f"answer larger than {max_bytes} bytes: not read",
                                          resp.status, method, url)
                return resp.status, _decode(resp.status, resp.getheader("Content-Type", ""),
                                            raw)
            finally:
                conn.close()
        raise last

    def call(self, method: str, path: str, doc=None, timeout: float | None = None):
        """The answer of a request that must succeed; ControllerError otherwise."""
        status, answer = self.request(method, path, doc=doc, timeout=timeout)
        if status >= 400:
            message = answer.get("error") if isinstance(answer, dict) else None
            raise ControllerError(str(message or answer), status, method,
                                  self.url + path, answer)
        return answer

    # ---- one method per endpoint ---------------------------------------------------------
    def fabric(self, timeout=None) -> dict:
        return self.call("GET", "/v1/fabric", timeout=timeout)

    def put_fabric(self, fabric: dict, timeout=None) -> dict:
        return self.call("PUT", "/v1/fabric", fabric, timeout=timeout)

    def jobs(self, timeout=None) -> dict:
        return self.call("GET", "/v1/jobs", timeout=timeout)

    def job(self, job_id: str, timeout=None) -> dict:
        return self.call("GET", _job_path(job_id), timeout=timeout)

    def add_job(self, job: dict, timeout=None) -> dict:
        """POST a job document (matrix, collective or members only); its view once installed."""
        return self.call("POST", "/v1/jobs", job, timeout=timeout)

    def delete_job(self, job_id: str, timeout=None) -> dict:
        return self.call("DELETE", _job_path(job_id), timeout=timeout)

    def job_ports(self, job_id: str, timeout=None) -> str:
        return self.call("GET", _job_path(job_id) + "/ports", timeout=timeout)

    def segments(self, host: str, held: str = "", wait: float = 0.0, timeout=None,
                 max_bytes: int = SEGMENTS_MAX_BYTES) -> dict:
        """srv6 mode: ``host``'s segments document; with ``held`` (the version the caller
        has) and ``wait`` seconds, a watch: the answer comes once the version changes, or
        after the wait ``{"version": held, "unchanged": True}`` (a 304 carries no body). A
        document over ``max_bytes`` is refused unread (ControllerError): an agent's memory
        stays bounded whatever a controller sends."""
        headers = {"If-None-Match": f'"{held}"', "Prefer": f"wait={wait:g}"} if held else {}
        status, answer = self.request("GET", f"/v1/hosts/{_quote(host)}/segments",
                                      headers=headers, timeout=timeout or self.timeout + wait,
                                      max_bytes=max_bytes)
        if status == 304:  # the watch's wait ended with no change (RFC 7232)
            return {"version": held, "unchanged": True}
        if status >= 400:
            raise ControllerError(str(answer.get("error") if isinstance(answer, dict)
                                      else answer), status, "GET", self.url, answer)
        return answer

    def report_probes(self, host: str, paths: list[dict], timeout=None) -> dict:
        """srv6 mode: which probed paths answered (``[{"path": [...], "ok": bool}]``)."""
        return self.call("POST", f"/v1/hosts/{_quote(host)}/probes", doc={"paths": paths},
                         timeout=timeout)

    def report_ports(self, host: str, ports: list[dict], timeout=None) -> dict:
        """Host mode on routers: the source ports the host learned (``[{"job", "flow",
        "part", "path", "sport"}]``, all kept or none; ``"sport": None`` withdraws a part's
        port)."""
        return self.call("POST", f"/v1/hosts/{_quote(host)}/ports", doc={"ports": ports},
                         timeout=timeout)

    def report_traffic(self, host: str, report: dict, timeout=None) -> dict:
        """What the host sent per destination (``agent.traffic.report``'s document)."""
        return self.call("POST", f"/v1/hosts/{_quote(host)}/traffic", doc=report,
                         timeout=timeout)

    def routes(self, timeout=None) -> dict:
        return self.call("GET", "/v1/routes", timeout=timeout)

    def links(self, timeout=None) -> dict:
        return self.call("GET", "/v1/links", timeout=timeout)

    def optimize(self, timeout=None) -> dict:
        return self.call("POST", "/v1/optimize", b"{}", timeout=timeout)

    def advise(self, job: dict, timeout=None) -> dict:
        return self.call("POST", "/v1/advise", job, timeout=timeout)

    def imbalance(self, timeout=None) -> dict:
        return self.call("GET", "/v1/imbalance", timeout=timeout)

    def cluster(self, timeout=None) -> dict:
        return self.call("GET", "/v1/cluster", timeout=timeout)

    def ready(self, timeout=None) -> dict:
        """Readiness (``GET /v1/ready``): its document whether ready (200) or not yet (503)."""
        status, answer = self.request("GET", "/v1/ready", timeout=timeout)
        if status not in (200, 503) or not isinstance(answer, dict):
            raise ControllerError(str(answer), status, "GET", self.url + "/v1/ready", answer)
        return answer

    def openapi(self, timeout=None) -> dict:
        return self.call("GET", "/v1/openapi.json", timeout=timeout)

    def metrics(self, timeout=None) -> str:
        """The Prometheus text page (``/metrics``, outside /v1)."""
        return self.call("GET", "/metrics", timeout=timeout)


def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _job_path(job_id: str) -> str:
    if not isinstance(job_id, str) or not job_id:
        raise ValueError(f"job id must be a non-empty string, not {job_id!r}")
    return "/v1/jobs/" + urllib.parse.quote(job_id, safe="")


def _reason(e: BaseException) -> str:
    if isinstance(e, TimeoutError) or "timed out" in str(e):
        return "timed out"
    return getattr(e, "strerror", None) or str(e) or type(e).__name__
