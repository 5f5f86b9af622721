"""Host mode's probe packets: a real packet of the flow's 5-tuple, marked (IP DSCP) so that a
trap entry sends it to the controller where it leaves the tier being learned, and carrying a
token that names the probe.

Marks: ``PROBE_DSCP`` (59) is trapped by the first switch above a leaf (a spine; on three tiers
the aggregation switch, for destinations in the leaf's pod), ``PROBE_CORE_DSCP`` (55) only by a
core (three tiers, destinations in other pods), so one probe learns both tiers' choices. Both
are in RFC 2474's pool 2 (xxxx11), for experimental or local use: RoCE and TCP never set them.
"""
from __future__ import annotations

import ipaddress
import struct

from controller.enforcement.rules import PROBE_DSCP
from controller.errors import InputError

PROBE_CORE_DSCP = 55
PROBE_MARKS = (PROBE_DSCP, PROBE_CORE_DSCP)
PROBE_MAGIC = b"MLRP"
UDP, TCP = 17, 6


def ip_checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of ``data``: 0 over a valid header with its checksum.
    Shared by the probes, the agent's port map and host mode."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _mac(text: str) -> bytes:
    return bytes(int(x, 16) for x in text.split(":"))


def probe_packet(src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, proto: int, sport: int,
                 dport: int, token: int, dscp: int = PROBE_DSCP) -> bytes:
    """Ethernet/IPv4 (DSCP ``dscp``, one of ``PROBE_MARKS``)/UDP or TCP SYN with payload
    ``MLRP`` + token: the 5-tuple of real traffic, so the switches treat it as such, and a
    mark only the probe traps match.

    >>> p = probe_packet("02:00:00:00:00:01", "02:00:00:00:01:01", "10.0.0.1", "10.0.1.1",
    ...                  17, 49152, 4791, 7)
    >>> parse_probe(p)["token"], parse_probe(p)["sport"], len(p)
    (7, 49152, 50)
    """
    payload = PROBE_MAGIC + struct.pack("!I", token & 0xFFFFFFFF)
    src, dst = ipaddress.IPv4Address(src_ip).packed, ipaddress.IPv4Address(dst_ip).packed
    if proto == UDP:
        l4 = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    elif proto == TCP:
        head = struct.pack("!HHIIBBHHH", sport, dport, token & 0xFFFFFFFF, 0, 5 << 4, 0x02,
                           0xFFFF, 0, 0)
        pseudo = src + dst + struct.pack("!BBH", 0, TCP, len(head) + len(payload))
        csum = ip_checksum(pseudo + head + payload)
        l4 = head[:16] + struct.pack("!H", csum) + head[18:] + payload
    else:
        raise InputError(f"probes are UDP or TCP, not protocol {proto}")
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, dscp << 2, 20 + len(l4), token & 0xFFFF, 0,
                     64, proto, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", ip_checksum(ip)) + ip[12:]
    return _mac(dst_mac) + _mac(src_mac) + b"\x08\x00" + ip + l4


def parse_probe(data: bytes) -> dict | None:
    """The fields of a probe packet (token, addresses, protocol, ports, DSCP), or None for any
    other packet."""
    if len(data) < 14 + 20 or data[12:14] != b"\x08\x00":
        return None
    ihl = (data[14] & 0x0F) * 4
    dscp, proto = data[15] >> 2, data[23]
    if dscp not in PROBE_MARKS or proto not in (UDP, TCP):
        return None
    l4 = data[14 + ihl:]
    if len(l4) < 4:
        return None
    sport, dport = struct.unpack("!HH", l4[:4])
    off = 8 if proto == UDP else (l4[12] >> 4) * 4 if len(l4) > 12 else len(l4)
    payload = l4[off:]
    if len(payload) < 8 or payload[:4] != PROBE_MAGIC:
        return None
    return {"token": struct.unpack("!I", payload[4:8])[0], "proto": proto, "sport": sport,
            "dport": dport, "dscp": dscp, "ipv4_src": str(ipaddress.IPv4Address(data[26:30])),
            "ipv4_dst": str(ipaddress.IPv4Address(data[30:34]))}
