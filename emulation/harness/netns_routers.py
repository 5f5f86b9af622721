"""A router fabric in bare network namespaces: the configuration ``mlroute srv6-config`` writes
(``srv6_config.configs``, ``host_config``) applied with ``ip netns`` and veths only, no Mininet
or Open vSwitch, so a check of the routers' own behaviour (their ICMP source, their L4 ECMP
hash) runs without the emulation. Every namespace is named ``hC-<pid>-<node>`` and deleted in
``close``, also when building fails.
"""
from __future__ import annotations

import json
import os
import subprocess

from controller.enforcement.srv6 import SidPlan
from controller.enforcement.srv6_config import SYSCTLS, Addressing, configs, host_config
from controller.model.clos import Clos


def _run(args, timeout=30, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=True, **kw)


class NetnsRouters:
    """``with NetnsRouters(fabric) as n:`` the fabric's routers and hosts, one namespace each."""

    def __init__(self, fabric: Clos):
        if len(fabric.planes) > 1:
            raise ValueError("one plane only")
        self.fabric = fabric
        self.plan = SidPlan.of(fabric)
        self.prefix = f"hC-{os.getpid()}-"
        self.made: list[str] = []

    def ns(self, node: str) -> str:
        return self.prefix + node

    def __enter__(self) -> NetnsRouters:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def exec(self, node: str, args: list[str], timeout=30, **kw) -> subprocess.CompletedProcess:
        return _run(["ip", "netns", "exec", self.ns(node), *args], timeout=timeout, **kw)

    def popen(self, node: str, args: list[str], **kw) -> subprocess.Popen:
        return subprocess.Popen(["ip", "netns", "exec", self.ns(node), *args], **kw)

    def _batch(self, node: str, lines: list[str], family: tuple[str, ...] = ()) -> None:
        _run(["ip", *family, "-n", self.ns(node), "-batch", "-"], input="\n".join(lines) + "\n")

    def start(self) -> None:
        f = self.fabric
        plan = self.plan
        cfg = configs(plan)
        nodes = list(f.dpids) + list(f.host_leaves)
        for n in nodes:
            _run(["ip", "netns", "add", self.ns(n)])
            self.made.append(n)
            _run(["ip", "-n", self.ns(n), "link", "set", "lo", "up"])
        for sw in f.dpids:
            for peer in f.neighbours(sw):
                if peer in f.host_leaves:
                    pairs = [(f"{peer}-eth0", peer, f"{sw}-eth{f.port(sw, peer)}", sw)]
                elif f.tier_of[peer] > f.tier_of[sw]:
                    pairs = [(f"{sw}-eth{a}", sw, f"{peer}-eth{b}", peer)
                             for a, b in zip(f.ports_to(sw, peer), f.ports_to(peer, sw))]
                else:
                    continue
                for a, na, b, nb in pairs:
                    _run(["ip", "link", "add", a, "netns", self.ns(na), "type", "veth", "peer",
                          "name", b, "netns", self.ns(nb)])
                    _run(["ip", "-n", self.ns(na), "link", "set", a, "up"])
                    _run(["ip", "-n", self.ns(nb), "link", "set", b, "up"])
        for sw in f.dpids:
            self.exec(sw, ["sysctl", "-qw", *SYSCTLS])
            self._batch(sw, cfg[sw].iproute2())
            if cfg[sw].iproute2_v6():  # a leaf's IPv6 source check (``ip -6 -batch`` only)
                self._batch(sw, cfg[sw].iproute2_v6(), ("-6",))
        for h in f.host_leaves:
            self._batch(h, [f"addr replace {f.ip_of(h)}/8 dev {h}-eth0"]
                        + host_config(plan, h))
        self.warm()

    def warm(self) -> None:
        """Every node pings its link peers once: IPv6 neighbours resolved before the test."""
        f = self.fabric
        addr = Addressing.of(f)
        procs = []
        for (a, _b, _m), (_mine, theirs) in addr.links.items():
            procs.append(self.popen(a, ["ping", "-c1", "-W1", theirs], stdout=subprocess.DEVNULL))
        for (h, _q), (_host_addr, leaf_addr) in addr.hosts.items():
            procs.append(self.popen(h, ["ping", "-c1", "-W1", leaf_addr],
                                    stdout=subprocess.DEVNULL))
        for p in procs:
            p.wait(10)

    def tx_bytes(self, node: str, ifname: str) -> int:
        """Bytes ``node`` sent on ``ifname`` (``ip -s link``)."""
        out = self.exec(node, ["ip", "-j", "-s", "link", "show", ifname]).stdout
        return json.loads(out)[0]["stats64"]["tx"]["bytes"]

    def close(self) -> None:
        for n in self.made:
            subprocess.run(["ip", "netns", "del", self.ns(n)], capture_output=True, timeout=30)
        self.made = []
