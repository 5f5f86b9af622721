"""Proxy ARP frames, read and built with ``struct`` (no framework packet library).

    >>> from controller.discovery.lldp import arp_request
    >>> req = parse_request(arp_request("02:00:00:00:00:01", "10.0.0.2", sender_ip="10.0.0.1"))
    >>> req
    ('02:00:00:00:00:01', '10.0.0.1', '10.0.0.2')
    >>> parse_request(reply(req, "02:00:00:00:00:02")) is None  # a reply is no request
    True
    >>> len(reply(req, "02:00:00:00:00:02"))
    60
"""
from __future__ import annotations

import ipaddress
import struct

from controller.discovery.lldp import ETH_ARP, ETH_IPV4, mac_bytes, mac_text

_REQUEST, _REPLY = 1, 2


def parse_request(frame: bytes) -> tuple[str, str, str] | None:
    """(sender MAC, sender IP, target IP) of an untagged Ethernet ARP request; None for
    anything else. Never raises."""
    if len(frame) < 42 or struct.unpack_from("!H", frame, 12)[0] != ETH_ARP:
        return None
    htype, ptype, hlen, plen, op = struct.unpack_from("!HHBBH", frame, 14)
    if (htype, ptype, hlen, plen, op) != (1, ETH_IPV4, 6, 4, _REQUEST):
        return None
    return (mac_text(frame[22:28]), str(ipaddress.IPv4Address(frame[28:32])),
            str(ipaddress.IPv4Address(frame[38:42])))


def reply(request: tuple[str, str, str], mac: str) -> bytes:
    """The answer to ``request``: ``mac`` owns the target IP; sent to the asking host."""
    src_mac, src_ip, dst_ip = request
    asker, owner = mac_bytes(src_mac), mac_bytes(mac)
    body = struct.pack("!HHBBH6s4s6s4s", 1, ETH_IPV4, 6, 4, _REPLY, owner,
                       ipaddress.IPv4Address(dst_ip).packed, asker,
                       ipaddress.IPv4Address(src_ip).packed)
    frame = asker + owner + struct.pack("!H", ETH_ARP) + body
    return frame + bytes(60 - len(frame))
