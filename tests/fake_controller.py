"""A tiny stdlib HTTP server standing in for the controller's REST API in fast unit tests of
its clients (client, command line, PyTorch and Slurm hooks): it records every request and
keeps jobs in a dict. The real API is tested against the real service elsewhere."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeController:
    def __init__(self, token: str | None = None, delay: float = 0.0):
        self.token, self.delay = token, delay
        self.requests: list[dict] = []  # {"method", "path", "headers", "body"}
        self.jobs: dict[str, dict] = {}
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        # shutdown() within 0.05 s instead of the default poll interval of 0.5 s
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def writes(self) -> list[dict]:
        with self.lock:
            return [r for r in self.requests if r["method"] != "GET"]

    def answer(self, method: str, path: str, headers: dict, body) -> tuple[int, object]:
        if self.token and method != "GET" and headers.get("Authorization") != f"Bearer {self.token}":
            return 401, {"error": "this controller needs 'Authorization: Bearer <token>'"}
        if path == "/metrics":
            return 200, "mlroute_jobs 1\n"
        if path == "/v1/jobs" and method == "GET":
            return 200, {"jobs": [{"id": j, "algorithm": "auto", "mode": "flow",
                                   "flows": len(d.get("members", [])), "number": i,
                                   "created": 0.0, "unroutable_flows": 0}
                                  for i, (j, d) in enumerate(self.jobs.items())]}
        if path == "/v1/jobs" and method == "POST":
            if not isinstance(body, dict) or "id" not in body:
                return 400, {"error": "job: missing 'id'"}
            if body["id"] in self.jobs:
                return 409, {"error": f"job {body['id']!r} already exists"}
            self.jobs[body["id"]] = body
            return 201, {"id": body["id"], "job": body, "routes": []}
        if path.startswith("/v1/jobs/"):
            from urllib.parse import unquote
            rest = path[len("/v1/jobs/"):]
            jid = unquote(rest.removesuffix("/ports"))
            if jid not in self.jobs:
                return 404, {"error": f"no job {jid!r}"}
            if rest.endswith("/ports"):
                return 200, "# source_ip destination_ip protocol sport dport\n"
            if method == "DELETE":
                self.jobs.pop(jid)
                return 200, {"deleted": jid}
            return 200, {"id": jid, "job": self.jobs[jid], "matrix": "learning", "routes": []}
        if path in ("/v1/fabric", "/v1/routes", "/v1/links", "/v1/imbalance", "/v1/cluster",
                    "/v1/openapi.json") and method == "GET":
            return 200, {"path": path}
        if path == "/v1/ready" and method == "GET":  # not ready: a readiness probe's 503
            return 503, {"ready": False, "switches": 2, "connected": 1, "synchronised": 0}
        if path == "/v1/fabric" and method == "PUT":
            return 200, {"declared": body}
        if path.startswith("/v1/hosts/") and path.endswith("/segments") and method == "GET":
            return 200, {"host": path.split("/")[3], "version": "e:1", "flows": []}
        if path.startswith("/v1/hosts/") and path.endswith("/traffic") and method == "POST":
            return 200, {"host": path.split("/")[3], "pairs": 1, "ignored": 0}
        if path.startswith("/v1/hosts/") and path.endswith("/ports") and method == "POST":
            return 200, {"host": path.split("/")[3], "ports": len(body["ports"])}
        if path.startswith("/v1/hosts/") and path.endswith("/probes") and method == "POST":
            return 200, {"host": path.split("/")[3], "links_down": []}
        if path in ("/v1/optimize", "/v1/advise") and method == "POST":
            return 200, {"path": path, "body": body}
        return 404, {"error": f"no such resource: {path}"}

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _serve(self):
                import time
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                if fake.delay:
                    time.sleep(fake.delay)
                with fake.lock:
                    fake.requests.append({"method": self.command, "path": self.path,
                                          "headers": dict(self.headers), "body": body})
                    status, doc = fake.answer(self.command, self.path, dict(self.headers), body)
                text = isinstance(doc, str)
                data = doc.encode() if text else json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; charset=utf-8" if text
                                 else "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

        return Handler


