"""Static switch and host configuration of SRv6 mode, computed once from the fabric model.

Every switch gets link addresses, its SIDs (``srv6.SidPlan``: uN, uA per link member, the
classic End.X, a decapsulation SID per host at the leaves) and its underlay routes: every
other locator and every host's IPv4 address over all shortest paths (ECMP), with IPv6 next
hops for IPv4 too (RFC 5549), so the fabric needs no IPv4 link addresses. Nothing depends on
the jobs: the tables are set once, at install.

Two forms of one configuration (``SwitchConfig``):

* ``iproute2``: lines for ``ip -batch`` (Linux routers; the emulation applies them);
* ``sonic``: CONFIG_DB tables for ``config load``: ``SRV6_MY_LOCATORS``, ``SRV6_MY_SIDS``
  (uN, uA with interface and adjacency, uDT46 at the leaves), ``INTERFACE`` addresses and
  ``STATIC_ROUTE`` for the locators (docs/reference/srv6-config.md).

A leaf's host ports admit their host's own sources only (the source check: OpenFlow's is
``source_check.py``): IPv4 from the host's address, IPv6 from its host-link address (the outer
source of what its agent encapsulates); anything else a host port would have forwarded is
dropped. On Linux by policy rules (``source_rules``): per host port and family, its host's
source goes on (``goto`` the rest of the lookup), any other is blackholed. ``ip rule`` takes
the family from ``-6`` only, never from the address, so the IPv6 rules are a second batch for
``ip -6 -batch`` (``iproute2_v6``). On SONiC by ACL tables bound to the host ports
(``sonic_acl``).

Link member k (``fabric.links()`` order, members in order) is ``fdff:<k>::/64`` (lower switch
::1, upper ::2); host link j (hosts sorted, plane by plane) is ``fdfe:<j>::/64`` (host ::1,
leaf ::2).

>>> from controller.model.clos import Clos
>>> from controller.model.clos_wiring import wire
>>> c = Clos.leaf_spine(2, 2, 1)
>>> c = c.wire(wire(c))
>>> cfg = switch_config(SidPlan.of(c), "s0")
>>> [line for line in cfg.iproute2() if "End " in line]  # doctest: +NORMALIZE_WHITESPACE
['route replace fcbb:bbbb:3::/48 encap seg6local action End flavors next-csid lblen 32
  nflen 16 count dev s0-eth1 metric 1',
 'route replace fcbb:bbbb:3::/48 encap seg6local action End flavors next-csid lblen 32
  nflen 16 count dev s0-eth2 metric 2']

The uN is on every fabric port, at metrics 1, 2, ...: the kernel skips a route whose link lost
its carrier (``ignore_routes_with_linkdown``), so the switch keeps its uN while any port has
one; on one port it dropped every list through the switch when that one link failed. A port
set down administratively loses its routes for good (and its addresses, unless
``keep_addr_on_down``): after it is set up again, the switch's batch must be applied again.
"""
from __future__ import annotations

import ipaddress
from collections import deque
from dataclasses import dataclass, field

from controller.enforcement.ifnames import mininet_ifname, sonic_ifname  # noqa: F401 (its API)
from controller.enforcement.srv6 import SidPlan
from controller.errors import InputError
from controller.model.clos import Clos

LINK_NET = 0xFDFF << 112
HOST_NET = 0xFDFE << 112
ARP_SOURCE = "169.254.0.1"
# Every router's own IPv4 address (its loopback, SONiC's Loopback0), the source of its ICMP
# errors: with no IPv4 address at all Linux answers from 192.0.0.8 (RFC 7600), which names no
# router, so a host's TTL-limited probes could not tell the spines apart (host mode on routers,
# ``agent/portmap.py``). RFC 6598 space: neither the hosts' nor the management network's.
ROUTER_NET = ipaddress.IPv4Network("100.64.0.0/16")
# The class of the agents' path probes and their answers: DSCP 48 (CS6, network control, as BFD
# is marked). A router must serve it before the data (strict priority): a probe that waits
# behind a congested FIFO is late, and late enough looks like a failed link (issue 75: tens of
# ms of queue at 20 Mbit/s moved planned flows mid-step). ``priority_tc`` says how on Linux.
PROBE_DSCP = 48
CONTROL_SHARE = 0.05  # a shaped port's rate added for that class (probes need about 1-3%)
NEXT_CSID = "flavors next-csid lblen 32 nflen 16"
# the source check's policy rules (below the 1000 of l3mdev VRF rules): a genuine source jumps
# from PREF_GENUINE over PREF_FORGED to the nop at PREF_ON, where the usual lookup goes on
PREF_GENUINE, PREF_FORGED, PREF_ON = 900, 901, 902
# (sysctl, value, why) of every router: ``SYSCTLS`` for ``sysctl -w``, the sysctl.d file
# ``mlroute srv6-config`` writes and the table of docs/reference/sysctls.md, all from this one
ROUTER_SYSCTLS = (
    ("net.ipv6.conf.all.disable_ipv6", "0", "IPv6 on: the SIDs, the locators and the link "
     "addresses are IPv6"),
    ("net.ipv6.conf.all.forwarding", "1", "route IPv6: the locators and the SIDs"),
    ("net.ipv4.ip_forward", "1", "route the hosts' IPv4 over IPv6 next hops (RFC 5549)"),
    ("net.ipv4.fib_multipath_hash_policy", "3", "IPv4 ECMP on the packet's 5-tuple: policy 1 "
     "takes a hash the skb already carries, and a veth carries the sending socket's random one "
     "across namespaces, so a connection's path would not follow its ports"),
    ("net.ipv4.fib_multipath_hash_fields", "0x37", "the 5-tuple's fields for policy 3 (source "
     "and destination address, protocol, source and destination port)"),
    ("net.ipv6.fib_multipath_hash_policy", "1", "IPv6 ECMP on layer 4 (addresses, next "
     "header, ports), not on the addresses and flow label alone (policy 0)"),
    ("net.ipv6.conf.all.ignore_routes_with_linkdown", "1", "a link whose carrier is down "
     "leaves the ECMP hash"),
    ("net.ipv4.conf.all.ignore_routes_with_linkdown", "1", "the same for IPv4 routes"),
    ("net.ipv4.icmp_ratelimit", "0", "host mode's probes: no ICMP error limit per destination "
     "host (6, then 1 a second); the router's global one stays (net.ipv4.icmp_msgs_per_sec, "
     "1,000 a second)"),
    ("net.ipv6.conf.all.keep_addr_on_down", "1", "a link set down and up keeps its IPv6 "
     "addresses (Linux drops them by default, and the routes over them with them)"),
)
SYSCTLS = tuple(f"{k}={v}" for k, v, _why in ROUTER_SYSCTLS)

def _net(base: int, k: int) -> ipaddress.IPv6Network:
    if k >= 1 << 32:
        raise InputError("SRv6: over 2^32 links")
    return ipaddress.IPv6Network((base | (k << 80), 64))


def _host(net: ipaddress.IPv6Network, n: int) -> str:
    return str(net.network_address + n)


@dataclass
class Addressing:
    """Every link member's and host link's /64, and who holds ::1 and ::2."""
    links: dict = field(default_factory=dict)  # (a, b, member) -> (my address, peer's)
    hosts: dict = field(default_factory=dict)  # (host, plane) -> (host addr, leaf addr)

    @classmethod
    def of(cls, fabric: Clos) -> Addressing:
        out = cls()
        k = 0
        for lower, upper in fabric.links():
            for m in range(fabric.bundle(lower, upper)):
                net = _net(LINK_NET, k)
                lo, up = _host(net, 1), _host(net, 2)
                out.links[(lower, upper, m)] = (lo, up)
                out.links[(upper, lower, m)] = (up, lo)
                k += 1
        j = 0
        for h in sorted(fabric.host_leaves):
            for q, _leaf in enumerate(fabric.host_leaves[h]):
                net = _net(HOST_NET, j)
                out.hosts[(h, q)] = (_host(net, 1), _host(net, 2))
                j += 1
        return out


@dataclass
class SwitchConfig:
    """One switch's static configuration (see the module text)."""
    switch: str
    addresses: list = field(default_factory=list)  # (ifname, address/64)
    sids: list = field(default_factory=list)  # (prefix, action, attrs dict, ifname)
    routes: list = field(default_factory=list)  # (prefix, [(next hop, ifname)])
    locator: str = ""
    # a leaf's IPv4 source for ARP towards its hosts (End.DX4 resolves them; never routed)
    arp_source: str = ""
    host_ports: list = field(default_factory=list)  # (ifname, host IPv4, host-link IPv6)
    router_ip: str = ""  # its own IPv4 address on lo (``ROUTER_NET``), before ``arp_source``

    def iproute2(self) -> list[str]:
        """Lines for ``ip -batch -`` (addresses, SIDs, routes; idempotent)."""
        out = [f"addr replace {a}/64 dev {i} nodad" for i, a in self.addresses]
        if self.router_ip:  # the first global address of lo: what ICMP errors come from
            out.append(f"addr replace {self.router_ip}/32 dev lo")
        if self.arp_source:
            out.append(f"addr replace {self.arp_source}/32 dev lo")
        for prefix, action, attrs, ifname in self.sids:
            if action == "uN":
                how = f"End {NEXT_CSID}"
            elif action == "uA":
                how = f"End.X nh6 {attrs['adj']} {NEXT_CSID}"
            elif action == "End.X":
                how = f"End.X nh6 {attrs['adj']}"
            elif action == "uDX4":
                how = f"End.DX4 nh4 {attrs['nh4']}"
            else:
                raise AssertionError(action)
            metric = f" metric {attrs['metric']}" if "metric" in attrs else ""
            out.append(f"route replace {prefix} encap seg6local action {how} count dev "
                       f"{ifname}{metric}")
        for prefix, hops in self.routes:
            via = "via inet6 " if "." in prefix else "via "  # IPv4 over IPv6 next hops
            if len(hops) == 1:
                out.append(f"route replace {prefix} {via}{hops[0][0]} dev {hops[0][1]}")
            else:
                nh = " ".join(f"nexthop {via}{a} dev {i}" for a, i in hops)
                out.append(f"route replace {prefix} {nh}")
        return out + self.source_rules(4)

    def iproute2_v6(self) -> list[str]:
        """Lines for ``ip -6 -batch -``: the source check's IPv6 rules (none off the leaves)."""
        return self.source_rules(6)

    def source_rules(self, family: int) -> list[str]:
        """The source check's policy rules of one family (module text; idempotent: the three
        priorities are flushed first). A host port's packets to the router itself are looked
        up in ``local`` first (priority 0) and are not checked."""
        if not self.host_ports:
            return []
        k, bits = (1, 32) if family == 4 else (2, 128)
        out = [f"rule flush pref {p}" for p in (PREF_GENUINE, PREF_FORGED, PREF_ON)]
        out.append(f"rule add pref {PREF_ON} nop")
        out += [f"rule add pref {PREF_GENUINE} iif {p[0]} from {p[k]}/{bits} goto {PREF_ON}"
                for p in self.host_ports]
        out += [f"rule add pref {PREF_FORGED} iif {p[0]} blackhole" for p in self.host_ports]
        return out

    def sonic_acl(self) -> dict:
        """The source check in CONFIG_DB: per family an ACL table type matching the ingress
        port (SONiC's own L3 and L3V6 types match no port), its table bound to the host ports,
        per host port a rule forwarding its host's source and one table-wide lower drop; IPv6
        link-local sources (neighbour discovery) pass."""
        if not self.host_ports:
            return {}
        types, tables, rules = {}, {}, {}
        for fam, k, bits, match, ip_type in ((4, 1, 32, "SRC_IP", "IPV4ANY"),
                                             (6, 2, 128, "SRC_IPV6", "IPV6ANY")):
            name = f"MLROUTE_SOURCE_V{fam}"
            types[name] = {"MATCHES": ["IN_PORTS", match, "IP_TYPE"],
                           "ACTIONS": ["PACKET_ACTION"], "BIND_POINTS": ["PORT"]}
            tables[name] = {"policy_desc": f"mlroute: host ports admit their host's IPv{fam} "
                                           "source only", "type": name, "stage": "ingress",
                            "ports": [p[0] for p in self.host_ports]}
            for p in self.host_ports:
                rules[f"{name}|HOST_{p[0]}"] = {"PRIORITY": "20", "PACKET_ACTION": "FORWARD",
                                                "IN_PORTS": p[0], match: f"{p[k]}/{bits}"}
            if fam == 6:
                rules[f"{name}|LINK_LOCAL"] = {"PRIORITY": "15", "PACKET_ACTION": "FORWARD",
                                               match: "fe80::/10"}
            rules[f"{name}|FORGED"] = {"PRIORITY": "10", "PACKET_ACTION": "DROP",
                                       "IP_TYPE": ip_type}
        return {"ACL_TABLE_TYPE": types, "ACL_TABLE": tables, "ACL_RULE": rules}

    def sonic(self) -> dict:
        """CONFIG_DB tables (``config load``); IPv4 host routes are left to the underlay the
        operator runs (BGP): SONiC's SIDs need only the locators routed. A leaf's also hold
        the source check (``sonic_acl``)."""
        loc = f"loc_{self.switch}"
        sids = {}
        for prefix, action, attrs, ifname in self.sids:
            if action == "End.X" or attrs.get("metric", 1) > 1:
                continue  # the classic form, the uN's other ports: SONiC's static SIDs are the
                # uSID behaviours, on the switch and not a port
            entry = {"action": "uDT46" if action == "uDX4" else action,
                     "decap_dscp_mode": "pipe"}
            if action == "uA":
                entry.update(interface=ifname, adj=attrs["adj"])
            sids[f"{loc}|{prefix}"] = entry
        interfaces = {}
        for ifname, addr in self.addresses:
            interfaces[ifname] = {}
            interfaces[f"{ifname}|{addr}/64"] = {}
        static = {p: {"nexthop": ",".join(a for a, _ in hops),
                      "ifname": ",".join(i for _, i in hops)}
                  for p, hops in self.routes if ":" in p}
        loopback = ({"Loopback0": {}, f"Loopback0|{self.router_ip}/32": {}}
                    if self.router_ip else {})
        return {"LOOPBACK_INTERFACE": loopback,
                "SRV6_MY_LOCATORS": {loc: {"prefix": self.locator.split("/")[0],
                                           "block_len": "32", "node_len": "16",
                                           "func_len": "16", "arg_len": "0"}},
                "SRV6_MY_SIDS": sids, "INTERFACE": interfaces, "STATIC_ROUTE": static,
                **self.sonic_acl()}


def _distances(fabric: Clos, alive) -> dict[str, dict[str, int]]:
    """Hops between switches over links with a member up (BFS from every switch)."""
    out = {}
    for src in fabric.switches():
        dist = {src: 0}
        todo = deque([src])
        while todo:
            s = todo.popleft()
            for n in alive.get(s, ()):
                if n not in dist:
                    dist[n] = dist[s] + 1
                    todo.append(n)
        out[src] = dist
    return out


def alive_neighbours(fabric: Clos) -> dict[str, list[str]]:
    """Switch -> the switches it reaches over a link with a member up."""
    out: dict[str, list[str]] = {}
    for lower, upper in fabric.links():
        if fabric.alive_members(lower, upper):
            out.setdefault(lower, []).append(upper)
            out.setdefault(upper, []).append(lower)
    return out


def router_ips(fabric: Clos) -> dict[str, str]:
    """Switch -> its own IPv4 address (``ROUTER_NET``, in ``fabric.switches()`` order).

    >>> from controller.model.clos import Clos
    >>> router_ips(Clos.leaf_spine(2, 2, 1))
    {'l0': '100.64.0.1', 'l1': '100.64.0.2', 's0': '100.64.0.3', 's1': '100.64.0.4'}
    """
    names = fabric.switches()
    if len(names) >= ROUTER_NET.num_addresses - 1:
        raise InputError(f"SRv6: {len(names)} switches, more than {ROUTER_NET} holds")
    return {s: str(ROUTER_NET.network_address + i + 1) for i, s in enumerate(names)}


def _lower_upper(fabric: Clos, a: str, b: str) -> tuple[str, str]:
    return (a, b) if fabric.tier_of[a] < fabric.tier_of[b] else (b, a)


def configs(plan: SidPlan, ifname=mininet_ifname) -> dict[str, SwitchConfig]:
    """Every switch's configuration (one BFS per switch: O(switches x links))."""
    fabric = plan.fabric
    if not fabric.wired:
        raise InputError("SRv6 configuration: the fabric needs its wiring (ports, host_ip): "
                         "mlroute srv6-config wires a generated one, mlroute fabric --cabling "
                         "declares a real one")
    addr = Addressing.of(fabric)
    alive = alive_neighbours(fabric)
    dist = _distances(fabric, alive)
    out = {s: _config(plan, fabric, s, addr, alive, dist, ifname) for s in fabric.switches()}
    for s, ip in router_ips(fabric).items():
        out[s].router_ip = ip
    return out


def switch_config(plan: SidPlan, switch: str, ifname=mininet_ifname) -> SwitchConfig:
    return configs(plan, ifname)[switch]


def _config(plan, fabric, s, addr, alive, dist, ifname) -> SwitchConfig:
    cfg = SwitchConfig(s, locator=plan.locator(s))

    def members(n):
        lower, upper = _lower_upper(fabric, s, n)
        ports = fabric.ports_to(s, n)
        return [(m, ports[m]) for m in fabric.alive_members(lower, upper)]

    for n in [x for x in fabric.neighbours(s) if x in plan.node]:
        for m, port in enumerate(fabric.ports_to(s, n)):
            cfg.addresses.append((ifname(s, port), addr.links[(s, n, m)][0]))
    # the uN once per fabric port, the n-th at metric n: the kernel deletes a route whose
    # device goes down, and a uN on one port made the switch drop every list through it
    # when that one link failed (a seg6local route on lo never fires: design/srv6.md)
    for j, ifn in enumerate(dict.fromkeys(i for i, _ in cfg.addresses) or [ifname(s, 1)]):
        cfg.sids.append((cfg.locator, "uN", {"metric": j + 1}, ifn))
    for i, (n, m) in enumerate(plan.adjacency[s]):
        port = fabric.ports_to(s, n)[m]
        adj = addr.links[(s, n, m)][1]
        cfg.sids.append((f"{plan.address(0xE000 + i)}/48", "uA", {"adj": adj}, ifname(s, port)))
        cfg.sids.append((f"{plan.address(plan.node[s], 0xE000 + i)}/64", "End.X", {"adj": adj},
                         ifname(s, port)))
    for h in fabric.hosts_on.get(s, []):
        cfg.arp_source = ARP_SOURCE
        q = fabric.plane_of[s]
        leaf, function = plan.decap_of(h, q)
        port = fabric.ports[s][h]
        host_addr, leaf_addr = addr.hosts[(h, q)]
        cfg.addresses.append((ifname(s, port), leaf_addr))
        cfg.sids.append((f"{plan.address(plan.node[s], function)}/64", "uDX4",
                         {"nh4": fabric.ip_of(h, q)}, ifname(s, port)))
        cfg.routes.append((f"{fabric.ip_of(h, q)}/32", [(host_addr, ifname(s, port))]))
        cfg.host_ports += [(ifname(s, p), fabric.ip_of(h, q), host_addr)
                           for p in fabric.ports_to(s, h)]

    def hops_to(target):
        d = dist[target].get(s)
        if d is None or d == 0:
            return []
        return [(addr.links[(s, n, m)][1], ifname(s, port))
                for n in alive.get(s, ()) if dist[target].get(n) == d - 1
                for m, port in members(n)]

    for t in fabric.switches():
        hops = hops_to(t) if t != s else []
        if hops:
            cfg.routes.append((plan.locator(t), hops))
    for leaf, hosts in sorted(fabric.hosts_on.items()):
        if leaf == s or fabric.plane_of[leaf] != fabric.plane_of[s]:
            continue
        hops = hops_to(leaf)
        for h in sorted(hosts):
            if hops:
                cfg.routes.append((f"{fabric.ip_of(h, fabric.plane_of[leaf])}/32", hops))
    return cfg


def host_config(plan: SidPlan, host: str, ifname=None, networks=None) -> list[str]:
    """``ip -batch`` lines of a host: its IPv6 link address, the uSID block (with several
    planes each plane's locators, ``SidPlan.plane_prefixes``) and its IPv4 fabric through its
    leaf (RFC 5549 next hop), one interface per plane. ``networks``: the
    IPv4 fabric of each plane (default: the emulation's 10.0.0.0/8, 10.<16q>.0.0/12)."""
    fabric = plan.fabric
    addr = Addressing.of(fabric)
    out = []
    for q, leaf in enumerate(fabric.host_leaves[host]):
        dev = ifname(host, q) if ifname else f"{host}-eth{q}"
        mine, gw = addr.hosts[(host, q)]
        out.append(f"addr replace {mine}/64 dev {dev} nodad")
        if len(fabric.planes) == 1:
            out.append(f"route replace {plan.block} via {gw} dev {dev}")
        else:  # each plane's lists leave by its own interface
            out += [f"route replace {net} via {gw} dev {dev}" for net in plan.plane_prefixes(q)]
        net = networks[q] if networks else ipaddress.IPv4Network(
            f"{fabric.ip_of(host, q)}/{8 if len(fabric.planes) == 1 else 12}",
            strict=False)  # the emulation's (clos_wiring.wire)
        out.append(f"route replace {net} via inet6 {gw} dev {dev}")
    return out


def priority_tc(dev: str, dscp: int = PROBE_DSCP, rate_mbit: float = 0.0,
                queue_bytes: int = 0) -> list[str]:
    """``tc -batch`` lines that serve packets of ``dscp`` (IPv6 traffic class or IPv4 TOS)
    on ``dev`` before any other, so a congested port delays the probes by one packet at most,
    not by its queue. An unshaped port (a router at line rate): a ``prio`` qdisc of two bands.
    Shaped at ``rate_mbit`` (the emulation's links): an HTB whose class ``5:10`` (the probes,
    ``CONTROL_SHARE`` of the rate on top of it) is served first and class ``5:2`` (the rest,
    at ``rate_mbit``: its leaf ``5:20`` with a byte FIFO of ``queue_bytes``) after. The data
    keep the whole emulated rate: on a real 100-400 Gbit/s port the probes are a few
    millionths of it, at 20 Mbit/s their 0.3-0.6 Mbit/s took 2-3% of a host's port.

    >>> priority_tc("eth1")  # doctest: +NORMALIZE_WHITESPACE
    ['qdisc replace dev eth1 root handle 5: prio bands 2 priomap 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1',
     'filter add dev eth1 parent 5: protocol ipv6 prio 1 u32 match ip6 priority 0xc0 0xfc
      flowid 5:1',
     'filter add dev eth1 parent 5: protocol ip prio 2 u32 match ip tos 0xc0 0xfc flowid 5:1']
    >>> [x.split(" htb ")[1] for x in priority_tc("e", 46, 20, 500_000) if " htb " in x]
    ... # doctest: +NORMALIZE_WHITESPACE
    ['default 20', 'rate 21mbit burst 15k quantum 9000',
     'rate 1mbit ceil 21mbit burst 15k quantum 9000 prio 0',
     'rate 20mbit ceil 20mbit burst 15k quantum 9000 prio 1',
     'rate 20mbit ceil 20mbit burst 15k quantum 9000 prio 1']
    """
    if not 0 <= int(dscp) <= 63:
        raise InputError(f"a DSCP is 0 to 63, not {dscp}")
    tos = f"0x{int(dscp) << 2:02x} 0xfc"
    if rate_mbit:
        rate, control = float(rate_mbit), float(rate_mbit) * CONTROL_SHARE
        lines = [f"qdisc replace dev {dev} root handle 5: htb default 20",
                 f"class add dev {dev} parent 5: classid 5:1 htb rate {rate + control:g}mbit "
                 "burst 15k quantum 9000",
                 f"class add dev {dev} parent 5:1 classid 5:10 htb rate {control:g}mbit "
                 f"ceil {rate + control:g}mbit burst 15k quantum 9000 prio 0",
                 *(f"class add dev {dev} parent {parent} classid {cls} htb rate {rate:g}mbit "
                   f"ceil {rate:g}mbit burst 15k quantum 9000 prio 1"
                   for parent, cls in (("5:1", "5:2"), ("5:2", "5:20"))),
                 f"qdisc add dev {dev} parent 5:10 handle 11: bfifo limit 30000",
                 *([f"qdisc add dev {dev} parent 5:20 handle 12: bfifo limit {int(queue_bytes)}"]
                   if queue_bytes else [])]
        flowid = "5:10"
    else:
        lines = [f"qdisc replace dev {dev} root handle 5: prio bands 2 priomap " + " ".join(
            ["1"] * 16)]
        flowid = "5:1"
    return lines + [f"filter add dev {dev} parent 5: protocol ipv6 prio 1 u32 match ip6 priority "
                    f"{tos} flowid {flowid}",
                    f"filter add dev {dev} parent 5: protocol ip prio 2 u32 match ip tos {tos} "
                    f"flowid {flowid}"]
