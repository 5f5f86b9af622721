"""Host mode on routers, on real kernels: in bare network namespaces (no Mininet or Open
vSwitch; ``emulation/harness/netns_routers.py``) a leaf-spine of Linux routers configured by
``srv6_config`` with ECMP on the L4 hash; the host's prober (``agent/portmap.py``) finds a
source port for each spine, and a TCP connection bound to it crosses that spine by the
spine's interface counters."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from controller.enforcement.srv6_config import router_ips
from controller.model.clos import Clos
from controller.model.clos_wiring import wire
from emulation.harness.netns_routers import NetnsRouters

pytestmark = pytest.mark.integration

PROBE = """
import json, sys
from controller.agent.portmap import Prober, Target, learn
src, dst, routers = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
p = Prober(src)
p.routers = routers
r = learn({s: Target(dst, 6, 5201, (s,)) for s in ("s0", "s1")}, {}, p)
print(json.dumps({"ports": r.ports, "probes": r.probes, "rounds": r.rounds}))
"""
SERVER = """
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5201)); s.listen(4); print("ready", flush=True)
while True:
    c, _ = s.accept()
    while c.recv(65536):
        pass
    c.close()
"""
CLIENT = """
import socket, sys
c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
c.bind((sys.argv[1], int(sys.argv[2]))); c.settimeout(10)
c.connect((sys.argv[3], 5201)); c.sendall(b"x" * 2_000_000); c.close()
"""
SENT = 2_000_000


def test_a_learned_source_port_takes_its_spine_by_the_routers_l4_hash():
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 (ip netns)")
    c = Clos.leaf_spine(2, 2, 1)
    f = c.wire(wire(c))
    src, dst = f.ip_of("h0_0"), f.ip_of("h1_0")
    names = {ip: s for s, ip in router_ips(f).items()}
    py = [sys.executable, "-c"]
    with NetnsRouters(f) as n:
        env = {**os.environ, "PYTHONPATH": os.getcwd()}
        out = n.exec("h0_0", py + [PROBE, src, dst, json.dumps(names)], timeout=60,
                     env=env).stdout
        learned = json.loads(out)
        ports = learned["ports"]
        print("learned", learned)
        assert set(ports) == {"s0", "s1"} and None not in ports.values(), learned
        server = n.popen("h1_0", py + [SERVER], stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout.readline().strip() == "ready"
            for spine, port in ports.items():
                down = {s: f"{s}-eth{f.ports_to(s, 'l1')[0]}" for s in ("s0", "s1")}
                before = {s: n.tx_bytes(s, i) for s, i in down.items()}
                n.exec("h0_0", py + [CLIENT, src, str(port), dst], timeout=30)
                after = {s: n.tx_bytes(s, i) - before[s] for s, i in down.items()}
                print(spine, port, after)
                other = "s1" if spine == "s0" else "s0"
                assert after[spine] >= SENT, (spine, port, after)
                assert after[other] < SENT // 20, (spine, port, after)
        finally:
            server.kill()
            server.wait(10)
