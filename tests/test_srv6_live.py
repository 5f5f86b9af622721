"""srv6 mode live: a leaf-spine of Linux routers (no OpenFlow, no switch daemon) configured
by ``srv6_config``, the controller with ``--mlroute-southbound none``, one ``mlroute-agent``
per sending host (reaching the controller through a socat relay: Mininet hosts have no route to
the root namespace), and real TCP: the routers' per-SID counters prove the planned spines."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from emulation.harness import fabricnet
from emulation.harness.controller_proc import ControllerProcess
from emulation.harness.ports import free_ports
from tests.integration import require_root_and_ovs

pytestmark = pytest.mark.integration
AGENT = os.path.join(os.path.dirname(sys.executable), "mlroute-agent")
SERVER = """import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen()
c, _ = s.accept(); n = 0
while True:
    d = c.recv(65536)
    if not d: break
    n += len(d)
print(n, flush=True)
"""
CLIENT = """import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=20)
c.sendall(b"x" * int(sys.argv[3])); c.close()
"""


def _uN_bytes(router, locator: str) -> int:
    out = router.cmd(f"ip -s -6 route show {locator}")
    words = out.split()
    return int(words[words.index("bytes") + 1]) if "bytes" in words else 0


def test_two_flows_of_a_leaf_take_their_planned_spines_through_the_hosts(tmp_path):
    require_root_and_ovs()
    if shutil.which("socat") is None:
        pytest.skip("needs socat")
    from mininet.net import Mininet

    from controller.enforcement.srv6 import SidPlan
    from topologies.routers import RoutersTopo, leaf_spine
    fabric = leaf_spine(2, 2, 2)
    path = tmp_path / "fabric.json"
    path.write_text(json.dumps(fabric.to_dict()))
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    rest, of = free_ports(2)
    ctl = ControllerProcess(str(path), str(tmp_path / "controller.log"), "auto", "srv6", rest, of,
                            ["--mlroute-southbound", "none", "--mlroute-sflow-port", "0"])
    net, procs = None, []
    try:
        ctl.start()
        net = Mininet(topo=RoutersTopo(fabric=fabric), controller=None)
        net.start()
        sock = str(tmp_path / "rest.sock")
        procs.append(subprocess.Popen(["socat", f"UNIX-LISTEN:{sock},fork,reuseaddr",
                                       f"TCP:127.0.0.1:{rest}"], start_new_session=True))
        fabricnet.wait_until(lambda: os.path.exists(sock), 10, what="relay socket")
        senders = ["h0_0", "h0_1"]
        for h in senders:
            procs.append(net[h].popen(["socat", f"TCP-LISTEN:{rest},bind=127.0.0.1,fork,reuseaddr",
                                       f"UNIX-CONNECT:{sock}"]))
            procs.append(net[h].popen([AGENT, "--url", f"http://127.0.0.1:{rest}", "--host", h,
                                       "--lock", str(tmp_path / f"{h}.lock")],
                                      stdout=open(tmp_path / f"agent-{h}.log", "w"),
                                      stderr=subprocess.STDOUT))
        pairs = {"h0_0": "h1_0", "h0_1": "h1_1"}
        view = ctl.client.add_job({"id": "pairs", "flows": [
            {"src": s, "dst": d, "bytes": 2e6} for s, d in pairs.items()]})
        spines = {r["src"]: r["path"][1] for r in view["routes"]}
        assert sorted(spines.values()) == ["s0", "s1"], view["routes"]  # one spine each

        def steered(h):
            return "lookup 200" in net[h].cmd("ip rule")
        fabricnet.wait_until(lambda: all(steered(h) for h in senders), 10, interval=0.1,
                             what="agents' rules")
        plan = SidPlan.of(fabric)
        before = {s: _uN_bytes(net[s], plan.locator(s)) for s in ("s0", "s1")}
        servers = [net[d].popen(["/usr/bin/python3", str(tmp_path / "server.py"), "5001"],
                                stdout=subprocess.PIPE, text=True) for d in pairs.values()]
        procs += servers
        time.sleep(0.5)
        size = 2_000_000
        for s, d in pairs.items():
            out = net[s].cmd(f"/usr/bin/python3 {tmp_path / 'client.py'} "
                             f"{fabric.host_ip[d]} 5001 {size}; echo rc=$?")
            assert out.strip().endswith("rc=0"), out
        got = [int(p.communicate(timeout=30)[0].strip()) for p in servers]
        assert got == [size, size]  # every byte delivered
        moved = {s: _uN_bytes(net[s], plan.locator(s)) - before[s] for s in ("s0", "s1")}
        for spine in ("s0", "s1"):  # each spine's uN carried one flow, encapsulated
            assert size <= moved[spine] < 1.2 * size, (moved, spines)
        ctl.client.delete_job("pairs")  # the agents' watches see it and remove their rules
        fabricnet.wait_until(lambda: not any(steered(h) for h in senders), 10, interval=0.1,
                             what="rules removed after the job's delete")
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(10)
        if net is not None:
            net.stop()
        ctl.stop()
