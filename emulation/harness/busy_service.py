"""A busy controller on fake switches: the service whose Prometheus exposition the metrics
reference (``docs/gen_reference.py``, docs/reference/metrics.md) lists and the Grafana
dashboard (``dashboards/grafana-mlroute.json``, tests/test_grafana.py) is checked against, so
that every family and label the controller can expose is there: a job, measured traffic, a
traffic sample, failed links, an unroutable leaf pair and a miswired cable.

No root, no switch: the tables are ``fake_switch.FakeSwitches`` and time moves only when told.
"""
from __future__ import annotations

import json
from types import SimpleNamespace

from controller.discovery import lldp
from controller.model.clos import Clos
from controller.service import api
from controller.service.route_service import RouteService
from emulation.harness.fake_switch import FakeSwitches


class ManualClock:
    """Time that moves only when told: ``clock()`` reads it, ``clock.sleep(s)`` advances it."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def busy_service() -> RouteService:
    """A declared 2 x 4 x 2 fabric on fake switches with l2's two uplink cables swapped (a
    wiring problem discovery reports), a ring job (posted before the check), one second of
    measured traffic on every port, a sample between two of the job's members, then two
    failed links that leave l0 and l1 without a common spine."""
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    clock = ManualClock()
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, f, clock=clock, sleep=clock.sleep)
    for name, dpid in f.dpids.items():
        svc.switch_connected(dpid, {p: True for p in f.ports[name].values()})
    p0, p1 = f.port("l2", "s0"), f.port("l2", "s1")
    swapped = {("l2", p0): ("s1", f.port("s1", "l2")), ("l2", p1): ("s0", f.port("s0", "l2")),
               ("s0", f.port("s0", "l2")): ("l2", p1), ("s1", f.port("s1", "l2")): ("l2", p0)}
    for _ in range(2):  # LLDP out of every port, each frame delivered where the cable goes
        svc.tick()
        for dpid, port, frame in sw.packets_out:
            name = f.switch_of_dpid[dpid]
            peer, peer_port = swapped.get((name, port), (f.peer(name, port), None))
            if peer is None or peer in f.hosts:
                continue
            svc.packet_in(f.dpids[peer], peer_port or f.port(peer, name), frame)
        sw.packets_out.clear()
    # posted before discovery checks the wiring: a job crossing l2's swapped cables is
    # refused once the check has seen them (409, ``service/wiring.py``)
    code, doc = api.handle(svc, "POST", "/v1/jobs", json.dumps({
        "id": "a", "collective": "ring_allreduce", "ranks": ["h0_0", "h1_0", "h2_0", "h3_0"],
        "bytes": 8e6}).encode())
    if code != 201:
        raise RuntimeError(f"busy service: the ring job was refused ({code}): {doc}")
    for h, leaf in f.hosts.items():
        svc.packet_in(f.dpids[leaf], f.port(leaf, h),
                      lldp.arp_request(f.host_mac[h], "10.255.0.1", sender_ip=f.host_ip[h]))
    clock.now += 3  # discovery checks the declared fabric once the topology is quiet
    svc.tick(probe=False)
    svc.traffic_samples([SimpleNamespace(src=f.host_ip["h0_0"], dst=f.host_ip["h1_0"],
                                         frame_length=1500, sampling_rate=16)])
    clock.now += 2.5  # its window closed: samples between the job's members
    svc.tick(probe=False)
    for t, sent in ((clock.now, 0), (clock.now + 1, 125_000)):
        for name in f.planes[0].aggs[0] + f.leaves:  # spines, then leaves
            svc.port_stats(f.dpids[name], {p: sent for p in f.ports[name].values()}, now=t)
    svc.port_changed(f.dpids["l0"], f.port("l0", "s0"), False)
    svc.port_changed(f.dpids["l1"], f.port("l1", "s1"), False)
    return svc
