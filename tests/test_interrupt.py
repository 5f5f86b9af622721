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

from emulation.harness.controller_proc import REPO, listening, signals_held
from emulation.harness.owned import ENV, token_of
from tests.integration import alive as _alive
from tests.integration import processes as _processes
from tests.integration import require_root_and_ovs

SWITCHES = {"s0", "s1", "l0", "l1"}






def _leftovers(outdir: str, tokens: set[str]) -> dict:
    """What a run in ``outdir`` (its processes marked with one of ``tokens``) may leave behind;
    empty lists when it left nothing."""
    bridges = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True,
                             timeout=30).stdout.split()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True,
                           timeout=30).stdout
    veths = sorted({line.split(":")[1].strip().split("@")[0] for line in links.splitlines()
                    if "-eth" in line})
    return {"processes": _processes(outdir, "emulation.trace send", "mininet:h0_0",
                                    "emulation.harness.agents", "emulation.harness.roce",
                                    tokens=tokens),
            "bridges": sorted(SWITCHES & set(bridges)), "veths": veths,
            "ports": [p for p in (6653, 8080) if listening(p)]}


def _run_and_interrupt(tmp_path, cmd: list[str], ready, outdir: str, budget: float = 150):
    """Start ``cmd`` in a process group of its own, wait until ``ready(log text)`` holds, send
    SIGINT to the group, and return (exit status, log text, what was left behind)."""
    log_path = tmp_path / "runner.log"
    log = open(log_path, "w")
    # what the runner starts carries one of two marks (owned.ENV): ours, until it claims its
    # own, then its own token; processes of other runs on the machine carry neither
    mine = f"test-interrupt-{os.getpid()}-{time.monotonic_ns()}"
    runner = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True, env={**os.environ, ENV: mine})
    tokens = {mine, token_of(runner.pid)}
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
        return status, log_path.read_text(), _leftovers(outdir, tokens)
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait(timeout=30)
        for pid, _ in _processes(outdir, tokens=tokens):  # only what this test started
            os.kill(pid, signal.SIGKILL)
        log.close()


def _jobs(tmp_path) -> str:
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps({"jobs": [{"id": "p", "flows": [
        {"src": "h0_0", "dst": "h1_0", "bytes": 1e6, "sport": 50000},
        {"src": "h1_0", "dst": "h0_0", "bytes": 1e6, "sport": 50001}]}]}))
    return str(path)


@pytest.mark.parametrize("previous", [signal.default_int_handler, signal.SIG_IGN],
                         ids=["default", "ignored"])
def test_signals_held_defers_sigint_to_the_caller(previous):
    """Whatever SIGINT's disposition was before (Python's default, or ignored as in a job a
    script started with ``&``), the block holds it and restores it. The test sets the
    disposition itself: it does not depend on what the test runner inherited."""
    saved = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, previous)
    try:
        with signals_held() as got:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler runs between bytecodes; nothing is raised here
        assert got == [signal.SIGINT]
        assert signal.getsignal(signal.SIGINT) is previous  # the previous handler is back
        if previous is signal.default_int_handler:
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1)
        else:
            os.kill(os.getpid(), signal.SIGINT)  # ignored again: nothing happens
            time.sleep(0.05)
    finally:
        signal.signal(signal.SIGINT, saved)


CHILD = """
import signal, sys, time
from {module} import install_interrupt_handler
assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN, "the test starts it with SIGINT ignored"
install_interrupt_handler()
try:
    print("ready", flush=True)
    time.sleep(60)
except KeyboardInterrupt:
    print("cleaning", flush=True)
    time.sleep(0.5)  # a second Ctrl-C here must not cut the cleanup short
    print("cleaned", flush=True)
    sys.exit(130)
"""


@pytest.mark.parametrize("module", ["emulation.harness.session"])
def test_a_runner_started_with_sigint_ignored_still_stops_on_ctrl_c(module):
    """A runner started in the background by a script (``python -m emulation.run ... &``)
    inherits SIGINT ignored; its entry point installs its own handler, so Ctrl-C on the
    script's process group still stops it, and a second Ctrl-C does not cut its cleanup."""
    saved = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited by the child, as `&` does
    try:
        child = subprocess.Popen([sys.executable, "-c", CHILD.format(module=module)], cwd=REPO,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True)
    finally:
        signal.signal(signal.SIGINT, saved)
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        os.killpg(child.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        assert child.stdout.readline().strip() == "cleaning"
        os.killpg(child.pid, signal.SIGINT)
        out, err = child.communicate(timeout=30)
        assert child.returncode == 130, err
        assert out.strip() == "cleaned"
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate(timeout=30)


# one moment of each start-up step, and one while a probe sender runs
MOMENTS = ["starting the controller", "building the fabric",
           pytest.param("waiting for every switch", marks=pytest.mark.extended),
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
        agents[:] = [p for p in _processes(out) if "emulation.harness.agents" in p[1]
                     or "emulation.harness.roce" in p[1]]
        return len(agents) == 2
    status, text, left = _run_and_interrupt(tmp_path, cmd, agents_running, out, budget=200)
    assert status == 130, text[-3000:]
    assert left == {"processes": [], "bridges": [], "veths": [], "ports": []}, left
    assert not any(_alive(pid) for pid, _ in agents)
