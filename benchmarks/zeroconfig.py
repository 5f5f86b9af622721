"""Zero configuration before any host speaks: when the controller holds the right shape of a
fabric whose hosts are silent, whether it ever held a wrong one, and what the first pingall
loses (real ryu-manager with no fabric file, Mininet fabrics of Open vSwitch switches).

Per fabric and run, in seconds from just before ``net.start()``: when Mininet saw every switch
connected (``connected_s``, polled every 0.5 s) and when the fabric view first held the right
shape with no link down (``right_after_s``; polled every 0.1 s once the switches connected, so
a shape held by then counts at ``connected_s``); every shape it held on the way; the pingall
loss ``--pingall-after`` seconds after the switches connected. The
baseline of the same run is the two-tier leaf-spine of the integration tests (2 spines x 4
leaves x 2 hosts), read the same way; each fat-tree's time is also a ratio to it.

    python -m benchmarks.zeroconfig [--fat-trees 4,8] [--runs 2] [--out bench/zeroconfig.json]

Needs root and Open vSwitch.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

from emulation.harness import zeroconfig as zc

BW = 10.0  # Mbit/s: 80 userspace switches on 2 cores keep up with it


def one_run(truth, tmp: str, watch_s: float, pingall_after: float) -> dict:
    """One fabric, once: the controller with no fabric file, the switches connected, the view
    watched for ``watch_s`` seconds, then the first pingall."""
    with zc.without_a_file(tmp, truth, BW) as (ctl, net):
        seen = zc.watch(ctl, truth, min(watch_s, pingall_after), since=net.started_at)
        time.sleep(max(0.0, net.connected_at + pingall_after - time.monotonic()))
        loss = zc.pingall_loss(net)
    return {**seen, "connected_s": round(net.connected_at - net.started_at, 2),
            "pingall_after_s": pingall_after, "pingall_loss_pct": loss,
            "switches": len(net.switches), "hosts": len(net.hosts)}


def summary(runs: list[dict]) -> dict:
    right = [r["right_after_s"] for r in runs if r["right_after_s"] is not None]
    return {"runs": len(runs), "runs_right": len(right),
            "connected_s_median": statistics.median(r["connected_s"] for r in runs),
            "right_after_s_median": statistics.median(right) if right else None,
            "right_after_s_max": max(right) if right else None,
            "runs_with_a_wrong_shape": sum(1 for r in runs if r["wrong"]),
            "pingall_loss_pct_max": max(r["pingall_loss_pct"] for r in runs)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.zeroconfig",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--fat-trees", default="4,8", help="the fat-trees' k, comma-separated")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--pingall-after", type=float, default=5.0,
                    help="seconds after the switches connected")
    ap.add_argument("--out", default="bench/zeroconfig.json")
    args = ap.parse_args(argv)
    from emulation.harness.session import install_interrupt_handler
    install_interrupt_handler()  # Ctrl-C unwinds through the cleanup, also when started with &
    try:
        ks = [int(k) for k in args.fat_trees.split(",")]
    except ValueError:
        ap.error(f"--fat-trees {args.fat_trees!r}: expected even numbers, e.g. 4,8")
    if any(k < 2 or k % 2 for k in ks) or args.runs < 1 or args.pingall_after < 1:
        ap.error("--fat-trees of even k >= 2, --runs >= 1, --pingall-after >= 1")
    if os.geteuid() != 0:
        ap.error("needs root (Mininet, Open vSwitch)")
    from controller.model.clos import Clos
    from topologies.clos import fattree_fabric
    fabrics = {"leaf-spine 2x4x2 (baseline)": Clos.leaf_spine(2, 4, 2, BW / 1000).wire()}
    fabrics.update({f"fat-tree k={k}": fattree_fabric(k, 2 if k <= 4 else 1, BW) for k in ks})
    results = {}
    with tempfile.TemporaryDirectory(prefix="mlroute-zeroconfig-") as tmp:
        for name, truth in fabrics.items():
            runs = []
            for i in range(args.runs):
                runs.append(one_run(truth, os.path.join(tmp, f"{len(results)}-{i}"),
                                    args.pingall_after, args.pingall_after))
                print(name, json.dumps(runs[-1]), flush=True)
            results[name] = {"summary": summary(runs), "runs": runs}
    base = results["leaf-spine 2x4x2 (baseline)"]["summary"]["right_after_s_median"]
    for name, res in results.items():
        s = res["summary"]
        s["over_baseline"] = (round(s["right_after_s_median"] / base, 2)
                              if base and s["right_after_s_median"] is not None else None)
    doc = {"what": "zero configuration before any host speaks: seconds from the switches "
                   "connected until the fabric view held the right shape with no link down, "
                   "shapes held on the way, pingall loss after --pingall-after seconds",
           "link_mbps": BW, "pingall_after_s": args.pingall_after, "fabrics": results}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(doc, fh, indent=1)
    print(json.dumps({n: r["summary"] for n, r in results.items()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
