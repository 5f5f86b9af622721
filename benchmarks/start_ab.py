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
vSwitch; wrap it in the live lock (``flock /tmp/mlroute-live.lock``). The JSON is written
after every run, so a run that times out or fails is recorded (``error``) and those before it
are kept.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

from benchmarks.scale import lookup

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
CLEANUP_S = 300  # seconds an interrupted run may take to stop its controller, remove bridges
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


def run_one(tree: str, k: int, timeout: float, child: str = CHILD) -> dict:
    """One start and restart by the checkout at ``tree`` (a child Python there), with the
    1-minute load average before and after it. A child that fails, or outlives ``timeout``
    (then interrupted as Ctrl-C does, so that it stops its controller and removes its
    bridges), gives an ``error`` with the last of its output instead."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    load_before = round(os.getloadavg()[0], 2)
    proc = subprocess.Popen([sys.executable, "-c", child, str(k)], cwd=tree, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        late = ""
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)  # its cleanups run (a kill would leave the bridges)
        try:
            stdout, stderr = proc.communicate(timeout=CLEANUP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        late = f"timed out after {timeout:g} s: "
    finally:
        if proc.poll() is None:  # an exception here: the child goes too
            proc.kill()
            proc.wait()
    line = next((x for x in stdout.splitlines() if x.startswith("RESULT ")), None)
    r = (json.loads(line[len("RESULT "):]) if line is not None and not late
         else {"error": late + (stderr or stdout)[-2000:]})
    r["load_before"], r["load_after"] = load_before, round(os.getloadavg()[0], 2)
    for which in ("first_start", "restart"):
        c = r.get(f"{which}_connected") or {}
        if "all_connected_s" in c:
            r[f"{which}_after_connected_s"] = round(c["ready_s"] - c["all_connected_s"], 2)
    return r


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
    ap.add_argument("--timeout", type=float, default=900.0, metavar="S",
                    help="seconds one run may take (default 900)")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        ap.error("needs root and Open vSwitch")
    trees = [{"tree": os.path.abspath(t), "commit": commit_of(t), "runs": []} for t in args.tree]
    doc = {"command": "python -m benchmarks.start_ab " + " ".join(argv or sys.argv[1:]),
           "fat_tree": args.fat_tree, "repeat": args.repeat, "cpus": os.cpu_count(),
           "date": time.strftime("%Y-%m-%d"), "complete": False, "trees": trees}
    started = time.monotonic()
    for i in range(args.repeat):
        for t in trees:
            r = run_one(t["tree"], args.fat_tree, args.timeout)
            t["runs"].append(r)
            t["median"] = medians(t["runs"])
            doc["wall_s"] = round(time.monotonic() - started, 1)
            write(args.out, doc)  # what finished so far, whatever comes next
            shown = {k: lookup(r, k) for k in KEYS[:4]}
            if "error" in r:
                shown["error"] = r["error"][-300:]
            print(f"[start_ab] {t['commit']} run {i + 1}: {shown}", file=sys.stderr, flush=True)
    doc["complete"] = True
    write(args.out, doc)
    print(json.dumps({t["commit"]: t["median"] for t in trees}, indent=1))
    return 0


def write(path: str, doc: dict) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
