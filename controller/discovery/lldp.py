"""Discovery frames, built and read with ``struct`` (no Ryu): LLDP link probes, ARP host
probes, and the host address carried by an ARP or IPv4 packet-in.

LLDP frames use Ryu's own layout (chassis id ``dpid:%016x``, locally assigned; port id the
32-bit port number, port component), so frames from Ryu's topology app parse too and a capture
reads the same. The shell sends ``lldp_frame(dpid, port)`` out of every port; a packet-in of
it on (dpid2, port2) means the directed link (dpid, port) -> (dpid2, port2).

A probe may be signed (``sign=(key, time, nonce)``): an organisationally specific TLV carries
the send time, a nonce and an HMAC-SHA256 (first 16 bytes) over chassis, port, time and nonce
with the controller's secret, so that a host cannot fabricate a link (TopoGuard, NDSS 2015;
ONOS signs its probes the same way). ``parse_probe`` returns the claim and the signature
fields; ``probe_signature_ok`` checks them.

    >>> parse_lldp(lldp_frame(0x10000, 3))
    (65536, 3)
    >>> p = parse_probe(lldp_frame(0x10000, 3, sign=(b"k", 12.5, 7)))
    >>> p["dpid"], p["port"], p["time"], p["nonce"], probe_signature_ok(p, b"k")
    (65536, 3, 12.5, 7, True)
    >>> probe_signature_ok(p, b"another key")
    False
    >>> parse_host(arp_request("02:00:00:00:00:fe", "10.0.0.7", sender_ip="10.0.0.1"))
    ('02:00:00:00:00:fe', '10.0.0.1')
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import struct

from controller.errors import InputError

ETH_LLDP, ETH_ARP, ETH_IPV4, ETH_VLAN = 0x88CC, 0x0806, 0x0800, 0x8100
LLDP_MULTICAST = "01:80:c2:00:00:0e"  # nearest bridge: never forwarded by 802.1D bridges
BROADCAST = "ff:ff:ff:ff:ff:ff"
_CHASSIS_LOCAL, _PORT_COMPONENT = 7, 2
_TLV_END, _TLV_CHASSIS, _TLV_PORT, _TLV_TTL, _TLV_ORG = 0, 1, 2, 3, 127
LLDP_INTERVAL = 1.0  # seconds between LLDP probe rounds, by default
# echoes (``liveness``): a switch's static entry sends a frame to ECHO_MAC back out of the port
# it came in on, to ECHO_BACK_MAC, which the sender traps as any LLDP (enforcement/echo.py has
# the same addresses); locally administered unicast, never a host's
ECHO_MAC, ECHO_BACK_MAC = "02:6d:6c:72:74:e0", "02:6d:6c:72:74:e1"
LLDP_BUDGET = 1000  # LLDP probes a second at most, by default: larger fabrics probe in turns
ECHO_INTERVAL = 0.2  # seconds between rounds of echoes through the switches (``liveness``)
_OUI, _SUBTYPE_SIG = b"\x6d\x6c\x72", 1  # "mlr": mlroute's signature TLV
_SIG_BYTES = 16
_MIN_FRAME = 60  # Ethernet minimum without the FCS


def mac_bytes(mac: str) -> bytes:
    """``"02:00:00:00:00:01"`` -> 6 bytes; a clear error for anything else."""
    parts = mac.split(":") if isinstance(mac, str) else []
    try:
        if len(parts) != 6 or not all(len(p) == 2 for p in parts):
            raise ValueError
        return bytes(int(p, 16) for p in parts)
    except ValueError:
        raise InputError(f"bad MAC address {mac!r}") from None


def mac_text(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)


def _ip_bytes(ip: str) -> bytes:
    try:
        return ipaddress.IPv4Address(ip).packed
    except (ValueError, TypeError):
        raise InputError(f"bad IPv4 address {ip!r}") from None


def _pad(frame: bytes) -> bytes:
    return frame + bytes(max(0, _MIN_FRAME - len(frame)))


def _tlv(kind: int, value: bytes) -> bytes:
    return struct.pack("!H", kind << 9 | len(value)) + value


def _signature(key: bytes, dpid: int, port: int, sent: float, nonce: int) -> bytes:
    msg = struct.pack("!QIdI", dpid, port, sent, nonce)
    return hmac.digest(key, msg, hashlib.sha256)[:_SIG_BYTES]  # one-shot: a round signs 5,120


def lldp_frame(dpid: int, port: int, src_mac: str = "02:00:00:00:00:00",
               ttl: int = 120, sign: tuple[bytes, float, int] | None = None,
               dst: str = LLDP_MULTICAST) -> bytes:
    """The LLDP probe that (dpid, port) sends; ``src_mac`` is the port's own address if known
    (switches in secure mode ignore it); ``sign`` = (secret, send time, nonce) adds the
    signature TLV; ``dst``: ``ECHO_MAC`` for an echo the next switch sends back."""
    if not 0 < dpid < 2**64 or not 0 < port < 2**32:
        raise InputError(f"lldp: bad datapath id {dpid!r} or port {port!r}")
    body = _lldp_ids(dpid, port, ttl)
    if sign is not None:
        key, sent, nonce = sign
        body += _tlv(_TLV_ORG, _OUI + bytes([_SUBTYPE_SIG]) + struct.pack("!dI", sent, nonce)
                     + _signature(key, dpid, port, sent, nonce))
    body += _tlv(_TLV_END, b"")
    return _pad(_lldp_head(src_mac, dst) + body)


# A round of probes is one frame per port (5,120 a second at the paper's scale, built under
# the service lock): what does not change between rounds is built once.
@functools.lru_cache(maxsize=64, typed=True)
def _lldp_head(src_mac: str, dst: str = LLDP_MULTICAST) -> bytes:
    return mac_bytes(dst) + mac_bytes(src_mac) + struct.pack("!H", ETH_LLDP)


@functools.lru_cache(maxsize=1 << 16, typed=True)
def _lldp_ids(dpid: int, port: int, ttl: int) -> bytes:
    return (_tlv(_TLV_CHASSIS, bytes([_CHASSIS_LOCAL]) + b"dpid:%016x" % dpid)
            + _tlv(_TLV_PORT, bytes([_PORT_COMPONENT]) + struct.pack("!I", port))
            + _tlv(_TLV_TTL, struct.pack("!H", ttl)))


def _ethertype(frame: bytes) -> tuple[int, int] | None:
    """(ethertype, offset of the payload), skipping one 802.1Q tag; None if too short."""
    if len(frame) < 14:
        return None
    kind, off = struct.unpack_from("!H", frame, 12)[0], 14
    if kind == ETH_VLAN:
        if len(frame) < 18:
            return None
        kind, off = struct.unpack_from("!H", frame, 16)[0], 18
    return kind, off


def parse_lldp(frame: bytes) -> tuple[int, int] | None:
    """(dpid, port) of the switch port that sent this LLDP frame, or None when the frame is not
    one of ours (another chassis id or port id format, truncated, not LLDP). Never raises."""
    got = parse_probe(frame)
    return None if got is None else (got["dpid"], got["port"])


def parse_probe(frame: bytes) -> dict | None:
    """What an LLDP frame claims: ``{"dpid", "port", "time", "nonce", "sig", "dst"}`` (time,
    nonce and sig None when it carries no signature TLV; ``dst`` its destination MAC), or None
    when it claims no switch port in our layout. Never raises."""
    et = _ethertype(frame)
    if et is None or et[0] != ETH_LLDP:
        return None
    off, dpid, port, signed = et[1], None, None, (None, None, None)
    while off + 2 <= len(frame):
        head = struct.unpack_from("!H", frame, off)[0]
        kind, length = head >> 9, head & 0x1FF
        value = frame[off + 2:off + 2 + length]
        if len(value) != length or kind == _TLV_END:
            break
        if kind == _TLV_CHASSIS and length == 22 and value[0] == _CHASSIS_LOCAL \
                and value[1:6] == b"dpid:":
            try:
                dpid = int(value[6:].decode("ascii"), 16)
            except ValueError:
                return None
        elif kind == _TLV_PORT and length == 5 and value[0] == _PORT_COMPONENT:
            port = struct.unpack("!I", value[1:])[0]
        elif kind == _TLV_ORG and length == 4 + 12 + _SIG_BYTES and value[:3] == _OUI \
                and value[3] == _SUBTYPE_SIG:
            sent, nonce = struct.unpack_from("!dI", value, 4)
            signed = (sent, nonce, bytes(value[16:]))
        off += 2 + length
    if dpid is None or port is None:
        return None
    return {"dpid": dpid, "port": port, "time": signed[0], "nonce": signed[1], "sig": signed[2],
            "dst": bytes(frame[:6]).hex(":")}


def parse_host_lldp(frame: bytes) -> tuple[str, str] | None:
    """(source MAC, chassis id) of an LLDP frame that a host's agent (lldpd, or a NIC's own
    LLDP) sent: the identity it gives every interface of the host alike. The chassis id is
    the MAC for subtype 4 (lldpd's default, the address of one of the host's interfaces),
    else ``"<subtype>:<hex>"``. None for our probes' layout (a switch's claim: see
    ``parse_probe``), a group source address, no or an empty chassis TLV. Never raises.

    >>> f = _lldp_head("02:00:00:00:00:07") + _tlv(_TLV_CHASSIS, b"\\x04" + mac_bytes(
    ...     "02:00:00:00:00:01")) + _tlv(_TLV_PORT, b"\\x05eth1") + _tlv(_TLV_END, b"")
    >>> parse_host_lldp(f)
    ('02:00:00:00:00:07', '02:00:00:00:00:01')
    >>> parse_host_lldp(lldp_frame(0x10000, 3)) is None
    True
    """
    et = _ethertype(frame)
    if et is None or et[0] != ETH_LLDP or frame[6] & 1 or parse_probe(frame) is not None:
        return None
    off = et[1]
    if off + 2 > len(frame):
        return None
    head = struct.unpack_from("!H", frame, off)[0]
    kind, length = head >> 9, head & 0x1FF
    value = frame[off + 2:off + 2 + length]
    if kind != _TLV_CHASSIS or len(value) != length or length < 2:
        return None  # 802.1AB: the chassis id TLV comes first
    subtype, ident = value[0], bytes(value[1:])
    chassis = mac_text(ident) if subtype == 4 and len(ident) == 6 else f"{subtype}:{ident.hex()}"
    return mac_text(frame[6:12]), chassis


def probe_signature_ok(probe: dict, key: bytes) -> bool:
    """True when ``probe`` (from ``parse_probe``) carries a signature made with ``key``."""
    if probe.get("sig") is None or not 0 < probe["dpid"] < 2**64 or not 0 <= probe["port"] < 2**32:
        return False
    try:
        want = _signature(key, probe["dpid"], probe["port"], probe["time"], probe["nonce"])
    except (struct.error, OverflowError):
        return False
    return hmac.compare_digest(want, probe["sig"])


def arp_request(sender_mac: str, target_ip: str, sender_ip: str = "0.0.0.0") -> bytes:
    """A broadcast ARP request for ``target_ip``. The default sender address 0.0.0.0 makes it
    an RFC 5227 probe: hosts answer it (to ``sender_mac``) without caching the controller."""
    sha = mac_bytes(sender_mac)
    arp = struct.pack("!HHBBH6s4s6s4s", 1, ETH_IPV4, 6, 4, 1, sha, _ip_bytes(sender_ip),
                      bytes(6), _ip_bytes(target_ip))
    return _pad(mac_bytes(BROADCAST) + sha + struct.pack("!H", ETH_ARP) + arp)


def arp_reply(sender_mac: str, sender_ip: str, target_mac: str, target_ip: str) -> bytes:
    """An ARP reply ``sender_ip is at sender_mac``, sent to ``target_mac``/``target_ip`` (the
    controller answers a host's request on behalf of the owner)."""
    arp = struct.pack("!HHBBH6s4s6s4s", 1, ETH_IPV4, 6, 4, 2, mac_bytes(sender_mac),
                      _ip_bytes(sender_ip), mac_bytes(target_mac), _ip_bytes(target_ip))
    return _pad(mac_bytes(target_mac) + mac_bytes(sender_mac) + struct.pack("!H", ETH_ARP) + arp)


def parse_arp(frame: bytes) -> tuple[int, str, str, str] | None:
    """(opcode, sender MAC, sender IPv4, target IPv4) of an Ethernet/IPv4 ARP packet, else
    None. Never raises.

    >>> parse_arp(arp_request("02:00:00:00:00:fe", "10.0.0.7", sender_ip="10.0.0.1"))
    (1, '02:00:00:00:00:fe', '10.0.0.1', '10.0.0.7')
    """
    et = _ethertype(frame)
    if et is None or et[0] != ETH_ARP or len(frame) < et[1] + 28:
        return None
    off = et[1]
    htype, ptype, hlen, plen, op = struct.unpack_from("!HHBBH", frame, off)
    if (htype, ptype, hlen, plen) != (1, ETH_IPV4, 6, 4):
        return None
    return (op, mac_text(frame[off + 8:off + 14]), str(ipaddress.IPv4Address(frame[off + 14:off + 18])),
            str(ipaddress.IPv4Address(frame[off + 24:off + 28])))


def _unicast_ip(raw: bytes) -> str | None:
    ip = ipaddress.IPv4Address(raw)
    if ip.is_unspecified or ip.is_multicast or ip == ipaddress.IPv4Address("255.255.255.255"):
        return None
    return str(ip)


def parse_host(frame: bytes) -> tuple[str, str] | None:
    """(MAC, IPv4) of the host that sent an ARP packet (sender fields) or an IPv4 packet
    (Ethernet source, IPv4 source); None for anything else, for a multicast source MAC and
    for 0.0.0.0/multicast/broadcast sources (ARP probes, DHCP). Never raises."""
    et = _ethertype(frame)
    if et is None:
        return None
    kind, off = et
    src = frame[6:12]
    if kind == ETH_ARP and len(frame) >= off + 28:
        htype, ptype, hlen, plen = struct.unpack_from("!HHBB", frame, off)
        if (htype, ptype, hlen, plen) != (1, ETH_IPV4, 6, 4):
            return None
        mac, ip = frame[off + 8:off + 14], frame[off + 14:off + 18]
    elif kind == ETH_IPV4 and len(frame) >= off + 20 and frame[off] >> 4 == 4:
        mac, ip = src, frame[off + 12:off + 16]
    else:
        return None
    if mac[0] & 1:  # group address: not a host
        return None
    text = _unicast_ip(ip)
    return (mac_text(mac), text) if text else None
