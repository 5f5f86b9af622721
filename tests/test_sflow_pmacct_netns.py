"""sFlow from Linux routers in srv6 mode, on real kernels: pmacct's ``pmacctd`` with its
``sfprobe`` plugin samples every port of every router of a 2 x 2 leaf-spine in bare network
namespaces (``emulation/harness/netns_routers.py``: the configuration ``mlroute srv6-config``
writes; no Mininet or Open vSwitch), ingress only, and exports sFlow v5 over a management link
to the controller's collector. The host pushes SRv6 (a uSID container through one spine, an SRH
of classic SIDs through the other), so the routers sample IPv6 packets: the decoder attributes
them to the inner IPv4 pair and ports, each spine sees only the flow steered through it, and the
learner's estimate (3 sampling points a packet: ``--mlroute-sflow-sampling-points all``) matches
the bytes the host sent.

Needs root, iproute2 and pmacct (``apt-get install pmacct``, ``make system``); skipped
otherwise. Namespaces are named ``pm-<pid>-<node>`` and deleted at the end."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from controller.enforcement.srv6 import SidPlan, segments
from controller.enforcement.srv6_config import router_ips
from controller.measurement.learner import TrafficLearner, clos_samplers
from controller.measurement.sflow import PacketSample
from controller.model.clos import Clos
from controller.model.clos_wiring import wire
from emulation.harness.netns_routers import NetnsRouters

# extended: make test's budget; the router emulation's sFlow runs in test_srv6_live.py (extended
# too), the decoder's encapsulations in test_sflow.py (every tier)
pytestmark = [pytest.mark.integration, pytest.mark.extended, pytest.mark.timeout(300)]

RATE = 10  # 1 in 10 packets sampled
SPORTS = {"s0": 40001, "s1": 40002}  # the flow steered through each spine
SENT = 3_000_000  # bytes per flow
PACING = 3_000_000  # bytes/s per flow (SO_MAX_PACING_RATE): pmacctd's capture keeps up
TOLERANCE = 0.15  # of the bytes on the wire: 1-in-10 sampling over ~2,000 packets a flow

# Every router's pmacctd: its fabric ports from a map, each sampled on ingress only (a packet
# is then sampled once per router it enters), ifIndex from the map (the kernel's), sFlow to the
# collector over the management link, the router's loopback as the agent address.
PMACCTD_CONF = """\
daemonize: false
pcap_interfaces_map: {map}
pcap_ifindex: map
plugins: sfprobe
sampling_rate: {rate}
sfprobe_receiver: {collector}:6343
sfprobe_agentip: {agent}
"""

COLLECTOR = """
import json, sys
from controller.measurement.sflow import SenderFilter, SflowCollector
got = []
c = SflowCollector("0.0.0.0", 6343, on_samples=got.extend, allow=SenderFilter("172.31.0.0/16"))
c.start()
print("ready", flush=True)
sys.stdin.read()
c.stop()
print(json.dumps({"stats": c.stats(), "samples": [list(s) for s in got]}))
"""
SERVER = """
import socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5201)); s.listen(4); print("ready", flush=True)
def drain(c):
    while c.recv(65536):
        pass
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=drain, args=(c,), daemon=True).start()
"""
CLIENT = """
import socket, sys, threading
src, dst, sent, pacing = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def send(sport):
    c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    c.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_MAX_PACING_RATE", 47), pacing)
    c.bind((src, sport)); c.settimeout(30)
    c.connect((dst, 5201)); c.sendall(b"x" * sent); c.close()
ts = [threading.Thread(target=send, args=(int(p),)) for p in sys.argv[5:]]
[t.start() for t in ts]; [t.join() for t in ts]
"""


def _ports(n: NetnsRouters, node: str) -> dict[str, int]:
    """A node's fabric interfaces and their ifIndex (not lo, not the management link)."""
    links = json.loads(n.exec(node, ["ip", "-j", "link", "show"]).stdout)
    return {x["ifname"]: x["ifindex"] for x in links if x["ifname"] not in ("lo", "mgmt0")}


def _tx(n: NetnsRouters, node: str, ifname: str) -> int:
    """Bytes sent on ``ifname`` as sFlow counts frames (with the 4-byte FCS)."""
    out = n.exec(node, ["ip", "-j", "-s", "link", "show", ifname]).stdout
    tx = json.loads(out)[0]["stats64"]["tx"]
    return tx["bytes"] + 4 * tx["packets"]


def _stop(proc: subprocess.Popen) -> None:
    """End a pmacctd (``ip netns exec`` execs it: its core process) and its plugin processes."""
    if proc.poll() is not None:
        return
    try:
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as fh:
            children = [int(x) for x in fh.read().split()]
    except OSError:
        children = []
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    for pid in children:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _cpu_ticks(proc: subprocess.Popen) -> int:
    """User and system clock ticks of a pmacctd's core and plugin processes so far."""
    total = 0
    try:
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as fh:
            pids = [proc.pid] + [int(x) for x in fh.read().split()]
    except OSError:
        return 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total


def test_pmacctd_sflow_from_srv6_routers_names_the_inner_hosts_and_counts_their_bytes(tmp_path):
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 (ip netns)")
    if shutil.which("ethtool") is None:
        pytest.skip("needs ethtool (segmentation offload off on the host)")
    if shutil.which("pmacctd") is None:
        pytest.skip("pmacctd is not installed (apt-get install pmacct, or make system)")
    c = Clos.leaf_spine(2, 2, 1)
    f = c.wire(wire(c))
    plan = SidPlan.of(f)
    h0, h1 = "h0_0", "h1_0"
    src, dst = f.ip_of(h0), f.ip_of(h1)
    routers = sorted(f.dpids)
    py = [sys.executable, "-c"]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    n = NetnsRouters(f)
    n.prefix = f"pm-{os.getpid()}-"
    pmacctds: dict[str, subprocess.Popen] = {}
    procs: list[subprocess.Popen] = []
    with n:
        # a management namespace with the collector, one link to each router (as hosts have)
        subprocess.run(["ip", "netns", "add", n.ns("mgmt")], check=True)
        n.made.append("mgmt")
        subprocess.run(["ip", "-n", n.ns("mgmt"), "link", "set", "lo", "up"], check=True)
        for i, r in enumerate(routers):
            subprocess.run(["ip", "link", "add", "mgmt0", "netns", n.ns(r), "type", "veth",
                            "peer", "name", f"m{i}", "netns", n.ns("mgmt")], check=True)
            n.exec(r, ["ip", "addr", "add", f"172.31.{i}.1/30", "dev", "mgmt0"])
            n.exec(r, ["ip", "link", "set", "mgmt0", "up"])
            n.exec("mgmt", ["ip", "addr", "add", f"172.31.{i}.2/30", "dev", f"m{i}"])
            n.exec("mgmt", ["ip", "link", "set", f"m{i}", "up"])
        # the host steers one flow per spine, as its agent does: a table per part, a rule
        container = segments(plan, ["l0", "s0", "l1"], None, h1)  # uSID container
        classic = segments(plan, ["l0", "s1", "l1"], None, h1, classic=True)  # SRH
        assert (container.form, classic.form) == ("usid", "classic")
        for table, (spine, seg, mode) in enumerate([("s0", container, "encap.red"),
                                                     ("s1", classic, "encap")], start=100):
            n.exec(h0, ["ip", "route", "replace", f"{dst}/32", "encap", "seg6", "mode", mode,
                        "segs", ",".join(seg.sids), "dev", f"{h0}-eth0", "table", str(table)])
            n.exec(h0, ["ip", "rule", "add", "to", dst, "ipproto", "tcp", "sport",
                        str(SPORTS[spine]), "table", str(table)])
        # no segmentation offload, as the emulation's hosts (topologies/routers.SrHost): a
        # 64 kB GSO packet would cross the veths whole and be sampled as one frame
        n.exec(h0, ["ethtool", "-K", f"{h0}-eth0", "tso", "off", "gso", "off"])
        ports = {r: _ports(n, r) for r in routers}
        agents = router_ips(f)
        try:
            collector = n.popen("mgmt", py + [COLLECTOR], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, env=env)
            procs.append(collector)
            assert collector.stdout.readline().strip() == "ready"
            for i, r in enumerate(routers):
                mp = tmp_path / f"{r}.map"
                mp.write_text("".join(f"ifindex={x} ifname={name} direction=in\n"
                                      for name, x in sorted(ports[r].items())))
                conf = tmp_path / f"{r}.conf"
                conf.write_text(PMACCTD_CONF.format(map=mp, rate=RATE, agent=agents[r],
                                                    collector=f"172.31.{i}.2"))
                log = open(tmp_path / f"{r}.log", "w")
                pmacctds[r] = n.popen(r, ["pmacctd", "-f", str(conf)], stdout=log,
                                      stderr=subprocess.STDOUT)
                log.close()
            deadline = time.monotonic() + 20
            while not all("Exporting flows" in (tmp_path / f"{r}.log").read_text()
                          for r in routers):
                assert time.monotonic() < deadline, {
                    r: (tmp_path / f"{r}.log").read_text()[-500:] for r in routers}
                assert all(p.poll() is None for p in pmacctds.values()), {
                    r: (tmp_path / f"{r}.log").read_text()[-500:] for r in routers}
                time.sleep(0.2)
            time.sleep(1)  # the core opens its captures before the plugin says it exports
            server = n.popen(h1, py + [SERVER], stdout=subprocess.PIPE, text=True)
            procs.append(server)
            assert server.stdout.readline().strip() == "ready"
            ticks0 = {r: _cpu_ticks(p) for r, p in pmacctds.items()}
            wire0 = _tx(n, h0, f"{h0}-eth0")
            t0 = time.monotonic()
            n.exec(h0, py + [CLIENT, src, dst, str(SENT), str(PACING),
                             *map(str, SPORTS.values())], timeout=60)
            last, on_wire = -1, _tx(n, h0, f"{h0}-eth0") - wire0
            while on_wire != last:  # the sockets' last bytes leave after close()
                time.sleep(0.5)
                last, on_wire = on_wire, _tx(n, h0, f"{h0}-eth0") - wire0
            elapsed = time.monotonic() - t0
            time.sleep(2)  # sfprobe sends what it holds every second
            ticks = {r: _cpu_ticks(p) - ticks0[r] for r, p in pmacctds.items()}
            for p in pmacctds.values():
                _stop(p)
            out, _ = collector.communicate("", timeout=30)
        finally:
            for p in list(pmacctds.values()):
                _stop(p)
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait(10)
        logs = {r: (tmp_path / f"{r}.log").read_text() for r in routers}
    got = json.loads(out)
    samples = [PacketSample(*s[:16], tuple(s[16]), s[17]) for s in got["samples"]]
    print("collector", got["stats"], "samples", len(samples), "pmacctd ticks", ticks,
          f"in {elapsed:.1f} s", "bytes on the wire", on_wire, "largest frame",
          max(s.frame_length for s in samples))
    assert got["stats"]["errors"] == 0 and got["stats"]["rejected"] == 0, got["stats"]
    by_agent = {r: [s for s in samples if s.agent == agents[r]] for r in routers}
    assert all(by_agent.values()), {r: len(v) for r, v in by_agent.items()}
    for r, mine in by_agent.items():
        # ingress only: each sample names the port it entered by, none a port it left by
        assert {s.input_if for s in mine} <= set(ports[r].values()), (r, logs[r][-800:])
        assert {s.output_if for s in mine} == {None}, r
        assert {s.sampling_rate for s in mine} == {RATE}, r
    data = [s for s in samples if s.frame_length >= 1000]
    assert data, got["stats"]
    # every data packet, IPv6-encapsulated on the way, is named by its inner IPv4 pair and ports
    assert {(s.src, s.dst, s.proto, s.dport) for s in data} == {(src, dst, 6, 5201)}, \
        {(s.agent, s.src, s.dst, s.frame_length) for s in data if s.src != src}
    # each spine carried only the flow steered through it: the container's, the SRH's
    for spine, sport in SPORTS.items():
        assert {s.sport for s in data if s.agent == agents[spine]} == {sport}, spine
    # the source leaf sampled both flows as they entered from the host
    host_port = ports["l0"][f"l0-eth{f.port('l0', h0)}"]
    assert {s.sport for s in data if s.input_if == host_port} == set(SPORTS.values())
    # the learner, 3 sampling points a packet (leaf, spine, leaf), estimates the bytes sent
    learner = TrafficLearner(10.0, samplers=clos_samplers({h0: "l0", h1: "l1"}, "all"))
    learner.observe(samples, 1.0)
    estimate = learner.window_pairs(11.0)[(src, dst)]
    print(f"estimate {estimate:.0f} bytes, on the wire {on_wire}: "
          f"{estimate / on_wire - 1:+.1%}")
    assert abs(estimate / on_wire - 1) < TOLERANCE, (estimate, on_wire)
