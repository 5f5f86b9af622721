"""The agent's options: its probes' class and period (their defaults, and a bad value refused
with a message naming it: exit 2, as argparse does; the period reaches the probe loop), its
interfaces by plane (--dev's default: the ones the host has), and every option in the first
72 lines of its --help."""
import pytest

from controller.agent import options, probe
from controller.enforcement.srv6_config import PROBE_DSCP
from controller.errors import InputError

BASE = ["--url", "http://c:8080", "--host", "h0_0"]


def test_the_option_defaults_to_network_control_and_refuses_out_of_range(capsys):
    ap = options.parser("x")
    base = BASE
    assert ap.parse_args(base).probe_dscp == PROBE_DSCP == 48
    assert ap.parse_args(base + ["--probe-dscp", "46"]).probe_dscp == 46
    for bad in ("64", "-1", "ef"):
        with pytest.raises(SystemExit) as e:
            ap.parse_args(base + ["--probe-dscp", bad])
        assert e.value.code == 2
        assert f"a DSCP is a number from 0 to 63, not '{bad}'" in capsys.readouterr().err


def test_dev_defaults_to_the_interfaces_the_host_has_so_a_plane_without_one_is_refused(
        tmp_path, monkeypatch):
    """Without --dev the agent takes HOST-eth0 and the HOST-eth<q> after it that the kernel
    has (here eth0 and eth1), not every name up to 16: a part on plane 2 is then refused by
    name, its rules kept, instead of a route to an interface that is not there."""
    import socket

    from controller.agent import main as agent_main
    from controller.agent.main import Agent
    from tests.test_agent_safety import FakeClient, FakeKernel, document, flow
    interfaces = {"h0_0-eth0": 2, "h0_0-eth1": 3, "h0_0-eth3": 5}  # no eth2

    def index(name):
        if name not in interfaces:
            raise OSError(19, "No such device")
        return interfaces[name]
    monkeypatch.setattr(socket, "if_nametoindex", index)
    seen = []
    monkeypatch.setattr(Agent, "run", lambda self, *a, **k: seen.append(self.dev))
    assert agent_main.main(BASE + ["--lock", str(tmp_path / "lock"), "--no-probes",
                                   "--no-ports"]) == 0
    assert seen == [("h0_0-eth0", "h0_0-eth1")]
    kernel = FakeKernel()
    doc = document(flows=[flow(plane=1), flow("10.0.1.2", plane=2)])
    agent = Agent(FakeClient([doc]), "h0_0", seen[0], apply=kernel.apply, read=kernel.read,
                  sockets=lambda: [])
    with pytest.raises(InputError, match="on plane 2: this agent has 2 interface"):
        agent.step(wait=0)
    assert kernel.lines == [] and agent.refused is not None


def test_the_default_asks_the_kernel_which_interfaces_the_host_has():
    assert options._exists("lo") and not options._exists("mlroute-none0")


def test_the_probe_period_defaults_to_10_ms_and_refuses_out_of_bounds(capsys):
    ap = options.parser("x")
    assert ap.parse_args(BASE).probe_period == probe.FAST_S == 0.01
    assert ap.parse_args(BASE + ["--probe-period", "0.03"]).probe_period == 0.03
    for bad in ("0.001", "2", "-1", "fast"):
        with pytest.raises(SystemExit) as e:
            ap.parse_args(BASE + ["--probe-period", bad])
        assert e.value.code == 2
        assert f"a probe period is 0.01 to 1 seconds, not '{bad}'" in capsys.readouterr().err


def test_every_agent_option_is_in_the_first_72_lines_of_its_help():
    ap = options.parser("x")
    first = "\n".join(ap.format_help().splitlines()[:72])
    for action in ap._actions:
        for name in action.option_strings:
            assert name in first, name


def test_the_probe_loop_runs_a_round_each_period(tmp_path, monkeypatch):
    """``--probe-period 0.05`` reaches the agent's loop: rounds (sends of its lists in use)
    come every 50 ms, not every 10."""
    import threading
    import time

    from controller.agent import main as agent_main
    from controller.agent.main import Agent
    from tests.test_agent_safety import P1, P2, FakeKernel, FakeProber, agent_on, document
    seen = []
    monkeypatch.setattr(Agent, "run", lambda self, *a, **k: seen.append(self.probe_s))
    assert agent_main.main(BASE + ["--lock", str(tmp_path / "lock"), "--no-ports",
                                   "--no-probes", "--dev", "eth0", "--probe-period", "0.05"]) == 0
    assert seen == [0.05]
    agent = agent_on(FakeKernel(), [document()])
    agent.probe_s = seen[0]
    agent.step(wait=0)
    prober, rounds = FakeProber({P1, P2}), []
    send = prober.send
    prober.send = lambda probes: rounds.append(time.monotonic()) or send(probes)
    loop = threading.Thread(target=agent.probe_loop, args=(prober,), daemon=True)
    loop.start()
    try:
        time.sleep(0.5)
    finally:
        agent.stopping.set()
        loop.join(3)
    assert not loop.is_alive()
    gaps = [b - a for a, b in zip(rounds, rounds[1:])]
    assert 6 <= len(rounds) <= 11 and min(gaps) >= 0.045, gaps


def test_a_longer_period_probes_the_backups_as_much_less_often():
    """The backups every 30 ms at the default period (3 rounds), every 3 rounds beyond: at
    0.03 every 90 ms, not every round."""
    for period, every in ((0.01, 3), (0.03, 3), (0.05, 3)):
        s = probe.Schedule(round_s=period)
        rounds = [s.pick([("a",)], [("b",)], [], i * period) for i in range(7)]
        assert [("b",) in r for r in rounds] == [i % every == 0 for i in range(7)], period


def test_a_dead_list_is_judged_failed_when_the_help_says():
    """What ``--probe-period`` trades, as its help states it: a list in use that stops
    answering fails 0.06 to 0.07 s later at 0.01, 0.09 to 0.12 s at 0.03 (probed at every
    offset of the failure within a round)."""
    from tests.test_agent_safety import _first_failure
    for period, low, high in ((0.01, 0.06, 0.07), (0.03, 0.09, 0.12)):
        after = [_first_failure(lambda t: 0.001, period, probe.FAST_FAIL_S,
                                dead_at=2.0 + k / 1000) - (2.0 + k / 1000)
                 for k in range(int(period * 1000))]
        assert low <= min(after) and max(after) <= high + 1e-9, (period, after)
    help_text = " ".join(options.parser("x").format_help().split())
    assert "0.06 to 0.07 s at 0.01; 0.09 to 0.12 at 0.03" in help_text
