"""Host ports admit their own host's source address only (anti-spoofing, issue 59): no host
sends IPv4 as another, so none adds pairs to another job's learned matrix or reaches a host
under another's address.

Where (``rules``: tables, priorities): table 0 of a leaf, under the planned flows (they match
the host's port and address already) and above local delivery. Per host and port of it, IPv4
from the host's address (on several planes, its address in the leaf's plane) goes on to table
1, where the leaf delivers to its hosts and forwards up (``clos_rules``); per host port, any
other IPv4 goes to table ``T_FORGED``, whose one entry drops and counts it (the metric
``mlroute_forged_packets_total``, its counter read with the port counters). A host with an
interface in each plane gets the entries at each plane's leaf, with that plane's address.

Not checked, and why:

* A port with no known host: its IPv4 goes on to table 1 by one entry per leaf, at the
  default's priority, as before. With zero configuration a host is known from its ARP, which
  its first IPv4 may precede; the topology guard refuses a known address claimed from another
  port (``discovery.guard``).
* ARP: leaves send every ARP frame to the controller, which answers from the addresses it
  knows, so no ARP reaches another host; the guard refuses a claim of another's address.
* MPLS is not IPv4, but a leaf pops its own label from any port and would forward what it
  popped: while sr's labels are held, MPLS from a host port goes to ``T_FORGED`` too.

Cost per leaf: 2 entries per host port (3 while sr's labels are held) and 2 per leaf (the
drop, the way on for unchecked ports).
"""
from __future__ import annotations

from controller.enforcement.openflow import ETH_IPV4, ETH_MPLS, FlowRule, rule
from controller.enforcement.rules import (
    PRIO_DEFAULT,
    PRIO_FORGED,
    PRIO_MPLS,
    PRIO_SOURCE,
    T_CLASSIFY,
    T_DELIVER,
    T_FORGED,
)


def host_ports(fabric, leaf: str) -> dict[int, list[str]]:
    """The leaf's ports to known hosts, each with the addresses it admits (its hosts' in the
    leaf's plane); a host with no address there leaves its port unchecked."""
    ips, out = fabric.addresses_at(leaf), {}
    for h in fabric.hosts_on.get(leaf, []):
        if ips.get(h):
            for p in fabric.ports_to(leaf, h):
                out.setdefault(p, []).append(ips[h])
    return out


def forged_drop(dpid: int) -> FlowRule:
    """The leaf's one entry of ``T_FORGED``: drops what its host ports refused; its packet
    counter is what they refused."""
    return rule(dpid, T_FORGED, 0, {})


def source_check(fabric, leaf: str, labels: bool = False) -> list[FlowRule]:
    """The leaf's anti-spoofing entries (module docstring); ``labels``: sr's label entries
    are held (the leaf pops its own label)."""
    dpid, out = fabric.dpids[leaf], []
    for port, addresses in sorted(host_ports(fabric, leaf).items()):
        out += [rule(dpid, T_CLASSIFY, PRIO_SOURCE, {"in_port": port, "eth_type": ETH_IPV4,
                                                     "ipv4_src": a}, goto=T_DELIVER)
                for a in sorted(set(addresses))]
        out.append(rule(dpid, T_CLASSIFY, PRIO_FORGED, {"in_port": port, "eth_type": ETH_IPV4},
                        goto=T_FORGED))
        if labels:
            out.append(rule(dpid, T_CLASSIFY, PRIO_MPLS + 1, {"in_port": port,
                                                              "eth_type": ETH_MPLS},
                            goto=T_FORGED))
    return out + [forged_drop(dpid),
                  rule(dpid, T_CLASSIFY, PRIO_DEFAULT, {"eth_type": ETH_IPV4}, goto=T_DELIVER)]
