"""The topology file alone, with Mininet's own command line, gives a fabric that carries TCP
through the real controller in both enforcement modes: the newcomer's path of the manual
(docs/howto/run-controller.md: ``mn --custom topologies/clos.py --topo clos,S,L,H
--controller remote``, no --switch, --host or --link). TCP is the test because ping works
where TCP does not (tx offload on, MPLS at the default MTU; environment.md section 4).
iperf3, not Mininet's iperf (it hangs here)."""
import json
import os
import re
import shutil
import subprocess

import pytest

from emulation.harness import fabricnet
from emulation.harness.controller_proc import REPO, ControllerProcess
from tests.integration import ext, require_root_and_ovs
from topologies.clos import clos_fabric

CLOS = os.path.join(REPO, "topologies", "clos.py")
MN_PYTHON = "/usr/bin/python3"  # Debian's mn runs under the system Python, not the venv


def test_custom_file_loads_as_mn_loads_it():
    """``mn --custom`` exec()s the file in a bare namespace under the system Python: it must
    import there (standard library and Mininet only) and offer the topology and both classes,
    which the topology also sets on its nodes."""
    if not shutil.which(MN_PYTHON) or subprocess.run(
            [MN_PYTHON, "-c", "import mininet"], capture_output=True).returncode:
        pytest.skip("no system Python with Mininet (make system)")
    code = ("customs = {}\n"
            f"exec(compile(open({CLOS!r}).read(), {CLOS!r}, 'exec'), customs, customs)\n"
            "t = customs['topos']['clos'](2, 2, 1, 10)\n"
            "import json\n"
            "print(json.dumps([sorted(customs['topos']), sorted(customs['switches']), "
            "sorted(customs['hosts']), t.nodeInfo('s0')['cls'].__name__, "
            "t.nodeInfo('s0')['mtu'], t.nodeInfo('h0_0')['cls'].__name__, "
            "t.linkInfo('l0', 's0')['cls'].__name__]))\n"
            "ft = customs['topos']['fattree'](4, 1, 10)\n"
            "print(json.dumps([len(ft.switches()), ft.hosts(), ft.nodeInfo('c1_1')['dpid'], "
            "ft.linkInfo('a0_1', 'c1_0')['port1'], ft.linkInfo('a0_1', 'c1_0')['port2']]))\n"
            "pt = customs['topos']['planes'](2, 2, 4, 1, 10)\n"
            "up = [pt.linkInfo('h1_0', f'l1_p{q}') for q in (0, 1)]\n"
            "print(json.dumps([len(pt.switches()), pt.hosts(), pt.nodeInfo('h1_0')['ip'], "
            "[(i['port1'], i['port2'], i['addr1'], i['params1']['ip']) for i in up], "
            "pt.nodeInfo('s1_p1')['dpid']]))\n"
            "bt = customs['topos']['bundles'](2, 2, 1, 2, 10)\n"
            "print(json.dumps(sorted((i['port1'], i['port2']) if a == 'l1' else (i['port2'], "
            "i['port1']) for a, b, i in bt.links(withInfo=True) if {a, b} == {'l1', 's0'})))\n"
            # --controller remote: Mininet's, without the telnet check that decoded a HELLO
            "from mininet.node import RemoteController\n"
            "c = customs['controllers']['remote']\n"
            "print(json.dumps([issubclass(c, RemoteController), "
            "c.checkListening is not RemoteController.checkListening]))")
    out = subprocess.run([MN_PYTHON, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd="/")
    assert out.returncode == 0, out.stderr
    first, second, third, fourth, fifth = out.stdout.splitlines()
    assert json.loads(fifth) == [True, True]
    assert json.loads(first) == [["bundles", "clos", "fattree", "planes"], ["mlroute"], ["mlroute"],
                                 "ClosSwitch", 1600, "ClosHost", "ShapedLink"]
    # k = 4 fat-tree, 1 host per leaf: 8 leaves, 8 aggregation switches, 4 cores; hosts pod by
    # pod; core c1_1 is 0x40000 + 256 + 1; a0_1 reaches its cores after its 2 leaves
    assert json.loads(second) == [20, [f"h{i}_0" for i in range(8)], f"{0x40101:016x}", 3, 1]
    # two planes of 2 spines x 4 leaves, 1 host per leaf: 12 switches, 4 hosts; h1_0's eth<q>
    # reaches l1_p<q> (port 3 after the 2 spines) with plane q's MAC and address in its /12
    assert json.loads(third) == [
        12, [f"h{i}_0" for i in range(4)], "10.0.1.1/12",
        [[0, 3, "02:00:00:00:01:01", "10.0.1.1/12"], [1, 3, "02:00:01:00:01:01", "10.16.1.1/12"]],
        f"{0x110001:016x}"]  # plane 1 (0x100000) + a spine (0x10000) + 1
    # a bundle of 2 between l1 and s0: two links, member m on l1's port 1+m and s0's 3+m
    assert json.loads(fourth) == [[1, 3], [2, 4]]


def test_the_planes_fabric_file_is_what_the_topology_builds(tmp_path):
    """``python -m topologies.clos --planes 2`` writes the fabric the ``planes`` topology
    builds: two planes, every host an address per plane."""
    from controller.model.clos import load_fabric
    from topologies.clos import main, planes_fabric
    out = tmp_path / "planes.json"
    assert main(["--planes", "2", "--spines", "2", "--leaves", "4", "--hosts-per-leaf", "1",
                 "--bw", "10", "--out", str(out)]) == 0
    fab = load_fabric(json.loads(out.read_text()))
    fab.check_wiring()
    assert len(fab.planes) == 2 and fab.host_ips == planes_fabric(2, 2, 4, 1, 10).host_ips
    assert fab.ip_of("h3_0", 1) == "10.16.3.1" and fab.dpids["l3_p1"] == 0x120003
    for bad in (["--planes", "2", "--fat-tree", "4"], ["--planes", "0"]):
        with pytest.raises(SystemExit):
            main(bad)


def _mn(ctl, topo: str, *args, timeout: float = 180) -> str:
    out = subprocess.run(["mn", "--custom", CLOS, "--topo", topo, "--controller",
                          f"remote,ip=127.0.0.1,port={ctl.of_port}", *args],
                         capture_output=True, text=True, timeout=timeout)
    return out.stdout + out.stderr


def _controller(tmp_path, mode: str) -> ControllerProcess:
    path = tmp_path / "fabric.json"
    path.write_text(json.dumps(clos_fabric(2, 3, 2).to_dict()))
    fabricnet.ensure_ovs()
    fabricnet.cleanup()
    return ControllerProcess(str(path), str(tmp_path / "controller.log"), mode=mode).start()


class _Node:
    """Enough of a Mininet node for an interface to configure itself: the commands it runs."""

    def __init__(self):
        self.cmds = []

    def addIntf(self, intf, port=None):  # noqa: N802 - Mininet's name
        pass

    def cmd(self, *args):
        self.cmds.append(" ".join(str(a) for a in args))
        return ""


def test_a_shaped_interface_runs_tcintfs_commands_in_one_shell_line():
    """``ShapedIntf``: Mininet's own HTB commands (``TCIntf.bwCmds``) and the byte FIFO in one
    command after the ``up``; options it does not handle (a delay) take TCIntf's way."""
    pytest.importorskip("mininet")
    from mininet.link import TCIntf

    from topologies.clos import ShapedIntf
    node = _Node()
    ShapedIntf("h0-eth0", node=node, bw=10.0, queue_bytes=4000)
    up, line = node.cmds
    assert up == "ifconfig h0-eth0 up"
    tc, parent = TCIntf.bwCmds(TCIntf.__new__(TCIntf), bw=10.0)
    parts = line.split("; ")
    assert parts[0].startswith("ethtool -K h0-eth0 gro off tx on rx on")
    assert parts[2:] == [c % ("tc", "h0-eth0") for c in tc] + [
        f"tc qdisc replace dev h0-eth0{parent}handle 10: bfifo limit 4000"]
    node = _Node()
    ShapedIntf("h0-eth0", node=node, bw=10.0, delay="1ms")
    assert any(c.startswith("tc qdisc show") for c in node.cmds) and len(node.cmds) > 3


@pytest.mark.integration
@pytest.mark.extended  # make test: `mn --custom` carries TCP below; pingall in test_integration
@pytest.mark.timeout(300)
def test_mn_custom_clos_pingall(tmp_path):
    require_root_and_ovs()
    ctl = _controller(tmp_path, "flow")
    try:
        text = _mn(ctl, "clos,2,3,2", "--test", "pingall")
        assert "Results: 0% dropped (30/30 received)" in text, text[-3000:]
    finally:
        ctl.stop()


@pytest.mark.integration
@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["flow", ext("sr")])
def test_mn_custom_clos_carries_tcp(tmp_path, mode):
    """A job between h0_0 and h1_0 (all their IPv4 traffic), then iperf3 from h0_0 to h1_0
    inside `mn`'s own CLI: TCP gets through, and the job's ingress rule on leaf l0 (in sr mode
    the one that pushes the labels) counted the bytes, so the traffic took the planned path."""
    require_root_and_ovs()
    ctl = _controller(tmp_path, mode)
    job = json.dumps({"id": "t", "collective": "ring_allreduce", "ranks": ["h0_0", "h1_0"],
                      "bytes": 1e6})
    post, client, flows, offload = (tmp_path / n for n in ("post.json", "iperf.json",
                                                           "l0.flows", "ethtool.txt"))
    script = tmp_path / "script.mn"
    script.write_text("\n".join([
        f"sh curl -s -o {post} -XPOST {ctl.url}/v1/jobs -d '{job}'",
        "h1_0 iperf3 -s -1 -D",
        "h0_0 sleep 0.5",
        f"h0_0 timeout 30 iperf3 -c 10.0.1.1 -t 2 -J --connect-timeout 5000 > {client}",
        f"h0_0 ethtool -k h0_0-eth0 > {offload}",
        "h0_0 sleep 1.5",  # the userspace datapath updates rule counters about every 0.5 s
        f"sh ovs-ofctl -O OpenFlow13 dump-flows l0 > {flows}",
        "h1_0 pkill -f 'iperf3 -s -1'"]) + "\n")
    try:
        text = _mn(ctl, "clos,2,3,2", "--test", "pingall", "--post", str(script))
        assert "Results: 0% dropped (30/30 received)" in text, text[-3000:]
        view = json.loads(post.read_text())
        assert view.get("mode") == mode and len(view["routes"]) == 2, view
        assert re.search(r"tx-checksumming: off", offload.read_text()), offload.read_text()
        result = json.loads(client.read_text())
        received = result["end"]["sum_received"]["bytes"]
        assert received > 1_000_000, result["end"]["sum_received"]
        rules = [line for line in flows.read_text().splitlines()
                 if "nw_src=10.0.0.1" in line and "nw_dst=10.0.1.1" in line]
        assert rules, flows.read_text()
        counted = max(int(re.search(r"n_bytes=(\d+)", line).group(1)) for line in rules)
        assert counted >= received, (counted, received, rules)  # frames: payload + headers
        if mode == "sr":
            assert any("push_mpls" in line for line in rules), rules
    finally:
        ctl.stop()
