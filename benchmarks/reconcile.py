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

from controller.model.clos import Clos
from emulation.harness import fabricnet, owned
from emulation.harness.controller_proc import ControllerProcess


def _vsctl(args: list[str], timeout: float = 300) -> None:
    subprocess.run(["ovs-vsctl", "--timeout=120", *args], check=True, timeout=timeout,
                   capture_output=True)


def _transactions(commands: list[list[str]], per: int) -> None:
    """ovs-vsctl commands (each a list of words) joined ``per`` to a transaction: every
    transaction makes ovs-vswitchd walk all its bridges again, so few large ones are quicker."""
    for i in range(0, len(commands), per):
        args: list[str] = []
        for c in commands[i:i + per]:
            args += ["--", *c]
        _vsctl(args[1:])


def switch_links(fabric) -> list[tuple[str, str, int, int, str, str]]:
    """Every switch link of ``fabric`` (any wired ``Clos``: every tier, every plane, every
    member of a bundle): (lower switch, upper switch, port on each, patch port name on each),
    with the declared port numbers.

    >>> f = Clos.generate(2, 2, 1, 1.0, wiring=True)
    >>> switch_links(f)[0]
    ('l0', 's0', 1, 1, 'l0-s0', 's0-l0')
    """
    out = []
    for a, b in fabric.links():
        members = list(zip(fabric.ports_to(a, b), fabric.ports_to(b, a)))
        for m, (pa, pb) in enumerate(members):
            tag = f".{m}" if len(members) > 1 else ""
            out.append((a, b, pa, pb, f"{a}-{b}{tag}", f"{b}-{a}{tag}"))
    return out


def patch_commands(link: tuple) -> list[list[str]]:
    """The ovs-vsctl commands that add one ``switch_links`` entry's pair of patch ports."""
    a, b, pa, pb, na, nb = link
    return [["--may-exist", "add-port", a, na, "--", "set", "interface", na, "type=patch",
             f"options:peer={nb}", f"ofport_request={pa}"],
            ["--may-exist", "add-port", b, nb, "--", "set", "interface", nb, "type=patch",
             f"options:peer={na}", f"ofport_request={pb}"]]


def build_bridges(fabric, per: int = 512) -> None:
    """Every switch of ``fabric`` (``switch_links``' fabrics) as a netdev bridge with its
    declared datapath id, and every switch link as a pair of patch ports with the declared
    port numbers; in transactions of ``per`` commands. Each bridge carries the harness's mark
    (``owned``), so that a killed run's bridges are the harness's to clean up and its
    ``max_backoff`` reaches them."""
    me = owned.claim()
    _transactions([["--may-exist", "add-br", sw, "--", "set", "bridge", sw,
                    "datapath_type=netdev", "fail_mode=secure", "protocols=OpenFlow13",
                    f"other-config:datapath-id={fabric.dpids[sw]:016x}",
                    f"external_ids:{owned.KEY}={me}"]
                   for sw in fabric.switches()], per // 4)
    _transactions([c for link in switch_links(fabric) for c in patch_commands(link)], per)


def remove_bridges(fabric) -> None:
    """Delete every bridge of ``fabric`` that exists (a few transactions; errors ignored: it
    runs in cleanups)."""
    names = fabric.switches()
    for i in range(0, len(names), 64):
        args: list[str] = []
        for sw in names[i:i + 64]:
            args += ["--", "--if-exists", "del-br", sw]
        subprocess.run(["ovs-vsctl", "--timeout=120", *args[1:]], capture_output=True,
                       timeout=300)


def point(fabric, switches: list[str], port: int, addr: str = "127.0.0.1") -> None:
    """Point switches at a controller, asking for retries at most 1 s apart (``max_backoff``;
    Open vSwitch 3.1 applies it only once the switch is connected: ``backoff_takes``)."""
    _transactions([["set-controller", sw, f"tcp:{addr}:{port}", "--", "set", "controller", sw,
                    "max_backoff=1000"] for sw in switches], 256)


def backoff_takes(fabric) -> None:
    """Make the controller records' ``max_backoff`` (``point``: 1 s) reach the connections of
    ``fabric``'s switches, every one connected now. Open vSwitch 3.1 makes a controller
    connection with its own defaults (retries 1, 2, 4 and then 8 s apart, an inactivity probe
    after 5 s: ``connmgr.c``, ``ofservice_create``) and applies the record's ``max_backoff`` and
    ``inactivity_probe`` only when it reconfigures while the switch is connected
    (``ofconn_reconfigure`` runs for connected switches, at any change of its database); from
    then on that connection keeps them, also once the controller is gone. Checked on two
    bridges whose controller went away: 1, 2, 4, 8 s apart as pointed, 1 s apart after a
    change of the database while they were connected. So one record is changed (to 1001 ms,
    1 s too) and back: every bridge is reconfigured, the record stays as ``point`` left it."""
    sw = fabric.switches()[0]
    for ms in (1001, 1000):
        _vsctl(["set", "controller", sw, f"max_backoff={ms}"])


# Open vSwitch's longest wait between two tries to reach a controller is 8 s (rconn.c); a
# connection that lived less than the wait in force when it was made doubles it for the next
# try, counted in whole seconds: the restart waits until every switch was connected 8 s and
# a margin (what a running controller sees; 8.0 s exactly left some switches waiting 8 s more)
OVS_MAX_BACKOFF_S = 10.0


def settle_connections(connected: float) -> float:
    """Wait until every switch, all connected at ``connected`` (monotonic), was connected
    ``OVS_MAX_BACKOFF_S``; the seconds they were (``connected_before_restart_s``)."""
    time.sleep(max(0.0, OVS_MAX_BACKOFF_S - (time.monotonic() - connected)))
    return round(time.monotonic() - connected, 1)


def _metric(ctl: ControllerProcess, name: str) -> float:
    for line in ctl.client.metrics(timeout=30).splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def _controller(tmp: str, fabric_path: str, log: str, state: str,
                dead_after: float = 60.0, lldp_interval: float = 0.0,
                more: tuple[str, ...] = ()) -> ControllerProcess:
    return ControllerProcess(fabric_path, os.path.join(tmp, log), algorithm="auto",
                             extra_args=["--mlroute-state", state, "--mlroute-stats-interval", "0",
                                         "--mlroute-lldp-interval", str(lldp_interval),
                                         "--mlroute-dead-after", str(dead_after), *more]
                             ).start(timeout=120)


def _wait_ready(ctl: ControllerProcess, timeout: float, t0: float | None = None) -> dict:
    """Poll GET /v1/ready every 50 ms until ready: seconds from ``t0`` (default: now) until
    the first switch connected, every switch connected, and ready. Switches reconnect to a
    restarted controller on Open vSwitch's backoff (every second once ``backoff_takes``;
    before their first connection 1, 2, 4 and 8 s apart), which the first two show apart
    from the controller's own work."""
    t0 = time.monotonic() if t0 is None else t0
    seen: dict[str, float] = {}

    def ready() -> bool:
        code, doc = ctl.rest("GET", "/v1/ready", timeout=60)
        now = round(time.monotonic() - t0, 2)
        if doc.get("connected"):
            seen.setdefault("first_connected_s", now)
        if doc.get("switches") and doc.get("connected") == doc["switches"]:
            seen.setdefault("all_connected_s", now)
        return code == 200
    fabricnet.wait_until(ready, timeout, interval=0.05, what="every switch reconciled")
    return {**seen, "ready_s": round(time.monotonic() - t0, 2)}


def bench_reconnect(tmp: str, repeats: int = 5, entries: int = 1000) -> dict:
    fabric = Clos.generate(2, 2, 1, 1.0, wiring=True)
    path = os.path.join(tmp, "small.json")
    with open(path, "w") as fh:
        json.dump(fabric.to_dict(), fh)
    build_bridges(fabric)
    ctl = None
    try:
        ctl = _controller(tmp, path, "reconnect.log", os.path.join(tmp, "small.db"))
        point(fabric, fabric.planes[0].aggs[0] + fabric.leaves, ctl.of_port)  # spines, leaves
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


class RestPoller:
    """While its block runs, a thread sends ``GET path`` every ``interval`` seconds (after
    each answer) and keeps each answer's latency; a request that fails is not counted."""

    def __init__(self, ctl: ControllerProcess, path: str = "/v1/jobs", interval: float = 0.05):
        self.ctl, self.path, self.interval = ctl, path, interval
        self.latencies: list[float] = []
        self.sent: list[float] = []  # when each counted request was sent (monotonic)
        self._started = time.monotonic()
        self.started_at = time.time()  # the same instant by the wall clock (events' times)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            t = time.monotonic()
            try:
                self.ctl.rest("GET", self.path, timeout=30)
                self.latencies.append(time.monotonic() - t)
                self.sent.append(t)
            except OSError:
                pass
            self._stop.wait(self.interval)

    def __enter__(self) -> RestPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def summary(self, raw: bool = False) -> dict:
        """Samples, median and max in ms; ``raw``: every latency too (ms, in order), and
        ``raw_at``: when each was sent, seconds after the poller was made (``started_at``,
        by the wall clock)."""
        ms = [x * 1e3 for x in self.latencies]
        out = {"samples": len(ms),
               "median": round(statistics.median(ms), 1) if ms else None,
               "max": round(max(ms), 1) if ms else None}
        if raw:
            out["raw"] = [round(x, 1) for x in ms]
            out["raw_at"] = [round(t - self._started, 3) for t in self.sent]
            out["started_at"] = round(self.started_at, 3)
        return out


def start_and_restart(tmp: str, fabric, name: str, dead_after: float = 60.0, then=None,
                      raw: bool = False, after_first=None, on_start=None,
                      lldp_interval: float = 0.0, controller_args: tuple[str, ...] = ()) -> dict:
    """``fabric`` (any ``build_bridges`` fabric) as bridges; the controller's first start on
    the empty switches and a restart from its state file, each timed from the controller's
    start until every switch is reconciled, with the OpenFlow messages each sent and REST
    latency (``RestPoller``) during the restart. The restart comes once every switch was
    connected ``OVS_MAX_BACKOFF_S`` (``connected_before_restart_s``). ``on_start(which)``:
    called just before each start ("first", "restart"); ``after_first(ctl, out)``: more
    readings once the first start is ready; ``then(ctl, out)``: more measurements on the
    restarted controller before the teardown (controller stopped, bridges removed, also on
    an exception or Ctrl-C). ``raw``: every REST latency sample too. ``controller_args``:
    more options for both controllers."""
    path = os.path.join(tmp, f"{name}.json")
    with open(path, "w") as fh:
        json.dump(fabric.to_dict(), fh)
    state = os.path.join(tmp, f"{name}.db")
    for stale in (state, state + "-wal", state + "-shm", state + "-journal"):
        if os.path.exists(stale):
            os.remove(stale)
    ctl = None
    try:
        t0 = time.monotonic()
        build_bridges(fabric)
        out = {"bridges": len(fabric.switches()), "build_s": round(time.monotonic() - t0, 1)}
        point(fabric, fabric.switches(), 6653)  # the port _controller uses
        if on_start is not None:
            on_start("first")
        t0 = time.monotonic()  # both starts timed from the controller's own start
        ctl = _controller(tmp, path, f"{name}-first.log", state, dead_after, lldp_interval,
                          controller_args)
        out["first_start_connected"] = _wait_ready(ctl, 600, t0)
        out["first_start_ready_s"] = round(time.monotonic() - t0, 2)
        out["first_start_messages"] = _metric(ctl, "mlroute_openflow_messages_total")
        out["entries"] = sum(s["rules"] or 0 for s in
                             ctl.rest("GET", "/v1/fabric")[1]["seen"].values())
        if after_first is not None:
            after_first(ctl, out)
        backoff_takes(fabric)  # the switches retry the restarted controller every second
        out["connected_before_restart_s"] = settle_connections(
            t0 + out["first_start_connected"].get("all_connected_s", out["first_start_ready_s"]))
        ctl.stop()
        if on_start is not None:
            on_start("restart")
        t0 = time.monotonic()
        ctl = _controller(tmp, path, f"{name}-restart.log", state, dead_after, lldp_interval,
                          controller_args)
        with RestPoller(ctl) as poller:
            out["restart_connected"] = _wait_ready(ctl, 600, t0)
        out["restart_ready_s"] = round(time.monotonic() - t0, 2)
        out["restart_messages"] = _metric(ctl, "mlroute_openflow_messages_total")
        out["rest_latency_ms_during_reconcile"] = poller.summary(raw)
        out["ratio_restart_to_first_start"] = round(out["restart_ready_s"] /
                                                    out["first_start_ready_s"], 3)
        if then is not None:
            then(ctl, out)
        return out
    finally:
        if ctl is not None:
            ctl.stop()
        remove_bridges(fabric)


def bench_restart(tmp: str, spines: int = 32, leaves: int = 64, hosts: int = 16) -> dict:
    fabric = Clos.generate(spines, leaves, hosts, 100.0, wiring=True)
    return {"shape": [spines, leaves, hosts], **start_and_restart(tmp, fabric, "paper")}


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
