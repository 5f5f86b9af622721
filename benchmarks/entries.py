"""Static flow entries per switch, tier by tier (pure computation, no switch): JSON in
bench/entries.json.

For k-ary fat-trees (k = 8, 16, 32, ``Clos.wire``'s addresses as ``topologies/clos.py`` builds
them: leaf i's hosts 10.x.i.1, 10.x.i.2, ...) and the paper's two-tier fabric (32 spines x 64
leaves x 32 hosts, served as the Clos of one plane, as the controller serves it), the static
entries every switch holds in flow mode (``clos_rules.clos_static_rules``), in sr mode (with
the label entries, which a switch holds only while a job runs in sr mode or sr is the default
mode) and with host mode's pipeline (``clos_hostmode``), nothing down: per tier the switches,
entries per switch (min, max) and the tier's total; and the seconds the controller took to compute them.
On the fat-trees also the static entries that the loss of an aggregation switch changes when
Open vSwitch reports it in two batches, and in one (``batched_loss``).
Two addressings: ``prefix``, the fabric as built (aggregation switches, spines and cores match
a leaf's or pod's prefix, ``model.prefixes``), and ``per_host``, the same fabric with its
addresses striped across the leaves (host m of leaf i at 10.0.0.1 + m x leaves + i), so that
no leaf or pod has a prefix of its own and every switch falls back per host: the entries every
fabric got before prefixes.

    python -m benchmarks.entries [--k 8 16 32] [--out bench/entries.json]
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
import time

from controller.enforcement.clos_hostmode import clos_host_static_rules
from controller.enforcement.clos_rules import clos_all_static, clos_static_rules
from controller.model.clos import Clos

PAPER = (32, 64, 32)  # spines, leaves, hosts per leaf: the paper's largest two-tier cells
TIERS = {3: ("leaf", "agg", "core"), 2: ("leaf", "spine")}


def striped(fabric):
    """``fabric`` (a ``Clos``) with host m of leaf i at 10.0.0.1 + m x leaves + i: every
    leaf's and pod's common prefix holds other leaves' hosts (one plane)."""
    leaves = fabric.leaves
    on = fabric.hosts_on
    ips = {h: str(ipaddress.IPv4Address(0x0A000001 + m * len(leaves) + i))
           for i, leaf in enumerate(leaves) for m, h in enumerate(on.get(leaf, []))}
    doc = fabric.to_dict()
    doc["host_ip"] = ips
    return type(fabric).from_dict(doc)


def _tier(fabric, sw: str) -> str:
    return TIERS[fabric.tiers][fabric.tier_of[sw]]


def count(fabric) -> dict:
    """Per mode (``flow``; ``sr``: with sr's label entries; ``host``: with host mode's
    pipeline), per tier: the
    switches, entries per switch (min, max) and the tier's total; the fabric's total and
    mean per switch, and the seconds computing them took (one switch at a time, as the
    controller's desired tables do, without keeping them)."""
    out = {}
    for mode in ("flow", "sr", "host"):
        per: dict[str, list[int]] = {}
        t0 = time.perf_counter()
        for sw in fabric.switches():
            n = len(clos_static_rules(fabric, sw, labels=mode == "sr")[0])
            if mode == "host":
                n += len(clos_host_static_rules(fabric, sw))
            per.setdefault(_tier(fabric, sw), []).append(n)
        seconds = time.perf_counter() - t0
        total = sum(sum(v) for v in per.values())
        out[mode] = {"tiers": {t: {"switches": len(v), "per_switch_min": min(v),
                                   "per_switch_max": max(v), "total": sum(v)}
                               for t, v in per.items()},
                     "total": total, "per_switch_mean": round(total / len(fabric.switches()), 1),
                     "seconds": round(seconds, 3)}
    return out


def _changes(before: dict, after: dict) -> dict:
    """Static entries added and removed, and groups changed, from one set of desired tables
    (``clos_all_static``) to another: the OpenFlow messages a step costs."""
    added = removed = groups = 0
    for dpid, (rules, grps) in after.items():
        was, was_groups = set(before[dpid][0]), set(before[dpid][1])
        now = set(rules)
        added, removed = added + len(now - was), removed + len(was - now)
        groups += len(set(grps) ^ was_groups)
    return {"added": added, "removed": removed, "groups_changed": groups,
            "messages": added + removed + groups}


def batched_loss(fabric) -> dict:
    """The last pod's first aggregation switch lost, as Open vSwitch reports the ports of a
    switch going away: in two batches (every link but one core's and two leaves', then those
    three), and in one (the baseline): the static entries each step changes (flow mode)."""
    plane = fabric.planes[0]
    agg = plane.aggs[-1][0]
    links = sorted(link for link in fabric.links() if agg in link)
    cores = [link for link in links if fabric.tier_of[link[0] if link[1] == agg else link[1]] == 2]
    leaves = [link for link in links if link not in cores]
    last = {cores[len(cores) // 2], *leaves[-2:]}
    states = [fabric, fabric.with_down(set(links) - last), fabric.with_down(set(links))]
    tables = [clos_all_static(f) for f in states]
    reports = [{"links": len(states[i + 1].down) - len(states[i].down),
                **_changes(tables[i], tables[i + 1])} for i in (0, 1)]
    return {"switch": agg, "links": len(links), "two_reports": reports,
            "two_reports_messages": sum(r["messages"] for r in reports),
            "one_report": {"links": len(links), **_changes(tables[0], tables[2])}}


def bench_fabric(name: str, fabric) -> dict:
    out = {"fabric": name, "switches": len(fabric.switches()), "leaves": len(fabric.leaves),
           "hosts": len(fabric.host_leaves),
           "pods": len(fabric.planes[0].pods),
           "prefix": count(fabric), "per_host": count(striped(fabric))}
    if fabric.tiers == 3:
        out["batched_loss"] = batched_loss(fabric)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.entries",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--k", type=int, nargs="+", default=[8, 16, 32],
                    help="fat-tree sizes (even k)")
    ap.add_argument("--out", default="bench/entries.json")
    args = ap.parse_args(argv)
    fabrics = [(f"fat-tree k={k}", Clos.fat_tree(k).wire()) for k in args.k]
    fabrics.append(("leaf-spine {} x {} x {}".format(*PAPER),
                    Clos.generate(*PAPER, 100.0, wiring=True)))
    result = {"command": "python -m benchmarks.entries", "fabrics": []}
    for name, fabric in fabrics:
        result["fabrics"].append(bench_fabric(name, fabric))
        r = result["fabrics"][-1]
        print(f"{name}: {r['prefix']['flow']['total']:,} static entries by prefix, "
              f"{r['per_host']['flow']['total']:,} per host", file=sys.stderr)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=2)
    print(f"benchmarks.entries: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
