"""Benchmarks of hitless reconciliation (real ryu-manager and Open vSwitch, bridges only).

* ``reconnect``: a leaf holding 1,000 planned entries reconnects. Hitless (its table matches:
  read, diff, nothing sent) against a wipe and re-provision (the table emptied, so everything
  is sent again, as mlroute did before), both measured in the same run: OpenFlow messages and
  the controller's time to read and repair the switch.
* ``restart``: a controller restart at the paper's scale (32 spines x 64 leaves, 16 hosts per
  leaf declared, 96 netdev bridges joined by patch ports, no hosts): time until every switch
  is reconciled and flow/group messages sent, against the first start on empty switches; and
  REST latency (GET /v1/jobs) while the switches are being reconciled.

    python -m benchmarks.reconcile [--out bench/reconcile.json] [--quick]

Needs root and Open vSwitch; writes logs under a temporary folder it removes.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time

from controller.model.fabric import Fabric
from emulation.harness import fabricnet
from emulation.harness.controller_proc import ControllerProcess


def _vsctl(args: list[str], timeout: float = 300) -> None:
    subprocess.run(["ovs-vsctl", "--timeout=120", *args], check=True, timeout=timeout,
                   capture_output=True)


def build_bridges(fabric: Fabric) -> None:
    """Every switch of ``fabric`` as a netdev bridge with its declared datapath id, and every
    leaf-spine link as a pair of patch ports with the declared port numbers."""
    for sw in fabric.spines + fabric.leaves:
        _vsctl(["--may-exist", "add-br", sw, "--", "set", "bridge", sw, "datapath_type=netdev",
                "fail_mode=secure", "protocols=OpenFlow13",
                f"other-config:datapath-id={fabric.dpids[sw]:016x}"])
    for leaf in fabric.leaves:
        cmd = []
        for spine in fabric.spines:
            a, b = f"{leaf}-{spine}", f"{spine}-{leaf}"
            cmd += ["--", "--may-exist", "add-port", leaf, a, "--", "set", "interface", a,
                    "type=patch", f"options:peer={b}", f"ofport_request={fabric.port(leaf, spine)}",
                    "--", "--may-exist", "add-port", spine, b, "--", "set", "interface", b,
                    "type=patch", f"options:peer={a}", f"ofport_request={fabric.port(spine, leaf)}"]
        _vsctl(cmd[1:])


def remove_bridges(fabric: Fabric) -> None:
    for sw in fabric.spines + fabric.leaves:
        subprocess.run(["ovs-vsctl", "--timeout=60", "--if-exists", "del-br", sw],
                       capture_output=True, timeout=120)


def point(fabric: Fabric, switches: list[str], port: int, addr: str = "127.0.0.1") -> None:
    """Point switches at a controller; retries at most 1 s apart (OVS backs off up to 8 s by
    default, which would hide the controller's own time)."""
    cmd = []
    for sw in switches:
        cmd += ["--", "set-controller", sw, f"tcp:{addr}:{port}",
                "--", "set", "controller", sw, "max_backoff=1000"]
    _vsctl(cmd[1:])


def _metric(ctl: ControllerProcess, name: str) -> float:
    for line in ctl.client.metrics(timeout=30).splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def _controller(tmp: str, fabric_path: str, log: str, state: str) -> ControllerProcess:
    return ControllerProcess(fabric_path, os.path.join(tmp, log), algorithm="auto",
                             extra_args=["--mlroute-state", state, "--mlroute-stats-interval", "0",
                                         "--mlroute-lldp-interval", "0",
                                         "--mlroute-dead-after", "60"]).start(timeout=120)


def _wait_ready(ctl: ControllerProcess, timeout: float) -> float:
    t0 = time.monotonic()
    fabricnet.wait_until(lambda: ctl.rest("GET", "/v1/fabric", timeout=60)[1].get("ready"),
                         timeout, interval=0.05, what="every switch reconciled")
    return time.monotonic() - t0


def bench_reconnect(tmp: str, repeats: int = 5, entries: int = 1000) -> dict:
    fabric = Fabric.generate(2, 2, 1, 1.0, wiring=True)
    path = os.path.join(tmp, "small.json")
    with open(path, "w") as fh:
        json.dump(fabric.to_dict(), fh)
    build_bridges(fabric)
    ctl = None
    try:
        ctl = _controller(tmp, path, "reconnect.log", os.path.join(tmp, "small.db"))
        point(fabric, fabric.spines + fabric.leaves, ctl.of_port)
        _wait_ready(ctl, 60)
        flows = [{"src": "h0_0", "dst": "h1_0", "bytes": 1e6, "proto": "udp", "sport": 20000 + k,
                  "dport": 4791} for k in range(entries)]
        code, doc = ctl.rest("POST", "/v1/jobs", {"id": "many", "flows": flows,
                                                  "algorithm": "greedy"})
        assert code == 201, doc
        out = {"entries_on_leaf": None, "hitless": [], "wipe": []}
        addr = ["127.0.0.2", "127.0.0.1"]
        for k in range(2 * repeats):
            kind = "hitless" if k % 2 == 0 else "wipe"
            if kind == "wipe":
                subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "del-flows", "l0"], check=True,
                               timeout=60)
                subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "del-groups", "l0"], check=True,
                               timeout=60)
            before = ctl.rest("GET", "/v1/fabric")[1]["seen"]["l0"]["last_sync"]
            point(fabric, ["l0"], ctl.of_port, addr[k % 2])
            fabricnet.wait_until(
                lambda: ctl.rest("GET", "/v1/fabric")[1]["seen"]["l0"]["last_sync"] != before
                and ctl.rest("GET", "/v1/fabric")[1]["ready"], 60, interval=0.05,
                what="l0 reconciled")
            sync = ctl.rest("GET", "/v1/fabric")[1]["seen"]["l0"]["last_sync"]
            out[kind].append(sync)
            out["entries_on_leaf"] = ctl.rest("GET", "/v1/fabric")[1]["seen"]["l0"]["rules"]
        for kind in ("hitless", "wipe"):
            runs = out[kind]
            out[kind] = {"messages": [r["messages"] for r in runs],
                         "seconds": [r.get("seconds") for r in runs],
                         "median_seconds": statistics.median(r.get("seconds") or 0 for r in runs)}
        w = out["wipe"]
        out["ratio_messages_hitless_to_wipe"] = (max(out["hitless"]["messages"]) /
                                                 max(1, min(w["messages"])))
        out["ratio_seconds_hitless_to_wipe"] = (out["hitless"]["median_seconds"] /
                                                w["median_seconds"] if w["median_seconds"] else None)
        return out
    finally:
        if ctl is not None:
            ctl.stop()
        remove_bridges(fabric)


def bench_restart(tmp: str, spines: int = 32, leaves: int = 64, hosts: int = 16) -> dict:
    fabric = Fabric.generate(spines, leaves, hosts, 100.0, wiring=True)
    path = os.path.join(tmp, "paper.json")
    with open(path, "w") as fh:
        json.dump(fabric.to_dict(), fh)
    state = os.path.join(tmp, "paper.db")
    t0 = time.monotonic()
    build_bridges(fabric)
    out = {"shape": [spines, leaves, hosts], "bridges": spines + leaves,
           "build_s": round(time.monotonic() - t0, 1)}
    ctl = None
    try:
        point(fabric, fabric.spines + fabric.leaves, 6653)  # the port _controller uses
        t0 = time.monotonic()  # both starts timed from the controller's own start
        ctl = _controller(tmp, path, "first.log", state)
        _wait_ready(ctl, 600)
        out["first_start_ready_s"] = round(time.monotonic() - t0, 2)
        out["first_start_messages"] = _metric(ctl, "mlroute_openflow_messages_total")
        out["entries"] = sum(s["rules"] or 0 for s in
                             ctl.rest("GET", "/v1/fabric")[1]["seen"].values())
        ctl.stop()
        t0 = time.monotonic()
        ctl = _controller(tmp, path, "restart.log", state)
        latencies, stop = [], threading.Event()

        def poll():
            while not stop.is_set():
                t = time.monotonic()
                try:
                    ctl.rest("GET", "/v1/jobs", timeout=30)
                    latencies.append(time.monotonic() - t)
                except OSError:
                    pass
                time.sleep(0.05)
        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        try:
            _wait_ready(ctl, 600)
        finally:
            stop.set()
            poller.join(timeout=60)
        out["restart_ready_s"] = round(time.monotonic() - t0, 2)
        out["restart_messages"] = _metric(ctl, "mlroute_openflow_messages_total")
        out["rest_latency_ms_during_reconcile"] = {
            "samples": len(latencies),
            "median": round(statistics.median(latencies) * 1e3, 1) if latencies else None,
            "max": round(max(latencies) * 1e3, 1) if latencies else None}
        out["ratio_restart_to_first_start"] = round(out["restart_ready_s"] /
                                                    out["first_start_ready_s"], 3)
        return out
    finally:
        if ctl is not None:
            ctl.stop()
        remove_bridges(fabric)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.reconcile")
    ap.add_argument("--out", default="bench/reconcile.json")
    ap.add_argument("--quick", action="store_true", help="8 x 16 instead of 32 x 64")
    args = ap.parse_args(argv)
    from emulation.harness.session import install_interrupt_handler
    # Ctrl-C or SIGTERM unwinds through the cleanup, also when started with SIGINT ignored (&)
    install_interrupt_handler()
    fabricnet.ensure_ovs()
    fabricnet.cleanup()
    with tempfile.TemporaryDirectory(prefix="mlroute-bench-") as tmp:
        result = {"reconnect": bench_reconnect(tmp),
                  "restart": bench_restart(tmp, *((8, 16, 4) if args.quick else (32, 64, 16)))}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=1)
    print(json.dumps({k: {x: v for x, v in d.items() if not isinstance(v, (list, dict))}
                      for k, d in result.items()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
