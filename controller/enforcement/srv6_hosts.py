"""A host's static configuration in srv6 mode, and the sysctls of routers and hosts, as the
files an operator installs (``mlroute srv6-config``): why a host needs each piece is what its
agent does. The agent encapsulates towards the uSID block and its probes go there too, so the
host routes the block (``fcbb:bbbb::/32``) through its leaf, from its host-link address (the
outer source the leaf's source check admits); the other hosts' IPv4 addresses go through the
leaf as well, over an IPv6 next hop (RFC 5549), since the fabric has no IPv4 link addresses.

Per host: ``HOST.batch`` for ``ip -batch`` (its IPv4 address as a /32, its host-link address,
the two routes: ``srv6_config.host_config``, one interface per plane) and a systemd-networkd
``.network`` file per interface saying the same. A plane's IPv4 fabric is the smallest network
holding every host address of the plane (``plane_networks``). The sysctl.d files list
``srv6_config.ROUTER_SYSCTLS`` and ``HOST_SYSCTLS`` with why.

>>> from controller.model.clos import Clos
>>> plane_networks(Clos.leaf_spine(2, 2, 2).wire())
[IPv4Network('10.0.0.0/23')]
"""
from __future__ import annotations

import ipaddress

from controller.enforcement.srv6 import SidPlan
from controller.enforcement.srv6_config import ROUTER_SYSCTLS, Addressing, host_config

HOST_SYSCTLS = (
    ("net.ipv6.conf.all.disable_ipv6", "0", "IPv6 on: the host-link address, the "
     "encapsulation and the probes are IPv6"),
    ("net.ipv6.conf.default.disable_ipv6", "0", "the same on interfaces that appear later"),
    ("net.ipv6.conf.all.keep_addr_on_down", "1", "a link set down and up keeps its host-link "
     "address (Linux drops it by default, and the routes over it with it)"),
)


def sysctl_file(entries, role: str) -> str:
    """A sysctl.d file (``/etc/sysctl.d/90-mlroute-ROLE.conf``, then ``sysctl --system``)."""
    out = [f"# mlroute srv6-config: the sysctls of every {role} (docs/reference/sysctls.md)"]
    for key, value, why in entries:
        out += [f"# {why}", f"{key} = {value}"]
    return "\n".join(out) + "\n"


def router_sysctls() -> str:
    return sysctl_file(ROUTER_SYSCTLS, "router")


def host_sysctls() -> str:
    return sysctl_file(HOST_SYSCTLS, "host")


def plane_networks(fabric) -> list[ipaddress.IPv4Network]:
    """Per plane, the smallest IPv4 network holding every host's address there."""
    out = []
    for q in range(len(fabric.planes)):
        addrs = [int(ipaddress.IPv4Address(fabric.ip_of(h, q))) for h in fabric.host_leaves]
        lo, hi, bits = min(addrs), max(addrs), 32
        while bits and lo >> (32 - bits) != hi >> (32 - bits):
            bits -= 1
        out.append(ipaddress.IPv4Network((lo, bits), strict=False))
    return out


def host_batch(plan: SidPlan, host: str, ifname, networks) -> list[str]:
    """``ip -batch`` lines of ``host``: its IPv4 address per plane as a /32 (the fabric routes
    every host as a /32 at its leaf: no subnet of its own), then ``host_config``."""
    fabric = plan.fabric
    return ([f"addr replace {fabric.ip_of(host, q)}/32 dev {ifname(host, q)}"
             for q in range(len(fabric.host_leaves[host]))]
            + host_config(plan, host, ifname, networks))


def host_networkd(plan: SidPlan, host: str, ifname, networks) -> dict[int, str]:
    """Per plane, the systemd-networkd ``.network`` file of ``host``'s interface there."""
    fabric, addr = plan.fabric, Addressing.of(plan.fabric)
    out = {}
    for q, leaf in enumerate(fabric.host_leaves[host]):
        mine, gw = addr.hosts[(host, q)]
        text = [f"# mlroute srv6-config: host {host}'s link to leaf {leaf} "
                "(/etc/systemd/network/, then networkctl reload)",
                "[Match]", f"Name={ifname(host, q)}", "",
                "[Network]", "IPv6AcceptRA=no", "",
                "[Address]", f"Address={fabric.ip_of(host, q)}/32", "",
                "[Address]", f"Address={mine}/64", "DuplicateAddressDetection=none", ""]
        if q == 0:
            text += ["[Route]", f"Destination={plan.block}", f"Gateway={gw}", ""]
        text += ["# an IPv4 route over an IPv6 gateway (RFC 5549)",
                 "[Route]", f"Destination={networks[q]}", f"Gateway={gw}"]
        out[q] = "\n".join(text) + "\n"
    return out
