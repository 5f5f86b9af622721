"""The agent keeps its routes on real kernels (issue 75, point 8): a host's own port set down
and up makes the kernel delete the agent's encapsulation routes, its rules staying on empty
tables; the agent puts them back at once, the flow crosses its planned spine again (the
spines' SID counters), and SIGTERM leaves no rule and no table of the agent's."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import time

import pytest

from emulation.harness.fabricnet import wait_until
from emulation.harness.routers import AGENT, PY, RouterSession
from tests.integration import require_root_and_ovs

pytestmark = pytest.mark.integration
SERVER = """import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen()
c, _ = s.accept(); n = 0
while (d := c.recv(65536)):
    n += len(d)
print(n, flush=True)
"""
CLIENT = """import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
c.sendall(b"x" * int(sys.argv[3])); c.close()
"""
RESTORED_S = 2.0  # the routes are back this long after the port is up, at most


def _run(s, host, args) -> str:
    """A command in ``host``'s namespace (a process of its own, not the node's shell)."""
    return s.net[host].popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True).communicate(timeout=20)[0]


def _segs(s, host) -> list[str]:
    return re.findall(r"segs \d+ \[ ([0-9a-f:]+) \]", _run(s, host, ["ip", "route", "show",
                                                                     "table", "all"]))


def _owned(s, host) -> list[str]:
    """The agent's rules and tables left in the host's kernel (its ranges, steering.py)."""
    rules = [x for x in _run(s, host, ["ip", "rule"]).splitlines()
             if x.split(":")[0].strip().isdigit() and 10000 <= int(x.split(":")[0]) < 30000]
    tables = [x for x in _run(s, host, ["ip", "route", "show", "table", "all"]).splitlines()
              if re.search(r"table 2\d{4}\b", x)]
    return rules + tables


def test_a_hosts_port_down_and_up_gets_its_routes_back_and_sigterm_leaves_nothing(tmp_path):
    from controller.enforcement.srv6_config import host_config
    from topologies.routers import leaf_spine
    require_root_and_ovs()
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    with RouterSession(leaf_spine(2, 2, 2), str(tmp_path), agents=["h0_0", "h1_0"]) as s:
        view = s.ctl.client.add_job({"id": "one", "flows": [
            {"src": "h0_0", "dst": "h1_0", "bytes": 2e6}]})
        spine = view["routes"][0]["path"][1]
        other = "s1" if spine == "s0" else "s0"
        wait_until(lambda: s.steered("h0_0") == 1, 10, interval=0.1, what="the agent's rule")
        routes = _segs(s, "h0_0")
        assert len(routes) == 1, routes
        dev = "h0_0-eth0"
        _run(s, "h0_0", ["ip", "link", "set", dev, "down"])
        assert _segs(s, "h0_0") == [] and s.steered("h0_0") == 1  # the kernel's doing
        time.sleep(0.5)
        _run(s, "h0_0", ["ip", "link", "set", dev, "up"])
        up_at = time.monotonic()
        # the host's own addresses and routes come back as its network manager puts them
        lines = "\n".join(host_config(s.plan, "h0_0")) + "\n"
        batch = s.net["h0_0"].popen(["ip", "-batch", "-"], stdin=subprocess.PIPE, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert batch.communicate(lines, timeout=20) and batch.returncode == 0
        wait_until(lambda: _segs(s, "h0_0") == routes, RESTORED_S, interval=0.02,
                   what="the agent's routes put back")
        took = time.monotonic() - up_at
        assert took < RESTORED_S and s.steered("h0_0") == 1, took
        log = (tmp_path / "agent-h0_0.log").read_text()
        assert re.search(r"WARNING mlroute-agent: the kernel dropped 1 of the 1 parts", log), log
        before = {x: s.sid_bytes(x) for x in ("s0", "s1")}
        server = s.net["h1_0"].popen([PY, str(tmp_path / "server.py"), "5005"],
                                     stdout=subprocess.PIPE, text=True)
        s.procs.append(server)
        time.sleep(0.5)
        size = 2_000_000
        out = s.net["h0_0"].cmd(f"{PY} {tmp_path / 'client.py'} {s.fabric.host_ip['h1_0']} "
                                f"5005 {size}; echo rc=$?")
        assert out.strip().endswith("rc=0"), out
        assert int(server.communicate(timeout=30)[0]) == size
        moved = {x: s.sid_bytes(x) - before[x] for x in ("s0", "s1")}
        assert size <= moved[spine] < 1.2 * size and moved[other] < 0.05 * size, (spine, moved)
        agent = next(p for p in s.procs if AGENT in p.args and "h0_0" in p.args)
        _run(s, "h0_0", ["ip", "link", "set", dev, "down"])  # and SIGTERM with rules
        _run(s, "h0_0", ["ip", "link", "set", dev, "up"])  # on empty tables, racing the
        agent.send_signal(signal.SIGTERM)  # re-install: nothing of the agent's stays
        assert agent.wait(15) == 0
        assert _owned(s, "h0_0") == [], _owned(s, "h0_0")


def _reconfigure(s, router) -> None:
    """The router's configuration applied again, as after any link set down and up (Linux
    drops the link's IPv6 addresses and static routes; every line replaces)."""
    from controller.enforcement.srv6_config import configs
    cfg = configs(s.plan)[router]
    for family, lines in (([], cfg.iproute2()), (["-6"], cfg.iproute2_v6())):
        if lines:
            p = s.net[router].popen(["ip", *family, "-batch", "-"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            out = p.communicate("\n".join(lines) + "\n", timeout=20)[0]
            assert p.returncode == 0, out


def test_a_fabric_link_flap_leaves_no_stale_disagreement(tmp_path):
    """Issue 75, point 6: a leaf-spine link set down and up; the agents' probes take it down
    and bring it back, and then neither ``/v1/ready`` nor ``/v1/fabric`` names it
    ``missing_link ... no probe seen`` (they did for good)."""
    from topologies.routers import leaf_spine
    require_root_and_ovs()
    with RouterSession(leaf_spine(2, 2, 1), str(tmp_path), agents=["h0_0", "h1_0"]) as s:
        s.ctl.client.add_job({"id": "one", "flows": [{"src": "h0_0", "dst": "h1_0",
                                                      "bytes": 1e6}]})
        wait_until(lambda: s.steered("h0_0") and s.steered("h1_0"), 10, interval=0.1,
                   what="the agents' rules")
        wait_until(lambda: (s.ctl.client.ready().get("hosts") or {}).get("reporting") == 2,
                   10, what="both agents' probe reports")
        time.sleep(1.5)  # every probed path answered once: only a path that worked can fail
        s.net.configLinkStatus("s0", "l1", "down")
        wait_until(lambda: s.ctl.client.fabric().get("links_down"), 15,
                   what="the link down on the hosts' probes")
        s.net.configLinkStatus("s0", "l1", "up")
        for router in ("s0", "l1"):
            _reconfigure(s, router)
        wait_until(lambda: not s.ctl.client.fabric().get("links_down"), 15,
                   what="the link back on the hosts' probes")
        time.sleep(4)  # discovery's quiet period (2 s) and the published views (1 s)
        ready, fabric = s.ctl.client.ready(), s.ctl.client.fabric()
        assert "missing_link" not in json.dumps(ready), ready
        assert "missing_link" not in json.dumps(fabric), fabric["discovery"]
