"""The agent's kernel side against a real kernel, in a network namespace of its own (root):
what it installs reads back as it was made (``rto_min`` beside ``encap seg6`` included), a
batch the kernel refuses half way rolls back exactly, and ``remove_all`` finds every table
of its range, tables without a rule too."""
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.integration

SCRIPT = textwrap.dedent("""
    from controller.agent import kernel, steering
    from controller.agent.main import Agent
    from controller.errors import InputError

    def flow(dst, sid="fcbb:bbbb:3:2:f001::", **more):
        return {"dst_ip": dst, "proto": 6, "form": "usid", "sids": [sid], **more}

    class Client:
        def __init__(self, docs):
            self.docs = docs
        def segments(self, *a, **k):
            return self.docs.pop(0)

    docs = [{"version": "1", "flows": [flow("10.0.1.1"), flow("10.0.1.2", dport=5201)]},
            {"version": "2", "flows": [flow("10.0.1.1", "fcbb:bbbb:4:2:f001::"),
                                       flow("10.0.1.3", proto=17)]},
            {"version": "3", "flows": [flow("10.0.1.4")]}]
    agent = Agent(Client(docs), "h", "b0")
    agent.have = agent.read()
    assert agent.have == {}, agent.have
    agent.step(wait=0)
    assert agent.read() == agent.have and len(agent.have) == 2
    real, calls = agent.apply, []
    def failing(lines):  # the kernel refuses the first batch's third line
        calls.append(lines)
        if len(calls) > 1:
            return real(lines)
        real(lines[:2])
        real(["route del 10.9.9.9/32 table 29999"])
    agent.apply = failing
    before = dict(agent.have)
    try:
        agent.step(wait=0)
        raise AssertionError("no failure")
    except InputError:
        pass
    agent.apply = real
    assert agent.read() == before == agent.have, (agent.read(), before)
    real(["route replace 10.0.9.9/32 encap seg6 mode encap.red segs fcbb:bbbb:9:: dev b0 "
          "rto_min 35ms table 20777"])  # a table whose rule never came
    assert ("table", 20777, "10.0.9.9/32") in agent.read()
    agent.remove_all()
    assert agent.read() == {}
    print("ok")
""")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a network namespace)")
def test_the_agent_installs_reads_back_rolls_back_and_removes_in_a_namespace():
    ns = f"mlroute-agent-test-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        run = ["ip", "netns", "exec", ns]
        for cmd in (["ip", "link", "add", "b0", "type", "veth", "peer", "name", "b1"],
                    ["ip", "link", "set", "b0", "up"], ["ip", "link", "set", "b1", "up"],
                    ["ip", "-6", "addr", "add", "fd00::1/64", "dev", "b0", "nodad"]):
            subprocess.run(run + cmd, check=True)
        p = subprocess.run(run + [sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                           timeout=60, cwd=os.path.dirname(os.path.dirname(__file__)))
        assert p.stdout.strip() == "ok", p.stderr
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
