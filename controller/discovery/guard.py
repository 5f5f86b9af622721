"""Topology guard: which LLDP probes and host addresses discovery may believe.

The two attacks of TopoGuard (Hong et al., NDSS 2015) on OpenFlow discovery, and its checks:

* **Link fabrication.** A host that sends LLDP claiming to be a switch port makes the
  controller see a link that is not there. Here every probe is signed with this controller's
  secret (``lldp.lldp_frame(sign=...)``, as ONOS signs its probes) and accepted only when the
  signature is right, its send time is fresh (``FRESH_S``), it was not received before (a probe
  crosses one cable once), it did not come back into the port it left, and the port it came in
  on has carried no host traffic since it came up. Probes are not sent out of such host ports.
  Silent hosts that relay real probes between their ports make a link between two leaves,
  which no Clos has: once the rest of the fabric reads consistently, both ports are host ports
  too (``relayed``, called by the finder).
* **Host location hijacking.** A host that sends ARP with another host's address takes it
  over. Here an address with an owner moves to another MAC or port only when the owner's
  location is gone: its port went down or its switch left, or it did not answer an ARP probe
  sent out of its port within ``VERIFY_S``. Until then, and for good if it answers, the owner
  keeps the address and the claim is an ``address_conflict``.

Whatever is refused is an alarm event naming the switch and port it came in on (at most one
per ``ALARM_EVERY_S`` per kind, switch, port and address; every frame is counted), never a
topology change. Pure: time is passed in; frames to send are queued for the caller.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from controller.discovery import lldp

FRESH_S = 5.0  # a probe's send time may be this old (the link timeout is 3.5 s)
FUTURE_S = 0.5  # clock steps between sending and receiving
VERIFY_S = 1.0  # an owner answers an ARP probe within this, or its address may move
TRUSTED_S = 10.0  # after the owner answered, further claims are conflicts without a new probe
ALARM_EVERY_S = 10.0
RECENT = 50  # alarm events kept for the views
PROBE_MAC = "02:6d:6c:72:74:00"  # locally administered: the controller's probes
KINDS = ("lldp_unsigned", "lldp_forged", "lldp_replayed", "lldp_on_host_port",
         "address_conflict", "host_moved")
Where = tuple  # (dpid, port)


@dataclass
class Claim:
    """An address claimed by a host other than its owner, being verified."""
    ip: str
    owner_mac: str
    owner_at: Where
    mac: str
    at: Where
    since: float
    deadline: float
    frames: int = 1


class Guard:
    def __init__(self, secret: bytes | None = None,
                 name: Callable[[int], str] | None = None):
        self.secret = secret if secret is not None else os.urandom(32)
        self.name = name or (lambda d: f"{d:#x}")
        self.host_ports: set[Where] = set()  # ports with host traffic since they came up
        self.claims: dict[str, Claim] = {}  # by address
        self.trusted: dict[str, tuple[str, Where, float]] = {}  # address -> owner that answered
        self.counts: dict[str, int] = {k: 0 for k in KINDS}
        self.recent: list[dict] = []
        self.frames: list[tuple[int, int, bytes]] = []  # ARP probes to the owners' ports
        self._events: list[dict] = []
        self._accepted: dict[tuple, float] = {}  # (dpid, port, time, nonce) of probes taken
        self._last: dict[tuple, list] = {}  # alarm key -> [time of its event, frames since]
        self._nonce = 0

    # ---- probes -----------------------------------------------------------------------
    def probe(self, dpid: int, port: int, now: float) -> bytes:
        """A signed LLDP probe out of (dpid, port)."""
        self._nonce = self._nonce % 0xFFFFFFFF + 1
        return lldp.lldp_frame(dpid, port, sign=(self.secret, now, self._nonce))

    def echo(self, dpid: int, port: int, now: float) -> tuple[bytes, int]:
        """A signed echo out of (dpid, port), which the next switch sends back
        (``liveness``), and its nonce."""
        self._nonce = self._nonce % 0xFFFFFFFF + 1
        return lldp.lldp_frame(dpid, port, sign=(self.secret, now, self._nonce),
                               dst=lldp.ECHO_MAC), self._nonce

    def check_probe(self, probe: dict, dpid: int, port: int, now: float) -> bool:
        """True when the probe (``lldp.parse_probe``) that came in on (dpid, port) may show a
        link; else an alarm is raised and False returned."""
        key = (probe["dpid"], probe["port"], probe["time"], probe["nonce"])
        if probe["sig"] is None:
            kind, why = "lldp_unsigned", "carries no signature of this controller"
        elif not lldp.probe_signature_ok(probe, self.secret):
            kind, why = "lldp_forged", "has a wrong signature"
        elif not now - FRESH_S <= probe["time"] <= now + FUTURE_S:
            kind, why = "lldp_replayed", f"was sent {now - probe['time']:.1f} s ago"
        elif key in self._accepted:
            kind, why = "lldp_replayed", "was received before"
        elif (probe["dpid"], probe["port"]) == (dpid, port) and \
                probe.get("dst") != lldp.ECHO_BACK_MAC:  # an echo comes back, nothing else
            kind, why = "lldp_replayed", "came back into the port it was sent from"
        elif (dpid, port) in self.host_ports:
            kind, why = "lldp_on_host_port", "came in on a port that carries host traffic"
        else:
            self._accepted[key] = probe["time"]
            if len(self._accepted) > 4 * 4096:
                self._accepted = {k: t for k, t in self._accepted.items() if t >= now - FRESH_S}
            return True
        claim = f"{self.name(probe['dpid'])} port {probe['port']}"  # names: refusals only
        where = f"{self.name(dpid)} port {port}"
        self._alarm(kind, now, dpid, port, None,
                    f"LLDP probe on {where} claiming {claim} {why}: not a link", claimed=claim)
        return False

    def forget_old(self, now: float) -> None:
        """Drop what can no longer matter (called once per probe round)."""
        self._accepted = {k: t for k, t in self._accepted.items() if t >= now - FRESH_S}
        self.trusted = {ip: v for ip, v in self.trusted.items() if now - v[2] < TRUSTED_S}
        self._last = {k: v for k, v in self._last.items() if now - v[0] < 6 * ALARM_EVERY_S}

    # ---- ports ------------------------------------------------------------------------
    def port_reset(self, dpid: int, port: int) -> None:
        """A port went down: what was learned about it is forgotten (TopoGuard's port type)."""
        self.host_ports.discard((dpid, port))

    def switch_reset(self, dpid: int) -> None:
        self.host_ports = {x for x in self.host_ports if x[0] != dpid}

    def relayed(self, a: Where, b: Where, now: float, names=None) -> None:
        """Signed probes crossed between ports ``a`` and ``b`` of two leaves (or of one): no
        Clos cables them, silent hosts relaying probes do. Both become host ports (not probed,
        their probes refused, their hosts heard) until they go down; an alarm names them
        (``names``: dpid -> name of a reading not in use yet)."""
        self.host_ports.update((a, b))
        name = lambda d: (names or {}).get(d) or self.name(d)
        where = lambda x: f"{name(x[0])} port {x[1]}"
        self._alarm("lldp_on_host_port", now, a[0], a[1], None,
                    f"LLDP probes crossed between {where(a)} and {where(b)}, two leaf ports: "
                    "hosts relaying probes, or a cable no Clos has; both taken for host ports, "
                    "not a link", claimed=where(b), switch=name(a[0]))

    # ---- addresses --------------------------------------------------------------------
    def host_frame(self, owner: tuple[str, Where] | None, mac: str, at: Where, ip: str,
                   now: float, alive: Callable[[Where], bool], declared: bool = False) -> str:
        """A host packet (``mac``, ``ip``) came in on ``at``; ``owner`` is (MAC, where) of the
        address's owner (None: nobody). Returns ``"accept"`` (record it), ``"move"`` (the
        owner's location is gone: record it in the owner's place) or ``"refuse"`` (the owner
        keeps the address). With a declared fabric the declaration owns every address: a
        different claim is reported and recorded (only the wiring check reads it)."""
        self.host_ports.add(at)
        if owner is None or owner == (mac, at):
            claim = self.claims.get(ip)
            if claim is not None and owner is not None and (mac, at) == (claim.owner_mac,
                                                                       claim.owner_at):
                del self.claims[ip]  # the owner answered: the claim was false
                self.trusted[ip] = (mac, at, now)
                self._conflict(claim, now, "it answered an ARP probe "
                               f"{now - claim.since:.2f} s after the claim", claim.frames)
            return "accept"
        old_mac, old_at = owner
        if declared:
            self._conflict(Claim(ip, old_mac, old_at, mac, at, now, now), now,
                           "the declared fabric gives it the address", 1)
            return "accept"
        if not alive(old_at):
            self._moved(ip, old_mac, old_at, mac, at, now, "its port is down or its switch "
                        "left")
            return "move"
        trusted = self.trusted.get(ip)
        if trusted is not None and trusted[:2] == owner and now - trusted[2] < TRUSTED_S:
            self._conflict(Claim(ip, old_mac, old_at, mac, at, now, now), now,
                           f"it answered an ARP probe {now - trusted[2]:.1f} s ago", 1)
            return "refuse"
        claim = self.claims.get(ip)
        if claim is not None and (claim.owner_mac, claim.owner_at) == owner:
            claim.frames += 1
            claim.mac, claim.at = mac, at
            return "refuse"
        self.claims[ip] = Claim(ip, old_mac, old_at, mac, at, now, now + VERIFY_S)
        self.frames.append((old_at[0], old_at[1], lldp.arp_request(PROBE_MAC, ip)))
        return "refuse"

    def due(self, now: float, alive: Callable[[Where], bool]) -> list[Claim]:
        """Claims whose owner did not answer in time or whose location is gone: the address
        moves to the claimant (the caller records it); host_moved events are raised."""
        out = []
        for ip, c in sorted(self.claims.items()):
            if now >= c.deadline or not alive(c.owner_at):
                why = (f"it did not answer an ARP probe within {VERIFY_S:g} s"
                       if alive(c.owner_at) else "its port is down or its switch left")
                self._moved(ip, c.owner_mac, c.owner_at, c.mac, c.at, now, why)
                out.append(c)
        for c in out:
            del self.claims[c.ip]
        return out

    def _conflict(self, c: Claim, now: float, why: str, frames: int) -> None:
        self._alarm("address_conflict", now, c.at[0], c.at[1], c.ip,
                    f"{c.mac} on {self.name(c.at[0])} port {c.at[1]} claims {c.ip}, which "
                    f"belongs to {c.owner_mac} on {self.name(c.owner_at[0])} port "
                    f"{c.owner_at[1]}: {why}; the owner keeps it", frames=frames,
                    mac=c.mac, owner_mac=c.owner_mac,
                    owner=f"{self.name(c.owner_at[0])} port {c.owner_at[1]}")

    def _moved(self, ip, old_mac, old_at, mac, at, now, why) -> None:
        self._alarm("host_moved", now, at[0], at[1], ip,
                    f"{ip} moved from {old_mac} on {self.name(old_at[0])} port {old_at[1]} to "
                    f"{mac} on {self.name(at[0])} port {at[1]}: {why}", mac=mac,
                    owner_mac=old_mac, owner=f"{self.name(old_at[0])} port {old_at[1]}")

    # ---- events -----------------------------------------------------------------------
    def _alarm(self, kind: str, now: float, dpid: int | None, port: int | None,
               address: str | None, message: str, frames: int = 1, **more) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + frames
        key = (kind, dpid, port, address)
        last = self._last.get(key)
        if last is not None and now - last[0] < ALARM_EVERY_S:
            last[1] += frames
            return
        frames += last[1] if last is not None else 0
        self._last[key] = [now, 0]
        event = {"time": now, "kind": kind, "category": "security",
                 "switch": None if dpid is None else self.name(dpid), "dpid": dpid,
                 "port": port, "address": address, "message": message, "cause": message,
                 "frames": frames, **more}
        self._events.append(event)
        self.recent.append(event)
        del self.recent[:-RECENT]
        del self._events[:-4 * RECENT]

    def take_events(self) -> list[dict]:
        out, self._events = self._events, []
        return out

    def take_frames(self) -> list[tuple[int, int, bytes]]:
        out, self.frames = self.frames, []
        return out

    def view(self) -> dict:
        return {"counts": dict(self.counts), "recent": list(self.recent[-10:]),
                "host_ports": len(self.host_ports),
                "verifying": [{"address": c.ip, "claimed_by": c.mac,
                               "switch": self.name(c.at[0]), "port": c.at[1],
                               "owner_mac": c.owner_mac, "until": c.deadline}
                              for c in self.claims.values()]}
