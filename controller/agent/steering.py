"""The host agent's pure part: from a segments document (``GET /v1/hosts/{host}/segments``)
to the kernel's policy rules and encapsulation routes, and the ``ip -batch`` lines that turn
what is installed into what is wanted.

Why one table per flow part: re-steering a part is then one ``route replace`` in its own table,
which the kernel swaps atomically (make before break with no window), and a part's rule never
changes while the part exists. Rules of parts with ports come before rules of whole host
pairs (``SPECIFIC_PREF`` < ``PAIR_PREF``), so a split part wins over its pair.

Why every field is parsed before anything is built (``read``): the document comes over the
network, and the lines go to ``ip -batch`` as root, where a newline starts a command of its
own (``netns exec NAME CMD`` runs any program). So nothing of the document's text reaches a
line: addresses and SIDs become ``ipaddress`` objects that the agent formats, ports and
protocols bounded ints, tables and preferences the agent's own numbers, the device the
agent's ``--dev`` (``check_dev``); every SID lies in the document's uSID ``block``, and
``LINE`` is the one form a line may take (``kernel.ip_batch`` checks it again). A document
that fails any check is refused as a whole, with a message naming the flow and the field.

>>> doc = {"block": "fcbb:bbbb::/32", "flows": [{"job": "r", "dst_ip": "10.0.1.1", "proto": 6,
...        "sport": 0, "dport": 0, "form": "usid", "sids": ["fcbb:bbbb:3:2:f001::"]}]}
>>> want = wanted(parse(doc), {}, "h0_0-eth0")
>>> [(k, r.table, r.route) for k, r in want.items()]  # doctest: +NORMALIZE_WHITESPACE
[((IPv4Address('10.0.1.1'), 6, 0, 0), 20000,
  '10.0.1.1/32 encap seg6 mode encap.red segs fcbb:bbbb:3:2:f001:: dev h0_0-eth0 rto_min 35ms')]
>>> batch({}, want)  # doctest: +NORMALIZE_WHITESPACE
['route replace 10.0.1.1/32 encap seg6 mode encap.red segs fcbb:bbbb:3:2:f001:: dev h0_0-eth0
  rto_min 35ms table 20000', 'rule add pref 20000 to 10.0.1.1/32 ipproto tcp table 20000']
>>> read({**doc, "block": "fcbb:cccc::/32"})
Traceback (most recent call last):
controller.errors.InputError: flow 0 (job 'r'): sids: fcbb:bbbb:3:2:f001:: is outside the block fcbb:cccc::/32
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from controller.errors import InputError

TABLE_BASE = 20000  # the agent's routing tables: TABLE_BASE + slot
SPECIFIC_PREF = 10000  # rules with ports: SPECIFIC_PREF + slot
PAIR_PREF = 20000  # rules of whole host pairs: PAIR_PREF + slot (below main's 32766)
SLOTS = 10000  # flow parts a host may steer at once
MAX_PARTS = SLOTS // 2  # per document: an old and a new set always fit (make before break)
PROTOS = {6: "tcp", 17: "udp"}
RTO_MIN_MS = 35  # TCP's minimum retransmission timeout on a steered route (Linux: 200 ms;
# why 35: probe.py's module text)
DEFAULT_BLOCK = "fcbb:bbbb::/32"  # a document without "block" (srv6.BLOCK, the controller's)
MAX_SIDS = 16
MAX_PROBES = 4096
MAX_PORTS = MAX_PARTS
MAX_ROUTERS = 65536
MAX_ADDRESSES = 64
MAX_PLANES = 16  # a host's interfaces to the fabric, one per plane
MAX_VERSION = 200
MAX_NAME = 256  # a job's, a host's or a switch's name
MAX_ERROR = 500  # characters of a refusal sent to the controller
DEV = re.compile(r"[A-Za-z0-9_.:@-]{1,15}")  # an interface name, as the kernel takes it
_A = r"(?:\d{1,3}\.){3}\d{1,3}"
_SIDS = rf"[0-9a-f:]+(?:,[0-9a-f:]+){{0,{MAX_SIDS - 1}}}"
_PORTS = r"(?: sport \d{1,5})?(?: dport \d{1,5})?"
LINE = re.compile(  # every line the agent may give ``ip -batch``: nothing else
    rf"route replace {_A}/32 encap seg6 mode (?:encap|encap\.red) segs {_SIDS} "
    rf"dev {DEV.pattern} rto_min {RTO_MIN_MS}ms table \d{{5}}"
    rf"|rule add pref \d{{5}} to {_A}/32 ipproto (?:tcp|udp){_PORTS} table \d{{5}}"
    rf"|rule del pref \d{{5}}(?: to {_A}/32 ipproto (?:tcp|udp){_PORTS} table \d{{5}})?"
    rf"|route del {_A}/\d{{1,2}} table \d{{5}}")


@dataclass(frozen=True)
class Steer:
    """One flow part as the agent installs it."""
    match: tuple  # (destination IPv4Address, protocol, sport, dport)
    encap: str  # "encap.red" (one uSID container) or "encap" (an SRH)
    sids: tuple[ipaddress.IPv6Address, ...]
    backup: tuple[ipaddress.IPv6Address, ...] = ()
    backup_encap: str = ""
    # the container of each list's way back (``segments.back_container``), which a probe
    # along the list carries for its answer; None: the answer comes by plain routing
    back: ipaddress.IPv6Address | None = None
    backup_back: ipaddress.IPv6Address | None = None
    plane: int = 0  # the plane its lists cross: it leaves by that plane's interface


@dataclass(frozen=True)
class Probe:
    """One path the agent probes and reports: its switches, a destination behind it, the
    uSID container that takes a probe along it."""
    path: tuple[str, ...]
    dst: ipaddress.IPv4Address
    sids: tuple[ipaddress.IPv6Address, ...]
    back: ipaddress.IPv6Address | None = None  # the way back the probe carries (Steer.back)
    plane: int = 0  # its source is the host's address on that plane


@dataclass
class Document:
    """A segments document, every field checked and typed (``read``)."""
    version: str
    block: ipaddress.IPv6Network
    src_ip: str  # "" when the document names none
    addresses: frozenset[str]
    steers: list[Steer]
    probes: list[Probe]  # the uSID ones: a probe rides one container
    ports: list[dict]  # host mode's parts, rebuilt from checked values (``hostports``)
    routers: dict[str, str]  # router IPv4 -> switch name
    notes: list[str] = field(default_factory=list)  # what is odd but not refused
    plane_ips: dict[int, str] = field(default_factory=dict)  # plane -> the host's address
    # there (its probes' sources; a plane the document names none of is left out)


@dataclass(frozen=True)
class Installed:
    """One installed part: its table, rule preference, route text (without the table), rule
    text and destination prefix. What the kernel holds without its pair (a rule whose table
    has no route, a route whose table has no rule) has None for what is missing: the agent
    removes it."""
    table: int | None
    pref: int | None
    route: str | None
    rule: str | None
    dst: str | None = None  # "10.0.1.1/32": what ``route del`` names


def check_dev(dev) -> str:
    """An interface name the kernel would take (1 to 15 of ``[A-Za-z0-9_.:@-]``, not . or ..)
    or InputError: it goes into every route line.

    >>> check_dev("h0_0-eth0")
    'h0_0-eth0'
    >>> check_dev("h0\\nnetns exec x sh")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    controller.errors.InputError: device 'h0\\nnetns exec x sh': an interface name is 1 to 15 ...
    """
    if not isinstance(dev, str) or not DEV.fullmatch(dev) or dev in (".", ".."):
        raise InputError(f"device {dev!r}: an interface name is 1 to 15 of A-Z a-z 0-9 _ . : @ -")
    return dev


def _short(value, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[:n] + "..."


def _int(value, low: int, high: int, what: str, where: str, kind: str = "an integer") -> int:
    if type(value) is not int or not low <= value <= high:  # bool and float are not ports
        raise InputError(f"{where}: {what} {_short(value)} is not {kind} ({low}..{high})")
    return value


def _name(value, what: str, where: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME or not value.isprintable():
        raise InputError(f"{where}: {what} {_short(value)} is not a name (1 to {MAX_NAME} "
                         "printable characters)")
    return value


def _ipv4(value, what: str, where: str) -> ipaddress.IPv4Address:
    """A unicast IPv4 address from a dotted string (a number is refused: 12345 would be
    0.0.48.57)."""
    try:
        if not isinstance(value, str) or len(value) > 15:
            raise ValueError
        ip = ipaddress.IPv4Address(value)
    except ValueError:
        raise InputError(f"{where}: {what} {_short(value)} is not an IPv4 address") from None
    if ip.is_multicast or ip.is_unspecified or ip.is_loopback or ip.is_link_local or \
            ip == ipaddress.IPv4Address("255.255.255.255"):
        raise InputError(f"{where}: {what} {ip} is not a unicast host address")
    return ip


def _block(value) -> ipaddress.IPv6Network:
    if value is None:
        value = DEFAULT_BLOCK
    try:
        if not isinstance(value, str) or len(value) > 64:
            raise ValueError
        net = ipaddress.IPv6Network(value)
    except ValueError:
        raise InputError(f"segments document: block {_short(value)} is not an IPv6 prefix") \
            from None
    if not 16 <= net.prefixlen <= 64 or net.is_multicast or net.is_loopback or \
            net.is_link_local or net.network_address.is_unspecified:
        raise InputError(f"segments document: block {net} is not a uSID block (a unicast "
                         "prefix of 16 to 64 bits)")
    return net


def _sids(values, block, where: str) -> tuple[ipaddress.IPv6Address, ...]:
    if not isinstance(values, list) or not 1 <= len(values) <= MAX_SIDS:
        raise InputError(f"{where}: sids must be a list of 1 to {MAX_SIDS} IPv6 addresses")
    out = []
    for v in values:
        try:
            if not isinstance(v, str) or len(v) > 45:
                raise ValueError
            sid = ipaddress.IPv6Address(v)
        except ValueError:
            raise InputError(f"{where}: sids: {_short(v)} is not an IPv6 address") from None
        if sid not in block:
            raise InputError(f"{where}: sids: {sid} is outside the block {block}")
        out.append(sid)
    return tuple(out)


def _encap(form, where: str) -> str:
    if form not in ("usid", "classic") or not isinstance(form, str):
        raise InputError(f"{where}: form must be usid or classic, not {_short(form)}")
    return "encap.red" if form == "usid" else "encap"


def _list(doc: dict, key: str, most: int, where: str = "segments document") -> list:
    value = doc.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"{where}: {key} must be a list, not {_short(value)}")
    if len(value) > most:
        raise InputError(f"{where}: {len(value)} {key}, at most {most}")
    return value


def _path(value, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_SIDS:
        raise InputError(f"{where}: path must be a list of 1 to {MAX_SIDS} switch names")
    return tuple(_name(s, "path switch", where) for s in value)


def _steer(f, i: int, block) -> Steer:
    where = f"flow {i}"
    if not isinstance(f, dict):
        raise InputError(f"{where}: expected an object, not {_short(f)}")
    if "job" in f:
        where += f" (job {_short(_name(f['job'], 'job', where))})"
    dst = _ipv4(f.get("dst_ip"), "dst_ip", where)
    proto = f.get("proto", 6)
    if type(proto) is not int or proto not in PROTOS:
        raise InputError(f"{where}: proto {_short(proto)} (tcp 6 or udp 17)")
    sport = _int(f.get("sport", 0), 0, 65535, "sport", where, "a port")
    dport = _int(f.get("dport", 0), 0, 65535, "dport", where, "a port")
    encap, sids = _encap(f.get("form"), where), _sids(f.get("sids"), block, where)
    if encap == "encap.red" and len(sids) != 1:
        raise InputError(f"{where}: a usid list is one container, not {len(sids)}")
    back = _back(f, block, where)
    plane = _int(f.get("plane", 0), 0, MAX_PLANES - 1, "plane", where)
    backup = f.get("backup")
    if backup is None:
        return Steer((dst, proto, sport, dport), encap, sids, back=back, plane=plane)
    if not isinstance(backup, dict):
        raise InputError(f"{where}: backup must be an object, not {_short(backup)}")
    b_encap = _encap(backup.get("form"), f"{where} backup")
    b_sids = _sids(backup.get("sids"), block, f"{where} backup")
    if b_encap == "encap.red" and len(b_sids) != 1:
        raise InputError(f"{where} backup: a usid list is one container, not {len(b_sids)}")
    return Steer((dst, proto, sport, dport), encap, sids, b_sids, b_encap, back,
                 _back(backup, block, f"{where} backup"), plane)


def _back(entry: dict, block, where: str) -> ipaddress.IPv6Address | None:
    """An entry's optional ``back``: one uSID container in the fabric's block."""
    if entry.get("back") is None:
        return None
    return _sids([entry["back"]], block, f"{where} back")[0]


def _port_entry(e, i: int) -> dict:
    """A host-mode part as ``hostports`` reads it, rebuilt from checked values: its job
    name goes into the ports file, its addresses and ports into raw packets."""
    where = f"ports entry {i}"
    if not isinstance(e, dict):
        raise InputError(f"{where}: expected an object, not {_short(e)}")
    job = _name(e.get("job"), "job", where)
    where += f" (job {_short(job)})"
    f = e.get("flow")
    if not isinstance(f, dict):
        raise InputError(f"{where}: flow must be an object with src, dst, proto, sport, dport")
    flow = {"src": _name(f.get("src"), "flow src", where),
            "dst": _name(f.get("dst"), "flow dst", where),
            "proto": _int(f.get("proto", 6), 0, 255, "flow proto", where),
            "sport": _int(f.get("sport", 0), 0, 65535, "flow sport", where, "a port"),
            "dport": _int(f.get("dport", 0), 0, 65535, "flow dport", where, "a port")}
    proto = e.get("proto")
    if type(proto) is not int or proto not in PROTOS:
        raise InputError(f"{where}: proto {_short(proto)} (tcp 6 or udp 17)")
    sport = e.get("sport")
    return {"job": job, "flow": flow, "part": _int(e.get("part"), 0, MAX_PARTS, "part", where),
            "dst_ip": str(_ipv4(e.get("dst_ip"), "dst_ip", where)), "proto": proto,
            "dport": _int(e.get("dport"), 0, 65535, "dport", where, "a port"),
            "path": list(_path(e.get("path"), where)),
            "sport": None if sport is None else _int(sport, 1, 65535, "sport", where, "a port")}


def read(doc) -> Document:
    """A segments document, every field checked (see the module text); an InputError names
    the first flow and field that cannot be applied (the agent then keeps what it has)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("flows"), list):
        raise InputError("segments document: expected an object with a list 'flows'")
    version = doc.get("version", "")
    if not isinstance(version, str) or len(version) > MAX_VERSION or not version.isprintable():
        raise InputError(f"segments document: version {_short(version)} is not a string of "
                         f"at most {MAX_VERSION} printable characters")
    block = _block(doc.get("block"))
    flows = _list(doc, "flows", MAX_PARTS)
    steers, seen, notes = [], {}, []
    for i, f in enumerate(flows):
        s = _steer(f, i, block)
        first = seen.get(s.match)
        if first is None:
            seen[s.match] = (i, s)
            steers.append(s)
        elif (first[1].sids, first[1].backup) != (s.sids, s.backup):
            # two jobs' parts with one match: the kernel can steer it one way only
            notes.append(f"flows {first[0]} and {i} share the match {s.match[0]} "
                         f"{PROTOS[s.match[1]]} sport {s.match[2]} dport {s.match[3]} with "
                         f"different lists: flow {first[0]}'s steers it")
    src = doc.get("src_ip")
    src_ip = "" if src is None else str(_ipv4(src, "src_ip", "segments document"))
    plane_ips = {q: str(_ipv4(a, "addresses", "segments document"))  # by plane: null or ""
                 for q, a in enumerate(_list(doc, "addresses", MAX_ADDRESSES))  # keeps a plane
                 if a not in (None, "")}  # without an address (its lists go from plane 0's)
    addresses = frozenset(plane_ips.values())
    probes = []
    for i, p in enumerate(_list(doc, "probes", MAX_PROBES)):
        where = f"probe {i}"
        if not isinstance(p, dict):
            raise InputError(f"{where}: expected an object, not {_short(p)}")
        path, dst = _path(p.get("path"), where), _ipv4(p.get("dst_ip"), "dst_ip", where)
        encap, sids = _encap(p.get("form"), where), _sids(p.get("sids"), block, where)
        back = _back(p, block, where)
        plane = _int(p.get("plane", 0), 0, MAX_PLANES - 1, "plane", where)
        if encap == "encap.red":
            probes.append(Probe(path, dst, sids, back, plane))
    ports = [_port_entry(e, i) for i, e in enumerate(_list(doc, "ports", MAX_PORTS))]
    routers = doc.get("routers") or {}
    if not isinstance(routers, dict) or len(routers) > MAX_ROUTERS:
        raise InputError(f"segments document: routers must be an object of at most "
                         f"{MAX_ROUTERS} router addresses")
    routers = {str(_ipv4(ip, "router address", "routers")): _name(name, "router name", "routers")
               for ip, name in routers.items()}
    if not plane_ips and src_ip:
        plane_ips = {0: src_ip}
    lacking = sorted({x.plane for x in (*steers, *probes)} - set(plane_ips) - {0})
    if lacking and plane_ips:
        notes.append(f"no address of this host on plane(s) {', '.join(map(str, lacking))}: "
                     "their probes go from plane 0's (its leaf's source check may drop them)")
    return Document(version, block, src_ip, addresses or frozenset({src_ip} - {""}), steers,
                    probes, ports, routers, notes, plane_ips)


def parse(doc) -> list[Steer]:
    """The flow parts of a segments document, checked (``read``)."""
    return read(doc).steers


def route_text(dst, encap: str, sids, dev: str) -> str:
    return (f"{dst}/32 encap seg6 mode {encap} segs {','.join(str(s) for s in sids)} dev {dev} "
            f"rto_min {RTO_MIN_MS}ms")


def rule_text(match: tuple, table: int, pref: int) -> str:
    dst, proto, sport, dport = match
    ports = (f" sport {sport}" if sport else "") + (f" dport {dport}" if dport else "")
    return f"pref {pref} to {dst}/32 ipproto {PROTOS[proto]}{ports} table {table}"


def slot_of(i: Installed) -> set[int]:
    """The slots an installed entry holds (its table's, its rule's)."""
    out = set()
    if owned(table=i.table):
        out.add(i.table - TABLE_BASE)
    if owned(pref=i.pref):
        out.add((i.pref - SPECIFIC_PREF) % SLOTS)
    return out


def wanted(steers: list[Steer], have: dict, dev, failed: frozenset = frozenset()) -> dict:
    """match -> ``Installed``: parts keep their slot (table and rule) while they exist; a part
    whose primary path is in ``failed`` (its sids) takes its backup. ``dev``: the interface,
    or one per plane (``devices``). InputError when the slots run out (``steps`` avoids it)
    or a part's plane has no interface."""
    devs = devices(dev)
    for s in steers:
        if s.plane >= len(devs):
            raise InputError(f"a part to {s.match[0]} is on plane {s.plane}: this agent has "
                             f"{len(devs)} interface(s) (--dev, one per plane)")
    used = set().union(*(slot_of(i) for i in have.values())) if have else set()
    free = (s for s in range(SLOTS) if s not in used)
    out = {}
    for s in steers:
        encap, sids = s.encap, s.sids
        if s.sids in failed and s.backup:
            encap, sids = s.backup_encap, s.backup
        old = have.get(s.match)
        if old is not None and old.table is not None and old.rule is not None:
            slot = old.table - TABLE_BASE
        else:
            slot = next(free, None)
            if slot is None:
                raise InputError(f"no free slot for {s.match[0]}: {len(have)} parts installed "
                                 f"and {len(steers)} wanted exceed {SLOTS}")
        pref = (SPECIFIC_PREF if s.match[2] or s.match[3] else PAIR_PREF) + slot
        table = TABLE_BASE + slot
        out[s.match] = Installed(table, pref, route_text(s.match[0], encap, sids,
                                                         devs[s.plane]),
                                 rule_text(s.match, table, pref), f"{s.match[0]}/32")
    return out


def devices(dev) -> tuple[str, ...]:
    """The interfaces by plane: ``dev`` one name, or a sequence of them, each checked.

    >>> devices("e0"), devices(["h-eth0", "h-eth1"])
    (('e0',), ('h-eth0', 'h-eth1'))
    """
    names = tuple(dev) if isinstance(dev, (list, tuple)) else (dev,)
    if not 1 <= len(names) <= MAX_PLANES:
        raise InputError(f"1 to {MAX_PLANES} interfaces, one per plane, not {len(names)}")
    return tuple(check_dev(d) for d in names)


def steps(steers: list[Steer], have: dict, dev, failed: frozenset = frozenset()) -> list:
    """The states to go through from ``have``: the wanted one, make before break; or, when
    what is installed and what is new need more than ``SLOTS`` slots (a kernel filled by an
    older agent), first ``have`` without the parts no longer wanted (their flows fall back to
    ECMP a moment earlier: they are not steered any more either way).

    >>> flows = [{"dst_ip": f"10.0.{i // 250}.{1 + i % 250}", "form": "usid",
    ...           "sids": ["fcbb:bbbb:3:2:f001::"]} for i in range(MAX_PARTS * 2)]
    >>> full = wanted(parse({"flows": flows[:MAX_PARTS]}), {}, "e0")
    >>> full = {**full, **wanted(parse({"flows": flows[MAX_PARTS:]}), full, "e0")}
    >>> [len(s) for s in steps(parse({"flows": flows[:MAX_PARTS]}), full, "e0")]
    [5000]
    >>> [len(s) for s in steps(parse({"flows": flows[:1] + [{**flows[0], "dst_ip": "10.99.0.1"}]}),
    ...                          full, "e0")]
    [1, 2]
    """
    try:
        return [wanted(steers, have, dev, failed)]
    except InputError:
        keep = {s.match for s in steers}
        kept = {m: i for m, i in have.items() if m in keep}
        return [kept, wanted(steers, kept, dev, failed)]


def batch(have: dict, want: dict) -> list[str]:
    """``ip -batch`` lines from ``have`` to ``want``: routes first (new tables, atomic swaps
    of changed ones), then new rules, then the rules and tables no longer wanted (and what
    the kernel holds without its pair)."""
    first, make, rules, brk = [], [], [], []
    want = {m: w for m, w in want.items() if w.route and w.rule}  # whole parts only
    made = {(w.table, w.dst) for w in want.values()}  # replaced: not deleted after
    prefs = {w.pref for w in want.values()}
    for match, w in want.items():
        h = have.get(match)
        if h is None or h.route != w.route or h.table != w.table:
            make.append(f"route replace {w.route} table {w.table}")
        if h is None or h.rule != w.rule:
            rules.append(f"rule add {w.rule}")
            if h is not None:
                brk += _remove(h, made)
    for match, h in have.items():
        if match not in want:
            if h.rule is None and h.pref in prefs:  # a rule of unknown text: gone before
                first.append(f"rule del pref {h.pref}")  # one at its preference comes
                h = Installed(h.table, None, h.route, None, h.dst)
            brk += _remove(h, made)
    return first + make + rules + brk


def _remove(h: Installed, made: set) -> list[str]:
    out = []
    if h.pref is not None:  # the rule first: no packet finds an empty table
        out.append(f"rule del {h.rule}" if h.rule else f"rule del pref {h.pref}")
    if h.dst is not None and h.table is not None and (h.table, h.dst) not in made:
        # a delete of the one route: a flush walks every table (1 s for 1,000 of them)
        out.append(f"route del {h.dst} table {h.table}")
    return out


def owned(pref: int | None = None, table: int | None = None) -> bool:
    """Whether a rule preference or a table is in the agent's ranges (what it may remove)."""
    if pref is not None:
        return type(pref) is int and SPECIFIC_PREF <= pref < PAIR_PREF + SLOTS
    return type(table) is int and TABLE_BASE <= table < TABLE_BASE + SLOTS
