"""Each framework adapter as a real process (``ryu-manager`` with ``controller/shell/app.py``,
``python -m controller.shell.osken_main``), each where its framework is installed: it starts,
serves REST on the stdlib server, takes the write token from a file or the environment (never
visible in ``ps``), refuses bad options with a clear message, and stops on SIGTERM. No switch:
free ephemeral ports, no Open vSwitch, no root."""
import json
import os
import subprocess
import sys
import time

import pytest

from emulation.harness.controller_proc import ControllerProcess
from emulation.harness.ports import free_ports
from topologies.clos import clos_fabric

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "file-token-0123"
QUIET = ["--mlroute-sflow-port", "0"]  # no fixed UDP port: runs beside another controller


@pytest.fixture(params=["ryu", "osken"])
def framework(request, monkeypatch):
    if request.param == "ryu":
        if not os.path.exists(os.path.join(os.path.dirname(sys.executable), "ryu-manager")):
            pytest.skip("ryu-manager is not installed in this venv (Python 3.12+: os-ken)")
    else:
        pytest.importorskip("os_ken", reason="os-ken is not installed in this venv (3.11: Ryu)")
    monkeypatch.setenv("MLROUTE_FRAMEWORK", request.param)
    return request.param


def fabric_file(tmp_path) -> str:
    path = tmp_path / "fabric.json"
    path.write_text(json.dumps(clos_fabric(2, 4, 2).to_dict()))
    return str(path)


def job(jid="a"):
    return {"id": jid, "collective": "ring_allreduce", "ranks": ["h0_0", "h1_0"], "bytes": 1e6}


@pytest.mark.integration  # starts controllers: under the OVS lock (Mininet cleanups kill them)
@pytest.mark.timeout(120)
def test_adapter_serves_rest_with_a_token_file(framework, tmp_path):
    (tmp_path / "token").write_text(TOKEN + "\n")
    ctl = ControllerProcess(fabric_file(tmp_path), str(tmp_path / "ctl.log"),
                            **_ports(),
                            extra_args=["--mlroute-token-file", str(tmp_path / "token"),
                                        *QUIET])
    ctl.start()
    try:
        args = open(f"/proc/{ctl.proc.pid}/cmdline", "rb").read()
        assert TOKEN.encode() not in args
        assert ctl.rest("GET", "/v1/fabric")[0] == 401  # reads need the credential too
        assert ctl.rest("GET", "/v1/ready")[0] in (200, 503)  # ... but readiness probes
        assert ctl.rest("POST", "/v1/jobs", job())[0] == 401  # no token sent
        ctl.token = TOKEN
        assert ctl.rest("GET", "/v1/fabric")[0] == 200
        status, doc = ctl.rest("POST", "/v1/jobs", job())
        assert status == 409 and "not connected" in doc["error"]  # no switch: nothing changed
        status, doc = ctl.rest("PATCH", "/v1/jobs", b"{}")
        assert status == 405
    finally:
        ctl.stop(timeout=10)
    assert ctl.proc.returncode is not None
    log = open(tmp_path / "ctl.log").read()
    assert "Traceback" not in log, log[-2000:]


@pytest.mark.integration  # starts controllers: under the OVS lock (Mininet cleanups kill them)
@pytest.mark.timeout(120)
def test_adapter_takes_the_token_from_the_environment(framework, tmp_path, monkeypatch):
    monkeypatch.setenv("MLROUTE_TOKEN", TOKEN)
    ctl = ControllerProcess(fabric_file(tmp_path), str(tmp_path / "ctl.log"),
                            **_ports(), extra_args=QUIET)
    ctl.start()
    try:
        assert ctl.rest("POST", "/v1/jobs", job())[0] == 401
        ctl.token = TOKEN
        assert ctl.rest("POST", "/v1/jobs", job())[0] == 409
    finally:
        ctl.stop(timeout=10)


@pytest.mark.integration  # starts controllers: under the OVS lock (Mininet cleanups kill them)
@pytest.mark.timeout(120)
def test_adapter_refuses_bad_options(framework, tmp_path):
    for extra, words in ((["--mlroute-mode", "teleport"], "teleport"),
                         (["--mlroute-token-file", str(tmp_path / "missing")], "missing")):
        ctl = ControllerProcess(fabric_file(tmp_path), str(tmp_path / "bad.log"),
                                **_ports(),
                                extra_args=extra + QUIET)
        start = time.monotonic()
        proc = subprocess.run(ctl.args, cwd=REPO, capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0 and words in proc.stdout + proc.stderr, proc.stderr[-2000:]
        assert time.monotonic() - start < 60


def _ports() -> dict:
    rest, of = free_ports(2)
    return {"rest_port": rest, "of_port": of}
