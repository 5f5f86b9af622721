"""Zero configuration before any host speaks (issue 38): the controller with no fabric file in
front of an emulated fat-tree whose hosts stay silent. ``watch`` polls the fabric view from the
moment the switches connected and records every shape the controller held, so that a test or
the benchmark can say when three tiers were read and whether a wrong shape was ever adopted;
``pingall_loss`` is Mininet's pingall, the first traffic the hosts send."""
from __future__ import annotations

import contextlib
import os
import time

from emulation.harness import fabricnet
from emulation.harness.controller_proc import ControllerProcess


@contextlib.contextmanager
def without_a_file(tmp: str, truth, bw: float):
    """ryu-manager with no fabric file in front of the emulated ``truth`` (a wired Clos), its
    switches connected and shaped to ``bw`` Mbit/s: (controller, Mininet), both stopped on the
    way out, also on Ctrl-C. ``net.started_at`` is the monotonic time just before
    ``net.start()``, ``net.connected_at`` when Mininet saw every switch connected."""
    fabricnet.ensure_ovs()
    fabricnet.cleanup()
    os.makedirs(tmp, exist_ok=True)
    ctl = net = None
    try:
        ctl = ControllerProcess(None, os.path.join(tmp, "controller.log"),
                                extra_args=["--mlroute-link-gbps", str(bw / 1000),
                                            "--mlroute-stats-interval", "0"]).launch()
        net = fabricnet.build(0, 0, 0, bw, ctl.of_port, clos=truth)  # while it starts
        ctl.wait_answering()
        net.started_at = time.monotonic()
        fabricnet.start(net, timeout=60)
        net.connected_at = time.monotonic()
        yield ctl, net
    finally:
        try:
            if net is not None:
                fabricnet.stop(net)
        finally:
            if ctl is not None:
                ctl.stop()


def shape_of(view: dict) -> str | None:
    """The shape a fabric view holds, in a few words, or None before one is adopted:
    ``"3 tiers: 4 pods, 4 cores"``, ``"2 tiers: 8 spines, 12 leaves"``."""
    doc = view.get("declared") if view.get("ready") else None
    if not doc:
        return None
    if "pods" in doc:
        return f"3 tiers: {len(doc['pods'])} pods, {sum(map(len, doc['cores']))} cores"
    if "spines" in doc:
        return f"2 tiers: {len(doc['spines'])} spines, {len(doc['leaves'])} leaves"
    return f"{len(doc.get('planes', []))} planes"


def expected_shape(truth) -> str:
    """``shape_of`` the view of ``truth`` (a wired Clos) read correctly."""
    return shape_of({"ready": True, "declared": truth.to_dict()})


def watch(ctl, truth, seconds: float, interval: float = 0.1, since: float | None = None) -> dict:
    """Poll ``ctl``'s fabric view for ``seconds`` from now (the switches just connected):
    every shape held, in order, with the second it was first seen; the second the right shape
    was first held with no link down (None if never); the fabric events of that time. Seconds
    count from ``since`` (a monotonic time, e.g. just before ``net.start()``), else from now."""
    start, want = time.monotonic() if since is None else since, expected_shape(truth)
    shapes: list[tuple[float, str | None]] = []
    right_at = None
    view: dict = {}
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        view = ctl.rest("GET", "/v1/fabric", timeout=15)[1]
        now, shape = round(time.monotonic() - start, 2), shape_of(view)
        if not shapes or shapes[-1][1] != shape:
            shapes.append((now, shape))
        if right_at is None and shape == want and not view["declared"].get("down"):
            right_at = now
        time.sleep(interval)
    events = [e["cause"] for e in view.get("events", [])
              if str(e.get("cause", "")).startswith("fabric")]
    wrong = [s for _t, s in shapes if s is not None and s != want]
    return {"expected": want, "shapes": shapes, "right_after_s": right_at, "wrong": wrong,
            "events": events}


def pingall_loss(net, timeout: str = "1") -> float:
    """Percentage of pings lost by Mininet's pingall (every host to every other, once)."""
    return float(net.pingAll(timeout=timeout))
