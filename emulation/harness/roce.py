"""RoCE-like traffic for the emulation: RoCEv2 packets (UDP to port 4791, an InfiniBand Base
Transport Header, ICRC) carried with Reliable-Connection-like reliability, from Mininet hosts.

Why not TCP: the flows mlroute plans in training fabrics are RDMA queue pairs, whose 5-tuple is
UDP 4791 with one source port per queue pair, and whose reliability is RC's go-back-N, not TCP's
selective recovery and congestion control. These agents put those packets on the emulated wire,
so that UDP flows are routed, counted and verified as the controller planned them.

Three layers, the first two pure (unit tested without a network, ``tests/test_roce.py``):

* wire format: ``data_packet`` / ``ack_packet`` build the UDP payload (BTH, AETH for
  acknowledgements, padding to 4 bytes, ICRC over the masked IPv4/UDP/BTH pseudo-header as
  RoCEv2 defines it), ``parse`` reads one. Packets leave with DF set from unconnected sockets,
  so Linux writes IPv4 identification 0 and the ICRC is known before sending.
* ``Requester`` and ``Responder``: one queue pair's sending and receiving state. The requester
  keeps a window of packets in flight, retransmits go-back-N from the PSN a NAK names, and from
  the oldest unacknowledged PSN when its retransmission timer fires (RFC 6298 estimate from
  first transmissions only, doubled on every timeout). The responder accepts only the expected
  PSN, acknowledges cumulatively when asked (the requester sets the AckReq bit every few packets,
  on every message's last packet and when its window is full), sends one NAK (PSN sequence error) per gap and
  re-acknowledges duplicates. Both count what they did.
* ``run_agent``: a single-threaded event loop on UDP sockets that runs one host's side of one
  job: a sequence of steps, each sending one message per outgoing queue pair and waiting for one
  message per incoming queue pair (ring All-Reduce: 2(n-1) steps to the successor and from the
  predecessor; explicit flows: one step, one message of the flow's size). With a barrier (a
  Unix socket outside the emulated network, ``agents.Barrier``) no rank starts a step before
  every rank finished the previous one, while it keeps answering retransmissions.

Sockets: every packet goes to UDP port 4791, as in RoCEv2 (acknowledgements too: they leave
from the flow's source port towards the requester's 4791). Each agent receives on sockets bound
to (its address, 4791) and connected to (peer address, peer source port), with SO_REUSEPORT, so
the kernel hands each agent its own flows even when several jobs share a host; within an agent
the destination QP number names the queue pair, as on a NIC. Limit: two jobs' flows between the
same two hosts in opposite directions with the same source port would share a socket key.

    python -m emulation.harness.roce --spec rank.json --out result.json
"""
from __future__ import annotations

import argparse
import bisect
import errno
import json
import os
import random
import selectors
import socket
import struct
import sys
import time
import zlib
from collections import deque
from dataclasses import dataclass

ROCE_PORT = 4791
PSN_BITS = 24
PSN_MASK = (1 << PSN_BITS) - 1
PKEY_DEFAULT = 0xFFFF

# RC opcodes (InfiniBand spec, table 38; the same values as scapy.contrib.roce)
SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY, ACKNOWLEDGE = 0x00, 0x01, 0x02, 0x04, 0x11
MESSAGE_END = (SEND_LAST, SEND_ONLY)
SYNDROME_ACK = 0x1F  # ACK, credit count "invalid" (no end-to-end credits)
SYNDROME_NAK_PSN = 0x60  # NAK, code 0: PSN sequence error

_BTH = struct.Struct("!BBHBBHBBH")  # opcode, flags, pkey, fecn/becn/resv, dqpn (24 bits), A/resv, psn
_AETH = struct.Struct("!I")
BTH_LEN, AETH_LEN, ICRC_LEN = 12, 4, 4
IP_UDP_LEN = 28


# --------------------------------------------------------------------------- wire format

def bth(opcode: int, dqpn: int, psn: int, ackreq: bool = False, pad: int = 0,
        resv8a: int = 0) -> bytes:
    """The 12-byte Base Transport Header. ``resv8a`` is the FECN/BECN/reserved byte, all ones
    in the ICRC pseudo-header."""
    return _BTH.pack(opcode, (pad & 3) << 4, PKEY_DEFAULT, resv8a, (dqpn >> 16) & 0xFF,
                     dqpn & 0xFFFF, 0x80 if ackreq else 0, (psn >> 16) & 0xFF, psn & 0xFFFF)


def _pseudo_ip_udp(src_ip: str, dst_ip: str, sport: int, dport: int, udp_payload_len: int) -> bytes:
    """The ICRC's view of the IPv4 and UDP headers: 8 bytes of ones (the LRH placeholder), TOS,
    TTL and both checksums as ones; identification 0 and DF, as our sockets send them."""
    total = IP_UDP_LEN + udp_payload_len
    return (b"\xff" * 8 + struct.pack("!BBHHHBBH4s4s", 0x45, 0xFF, total, 0, 0x4000, 0xFF, 17,
                                      0xFFFF, socket.inet_aton(src_ip), socket.inet_aton(dst_ip))
            + struct.pack("!HHHH", sport, dport, 8 + udp_payload_len, 0xFFFF))


def icrc(src_ip: str, dst_ip: str, sport: int, dport: int, transport: bytes) -> bytes:
    """RoCEv2 invariant CRC of ``transport`` (BTH, extension headers, payload, pad), sent
    least significant byte first. O(len)."""
    masked = transport[:4] + b"\xff" + transport[5:BTH_LEN]
    crc = zlib.crc32(_pseudo_ip_udp(src_ip, dst_ip, sport, dport, len(transport) + ICRC_LEN))
    crc = zlib.crc32(masked, crc)
    crc = zlib.crc32(transport[BTH_LEN:], crc)
    return struct.pack("<I", crc & 0xFFFFFFFF)


def data_packet(src_ip: str, dst_ip: str, sport: int, opcode: int, dqpn: int, psn: int,
                nbytes: int, ackreq: bool = False, dport: int = ROCE_PORT) -> bytes:
    """UDP payload of a SEND packet carrying ``nbytes`` zero bytes, padded to 4 bytes.

    >>> len(data_packet("10.0.0.1", "10.0.1.1", 49152, SEND_ONLY, 0x11, 0, 6))
    24
    """
    pad = -nbytes % 4
    transport = bth(opcode, dqpn, psn & PSN_MASK, ackreq, pad) + bytes(nbytes + pad)
    return transport + icrc(src_ip, dst_ip, sport, dport, transport)


def ack_packet(src_ip: str, dst_ip: str, sport: int, dqpn: int, psn: int, syndrome: int,
               msn: int, dport: int = ROCE_PORT) -> bytes:
    """UDP payload of an ACKNOWLEDGE packet (BTH + AETH): an ACK acknowledges every PSN up to
    ``psn``; a NAK (PSN sequence error) names the PSN the responder expects."""
    transport = bth(ACKNOWLEDGE, dqpn, psn & PSN_MASK) + _AETH.pack((syndrome << 24) | (msn & PSN_MASK))
    return transport + icrc(src_ip, dst_ip, sport, dport, transport)


@dataclass(frozen=True)
class Header:
    opcode: int
    dqpn: int
    psn: int
    ackreq: bool
    nbytes: int  # payload bytes without padding
    syndrome: int = 0
    msn: int = 0


def parse(payload: bytes) -> Header:
    """Read one UDP payload; raises ValueError when it is not a BTH packet of ours."""
    if len(payload) < BTH_LEN + ICRC_LEN:
        raise ValueError("shorter than BTH + ICRC")
    op, flags, _pkey, _r, q_hi, q_lo, a, p_hi, p_lo = _BTH.unpack_from(payload)
    dqpn, psn, ackreq = (q_hi << 16) | q_lo, (p_hi << 16) | p_lo, bool(a & 0x80)
    if op == ACKNOWLEDGE:
        if len(payload) < BTH_LEN + AETH_LEN + ICRC_LEN:
            raise ValueError("ACKNOWLEDGE without AETH")
        (word,) = _AETH.unpack_from(payload, BTH_LEN)
        return Header(op, dqpn, psn, ackreq, 0, word >> 24, word & PSN_MASK)
    nbytes = len(payload) - BTH_LEN - ICRC_LEN - ((flags >> 4) & 3)
    if nbytes < 0:
        raise ValueError("pad count larger than the payload")
    return Header(op, dqpn, psn, ackreq, nbytes)


def icrc_ok(src_ip: str, dst_ip: str, sport: int, payload: bytes, dport: int = ROCE_PORT) -> bool:
    return icrc(src_ip, dst_ip, sport, dport, payload[:-ICRC_LEN]) == payload[-ICRC_LEN:]


def unwrap(psn: int, ref: int) -> int:
    """The absolute sequence number nearest ``ref`` whose low 24 bits are ``psn``.

    >>> unwrap(2, (1 << 24) - 3)
    16777218
    """
    half = 1 << (PSN_BITS - 1)
    return ref + ((psn - ref + half) & PSN_MASK) - half


# --------------------------------------------------------------------------- state machines

class Requester:
    """Sending side of one RC queue pair: messages cut into ``mtu``-byte packets, at most
    ``window`` packets unacknowledged, go-back-N on NAK and on timeout.

    PSNs are kept absolute (the wire carries the low 24 bits). Time is passed in (``now``), so
    the machine runs the same in tests and on sockets. Every call is O(1) amortised, apart from
    the O(log m) message lookup of a packet (m messages posted and not yet acknowledged).

    >>> rq = Requester(mtu=4, window=2); rq.post(10)
    >>> rq.next_packet(0.0), rq.next_packet(0.0), rq.next_packet(0.0)
    ((0, 0, 4, False), (1, 1, 4, True), None)
    """

    def __init__(self, mtu: int = 4096, window: int = 16, ack_every: int = 4, rto: float = 1.0,
                 min_rto: float = 0.2, max_rto: float = 8.0, psn0: int = 0):
        if mtu <= 0 or window <= 0 or ack_every <= 0:
            raise ValueError("mtu, window and ack_every must be positive")
        self.mtu, self.window, self.ack_every = mtu, window, ack_every
        self.rto, self.min_rto, self.max_rto = rto, min_rto, max_rto
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.base = self.next = self.end = self.high = self.clean_from = psn0
        self._firsts: list[int] = []  # first PSN of each unacknowledged message
        self._msgs: deque = deque()  # (first psn, packets, bytes)
        self._sent_at: dict[int, float] = {}
        self.timer: float | None = None
        self.messages_done = 0
        self.packets_sent = self.retransmitted = self.acks = self.naks = self.timeouts = 0
        self.bytes_acked = 0

    @property
    def done(self) -> bool:
        """Every posted packet acknowledged."""
        return self.base == self.end

    def post(self, nbytes: int) -> None:
        """Queue one SEND message of ``nbytes`` (0 gives one empty SEND_ONLY packet)."""
        n = max(1, -(-nbytes // self.mtu))
        self._msgs.append((self.end, n, nbytes))
        self._firsts.append(self.end)
        self.end += n

    def _describe(self, psn: int) -> tuple[int, int, bool]:
        i = bisect.bisect_right(self._firsts, psn) - 1
        first, n, nbytes = self._msgs[i]
        k = psn - first
        if n == 1:
            return SEND_ONLY, nbytes, True
        if k == n - 1:
            return SEND_LAST, nbytes - (n - 1) * self.mtu, True
        return (SEND_FIRST if k == 0 else SEND_MIDDLE), self.mtu, False

    def next_packet(self, now: float):
        """(psn, opcode, payload bytes, ackreq) of the next packet to send, or None when the
        window is full or nothing is left."""
        if self.next >= self.end or self.next - self.base >= self.window:
            return None
        psn = self.next
        self.next += 1
        opcode, nbytes, last = self._describe(psn)
        retransmit = psn < self.high
        if retransmit:
            self.retransmitted += 1
        else:
            self.high = psn + 1
            self._sent_at[psn] = now
        self.packets_sent += 1
        if self.timer is None:
            self.timer = now + self.rto
        ackreq = (last or retransmit or (psn + 1) % self.ack_every == 0
                  or self.next - self.base >= self.window)  # a full window must be answered
        return psn, opcode, nbytes, ackreq

    def _advance(self, to: int, now: float) -> None:
        """Everything below ``to`` is acknowledged."""
        if to <= self.base:
            return
        sample = self._sent_at.get(to - 1)
        if sample is not None and to - 1 >= self.clean_from:
            self._rtt_sample(now - sample)
        for p in range(self.base, to):
            self._sent_at.pop(p, None)
        self.base = to
        self.next = max(self.next, to)
        while self._msgs and self._msgs[0][0] + self._msgs[0][1] <= to:
            _, _, nbytes = self._msgs.popleft()
            self._firsts.pop(0)
            self.bytes_acked += nbytes
            self.messages_done += 1
        self.timer = now + self.rto if self.base < self.next else None

    def _rtt_sample(self, r: float) -> None:
        if self.srtt is None:
            self.srtt, self.rttvar = r, r / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - r)
            self.srtt = 0.875 * self.srtt + 0.125 * r
        self.rto = min(self.max_rto, max(self.min_rto, self.srtt + 4 * self.rttvar))

    def on_ack(self, psn: int, now: float) -> None:
        """Cumulative ACK of every PSN up to ``psn`` (24-bit wire value)."""
        acked = unwrap(psn, self.base)
        self.acks += 1
        if self.base <= acked < self.high:
            self._advance(acked + 1, now)

    def on_nak(self, psn: int, now: float) -> None:
        """PSN sequence error: the responder expects ``psn``; everything before it arrived, and
        everything from it on is sent again (go-back-N)."""
        expected = unwrap(psn, self.base)
        self.naks += 1
        if not self.base <= expected < self.high:
            return  # stale: already acknowledged past it
        self._advance(expected, now)
        self.next = expected
        self.clean_from = self.high
        self.timer = now + self.rto

    def on_timer(self, now: float) -> bool:
        """Retransmission timeout: go back to the oldest unacknowledged PSN, double the timeout.
        Returns whether it fired."""
        if self.timer is None or now < self.timer:
            return False
        if self.base >= self.high:
            self.timer = None
            return False
        self.timeouts += 1
        self.next = self.base
        self.clean_from = self.high
        self.rto = min(self.max_rto, 2 * self.rto)
        self.timer = now + self.rto
        return True

    def counters(self) -> dict:
        return {"packets_sent": self.packets_sent, "retransmitted": self.retransmitted,
                "acks_received": self.acks, "naks_received": self.naks, "timeouts": self.timeouts,
                "messages": self.messages_done, "bytes_acked": self.bytes_acked,
                "srtt_ms": round(self.srtt * 1e3, 3) if self.srtt is not None else None}


class Responder:
    """Receiving side of one RC queue pair: only the expected PSN is accepted.

    ``on_packet`` returns the reply to send, (syndrome, psn, msn) or None: an ACK of the last
    in-order PSN when the packet asks for one, one NAK per gap (the next NAK only after the gap
    closed, as the InfiniBand responder does), an ACK again for every duplicate. O(1).

    >>> rs = Responder(); rs.on_packet(1, SEND_ONLY, True, 8)
    (96, 0, 0)
    """

    def __init__(self, psn0: int = 0):
        self.expected = psn0
        self.msn = 0
        self._nak_sent = False
        self.packets_received = self.delivered = self.out_of_order = self.duplicates = 0
        self.acks_sent = self.naks_sent = 0
        self.bytes = 0

    def on_packet(self, psn: int, opcode: int, ackreq: bool, nbytes: int):
        self.packets_received += 1
        p = unwrap(psn, self.expected)
        if p > self.expected:
            self.out_of_order += 1
            if self._nak_sent:
                return None
            self._nak_sent = True
            self.naks_sent += 1
            return SYNDROME_NAK_PSN, self.expected & PSN_MASK, self.msn
        if p < self.expected:
            self.duplicates += 1
            self.acks_sent += 1
            return SYNDROME_ACK, (self.expected - 1) & PSN_MASK, self.msn
        self.expected += 1
        self._nak_sent = False
        self.delivered += 1
        self.bytes += nbytes
        if opcode in MESSAGE_END:
            self.msn += 1
        if ackreq:
            self.acks_sent += 1
            return SYNDROME_ACK, p & PSN_MASK, self.msn
        return None

    def counters(self) -> dict:
        return {"packets_received": self.packets_received, "delivered": self.delivered,
                "out_of_order": self.out_of_order, "duplicates": self.duplicates,
                "acks_sent": self.acks_sent, "naks_sent": self.naks_sent,
                "messages": self.msn, "bytes": self.bytes}


# --------------------------------------------------------------------------- agent on sockets

# 32 packets of 4 kB: 128 kB in flight, as the TCP agents' clamped window. Measured on 2 x 4 x 2
# at 5 Mbit/s (2 rounds each): 16 packets left a lone flow's link idle while a busy machine did
# not run the agent in time (greedy 1.07-1.09x the fluid model, 32: 1.03-1.05); 64 packets
# queued 0.4 s and a timer set from a quieter moment fired spuriously (1.13).
WINDOW = 32
MIN_RTO = 0.5  # s; gaps are repaired by NAK, the timer only covers lost ACKs and tails

@dataclass
class _SendQP:
    qpn: int
    peer: str
    sport: int
    bytes: int  # per step
    req: Requester


@dataclass
class _RecvQP:
    qpn: int
    peer: str
    sport: int
    bytes: int  # per step
    resp: Responder


def _udp_socket(ip: str, port: int, bufsize: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    for opt, fallback in ((getattr(socket, "SO_RCVBUFFORCE", 33), socket.SO_RCVBUF),
                          (getattr(socket, "SO_SNDBUFFORCE", 32), socket.SO_SNDBUF)):
        try:
            s.setsockopt(socket.SOL_SOCKET, opt, bufsize)
        except OSError:  # not root: the plain option, capped by the system maximum
            s.setsockopt(socket.SOL_SOCKET, fallback, bufsize)
    s.bind((ip, port))
    s.setblocking(False)
    return s


class Agent:
    """One host's side of one job on real sockets (see the module docstring). ``spec``:

    ``ip`` (this host), ``send`` and ``recv``: lists of queue pairs {"qpn", "peer" (IP),
    "sport" (the flow's source port), "bytes" (per step)}; ``steps``, ``iterations``,
    ``compute_s``, ``start_at`` (epoch seconds) or ``start_gate`` (the runner's Unix socket,
    ``agents.await_start``), ``barrier`` (Unix socket path or null),
    ``rank``, ``size``; optional ``mtu`` (payload bytes per packet, 4096), ``window``
    (packets, 32), ``ack_every`` (4), ``min_rto`` (s, 0.5), ``stall_s`` (no progress for this long
    is an error, 60), ``drop`` (probability that a received packet is discarded, to test
    recovery) and ``seed``.
    """

    def __init__(self, spec: dict):
        self.spec = spec
        self.ip = spec["ip"]
        mtu, window = int(spec.get("mtu", 4096)), int(spec.get("window", WINDOW))
        ack_every, min_rto = int(spec.get("ack_every", 4)), float(spec.get("min_rto", MIN_RTO))
        self.sends = {q["qpn"]: _SendQP(q["qpn"], q["peer"], q["sport"], int(q["bytes"]),
                                        Requester(mtu, window, ack_every, min_rto=min_rto))
                      for q in spec.get("send", [])}
        self.recvs = {q["qpn"]: _RecvQP(q["qpn"], q["peer"], q["sport"], int(q["bytes"]),
                                        Responder()) for q in spec.get("recv", [])}
        if len(self.sends) + len(self.recvs) != len(spec.get("send", [])) + len(spec.get("recv", [])):
            raise ValueError("queue pair numbers must be unique")
        self.stall_s = float(spec.get("stall_s", 60.0))
        self.drop = float(spec.get("drop", 0.0))
        self.rng = random.Random(spec.get("seed", 0))
        self.dropped = self.bad_packets = self.send_errors = 0
        self.sel = selectors.DefaultSelector()
        bufsize = 4 << 20
        self.tx: dict[int, socket.socket] = {}
        self.rx: dict[tuple[str, int], socket.socket] = {}
        for q in list(self.sends.values()) + list(self.recvs.values()):
            if q.sport not in self.tx:
                s = _udp_socket(self.ip, q.sport, bufsize)
                s.setsockopt(socket.IPPROTO_IP, getattr(socket, "IP_MTU_DISCOVER", 10),
                             getattr(socket, "IP_PMTUDISC_DO", 2))  # DF set, IPv4 id 0
                self.tx[q.sport] = s
            key = (q.peer, q.sport)
            if key not in self.rx:
                s = _udp_socket(self.ip, ROCE_PORT, bufsize)
                s.connect(key)  # the kernel prefers this exact match over other 4791 sockets
                self.rx[key] = s
                self.sel.register(s, selectors.EVENT_READ, (self._on_datagrams, key))
        self.barrier = None
        self._progress = time.monotonic()
        self.received_bytes = 0

    # -- packets
    def _send(self, sport: int, peer: str, payload: bytes) -> None:
        try:
            self.tx[sport].sendto(payload, (peer, ROCE_PORT))
        except (BlockingIOError, ConnectionRefusedError):
            self.send_errors += 1  # like a drop: the timeout or a NAK recovers
        except OSError as e:
            if e.errno == errno.EMSGSIZE:
                raise ValueError(f"a {len(payload)}-byte RoCE packet does not fit the path MTU "
                                 "to " + peer + "; choose a smaller RoCE MTU (--roce-mtu 1024)"
                                 ) from e
            raise

    def _send_window(self, now: float) -> None:
        """Round robin over the queue pairs, one packet each, until every window is full."""
        busy = True
        while busy:
            busy = False
            for q in self.sends.values():
                pkt = q.req.next_packet(now)
                if pkt is None:
                    continue
                busy = True
                psn, opcode, nbytes, ackreq = pkt
                self._send(q.sport, q.peer, data_packet(self.ip, q.peer, q.sport, opcode, q.qpn,
                                                        psn, nbytes, ackreq))

    def _on_datagrams(self, sock: socket.socket, key: tuple[str, int]) -> None:
        peer, sport = key
        for _ in range(256):
            try:
                payload = sock.recv(65535)
            except BlockingIOError:
                return
            except ConnectionRefusedError:
                continue
            if self.drop and self.rng.random() < self.drop:
                self.dropped += 1
                continue
            try:
                h = parse(payload)
            except ValueError:
                self.bad_packets += 1
                continue
            if not icrc_ok(peer, self.ip, sport, payload):
                self.bad_packets += 1
                continue
            now = time.monotonic()
            if h.opcode == ACKNOWLEDGE:
                q = self.sends.get(h.dqpn)
                if q is None:
                    self.bad_packets += 1
                    continue
                before = q.req.base
                if h.syndrome >> 5 == SYNDROME_NAK_PSN >> 5:
                    q.req.on_nak(h.psn, now)
                else:
                    q.req.on_ack(h.psn, now)
                if q.req.base != before:
                    self._progress = now
            else:
                r = self.recvs.get(h.dqpn)
                if r is None:
                    self.bad_packets += 1
                    continue
                delivered = r.resp.delivered
                reply = r.resp.on_packet(h.psn, h.opcode, h.ackreq, h.nbytes)
                if r.resp.delivered != delivered:
                    self._progress = now
                if reply is not None:
                    syndrome, psn, msn = reply
                    self._send(r.sport, r.peer, ack_packet(self.ip, r.peer, r.sport, r.qpn, psn,
                                                           syndrome, msn))

    def _pump(self, done, until: float | None = None) -> None:
        """Serve the network until ``done()`` holds (and ``until``, a monotonic time, passed)."""
        while True:
            now = time.monotonic()
            if done() and (until is None or now >= until):
                return
            for q in self.sends.values():
                q.req.on_timer(now)
            self._send_window(now)
            deadlines = [q.req.timer for q in self.sends.values() if q.req.timer is not None]
            if until is not None:
                deadlines.append(until)
            timeout = max(0.0, min(deadlines) - now) if deadlines else 0.5
            for key, _ in self.sel.select(min(timeout, 0.5)):
                handler, data = key.data
                handler(key.fileobj, data)
            if not done() and time.monotonic() - self._progress > self.stall_s:
                raise TimeoutError(f"no progress for {self.stall_s:g} s (peer gone?)")

    def resolve_neighbours(self, timeout: float = 3.0) -> bool:
        """Resolve every peer's MAC address before the first packet, as an RDMA NIC does when
        a queue pair connects (rdma_resolve_addr): otherwise the first window of every queue
        pair waits in the ARP queue, which holds about 200 kB (counted in allocated bytes), and
        the rest is dropped. A one-byte datagram to the peer's discard port starts the
        resolution; /proc/net/arp tells when it is complete. Returns whether all resolved."""
        peers = {q.peer for q in list(self.sends.values()) + list(self.recvs.values())
                 if not q.peer.startswith("127.")}
        if not peers:
            return True
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((self.ip, 0))
            for p in peers:
                try:
                    s.sendto(b"\0", (p, 9))
                except OSError:
                    pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with open("/proc/net/arp") as fh:
                    done = {line.split()[0] for line in fh.readlines()[1:]
                            if int(line.split()[2], 16) & 0x2}
            except OSError:
                return False
            if peers <= done:
                return True
            time.sleep(0.02)
        return False

    def _on_barrier(self, sock, _data) -> None:
        self.barrier.on_readable(sock)

    def run(self) -> dict:
        from emulation.harness.agents import Barrier, await_start
        spec = self.spec
        steps, iterations = int(spec["steps"]), int(spec.get("iterations", 1))
        deadline = time.time() + 30.0
        if spec.get("barrier"):
            self.barrier = Barrier(spec["barrier"], int(spec.get("rank", 0)),
                                   int(spec.get("size", 1)), deadline)
        self.neighbours_resolved = self.resolve_neighbours()
        await_start(spec.get("start_gate"), float(spec.get("start_at", 0)), deadline)
        if self.barrier:
            self.barrier.wait()  # every rank's sockets exist: nothing is sent into the void
            for s in self.barrier.peers:
                self.sel.register(s, selectors.EVENT_READ, (self._on_barrier, None))
        result_iters = []
        target = 0
        self._progress = time.monotonic()
        for it in range(iterations):
            start = time.time()
            step_times = []
            for _ in range(steps):
                t0 = time.time()
                for q in self.sends.values():
                    q.req.post(q.bytes)
                target += 1
                self._progress = time.monotonic()
                self._pump(lambda: (all(q.req.done for q in self.sends.values()) and
                                    all(r.resp.msn >= target for r in self.recvs.values())))
                if self.barrier:
                    gen = self.barrier.arrive()
                    self._pump(lambda: self.barrier.released >= gen)
                step_times.append(time.time() - t0)
            result_iters.append({"start": start, "end": time.time(), "steps": step_times})
            if it + 1 < iterations and spec.get("compute_s"):
                self._pump(lambda: True, time.monotonic() + float(spec["compute_s"]))
        if not self.barrier:  # answer retransmissions of peers whose last ACK was lost
            self._pump(lambda: True, time.monotonic() + float(spec.get("linger_s", 2.0)))
        return {"iterations": result_iters,
                "sent_bytes": sum(q.req.bytes_acked for q in self.sends.values()),
                "received_bytes": sum(r.resp.bytes for r in self.recvs.values()),
                "send": [{"qpn": q.qpn, "peer": q.peer, "sport": q.sport, **q.req.counters()}
                         for q in self.sends.values()],
                "recv": [{"qpn": r.qpn, "peer": r.peer, "sport": r.sport, **r.resp.counters()}
                         for r in self.recvs.values()],
                "agent": {"dropped_on_purpose": self.dropped, "bad_packets": self.bad_packets,
                          "send_errors": self.send_errors,
                          "neighbours_resolved": self.neighbours_resolved}}

    def close(self) -> None:
        for s in list(self.tx.values()) + list(self.rx.values()):
            s.close()
        if self.barrier:
            self.barrier.close()
        self.sel.close()


def run_agent(spec: dict) -> dict:
    agent = Agent(spec)
    try:
        return agent.run()
    finally:
        agent.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emulation.harness.roce", description=__doc__.split("\n")[0])
    ap.add_argument("--spec", required=True, help="JSON file: this host's queue pairs and steps")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    with open(args.spec) as fh:
        spec = json.load(fh)
    try:
        result = run_agent(spec)
    except (OSError, TimeoutError, ValueError, KeyError) as e:
        result = {"error": f"{type(e).__name__}: {e}"}
    tmp = args.out + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(result, fh)
    os.replace(tmp, args.out)
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
