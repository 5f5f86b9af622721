"""The probes' class goes first (``srv6_config.priority_tc``, what the router emulation puts on
its shaped links and the router page tells operators to do): in two network namespaces of
their own, a link shaped at 5 Mbit/s with a 0.2 s FIFO kept full by a TCP flow; pings marked
DSCP 48 come back within a few milliseconds, unmarked ones wait behind the FIFO. Without the
class, a queue like this delayed the agents' 10 ms probes into false failures (issue 75)."""
import os
import statistics
import subprocess
import sys
import time
import uuid

import pytest

from controller.enforcement.srv6_config import PROBE_DSCP, priority_tc

pytestmark = pytest.mark.integration

RATE = 5  # Mbit/s
SINK = ("import socket; s = socket.socket(); s.bind(('10.9.0.2', 5999)); s.listen(1); "
        "c, _ = s.accept()\nwhile c.recv(65536): pass")
SOURCE = ("import socket, time; c = socket.socket(); "  # cubic fills a FIFO (bbr would not)
          "c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b'cubic'); "
          "c.connect(('10.9.0.2', 5999)); end = time.time() + 8\n"
          "while time.time() < end: c.sendall(bytes(65536))")


def _rtts(ns: str, tos: int) -> list[float]:
    out = subprocess.run(["ip", "netns", "exec", ns, "ping", "-n", "-c", "15", "-i", "0.1",
                          "-W", "2", "-Q", str(tos), "10.9.0.2"], capture_output=True,
                         text=True, timeout=30).stdout
    return [float(w.split("=")[1]) for w in out.split() if w.startswith("time=")]


@pytest.fixture
def shaped_pair():
    """Two namespaces of their own, a veth between them, its side ``pa`` (10.9.0.1) shaped by
    ``priority_tc`` at 5 Mbit/s with a 0.2 s FIFO, a sink at 10.9.0.2 and a CUBIC flow into it
    for 8 s: yields (namespace of pa, the processes' list)."""
    a, b = (f"mlr-prio-{uuid.uuid4().hex[:6]}-{x}" for x in "ab")
    procs = []
    try:
        for cmd in ([["ip", "netns", "add", a], ["ip", "netns", "add", b],
                     ["ip", "link", "add", "pa", "netns", a, "type", "veth", "peer", "pb",
                      "netns", b]]):
            subprocess.run(cmd, check=True)
        for ns, dev, ip in ((a, "pa", "10.9.0.1"), (b, "pb", "10.9.0.2")):
            subprocess.run(["ip", "netns", "exec", ns, "sh", "-c",
                            f"ip addr add {ip}/24 dev {dev} && ip link set {dev} up && "
                            f"ethtool -K {dev} tso off gso off >/dev/null 2>&1"], check=True)
        lines = priority_tc("pa", PROBE_DSCP, RATE, 125_000)  # 0.2 s of 5 Mbit/s
        subprocess.run(["ip", "netns", "exec", a, "tc", "-batch", "-"], check=True, text=True,
                       input="\n".join(lines) + "\n", capture_output=True)
        procs.append(subprocess.Popen(["ip", "netns", "exec", b, sys.executable, "-c", SINK]))
        time.sleep(0.5)
        procs.append(subprocess.Popen(["ip", "netns", "exec", a, sys.executable, "-c", SOURCE]))
        yield a, procs
    finally:
        for p in procs:
            p.kill()
            p.wait(10)
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], check=False)


def _backlog(ns: str) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, "tc", "-s", "qdisc", "show", "dev", "pa"],
                          capture_output=True, text=True, timeout=10).stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_marked_probes_skip_a_full_fifo(shaped_pair):
    a, _ = shaped_pair
    time.sleep(2)  # the FIFO fills
    marked, plain = _rtts(a, PROBE_DSCP << 2), _rtts(a, 0)
    backlog = _backlog(a)
    assert len(marked) >= 12 and len(plain) >= 5, (marked, plain, backlog)
    assert statistics.median(plain) > 60, (plain, backlog)  # behind the FIFO
    assert statistics.median(marked) < 15, (marked, plain, backlog)  # one packet at most


def _sent(ns: str) -> tuple[float, int, int]:
    """(when, bytes the port sent, bytes of them in the probes' class 5:10)."""
    out = subprocess.run(["ip", "netns", "exec", ns, "tc", "-s", "class", "show", "dev", "pa"],
                         capture_output=True, text=True, timeout=10).stdout
    sent = {blk.split()[0]: int(blk.split("Sent ")[1].split()[0])
            for blk in out.split("class htb ")[1:]}
    return time.monotonic(), sent["5:1"], sent["5:10"]


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_probes_take_no_rate_from_the_data(shaped_pair):
    """The data keep the whole emulated rate while marked packets flow at about 4% of it (on
    a real 100-400 Gbit/s port the agents' probes are a few millionths of its rate): when
    the probes' class shared the 5 Mbit/s, the flow got what the probes left."""
    a, procs = shaped_pair
    procs.append(subprocess.Popen(["ip", "netns", "exec", a, "ping", "-n", "-q", "-i", "0.01",
                                   "-s", "400", "-Q", str(PROBE_DSCP << 2), "-w", "7",
                                   "10.9.0.2"], stdout=subprocess.DEVNULL))
    time.sleep(2)  # the FIFO fills
    t0, all0, probes0 = _sent(a)
    time.sleep(4)
    t1, all1, probes1 = _sent(a)
    probes = (probes1 - probes0) * 8 / (t1 - t0) / 1e6  # Mbit/s
    data = (all1 - all0) * 8 / (t1 - t0) / 1e6 - probes
    assert probes > 0.03 * RATE, (probes, _backlog(a))  # the marked flow ran
    assert data > 0.985 * RATE, (data, probes, _backlog(a))
