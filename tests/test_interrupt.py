"""Ctrl-C on ``python -m emulation.trace`` and on the demo stops everything they started: the
controller (in its own session, out of reach of the terminal's SIGINT), the probe sender and
the agents (detached by Mininet), the Mininet fabric (bridges, veths, host shells), at any
moment of start-up or of the run. The signal goes to the runner's process group, as a
terminal's Ctrl-C does."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from emulation.controller_proc import REPO, listening, signals_held
from tests.integration import alive as _alive
from tests.integration import processes as _processes
from tests.integration import require_root_and_ovs

SWITCHES = {"s0", "s1", "l0", "l1"}






def _leftovers(outdir: str) -> dict:
    """What a run in ``outdir`` may leave behind; empty lists when it left nothing."""
    bridges = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True,
                             timeout=30).stdout.split()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True,
                           timeout=30).stdout
    veths = sorted({line.split(":")[1].strip().split("@")[0] for line in links.splitlines()
                    if "-eth" in line})
    return {"processes": _processes(outdir, "emulation.trace send", "mininet:h0_0",
                                    "emulation.agents", "emulation.roce"),
            "bridges": sorted(SWITCHES & set(bridges)), "veths": veths,
            "ports": [p for p in (6653, 8080) if listening(p)]}


def _run_and_interrupt(tmp_path, cmd: list[str], ready, outdir: str, budget: float = 150):
    """Start ``cmd`` in a process group of its own, wait until ``ready(log text)`` holds, send
    SIGINT to the group, and return (exit status, log text, what was left behind)."""
    log_path = tmp_path / "runner.log"
    log = open(log_path, "w")
    runner = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + budget
        while runner.poll() is None and time.monotonic() < deadline:
            if ready(log_path.read_text()):
                break
            time.sleep(0.1)
        text = log_path.read_text()
        assert runner.poll() is None and ready(text), (runner.poll(), text[-3000:])
        os.killpg(runner.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        status = runner.wait(timeout=90)
        return status, log_path.read_text(), _leftovers(outdir)
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait(timeout=30)
        for pid, _ in _processes(outdir):  # only what this test started
            os.kill(pid, signal.SIGKILL)
        log.close()


def _jobs(tmp_path) -> str:
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps({"jobs": [{"id": "p", "flows": [
        {"src": "h0_0", "dst": "h1_0", "bytes": 1e6, "sport": 50000},
        {"src": "h1_0", "dst": "h0_0", "bytes": 1e6, "sport": 50001}]}]}))
    return str(path)


def test_signals_held_defers_sigint_to_the_caller():
    with signals_held() as got:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs between bytecodes; nothing is raised here
    assert got == [signal.SIGINT]
    with pytest.raises(KeyboardInterrupt):  # the previous handler is back
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)


# one moment of each start-up step, and one while a probe sender runs
MOMENTS = ["starting the controller", "building the fabric", "waiting for every switch",
           "probing flow 1/"]


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("moment", MOMENTS)
def test_ctrl_c_on_trace_stops_controller_probes_and_fabric(tmp_path, moment):
    require_root_and_ovs()
    out = str(tmp_path / "trace")
    # many probes: the sender runs for seconds, so the last moment falls while it runs
    cmd = [sys.executable, "-m", "emulation.trace", "--jobs", _jobs(tmp_path), "--spines", "2",
           "--leaves", "2", "--hosts-per-leaf", "1", "--count", "3000", "--out", out]
    status, text, left = _run_and_interrupt(tmp_path, cmd, lambda t: moment in t, out)
    assert status == 130, text[-3000:]
    assert "interrupted" in text, text[-3000:]
    assert left == {"processes": [], "bridges": [], "veths": [], "ports": []}, left


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ctrl_c_on_demo_stops_agents_controller_and_fabric(tmp_path):
    require_root_and_ovs()
    out = str(tmp_path / "demo")
    # one ring of 2 ranks at 1 Mbit/s, 2 MB: a step takes about 8 s, the run far longer
    cmd = [sys.executable, "-m", "emulation.demo", "--spines", "2", "--leaves", "2",
           "--hosts-per-leaf", "1", "--bw", "1", "--bytes", "2e6", "--iterations", "5",
           "--out", out]
    agents = []

    def agents_running(_text):
        agents[:] = [p for p in _processes(out) if "emulation.agents" in p[1]
                     or "emulation.roce" in p[1]]
        return len(agents) == 2
    status, text, left = _run_and_interrupt(tmp_path, cmd, agents_running, out, budget=200)
    assert status == 130, text[-3000:]
    assert left == {"processes": [], "bridges": [], "veths": [], "ports": []}, left
    assert not any(_alive(pid) for pid, _ in agents)
