"""sFlow from real Open vSwitch 3.1 (userspace datapath) into the real collector and learner:
samples name the right hosts, switches and MPLS labels, the byte estimate matches the switch's
own port counters, the pattern of a running transfer is learned, and ``mn --custom
topologies/clos.py`` turns sampling on as documented. Run under the OVS lock:
``flock /work/ovs.lock timeout 1200 .venv/bin/python -m pytest -q tests/test_sflow_live.py``."""
import json
import os
import subprocess
import threading
import time

import pytest

from controller.measurement.estimate import MatrixEstimate
from controller.measurement.learner import TrafficLearner, clos_samplers
from controller.measurement.sflow import SflowCollector
from emulation.harness import fabricnet
from emulation.harness.ovs import port_bytes
from tests.integration import EXTENDED, require_root_and_ovs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

CLOS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "topologies",
                    "clos.py")
BW = 20  # Mbit/s, as the emulation's links
TOLERANCE = 0.12  # of the real bytes: sampling error (~3% here) and samples ovs-vswitchd drops


class Recorder:
    """Collector callback: every sample with its arrival time, and the learner fed live."""

    def __init__(self, learner):
        self.learner = learner
        self.lock = threading.Lock()
        self.samples = []

    def __call__(self, samples):
        now = time.monotonic()
        with self.lock:
            self.samples += samples
        self.learner.observe(samples, now)

    def mark(self):
        with self.lock:
            return len(self.samples)

    def since(self, mark):
        with self.lock:
            return list(self.samples[mark:])


def _frames(bridge, port):
    """Bytes of the frames a port received, counted as sFlow counts them (with the 4-byte FCS)."""
    c = port_bytes(bridge)[port]
    return c["rx"] + 4 * c["rx_pkts"]


def _iperf(client, server_ip, seconds):
    return client.popen(["iperf3", "-c", server_ip, "-t", str(seconds), "-J",
                         "--connect-timeout", "5000"], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)


def _run_transfer(net, rec, src, dst, bridge, port, seconds=5):
    """iperf3 src -> dst for ``seconds``; the pair's matrix estimated 3.5 s in (every closed
    window folded, ``measurement.estimate``), the samples and the real frame bytes from the
    source's switch port over the transfer."""
    dst.cmd("iperf3 -s -1 -D")
    time.sleep(0.5)
    before, mark = _frames(bridge, port), rec.mark()
    proc = _iperf(src, dst.IP(), seconds)
    try:
        time.sleep(3.5)
        pattern = MatrixEstimate()
        ends = {src.IP(), dst.IP()}
        for w in rec.learner.closed(-1, time.monotonic()):
            b = {p: v for p, v in w.bytes.items() if set(p) <= ends}
            pattern.fold(b, {p: w.samples[p] for p in b})
        out, err = proc.communicate(timeout=seconds + 30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert json.loads(out)["end"]["sum_received"]["bytes"] > 1e6
    time.sleep(2.0)  # OVS sends a datagram when it is full or once a second
    return pattern, rec.since(mark), _frames(bridge, port) - before


def _estimate(samples, src, dst, k):
    return sum(s.frame_length * s.sampling_rate for s in samples
               if (s.src, s.dst) == (src, dst)) / k


@pytest.fixture
def collector():
    require_root_and_ovs()
    from mininet.log import setLogLevel
    setLogLevel("critical")  # not HTB's quantum warnings
    fabricnet.ensure_ovs()
    fabricnet.cleanup()
    made = []

    def make(learner):
        rec = Recorder(learner)
        c = SflowCollector("127.0.0.1", 0, rec).start()
        made.append(c)
        return c, rec
    yield make
    for c in made:
        assert c.stop()
    fabricnet.cleanup()


def test_clos_fabric_samples_at_every_switch_and_estimate_matches_counters(collector,
                                                                           monkeypatch):
    """The topology's own switches (1 spine, 2 leaves, a host each; a tree, so NORMAL
    forwarding is loop-free): every switch samples with its own agent address, the learner
    divides by the 3 sampling switches of a cross-leaf path, and the estimate of h0_0 -> h1_0
    is within TOLERANCE of the frames leaf l0 received from h0_0."""
    from mininet.net import Mininet

    from topologies.clos import ClosTopo, clos_fabric
    fabric = clos_fabric(1, 2, 1, BW)
    leaf_of = {fabric.address(h): fabric.leaf_of(h) for h in fabric.hosts}
    learner = TrafficLearner(window_s=1.0, samplers=clos_samplers(leaf_of))
    c, rec = collector(learner)
    monkeypatch.setenv("MLROUTE_SFLOW_TARGET", f"127.0.0.1:{c.address[1]}")
    net = Mininet(topo=ClosTopo(1, 2, 1, bw=BW, sflow=16), controller=None)
    try:
        net.start()
        for sw in net.switches:
            sw.cmd(f"ovs-ofctl -O OpenFlow13 add-flow {sw.name} actions=NORMAL")
        net.staticArp()
        h0, h1 = net.get("h0_0", "h1_0")
        pattern, samples, real = _run_transfer(net, rec, h0, h1, "l0",
                                               fabric.port("l0", "h0_0"))
    finally:
        fabricnet.stop(net)
    a, b = fabric.address("h0_0"), fabric.address("h1_0")
    data = [s for s in samples if (s.src, s.dst) == (a, b)]
    assert {s.agent for s in data} == {"127.1.0.0", "127.2.0.0", "127.2.0.1"}
    assert {s.sampling_rate for s in data} == {16} and {s.dport for s in data} == {5201}
    est = _estimate(samples, a, b, 3)
    print(f"clos: {len(data)} samples, estimate {est:.0f} B, real {real} B, "
          f"ratio {est / real:.3f}, collector {c.stats()}")
    assert abs(est - real) <= TOLERANCE * real, (est, real)
    assert pattern.steady, pattern.pairs
    assert set(pattern.matrix()) == {(a, b)}  # the acknowledgements back are not


@EXTENDED  # make test: the Clos fabric's samples above; MPLS decoding in test_sflow.py
def test_mpls_between_switches_is_seen_through(collector):
    """h1 - s1 - s2 - h2 with the switches' traffic between them in MPLS (s1 pushes label
    100, s2 label 200), as segment routing sends leaf to spine: the sample taken at the far
    switch carries the label and still names the hosts."""
    from mininet.link import TCLink
    from mininet.net import Mininet
    from mininet.topo import Topo

    from topologies.clos import ClosHost, ClosSwitch

    learner = TrafficLearner(window_s=1.0, samplers=lambda s, d: 2)
    c, rec = collector(learner)
    target = f"127.0.0.1:{c.address[1]}"

    class Line(Topo):
        def build(self):
            s1 = self.addSwitch("s1", cls=ClosSwitch, dpid="0000000000020001", sflow=16,
                                sflow_collector=target)
            s2 = self.addSwitch("s2", cls=ClosSwitch, dpid="0000000000020002", sflow=16,
                                sflow_collector=target)
            h1 = self.addHost("h1", cls=ClosHost, ip="10.0.0.1/8")
            h2 = self.addHost("h2", cls=ClosHost, ip="10.0.0.2/8")
            self.addLink(h1, s1, port2=1, bw=BW, cls=TCLink)
            self.addLink(s1, s2, port1=2, port2=2, bw=BW, cls=TCLink)
            self.addLink(h2, s2, port2=1, bw=BW, cls=TCLink)

    net = Mininet(topo=Line(), controller=None)
    try:
        net.start()
        for sw, label in (("s1", 100), ("s2", 200)):
            for flow in (f"in_port=1,ip,actions=push_mpls:0x8847,set_field:{label}->mpls_label,"
                         "output:2", "in_port=2,mpls,actions=pop_mpls:0x0800,output:1"):
                out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-flow", sw, flow],
                                     capture_output=True, text=True, timeout=30)
                assert out.returncode == 0, out.stderr
        net.staticArp()
        h1, h2 = net.get("h1", "h2")
        pattern, samples, real = _run_transfer(net, rec, h1, h2, "s1", 1)
    finally:
        fabricnet.stop(net)
    at = {}
    for s in samples:
        if (s.src, s.dst) == ("10.0.0.1", "10.0.0.2"):
            at.setdefault((s.agent, s.mpls), 0)
            at[(s.agent, s.mpls)] += 1
    assert set(at) == {("127.2.0.1", ()), ("127.2.0.2", (100,))}, at
    back = {(s.agent, s.mpls) for s in samples if (s.src, s.dst) == ("10.0.0.2", "10.0.0.1")}
    assert back == {("127.2.0.1", (200,)), ("127.2.0.2", ())}
    est = _estimate(samples, "10.0.0.1", "10.0.0.2", 2)
    print(f"mpls: samples {at}, estimate {est:.0f} B, real {real} B, ratio {est / real:.3f}")
    # at the far switch the frame is 4 bytes longer (the label); under 0.3% of a full frame
    assert abs(est - real) <= TOLERANCE * real, (est, real)
    assert pattern.steady
    assert set(pattern.matrix()) == {("10.0.0.1", "10.0.0.2")}


def _mn_sflow_rows(tmp_path, topo, env=None):
    script = tmp_path / "pre.mn"
    script.write_text("sh ovs-vsctl --format=json --columns=agent,sampling,targets,header,"
                      f"polling list sflow > {tmp_path}/sflow.json\n")
    out = subprocess.run(["mn", "--custom", CLOS, "--topo", topo, "--controller", "none",
                          "--test", "none", "--post", str(script)],
                         capture_output=True, text=True, timeout=180,
                         env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr[-2000:]
    rows = json.loads((tmp_path / "sflow.json").read_text())
    return sorted(rows["data"], key=str)


@pytest.mark.extended  # make test: sampling at every switch of a Clos, above
def test_mn_custom_turns_sflow_on_per_topology_argument_and_environment(tmp_path):
    require_root_and_ovs()
    fabricnet.ensure_ovs()
    fabricnet.cleanup()
    rows = _mn_sflow_rows(tmp_path, "clos,1,2,1,sflow=8")
    assert sorted(r[0] for r in rows) == ["127.1.0.0", "127.2.0.0", "127.2.0.1"]
    assert {(r[1], r[2], r[3], r[4]) for r in rows} == {(8, "127.0.0.1:6343", 128, 0)}
    rows = _mn_sflow_rows(tmp_path, "clos,1,2,1", {"MLROUTE_SFLOW_SAMPLING": "32"})
    assert {r[1] for r in rows} == {32} and len(rows) == 3
    assert _mn_sflow_rows(tmp_path, "clos,1,2,1", {"MLROUTE_SFLOW_SAMPLING": "0"}) == []
    bad = subprocess.run(["mn", "--custom", CLOS, "--topo", "clos,1,2,1,sflow=x",
                          "--controller", "none", "--test", "none"],
                         capture_output=True, text=True, timeout=180)
    assert bad.returncode != 0 or "sFlow sampling must be a whole number" in bad.stderr
    assert "sFlow sampling must be a whole number" in bad.stdout + bad.stderr
    fabricnet.cleanup()
