"""Shared by the integration tests: skip without root or Open vSwitch, and the running emulation
(real ryu-manager with mlroute, Mininet fabric of Open vSwitch switches, 2 spines x 4 leaves x 2
hosts by default)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

import pytest

from controller.client import Client
from emulation.harness.session import Session

SPINES, LEAVES, HOSTS = 2, 4, 2


def require_root_and_ovs():
    if os.geteuid() != 0:
        pytest.skip("integration tests need root")
    for tool in ("ovs-vsctl", "mnexec", "ovs-ofctl"):
        if shutil.which(tool) is None:
            pytest.skip(f"integration tests need {tool} (make system)")


def default_session(tmp, bw=0.0, mode="flow", state=False,
                    stats_interval=0.2) -> Session:
    """The default emulation of the integration tests, in ``tmp``. Statistics are polled often
    so that their replies race with rule installation, as they would under load."""
    return Session(SPINES, LEAVES, HOSTS, bw, str(tmp), mode=mode, state=state,
                   extra_args=["--mlroute-stats-interval", str(stats_interval)])


def metric(url: str, name: str, timeout: float = 15.0) -> tuple[float | None, str]:
    """The value of one sample of a controller's /metrics page (None if absent), and the page."""
    page = Client(url, timeout=timeout).metrics()
    m = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", page, re.M)
    return (float(m.group(1)) if m else None), page


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def processes(*texts: str) -> list[tuple[int, str]]:
    """Live processes (not this one) whose command line contains any of ``texts``."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(t in cmd for t in texts) and alive(int(d)):
            out.append((int(d), cmd))
    return out


def iperf_ring(net, fabric, ring: list[str], seconds: float, port: int = 5301) -> None:
    """iperf3 from every rank of ``ring`` to rank - 1 (the direction gloo's ring sends) for
    ``seconds`` at 4 Mbit/s each; returns when done, every process stopped."""
    servers, clients = [], []
    try:
        for h in ring:
            servers.append(net.get(h).popen(["iperf3", "-s", "-1", "-p", str(port)],
                                            stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
        time.sleep(0.5)
        for i, h in enumerate(ring):
            clients.append(net.get(h).popen(
                ["iperf3", "-c", fabric.host_ip[ring[i - 1]], "-p", str(port), "-t",
                 str(seconds), "-b", "4M"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL))
        for c in clients:
            c.wait(timeout=seconds + 20)
    finally:
        for p in clients + servers:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=5)
