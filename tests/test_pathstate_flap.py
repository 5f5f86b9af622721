"""A link that went down and came back on the hosts' probes leaves no disagreement behind
(issue 75, point 6): without OpenFlow the probes are what sees a link, so a link they bring
back is seen again, and ``/v1/ready`` and ``/v1/fabric`` stop naming it ``missing_link``."""
from __future__ import annotations

import json

from controller.model.clos import Clos
from controller.model.clos_wiring import wire
from controller.service import api
from controller.service.pathstate import reported
from controller.service.route_service import RouteService
from controller.shell.static import StaticSwitches
from tests.test_pathstate import both, down_links, report_of


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def started(fabric, clock):
    """A service as ``mlroute-controller --mlroute-southbound none`` starts one: every switch
    connected, every declared cable taken as seen (``shell/core.py``)."""
    switches = StaticSwitches(fabric)
    svc = RouteService(switches, fabric, mode="srv6", algorithm="greedy", clock=clock)
    svc.note_switches(switches.connected_now())
    svc.sync_queued()
    with svc.lock:
        for link in switches.links():
            svc.finder.topology.link_seen(*link, svc.clock())
    return svc


def settled(svc, clock):
    clock.now += 5.0  # past discovery's quiet period
    svc.tick(probe=False, sync=False)
    return api.handle(svc, "GET", "/v1/ready")[1], api.handle(svc, "GET", "/v1/fabric")[1]


def missing(doc) -> bool:
    """Whether a view names a ``missing_link`` (``/v1/ready``'s ``disagrees``, ``/v1/fabric``'s
    ``discovery.wiring_problems``)."""
    return "missing_link" in json.dumps(doc)


def test_a_link_the_probes_took_down_and_brought_back_is_no_disagreement():
    c = Clos.leaf_spine(2, 3, 1)
    clock = Clock()
    svc = started(c.wire(wire(c)), clock)
    ready, fabric = settled(svc, clock)
    assert not missing(ready) and not missing(fabric), (ready, fabric)
    broken = both("s0", "l1")
    for t, host in enumerate(["h0_0", "h2_0"]):  # two hosts: the quorum
        reported(svc, host, report_of(svc, host, ["l1"], broken), float(t))
    assert down_links(svc) == {("l1", "s0")}
    ready, fabric = settled(svc, clock)
    assert missing(ready) and missing(fabric), ready  # while down: as a failed port's link
    answer = reported(svc, "h0_0", report_of(svc, "h0_0", ["l1"]), 3.0)  # it answers again
    assert answer["links_down"] == [] and not svc.state.fabric.down
    ready, fabric = settled(svc, clock)
    assert not missing(ready) and not missing(fabric), (ready, fabric)
    assert ready.get("disagrees") is None, ready
