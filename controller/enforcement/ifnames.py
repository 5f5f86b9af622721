"""The interface names the routers' and hosts' files use, so that they load on the boxes as
written. A port's name comes from, first to last: a mapping file (``--interfaces FILE``), the
fabric document's ``interfaces`` (what a cabling table named, ``model.cabling``), the
platform's scheme for port numbers (``SCHEMES``). A host's interface in plane q: the mapping
file, the document, else ``HOST-eth<q>`` (the emulation's).

Platforms: Linux routers as the emulation names them (``SWITCH-eth<port>``); SONiC, which
names a front-panel port ``Ethernet<first lane>`` after its platform's port map
(``port_config.ini`` / ``platform.json`` of the HWSKU): 4 lanes a port on QSFP28 boxes
(``sonic``: Ethernet0, Ethernet4, ...), 8 on QSFP-DD / OSFP boxes (``sonic8``: Ethernet0,
Ethernet8, ...), breakouts otherwise (a mapping file); Cumulus Linux, ``swp<port>``.

>>> [SCHEMES[s]("l0", 3) for s in ("linux", "sonic", "sonic8", "cumulus")]
['l0-eth3', 'Ethernet8', 'Ethernet16', 'swp3']
"""
from __future__ import annotations

import json
from collections.abc import Callable

from controller.errors import InputError


def mininet_ifname(switch: str, port: int) -> str:
    return f"{switch}-eth{port}"


def sonic_ifname(switch: str, port: int) -> str:
    """SONiC's front-panel names, 4 lanes a port (``sonic8``: 8; else a mapping file)."""
    return f"Ethernet{4 * (port - 1)}"


SCHEMES: dict[str, Callable[[str, int], str]] = {
    "linux": mininet_ifname, "sonic": sonic_ifname,
    "sonic8": lambda switch, port: f"Ethernet{8 * (port - 1)}",
    "cumulus": lambda switch, port: f"swp{port}"}


def read_mapping(path: str) -> dict[str, dict[int, str]]:
    """A mapping file: JSON ``{"SWITCH": {"PORT": "NAME", ...}, "HOST": {"PLANE": "NAME"}}``."""
    try:
        with open(path) as fh:
            doc = json.load(fh)
    except OSError as e:
        raise InputError(f"--interfaces {path}: {e.strerror}") from None
    except ValueError as e:
        raise InputError(f"--interfaces {path}: not JSON ({e})") from None
    out: dict[str, dict[int, str]] = {}
    if not isinstance(doc, dict):
        raise InputError(f"--interfaces {path}: expected {{node: {{port: name}}}}")
    for node, table in doc.items():
        if not isinstance(table, dict) or not all(
                str(k).isdigit() and isinstance(v, str) and v for k, v in table.items()):
            raise InputError(f"--interfaces {path}: {node} must map port numbers (a host: "
                             "plane numbers) to interface names")
        out[node] = {int(k): v for k, v in table.items()}
    return out


class Names:
    """``port(switch, port)`` and ``host(host, plane)``: the names the files use."""

    def __init__(self, fabric, scheme: str = "linux", mapping: dict | None = None):
        if scheme not in SCHEMES:
            raise InputError(f"--interfaces: {scheme!r} is neither a platform "
                             f"({', '.join(SCHEMES)}) nor a file")
        self.scheme, self.mapping = SCHEMES[scheme], mapping or {}
        self.declared: dict[tuple[str, int], str] = {}
        for node, peers in fabric.wiring.get("interfaces", {}).items():
            for peer, names in peers.items():
                if node in fabric.host_leaves:
                    self.declared[(node, fabric.host_leaves[node].index(peer))] = names
                    continue
                nums = fabric.ports[node][peer]
                for n, name in zip(nums if isinstance(nums, list) else [nums],
                                   names if isinstance(names, list) else [names]):
                    self.declared[(node, n)] = name
        nodes = set(fabric.tier_of) | set(fabric.host_leaves)
        if unknown := sorted(set(self.mapping) - nodes):
            raise InputError(f"--interfaces: the mapping names {unknown[0]!r}, which is not "
                             "in the fabric")

    def port(self, switch: str, port: int) -> str:
        got = self.mapping.get(switch, {}).get(port) or self.declared.get((switch, port))
        return got or self.scheme(switch, port)

    def host(self, host: str, plane: int) -> str:
        got = self.mapping.get(host, {}).get(plane) or self.declared.get((host, plane))
        return got or f"{host}-eth{plane}"


def names_for(fabric, interfaces: str | None, default: str) -> Names:
    """``--interfaces``: a platform, a mapping file, or None (the platform ``default``)."""
    if interfaces is None or interfaces in SCHEMES:
        return Names(fabric, interfaces or default)
    return Names(fabric, default, read_mapping(interfaces))
