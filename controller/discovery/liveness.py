"""Whether each switch of the fabric in use still forwards, from echoes through its data plane.

A switch that vanishes with its ports up (``ovs-vsctl del-br``, a hung or crashed datapath)
leaves its neighbours' links with their carrier: no port goes down, and only its control
connection tells, whose loss alone is no failure (``--mlroute-dead-after``: a switch keeps
forwarding without its controller). LLDP probes cannot tell the two apart either: each needs
the control connection of the switch it crosses (a packet-out there, or a packet-in). An echo
does not: a neighbour sends a signed LLDP frame to ``lldp.ECHO_MAC`` out of its port to the
switch, whose static entry sends it back out of the port it came in on, to
``ECHO_BACK_MAC`` (``enforcement/echo.py``), and the neighbour traps it. It crosses the
switch's forwarding and nothing of its controller.

Every ``interval`` (0.2 s) a round sends about one echo through each switch of the fabric (a
link picked covers both its ends; a switch's picks turn through its links), from the end
that is connected (the neighbour, when both are). An echo is evidence about both ends of its
link: one that comes back proves both forwarded when it was sent, and so does a discovery
probe that crossed a link (``seen``). One not back at the next round, when an echo sent after
it is (the controller reads replies: its own slowness is no switch's), is lost, against both
ends unless an end was proven since. A switch is silent when every echo through it since it
was last proven was lost, in ``ROUNDS`` (2) rounds and on ``LINKS`` (2) of its links: a link
lost alone points at the link (its ends' other echoes come back), and an echo merely late
(queued behind a full link) takes its loss back if it arrives before the verdict. At most
one switch in ``SHARE`` (8), and at most ``AT_ONCE`` (2), is judged silent at once: more (a
daemon restart, the controller's own network, a datapath backlogged by a storm of repairs) is
a common cause, which the grace time covers (found at k = 16: right after a controller
restart, with 320 bridges read and repaired, 11 and then 25 switches' echoes came back more
than two rounds late, and one in 8 let all of them fail: a ring was refused for no alive
path; ``benchmarks.scale``); and a switch the caller spares
(a member of a restart round, away: ``service/restarts.py``) is not newly judged silent,
though its neighbours' echoes through it are lost while its daemon restarts. Only switches
synchronised since they last connected are judged (their tables hold the echo entry; a
switch that connects is judged afresh once it is synchronised again).

Detection: the first round after the failure sends the first echo lost, the next round the
second, the one after judges: within 3 rounds (0.6 s), and an echo late by less than a round
changes nothing. Pure: time is passed in, frames are returned.
"""
from __future__ import annotations

from dataclasses import dataclass

from controller.discovery.lldp import ECHO_INTERVAL

ROUNDS = 2  # rounds in which every echo through a switch was lost
LINKS = 2  # ... on this many of its links at least (all, if it has fewer)
SHARE = 8  # at most one switch in this many judged silent at once
AT_ONCE = 2  # ... and at most this many (a third is a common cause: service/restarts.py's quorum)
FORGET_S = 5.0  # an echo not back by then is forgotten (the guard refuses it as stale anyway)
KEEP = 16  # losses kept per switch (one never proven loses one a round)


@dataclass
class _Echo:
    sent: float
    round: int
    ends: tuple[int, int]  # (sender, far end)
    link: tuple[int, int]  # (sender's port, far end's port)


class Liveness:
    def __init__(self, guard, interval: float = ECHO_INTERVAL):
        self.guard = guard  # signs the echoes and checks their replies (``Guard.echo``)
        self.interval = interval
        self.rounds = 0
        self.sent_at = float("-inf")  # when the last round was sent (``round``'s ``now``)
        self.silent: set[int] = set()  # judged silent now
        self.judged: set[int] = set()  # synchronised since they last connected
        self.held: set[int] = set()  # judged silent, not acted on: more than the limit at once
        self.sent = self.answered = self.lost = 0
        self._pending: dict[tuple, _Echo] = {}  # (sender, port, nonce) -> echo in flight
        self._proven: dict[int, float] = {}  # dpid -> send time of its newest evidence
        self._losses: dict[int, list[_Echo]] = {}  # dpid -> echoes lost since proven
        self._heard = float("-inf")  # send time of the newest echo that came back
        self._fabric = None
        self._links: dict[int, list[tuple[int, int, int]]] = {}  # dpid -> (port, peer, its port)
        self._turn: dict[int, int] = {}  # dpid -> picks so far (which link is next)
        self._order: list[int] = []  # who picks first: most links first (cores, spines)

    # ---- evidence ---------------------------------------------------------------------
    def answered_echo(self, probe: dict) -> bool:
        """A signed echo (``lldp.parse_probe``, checked by the guard) reached the controller:
        back at its sender, or trapped at the far end (its echo entry not installed yet).
        False for one this round did not send or already forgot."""
        echo = self._pending.pop((probe["dpid"], probe["port"], probe["nonce"]), None)
        if echo is None:
            return False
        self.answered += 1
        self._heard = max(self._heard, echo.sent)
        for end in echo.ends:
            self._prove(end, echo.sent)
        return True

    def seen(self, a: int, b: int, sent: float | None) -> None:
        """A discovery probe sent at ``sent`` from switch ``a`` reached the controller
        through switch ``b``: both forwarded then."""
        if sent is not None:
            self._prove(a, sent)
            self._prove(b, sent)

    def _prove(self, dpid: int, sent: float) -> None:
        if sent > self._proven.get(dpid, float("-inf")):
            self._proven[dpid] = sent
            lost = self._losses.get(dpid)
            if lost:
                self._losses[dpid] = [e for e in lost if e.sent > sent]

    def reset(self, dpid: int, now: float) -> None:
        """A switch (re)connected: not judged until it is synchronised again (a sender)."""
        self._proven[dpid] = now
        self._losses.pop(dpid, None)
        for judged in (self.judged, self.silent, self.held):
            judged.discard(dpid)

    # ---- rounds -----------------------------------------------------------------------
    def round(self, fabric, senders: set[int], down: set[tuple[int, int]],
              now: float, spared: set[int] = frozenset()) -> list[tuple[int, int, bytes]]:
        """Judge the echoes of earlier rounds (``silent``, ``held``), then the echoes of this
        one as (dpid, port, frame) to send. ``fabric``: the fabric in use (a wired ``Clos``);
        ``senders``: switches that can send now (connected, synchronised, written by this
        controller), judged from now on; ``down``: (dpid, port) reported down (their links
        are failed already: no echo); ``spared``: not newly judged silent (still silent if
        they were)."""
        self.judged |= senders
        self._judge(now, len(fabric.dpids) if fabric is not None else 0, spared)
        if fabric is None or not fabric.wired:
            return []
        links = self._wiring(fabric)
        self.rounds += 1
        self.sent_at = now
        covered: set[int] = set()
        out = []
        for dpid in self._order:
            if dpid in covered:
                continue
            mine, turn, pick = links[dpid], self._turn.get(dpid, 0), None
            for k in range(len(mine)):  # the next link in turn, to a peer not covered if any
                port, peer, peer_port = mine[(turn + k) % len(mine)]
                if (dpid, port) in down or (peer, peer_port) in down or \
                        (peer not in senders and dpid not in senders):
                    continue
                if pick is None or peer not in covered:
                    pick = k
                if peer not in covered:
                    break
            if pick is None:
                continue
            self._turn[dpid] = turn + pick + 1
            port, peer, peer_port = mine[(turn + pick) % len(mine)]
            at = (peer, peer_port, dpid, port) if peer in senders else \
                (dpid, port, peer, peer_port)  # from the neighbour: through this switch
            frame, nonce = self.guard.echo(at[0], at[1], now)
            self._pending[(at[0], at[1], nonce)] = _Echo(now, self.rounds, (at[0], at[2]),
                                                         (at[1], at[3]))
            out.append((at[0], at[1], frame))
            covered.update((dpid, peer))
        self.sent += len(out)
        return out

    def _judge(self, now: float, switches: int, spared: set[int] = frozenset()) -> None:
        """Echoes not back half a round after they left, while one sent as early or later
        is, are lost; then the verdict."""
        late = now - self.interval / 2
        for key, echo in list(self._pending.items()):
            if echo.sent <= now - FORGET_S:
                del self._pending[key]
            elif echo.sent <= late and echo.sent <= self._heard:
                del self._pending[key]
                self.lost += 1
                for end in echo.ends:
                    if echo.sent > self._proven.get(end, float("-inf")):
                        lost = self._losses.setdefault(end, [])
                        lost.append(echo)
                        del lost[:-KEEP]
        found = {d for d in self.judged if (d in self.silent or d not in spared)
                 and self._silent(d)}
        limit = max(1, min(switches // SHARE, AT_ONCE))
        self.silent = found if len(found) <= limit else self.silent & found
        self.held = found - self.silent

    def _silent(self, dpid: int) -> bool:
        """Lost echoes in ``ROUNDS`` rounds, on ``LINKS`` links whose far end was proven in the
        round of the loss, the one before or since (a neighbour that forwards: the loss is
        this switch's; a switch whose neighbours all failed is not judged for them)."""
        lost = self._losses.get(dpid)
        if not lost or self.rounds_lost(dpid) < ROUNDS:
            return False
        recent = 1.5 * self.interval
        links = {e.link if e.ends[0] == dpid else e.link[::-1] for e in lost
                 if self._proven.get(e.ends[e.ends[0] == dpid], float("-inf")) >= e.sent - recent}
        return len(links) >= max(1, min(LINKS, len(self._links.get(dpid, ()))))

    def rounds_lost(self, dpid: int) -> int:
        """Rounds in which the echoes through a switch were lost since it was last proven."""
        return len({e.round for e in self._losses.get(dpid, ())})

    def _wiring(self, fabric) -> dict[int, list[tuple[int, int, int]]]:
        """Every switch's link members (port, peer dpid, peer port), but of links and switches
        the fabric has down (a recognised fabric's placeholders); once per fabric object."""
        if fabric is not self._fabric:
            links: dict[int, list] = {}
            for lo, up in fabric.links():
                if (lo, up) in fabric.down or {lo, up} & fabric.down_switches:
                    continue
                a, b = fabric.dpids[lo], fabric.dpids[up]
                for m, (p, q) in enumerate(zip(fabric.ports_to(lo, up), fabric.ports_to(up, lo))):
                    if (lo, up, m) not in fabric.down:
                        links.setdefault(a, []).append((p, b, q))
                        links.setdefault(b, []).append((q, a, p))
            self._fabric, self._links = fabric, {d: sorted(x) for d, x in links.items()}
            for k, d in enumerate(sorted(links)):  # neighbours start apart: few picks overlap
                self._turn.setdefault(d, k)
            self._order = sorted(links, key=lambda d: (-len(links[d]), d))
        return self._links

    def view(self, name=lambda d: f"{d:#x}") -> dict:
        return {"interval_s": self.interval, "rounds": self.rounds, "sent": self.sent,
                "answered": self.answered, "lost": self.lost, "in_flight": len(self._pending),
                "silent": sorted(map(name, self.silent)), "held": sorted(map(name, self.held))}


__all__ = ["ECHO_INTERVAL", "Liveness"]
