"""Ctrl-C on ``python -m emulation.run`` stops everything it started: the agents (in their own
sessions, out of reach of the terminal's SIGINT), the controller and the Mininet fabric."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from emulation.harness.controller_proc import REPO, listening
from emulation.harness.run import AgentGroup
from tests.integration import alive as _alive
from tests.integration import ext
from tests.integration import processes as _processes_mentioning


class _SessionHost:
    """Starts commands in a new session, as Mininet's ``mnexec -d`` does."""

    def popen(self, cmd, **kw):
        return subprocess.Popen(cmd, start_new_session=True, **kw)


def test_agent_group_kills_its_agents_on_interrupt(tmp_path):
    pids = []
    with pytest.raises(KeyboardInterrupt):
        with AgentGroup(str(tmp_path)) as agents:
            for i in range(3):
                pids.append(agents.start(_SessionHost(), ["sleep", "60"], f"a{i}").pid)
            assert all(_alive(p) for p in pids)
            raise KeyboardInterrupt
    assert not any(_alive(p) for p in pids)


def test_agent_group_reports_stuck_agents_and_kills_them(tmp_path):
    with AgentGroup(str(tmp_path)) as agents:
        p = agents.start(_SessionHost(), ["sleep", "60"], "slow")
        with pytest.raises(TimeoutError, match="1 agents did not finish"):
            agents.wait(0.3)
    assert not _alive(p.pid)




@pytest.mark.integration
@pytest.mark.timeout(240)
# make test: Ctrl-C on make demo's runner while its agents run (tests/test_interrupt.py), the
# same emulate() and agent group as emulation.run's
@pytest.mark.parametrize("transport, agent", [ext("roce", "emulation.harness.roce"),
                                              ext("tcp", "emulation.harness.agents")])
def test_ctrl_c_on_the_runner_stops_agents_controller_and_fabric(tmp_path, transport, agent):
    from tests.integration import require_root_and_ovs
    require_root_and_ovs()
    out = tmp_path / "run"
    jobs = tmp_path / "jobs.json"
    # 4 ranks at 1 Mbit/s, 2 MB: each step takes about 4 s, the run far longer than the test
    jobs.write_text(json.dumps({"jobs": [{"id": "big", "collective": "ring_allreduce",
                                          "ranks": ["h0_0", "h1_0", "h2_0", "h3_0"],
                                          "bytes": 2e6}]}))
    log = open(tmp_path / "runner.log", "w")
    runner = subprocess.Popen(
        [sys.executable, "-m", "emulation.run", "--spines", "2", "--leaves", "4",
         "--hosts-per-leaf", "1", "--bw", "1", "--jobs", str(jobs), "--iterations", "5",
         "--transport", transport, "--no-ping", "--out", str(out)],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        agents = []
        while time.monotonic() < deadline and runner.poll() is None:
            agents = [p for p in _processes_mentioning(str(out)) if agent in p[1]]
            if len(agents) == 4:
                break
            time.sleep(0.5)
        assert len(agents) == 4, (runner.poll(), (tmp_path / "runner.log").read_text()[-2000:])
        controller = [p for p in _processes_mentioning(str(out))
                      if "ryu-manager" in p[1] or "osken_main" in p[1]]
        assert len(controller) == 1
        time.sleep(2)  # traffic under way
        os.killpg(runner.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        assert runner.wait(timeout=90) == 130, (tmp_path / "runner.log").read_text()[-2000:]
        left = _processes_mentioning(str(out))
        assert left == [], left
        assert not any(_alive(pid) for pid, _ in agents + controller)
        assert not listening(6653) and not listening(8080)
        bridges = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True,
                                 timeout=30).stdout.split()
        assert not {"s0", "s1", "l0", "l1", "l2", "l3"} & set(bridges), bridges
        assert _processes_mentioning("mininet:h0_0") == []
        assert "interrupted" in (tmp_path / "runner.log").read_text()
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait(timeout=30)
        for pid, _ in _processes_mentioning(str(out)):  # only what this test started
            os.kill(pid, signal.SIGKILL)
        log.close()
