"""Shared by the integration tests: skip without root or Open vSwitch, and the running emulation
(real ryu-manager with mlroute, Mininet fabric of Open vSwitch switches, 2 spines x 4 leaves x 2
hosts by default)."""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time

import pytest

from controller.client import Client
from emulation.harness import fabricnet
from emulation.harness.ovs import entry_ages
from emulation.harness.session import Session
from emulation.harness.transfers import planned_links, step
from emulation.harness.zeroconfig import without_a_file
from tests.helpers import alive

SPINES, LEAVES, HOSTS = 2, 4, 2
# A further live case of a capability that a test of `make test` already proves on the same
# shape (another library, mode, variant or sequence): `make test-live` runs it, `make test` not.
EXTENDED = pytest.mark.extended


def ext(*values, **kw):
    """A ``parametrize`` value that only ``make test-live`` runs (marked ``extended``)."""
    return pytest.param(*values, marks=EXTENDED, **kw)


def gloo_only_in_make_test(libraries):
    """``libraries`` for ``parametrize``: gloo in every tier, the others in ``make test-live``."""
    return [lib if lib == "gloo" else ext(lib) for lib in libraries]


def require_root_and_ovs():
    if os.geteuid() != 0:
        pytest.skip("integration tests need root")
    for tool in ("ovs-vsctl", "mnexec", "ovs-ofctl"):
        if shutil.which(tool) is None:
            pytest.skip(f"integration tests need {tool} (make system)")


@contextlib.contextmanager
def ha_session(tmp_path_factory, name: str, shape: tuple, bw: float, **kw):
    """A private etcd and redundant controllers on an emulation (``ha.HaSession(*shape, bw,
    ..., **kw)``) in a temporary folder ``name``; skipped without root, Open vSwitch or etcd.
    The session's ``etcd`` is the server (tests stop and freeze it)."""
    from emulation.harness.ha import ETCD, EtcdServer, HaSession
    require_root_and_ovs()
    if not os.path.exists(ETCD):
        pytest.skip("etcd is not installed (apt-get install etcd-server)")
    tmp = str(tmp_path_factory.mktemp(name))
    with EtcdServer(tmp) as etcd, HaSession(*shape, bw, tmp, etcd.url, **kw) as s:
        s.etcd = etcd
        yield s


def default_session(tmp, bw=0.0, mode="flow", state=False,
                    stats_interval=0.2) -> Session:
    """The default emulation of the integration tests, in ``tmp``. Statistics are polled often
    so that their replies race with rule installation, as they would under load."""
    return Session(SPINES, LEAVES, HOSTS, bw, str(tmp), mode=mode, state=state,
                   extra_args=["--mlroute-stats-interval", str(stats_interval)])


@contextlib.contextmanager
def discovering(tmp: str, truth, bw: float):
    """ryu-manager with no fabric file in front of the emulated ``truth`` (a wired Clos), its
    switches connected and shaped to ``bw`` Mbit/s: (controller, Mininet), both stopped on the
    way out (``emulation.harness.zeroconfig.without_a_file``); skipped without root or OVS."""
    require_root_and_ovs()
    with without_a_file(tmp, truth, bw) as (ctl, net):
        yield ctl, net


def discovered(ctl, truth, what: str = "the fabric discovered") -> dict:
    """The fabric view once the controller discovered exactly ``truth`` (90 s at most)."""
    def found():
        view = ctl.rest("GET", "/v1/fabric", timeout=15)[1]
        return view if view.get("ready") and view.get("declared") == truth.to_dict() else None
    return fabricnet.wait_until(found, 90, interval=1.0, what=what)


@contextlib.contextmanager
def alltoall_by_address(ctl, truth, plane: int = 1, jid: str = "a2a"):
    """An all-to-all of ``truth``'s hosts named by their addresses in ``plane`` (the planner
    picks each flow's plane): posted (201), its routes yielded, deleted on the way out."""
    hosts = sorted(truth.host_leaves)
    job = {"id": jid, "flows": [{"src": truth.ip_of(a, plane), "dst": truth.ip_of(b, plane),
                                 "bytes": 4e6} for a in hosts for b in hosts if a != b]}
    code, doc = ctl.rest("POST", "/v1/jobs", job)
    assert code == 201, doc
    try:
        yield ctl.rest("GET", f"/v1/jobs/{jid}")[1]["routes"]
    finally:
        ctl.rest("DELETE", f"/v1/jobs/{jid}")


def metric(url: str, name: str, timeout: float = 15.0) -> tuple[float | None, str]:
    """The value of one sample of a controller's /metrics page (None if absent), and the page."""
    page = Client(url, timeout=timeout).metrics()
    m = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", page, re.M)
    return (float(m.group(1)) if m else None), page


def carried_as_planned(net, fabric, routes, payload: int) -> dict:
    """Send ``payload`` bytes on every route (``transfers.step``) and check that every directed
    switch link carried what the routes' paths put on it: data frames carry 0.7% headers,
    and a link may also carry ACKs of flows going the other way (a few percent of a payload
    at most). Returns the bytes per link."""
    _, got = step(net, fabric, routes, payload)
    plan = planned_links(routes)
    wrong = {link: (n, plan.get(link, 0) * payload) for link, n in got.items()
             if not plan.get(link, 0) * payload * 0.99 <= n <= (plan.get(link, 0) + 0.05)
             * payload}
    assert not wrong, (wrong, routes)
    return got


def restart_changes_nothing(emu, log: str = "controller-restart.log") -> None:
    """Restart the session's controller from its state file: every entry of every switch is
    the one it had and kept ageing (never re-added), and no OpenFlow message was sent."""
    switches = emu.fabric.switches()
    before = {sw: entry_ages(sw) for sw in switches}
    t0 = time.monotonic()
    emu.restart_controller(log=log)
    elapsed = time.monotonic() - t0
    after = {sw: entry_ages(sw) for sw in switches}
    for sw in switches:
        assert set(after[sw]) == set(before[sw]), sw
        for key, (age, _packets) in after[sw].items():
            assert age >= before[sw][key][0] + elapsed - 1.5, (sw, key)  # never re-added
    assert metric(emu.ctl.url, "mlroute_openflow_messages_total")[0] == 0


def _owner(pid: int) -> str | None:
    """The harness owner token in a process's environment (``owned.ENV``), None without."""
    from emulation.harness.owned import ENV
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read().split(b"\0")
    except OSError:
        return None
    mark = f"{ENV}=".encode()
    return next((e[len(mark):].decode(errors="replace") for e in env if e.startswith(mark)),
                None)


def processes(*texts: str, tokens=None) -> list[tuple[int, str]]:
    """Live processes (not this one) whose command line contains any of ``texts``; with
    ``tokens``, only those whose environment marks them as made by one of these harness owners
    (``owned``: ``MLROUTE_EMULATION``), never another run's on the machine."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(t in cmd for t in texts) and alive(int(d)) and (
                tokens is None or _owner(int(d)) in tokens):
            out.append((int(d), cmd))
    return out


def iperf_ring(net, fabric, ring: list[str], seconds: float, port: int = 5301,
               plane: int = 0, until=None) -> None:
    """iperf3 from every rank of ``ring`` to rank - 1 (the direction gloo's ring sends) for
    ``seconds`` at 4 Mbit/s each, to the ranks' addresses on ``plane``; returns when done,
    every process stopped. ``until``: a condition polled every 0.25 s meanwhile; the traffic
    stops as soon as it holds (the shortest traffic that proves the point)."""
    servers, clients = [], []
    try:
        for h in ring:
            servers.append(net.get(h).popen(["iperf3", "-s", "-1", "-p", str(port)],
                                            stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
        time.sleep(0.5)
        for i, h in enumerate(ring):
            clients.append(net.get(h).popen(
                ["iperf3", "-c", fabric.ip_of(ring[i - 1], plane), "-p", str(port), "-t",
                 str(seconds), "-b", "4M"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + seconds + 20
        while any(c.poll() is None for c in clients):
            if until is not None and until():
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"iperf3 clients of the ring still running after "
                                   f"{seconds + 20:g} s")
            time.sleep(0.25)
    finally:
        for p in clients + servers:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=5)
