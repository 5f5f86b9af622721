"""Switches lost on a k = 4 fat-tree of real Open vSwitch bridges (no Mininet), through the
scale benchmark's own failure phases (``benchmarks/scale.py``, bench/scale.json at k = 16):

* a switch that loses only its controller keeps forwarding, so it counts as failed when its
  grace time (``--mlroute-dead-after``) ends: at that moment, not at the next periodic round
  (``RouteService.next_deadline``, the shell's tick loop);
* a switch lost with its links (as one that powers off) is routed around as soon as its
  neighbours report the links down, before any grace time ends;
* both are used again once back, and the fabric is ready again.

The benchmark runs both at k = 4, 8 and 16; this case runs in ``make test-live``."""
import json
import time

import pytest

from benchmarks import scale
from benchmarks.reconcile import _controller, _wait_ready, build_bridges, point, remove_bridges
from emulation.harness import fabricnet
from tests.integration import EXTENDED, require_root_and_ovs
from topologies.clos import fattree_fabric

pytestmark = [pytest.mark.integration, EXTENDED, pytest.mark.timeout(300)]
DEAD_AFTER = 1.5  # seconds; shorter than a tick's second would hide nothing, longer costs time


def test_a_lost_switch_fails_at_its_deadline_and_one_lost_with_its_links_at_once(tmp_path):
    require_root_and_ovs()
    fabricnet.ensure_ovs()
    fabric = fattree_fabric(4)
    path = tmp_path / "fattree4.json"
    path.write_text(json.dumps(fabric.to_dict()))
    ctl = None
    try:
        build_bridges(fabric)
        point(fabric, fabric.switches(), scale.OF_PORT)
        ctl = _controller(str(tmp_path), str(path), "controller.log", str(tmp_path / "state.db"),
                          DEAD_AFTER)
        _wait_ready(ctl, 120)
        ring = scale.post(ctl, scale.ring_job(fabric, 16))
        assert ring["flows"] == 16, ring

        t0 = time.time()
        lost = scale.switch_failure(ctl, fabric)
        assert lost["routes_through_it"] > 0, lost
        failed = [e for e in lost["events"] if "longer than" in e["cause"]]
        assert failed, lost["events"]
        # the controller's own stamp: the grace time ended, then at once (a periodic round
        # would add up to a second)
        late = failed[-1]["time"] - t0
        assert DEAD_AFTER <= late < DEAD_AFTER + 0.6, (late, failed[-1])
        assert lost["replanned_s"] < DEAD_AFTER + 1.0, lost
        assert lost["restored"]["ready_s"] < 60, lost["restored"]

        scale.quiesce(ctl, wait=scale.HOLD_DOWN + 1)
        gone = scale.switch_loss(ctl, fabric)
        assert gone["routes_through_it"] > 0, gone
        assert gone["replanned_s"] < DEAD_AFTER, gone  # its links, not its grace time
        assert not [e for e in gone["events"] if "longer than" in e["cause"]
                    and e["time"] >= t0 + lost["replanned_s"] + lost["restored"]["ready_s"]]
        assert any(e.get("links_down") for e in gone["events"]), gone["events"]
        assert gone["restored"]["ready_s"] < 60, gone["restored"]
        view = ctl.rest("GET", "/v1/fabric")[1]
        assert view["ready"] and not view["links_down"] and not view["missing_switches"], view
    finally:
        if ctl is not None:
            ctl.stop()
        remove_bridges(fabric)
