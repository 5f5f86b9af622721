"""``make demo`` and ``make controller`` take ports and options: the demo passes its
``--rest-port``, ``--of-port`` and ``--sflow-port`` to the controller it starts and points the
switches at them; the Makefile turns REST_PORT, OF_PORT, SFLOW_PORT and ARGS into options (no
root, nothing started: the runs are replaced, the Makefile read with ``make -n``)."""
import os
import shutil
import subprocess

import pytest

from emulation import demo
from emulation.harness import fattree_rings, run
from emulation.harness.controller_proc import REPO
from emulation.harness.session import Ports, Session


def test_the_demo_passes_its_ports_to_the_run(monkeypatch, tmp_path):
    seen = {}

    def emulate(*args, ports=None, **kw):
        seen["emulate"] = ports
        raise KeyboardInterrupt  # stop there: nothing was started

    def compare_rings(*args, ports=None, **kw):
        seen["fattree"] = ports
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "emulate", emulate)
    monkeypatch.setattr(fattree_rings, "compare_rings", compare_rings)
    monkeypatch.setattr("emulation.harness.session.install_interrupt_handler", lambda: None)
    options = ["--rest-port", "8181", "--of-port", "6654", "--sflow-port", "6344",
               "--out", str(tmp_path)]
    assert demo.main(options) == 130
    assert demo.main(["--fat-tree", *options]) == 130
    assert seen == {"emulate": Ports(8181, 6654, 6344), "fattree": Ports(8181, 6654, 6344)}
    assert demo.main(["--simulate"]) == 0  # the defaults, no port asked


def test_a_session_s_controller_and_switches_use_its_ports(tmp_path):
    s = Session(2, 2, 1, 10, str(tmp_path), ports=Ports(8181, 6654, 6344))
    ctl = s.controller()
    assert (ctl.rest_port, ctl.of_port) == (8181, 6654)
    args = " ".join(ctl.args)
    assert "--wsapi-port 8181" in args and "--ofp-tcp-listen-port 6654" in args
    assert "--mlroute-sflow-port 6344" in args
    assert s.ports.sflow_collector() == "127.0.0.1:6344"
    default = Session(2, 2, 1, 10, str(tmp_path)).controller()
    assert (default.rest_port, default.of_port) == (8080, 6653)
    assert "--mlroute-sflow-port" not in default.args
    assert Ports().sflow_collector() is None  # the topology's own target


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
@pytest.mark.parametrize("target, variables, expected", [
    ("demo", ["REST_PORT=8181", "OF_PORT=6654", "SFLOW_PORT=6344", "ARGS=--mode sr"],
     "-m emulation.demo --rest-port 8181 --of-port 6654 --sflow-port 6344 --mode sr"),
    ("demo-fattree", ["OF_PORT=6654"], "-m emulation.demo --fat-tree --of-port 6654"),
    ("demo", [], "-m emulation.demo"),
    ("controller", ["ARGS=--wsapi-port 8181 --mlroute-fabric f.json"],
     "/mlroute-controller --wsapi-port 8181 --mlroute-fabric f.json"),
])
def test_the_makefile_passes_ports_and_args(target, variables, expected):
    r = subprocess.run(["make", "-n", "--no-print-directory", target, *variables], cwd=REPO,
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, MAKEFLAGS=""))
    assert r.returncode == 0, r.stderr
    last = " ".join(r.stdout.strip().splitlines()[-1].split())
    assert last.endswith(expected), last
