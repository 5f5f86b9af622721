"""The agent's path probes: an ICMP echo to a destination host, carried inside IPv6 to a uSID
container (what ``encap.red`` with one segment sends), so each probe crosses exactly the path
of its list; the reply returns by plain IPv4 (the fabric's ECMP). No rule or table is needed:
the probe names its path itself.

Why ICMP to the host and not to a SID: a router's SIDs do not answer pings, and the host's
answer proves the whole path including the decapsulation at its leaf.

>>> len(echo("10.0.0.1", "10.0.1.1", 7, 1))
36
>>> ip_checksum(echo("10.0.0.1", "10.0.1.1", 7, 1)[:20])  # a valid IPv4 header sums to 0
0
"""
from __future__ import annotations

import os
import select
import socket
import struct
import time

from controller.enforcement.probepacket import ip_checksum  # one IP checksum

IPPROTO_IPIP = 4  # IPv4 inside IPv6, no SRH (one uSID container)
FAIL_S = 0.5  # a path that worked fails when its probes of this long ago still have no
FAIL_PROBES = 3  # answer, this many of them (a reply delayed by a queue still counts)
BACK_S = 1.0  # a failed path answering again for this long is used again
ICMP_ECHO, ICMP_REPLY = 8, 0


def echo(src: str, dst: str, ident: int, seq: int) -> bytes:
    """An IPv4 packet holding an ICMP echo request with 8 bytes of data."""
    icmp = struct.pack("!BBHHH", ICMP_ECHO, 0, 0, ident, seq) + b"mlroute!"
    icmp = icmp[:2] + struct.pack("!H", ip_checksum(icmp)) + icmp[4:]
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), seq, 0, 64, 1, 0,
                         socket.inet_aton(src), socket.inet_aton(dst))
    header = header[:10] + struct.pack("!H", ip_checksum(header)) + header[12:]
    return header + icmp


class Prober:
    """Raw sockets of one host: sends probes down uSID containers, hears the echo replies
    whenever they come (a queue under load delays them: late answers count)."""

    def __init__(self, src_ip: str):
        self.src = src_ip
        self.ident = os.getpid() & 0xFFFF
        self.seq = 0
        self.tx = socket.socket(socket.AF_INET6, socket.SOCK_RAW, IPPROTO_IPIP)
        self.rx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)

    def close(self) -> None:
        self.tx.close()
        self.rx.close()

    def send(self, probes: list[tuple[str, str]]) -> list[int]:
        """One probe per (uSID container, destination IPv4); their sequence numbers."""
        seqs = []
        for container, dst in probes:
            self.seq = (self.seq + 1) & 0xFFFF
            seqs.append(self.seq)
            try:
                self.tx.sendto(echo(self.src, dst, self.ident, self.seq), (container, 0))
            except OSError:
                pass  # no route: never answered
        return seqs

    def receive(self, until: float) -> list[int]:
        """Sequence numbers of the replies heard until ``until`` (monotonic)."""
        got = []
        while (left := until - time.monotonic()) > 0:
            if not select.select([self.rx], [], [], left)[0]:
                break
            data = self.rx.recv(2048)
            ihl = (data[0] & 0x0F) * 4
            kind, _code, _sum, ident, seq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
            if kind == ICMP_REPLY and ident == self.ident:
                got.append(seq)
        return got

    def round(self, probes: list[tuple[str, str]], timeout: float = 0.1) -> list[bool]:
        """Send and wait up to ``timeout``: whether each probe answered by then."""
        seqs = self.send(probes)
        heard = set(self.receive(time.monotonic() + timeout))
        return [s in heard for s in seqs]


class PathHealth:
    """Per segment list: when it last answered, the probes sent since, and since when it
    answers again. A list fails when ``FAIL_PROBES`` probes went unanswered and the oldest
    of them left ``FAIL_S`` ago (a late reply still counts: a queue under load delays it);
    a list probed seldom fails as slowly as it is probed. A list that never answered is
    unknown (neighbours still resolving at start): only a list that worked can fail.

    >>> h = PathHealth(); h.sent(("a",), 0.0); h.known(("a",))
    False
    >>> h.answered(("a",), 0.1)
    >>> for t in (0.2, 0.3, 0.4): h.sent(("a",), t)
    >>> h.ok(("a",), 0.6), h.ok(("a",), 0.8)
    (True, False)
    """

    def __init__(self):
        self.last_ok: dict[tuple, float] = {}
        self.pending: dict[tuple, list[float]] = {}  # send times since the last answer
        self.ok_since: dict[tuple, float] = {}
        self.srtt = 0.0  # smoothed round trip of every answer: queues stretch the wait

    def sent(self, sids: tuple, now: float) -> None:
        self.pending.setdefault(sids, []).append(now)
        if not self.ok(sids, now):
            self.ok_since.pop(sids, None)

    def answered(self, sids: tuple, now: float, rtt: float = 0.0) -> None:
        self.srtt = rtt if not self.srtt else 0.875 * self.srtt + 0.125 * rtt
        if sids not in self.ok_since:
            self.ok_since[sids] = now
        self.last_ok[sids] = now
        self.pending[sids] = []

    def known(self, sids: tuple) -> bool:
        return sids in self.last_ok

    def ok(self, sids: tuple, now: float) -> bool:
        waiting = self.pending.get(sids, [])
        wait = max(FAIL_S, 4 * self.srtt)  # a loaded queue answers late, not never
        return sids in self.last_ok and not (len(waiting) >= FAIL_PROBES
                                             and now - waiting[0] > wait)

    def back(self, sids: tuple, now: float) -> bool:
        return self.ok(sids, now) and now - self.ok_since.get(sids, now) >= BACK_S
