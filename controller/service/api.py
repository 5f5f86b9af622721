"""The REST API (JSON under /v1) as a plain dispatcher: (method, path, body) in, (status, JSON
document) out. The shell's REST server hands every request under /v1 to ``handle``; tests call it
directly. Errors are ``{"error": "..."}`` with 400 (bad input), 404 (unknown job or path),
405 (method), 409 (conflict with the current state), 413 (body too large), 503 (redundant
controllers: etcd unreachable or no master yet). With redundant controllers a standby forwards
writing requests to the master (``controller/service/cluster.py``).

| method and path        | what |
|---|---|
| GET  /v1/fabric        | declared fabric and what the controller sees (switches, ports) |
| PUT  /v1/fabric        | declare the fabric (only while no job runs) |
| POST /v1/jobs          | add a job (JOB format, optional "algorithm", "mode"); 201 once confirmed |
| GET  /v1/jobs          | running jobs |
| GET  /v1/jobs/{id}     | one job: routes, ideal and predicted All-Reduce time |
| GET  /v1/jobs/{id}/ports | the job's connections as text: source IP, destination IP, protocol, ports |
| DELETE /v1/jobs/{id}   | remove exactly that job's rules |
| GET  /v1/hosts/{host}/segments | srv6 mode: the host's segment lists (a watch: ``Prefer: wait=N``) |
| POST /v1/hosts/{host}/probes | srv6 mode: which probed paths answer (the links' state) |
| POST /v1/hosts/{host}/ports | host mode on routers: the source ports the host's agent learned |
| POST /v1/hosts/{host}/traffic | bytes the host sent per destination (learned matrices) |
| GET  /v1/routes        | every planned route |
| GET  /v1/links         | planned load per directed leaf-spine link |
| POST /v1/optimize      | re-plan all running jobs together |
| POST /v1/advise        | ring order advice for a job document (nothing installed) |
| GET  /v1/imbalance     | measured path imbalance (port counters) |
| GET  /v1/openapi.json  | the OpenAPI document of this API (controller/service/openapi.json) |
| GET  /v1/cluster       | this controller's id and role, the members, the etcd URL |

Limits: a body of at most 4 MiB, at most 65,536 flows per job and 1,024 running jobs.
"""
from __future__ import annotations

import functools
import json
import os
import re
import time

from controller.errors import ConflictError, InputError, NotFoundError, ServiceUnavailable
from controller.service import oplog, watches
from controller.service.hostcounts import counted
from controller.service.hostreports import reported as ports_reported
from controller.service.pathstate import reported
from controller.service.route_service import RouteService
from controller.service.segments import segments_view

MAX_BODY = 4 * 2**20

_ROUTES = [
    ("/v1/fabric", {"GET": "get_fabric", "PUT": "put_fabric"}),
    ("/v1/jobs", {"GET": "list_jobs", "POST": "post_job"}),
    ("/v1/jobs/{id}", {"GET": "get_job", "DELETE": "delete_job"}),
    ("/v1/jobs/{id}/ports", {"GET": "get_job_ports"}),
    ("/v1/hosts/{host}/segments", {"GET": "get_segments"}),
    ("/v1/hosts/{host}/probes", {"POST": "post_probes"}),
    ("/v1/hosts/{host}/ports", {"POST": "post_ports"}),
    ("/v1/hosts/{host}/traffic", {"POST": "post_traffic"}),
    ("/v1/routes", {"GET": "get_routes"}),
    ("/v1/links", {"GET": "get_links"}),
    ("/v1/optimize", {"POST": "optimize"}),
    ("/v1/advise", {"POST": "advise"}),
    ("/v1/imbalance", {"GET": "get_imbalance"}),
    ("/v1/openapi.json", {"GET": "get_openapi"}),
    ("/v1/cluster", {"GET": "get_cluster"}),
    ("/v1/ready", {"GET": "get_ready"}),
]
_COMPILED = [(re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", p) + "/?$"), m)
             for p, m in _ROUTES]


@functools.lru_cache(maxsize=1)
def openapi() -> dict:
    with open(os.path.join(os.path.dirname(__file__), "openapi.json")) as fh:
        return json.load(fh)


def routes() -> list[tuple[str, str]]:
    """(method, path) of every route the dispatcher serves under /v1."""
    return [(m, p) for p, methods in _ROUTES for m in methods]


def allowed(path: str) -> list[str]:
    """The methods served on ``path`` (a 405's ``Allow`` header); empty for an unknown path."""
    for pattern, methods in _COMPILED:
        if pattern.match(path):
            return sorted(methods)
    return []


def route(method: str, path: str) -> tuple[str | None, dict]:
    """The dispatcher's name of ``method`` on ``path`` (None: not served) and the path's
    parameters: what the REST server authorises (``credentials.decide``)."""
    for pattern, methods in _COMPILED:
        m = pattern.match(path)
        if m:
            return methods.get(method), m.groupdict()
    return None, {}


def handle(service: RouteService, method: str, path: str, body: bytes = b"",
           headers: dict | None = None) -> tuple[int, dict]:
    """``headers``: the request's (Authorization, X-Mlroute-Forwarded), for forwarding."""
    for pattern, methods in _COMPILED:
        m = pattern.match(path)
        if not m:
            continue
        if method not in methods:
            return 405, {"error": f"method {method} not allowed on {path} "
                                  f"(allowed: {', '.join(sorted(methods))})"}
        try:
            cluster = getattr(service, "cluster", None)
            if cluster is not None and method != "GET":
                return cluster.write(method, path, body, headers or {}, lambda: _call(
                    service, methods[method], m.groupdict(), method, body))
            if methods[method] == "get_segments":
                _watch(service, m.groupdict()["host"], headers or {})
            return _call(service, methods[method], m.groupdict(), method, body)
        except ServiceUnavailable as e:
            return 503, {"error": str(e)}
        except NotFoundError as e:
            return 404, {"error": str(e)}
        except ConflictError as e:
            return 409, {"error": str(e)}
        except InputError as e:
            return 400, {"error": str(e)}
        except Exception as e:  # noqa: BLE001 - a bug: say so, keep serving, log upstream
            import logging
            logging.getLogger("mlroute").exception("internal error on %s %s", method, path)
            return 500, {"error": f"internal error: {type(e).__name__}: {e}"}
    return 404, {"error": f"no such resource: {path}"}


# The longest wait a watch may ask for. Why 5 minutes, not 30 s (issue 73): a watch renewed
# costs a connection (accept, request, 304, close: about 0.1 ms of the front's CPU, cProfile
# at k = 32), and 8,192 agents renewing every 25 s made 320 renewals a second: 3.3-3.5% of a
# core with nothing changing (14% in one earlier run); with the agent's 120 s, 68 a second
# and 1.0-1.7% (``benchmarks.agents``, three runs).
# Kubernetes' watches last 5-30 min, etcd's are streams. A peer that dies while its watch is
# held is found by TCP keepalive on the held socket (``front.KEEPALIVE``: within about 90 s,
# in the kernel, no wake per watch), so a longer hold keeps no dead watch longer. The agent
# asks for less (``agent.main.WAIT_S``): its read timeout is what finds a frozen controller,
# its connection's keepalive a lost one (``client.KEEPALIVE``).
WATCH_MAX_S = 300.0


def watch_of(headers: dict) -> tuple[str, float] | None:
    """(the version held, seconds to wait at most) of a watch's headers (RFC 7240 ``Prefer:
    wait=N`` with ``If-None-Match: <version>``), None for a plain read."""
    held = headers.get("If-None-Match", "").strip().strip('"')
    m = re.search(r"wait=([0-9.]+)", headers.get("Prefer", ""))
    if not held or not m:
        return None
    return held, min(float(m.group(1)), WATCH_MAX_S)


def _watch(service, host: str, headers: dict) -> None:
    """A watch in a thread of its own (the native front parks its watches instead:
    ``shell/front.py``): returns when ``host``'s document version (``watches.py``) differs
    from the one the client holds or after N seconds, looking every 50 ms with the shell's
    sleep, never holding the service lock."""
    watch = watch_of(headers)
    if watch is None:
        return
    held, wait = watch
    deadline = time.monotonic() + wait
    versions = watches.of(service)
    while time.monotonic() < deadline:
        with service.lock.views:
            now = versions.version(service.state, host, watches.host_ports(service))
        if now != held:
            return
        service.sleep(0.05)


def _json_body(body: bytes):
    if len(body) > MAX_BODY:
        raise _TooLarge()
    if not body.strip():
        raise InputError("request body: expected a JSON document")
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"request body is not valid JSON: {e}") from None
    except RecursionError:
        raise InputError("request body: JSON nested too deeply") from None


class _TooLarge(InputError):
    pass


def _call(service: RouteService, name: str, params: dict, method: str, body: bytes):
    try:
        if name == "get_fabric":
            return 200, service.fabric_view()
        if name == "put_fabric":
            return 200, service.put_fabric(_json_body(body))
        if name == "list_jobs":
            return 200, service.jobs_view()
        if name == "post_job":
            with oplog.refusals(body):  # a refused job is said in the log
                return 201, service.post_job(_json_body(body))
        if name == "get_job":
            return 200, service.job_view(params["id"])
        if name == "get_job_ports":  # text, not JSON: a file for job launchers
            return 200, service.job_ports(params["id"])
        if name == "delete_job":
            return 200, service.delete_job(params["id"])
        if name == "get_segments":
            with service.lock.views:  # srv6 mode's per-host document (segments.py)
                ports = watches.host_ports(service)  # host mode's, where hosts learn them
                version = watches.of(service).version(service.state, params["host"], ports)
                return 200, segments_view(service.state, params["host"], ports, version)
        if name == "post_probes":  # srv6 mode: link state from the hosts' probes
            return 200, reported(service, params["host"], _json_body(body), time.monotonic())
        if name == "post_ports":  # host mode on routers: the ports the agent learned
            return 200, ports_reported(service, params["host"], _json_body(body))
        if name == "post_traffic":  # what the host sent: a matrix source beside sFlow
            return 200, counted(service, params["host"], _json_body(body), service.monotonic())
        if name == "get_routes":
            return 200, service.routes_view()
        if name == "get_links":
            return 200, service.links_view()
        if name == "optimize":
            return 200, service.optimize()
        if name == "advise":
            return 200, service.advise(_json_body(body))
        if name == "get_imbalance":
            return 200, service.imbalance_view()
        if name == "get_openapi":
            return 200, openapi()
        if name == "get_cluster":
            return 200, service.cluster_view()
        if name == "get_ready":
            return service.ready_view()
    except _TooLarge:
        return 413, {"error": f"request body larger than {MAX_BODY} bytes"}
    raise AssertionError(name)
