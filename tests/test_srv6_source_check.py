"""srv6 mode's source check at the routers' leaves (``srv6_config``: policy rules for Linux,
ACL tables for SONiC): each host port admits its own host's IPv4 address and host-link IPv6
address only, on a leaf-spine, a k = 4 fat-tree and two planes; and on real kernels, in bare
network namespaces (no Mininet or Open vSwitch), a forged source is dropped at the leaf and
the genuine one passes, plain IPv4 and SRv6-encapsulated alike."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from controller.cli import main as cli_main
from controller.enforcement.srv6 import SidPlan, segments
from controller.enforcement.srv6_config import (
    Addressing,
    configs,
    sonic_ifname,
)
from controller.model.clos import Clos
from controller.model.clos_wiring import wire
from emulation.harness.netns_routers import NetnsRouters

FABRICS = {
    "leaf-spine": lambda: Clos.leaf_spine(2, 2, 2),
    "fat-tree k=4": lambda: Clos.fat_tree(4),
    "two planes": lambda: Clos.leaf_spine(2, 3, 2, planes=2),
}


def wired(c: Clos) -> Clos:
    return c.wire(wire(c))


def expected(f: Clos, leaf: str, ifname) -> list[tuple[str, str, str]]:
    """(port, IPv4, IPv6) of every host port of the leaf, from the fabric and the addressing."""
    addr, q = Addressing.of(f), f.plane_of[leaf]
    return [(ifname(leaf, p), f.ip_of(h, q), addr.hosts[(h, q)][0])
            for h in f.hosts_on.get(leaf, []) for p in f.ports_to(leaf, h)]


@pytest.mark.parametrize("name", FABRICS)
def test_every_leaf_host_port_admits_its_hosts_sources_only(name):
    f = wired(FABRICS[name]())
    cfg = configs(SidPlan.of(f))
    seen = []
    for sw, c in cfg.items():
        ports = expected(f, sw, lambda s, p: f"{s}-eth{p}")
        v4 = [x for x in c.iproute2() if x.startswith("rule ")]
        v6 = c.iproute2_v6()
        if not ports:  # spines, aggregation and core switches check nothing
            assert v4 == [] and v6 == [] and "ACL_TABLE" not in c.sonic(), sw
            continue
        head = ["rule flush pref 900", "rule flush pref 901", "rule flush pref 902",
                "rule add pref 902 nop"]
        assert v4 == head + [f"rule add pref 900 iif {i} from {a}/32 goto 902"
                             for i, a, _ in ports] + [f"rule add pref 901 iif {i} blackhole"
                                                      for i, _, _ in ports], sw
        assert v6 == head + [f"rule add pref 900 iif {i} from {a}/128 goto 902"
                             for i, _, a in ports] + [f"rule add pref 901 iif {i} blackhole"
                                                      for i, _, _ in ports], sw
        assert c.iproute2()[-len(v4):] == v4  # after the routes: one batch, rules last
        seen += [(sw, a4, a6) for _, a4, a6 in ports]
    # every host's address of every plane is admitted exactly once, at its leaf of that plane
    hosts = [(f.host_leaves[h][q], f.ip_of(h, q), Addressing.of(f).hosts[(h, q)][0])
             for h in f.host_leaves for q in range(len(f.host_leaves[h]))]
    assert sorted(seen) == sorted(hosts)


@pytest.mark.parametrize("name", FABRICS)
def test_sonic_leaves_get_acl_tables_bound_to_their_host_ports(name):
    f = wired(FABRICS[name]())
    for sw, c in configs(SidPlan.of(f), sonic_ifname).items():
        ports = expected(f, sw, sonic_ifname)
        doc = c.sonic()
        if not ports:
            assert not {"ACL_TABLE", "ACL_RULE", "ACL_TABLE_TYPE"} & set(doc), sw
            continue
        names = [i for i, _, _ in ports]
        for fam, match, k, bits in ((4, "SRC_IP", 1, 32), (6, "SRC_IPV6", 2, 128)):
            t = f"MLROUTE_SOURCE_V{fam}"
            assert doc["ACL_TABLE_TYPE"][t]["MATCHES"] == ["IN_PORTS", match, "IP_TYPE"]
            assert doc["ACL_TABLE"][t] == {**doc["ACL_TABLE"][t], "type": t, "stage": "ingress",
                                           "ports": names}
            rules = {k_: v for k_, v in doc["ACL_RULE"].items() if k_.startswith(t + "|")}
            for p in ports:
                assert rules[f"{t}|HOST_{p[0]}"] == {"PRIORITY": "20", "PACKET_ACTION": "FORWARD",
                                                     "IN_PORTS": p[0], match: f"{p[k]}/{bits}"}
            drop = rules[f"{t}|FORGED"]
            assert drop["PACKET_ACTION"] == "DROP" and int(drop["PRIORITY"]) < 20
            assert drop["IP_TYPE"] == ("IPV4ANY" if fam == 4 else "IPV6ANY")
            if fam == 6:  # neighbour discovery from the host's link-local address passes
                assert rules[f"{t}|LINK_LOCAL"]["SRC_IPV6"] == "fe80::/10"
                assert int(drop["PRIORITY"]) < int(rules[f"{t}|LINK_LOCAL"]["PRIORITY"])
        json.dumps(doc)  # config load's input


def test_srv6_config_writes_a_leafs_ipv6_check_for_ip_6_batch(tmp_path, capsys):
    path = tmp_path / "fabric.json"
    path.write_text(json.dumps(wired(Clos.leaf_spine(2, 2, 2)).to_dict()))
    assert cli_main(["srv6-config", "--fabric", str(path), "--out", str(tmp_path / "o"),
                     "--format", "iproute2"]) == 0
    out = tmp_path / "o"
    assert sorted(p.name for p in out.glob("*.batch6")) == ["l0.batch6", "l1.batch6"]
    assert "rule add pref 901 iif l0-eth3 blackhole" in (out / "l0.batch").read_text()
    assert "from fdfe::1/128 goto 902" in (out / "l0.batch6").read_text()
    assert "rule" not in (out / "s0.batch").read_text()


# --- on real kernels, in bare namespaces -------------------------------------------------

SEND = """
import logging, sys
logging.getLogger("scapy").setLevel(logging.ERROR)
from scapy.all import ICMP, IP, IPv6, Ether, sendp
iface, mac, outer, sid, src, dst, n = sys.argv[1:8]
p = IP(src=src, dst=dst) / ICMP()
if sid:
    p = IPv6(src=outer, dst=sid, nh=4) / p  # what the agent's encapsulation sends (no SRH)
sendp(Ether(dst=mac) / p, iface=iface, count=int(n), verbose=0)
"""


class Fabric(NetnsRouters):
    """The router fabric in namespaces (``emulation/harness/netns_routers.py``: routers
    configured by ``srv6_config``, both batches; hosts by ``host_config``; every namespace
    deleted on exit), with what these checks read and send."""

    def ip(self, node: str, *args: str) -> str:
        return self.exec(node, ["ip", *args]).stdout

    def run(self, node: str, args: list[str]) -> str:
        return self.exec(node, args, timeout=60).stdout

    def echoes(self, host: str) -> int:
        """ICMP echo requests the host has received."""
        lines = [x.split() for x in self.run(host, ["cat", "/proc/net/snmp"]).splitlines()
                 if x.startswith("Icmp:")]
        return int(lines[1][lines[0].index("InEchos")])

    def send(self, host: str, src: str, dst: str, n: int, outer: str = "", sid: str = "") -> None:
        leaf = self.fabric.host_leaves[host][0]
        port = f"{leaf}-eth{self.fabric.port(leaf, host)}"
        link = json.loads(self.ip(leaf, "-j", "link", "show", port))
        self.run(host, [sys.executable, "-c", SEND, f"{host}-eth0", link[0]["address"], outer,
                        sid, src, dst, str(n)])


@pytest.mark.integration  # root: ip netns (no Mininet, no Open vSwitch)
@pytest.mark.timeout(300)  # about a minute: a scapy process per case
def test_a_forged_source_is_dropped_at_the_leaf_and_the_genuine_one_passes():
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 (ip netns)")
    f = wired(Clos.leaf_spine(1, 2, 2))
    addr = Addressing.of(f)
    me, neighbour, far, dst = "h0_0", "h0_1", "h1_1", "h1_0"  # h0_* on l0, h1_* on l1
    with Fabric(f) as n:
        sid = segments(n.plan, ["l0", "s0", "l1"], None, dst).sids[0]
        outer = {h: addr.hosts[(h, 0)][0] for h in (me, neighbour)}
        cases = [  # (what, source, outer source or "", genuine)
            ("IPv4", f.ip_of(me), "", True),
            ("IPv4 as a host of the same leaf", f.ip_of(neighbour), "", False),
            ("IPv4 as a host of another leaf", f.ip_of(far), "", False),
            ("SRv6", f.ip_of(me), outer[me], True),
            ("SRv6 from the same leaf's host's link address", f.ip_of(me), outer[neighbour],
             False),
            ("SRv6 from another address of the host's link", f.ip_of(me),
             outer[me].replace("::1", "::5"), False),
            ("SRv6 to the own leaf's decapsulation, inner IPv4 forged", f.ip_of(neighbour),
             outer[me], False),
        ]
        for what, src, out, genuine in cases:
            to = sid
            if "own leaf" in what:  # the neighbour's decapsulation SID at l0 (End.DX4)
                leaf, function = n.plan.decap_of(neighbour, 0)
                to = n.plan.address(n.plan.node[leaf], function)
            target = neighbour if "own leaf" in what else dst
            before = n.echoes(target)
            n.send(me, src, f.ip_of(target), 5, out, to if out else "")
            got = 0
            for _ in range(20):  # delivery takes a moment; a drop never arrives
                got = n.echoes(target) - before
                if got >= 5 or not genuine:
                    break
                subprocess.run(["sleep", "0.1"], check=True)
            if not genuine:
                subprocess.run(["sleep", "0.5"], check=True)
                got = n.echoes(target) - before
            assert got == (5 if genuine else 0), (what, got)
