"""docs/howto/router-fabric.md runs as written on the router emulation: the tables and
``mlroute fabric`` / ``srv6-config`` (its no-root block), then the routers and hosts of that
document built bare (``topologies/routers.RoutersTopo`` with no configuration applied: its
routers get the emulation's sysctls and MTU only, its hosts their management link only), each
router's block in its namespace with ``SW`` set, each host's with ``H``, the ping block on a
host, the controller and one agent per host (``H`` and ``DEV`` set) as the page starts them,
and the job. What the page says each step shows is checked: the SID count per router, every
address answering, the controller ready, each leaf's two flows on different spines, the
agents' rules. A batch with another platform's names fails on its first line as the page
says (a mapping file naming l0's first port ``swp1``). Nothing is left: the agents, the
controller and the network stop in ``finally``."""
import json
import os
import shlex
import subprocess

import pytest

from emulation.harness import fabricnet
from tests.integration import require_root_and_ovs
from tests.pages_live import answering, get_json, launcher, prepared, run_block, stop_group
from tests.test_docs import REPO, _blocks

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
PAGE = os.path.join(REPO, "docs", "howto", "router-fabric.md")
URL = "http://172.30.255.254:8080"


def _bare(topo, fabric) -> None:
    """The topology's nodes without the configuration the page applies: routers without
    their batches, hosts without their address and routes (their management link kept)."""
    for sw in fabric.switches():
        topo.setNodeInfo(sw, dict(topo.nodeInfo(sw), lines=[], lines6=[]))
    for h in fabric.host_leaves:
        info = topo.nodeInfo(h)
        topo.setNodeInfo(h, dict(info, ip=None,
                                 lines=[x for x in info["lines"] if f"{h}-eth9" in x]))


def _on(node, body: str, work: str, env: dict, **names) -> str:
    """A block in a node's namespace as a reader runs it there: bash, stop at the first
    failure, the page's variables set."""
    setting = " ".join(f"{k}={shlex.quote(v)}" for k, v in names.items())
    script = os.path.join(work, f"block-{node.name}.sh")  # one line for the node's shell
    with open(script, "w") as fh:
        fh.write(body)
    out = node.cmd(f"cd {shlex.quote(work)} && env PATH={shlex.quote(env['PATH'])} {setting} "
                   f"bash -euo pipefail {shlex.quote(script)} 2>&1; echo rc=$?")
    assert out.rstrip().endswith("rc=0"), f"{node.name}:\n{body}\n{out[-2000:]}"
    return out.rstrip().removesuffix("rc=0")


def test_router_fabric_page_runs_as_written(tmp_path):
    require_root_and_ovs()
    from mininet.link import Link
    from mininet.net import Mininet

    from controller.model.clos import load_fabric
    from topologies.routers import RoutersTopo
    blocks = _blocks(PAGE)
    routers, hosts, ping, controller, agent, job = [b for t, b in blocks
                                                    if t.startswith("Needs")]
    work, env, logs = prepared(tmp_path, blocks)
    with open(os.path.join(work, "srv6", "fabric.json")) as fh:
        fabric = load_fabric(json.load(fh))
    page = open(PAGE).read()
    topo = RoutersTopo(fabric=fabric)
    _bare(topo, fabric)
    net = Mininet(topo=topo, controller=None, link=Link)
    procs, agents = [], []
    try:
        net.start()
        # when it did not: the files of another platform stop at their first line
        with open(os.path.join(work, "names.json"), "w") as fh:  # l0's first port misnamed
            json.dump({"l0": {"1": "swp1"}}, fh)
        subprocess.run(["mlroute", "srv6-config", "--fabric", "fabric.json", "--out", "wrong",
                        "--interfaces", "names.json", "--format", "iproute2"], cwd=work,
                       env=env, check=True, capture_output=True, timeout=60)
        wrong = net["l0"].cmd(f"cd {work} && ip -batch wrong/l0.batch 2>&1; echo rc=$?")
        assert 'Cannot find device "swp1"' in wrong and "Command failed wrong/l0.batch:1" in wrong
        assert 'Cannot find device "swp1"' in page and "Command failed srv6/l0.batch:1" in page
        # 2. the switches: each prints its SIDs, 6 on a spine and 8 on a leaf
        for sw in fabric.switches():
            count = _on(net[sw], routers, work, env, SW=sw).split()[-1]
            assert int(count) == (8 if fabric.tier_of[sw] == 0 else 6), (sw, count)
        assert "6 on a spine of this fabric" in page and "8 on a leaf" in page
        # 3. the hosts, then every address answers from a host
        for h in fabric.host_leaves:
            _on(net[h], hosts, work, env, H=h)
        said = _on(net["h1_1"], ping, work, env)
        assert [line for line in said.splitlines() if line.strip()] == [
            f"{a} answers" for a in ("10.0.0.1", "10.0.0.2", "10.0.1.1", "10.0.1.2")], said
        route = net["h0_0"].cmd("ip route get 10.0.1.1")
        assert "via inet6 fdfe::2" in route, route
        # 4. the controller, as the page starts it
        start = launcher(work, env, logs, procs)
        start(controller, "controller")
        fabricnet.wait_until(lambda: answering(URL + "/v1/ready"), 60, what="the controller")
        fabricnet.wait_until(lambda: "no OpenFlow (hosts push SRv6 paths)" in
                             (logs / "controller.log").read_text(), 20, what="its log line")
        assert get_json(URL + "/v1/ready")["ready"] is True
        # 5. the agents, one per host as the page starts them, then the job
        for q, h in enumerate(fabric.host_leaves):
            log = open(logs / f"agent-{h}.log", "w")
            agents.append(net[h].popen(["bash", "-c", "exec " + agent], cwd=work, stdout=log,
                                       stderr=subprocess.STDOUT,
                                       env=dict(env, H=h, DEV=f"{h}-eth0")))
        answer = json.loads(run_block(job, work, env, 60))
        spines = {}
        for r in answer["routes"]:
            spines.setdefault(r["path"][0], []).append(r["path"][1])
        assert all(sorted(s) == ["s0", "s1"] for s in spines.values()), answer["routes"]

        def steered(h):
            rules = net[h].cmd("ip rule")
            return "flow parts steered" in (logs / f"agent-{h}.log").read_text() and any(
                line.split(":")[0].strip().isdigit() and 10000 <= int(line.split(":")[0]) < 30000
                for line in rules.splitlines())
        fabricnet.wait_until(lambda: all(steered(h) for h in fabric.host_leaves), 30,
                             interval=0.2, what="every agent's rules")
        assert "flow parts steered" in page
    finally:
        for p in agents:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
        for p, first in reversed(procs):
            stop_group(p, first)
        net.stop()
