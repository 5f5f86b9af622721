"""Bulk TCP transfers between Mininet hosts with exact byte counts, and the bytes every directed
switch link carried (port counters): what the fat-tree's tests and benchmark measure with.

A sink counts what it received until the sender closes; iperf3 is not used because ``-n`` ends
its test once the sender has written the bytes, before those in flight arrive (measured: the
receiver counted 2.08 of 3 MB).
"""
from __future__ import annotations

import subprocess
import sys
import time

from emulation.harness import ovs


def link_bytes(f) -> dict[str, int]:
    """tx bytes of every directed switch link a->b (a's port towards b; member m > 0 of a
    bundle as a->b#m, as ``ClosLinks.names``)."""
    out = {}
    for sw in f.switches():
        ports = ovs.port_bytes(sw)
        for peer in f.ports[sw]:
            if peer in f.dpids:
                for m, port in enumerate(f.ports_to(sw, peer)):
                    out[f"{sw}->{peer}" + (f"#{m}" if m else "")] = ports.get(port, {}).get("tx", 0)
    return out


SINK = """import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", int(sys.argv[1]))); s.listen(1); c, _ = s.accept(); n = 0
while (b := c.recv(1 << 20)):
    n += len(b)
print(n, time.time())"""
SOURCE = """import socket, sys, time
for _ in range(100):
    try:
        c = socket.socket(); c.settimeout(30)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        c.bind(("", int(sys.argv[5]))); c.connect((sys.argv[1], int(sys.argv[2]))); break
    except OSError:
        c.close(); time.sleep(0.1)
time.sleep(max(0.0, float(sys.argv[4]) - time.time()))
c.sendall(bytes(int(sys.argv[3]))); c.shutdown(socket.SHUT_WR); c.recv(1)"""


def send(net, f, routes, payload: int, port: int = 5401, timeout: float = 120) -> float:
    """Every route's source sends ``payload`` bytes over TCP to its destination (route i on
    port ``port`` + i, from the route's ``sport`` when it has one, as host mode chooses it, else
    any; to the route's ``dst_ip`` when it names one, as on a fabric of several planes, whose
    hosts pick the plane by address), all starting at one moment, connections already open (as
    the flows of a collective step start together); returns the seconds from that moment until the last
    byte arrived (the hosts share the machine's clock)."""
    sinks, sources = [], []
    start_at = time.time() + 0.5 + 0.1 * len(routes)  # every source connected by then
    try:
        for i, r in enumerate(routes):
            sinks.append(net.get(r["dst"]).popen([sys.executable, "-c", SINK, str(port + i)],
                                                 stdout=subprocess.PIPE, text=True))
        for i, r in enumerate(routes):
            dst = r.get("dst_ip") or f.host_ip[r["dst"]]
            sources.append(net.get(r["src"]).popen(
                [sys.executable, "-c", SOURCE, dst, str(port + i),
                 str(payload), repr(start_at), str(r.get("sport") or 0)],
                stderr=subprocess.PIPE, text=True))
        ends = []
        for p in sinks:
            out, _ = p.communicate(timeout=timeout)
            n, _, end = out.strip().partition(" ")
            if n != str(payload):
                raise RuntimeError(f"a sink counted {out.strip()!r} bytes, not {payload}")
            ends.append(float(end))
        for p in sources:
            if p.wait(timeout=30) != 0:
                raise RuntimeError(f"a source failed: {p.stderr.read()}")
        return max(ends) - start_at
    finally:
        for p in sinks + sources:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=5)


def step(net, f, routes, payload: int, port: int = 5401) -> tuple[float, dict[str, int]]:
    """``send`` the routes' flows, then the bytes every directed switch link carried meanwhile
    (flow counters settled first): (seconds, {"a->b": bytes})."""
    before = link_bytes(f)
    seconds = send(net, f, routes, payload, port=port)
    ovs.settle_counters(f.switches())
    after = link_bytes(f)
    return seconds, {k: after[k] - before[k] for k in after}


def planned_links(routes) -> dict[str, int]:
    """Flows per directed switch link ("a->b"; "a->b#m" for member m > 0 of a bundle, when
    the route names its ``members``) of routes that give their ``path``."""
    out: dict[str, int] = {}
    for r in routes:
        members = r.get("members") or [0] * (len(r["path"]) - 1)
        for (a, b), m in zip(zip(r["path"], r["path"][1:]), members):
            link = f"{a}->{b}" + (f"#{m}" if m else "")
            out[link] = out.get(link, 0) + 1
    return out
