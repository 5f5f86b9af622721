"""Benchmark of shared switch mastership (``--mlroute-share-switches``): one controller against
three on a k-ary fat-tree of Open vSwitch bridges, with a private etcd: JSON in
bench/shared.json.

The fabric is ``benchmarks.scale``'s (k = 16: 320 netdev bridges joined by patch ports, 1,024
hosts declared, none emulated). For each count of ``--controllers`` (default 1, then 3) the
bridges are built afresh (empty tables), each pointed at every controller, and the controllers
join one etcd under a prefix of their own, all with ``--mlroute-share-switches`` (with one
controller it masters every switch: the same code path, so the ratio is the sharing's). Then:

* first start until every controller reports its share ready (``GET /v1/fabric``) and every
  switch has exactly one master; OpenFlow messages of all controllers together;
* a restart of all of them (stopped, then started together) until ready again: messages (0:
  hitless) and REST latency on the planner meanwhile;
* POST of a ring All-Reduce of 128 hosts, then of an all-to-all of 32 hosts (992 flows), to the
  planner: answered once every controller confirmed its share (``members_pending`` empty);
* a link failure re-planned (``benchmarks.scale.link_failure``, on the planner's views).

Each figure of three controllers is also given as its ratio to one in the same run.

    python -m benchmarks.shared [--fat-tree K] [--controllers N ...] [--out bench/shared.json]
                                [--logs DIR]

Needs root, Open vSwitch and etcd (Debian's etcd-server). On a 2-core machine the three
controllers and ovs-vswitchd share the same two cores: the figures say what sharing costs and
saves there, not what three machines would give.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback

from benchmarks.reconcile import (
    RestPoller,
    _metric,
    _transactions,
    build_bridges,
    remove_bridges,
    settle_connections,
)
from benchmarks.scale import (
    DEAD_AFTER,
    MESSAGES,
    WAIT,
    _machine,
    _say,
    all_to_all_job,
    link_failure,
    lookup,
    post,
    ratios,
    ring_job,
)
from emulation.harness import fabricnet
from emulation.harness.controller_proc import ControllerProcess
from emulation.harness.ha import EtcdServer, max_backoff
from topologies.clos import fattree_fabric

OF_BASE, REST_BASE = 6663, 8091
FIGURES = ("first_start_ready_s", "first_start_messages", "restart_ready_s", "restart_messages",
           "rest_latency_ms_during_restart.median", "rest_latency_ms_during_restart.max",
           "post.ring.answered_s", "post.all_to_all.answered_s", "link_failure.replanned_s",
           "link_failure.rest_ms.max")


def _controllers(n: int, fabric_path: str, etcd_url: str, prefix: str, workdir: str,
                 run: str) -> list[ControllerProcess]:
    ctls = []
    for i in range(n):
        ctl = ControllerProcess(
            fabric_path, os.path.join(workdir, f"{prefix.strip('/')}-c{i}-{run}.log"),
            algorithm="auto", rest_port=REST_BASE + i, of_port=OF_BASE + i,
            extra_args=["--mlroute-etcd", etcd_url, "--mlroute-etcd-prefix", prefix,
                        "--mlroute-id", f"c{i}", "--mlroute-share-switches",
                        "--mlroute-sflow-port", "0", "--mlroute-stats-interval", "0",
                        "--mlroute-lldp-interval", "0", "--mlroute-dead-after", str(DEAD_AFTER)])
        ctls.append(ctl)
    for ctl in ctls:
        ctl.start(timeout=120)
    return ctls


def _ready(ctls: list[ControllerProcess], switches: int) -> bool:
    """Every controller's share synchronised, every switch with one master."""
    masters = 0
    for ctl in ctls:
        if ctl.rest("GET", "/v1/ready", timeout=60)[0] != 200:
            return False
        mine = ctl.rest("GET", "/v1/cluster", timeout=60)[1]["self"]["switches"]
        if mine["master"] + mine["slave"] != switches:
            return False
        masters += mine["master"]
    return masters == switches


def _planner(ctls: list[ControllerProcess]) -> ControllerProcess:
    for ctl in ctls:
        if ctl.rest("GET", "/v1/cluster", timeout=60)[1]["self"]["role"] == "master":
            return ctl
    raise RuntimeError("no controller is the master")


def _messages(ctls: list[ControllerProcess]) -> float:
    """OpenFlow messages all the controllers sent."""
    return sum(_metric(ctl, MESSAGES) for ctl in ctls)


def measure(fabric, n: int, etcd_url: str, workdir: str) -> dict:
    """One count of controllers on fresh bridges (the module's docstring)."""
    prefix = f"/mlroute-n{n}/"
    path = os.path.join(workdir, f"fabric-n{n}.json")
    with open(path, "w") as fh:
        json.dump(fabric.to_dict(), fh)
    switches = fabric.switches()
    out: dict = {"controllers": n, "switches": len(switches)}
    ctls: list[ControllerProcess] = []
    try:
        t0 = time.monotonic()
        build_bridges(fabric)
        targets = [f"tcp:127.0.0.1:{OF_BASE + i}" for i in range(n)]
        _transactions([["set-controller", sw, *targets] for sw in switches], 256)
        max_backoff(1000)
        out["build_s"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        ctls = _controllers(n, path, etcd_url, prefix, workdir, "first")
        fabricnet.wait_until(lambda: _ready(ctls, len(switches)), WAIT, 0.1, "shares ready")
        out["first_start_ready_s"] = round(time.monotonic() - t0, 2)
        out["first_start_messages"] = _messages(ctls)
        out["shares"] = {c.rest("GET", "/v1/cluster")[1]["self"]["id"]:
                         c.rest("GET", "/v1/cluster")[1]["self"]["switches"]["master"]
                         for c in ctls}
        # every switch connected by then: connected long enough for OVS's back-off to reset
        out["connected_before_restart_s"] = settle_connections(t0 + out["first_start_ready_s"])
        for ctl in ctls:
            ctl.stop()
        ctls = []
        t0 = time.monotonic()
        ctls = _controllers(n, path, etcd_url, prefix, workdir, "restart")
        planner = fabricnet.wait_until(lambda: _try_planner(ctls), WAIT, 0.1, "a planner")
        with RestPoller(planner) as poller:
            fabricnet.wait_until(lambda: _ready(ctls, len(switches)), WAIT, 0.1, "shares ready")
        out["restart_ready_s"] = round(time.monotonic() - t0, 2)
        out["restart_messages"] = _messages(ctls)
        out["rest_latency_ms_during_restart"] = poller.summary()
        planner = _planner(ctls)
        out["post"] = {}
        for key, job in (("ring", ring_job(fabric)), ("all_to_all", all_to_all_job(fabric))):
            _say(f"{n} controllers: POST {key}")
            got = post(planner, job)
            got.pop("rest_ms", None)
            out["post"][key] = got
        _say(f"{n} controllers: link failure")
        failure = link_failure(planner, fabric)
        failure.get("rest_ms", {}).pop("raw", None)
        out["link_failure"] = failure
        return out
    finally:
        for ctl in ctls:
            ctl.stop()
        remove_bridges(fabric)


def _try_planner(ctls):
    try:
        return _planner(ctls)
    except (OSError, RuntimeError, KeyError):
        return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.shared",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--fat-tree", type=int, default=16, metavar="K")
    ap.add_argument("--controllers", type=int, nargs="+", default=[1, 3], metavar="N")
    ap.add_argument("--out", default=os.path.join("bench", "shared.json"))
    ap.add_argument("--logs", metavar="DIR", help="keep the controller and etcd logs here")
    args = ap.parse_args(argv)
    if args.fat_tree < 2 or args.fat_tree % 2 or min(args.controllers) < 1:
        ap.error("--fat-tree takes even k >= 2 and --controllers counts >= 1")
    if os.geteuid() != 0:
        ap.error("needs root and Open vSwitch")
    from emulation.harness.session import install_interrupt_handler
    install_interrupt_handler()
    fabricnet.ensure_ovs()
    fabric = fattree_fabric(args.fat_tree)
    command = (f"python -m benchmarks.shared --fat-tree {args.fat_tree} --controllers "
               + " ".join(map(str, args.controllers)))
    result = {"command": command,
              "machine": _machine(), "fabric": f"fat-tree k={args.fat_tree}",
              "runs": [], "complete": False}

    def write() -> None:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=1)

    with tempfile.TemporaryDirectory(prefix="mlroute-shared-") as tmp:
        workdir = args.logs or tmp
        os.makedirs(workdir, exist_ok=True)
        with EtcdServer(workdir) as etcd:
            for n in args.controllers:
                _say(f"fat-tree k={args.fat_tree}: {n} controllers")
                try:
                    r = measure(fabric, n, etcd.url, workdir)
                except Exception as e:  # noqa: BLE001 - recorded; the next count still runs
                    r = {"controllers": n, "error": f"{type(e).__name__}: {e}"}
                    _say(f"{r['error']}\n{traceback.format_exc()}")
                if result["runs"] and "error" not in result["runs"][0]:
                    r["ratios_to_first"] = ratios(r, result["runs"][0], FIGURES)
                result["runs"].append(r)
                write()
    result["complete"] = True
    write()
    print(json.dumps([{k: lookup(r, k) for k in ("controllers", *FIGURES, "error")}
                      for r in result["runs"]], indent=1))
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
