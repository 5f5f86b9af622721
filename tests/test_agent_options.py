"""The agent's options: its probes' class (its default, and a bad value refused with a
message naming it: exit 2, as argparse does) and its interfaces by plane (--dev's default:
the ones the host has)."""
import pytest

from controller.agent import options
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
