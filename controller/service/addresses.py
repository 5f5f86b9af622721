"""Jobs may name hosts by IPv4 address: find the addresses in a job document and rename them to
host names, as pure functions (the service resolves unknown addresses by ARP probes).

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
