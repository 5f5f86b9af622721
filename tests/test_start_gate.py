"""The runner's start gate (``emulation.harness.run.StartGate``, ``agents.await_start``): real
ring agents on loopback start their first iteration together at the time the gate sends, once
all of them are connected; an agent that dies first stops the round with its error."""
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from emulation.harness.ports import free_ports
from emulation.harness.run import AgentGroup, StartGate

pytestmark = pytest.mark.timeout(60)


def _host():
    return SimpleNamespace(popen=lambda cmd, **kw: subprocess.Popen(cmd, **kw))


def _ring_agent(i: int, n: int, gate: str, workdir: str, ports: list[int]) -> list[str]:
    return [sys.executable, "-m", "emulation.harness.agents", "ring",
            "--listen-port", str(ports[i]), "--next-ip", f"127.0.0.{(i + 1) % n + 1}",
            "--dport", str(ports[(i + 1) % n]), "--parts", "0:1.0", "--recv-parts", "1.0",
            "--chunk", "20000", "--steps", str(2 * (n - 1)), "--start-gate", gate,
            "--out", f"{workdir}/r{i}.json"]


def test_agents_start_together_at_the_time_the_gate_sends(tmp_path):
    import json
    n, ports = 3, free_ports(3)
    with AgentGroup(str(tmp_path)) as agents, StartGate(str(tmp_path / "start.sock")) as gate:
        for i in range(n):
            agents.start(_host(), _ring_agent(i, n, gate.path, str(tmp_path), ports), f"r{i}")
        start = gate.open(agents, timeout=30)
        agents.wait(30)
    assert len(gate.ready) == n
    results = [json.loads((tmp_path / f"r{i}.json").read_text()) for i in range(n)]
    assert all("error" not in r for r in results), results
    starts = [r["iterations"][0]["start"] for r in results]
    # each sleeps until the gate's time, then reads its clock: none early, none far behind
    assert all(start <= s < start + 0.5 for s in starts), (start, starts)
    assert all(r["received_bytes"] == 2 * (n - 1) * 20000 for r in results)


def test_an_agent_that_exits_before_the_start_stops_the_round_with_its_error(tmp_path):
    t0 = time.monotonic()
    with AgentGroup(str(tmp_path)) as agents, StartGate(str(tmp_path / "start.sock")) as gate:
        agents.start(_host(), _ring_agent(0, 2, gate.path, str(tmp_path), free_ports(2)), "r0")
        # a second rank that fails at once, as one whose port is taken does, and says why
        agents.start(_host(), [sys.executable, "-c", (
            "import json, sys; json.dump({'error': 'OSError: address in use'}, "
            f"open('{tmp_path}/r1.json', 'w')); sys.exit(1)")], "r1")
        with pytest.raises(RuntimeError, match="agent r1 exited before the start: OSError"):
            gate.open(agents, timeout=30)
    assert time.monotonic() - t0 < 15
    assert all(p.poll() is not None for p in agents.procs)  # the round's agents are stopped


def test_a_gate_nobody_reports_to_times_out(tmp_path):
    with AgentGroup(str(tmp_path)) as agents, StartGate(str(tmp_path / "start.sock")) as gate:
        agents.start(_host(), [sys.executable, "-c", "import time; time.sleep(30)"], "idle")
        with pytest.raises(TimeoutError, match="1 agents did not connect within 1 s"):
            gate.open(agents, timeout=1)
    assert not (tmp_path / "start.sock").exists()
