"""Trace planned flows with RoCEv2 probes: scapy crafts UDP 4791 packets with an InfiniBand BTH
and the flow's 5-tuple, sends them from the flow's source host, and the switch counters tell
which spine they crossed (the spine whose port from the source leaf received them).

    sudo python -m emulation.trace --jobs FILE [--spines 2 --leaves 4 --hosts-per-leaf 2]
        [--count 20] [--mode flow|sr]

starts the controller and the fabric, posts the jobs, probes every planned flow and prints, per
flow, the planned and the traced spine (progress on stderr). ``trace_route`` does the same
inside any running emulation (tests, the runner). Ctrl-C or SIGTERM stops the probe sender, the
fabric and the controller; exit status 130.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

from controller.errors import InputError
from controller.jsonio import read_json
from emulation import ovs
from emulation.controller_proc import REPO
from emulation.session import Session, install_interrupt_handler

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
    before = {s: ovs.port_bytes(s)[fabric.port(s, leaf)]["rx_pkts"] for s in fabric.spines}
    host = net.get(src)
    cmd = [sys.executable, "-m", "emulation.trace", "send", "--iface", host.intfList()[0].name,
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
    after = {s: ovs.port_bytes(s)[fabric.port(s, leaf)]["rx_pkts"] for s in fabric.spines}
    seen = {s: after[s] - before[s] for s in fabric.spines}
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
    ap = argparse.ArgumentParser(prog="python -m emulation.trace", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    send = sub.add_parser("send", help="(inside a host) send probes")
    for a in ("--iface", "--src-mac", "--dst-mac", "--src-ip", "--dst-ip"):
        send.add_argument(a, required=True)
    send.add_argument("--sport", type=int, required=True)
    send.add_argument("--dport", type=int, default=ROCE_PORT)
    send.add_argument("--count", type=int, default=20)
    ap.add_argument("--jobs")
    ap.add_argument("--spines", type=int, default=2)
    ap.add_argument("--leaves", type=int, default=4)
    ap.add_argument("--hosts-per-leaf", type=int, default=2)
    ap.add_argument("--mode", default="flow", choices=["flow", "sr"])
    ap.add_argument("--algorithm", default="greedy")
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--out", default=None, help="folder for logs (default: a temporary one)")
    args = ap.parse_args(argv)
    if args.cmd == "send":
        return _send(args)
    if not args.jobs:
        ap.error("--jobs is required")
    install_interrupt_handler()

    def progress(msg):
        print(f"trace: {msg}", file=sys.stderr, flush=True)
    try:
        doc = read_json(args.jobs, "jobs")
        outdir = args.out or tempfile.mkdtemp(prefix="mlroute-trace-")
        results = []
        with Session(args.spines, args.leaves, args.hosts_per_leaf, 0, outdir, args.mode,
                     progress=progress) as s:
            for job in doc.get("jobs", []):
                job = {**job, "algorithm": args.algorithm}
                for item in [job] if "flows" not in job else job["flows"]:
                    item.setdefault("proto", "udp")  # RoCEv2 unless the file says otherwise
                    item.setdefault("dport", ROCE_PORT)
                progress(f"posting job {job.get('id')}")
                status, view = s.ctl.rest("POST", "/v1/jobs", job)
                if status != 201:
                    raise InputError(f"job {job.get('id')}: {view.get('error')}")
                routes = [r for r in view["routes"] if r.get("spine")]
                for i, route in enumerate(routes):
                    progress(f"job {job.get('id')}: probing flow {i + 1}/{len(routes)} "
                             f"{route['src']} -> {route['dst']}")
                    results.append(trace_route(s.net, s.fabric, route, args.count))
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: probes, fabric and controller stopped", file=sys.stderr)
        return 130
    ok = sum(r["spine"] == r["planned"] for r in results)
    for r in results:
        print(f"{r['src']:>6} -> {r['dst']:<6} udp {r['sport']:>5}->{r['dport']:<5} "
              f"planned {r['planned']:<4} traced {r['spine'] or '?':<4} packets {r['packets']}")
    print(f"{ok}/{len(results)} flows crossed their planned spine")
    print(json.dumps({"traced": results, "ok": ok, "total": len(results)}))
    return 0 if ok == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
