"""Jobs may name hosts by IPv4 address: find the addresses in a job document and rename them to
host names, and say which host interface owns an address, as pure functions (the service
resolves unknown addresses by ARP probes). On a multi-plane fabric a host has an address per
plane; a job may name it by any of them (the planner chooses the plane).

>>> sorted(addresses({"id": "j", "rings": [["10.0.0.1", "h1"]], "members": ["10.0.0.2"]}))
['10.0.0.1', '10.0.0.2']
>>> addresses({"id": "j", "rings": None})
set()
>>> renamed({"id": "j", "ranks": ["10.0.0.1", "h1"]}, {"10.0.0.1": "h0"})["ranks"]
['h0', 'h1']
"""
from __future__ import annotations

import ipaddress


def _names(doc: dict) -> list:
    def lists(value):
        return value if isinstance(value, list) else []
    names = [x for r in lists(doc.get("rings")) for x in lists(r)]
    names += lists(doc.get("ranks")) + lists(doc.get("members"))
    for fl in lists(doc.get("flows")):
        if isinstance(fl, dict):
            names += [fl.get("src"), fl.get("dst")]
    return names


def addresses(doc) -> set[str]:
    """IPv4 addresses used as ranks, members or flow ends in a job document (anything else,
    malformed parts included, is left to the job parser's checks)."""
    if not isinstance(doc, dict):
        return set()
    out = set()
    for n in _names(doc):
        if isinstance(n, str) and n.count(".") == 3:
            try:
                out.add(str(ipaddress.IPv4Address(n)))
            except ValueError:
                pass
    return out


def renamed(doc: dict, names: dict) -> dict:
    """A copy of ``doc`` with every address of ``names`` (address -> host) replaced."""
    def name(x):
        return names.get(x, x) if isinstance(x, str) else x
    doc = dict(doc)
    for key in ("ranks", "members"):
        if isinstance(doc.get(key), list):
            doc[key] = [name(x) for x in doc[key]]
    if isinstance(doc.get("rings"), list):
        doc["rings"] = [[name(x) for x in r] if isinstance(r, list) else r for r in doc["rings"]]
    if isinstance(doc.get("flows"), list):
        doc["flows"] = [dict(fl, src=name(fl.get("src")), dst=name(fl.get("dst")))
                        if isinstance(fl, dict) else fl for fl in doc["flows"]]
    return doc


def owners(fabric) -> dict[str, tuple[str, int, str | None]]:
    """address -> (host, plane, MAC) of every host interface of ``fabric`` (None: no fabric).

    >>> from controller.model.clos import Clos
    >>> owners(Clos.leaf_spine(1, 1, 1, planes=2).wire())["10.16.0.1"]
    ('h0_0', 1, '02:00:01:00:00:01')
    """
    if fabric is None:
        return {}
    return {ip: (h, q, mac) for h, q, ip, mac, _ in fabric.interfaces() if ip}


def arp_mac(fabric, known: dict, dpid: int | None, ip: str) -> str | None:
    """The MAC that answers an ARP request for ``ip`` heard at switch ``dpid`` (None: any),
    from ``known`` (``owners``): only in the address's own plane, since a host's interface to
    one plane cannot be reached through another."""
    got = known.get(ip)
    if got is None or (dpid is not None and got[1] != fabric.plane_of_switch(
            fabric.switch_of_dpid.get(dpid))):
        return None
    return got[2]
