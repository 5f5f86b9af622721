"""Measured state of the fabric from switch statistics: bytes and rate per directed leaf-spine
link (port counters), bytes per planned flow rule, and path imbalance measured, not predicted.

Samples arrive with the time they were taken (``now`` is passed in); rates are over the last
two samples of a port. Imbalance (in the spirit of FlowTracer, see ``controller/model/loads.py``): per
leaf, (max - mean) / mean of the bytes its alive uplinks (downlinks) carried, over the last
polling window and since the controller started.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from controller.model.clos import Clos


@dataclass
class _Port:
    first_tx: int
    tx: int
    time: float
    prev_tx: int | None = None
    prev_time: float | None = None


@dataclass
class Telemetry:
    ports: dict = field(default_factory=dict)  # (switch, port) -> _Port
    rules: dict = field(default_factory=dict)  # rule key -> (bytes, packets, time)
    samples: int = 0

    def port_stats(self, fabric: Clos, dpid: int, counters: dict[int, int], now: float) -> None:
        """tx byte counters per port of one switch."""
        sw = fabric.switch_of_dpid.get(dpid)
        if sw is None:
            return
        for port, tx in counters.items():
            old = self.ports.get((sw, port))
            if old is None or tx < old.tx:  # first sample, or the switch was reset
                self.ports[(sw, port)] = _Port(tx, tx, now)
            else:
                self.ports[(sw, port)] = _Port(old.first_tx, tx, now, old.tx, old.time)
        self.samples += 1

    def flow_stats(self, entries: list[tuple[tuple, int, int]], now: float) -> None:
        """(rule key, bytes, packets) of the rules a switch reported."""
        for key, nbytes, npackets in entries:
            self.rules[key] = (nbytes, npackets, now)

    def link(self, fabric: Clos, src: str, dst: str, member: int | None = None) -> dict:
        """Measured counters of the directed link src -> dst (the tx side of src's port);
        of a bundle: of ``member``, or the sum over its members (None)."""
        ports = fabric.ports_to(src, dst)
        if member is None and len(ports) > 1:
            each = [self.link(fabric, src, dst, m) for m in range(len(ports))]
            if any(e["bytes"] is None for e in each):
                return {"bytes": None, "bps": None}
            add = lambda k: None if any(e.get(k) is None for e in each) else sum(e[k] for e in each)
            return {"bytes": add("bytes"), "window_bytes": add("window_bytes"), "bps": add("bps")}
        p = self.ports.get((src, ports[member or 0]))
        if p is None:
            return {"bytes": None, "bps": None}
        bps = None
        if p.prev_time is not None and p.time > p.prev_time:
            bps = (p.tx - p.prev_tx) * 8 / (p.time - p.prev_time)
        return {"bytes": p.tx - p.first_tx, "window_bytes": (p.tx - p.prev_tx)
                if p.prev_tx is not None else None, "bps": bps}
