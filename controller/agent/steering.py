"""The host agent's pure part: from a segments document (``GET /v1/hosts/{host}/segments``)
to the kernel's policy rules and encapsulation routes, and the ``ip -batch`` lines that turn
what is installed into what is wanted.

Why one table per flow part: re-steering a part is then one ``route replace`` in its own table,
which the kernel swaps atomically (make before break with no window), and a part's rule never
changes while the part exists. Rules of parts with ports come before rules of whole host
pairs (``SPECIFIC_PREF`` < ``PAIR_PREF``), so a split part wins over its pair.

>>> doc = {"flows": [{"job": "r", "dst_ip": "10.0.1.1", "proto": 6, "sport": 0, "dport": 0,
...                   "form": "usid", "sids": ["fcbb:bbbb:3:2:f001::"]}]}
>>> want = wanted(parse(doc), {}, "h0_0-eth0")
>>> [(k, r.table, r.route) for k, r in want.items()]  # doctest: +NORMALIZE_WHITESPACE
[((None, '10.0.1.1', 6, 0, 0), 20000,
  '10.0.1.1/32 encap seg6 mode encap.red segs fcbb:bbbb:3:2:f001:: dev h0_0-eth0')]
>>> batch({}, want)  # doctest: +NORMALIZE_WHITESPACE
['route replace 10.0.1.1/32 encap seg6 mode encap.red segs fcbb:bbbb:3:2:f001:: dev h0_0-eth0
  table 20000', 'rule add pref 20000 to 10.0.1.1/32 ipproto tcp table 20000']
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from controller.errors import InputError

TABLE_BASE = 20000  # the agent's routing tables: TABLE_BASE + slot
SPECIFIC_PREF = 10000  # rules with ports: SPECIFIC_PREF + slot
PAIR_PREF = 20000  # rules of whole host pairs: PAIR_PREF + slot (below main's 32766)
SLOTS = 10000  # flow parts a host may steer at once
PROTOS = {6: "tcp", 17: "udp"}


@dataclass(frozen=True)
class Steer:
    """One flow part as the agent installs it."""
    match: tuple  # (plane interface or None, destination IPv4, protocol, sport, dport)
    encap: str  # "encap.red" (one uSID container) or "encap" (an SRH)
    sids: tuple[str, ...]
    backup: tuple[str, ...] = ()
    backup_encap: str = ""


@dataclass(frozen=True)
class Installed:
    """One installed part: its table, rule preference and route text (without the table)."""
    table: int
    pref: int
    route: str
    rule: str


def _sids(values, where: str) -> tuple[str, ...]:
    if not isinstance(values, list) or not values or len(values) > 16:
        raise InputError(f"{where}: sids must be a list of 1 to 16 IPv6 addresses")
    out = []
    for v in values:
        try:
            out.append(str(ipaddress.IPv6Address(v)))
        except (ipaddress.AddressValueError, ValueError, TypeError):
            raise InputError(f"{where}: {v!r} is not an IPv6 address") from None
    return tuple(out)


def _encap(form, where: str) -> str:
    if form not in ("usid", "classic"):
        raise InputError(f"{where}: form must be usid or classic, not {form!r}")
    return "encap.red" if form == "usid" else "encap"


def parse(doc) -> list[Steer]:
    """The flow parts of a segments document, checked; an InputError names the first one that
    cannot be applied (the agent then keeps what it has)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("flows"), list):
        raise InputError("segments document: expected an object with a list 'flows'")
    out, seen = [], set()
    for i, f in enumerate(doc["flows"]):
        where = f"flow {i}"
        if not isinstance(f, dict):
            raise InputError(f"{where}: expected an object")
        try:
            dst = str(ipaddress.IPv4Address(f.get("dst_ip")))
        except (ipaddress.AddressValueError, ValueError, TypeError):
            raise InputError(f"{where}: dst_ip {f.get('dst_ip')!r} is not an IPv4 address") \
                from None
        proto, sport, dport = f.get("proto", 6), f.get("sport", 0), f.get("dport", 0)
        if proto not in PROTOS:
            raise InputError(f"{where}: protocol {proto!r} (tcp 6 or udp 17)")
        for name, port in (("sport", sport), ("dport", dport)):
            if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
                raise InputError(f"{where}: {name} {port!r} is not a port (0..65535)")
        match = (f.get("dev"), dst, proto, sport, dport)
        encap, sids = _encap(f.get("form"), where), _sids(f.get("sids"), where)
        if encap == "encap.red" and len(sids) != 1:
            raise InputError(f"{where}: a usid list is one container, not {len(sids)}")
        if match in seen:
            continue  # two flows of one pair without ports: the first part steers the pair
        seen.add(match)
        backup = f.get("backup")
        if isinstance(backup, dict):
            out.append(Steer(match, encap, sids, _sids(backup.get("sids"), f"{where} backup"),
                             _encap(backup.get("form"), f"{where} backup")))
        else:
            out.append(Steer(match, encap, sids))
    if len(out) > SLOTS:
        raise InputError(f"segments document: {len(out)} flow parts, at most {SLOTS}")
    return out


def route_text(dst: str, encap: str, sids, dev: str) -> str:
    return f"{dst}/32 encap seg6 mode {encap} segs {','.join(sids)} dev {dev}"


def rule_text(match: tuple, table: int, pref: int) -> str:
    _dev, dst, proto, sport, dport = match
    ports = (f" sport {sport}" if sport else "") + (f" dport {dport}" if dport else "")
    return f"pref {pref} to {dst}/32 ipproto {PROTOS[proto]}{ports} table {table}"


def wanted(steers: list[Steer], have: dict, dev: str, failed: frozenset = frozenset()) -> dict:
    """match -> ``Installed``: parts keep their slot (table and rule) while they exist; a part
    whose primary path is in ``failed`` (its sids) takes its backup."""
    used = {i.table - TABLE_BASE for i in have.values()}
    free = (s for s in range(SLOTS) if s not in used)
    out = {}
    for s in steers:
        encap, sids = s.encap, s.sids
        if s.sids in failed and s.backup:
            encap, sids = s.backup_encap, s.backup
        old = have.get(s.match)
        slot = old.table - TABLE_BASE if old is not None else next(free)
        pref = (SPECIFIC_PREF if s.match[3] or s.match[4] else PAIR_PREF) + slot
        table = TABLE_BASE + slot
        out[s.match] = Installed(table, pref, route_text(s.match[1], encap, sids, s.match[0] or dev),
                                 rule_text(s.match, table, pref))
    return out


def batch(have: dict, want: dict) -> list[str]:
    """``ip -batch`` lines from ``have`` to ``want``: routes first (new tables, atomic swaps
    of changed ones), then new rules, then the rules and tables no longer wanted."""
    make, rules, brk = [], [], []
    for match, w in want.items():
        h = have.get(match)
        if h is None or h.route != w.route:
            make.append(f"route replace {w.route} table {w.table}")
        if h is None or h.rule != w.rule:
            rules.append(f"rule add {w.rule}")
            if h is not None:
                brk.append(f"rule del pref {h.pref}")
    for match, h in have.items():
        if match not in want:
            brk.append(f"rule del pref {h.pref}")
            # a delete of the one route: a flush walks every table (1 s for 1,000 of them)
            brk.append(f"route del {h.route.split()[0]} table {h.table}")
    return make + rules + brk


def owned(pref: int | None = None, table: int | None = None) -> bool:
    """Whether a rule preference or a table is in the agent's ranges (what it may remove)."""
    if pref is not None:
        return SPECIFIC_PREF <= pref < PAIR_PREF + SLOTS
    return table is not None and TABLE_BASE <= table < TABLE_BASE + SLOTS
