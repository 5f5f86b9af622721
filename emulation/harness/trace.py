"""Trace planned flows with RoCEv2 probes: scapy crafts UDP 4791 packets with an InfiniBand BTH
and the flow's 5-tuple, sends them from the flow's source host, and the switch counters tell
which spine they crossed (the spine whose port from the source leaf received them).

``trace_route`` does it inside any running emulation (tests, the runner, the command
``python -m emulation.trace``, ``emulation/trace.py``); it runs the probe sender inside the
source host as

    python -m emulation.harness.trace send --iface IF --src-mac M --dst-mac M --src-ip A \\
        --dst-ip A --sport P [--dport 4791] [--count 20]
"""
from __future__ import annotations

import argparse
import sys
import time

from controller.errors import InputError
from emulation.harness import ovs
from emulation.harness.controller_proc import REPO

ROCE_PORT = 4791


def roce_probe(src_mac, dst_mac, src_ip, dst_ip, sport, dport=ROCE_PORT, qp=0x12, psn=0,
               size=256):
    """One RoCEv2 SEND_ONLY packet (Ether/IP/UDP/BTH/payload); scapy fills the ICRC."""
    from scapy.contrib.roce import BTH, opcode
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    return (Ether(src=src_mac, dst=dst_mac) / IP(src=src_ip, dst=dst_ip) /
            UDP(sport=sport, dport=dport) /
            BTH(opcode=opcode("RC", "SEND_ONLY")[0], dqpn=qp, psn=psn) / (b"\0" * size))


def trace_route(net, fabric, route: dict, count: int = 20, settle: float = 1.0) -> dict:
    """Send ``count`` probes with the route's 5-tuple (UDP) and find the spine that took them.

    Returns {"spine": traced spine or None, "packets": per-spine packets seen, ...}."""
    src, dst = route["src"], route["dst"]
    leaf = fabric.hosts[src]
    if route.get("proto", 6) != 17 and (route.get("sport") or route.get("dport")):
        raise InputError(f"flow {src} -> {dst} is planned for protocol {route.get('proto', 6)}, "
                         "RoCEv2 probes are UDP")
    sport = route.get("sport") or 49152
    dport = route.get("dport") or ROCE_PORT
    spines = fabric.planes[0].aggs[0]  # a leaf-spine's (a Clos of one two-tier plane)
    before = {s: ovs.port_bytes(s)[fabric.port(s, leaf)]["rx_pkts"] for s in spines}
    host = net.get(src)
    cmd = [sys.executable, "-m", "emulation.harness.trace", "send", "--iface", host.intfList()[0].name,
           "--src-mac", fabric.host_mac[src], "--dst-mac", fabric.host_mac[dst],
           "--src-ip", fabric.host_ip[src], "--dst-ip", fabric.host_ip[dst],
           "--sport", str(sport), "--dport", str(dport), "--count", str(count)]
    p = host.popen(cmd, cwd=REPO)  # in a session of its own: Ctrl-C does not reach it
    try:
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)
    if p.returncode != 0:
        raise RuntimeError(f"probe sender failed: {err.decode(errors='replace')[-500:]}")
    time.sleep(settle)
    after = {s: ovs.port_bytes(s)[fabric.port(s, leaf)]["rx_pkts"] for s in spines}
    seen = {s: after[s] - before[s] for s in spines}
    crossed = [s for s, n in seen.items() if n >= count]
    return {"src": src, "dst": dst, "sport": sport, "dport": dport,
            "planned": route.get("spine"), "spine": crossed[0] if len(crossed) == 1 else None,
            "packets": seen}


def _send(args) -> int:
    from scapy.sendrecv import sendp
    pkts = [roce_probe(args.src_mac, args.dst_mac, args.src_ip, args.dst_ip, args.sport,
                       args.dport, psn=i) for i in range(args.count)]
    sendp(pkts, iface=args.iface, verbose=False)
    return 0


def main(argv=None) -> int:
    """The probe sender, run inside a Mininet host by ``trace_route``."""
    ap = argparse.ArgumentParser(prog="python -m emulation.harness.trace",
                                 description="send RoCEv2 probes (inside a Mininet host)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    send = sub.add_parser("send", help="send probes")
    for a in ("--iface", "--src-mac", "--dst-mac", "--src-ip", "--dst-ip"):
        send.add_argument(a, required=True)
    send.add_argument("--sport", type=int, required=True)
    send.add_argument("--dport", type=int, default=ROCE_PORT)
    send.add_argument("--count", type=int, default=20)
    return _send(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
