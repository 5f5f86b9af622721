"""A fabric without OpenFlow in Mininet: Linux routers with static SIDs
(``topologies/routers.py``), the controller with ``--mlroute-southbound none`` on the
management network's address, and one ``mlroute-agent`` per host reaching it over its
management link. Everything it starts is stopped in ``close``, also on Ctrl-C; it touches no
other emulation on the machine.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from controller.enforcement.srv6 import SidPlan
from controller.model.clos import Clos
from emulation.harness.controller_proc import ControllerProcess, signals_held
from emulation.harness.ports import free_ports

AGENT = os.path.join(os.path.dirname(sys.executable), "mlroute-agent")
PY = "/usr/bin/python3"  # the hosts' Python (Debian's, with Mininet's)
QUEUE_S = 0.2  # a shaped link's FIFO holds this long of its line rate (Mininet's default
# txqueuelen of 1,000 packets is 2.4 s at 5 Mbit/s: probes and ACKs would wait behind it)


def pmacctd(node, folder: str, sampling: int, receiver: str, agent: str) -> subprocess.Popen:
    """A router's sFlow agent: pmacctd's ``sfprobe`` plugin samples 1 in ``sampling`` packets
    entering each of its fabric ports (the frame's first 128 bytes) and sends them to
    ``receiver`` (host:port) with ``agent`` as its agent address. Debian's pmacct 1.7.7;
    measured in tests/test_sflow_pmacct_netns.py (docs/explanation/enforcement.md)."""
    from topologies.routers import ROUTER_MGMT_PORT
    ports = [i.name for i in node.intfList()
             if i.name not in ("lo", f"{node.name}-eth{ROUTER_MGMT_PORT}")]
    index = node.cmd("; ".join(f"cat /sys/class/net/{p}/ifindex" for p in ports)).split()
    base = os.path.join(folder, f"pmacctd-{node.name}")
    with open(base + ".map", "w") as fh:
        fh.writelines(f"ifindex={i} ifname={p} direction=in\n" for p, i in zip(ports, index))
    with open(base + ".conf", "w") as fh:
        fh.write(f"daemonize: false\npcap_interfaces_map: {base}.map\npcap_ifindex: map\n"
                 f"plugins: sfprobe\nsampling_rate: {int(sampling)}\n"
                 f"sfprobe_receiver: {receiver}\nsfprobe_agentip: {agent}\n")
    log = open(base + ".log", "a")
    return node.popen(["pmacctd", "-f", base + ".conf"], stdout=log, stderr=subprocess.STDOUT)


class RouterSession:
    """Controller, routers and agents: ``with RouterSession(fabric, folder) as s:``."""

    def __init__(self, fabric: Clos, folder: str, algorithm: str = "auto", agents=None,
                 bw: float = 0.0, probes: bool = True, controller: int | None = None,
                 sflow: int = 0, traffic: bool = True, secure: bool = False,
                 queue_s: float = QUEUE_S, priority: bool = True, fair_hosts: bool = True,
                 agent_args: tuple = ()):
        """``controller``: the REST port of a controller started elsewhere (on the management
        address, ``--wsapi-host 172.30.255.254``), or a list of them (redundant controllers:
        the agents get every URL); None starts one here. External controllers may start after
        the session: the address exists once the network is up, and the agents retry.
        ``secure``: the controller serves HTTPS with an admin token and host secrets
        (``pki.make_pki`` in ``folder/pki``), each agent holds its own host's credential."""
        self.fabric, self.folder = fabric, folder
        self.algorithm = algorithm
        self.agent_hosts = list(fabric.host_leaves) if agents is None else list(agents)
        self.bw = bw  # Mbit/s of every link (0: unshaped), queues of QUEUE_S (0.2 s) of line rate
        self.queue_s = queue_s  # or this long (an all-to-all's incast: harness/router_jobs.py)
        self.priority = priority  # shaped links serve the probes' class first (PriorityLink)
        self.fair_hosts = fair_hosts  # and a host's port shares its rate among its peers
        self.plan = SidPlan.of(fabric)
        self.probes = probes  # the agents probe their paths (--no-probes when False)
        self.sflow = sflow  # every router samples 1 in sflow packets into the controller (pmacctd)
        self.traffic = traffic  # the agents report their flows' bytes (--no-traffic when False)
        self.agent_args = tuple(agent_args)  # more options of every agent (--probe-period)
        self.external = controller
        self.secure = secure
        self.pki: dict = {}
        self.net = self.ctl = None
        self.url = ""
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> RouterSession:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        with signals_held():
            self.close()

    def start(self) -> None:
        from mininet.link import Link
        from mininet.net import Mininet

        from controller.enforcement.srv6_config import router_ips
        from topologies.clos import shaped
        from topologies.routers import CONTROLLER_IP, MGMT_NET, PriorityLink, RoutersTopo, warm
        path = os.path.join(self.folder, "fabric.json")
        doc = self.fabric.to_dict()
        if self.bw:  # the controller's rates and learning floor at the shaped speed
            doc["link_gbps"] = self.bw / 1000
        with open(path, "w") as fh:
            json.dump(doc, fh)
        link = shaped(self.bw, max(30_000, int(self.bw * 1e6 / 8 * self.queue_s)))
        if link and self.priority:
            link["cls"] = PriorityLink
        self.net = Mininet(topo=RoutersTopo(fabric=self.fabric, link=link,
                                            routers_mgmt=bool(self.sflow),
                                            fair=self.fair_hosts),
                           controller=None, link=Link)
        self.net.start()
        warm(self.net, self.fabric)
        sflow = ["--mlroute-sflow-port", "0"]
        if self.sflow:
            port = free_ports(1, CONTROLLER_IP, udp=True)[0]
            sflow = ["--mlroute-sflow-host", CONTROLLER_IP, "--mlroute-sflow-port", str(port),
                     "--mlroute-sflow-agents", MGMT_NET, "--mlroute-sflow-sampling-points",
                     "all"]
            agents = router_ips(self.fabric)
            for sw in self.fabric.dpids:
                self.procs.append(pmacctd(self.net[sw], self.folder, self.sflow,
                                          f"{CONTROLLER_IP}:{port}", agents[sw]))
        if self.external is not None:
            ports = self.external if isinstance(self.external, list) else [self.external]
            self.url = ",".join(f"http://{CONTROLLER_IP}:{p}" for p in ports)
        else:  # the REST API on the management network (topologies/routers.py), where the
            rest, of = free_ports(2)  # hosts' agents reach it
            security, token = [], None
            if self.secure:
                from emulation.harness.pki import make_pki
                self.pki = make_pki(os.path.join(self.folder, "pki"), CONTROLLER_IP,
                                    credential_hosts=self.agent_hosts)
                security = ["--mlroute-token-file", self.pki["token"],
                            "--mlroute-host-secret-file", self.pki["secrets"],
                            "--mlroute-tls-cert", self.pki["cert"],
                            "--mlroute-tls-key", self.pki["key"]]
                with open(self.pki["token"]) as fh:
                    token = fh.read().strip()
            self.ctl = ControllerProcess(path, os.path.join(self.folder, "controller.log"),
                                         self.algorithm, "srv6", rest, of,
                                         ["--mlroute-southbound", "none", *sflow, *security],
                                         token=None, rest_host=CONTROLLER_IP,
                                         ca_file=self.pki.get("ca"))
            self.ctl.token = token  # from its file: not on the controller's command line
            self.ctl.start()
            self.url = self.ctl.url
        for h in self.agent_hosts:
            self.start_agent(h)

    def start_agent(self, host: str) -> subprocess.Popen:
        log = open(os.path.join(self.folder, f"agent-{host}.log"), "a")
        p = self.net[host].popen([AGENT, "--url", self.url,
                                  "--host", host, "--lock",
                                  os.path.join(self.folder, f"agent-{host}.lock"),
                                  "--ports-file", self.ports_file(host),
                                  *(["--credential-file", self.credential_file(host),
                                     "--ca-file", self.pki["ca"]] if self.pki else []),
                                  *([] if self.probes else ["--no-probes"]),
                                  *([] if self.traffic else ["--no-traffic"]),
                                  *self.agent_args],
                                 stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def credential_file(self, host: str) -> str:
        """The host's own credential (``secure``), as ``mlroute agent-credential`` writes it."""
        return os.path.join(self.folder, "pki", f"{host}.credential")

    def ports_file(self, host: str) -> str:
        """Where the host's agent writes host mode's source ports (``--ports-file``)."""
        return os.path.join(self.folder, f"ports-{host}")

    def _popen(self, args, **kw) -> subprocess.Popen:
        p = subprocess.Popen(args, **kw)
        self.procs.append(p)
        return p

    def host_queues(self, fair: bool) -> None:
        """Every host's shaped fabric ports queued anew, with a class per peer (``fair``:
        ``topologies.routers.fair_tc``) or without (one FIFO besides the probes' class), so
        that one fabric measures both; the session must have been built with ``fair_hosts``
        (the ports know their peers)."""
        from topologies.routers import PriorityIntf
        for h in self.fabric.host_leaves:
            for i in self.net[h].intfList():
                if not isinstance(i, PriorityIntf) or "fair_peers" not in i.params:
                    continue
                lines, _ = i.tc_lines(float(i.params["bw"]), i.params.get("queue_bytes"),
                                      i.params["fair_peers"] if fair else ())
                out = i.cmd("; ".join([f"tc qdisc del dev {i.name} root", *lines]))
                if out.strip():
                    raise RuntimeError(f"{i.name}: tc failed: {out.strip()[-300:]}")

    def steered(self, host: str) -> int:
        """Rules the host's agent holds now."""
        return sum(1 for line in self.net[host].cmd("ip rule").splitlines()
                   if "lookup 2" in line and line.split(":")[0].strip().isdigit()
                   and 10000 <= int(line.split(":")[0]) < 30000)

    def sid_bytes(self, switch: str, prefix: str | None = None) -> int:
        """Bytes counted by a SID of ``switch`` (its uN by default): summed over its routes
        (the uN is on every port, at metrics 1, 2, ...; the lowest alive one counts)."""
        out = self.net[switch].cmd(f"ip -s -6 route show {prefix or self.plan.locator(switch)}")
        words = out.split()
        return sum(int(words[i + 1]) for i, w in enumerate(words[:-1]) if w == "bytes")

    def retransmits(self, hosts) -> int:
        """TCP segments the ``hosts`` have retransmitted since they started (their
        namespaces' ``/proc/net/snmp``)."""
        n = 0
        for h in hosts:
            rows = [line.split() for line in self.net[h].cmd("cat /proc/net/snmp").splitlines()
                    if line.startswith("Tcp:")]
            if len(rows) == 2:
                n += int(rows[1][rows[0].index("RetransSegs")])
        return n

    def uplink_bytes(self, fabric=None) -> dict[str, int]:
        """Bytes every router has sent on each uplink (``lower->upper``), from its
        interfaces' counters: what ``collectives.uplink_bytes`` reads from Open vSwitch."""
        f = fabric or self.fabric
        out, seen = {}, {}
        for lower, upper in f.links():
            if lower not in seen:
                stats = json.loads(self.net[lower].cmd("ip -j -s link show") or "[]")
                seen[lower] = {i["ifname"]: i["stats64"]["tx"]["bytes"] for i in stats
                               if "stats64" in i}
            out[f"{lower}->{upper}"] = sum(seen[lower].get(f"{lower}-eth{p}", 0)
                                           for p in f.ports_to(lower, upper))
        return out

    def close(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(10)
        self.procs = []
        if self.net is not None:
            self.net.stop()
            self.net = None
        if self.ctl is not None:
            self.ctl.stop()
