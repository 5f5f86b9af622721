"""The first start and the restart of a fat-tree's controller (``benchmarks.scale``'s settings:
Open vSwitch bridges, ``--mlroute-dead-after`` 3 s, LLDP rounds every second, echoes), for
several checkouts of mlroute in turn, in one run: two commits compared on a machine whose
load changes (two cores shared by several engineers), each checkout repeated and the runs
interleaved (A B A B ...), so that a change of load hits both. JSON in bench/start_ab.json.

    python -m benchmarks.start_ab --tree /work/old --tree . [--repeat 2] [--fat-tree 16]
                                  [--out bench/start_ab.json]

Each run is a child Python in its checkout (that checkout's ``benchmarks.reconcile``,
controller and harness; ``git worktree add /work/old <commit>`` makes one), one at a time:
``reconcile.start_and_restart`` on the k-ary fat-tree (k = 16: 320 bridges). Per run: when
the first start and the restart were ready, when the first and the last switch connected
(a restart waits for Open vSwitch's reconnect back-off, so ``*_after_connected_s``, ready
after the last switch connected, is the controller's own part), and each start's ``meter``
(``benchmarks.scale.Meter``: CPU seconds of the controller and of ovs-vswitchd, the
controller's wait for a CPU, messages, load). Per checkout the medians. Needs root and Open
vSwitch; wrap it in the live lock (``flock /tmp/mlroute-live.lock``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CHILD = """
import json, sys, tempfile
from benchmarks import reconcile
from benchmarks.scale import DEAD_AFTER, Meter
from controller.discovery.lldp import LLDP_INTERVAL
from emulation.harness import fabricnet
from topologies.clos import fattree_fabric
fabricnet.ensure_ovs()
fabric, meter = fattree_fabric(int(sys.argv[1])), {}
def on_start(which):
    meter[which] = Meter()
def after_first(ctl, out):
    out["first_start_meter"] = meter["first"].since(ctl, from_process_start=True)
def then(ctl, out):
    out["restart_meter"] = meter["restart"].since(ctl, from_process_start=True)
with tempfile.TemporaryDirectory() as tmp:
    r = reconcile.start_and_restart(tmp, fabric, "ab", dead_after=DEAD_AFTER, then=then,
                                    after_first=after_first, on_start=on_start,
                                    lldp_interval=LLDP_INTERVAL)
print("RESULT " + json.dumps(r))
"""
KEYS = ("first_start_ready_s", "first_start_after_connected_s", "restart_ready_s",
        "restart_after_connected_s", "first_start_meter.controller_cpu_s",
        "first_start_meter.ovs_cpu_s", "restart_meter.controller_cpu_s",
        "restart_meter.ovs_cpu_s", "first_start_messages")


def commit_of(tree: str) -> str:
    out = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True, timeout=30)
    dirty = subprocess.run(["git", "-C", tree, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=60).stdout.strip()
    return out.stdout.strip() + ("+changes" if dirty else "")


def run_one(tree: str, k: int, timeout: float) -> dict:
    """One start and restart by the checkout at ``tree`` (a child Python there)."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    out = subprocess.run([sys.executable, "-c", CHILD, str(k)], cwd=tree, env=env,
                         capture_output=True, text=True, timeout=timeout)
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        return {"error": (out.stderr or out.stdout)[-2000:]}
    r = json.loads(line[len("RESULT "):])
    for which in ("first_start", "restart"):
        c = r.get(f"{which}_connected") or {}
        if "all_connected_s" in c:
            r[f"{which}_after_connected_s"] = round(c["ready_s"] - c["all_connected_s"], 2)
    return r


def lookup(doc: dict, path: str):
    for key in path.split("."):
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc


def medians(runs: list[dict]) -> dict:
    """Per figure of ``KEYS``, the median over the runs that have it.

    >>> medians([{"restart_ready_s": 3.0}, {"restart_ready_s": 2.0}, {"error": "x"}])
    {'restart_ready_s': 2.5}
    """
    out = {}
    for key in KEYS:
        xs = [v for r in runs if isinstance(v := lookup(r, key), (int, float))]
        if xs:
            out[key] = round(statistics.median(xs), 3)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.start_ab",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--tree", action="append", required=True, metavar="DIR",
                    help="a checkout of mlroute (repeat: each is measured in turn)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per checkout (default 2)")
    ap.add_argument("--fat-tree", type=int, default=16, metavar="K", help="k (default 16)")
    ap.add_argument("--out", default=os.path.join("bench", "start_ab.json"))
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        ap.error("needs root and Open vSwitch")
    trees = [{"tree": os.path.abspath(t), "commit": commit_of(t), "runs": []} for t in args.tree]
    started = time.monotonic()
    for i in range(args.repeat):
        for t in trees:
            r = run_one(t["tree"], args.fat_tree, 900)
            r["load_before"] = round(os.getloadavg()[0], 2)
            t["runs"].append(r)
            print(f"[start_ab] {t['commit']} run {i + 1}: "
                  f"{ {k: lookup(r, k) for k in KEYS[:4]} }", file=sys.stderr, flush=True)
    for t in trees:
        t["median"] = medians(t["runs"])
    doc = {"command": "python -m benchmarks.start_ab " + " ".join(argv or sys.argv[1:]),
           "fat_tree": args.fat_tree, "repeat": args.repeat, "cpus": os.cpu_count(),
           "date": time.strftime("%Y-%m-%d"), "wall_s": round(time.monotonic() - started, 1),
           "trees": trees}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(doc, fh, indent=1)
    print(json.dumps({t["commit"]: t["median"] for t in trees}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
