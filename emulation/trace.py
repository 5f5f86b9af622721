"""Trace planned flows with RoCEv2 probes, from the command line (root):

    sudo python -m emulation.trace --jobs FILE [--spines 2 --leaves 4 --hosts-per-leaf 2]
        [--count 20] [--mode flow|sr]

starts the controller and the fabric, posts the jobs, probes every planned flow
(``emulation.harness.trace.trace_route``: UDP 4791 packets with an InfiniBand BTH and the flow's
5-tuple, the spine read from the switch counters) and prints, per flow, the planned and the
traced spine (progress on stderr). Ctrl-C or SIGTERM stops the probe sender, the fabric and the
controller; exit status 130.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile

from controller.errors import InputError
from controller.jsonio import first_paragraph, read_json
from emulation.harness.session import Session, install_interrupt_handler
from emulation.harness.trace import ROCE_PORT, trace_route


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emulation.trace",
                                 description=first_paragraph(__doc__))
    ap.add_argument("--jobs", required=True)
    ap.add_argument("--spines", type=int, default=2)
    ap.add_argument("--leaves", type=int, default=4)
    ap.add_argument("--hosts-per-leaf", type=int, default=2)
    ap.add_argument("--mode", default="flow", choices=["flow", "sr"])
    ap.add_argument("--algorithm", default="greedy")
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--out", default=None, help="folder for logs (default: a temporary one)")
    args = ap.parse_args(argv)
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
