"""Host mode on routers: which source port the routers' L4 ECMP hash sends along a planned
path, learned by the host with traceroute-style probes (``mlroute-agent``).

Why the host and not the controller: a Linux router (``fib_multipath_hash_policy=1``) or a
switch ASIC hashes addresses and ports with a seed of its own, so the map is per (source host,
destination, protocol, destination port) and only a packet with the flow's own 5-tuple shows
it; the controller has no packet-out on such a fabric. A probe is the flow's packet (a TCP SYN,
or UDP) with a candidate source port and an IPv4 TTL of i: the router at hop i answers ICMP
time exceeded from its own address (``srv6_config.ROUTER_NET``, mapped to switch names in the
segments document), quoting the probe's IP header, whose IP id says which probe it was.

Hop 1 is the host's own leaf and always the same, so a path ``[leaf, s, ..., top, ..., leaf']``
is checked at hops 2 .. top + 1: the switches up to the highest tier (a Clos path goes up,
then down; the way down from the top is fixed, except among a bundle's members, which
answer from one address: members are not learned). No probe reaches the destination.

Cost: per candidate port one probe per checked hop (one on a leaf-spine, two between pods of
a fat-tree); about 2 candidates per wanted spine on a leaf-spine of 2 spines. Routers limit
ICMP errors (Linux: ``net.ipv4.icmp_msgs_per_sec``, 1,000 a second with a burst of 50,
``icmp_ratelimit`` per destination, which ``srv6_config.SYSCTLS`` turns off; SONiC: its CoPP
trap for TTL errors), so probes go in rounds of ``BATCH`` and an unanswered one is sent again.

>>> p = probe_packet("10.0.0.1", "10.0.1.1", 6, 49152, 5201, 2, 7)
>>> len(p), p[8], ip_checksum(p[:20])  # 20 + 20 bytes, TTL 2, a valid IPv4 header
(40, 2, 0)
>>> icmp = bytes([11, 0, 0, 0, 0, 0, 0, 0]) + p[:28]
>>> answer = probe_packet("100.64.0.3", "10.0.0.1", 1, 0, 0, 64, 0)[:20] + icmp
>>> parse_time_exceeded(answer)
('100.64.0.3', 7, '10.0.1.1', 6, 49152, 5201)
"""
from __future__ import annotations

import select
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from controller.enforcement.hostmode import PORT_MAX, PORT_MIN
from controller.enforcement.probepacket import ip_checksum  # one IP checksum

TCP, UDP = 6, 17
ICMP_TIME_EXCEEDED = 11
BATCH = 32  # candidate ports a round: a Linux router's ICMP burst is 50
ROUND_S = 0.3  # a round's answers are awaited this long
MAX_ROUNDS = 24  # rounds of one ``learn`` call at most (time-boxed: about 7 s)
TRIES = 3  # an unanswered candidate is sent again this often, then left


def probe_packet(src: str, dst: str, proto: int, sport: int, dport: int, ttl: int,
                 ident: int) -> bytes:
    """An IPv4 packet with ``proto``'s header (TCP SYN, or UDP with no payload), ``ttl`` and
    IP id ``ident``, checksums set: what the flow would send first, but for its source port."""
    s, d = socket.inet_aton(src), socket.inet_aton(dst)
    if proto == TCP:
        l4 = struct.pack("!HHIIBBHHH", sport, dport, 0, 0, 5 << 4, 0x02, 65535, 0, 0)
    else:
        l4 = struct.pack("!HHHH", sport, dport, 8, 0)
    pseudo = s + d + struct.pack("!BBH", 0, proto, len(l4))
    at = 16 if proto == TCP else 6
    l4 = l4[:at] + struct.pack("!H", ip_checksum(pseudo + l4) or 0xFFFF) + l4[at + 2:]
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), ident & 0xFFFF, 0, ttl, proto,
                         0, s, d)
    return header[:10] + struct.pack("!H", ip_checksum(header)) + header[12:] + l4


def parse_time_exceeded(data: bytes):
    """(router address, probe's IP id, destination, protocol, sport, dport) of an ICMP time
    exceeded as a raw ICMP socket reads it (outer IPv4 header first); None for anything else."""
    if len(data) < 20 or data[0] >> 4 != 4:
        return None
    ihl = (data[0] & 0x0F) * 4
    if data[9] != 1 or len(data) < ihl + 8 or data[ihl] != ICMP_TIME_EXCEEDED:
        return None
    inner = data[ihl + 8:]
    if len(inner) < 20 or inner[0] >> 4 != 4:
        return None
    iihl = (inner[0] & 0x0F) * 4
    if len(inner) < iihl + 4 or inner[9] not in (TCP, UDP):
        return None
    sport, dport = struct.unpack("!HH", inner[iihl:iihl + 4])
    return (socket.inet_ntoa(data[12:16]), struct.unpack("!H", inner[4:6])[0],
            socket.inet_ntoa(inner[16:20]), inner[9], sport, dport)


def checked_hops(path) -> tuple[str, ...]:
    """The switches a source port must lead to, from hop 2 to the top of a Clos path (up, then
    down: its middle).

    >>> checked_hops(["l0", "s1", "l1"]), checked_hops(["l0", "a0", "c1", "a2", "l4"])
    (('s1',), ('a0', 'c1'))
    """
    return tuple(path[1:(len(path) - 1) // 2 + 1])


@dataclass(frozen=True)
class Target:
    """What one flow part's source port must do: its 5-tuple but the source port, and the
    switches at hops 2, 3, ... (``checked_hops``)."""
    dst_ip: str
    proto: int
    dport: int
    hops: tuple[str, ...]

    @property
    def key(self) -> tuple:
        return (self.dst_ip, self.proto, self.dport)


@dataclass
class PortMap:
    """One (destination, protocol, destination port)'s learned ports: port -> the switches
    it reached at hops 2, 3, ...; ``next`` is the next candidate."""
    hops_of: dict = field(default_factory=dict)
    next: int = PORT_MIN


# a round: (key, sport, ttl) probes -> {(key, sport, ttl): switch name or None}
Network = Callable[[list[tuple]], dict]


@dataclass
class Learned:
    """What one ``learn`` call did: the ports per target name (None: not found in time),
    probes sent and rounds, and the stale maps it dropped."""
    ports: dict
    probes: int = 0
    rounds: int = 0
    dropped: list = field(default_factory=list)


def learn(targets: dict, maps: dict, network: Network, used: set | None = None,
          confirm: bool = True, batch: int = BATCH, rounds: int = MAX_ROUNDS) -> Learned:
    """A source port per target (name -> ``Target``), unique per protocol and outside
    ``used`` ((proto, port)), read from ``maps`` (key -> ``PortMap``, updated) and learned by
    probing through ``network`` where they fall short. With ``confirm`` a port found in a map
    is probed once more first; an answer that differs means the routers hash otherwise now (a
    link or a router changed): that key's map is dropped and learned again.

    >>> net = lambda probes: {p: "s%d" % (p[1] % 2) for p in probes}  # a hash: port parity
    >>> maps = {}
    >>> r = learn({"a": Target("10.0.1.1", 6, 5201, ("s1",)),
    ...            "b": Target("10.0.1.1", 6, 5201, ("s0",))}, maps, net)
    >>> r.ports, r.probes, maps[("10.0.1.1", 6, 5201)].hops_of
    ({'a': 49153, 'b': 49152}, 4, {49152: ('s0',), 49153: ('s1',), 49154: ('s0',), 49155: ('s1',)})
    """
    used = set() if used is None else used
    out: dict = {}
    result = Learned(out)
    todo = dict(targets)
    unconfirmed: dict = {}  # name -> port taken from a map, to be probed once
    tries: dict = {}  # (key, port) -> times sent without a full answer

    def take():
        for name, t in list(todo.items()):
            pm = maps.setdefault(t.key, PortMap())
            for port in sorted(pm.hops_of):
                if pm.hops_of[port] == t.hops and (t.proto, port) not in used:
                    used.add((t.proto, port))
                    out[name] = port
                    del todo[name]
                    if confirm and result.rounds == 0:  # probed again: answered anew
                        unconfirmed[name] = (port, pm.hops_of.pop(port))
                    break

    take()
    while (todo or unconfirmed) and result.rounds < rounds:
        probes, ports = [], []
        for name, (port, _was) in unconfirmed.items():
            ports.append((targets[name], port))
        confirming = {(targets[n].key, p) for n, (p, _was) in unconfirmed.items()}
        need: dict = {}
        for t in todo.values():
            need.setdefault(t.key, [t, 0])[1] += 1
        for t, n in need.values():
            pm = maps[t.key]
            retry = [p for (k, p), c in tries.items() if k == t.key and 0 < c < TRIES
                     and (k, p) not in confirming]
            fresh = []
            while len(retry) + len(fresh) < max(4, 2 * n) and pm.next <= PORT_MAX:
                if (t.proto, pm.next) not in used:
                    fresh.append(pm.next)
                pm.next += 1
            ports += [(t, p) for p in (retry + fresh)[:batch]]
        if not ports:
            break
        for t, port in ports:
            probes += [(t.key, port, i + 2) for i in range(len(t.hops))]
        answers = network(probes)
        result.probes += len(probes)
        result.rounds += 1
        for t, port in ports:
            hops = tuple(answers.get((t.key, port, i + 2)) for i in range(len(t.hops)))
            if None in hops:
                tries[(t.key, port)] = tries.get((t.key, port), 0) + 1
                continue
            tries.pop((t.key, port), None)
            maps[t.key].hops_of[port] = hops
        for name, (port, was) in list(unconfirmed.items()):
            t = targets[name]
            seen = maps[t.key].hops_of.get(port)
            if seen is None and tries.get((t.key, port), 0) < TRIES:
                continue  # not answered yet: asked again next round
            del unconfirmed[name]
            if seen is None:  # never answered: kept as it was (the path probes judge it)
                maps[t.key].hops_of[port] = was
            elif seen != t.hops:  # stale: the routers hash otherwise now
                result.dropped.append(t.key)
                maps[t.key] = PortMap({port: seen} if seen else {})
                for other, p in list(out.items()):
                    if targets[other].key == t.key:
                        used.discard((t.proto, p))
                        del out[other]
                        unconfirmed.pop(other, None)
                        todo[other] = targets[other]
        take()
    for name in todo:
        out[name] = None
    return result


class Prober:
    """Raw sockets of one host: sends a round of probes with its own address, hears the
    routers' time exceeded answers until the round's time is up. ``routers``: address ->
    switch name (the segments document's)."""

    def __init__(self, src_ip: str = ""):
        self.src = src_ip
        self.routers: dict[str, str] = {}
        self.ident = 0
        self.tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.rx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)

    def close(self) -> None:
        self.tx.close()
        self.rx.close()

    def __call__(self, probes: list[tuple], wait: float = ROUND_S) -> dict:
        """A ``Network``: {(key, sport, ttl): switch name} of the answers heard in ``wait``."""
        sent = {}
        for key, sport, ttl in probes:
            self.ident = (self.ident + 1) & 0xFFFF
            sent[self.ident] = (key, sport, ttl)
            dst, proto, dport = key
            try:
                self.tx.sendto(probe_packet(self.src, dst, proto, sport, dport, ttl,
                                            self.ident), (dst, 0))
            except OSError:
                pass  # no route: never answered
        out = {}
        until = time.monotonic() + wait
        while len(out) < len(sent) and (left := until - time.monotonic()) > 0:
            if not select.select([self.rx], [], [], left)[0]:
                break
            got = parse_time_exceeded(self.rx.recv(2048))
            if got is None:
                continue
            router, ident, dst, proto, sport, dport = got
            p = sent.get(ident)
            if p is not None and p[0] == (dst, proto, dport) and p[1] == sport:
                out[p] = self.routers.get(router, router)
        return out
