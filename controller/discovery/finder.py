"""The controller's side of discovery: feeds ``discovery.Topology`` from switch events and
packet-ins, says which probes to send, and when the topology has been quiet long enough,
what fabric it shows (zero configuration) or how it differs from the declared one.

Pure: time is passed in, probes are returned as (dpid, port, frame) for the shell to send.
"""
from __future__ import annotations

from controller.discovery import lldp
from controller.discovery.topology import (Topology, check_declared, format_problem, probe_ports,
                                           recognise)
from controller.model.fabric import Fabric

PROBE_MAC = "02:6d:6c:72:74:00"  # locally administered: the controller's probes
QUIET_S = 2.0  # recognise once the topology did not change for this long


class FabricFinder:
    def __init__(self, declared: Fabric | None = None, link_gbps: float | None = None):
        self.topology = Topology()
        self.declared = declared  # a declared fabric is checked, not replaced
        self.link_gbps = link_gbps
        self.recognised: Fabric | None = None
        self.problems: list[dict] = []
        self._checked = -1  # topology version of the last recognition

    # ---- events ---------------------------------------------------------------------------
    def switch_up(self, dpid: int, ports: dict, now: float) -> None:
        self.topology.switch_up(dpid, ports, now)

    def switch_down(self, dpid: int, now: float) -> None:
        self.topology.switch_down(dpid, now)

    def port_changed(self, dpid: int, port: int, up: bool, now: float) -> None:
        self.topology.port_changed(dpid, port, up, now)

    def packet_in(self, dpid: int, port: int, frame: bytes, now: float) -> str | None:
        """An LLDP probe or a host packet; returns 'lldp', 'host' or None."""
        seen = lldp.parse_lldp(frame)
        if seen is not None:
            self.topology.link_seen(seen[0], seen[1], dpid, port, now)
            return "lldp"
        host = lldp.parse_host(frame)
        if host is not None and host[0] != PROBE_MAC:
            self.topology.host_seen(dpid, port, host[0], host[1], now)
            return "host"
        return None

    # ---- probes ---------------------------------------------------------------------------
    def lldp_probes(self, now: float) -> list[tuple[int, int, bytes]]:
        """One LLDP frame out of every up port of every switch (each second); links not seen
        again within the topology's timeout expire."""
        self.topology.expire(now)
        return [(d, p, lldp.lldp_frame(d, p)) for d, ports in sorted(self.topology.switches.items())
                for p, up in sorted(ports.items()) if up]

    def arp_probes(self, ip: str) -> list[tuple[int, int, bytes]]:
        """ARP requests for ``ip`` out of every host-facing leaf port."""
        frame = lldp.arp_request(PROBE_MAC, ip)
        return [(d, p, frame) for d, p in probe_ports(self.topology, self.recognised)]

    def mac_of(self, ip: str) -> str | None:
        got = self.topology.host_by_ip(ip)
        return got[0] if got else None

    # ---- recognition ----------------------------------------------------------------------
    def settle(self, now: float, force: bool = False) -> Fabric | None:
        """After a quiet period (or when forced): the fabric the topology shows if it changed
        (zero configuration), else None. With a declared fabric, only the problems (wiring
        checked against the declaration) are updated and None is returned."""
        t = self.topology
        if t.version == self._checked or (not force and now - t.changed_at < QUIET_S):
            return None
        self._checked = t.version
        if self.declared is not None:
            self.problems = check_declared(self.declared, t)
            return None
        fabric, self.problems = recognise(t, self.recognised, self.link_gbps)
        if fabric is None or (self.recognised is not None and
                              fabric.to_dict() == self.recognised.to_dict()):
            return None
        self.recognised = fabric
        return fabric

    def view(self) -> dict:
        return {"mode": "checking the declared fabric" if self.declared is not None
                else "discovering", "problems": self.problems,
                "problem_lines": [format_problem(p) for p in self.problems],
                "observed": self.topology.to_dict()}
