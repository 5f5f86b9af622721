"""srv6 mode live: Linux routers with static SIDs (no OpenFlow, no switch daemon), the
controller with ``--mlroute-southbound none``, one ``mlroute-agent`` per host
(``emulation/harness/routers.py``) and real TCP: the routers' per-SID counters prove the
planned spines; a link set down under a running flow moves it within a second. ``make
test`` runs the link-down case on the leaf-spine (the plan, the agents, their probes and
fail-over, the controller's link state and re-plan); the others are in the extended tier."""
from __future__ import annotations

import re
import shutil
import subprocess
import time

import pytest

from emulation.harness.fabricnet import wait_until
from emulation.harness.routers import AGENT, PY, RouterSession
from tests.integration import EXTENDED, metric, require_root_and_ovs

pytestmark = pytest.mark.integration
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
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
c.sendall(b"x" * int(sys.argv[3])); c.close()
"""


@pytest.fixture
def scripts(tmp_path):
    require_root_and_ovs()
    if shutil.which("socat") is None:
        pytest.skip("needs socat")
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    return tmp_path


def _leaf_spine():
    from topologies.routers import leaf_spine
    return leaf_spine(2, 2, 2)


def _serve(s, host, port, folder):
    p = s.net[host].popen([PY, str(folder / "server.py"), str(port)], stdout=subprocess.PIPE,
                          text=True)
    s.procs.append(p)
    return p


@EXTENDED  # make test: the link-down case below proves the mode end to end
def test_two_flows_of_a_leaf_take_their_planned_spines_through_the_hosts(scripts):
    """Posted, run, deleted, posted again: each time every flow on its planned spine (the
    spines' uN counters), nothing left behind by the delete."""
    pairs = {"h0_0": "h1_0", "h0_1": "h1_1"}
    with RouterSession(_leaf_spine(), str(scripts), agents=pairs) as s:
        view = s.ctl.client.add_job({"id": "pairs", "flows": [
            {"src": a, "dst": b, "bytes": 2e6} for a, b in pairs.items()]})
        spines = {r["src"]: r["path"][1] for r in view["routes"]}
        assert sorted(spines.values()) == ["s0", "s1"], view["routes"]  # one spine each
        wait_until(lambda: all(s.steered(h) for h in pairs), 10, interval=0.1,
                   what="agents' rules")
        before = {x: s.sid_bytes(x) for x in ("s0", "s1")}
        servers = [_serve(s, b, 5001, scripts) for b in pairs.values()]
        time.sleep(0.5)
        size = 2_000_000
        for a, b in pairs.items():
            out = s.net[a].cmd(f"{PY} {scripts / 'client.py'} {s.fabric.host_ip[b]} 5001 "
                               f"{size}; echo rc=$?")
            assert out.strip().endswith("rc=0"), out
        assert [int(p.communicate(timeout=30)[0]) for p in servers] == [size, size]
        moved = {x: s.sid_bytes(x) - before[x] for x in ("s0", "s1")}
        for spine in ("s0", "s1"):  # each spine's uN carried one flow, encapsulated
            assert size <= moved[spine] < 1.2 * size, (moved, spines)
        s.ctl.client.delete_job("pairs")  # the agents' watches see it and remove their rules
        wait_until(lambda: not any(s.steered(h) for h in pairs), 10, interval=0.1,
                   what="rules removed after the job's delete")
        again = s.ctl.client.add_job({"id": "pairs", "flows": [  # posted again: steered again
            {"src": a, "dst": b, "bytes": 2e6} for a, b in pairs.items()]})
        assert sorted(r["path"][1] for r in again["routes"]) == ["s0", "s1"]
        wait_until(lambda: all(s.steered(h) == 1 for h in pairs), 10, interval=0.1,
                   what="agents' rules after the job was posted again")
        before = {x: s.sid_bytes(x) for x in ("s0", "s1")}
        servers = [_serve(s, b, 5003, scripts) for b in pairs.values()]
        time.sleep(0.5)
        for a, b in pairs.items():
            s.net[a].cmd(f"{PY} {scripts / 'client.py'} {s.fabric.host_ip[b]} 5003 {size}")
        assert [int(p.communicate(timeout=30)[0]) for p in servers] == [size, size]
        assert all(s.sid_bytes(x) - before[x] >= size for x in ("s0", "s1"))


@EXTENDED
def test_a_bundles_two_members_each_carry_one_flow_by_their_ua_sids(scripts):
    """One spine joined to each leaf by a bundle of two links: the plan gives the leaf's two
    flows the two members, and the hosts' lists name each member's uA SID, whose counters at
    the leaf show one flow each."""
    from controller.model.clos import Clos
    from controller.model.clos_wiring import wire
    fabric = Clos.leaf_spine(1, 2, 2, bundle=2)
    fabric = fabric.wire(wire(fabric))
    pairs = {"h0_0": "h1_0", "h0_1": "h1_1"}
    with RouterSession(fabric, str(scripts), agents=pairs) as s:
        s.ctl.client.add_job({"id": "pairs", "flows": [
            {"src": a, "dst": b, "bytes": 2e6} for a, b in pairs.items()]})
        wait_until(lambda: all(s.steered(h) for h in pairs), 10, interval=0.1,
                   what="agents' rules")
        members = [f"{s.plan.address(s.plan.ua('l0', 's0', m))}/48" for m in (0, 1)]
        before = [s.sid_bytes("l0", x) for x in members]
        servers = [_serve(s, b, 5004, scripts) for b in pairs.values()]
        time.sleep(0.5)
        size = 2_000_000
        for a, b in pairs.items():
            s.net[a].cmd(f"{PY} {scripts / 'client.py'} {s.fabric.host_ip[b]} 5004 {size}")
        assert [int(p.communicate(timeout=30)[0]) for p in servers] == [size, size]
        moved = [s.sid_bytes("l0", x) - b for x, b in zip(members, before)]
        assert all(size <= m < 1.2 * size for m in moved), moved  # one flow per member


def _segs(s, host) -> list[str]:
    """The host's encapsulation lists (a process of its own, not the node's shell: safe
    beside a collective run in another thread)."""
    out = s.net[host].popen(["ip", "route", "show", "table", "all"], stdout=subprocess.PIPE,
                            text=True).communicate(timeout=10)[0]
    return re.findall(r"segs \d+ \[ ([0-9a-f:]+) \]", out)


def _sent(s, router) -> int:
    """Bytes the router has sent on all its interfaces (safe beside another thread)."""
    out = s.net[router].popen(["cat", "/proc/net/dev"], stdout=subprocess.PIPE,
                              text=True).communicate(timeout=10)[0]
    return sum(int(line.split(":")[1].split()[8]) for line in out.splitlines()[2:])


@pytest.mark.parametrize("shape", ["leaf-spine", pytest.param("fat-tree", marks=EXTENDED)])
def test_a_link_down_under_a_running_flow_moves_it_within_a_second(scripts, shape):
    from topologies.routers import fat_tree
    fabric = _leaf_spine() if shape == "leaf-spine" else fat_tree(4)
    src, dst = ("h0_0", "h1_0") if shape == "leaf-spine" else ("h0_0", "h2_0")
    # both ends' agents: the controller takes a link down on two hosts' probes (the quorum)
    with RouterSession(fabric, str(scripts), agents=[src, dst], bw=20,
                       secure=shape == "leaf-spine") as s:
        view = s.ctl.client.add_job({"id": "one", "flows": [
            {"src": src, "dst": dst, "bytes": 8e6}]})
        path = view["routes"][0]["path"]
        wait_until(lambda: s.steered(src), 10, interval=0.1, what="the agent's rule")
        primary = _segs(s, src)
        server = _serve(s, dst, 5002, scripts)
        time.sleep(0.5)
        size = 8_000_000  # about 3.5 s at 20 Mbit/s
        client = s.net[src].popen([PY, str(scripts / "client.py"), s.fabric.host_ip[dst],
                                   "5002", str(size)], stderr=subprocess.PIPE, text=True)
        s.procs.append(client)
        time.sleep(1.0)
        s.net.configLinkStatus(path[-2], path[-1], "down")  # the last hop, under the flow
        down_at = time.monotonic()
        wait_until(lambda: _segs(s, src) and _segs(s, src) != primary, 5, interval=0.02,
                   what="the agent's move to the backup list")
        moved_after = time.monotonic() - down_at
        assert client.wait(60) == 0, client.stderr.read()  # no reset
        assert int(server.communicate(timeout=30)[0]) == size  # every byte
        assert moved_after < 1.0, moved_after
        links = wait_until(lambda: s.ctl.client.fabric().get("links_down"), 10,
                           what="the controller's links down")
        assert any({path[-2], path[-1]} <= set(re.split(r"[^\w]+", str(x))) for x in links), links
        after = wait_until(lambda: [r for r in s.ctl.client.routes()["routes"]
                                    if r["path"] != path], 10, what="the re-plan")
        assert path[-2] not in after[0]["path"]  # re-planned around the failed link


def test_secured_agents_steer_and_a_host_speaks_only_for_itself(scripts):
    """Issue 72 on real kernels: HTTPS, an admin token and one credential per host. Every
    agent connects and steers with its own credential; a hostile host (h0_1, its agent's
    credential) cannot report for h0_0, read its plan or post a job, and its own report of a
    failed path takes nothing down (one host is no quorum)."""
    from controller.client import Client
    with RouterSession(_leaf_spine(), str(scripts), secure=True) as s:
        assert s.url.startswith("https://")
        view = s.ctl.client.add_job({"id": "one", "flows": [
            {"src": "h0_0", "dst": "h1_0", "bytes": 1e6},
            {"src": "h0_1", "dst": "h1_1", "bytes": 1e6}]})
        for h in ("h0_0", "h0_1"):
            wait_until(lambda h=h: s.steered(h), 15, interval=0.1, what=f"{h}'s rule")
        hosts = wait_until(lambda: (d := s.ctl.client.ready().get("hosts")) and
                           d["reporting"] == 4 and d, 20, what="every agent's reports")
        assert hosts["credential_refused"] == 0 and hosts["document_refused"] == 0, hosts
        with open(s.credential_file("h0_1")) as fh:
            hostile = Client(s.url, fh.read().strip(), timeout=10, ca_file=s.pki["ca"])
        spine = next(r["path"][1] for r in view["routes"] if r["src"] == "h0_0")
        other = "s1" if spine == "s0" else "s0"
        lie = {"paths": [{"path": ["l0", spine, "l1"], "ok": False},
                         {"path": ["l0", other, "l1"], "ok": True}]}
        assert hostile.request("POST", "/v1/hosts/h0_0/probes", lie)[0] == 403
        assert hostile.request("GET", "/v1/hosts/h0_0/segments")[0] == 403
        assert hostile.request("POST", "/v1/jobs", {"id": "x", "flows": [
            {"src": "h0_1", "dst": "h1_1", "bytes": 1e6, "dport": 7}]})[0] == 403
        status, doc = hostile.request("POST", "/v1/hosts/h0_1/probes", lie)  # its own: 200
        assert status == 200 and doc["links_down"] == [], doc
        assert [r["path"] for r in s.ctl.client.routes()["routes"]] == \
            [r["path"] for r in view["routes"]]  # nothing moved
        wait_until(lambda: s.ctl.client.ready()["hosts"]["credential_refused"] == 1, 5,
                   what="h0_0 named in /v1/ready (published each second)")
        with pytest.raises(OSError):  # plain HTTP to the HTTPS port gets no answer
            Client(s.url.replace("https", "http"), timeout=5).ready()


@EXTENDED
@pytest.mark.parametrize("shape", ["leaf-spine", "fat-tree"])
@pytest.mark.parametrize("library", ["gloo", "mpi"])
def test_a_real_ring_runs_on_its_planned_uplinks(scripts, library, shape):
    """A ring All-Reduce of a real library (PyTorch gloo, Open MPI) with one rank per host of
    a 2 x 2 leaf-spine or a k = 4 fat-tree of routers, ring neighbours on other leaves (other
    pods), declared in its data direction (gloo: rank r sends to r - 1, Open MPI to r + 1):
    the sums are right and every router's flows leave on different uplinks."""
    from emulation.harness import collectives
    from topologies.routers import fat_tree, leaf_spine
    why = collectives.missing(library)
    if why:
        pytest.skip(why)
    fabric = leaf_spine(2, 2, 2) if shape == "leaf-spine" else fat_tree(4)
    hosts = collectives.rank_hosts(fabric)
    direction = collectives.DATA_DIRECTION[library]
    with RouterSession(fabric, str(scripts), bw=50) as s:
        s.ctl.client.add_job({"id": "ring", "collective": "ring_allreduce",
                              "ranks": collectives.ring(hosts, direction), "bytes": 4e6})
        wait_until(lambda: all(s.steered(h) for h in hosts), 10, interval=0.1,
                   what="agents' rules")
        res = collectives.run_allreduce(s.net, fabric, library, hosts, mib=4, iters=3,
                                        logdir=str(scripts / library), counters=s.uplink_bytes)
        assert res["sums_ok"], res
        assert res["direction"] == direction, res["pairs"]  # as declared
        assert res["imbalance"] < 0.15, res["uplinks"]  # each router: one flow per uplink


@EXTENDED
def test_agent_faults_keep_the_hosts_rules(scripts):
    """An agent killed and started again reconciles with what it installed (nothing
    duplicated); a second agent on the host refuses to start; with the controller gone the
    agent keeps its rules and retries."""
    with RouterSession(_leaf_spine(), str(scripts), agents=["h0_0"]) as s:
        s.ctl.client.add_job({"id": "one", "flows": [{"src": "h0_0", "dst": "h1_0",
                                                      "bytes": 1e6}]})
        wait_until(lambda: s.steered("h0_0"), 10, interval=0.1, what="the agent's rule")
        routes = _segs(s, "h0_0")
        second = s.net["h0_0"].popen([AGENT, "--url", s.url, "--host", "h0_0", "--lock",
                                      str(scripts / "agent-h0_0.lock")],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out = second.communicate(timeout=20)[0]
        assert second.returncode == 2 and "another mlroute-agent runs" in out, out
        first = next(p for p in s.procs if AGENT in p.args)
        first.kill()  # no clean-up: its rules stay in the kernel
        first.wait(10)
        assert s.steered("h0_0") == 1
        s.start_agent("h0_0")
        time.sleep(3)  # the new agent read its rules back and took the document
        assert s.steered("h0_0") == 1 and _segs(s, "h0_0") == routes  # nothing duplicated
        s.ctl.stop()
        time.sleep(3)
        assert s.steered("h0_0") == 1 and _segs(s, "h0_0") == routes  # kept without it
        assert "retrying" in (scripts / "agent-h0_0.log").read_text()


def _learn_members_only_ring(s, fabric, library, hosts, logdir, source: str) -> None:
    """Post a ring by its members only, run it once (right sums), wait (bounded) until the
    controller learned it from ``source``, and check the learned routes hold the ring's
    pairs in the library's data direction."""
    from emulation.harness import collectives
    s.ctl.client.add_job({"id": "ring", "members": hosts})
    first = collectives.run_allreduce(s.net, fabric, library, hosts, mib=4, iters=6,
                                      logdir=str(logdir), counters=s.uplink_bytes)
    assert first["sums_ok"], first
    view = wait_until(lambda: (v := s.ctl.client.job("ring"))["matrix"] == "learned" and v,
                      20, interval=0.5, what=f"the ring learned from {source}")
    direction, n = collectives.DATA_DIRECTION[library], len(hosts)
    ring = {(h, hosts[(r + direction) % n]) for r, h in enumerate(hosts)}
    assert ring <= {(r["src"], r["dst"]) for r in view["routes"]}, view["routes"]


@EXTENDED
@pytest.mark.parametrize("shape", ["leaf-spine", "fat-tree"])
@pytest.mark.parametrize("library", ["gloo", "mpi"])
def test_a_members_only_ring_is_learned_from_the_agents_and_runs_balanced(scripts, library,
                                                                          shape):
    """A job posted by its members only, on routers that export no sFlow: the agents' traffic
    reports (their TCP connections' bytes) teach the controller the ring in the first launch;
    the next launch runs on the plan: right sums, each leaf's two flows on two uplinks."""
    from emulation.harness import collectives
    from topologies.routers import fat_tree, leaf_spine
    why = collectives.missing(library)
    if why:
        pytest.skip(why)
    fabric = leaf_spine(2, 2, 2) if shape == "leaf-spine" else fat_tree(4)
    hosts = collectives.rank_hosts(fabric)  # ring neighbours on other leaves (pods)
    direction = collectives.DATA_DIRECTION[library]
    with RouterSession(fabric, str(scripts), bw=50) as s:
        _learn_members_only_ring(s, fabric, library, hosts, scripts / f"{library}-first",
                                 "the agents")
        wait_until(lambda: all(s.steered(h) for h in hosts), 10, interval=0.1,
                   what="agents' rules for the learned flows")
        res = collectives.run_allreduce(s.net, fabric, library, hosts, mib=4, iters=3,
                                        logdir=str(scripts / library), counters=s.uplink_bytes)
        assert res["sums_ok"], res
        assert res["direction"] == direction, res["pairs"]
        assert res["imbalance"] < 0.15, res["uplinks"]  # each leaf: one flow per uplink


@EXTENDED
def test_a_members_only_ring_is_learned_from_the_routers_sflow(scripts):
    """The same on routers that export sFlow (pmacctd's sfprobe on every router port, 1 in 16)
    and agents that report no traffic (``--no-traffic``): the controller learns the ring from
    the routers' samples, whose packets it decodes inside their SRv6 encapsulation."""
    from emulation.harness import collectives
    why = collectives.missing("gloo")
    if why:
        pytest.skip(why)
    if shutil.which("pmacctd") is None:
        pytest.skip("needs pmacctd (Debian's pmacct)")
    fabric = _leaf_spine()
    hosts = collectives.rank_hosts(fabric)
    with RouterSession(fabric, str(scripts), bw=50, sflow=16, traffic=False) as s:
        _learn_members_only_ring(s, fabric, "gloo", hosts, scripts / "first",
                                 "the routers' sFlow")
        samples, page = metric(s.ctl.url, "mlroute_sflow_samples_total")
        rejected, _ = metric(s.ctl.url, "mlroute_sflow_rejected_datagrams_total")
        assert samples and samples > 0 and not rejected, page


@EXTENDED  # make test: the link-down case under one flow, above
def test_a_link_down_under_a_running_ring_moves_its_flows_and_the_sums_hold(scripts):
    """A gloo ring All-Reduce running on the leaf-spine of routers; a spine-to-leaf link that
    carries ring flows is set down mid-run. Every agent whose flow crossed it moves to its
    backup list within a second; the job ends with right sums and no connection reset; the
    controller shows the link down and re-plans around it."""
    import threading
    import traceback

    from emulation.harness import collectives
    why = collectives.missing("gloo")
    if why:
        pytest.skip(why)
    fabric = _leaf_spine()
    hosts = collectives.rank_hosts(fabric)
    direction = collectives.DATA_DIRECTION["gloo"]
    with RouterSession(fabric, str(scripts), bw=50) as s:
        view = s.ctl.client.add_job({"id": "ring", "collective": "ring_allreduce",
                                     "ranks": collectives.ring(hosts, direction),
                                     "bytes": 4e6})
        wait_until(lambda: all(s.steered(h) for h in hosts), 10, interval=0.1,
                   what="agents' rules")
        cut = tuple(view["routes"][0]["path"][-2:])  # spine -> leaf under the first flow
        hit = sorted({r["src"] for r in view["routes"] if cut in zip(r["path"], r["path"][1:])})
        primary = {h: _segs(s, h) for h in hit}
        out: dict = {}

        def run():
            try:
                out["res"] = collectives.run_allreduce(s.net, fabric, "gloo", hosts, mib=4,
                                                       iters=12, logdir=str(scripts / "gloo"),
                                                       attempts=1, counters=s.uplink_bytes)
            except Exception:  # noqa: BLE001 - judged below
                out["error"] = traceback.format_exc()
        ring = threading.Thread(target=run, daemon=True)
        start = _sent(s, cut[0])
        ring.start()
        wait_until(lambda: _sent(s, cut[0]) - start > 8e6 or not ring.is_alive(), 60,
                   interval=0.2, what="the ring's first iterations")
        assert ring.is_alive(), out
        s.net.configLinkStatus(*cut, "down")
        down_at = time.monotonic()
        wait_until(lambda: all(_segs(s, h) and _segs(s, h) != primary[h] for h in hit), 5,
                   interval=0.02, what="the agents' moves to their backup lists")
        moved_after = time.monotonic() - down_at
        ring.join(120)
        assert not ring.is_alive() and "error" not in out, out
        assert out["res"]["sums_ok"], out["res"]  # no reset: gloo aborts on one
        assert moved_after < 1.0, moved_after
        links = wait_until(lambda: s.ctl.client.fabric().get("links_down"), 10,
                           what="the controller's links down")
        assert any(set(cut) <= set(re.split(r"[^\w]+", str(x))) for x in links), links
        after = wait_until(lambda: all(cut not in zip(r["path"], r["path"][1:]) for r in
                                       s.ctl.client.routes()["routes"]), 10, what="the re-plan")
        assert after


@EXTENDED
def test_redundant_controllers_serve_the_agents_and_a_killed_master_moves_nothing(scripts):
    """Two controllers in srv6 mode on one etcd, the agents given both URLs. A job posted to
    the standby is forwarded, planned once and steered; the master killed -9, the other takes
    over and every host keeps its lists; a delete through the new master reaches every agent
    (their watches moved to the survivor)."""
    import os

    from emulation.harness.controller_proc import ControllerProcess
    from emulation.harness.ha import EtcdServer
    from emulation.harness.ports import free_ports
    from topologies.routers import CONTROLLER_IP
    if not os.path.exists("/usr/bin/etcd"):
        pytest.skip("needs etcd (make system)")
    ports = free_ports(4)
    hosts = ["h0_0", "h1_0", "h0_1", "h1_1"]
    ctls: dict[str, ControllerProcess] = {}
    with EtcdServer(str(scripts)) as etcd, \
            RouterSession(_leaf_spine(), str(scripts), controller=ports[:2]) as s:
        try:
            for i, cid in enumerate(("c0", "c1")):  # the management address is up now
                ctls[cid] = ControllerProcess(
                    str(scripts / "fabric.json"), str(scripts / f"controller-{cid}.log"),
                    "auto", "srv6", ports[i], ports[2 + i],
                    ["--mlroute-southbound", "none", "--mlroute-sflow-port", "0",
                     "--mlroute-etcd", etcd.url, "--mlroute-id", cid],
                    rest_host=CONTROLLER_IP).start()

            def role(cid):
                return ctls[cid].rest("GET", "/v1/cluster", timeout=5)[1]["self"]["role"]
            master = wait_until(lambda: next((c for c in ctls if role(c) == "master"), None),
                                30, interval=0.3, what="a master")
            standby = next(c for c in ctls if c != master)
            wait_until(lambda: ctls[master].rest("GET", "/v1/ready", timeout=5)[0] == 200, 30,
                       interval=0.3, what="the master's takeover done")
            view = ctls[standby].client.add_job({"id": "ring", "collective": "ring_allreduce",
                                                 "ranks": hosts, "bytes": 4e6})
            assert sorted(r["path"][1] for r in view["routes"] if r["src"][1] == "0") == \
                ["s0", "s1"]  # leaf l0's two flows on two spines
            wait_until(lambda: all(s.steered(h) for h in hosts), 20, interval=0.2,
                       what="agents' rules from the cluster")
            lists = {h: _segs(s, h) for h in hosts}
            ctls[master].proc.kill()
            ctls[master].proc.wait(10)
            wait_until(lambda: role(standby) == "master", 30, interval=0.3,
                       what="the standby's takeover")
            time.sleep(2)  # the agents' watches reach the survivor
            assert {h: _segs(s, h) for h in hosts} == lists  # nothing moved
            ctls[standby].client.delete_job("ring")
            wait_until(lambda: not any(s.steered(h) for h in hosts), 30, interval=0.2,
                       what="rules removed through the new master")
        finally:
            for c in ctls.values():
                c.stop()


# a raw IPv4 socket: the kernel routes it (IPv4 over an IPv6 next hop, RFC 5549, which
# scapy's own routing cannot resolve), the header is ours
FORGE = """import socket, sys, time
from scapy.all import IP, UDP, Raw
pkt = bytes(IP(src=sys.argv[1], dst=sys.argv[2]) / UDP(sport=5999, dport=5999) / Raw(b"x" * 100))
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
for _ in range(int(sys.argv[3])):
    s.sendto(pkt, (sys.argv[2], 0)); time.sleep(0.005)
"""


@EXTENDED
def test_a_leaf_router_drops_a_hosts_forged_source_and_passes_its_own(scripts):
    """The router leaves admit on a host port only that host's own sources (``srv6-config``:
    policy rules per host port). h0_0 sends UDP to h1_0 from h0_1's address (same leaf) and
    from its own: none of the forged datagrams arrives, its own do."""
    import json
    import sys

    from emulation.harness.controller_proc import REPO
    fabric = _leaf_spine()
    (scripts / "forge.py").write_text(FORGE)
    with RouterSession(fabric, str(scripts), agents=[]) as s:
        ip = {h: fabric.ip_of(h, 0) for h in ("h0_0", "h0_1", "h1_0")}
        listen = s.net["h1_0"].popen([PY, "-m", "emulation.harness.attacks", "udp-count",
                                      "--port", "5999", "--duration", "10"], cwd=REPO,
                                     stdout=subprocess.PIPE, text=True)
        s.procs.append(listen)
        time.sleep(1.0)
        for src in ("h0_1", "h0_0"):  # forged, then its own
            s.net["h0_0"].cmd(f"{sys.executable} {scripts / 'forge.py'} {ip[src]} "
                              f"{ip['h1_0']} 200")  # the venv's: scapy
        got = json.loads(listen.communicate(timeout=30)[0].strip().splitlines()[-1])
        received = got["received"]
        assert received.get(ip["h0_1"], 0) == 0, received
        assert received.get(ip["h0_0"], 0) >= 190, received


SENDER = """import socket, sys
c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
c.bind(("0.0.0.0", int(sys.argv[3]))); c.settimeout(30)
c.connect((sys.argv[1], int(sys.argv[2]))); c.sendall(b"x" * int(sys.argv[4])); c.close()
"""


@EXTENDED
def test_host_mode_on_routers_each_flow_crosses_its_spine_from_its_reported_port(scripts):
    """Host mode without OpenFlow: h0_0's two TCP flows to h1_0 (destination ports 5201 and
    5202) are planned on the two spines; h0_0's agent learns for each a source port that the
    routers' hash sends there (TTL-limited probes, the spines' ICMP answers), reports it and
    writes it to its ports file; 2 MB sent from each port crosses its planned spine (the
    leaf's uplink counters), and almost nothing crosses the other."""
    (scripts / "sender.py").write_text(SENDER)
    with RouterSession(_leaf_spine(), str(scripts), agents=["h0_0"]) as s:
        view = s.ctl.client.add_job({"id": "hp", "mode": "host", "flows": [
            {"src": "h0_0", "dst": "h1_0", "bytes": 2e6, "dport": d} for d in (5201, 5202)]})
        spine = {r["dport"]: r["path"][1] for r in view["routes"]}
        assert sorted(spine.values()) == ["s0", "s1"], view["routes"]

        def sports():
            return {r["dport"]: r["sport"] for r in s.ctl.client.job("hp")["routes"]}
        wait_until(lambda: None not in sports().values(), 30, interval=0.2,
                   what="the agent's reported source ports")
        sport = sports()
        assert len(set(sport.values())) == 2, sport
        served = s.ctl.client.job_ports("hp").splitlines()[1:]

        def exported():
            try:
                with open(s.ports_file("h0_0")) as fh:
                    return [x for x in fh.read().splitlines() if not x.startswith("#")]
            except OSError:
                return []
        wait_until(lambda: sorted(exported()) == sorted(served), 10, interval=0.2,
                   what="the agent's ports file")
        size, dst = 2_000_000, s.fabric.host_ip["h1_0"]
        for dport in (5201, 5202):
            server = _serve(s, "h1_0", dport, scripts)
            time.sleep(0.5)
            before = s.uplink_bytes()
            out = s.net["h0_0"].cmd(f"{PY} {scripts / 'sender.py'} {dst} {dport} "
                                    f"{sport[dport]} {size}; echo rc=$?")
            assert out.strip().endswith("rc=0"), out
            assert int(server.communicate(timeout=30)[0]) == size
            moved = {k: v - before[k] for k, v in s.uplink_bytes().items()}
            other = "s1" if spine[dport] == "s0" else "s0"
            assert size <= moved[f"l0->{spine[dport]}"] < 1.2 * size, (dport, sport, moved)
            assert moved[f"l0->{other}"] < 0.05 * size, (dport, sport, moved)
