"""Hosts known by address: the controller answers a host's ARP request itself when it knows
the address (a host of the fabric in use, in the address's own plane, else one that discovery
heard), and looks for an unknown one with ARP probes out of the host ports, at most one round
per second per address (a silent host is asked again, not flooded). A job that names hosts by
address waits for them without the service lock, since the answers arrive as packet-ins that
need it. The address helpers themselves are pure (``addresses.py``).
"""
from __future__ import annotations

from collections.abc import Callable

from controller.discovery.finder import FabricFinder
from controller.errors import InputError
from controller.service.addresses import addresses, arp_mac, owners, renamed

PROBE_GAP = 1.0  # seconds between two probe rounds for one address
PROBED_KEPT = 4096  # addresses remembered; beyond, those probed over 10 s ago are forgotten


class Resolver:
    def __init__(self, finder: FabricFinder, packet_out: Callable[[int, int, bytes], None]):
        """``packet_out(dpid, port, frame)``: the service's (a standby sends nothing)."""
        self.finder = finder
        self.packet_out = packet_out
        self._probed: dict[str, float] = {}  # address -> time of its last probe round

    def answers(self, fabric, asks: list[tuple[int | None, str]], now: float) -> dict:
        """(switch, address) -> the MAC that answers it, None for now when unknown (probed
        unless a fabric is declared: its hosts are all there is). Under the service lock."""
        known, out = owners(fabric), {}
        for dpid, ip in asks:
            mac = arp_mac(fabric, known, dpid, ip) if ip in known else self.finder.mac_of(ip)
            if mac is None and ip not in known and self.finder.declared is None:
                self.probe(ip, now)
            out[(dpid, ip)] = mac
        return out

    def probe(self, ip: str, now: float) -> None:
        """A round of ARP probes for ``ip``, unless it had one in the last ``PROBE_GAP``."""
        if now - self._probed.get(ip, -1e9) < PROBE_GAP:
            return
        self._probed[ip] = now
        if len(self._probed) > PROBED_KEPT:
            self._probed = {k: v for k, v in self._probed.items() if now - v < 10}
        for dpid, port, frame in self.finder.arp_probes(ip):
            self.packet_out(dpid, port, frame)

    def resolve(self, doc, lock, fabric: Callable, clock: Callable[[], float],
                sleep: Callable[[float], None], timeout: float,
                settle: Callable[..., object]):
        """``doc`` with every host address replaced by its host's name. An address no host of
        ``fabric()`` has is probed for at most ``timeout`` seconds (``settle(now, force=)``:
        discovery adopts what answered), then it is an ``InputError`` naming it; ``lock``
        (the service's) is held for each look, never while sleeping."""
        wanted = addresses(doc)
        if not wanted:
            return doc
        deadline = clock() + timeout
        while True:
            with lock:
                names = {ip: h for ip, (h, _, _) in owners(fabric()).items()}
                missing = sorted(wanted - set(names))
                if not missing:
                    return renamed(doc, names)
                if self.finder.declared is not None or clock() >= deadline:
                    raise InputError(
                        f"no host has address {missing[0]}" + (
                            " in the declared fabric" if self.finder.declared is not None else
                            f" (ARP probes for {timeout:g} s got no answer)"))
                for ip in missing:
                    if self.finder.mac_of(ip) is None:
                        self.probe(ip, clock())
                settle(clock(), force=all(self.finder.mac_of(ip) for ip in missing))
            sleep(0.1)
