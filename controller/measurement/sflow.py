"""sFlow v5 packet samples: a small decoder and a UDP collector.

Why sFlow: Open vSwitch and every data-centre switch sample packets in hardware or in the
datapath and send the samples to a collector, so the controller learns who sends how much to
whom with no flow entry at all (no rule budget at any scale) and the same way in flow, sr and
host modes. No maintained Python sFlow library exists, hence this decoder. It reads only what
the learner needs: flow samples (format 1) and expanded flow samples (format 3) with their
sampling rate and interfaces, and in them the raw packet header record (format 1): Ethernet,
802.1Q tags, an MPLS label stack (segment routing) then IPv4 addresses, protocol and ports.
IPv4 inside IPv6 (srv6 mode: the hosts encapsulate, so routers sample packets whose outer
header is IPv6) is read from the inner IPv4 header: next header 4 directly (a uSID container)
or after extension headers (an SRv6 routing header, hop-by-hop and destination options, AH, a
first fragment). A sample of IPv6 that carries no IPv4 has no addresses, as before.
Everything else (counter samples, other records, vendor formats) is skipped by its length.

The datagram format is XDR (big-endian 32-bit words), https://sflow.org/sflow_version_5.txt.
Malformed input raises ``SflowError`` and nothing else; a packet header that is merely
truncated (switches copy only the first bytes of a packet) is not an error: the fields it does
not reach are None.
"""
from __future__ import annotations

import ipaddress
import logging
import socket
import struct
import threading
from collections.abc import Callable
from typing import NamedTuple

LOG = logging.getLogger(__name__)

SFLOW_PORT = 6343
MAX_DATAGRAM = 65535

_WORD = struct.Struct("!I")
_HEAD = struct.Struct("!4I")  # sub-agent id, sequence number, uptime (ms), number of samples
_SAMPLE = struct.Struct("!2I")  # data format (enterprise << 12 | format), length
_FLOW = struct.Struct("!8I")  # seq, source id, rate, pool, drops, input, output, records
_FLOW_EXP = struct.Struct("!11I")  # seq, id type, id index, rate, pool, drops, in fmt, in,
#                                    out fmt, out, records
_RAW = struct.Struct("!4I")  # header protocol, frame length, stripped, header length
_ETHERTYPE = struct.Struct("!H")
_TWO = struct.Struct("!2I")
_VLAN = struct.Struct("!HH")
_IPV4 = struct.Struct("!B5xH1xB2x4s4s")  # version/IHL, flags/fragment, protocol, src, dst
_PORTS = struct.Struct("!HH")

FLOW_SAMPLE, FLOW_SAMPLE_EXPANDED, RAW_HEADER = 1, 3, 1
PROTO_ETHERNET, PROTO_IPV4, PROTO_IPV6 = 1, 11, 12
ETHERTYPE_IPV4, ETHERTYPE_IPV6 = 0x0800, 0x86DD
IPPROTO_IPIP = 4  # IPv4 inside IPv6 (RFC 2473): SRv6 encapsulation of IPv4 (H.Encaps, End.DX4)
# IPv6 extension headers of the common form (next header, then the length in 8-byte units
# beyond the first 8, RFC 8200 4.1): hop-by-hop options, routing (SRv6's SRH is routing type
# 4, RFC 8754), destination options, mobility, HIP, shim6; and two of their own
IPV6_EXTENSIONS = frozenset((0, 43, 60, 135, 139, 140))
IPV6_FRAGMENT, IPV6_AH = 44, 51  # fragment (8 bytes), authentication (4-byte units, RFC 4302)
MAX_EXTENSIONS = 8
VLAN_TYPES = (0x8100, 0x88A8, 0x9100)
MPLS_TYPES = (0x8847, 0x8848)
MAX_LABELS = 16
PORT_PROTOCOLS = (6, 17, 132)  # TCP, UDP, SCTP: ports are the first 4 bytes of the payload


class SflowError(ValueError):
    """A datagram that is not well-formed sFlow v5; the message names what is wrong."""


class PacketSample(NamedTuple):
    """One sampled packet as a switch reported it. ``agent`` (the switch's agent address) and
    ``source_type``/``source_index`` (its data source, e.g. a bridge) say where it was taken;
    ``input_if``/``output_if`` are ifIndex values (None when not a single interface). The packet
    stands for ``sampling_rate`` packets of ``frame_length`` bytes (IPv4 inside IPv6: the
    addresses and ports are the inner IPv4 packet's, the frame length the whole frame's,
    encapsulation included). Address fields are None when the header is neither IPv4 nor IPv6
    carrying IPv4, or is cut before them. ``dropped``: the output field says the switch
    discarded the packet (format 1 of the interface field; Open vSwitch samples on ingress and
    says so of a packet its tables dropped, 0x40000000 | 256). (A named tuple: decoding makes
    hundreds of thousands a second at scale.)"""
    agent: str
    sub_agent: int
    source_type: int
    source_index: int
    sampling_rate: int
    sample_pool: int
    drops: int
    input_if: int | None
    output_if: int | None
    frame_length: int
    src: str | None = None
    dst: str | None = None
    proto: int | None = None
    sport: int | None = None
    dport: int | None = None
    vlan: int | None = None
    mpls: tuple[int, ...] = ()
    dropped: bool = False

    @property
    def estimated_bytes(self) -> int:
        """The bytes this sample stands for (unbiased when every packet is sampled with
        probability 1 / sampling_rate)."""
        return self.frame_length * self.sampling_rate


_NO_FIELDS = (None, None, None, None, None, None, ())
_ADDRESSES: dict[bytes, str] = {}  # 4 bytes -> dotted quad: a dict hit is 10x inet_ntoa


def _ipv4(raw: bytes) -> str:
    text = _ADDRESSES.get(raw)
    if text is None:
        if len(_ADDRESSES) > 1 << 16:
            _ADDRESSES.clear()
        text = _ADDRESSES[raw] = socket.inet_ntoa(raw)
    return text


def _ipv6_inner(data: bytes, pos: int, end: int) -> int:
    """Where the IPv4 packet inside the IPv6 packet at data[pos:end] begins (next header 4,
    directly or after extension headers), or -1: not IPv6, no IPv4 inside (plain IPv6,
    IPv6 in IPv6, ESP, an unknown header), a fragment other than the first (the inner header
    is in the first), or the header cut before the inner packet."""
    if end - pos < 40 or data[pos] >> 4 != 6:
        return -1
    nh = data[pos + 6]
    pos += 40
    for _ in range(MAX_EXTENSIONS + 1):
        if nh == IPPROTO_IPIP:
            return pos
        if end - pos < 8:  # every extension header is at least 8 bytes
            return -1
        if nh in IPV6_EXTENSIONS:
            nh, pos = data[pos], pos + 8 + 8 * data[pos + 1]
        elif nh == IPV6_FRAGMENT:
            if (data[pos + 2] << 5) | (data[pos + 3] >> 3):  # offset: not the first fragment
                return -1
            nh, pos = data[pos], pos + 8
        elif nh == IPV6_AH:
            nh, pos = data[pos], pos + 4 * (data[pos + 1] + 2)
        else:
            return -1
    return -1


def _packet_fields(proto: int, data: bytes, pos: int, end: int) -> tuple:
    """(src, dst, proto, sport, dport, vlan, mpls) from the sampled header in data[pos:end];
    stops quietly where the header is cut or the packet is neither IPv4 nor IPv4 in IPv6."""
    vlan, labels = None, ()
    if proto == PROTO_ETHERNET:
        if end - pos < 14:
            return _NO_FIELDS
        etype = _ETHERTYPE.unpack_from(data, pos + 12)[0]
        pos += 14
        while etype in VLAN_TYPES:
            if end - pos < 4:
                return _NO_FIELDS[:5] + (vlan, labels)
            tci, etype = _VLAN.unpack_from(data, pos)
            if vlan is None:
                vlan = tci & 0x0FFF
            pos += 4
        if etype in MPLS_TYPES:
            stack = []
            while True:
                if end - pos < 4 or len(stack) >= MAX_LABELS:
                    return _NO_FIELDS[:5] + (vlan, tuple(stack))
                word = _WORD.unpack_from(data, pos)[0]
                stack.append(word >> 12)
                pos += 4
                if word & 0x100:  # bottom of stack
                    break
            labels = tuple(stack)
            # MPLS does not say what it carries; IPv4 and IPv6 by their version nibble
            if pos < end and data[pos] >> 4 == 6:
                pos = _ipv6_inner(data, pos, end)
        elif etype == ETHERTYPE_IPV6:
            pos = _ipv6_inner(data, pos, end)
        elif etype != ETHERTYPE_IPV4:
            return _NO_FIELDS[:5] + (vlan, labels)
    elif proto == PROTO_IPV6:
        pos = _ipv6_inner(data, pos, end)
    elif proto != PROTO_IPV4:
        return _NO_FIELDS
    if pos < 0 or end - pos < 20 or data[pos] >> 4 != 4:
        return _NO_FIELDS[:5] + (vlan, labels)
    vihl, frag, ip_proto, src, dst = _IPV4.unpack_from(data, pos)
    ihl = (vihl & 0x0F) * 4
    if ihl < 20:
        return _NO_FIELDS[:5] + (vlan, labels)
    sport = dport = None
    if ip_proto in PORT_PROTOCOLS and frag & 0x1FFF == 0 and end - pos >= ihl + 4:
        sport, dport = _PORTS.unpack_from(data, pos + ihl)
    return _ipv4(src), _ipv4(dst), ip_proto, sport, dport, vlan, labels


def _records(data: bytes, pos: int, end: int, count: int) -> tuple | None:
    """The raw packet header record among ``count`` flow records in data[pos:end], as
    (frame length, fields); None if the sample has none."""
    if count > (end - pos) // 8:
        raise SflowError(f"flow sample claims {count} records in {end - pos} bytes")
    found = None
    for _ in range(count):
        if pos + 8 > end:
            raise SflowError("flow record header runs past the end of its sample")
        fmt, length = _SAMPLE.unpack_from(data, pos)
        pos += 8
        if length > end - pos:
            raise SflowError(f"flow record of {length} bytes runs past the end of its sample")
        if fmt == RAW_HEADER and found is None:
            if length < _RAW.size:
                raise SflowError(f"raw packet header record of {length} bytes is too short")
            proto, frame_length, _stripped, hlen = _RAW.unpack_from(data, pos)
            if _RAW.size + hlen > length:
                raise SflowError(f"sampled header of {hlen} bytes does not fit its record "
                                 f"of {length} bytes")
            first = pos + _RAW.size
            found = (frame_length, _packet_fields(proto, data, first, first + hlen))
        pos += length
    return found


def parse_datagram(data: bytes) -> list[PacketSample]:
    """The packet samples of one sFlow v5 datagram (counter samples and samples without a
    packet header are skipped). Raises SflowError, and only that, if the datagram is
    malformed."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise SflowError(f"an sFlow datagram is bytes, not {type(data).__name__}")
    if not isinstance(data, bytes):
        data = bytes(data)
    n = len(data)
    if n < 8:
        raise SflowError(f"datagram of {n} bytes is too short for sFlow")
    version, addr_type = _TWO.unpack_from(data, 0)
    if version != 5:
        raise SflowError(f"sFlow version {version} is not supported (only version 5)")
    pos = 8
    if addr_type == 1:
        if n < pos + 4:
            raise SflowError("datagram ends inside its agent address")
        agent = _ipv4(data[pos:pos + 4])
        pos += 4
    elif addr_type == 2:
        if n < pos + 16:
            raise SflowError("datagram ends inside its agent address")
        agent = socket.inet_ntop(socket.AF_INET6, data[pos:pos + 16])
        pos += 16
    elif addr_type == 0:
        agent = ""
    else:
        raise SflowError(f"unknown agent address type {addr_type}")
    if n < pos + _HEAD.size:
        raise SflowError("datagram ends inside its header")
    sub_agent, _seq, _uptime, count = _HEAD.unpack_from(data, pos)
    pos += _HEAD.size
    if count > (n - pos) // 8:
        raise SflowError(f"datagram claims {count} samples in {n - pos} bytes")
    out: list[PacketSample] = []
    new = tuple.__new__
    for _ in range(count):
        if pos + 8 > n:
            raise SflowError("sample header runs past the end of the datagram")
        fmt, length = _SAMPLE.unpack_from(data, pos)
        pos += 8
        end = pos + length
        if end > n:
            raise SflowError(f"sample of {length} bytes runs past the end of the datagram")
        if fmt == FLOW_SAMPLE:
            if length < _FLOW.size:
                raise SflowError(f"flow sample of {length} bytes is too short")
            _s, source, rate, pool, drops, inp, outp, nrec = _FLOW.unpack_from(data, pos)
            stype, sindex = source >> 24, source & 0xFFFFFF
            # compact interface format: 2 bits of format, 30 of value; 0x3FFFFFFF: unknown
            in_if = inp if inp < 0x3FFFFFFF else None
            out_if = outp if outp < 0x3FFFFFFF else None
            dropped = outp >> 30 == 1
            rec = _records(data, pos + _FLOW.size, end, nrec)
        elif fmt == FLOW_SAMPLE_EXPANDED:
            if length < _FLOW_EXP.size:
                raise SflowError(f"expanded flow sample of {length} bytes is too short")
            (_s, stype, sindex, rate, pool, drops, in_fmt, inp, out_fmt, outp,
             nrec) = _FLOW_EXP.unpack_from(data, pos)
            in_if = inp if in_fmt == 0 and inp != 0x3FFFFFFF else None
            out_if = outp if out_fmt == 0 and outp != 0x3FFFFFFF else None
            dropped = out_fmt == 1
            rec = _records(data, pos + _FLOW_EXP.size, end, nrec)
        else:  # counter samples, vendor formats
            pos = end
            continue
        pos = end
        if rec is not None:
            out.append(new(PacketSample, (agent, sub_agent, stype, sindex, rate, pool, drops,
                                          in_if, out_if, rec[0]) + rec[1] + (dropped,)))
    return out


class SenderFilter:
    """Which senders' datagrams count (sFlow has no authentication: the usual defence is to
    hear known agents only). ``allowed``: comma-separated addresses or networks; empty: the
    addresses the switches connect from (``switch_at``), learned as they connect.

    >>> f = SenderFilter("10.0.0.0/24, 192.0.2.7")
    >>> f("10.0.0.9"), f("192.0.2.7"), f("192.0.2.8")
    (True, True, False)
    >>> g = SenderFilter("")
    >>> g("127.0.0.1"), g.switch_at(("127.0.0.1", 51234)), g("127.0.0.1")
    (False, None, True)
    >>> SenderFilter("10.0.0.0/33")
    Traceback (most recent call last):
    ...
    ValueError: sFlow agents: '10.0.0.0/33' is not an address or network
    """

    def __init__(self, allowed: str = ""):
        self.networks = []
        for item in (x.strip() for x in (allowed or "").split(",")):
            if not item:
                continue
            try:
                self.networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ValueError(f"sFlow agents: {item!r} is not an address or network") \
                    from None
        self.switches: set[str] = set()

    def switch_at(self, address) -> None:
        """A switch connected from ``address`` ((host, port) of its OpenFlow connection)."""
        if address:
            self.switches.add(str(address[0]))

    def __call__(self, sender: str) -> bool:
        if self.networks:
            try:
                ip = ipaddress.ip_address(sender)
            except ValueError:
                return False
            return any(ip in n for n in self.networks)
        return sender in self.switches


class SflowCollector:
    """Receives sFlow datagrams on a UDP port in a thread of its own, decodes them and hands
    each datagram's packet samples to ``on_samples(samples)``.

    Built on ``socket`` and ``threading`` only, so it runs the same under native threads and
    under eventlet's monkey patching (ryu-manager): the receive waits at most ``poll_s``, so
    ``stop()`` ends it within that time whatever the hub. A malformed datagram or a failing
    callback is counted and logged, never fatal. ``allow(sender address)`` decides which
    senders are heard (``SenderFilter``; None: all); the others' datagrams are counted as
    ``rejected`` and dropped undecoded (``on_rejected(sender)`` hears of each). Counters:
    ``datagrams``, ``samples``, ``errors`` (malformed datagrams), ``rejected`` and
    ``callback_errors``; ``rejected_from``: the senders dropped."""

    def __init__(self, host: str = "127.0.0.1", port: int = SFLOW_PORT,
                 on_samples: Callable[[list[PacketSample]], None] | None = None,
                 poll_s: float = 0.2, allow: Callable[[str], bool] | None = None,
                 on_rejected: Callable[[str], None] | None = None):
        self.host, self.port = host, int(port)
        self.on_samples = on_samples
        self.allow = allow
        self.on_rejected = on_rejected
        self.poll_s = float(poll_s)
        self.datagrams = self.samples = self.errors = self.callback_errors = 0
        self.rejected = 0
        self.rejected_from: set[str] = set()
        self.last_error: str | None = None
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._count_lock = threading.Lock()

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port); with port 0 the port the system chose."""
        if self._sock is None:
            return self.host, self.port
        return self._sock.getsockname()[:2]

    def start(self) -> SflowCollector:
        """Bind the UDP port and start receiving. Raises OSError naming the address when the
        port cannot be bound (in use, no permission)."""
        with self._lock:
            if self._thread is not None:
                return self
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_DGRAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
                sock.bind((self.host, self.port))
            except OSError as e:
                sock.close()
                raise OSError(e.errno, f"sFlow collector cannot bind udp "
                                       f"{self.host}:{self.port}: {e.strerror}") from e
            sock.settimeout(self.poll_s)
            self._sock = sock
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="mlroute-sflow",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop receiving and close the port; True if the thread ended within ``timeout``."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stop.set()
        ended = True
        if thread is not None:
            thread.join(timeout)
            ended = not thread.is_alive()
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        return ended

    def feed(self, data: bytes, sender: str | None = None) -> list[PacketSample]:
        """Decode one datagram and deliver it as if received from ``sender`` (also used by
        benchmarks; None: a trusted caller)."""
        if sender is not None and self.allow is not None and not self.allow(sender):
            with self._count_lock:
                self.rejected += 1
                new = sender not in self.rejected_from
                self.rejected_from.add(sender)
            if new:
                LOG.warning("sFlow: datagrams from %s dropped: not a known agent "
                            "(--mlroute-sflow-agents)", sender)
            if self.on_rejected is not None:
                self.on_rejected(sender)
            return []
        try:
            samples = parse_datagram(data)
        except SflowError as e:
            with self._count_lock:
                self.datagrams += 1
                self.errors += 1
                self.last_error = str(e)
            LOG.debug("sFlow: malformed datagram: %s", e)
            return []
        with self._count_lock:
            self.datagrams += 1
            self.samples += len(samples)
        if samples and self.on_samples is not None:
            try:
                self.on_samples(samples)
            except Exception:  # the collector must outlive a faulty consumer
                with self._count_lock:
                    self.callback_errors += 1
                LOG.exception("sFlow: the sample callback failed")
        return samples

    def _run(self) -> None:
        sock = self._sock
        while not self._stop.is_set():
            try:
                data, addr = sock.recvfrom(MAX_DATAGRAM)
            except TimeoutError:
                continue
            except OSError as e:
                if self._stop.is_set():
                    break
                LOG.warning("sFlow: receive failed: %s", e)
                self._stop.wait(self.poll_s)
                continue
            self.feed(data, addr[0])

    def stats(self) -> dict:
        with self._count_lock:
            return {"datagrams": self.datagrams, "samples": self.samples,
                    "errors": self.errors, "rejected": self.rejected,
                    "callback_errors": self.callback_errors}
