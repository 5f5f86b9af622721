"""Benchmark of controller failover (real etcd, two ryu-managers, a Mininet fabric whose
switches connect to both, a ring job installed).

The master is killed (SIGKILL) ``--kills`` times; each time the failover time is measured from
the kill to the moment every switch confirmed the standby's master role (its OpenFlow role
replies, reported by the standby), and to the standby's takeover done (every switch read and
repaired; the messages that sent are counted: 0 when the tables match). The killed controller
is started again as the new standby before the next kill. The baseline, in the same command, is
failover by the etcd lease alone (``--nomlroute-failover-probe``: a standby waits for the
dead master's lease to expire).

    python -m benchmarks.failover [--kills 10] [--baseline-kills 5] [--fat-tree 4]
        [--out bench/failover.json]

``--fat-tree K`` also kills the master ``--kills`` times in front of an emulated k-ary fat-tree
(three tiers, 5k^2/4 switches, a ring across its leaves) and reports its median against the
leaf-spine's, in the same command.

Needs root, Open vSwitch and etcd (Debian's etcd-server).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

from emulation.harness.ha import EtcdServer, HaSession
from emulation.harness.session import install_interrupt_handler


def _summary(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 4), "max": round(max(values), 4),
            "min": round(min(values), 4), "n": len(values)}


def run_kills(s: HaSession, kills: int, progress) -> list[dict]:
    """Kill the master ``kills`` times; one record per kill."""
    records = []
    n = len(s.fabric.dpids)
    for i in range(kills):
        master = s.master_id()
        standby = next(c for c in s.ids if c != master and s.ctls[c] is not None)
        gen0 = s.cluster(standby)["generation"]
        t_kill = s.kill(master)
        doc = None
        while time.time() - t_kill < 30:
            doc = s.cluster(standby, timeout=2)
            if doc["self"]["serving"] and doc["self"]["switches"]["master"] == n:
                break
            time.sleep(0.005)
        else:
            raise TimeoutError(f"kill {i}: {standby} did not take over within 30 s")
        observed = time.time() - t_kill
        t = doc["takeover"]
        rec = {"killed": master, "new_master": standby,
               "to_roles_confirmed_s": round(t["roles_confirmed"] - t_kill, 4),
               "to_takeover_done_s": round(t["synced"] - t_kill, 4),
               "observed_s": round(observed, 4), "elected_s": round(t["elected"] - t_kill, 4),
               "detected_by": t.get("detected_by"), "messages": t["messages"],
               "switches": t["switches"], "generation_before": gen0,
               "generation_after": doc["generation"]}
        assert rec["generation_after"] > gen0, rec
        records.append(rec)
        progress(f"kill {i + 1}/{kills}: {master} -> {standby}, switches master after "
                 f"{rec['to_roles_confirmed_s'] * 1e3:.0f} ms, {rec['messages']} messages")
        t0 = time.monotonic()
        s.start_controller(master)
        s.wait_ready()
        rec["restart_as_standby_s"] = round(time.monotonic() - t0, 2)
    return records


def measure(kind: str, kills: int, shape: tuple, workdir: str, etcd_url: str, progress,
            clos=None) -> dict:
    extra = ["--mlroute-stats-interval", "0"]
    if kind == "lease":
        extra += ["--nomlroute-failover-probe"]
    prefix = ["--mlroute-etcd-prefix", f"/bench-{kind}/"]
    with HaSession(*shape, 0.0, os.path.join(workdir, kind), etcd_url,
                   extra_args=extra + prefix, clos=clos) as s:
        job = {"id": "ring", "collective": "ring_allreduce", "bytes": 1e6,  # one rank a leaf
               "ranks": [s.fabric.hosts_of_leaf[leaf][0] for leaf in s.fabric.leaves]}
        status, doc = s.master().rest("POST", "/v1/jobs", job)
        if status != 201:
            raise RuntimeError(f"posting the job failed: {doc}")
        s.wait_ready()
        records = run_kills(s, kills, progress)
    roles = [r["to_roles_confirmed_s"] for r in records]
    done = [r["to_takeover_done_s"] for r in records]
    return {"kills": records, "to_roles_confirmed_s": _summary(roles),
            "to_takeover_done_s": _summary(done),
            "messages_total": sum(r["messages"] for r in records)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.failover", description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--baseline-kills", type=int, default=5,
                    help="kills with failover by lease expiry alone (0: skip)")
    ap.add_argument("--spines", type=int, default=2)
    ap.add_argument("--leaves", type=int, default=4)
    ap.add_argument("--hosts-per-leaf", type=int, default=2)
    ap.add_argument("--fat-tree", type=int, default=0, metavar="K",
                    help="also fail over in front of a k-ary fat-tree (0: no)")
    ap.add_argument("--out", default="bench/failover.json")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("error: the failover benchmark needs root (Mininet, Open vSwitch)", file=sys.stderr)
        return 2

    def progress(msg):
        print(msg, file=sys.stderr, flush=True)

    shape = (args.spines, args.leaves, args.hosts_per_leaf)
    out = {"fabric": {"spines": shape[0], "leaves": shape[1], "hosts_per_leaf": shape[2]},
           "controllers": 2, "what": "SIGKILL of the master controller until every switch "
           "confirmed the standby's master role (OpenFlow role replies) and until the standby "
           "read every switch and sent the difference"}
    with tempfile.TemporaryDirectory(prefix="mlroute-failover-") as tmp:
        with EtcdServer(tmp) as etcd:
            progress("failover with the probe (default)")
            out["probe"] = measure("probe", args.kills, shape, tmp, etcd.url, progress)
            if args.baseline_kills:
                progress("baseline: failover by lease expiry alone")
                out["lease_only"] = measure("lease", args.baseline_kills, shape, tmp, etcd.url,
                                            progress)
                out["lease_only_over_probe_median"] = round(
                    out["lease_only"]["to_roles_confirmed_s"]["median"] /
                    out["probe"]["to_roles_confirmed_s"]["median"], 1)
            if args.fat_tree:
                progress(f"failover with the probe in front of a k = {args.fat_tree} fat-tree")
                from topologies.clos import fattree_fabric
                out["fat_tree"] = {"k": args.fat_tree, **measure(
                    "fattree", args.kills, (0, 0, 0), tmp, etcd.url, progress,
                    fattree_fabric(args.fat_tree, 1, 0))}
                out["fat_tree_over_leaf_spine_median"] = round(
                    out["fat_tree"]["to_roles_confirmed_s"]["median"] /
                    out["probe"]["to_roles_confirmed_s"]["median"], 2)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=1)
    p = out["probe"]["to_roles_confirmed_s"]
    print(f"failover over {p['n']} kills: median {p['median'] * 1e3:.0f} ms, max "
          f"{p['max'] * 1e3:.0f} ms; rule messages sent by takeovers: "
          f"{out['probe']['messages_total']}")
    if "fat_tree" in out:
        q = out["fat_tree"]["to_roles_confirmed_s"]
        print(f"k = {args.fat_tree} fat-tree: median {q['median'] * 1e3:.0f} ms, max "
              f"{q['max'] * 1e3:.0f} ms ({out['fat_tree_over_leaf_spine_median']}x the "
              f"leaf-spine's); messages {out['fat_tree']['messages_total']}")
    if "lease_only" in out:
        q = out["lease_only"]["to_roles_confirmed_s"]
        print(f"lease expiry alone: median {q['median'] * 1e3:.0f} ms, max "
              f"{q['max'] * 1e3:.0f} ms ({out['lease_only_over_probe_median']}x)")
    return 0


if __name__ == "__main__":
    install_interrupt_handler()
    sys.exit(main())
