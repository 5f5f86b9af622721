"""The mlroute controller as a subprocess (real ``ryu-manager``), and a small REST client.

Started with its PID recorded and stopped by that PID (never by name), after checking that no
stale controller holds the OpenFlow or REST port: eventlet sets SO_REUSEPORT, so a second
controller would bind silently and the switches would split between the two.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def listening(port: int) -> bool:
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True)
    return bool(out.stdout.strip())


class ControllerProcess:
    def __init__(self, fabric_path: str, log_path: str, algorithm: str = "greedy",
                 mode: str = "flow", rest_port: int = 8080, of_port: int = 6653,
                 extra_args: list[str] | None = None):
        self.args = [os.path.join(os.path.dirname(sys.executable), "ryu-manager"),
                     "--user-flags", os.path.join(REPO, "controller", "flags.py"),
                     "--mlroute-fabric", fabric_path, "--mlroute-algorithm", algorithm,
                     "--mlroute-mode", mode, "--wsapi-port", str(rest_port),
                     "--ofp-tcp-listen-port", str(of_port), *(extra_args or []),
                     os.path.join(REPO, "controller", "app.py")]
        self.log_path = log_path
        self.rest_port, self.of_port = rest_port, of_port
        self.proc: subprocess.Popen | None = None
        self._log = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def start(self, timeout: float = 30.0) -> "ControllerProcess":
        for port in (self.of_port, self.rest_port):
            if listening(port):
                raise RuntimeError(f"port {port} is already in use (a stale controller?); "
                                   "stop it before starting another")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.args, stdout=self._log, stderr=subprocess.STDOUT,
                                     cwd=REPO, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"controller exited with {self.proc.returncode}; "
                                   f"see {self.log_path}")
            try:
                status, _ = self.rest("GET", "/v1/fabric")
                if status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"controller REST API did not answer within {timeout:g} s")

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout)
        if self._log:
            self._log.close()
            self._log = None

    def rest(self, method: str, path: str, doc=None, timeout: float = 60.0) -> tuple[int, dict]:
        data = None if doc is None else (doc if isinstance(doc, bytes) else json.dumps(doc).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as e:
            body = e.read()
            try:
                return e.code, json.loads(body)
            except json.JSONDecodeError:
                return e.code, {"error": body.decode(errors="replace")}
