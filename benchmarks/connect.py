"""How fast a zero-configuration fabric carries traffic, and what discovery costs (real
ryu-manager with no fabric file, Mininet leaf-spine of Open vSwitch switches).

Every host pings every other host from the moment Mininet starts (``ping -D``, one request per
``--interval`` per pair). Per run: time to the first ping answered, time until every pair was
answered at least once, requests lost after a pair's first answer, a host added to a running
fabric (time from its first packet to its first answer), and the frames discovery sent
(LLDP probes per round, at connect and back; ARP probes to locate and to verify; ARP answers)
with their bytes, at start and per second once settled. Times count from just before
``net.start()``.

    python -m benchmarks.connect [--runs 3] [--shape 2,4,2] [--out bench/connect.json]

Needs root and Open vSwitch (run it under the OVS lock where several users share one).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import time

from emulation.harness import fabricnet
from emulation.harness.controller_proc import ControllerProcess

_REPLY = re.compile(r"^\[(\d+\.\d+)\] \d+ bytes from [\d.]+: icmp_seq=(\d+)")
_SENT = re.compile(r"(\d+) packets transmitted")


class PingMatrix:
    """Every ordered pair of ``hosts`` pinging (one process per pair) for ``duration``."""

    def __init__(self, hosts, duration: float, interval: float = 0.1):
        self.interval, self.duration = interval, duration
        self.procs = []
        for src in hosts:
            for dst in hosts:
                if src is dst:
                    continue
                start = time.time()
                p = src.popen(["ping", "-D", "-n", "-i", str(interval), "-W", "1",
                               "-w", str(int(round(duration))), dst.IP()])
                self.procs.append((src.name, dst.name, start, p))

    def stop(self) -> None:
        for *_x, p in self.procs:
            if p.poll() is None:
                p.terminate()

    def results(self, timeout: float = 30.0) -> dict:
        """Per pair: start, first answer time, answered and sent requests, lost after the
        first answer (requests sent more than a second before the end)."""
        out = {}
        deadline = time.monotonic() + timeout
        for src, dst, start, p in self.procs:
            try:
                text = p.communicate(timeout=max(0.1, deadline - time.monotonic()))[0]
            except Exception:  # noqa: BLE001 - a stuck ping: stopped, counted as it is
                p.kill()
                text = p.communicate()[0]
            text = text.decode() if isinstance(text, bytes) else text
            replies = [(float(m.group(1)), int(m.group(2)))
                       for m in map(_REPLY.match, text.splitlines()) if m]
            sent = int(_SENT.search(text).group(1)) if _SENT.search(text) else 0
            seqs = sorted({s for _t, s in replies})
            first = min((t for t, _s in replies), default=None)
            settled = sent - int(1.0 / self.interval)  # the last second may be in flight
            lost = 0
            if seqs:
                lost = len(set(range(seqs[0], settled + 1)) - set(seqs)) if settled > seqs[0] \
                    else 0
            out[f"{src}>{dst}"] = {"start": start, "first": first, "answered": len(seqs),
                                   "sent": sent, "lost_after_first": lost}
        return out


def _frames(ctl) -> dict:
    view = ctl.rest("GET", "/v1/fabric", timeout=15)[1]
    return view.get("discovery", {}).get("probes", {})


def late_host(net, leaf: str, ip: str, mac: str, target, timeout: float = 10.0) -> dict:
    """A host cabled to ``leaf`` while the fabric runs: time from its first packet (a ping to
    ``target``) to the first answer."""
    from topologies.clos import ClosHost
    h = net.addHost("hlate", cls=ClosHost, ip=f"{ip}/8", mac=mac)
    link = net.addLink(h, net[leaf])
    net[leaf].attach(link.intf2)
    h.configDefault()
    time.sleep(1.0)  # the port is up and probed before the host says anything
    start = time.time()
    p = h.popen(["ping", "-D", "-n", "-i", "0.05", "-W", "1", "-w", str(int(round(timeout))), target.IP()])
    text = p.communicate(timeout=timeout + 10)[0]
    text = text.decode() if isinstance(text, bytes) else text
    replies = [(float(m.group(1)), int(m.group(2)))
               for m in map(_REPLY.match, text.splitlines()) if m]
    first = min((t for t, _s in replies), default=None)
    return {"host": "hlate", "leaf": leaf, "port": net[leaf].ports[link.intf2],
            "first_answer_s": None if first is None else round(first - start, 3),
            "answered": len(replies)}


def one_run(spines: int, leaves: int, hosts: int, tmp: str, duration: float,
            interval: float, of_port: int = 6653, rest_port: int = 8080) -> dict:
    fabricnet.ensure_ovs()
    fabricnet.cleanup()
    ctl = ControllerProcess(None, os.path.join(tmp, "controller.log"), algorithm="auto",
                            rest_port=rest_port, of_port=of_port,
                            extra_args=["--mlroute-stats-interval", "0"]).start()
    net = None
    try:
        net = fabricnet.build(spines, leaves, hosts, 0, ctl.of_port)
        t0 = time.time()
        net.start()
        started = time.time()
        pings = PingMatrix(net.hosts, duration, interval)
        try:
            time.sleep(duration)
        finally:
            pings.stop()
        pairs = pings.results()
        at_start = _frames(ctl)
        time.sleep(5.0)
        after = _frames(ctl)
        late = late_host(net, "l0", "10.0.0.200", "02:00:00:00:00:c8", net.hosts[-1])
        view = ctl.rest("GET", "/v1/fabric", timeout=15)[1]
    finally:
        if net is not None:
            net.stop()
        ctl.stop()
    firsts = [p["first"] - t0 for p in pairs.values() if p["first"] is not None]
    per_s = {k: (after["sent"][k] - at_start["sent"][k]) / 5.0 for k in after.get("sent", {})}
    return {"start_s": round(started - t0, 3), "pairs": len(pairs),
            "pairs_answered": len(firsts),
            "first_ping_s": round(min(firsts), 3) if firsts else None,
            "all_pairs_s": round(max(firsts), 3) if len(firsts) == len(pairs) else None,
            "lost_after_first": sum(p["lost_after_first"] for p in pairs.values()),
            "requests": sum(p["sent"] for p in pairs.values()),
            "late_host": late,
            "frames_at_start": at_start.get("sent"), "bytes_at_start": at_start.get("sent_bytes"),
            "frames_per_s_settled": per_s,
            "bytes_per_s_settled": round((after.get("sent_bytes", 0) -
                                          at_start.get("sent_bytes", 0)) / 5.0, 1),
            "hosts_found": len((view.get("declared") or {}).get("hosts", {})),
            "security_events": view.get("discovery", {}).get("security", {}).get("counts")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.connect",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--shape", default="2,4,2", help="spines,leaves,hosts per leaf")
    ap.add_argument("--duration", type=float, default=8.0, help="seconds of pinging")
    ap.add_argument("--interval", type=float, default=0.1, help="seconds between requests")
    ap.add_argument("--out", default="bench/connect.json")
    args = ap.parse_args(argv)
    from emulation.harness.session import install_interrupt_handler
    # Ctrl-C or SIGTERM unwinds through the cleanup, also when started with SIGINT ignored (&)
    install_interrupt_handler()
    try:
        spines, leaves, hosts = (int(x) for x in args.shape.split(","))
    except ValueError:
        ap.error(f"--shape {args.shape!r}: expected spines,leaves,hosts (e.g. 2,4,2)")
    if args.runs < 1 or args.duration < 2 or args.interval < 0.01:
        ap.error("--runs >= 1, --duration >= 2 and --interval >= 0.01")
    if os.geteuid() != 0:
        ap.error("needs root (Mininet, Open vSwitch)")
    runs = []
    with tempfile.TemporaryDirectory(prefix="mlroute-connect-") as tmp:
        for k in range(args.runs):
            runs.append(one_run(spines, leaves, hosts, tmp, args.duration, args.interval))
            print(json.dumps(runs[-1]), flush=True)
    ok = [r for r in runs if r["all_pairs_s"] is not None]
    summary = {
        "runs": len(runs), "runs_all_pairs_answered": len(ok),
        "first_ping_s_median": statistics.median(r["first_ping_s"] for r in runs
                                                 if r["first_ping_s"] is not None),
        "all_pairs_s_median": statistics.median(r["all_pairs_s"] for r in ok) if ok else None,
        "all_pairs_s_max": max(r["all_pairs_s"] for r in ok) if ok else None,
        "lost_after_first_total": sum(r["lost_after_first"] for r in runs),
        "late_host_s_median": statistics.median(
            r["late_host"]["first_answer_s"] for r in runs
            if r["late_host"]["first_answer_s"] is not None)}
    doc = {"what": "zero configuration: time to first ping and to every pair answered, from "
                   "just before net.start(); requests lost after a pair's first answer; a host "
                   "added later; discovery's frames", "shape": [spines, leaves, hosts],
           "interval_s": args.interval, "duration_s": args.duration,
           "summary": summary, "runs": runs}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(doc, fh, indent=1)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
