"""The mlroute controller as a subprocess (real ``ryu-manager``), with a REST client
(``controller.client``) bound to it.

Started with its PID recorded and stopped by that PID (never by name), after checking that no
stale controller holds the OpenFlow or REST port: eventlet sets SO_REUSEPORT, so a second
controller would bind silently and the switches would split between the two. It runs in a
session of its own, so a Ctrl-C in the terminal does not reach it: whoever starts it stops it
(``emulation.harness.session`` does, also on SIGINT).
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

from controller.client import Client

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def signals_held():
    """Hold SIGINT and SIGTERM inside the block (process starts and teardowns must not be cut
    in half); yields the list of signals that arrived, for the caller to act on afterwards.
    Outside the main thread, where Python cannot set handlers, it holds nothing."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got
        return
    old = {s: signal.getsignal(s) for s in _SIGNALS}
    for s in _SIGNALS:
        signal.signal(s, lambda signum, _frame: got.append(signum))
    try:
        yield got
    finally:
        for s, handler in old.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


def listening(port: int) -> bool:
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True)
    return bool(out.stdout.strip())


def framework() -> str:
    """The controller's framework: MLROUTE_FRAMEWORK (ryu or osken), else Ryu where
    ryu-manager is installed beside this Python (Python 3.11), else os-ken."""
    chosen = os.environ.get("MLROUTE_FRAMEWORK")
    if chosen in ("ryu", "osken"):
        return chosen
    if chosen:
        raise ValueError(f"MLROUTE_FRAMEWORK={chosen!r}: choose ryu or osken")
    ryu = os.path.join(os.path.dirname(sys.executable), "ryu-manager")
    return "ryu" if os.path.exists(ryu) else "osken"


def controller_env() -> dict[str, str]:
    """This process's environment for the controller, less ``PYTHONDONTWRITEBYTECODE``: the
    controller keeps its bytecode cache as on a user's machine (a shell or CI image that sets
    it made every start compile mlroute again, about 0.15 s, inside the measured start). With
    ``EVENTLET_NO_GREENDNS=yes``, as ``mlroute-controller`` sets it (``ryu_main``)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.setdefault("EVENTLET_NO_GREENDNS", "yes")
    return env


class ControllerProcess:
    def __init__(self, fabric_path: str, log_path: str, algorithm: str = "greedy",
                 mode: str = "flow", rest_port: int = 8080, of_port: int = 6653,
                 extra_args: list[str] | None = None, token: str | None = None,
                 rest_host: str = "127.0.0.1", ca_file: str | None = None):
        """``fabric_path`` None: no declared fabric (the controller discovers it). ``token``:
        the controller's --mlroute-token (or the admin token of a token file in
        ``extra_args``), sent by ``rest``. ``ca_file``: the controller serves HTTPS (its
        --mlroute-tls-* options in ``extra_args``), checked against this CA."""
        fabric = ["--mlroute-fabric", fabric_path] if fabric_path else []
        options = [*fabric, "--mlroute-algorithm", algorithm,
                   "--mlroute-mode", mode, "--wsapi-port", str(rest_port),
                   *(["--wsapi-host", rest_host] if rest_host != "127.0.0.1" else []),
                   "--ofp-tcp-listen-port", str(of_port),
                   *(["--mlroute-token", token] if token else []), *(extra_args or [])]
        if framework() == "ryu":
            self.args = [os.path.join(os.path.dirname(sys.executable), "ryu-manager"),
                         "--user-flags", os.path.join(REPO, "controller", "shell", "flags.py"),
                         *options, os.path.join(REPO, "controller", "shell", "app.py")]
        else:  # os-ken 4: the project's own launcher, in process
            self.args = [sys.executable, "-m", "controller.shell.osken_main", *options]
        self.token = token
        self.ca_file = ca_file
        self.log_path = log_path
        self.rest_port, self.of_port, self.rest_host = rest_port, of_port, rest_host
        self.proc: subprocess.Popen | None = None
        self._log = None

    @property
    def url(self) -> str:
        return f"{'https' if self.ca_file else 'http'}://{self.rest_host}:{self.rest_port}"

    def start(self, timeout: float = 30.0) -> ControllerProcess:
        """Launch the controller and return once its REST API answers."""
        return self.launch().wait_answering(timeout)

    def launch(self) -> ControllerProcess:
        """Start the process without waiting for it: a caller can build its fabric meanwhile
        (the controller's imports take 1-2 s), then call ``wait_answering``."""
        for port in (self.of_port, self.rest_port):
            if listening(port):
                raise RuntimeError(f"port {port} is already in use (a stale controller?); "
                                   "stop it before starting another")
        self._log = open(self.log_path, "w")
        with signals_held() as got:  # no Ctrl-C between the fork and knowing the PID
            self.proc = subprocess.Popen(self.args, stdout=self._log, stderr=subprocess.STDOUT,
                                         cwd=REPO, start_new_session=True, env=controller_env())
        if got:
            with signals_held():
                self.stop()
            raise KeyboardInterrupt
        return self

    def wait_answering(self, timeout: float = 30.0) -> ControllerProcess:
        """Wait (bounded) until the launched controller answers REST; stop it on failure."""
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"controller exited with {self.proc.returncode}; "
                                       f"see {self.log_path}")
                try:
                    status, _ = self.rest("GET", "/v1/fabric")
                    if status in (200, 401):  # 401: it answers, and wants a credential
                        return self
                except OSError:
                    pass
                time.sleep(0.2)
            raise TimeoutError(f"controller REST API did not answer within {timeout:g} s")
        except BaseException:
            with signals_held():
                self.stop()
            raise

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

    @property
    def client(self) -> Client:
        """The REST client of this controller (its token on every request)."""
        return Client(self.url, token=self.token, timeout=60.0, ca_file=self.ca_file)

    def rest(self, method: str, path: str, doc=None, timeout: float = 60.0) -> tuple[int, dict]:
        """(status, answer) of one request, whatever the status; OSError (the client's
        ControllerUnreachable) when the controller does not answer."""
        return self.client.request(method, path, doc=doc, timeout=timeout)
