"""Restart rounds (issue 59, item 10): switches that lose their controller together are one
control-plane event, not many data planes failing.

``ovs-ctl restart`` drops every bridge's OpenFlow connection within milliseconds, and the
bridges reconnect one by one over up to ~23 s (k = 4 fat-tree, 20 bridges). Each switch away
for ``--mlroute-dead-after`` (3 s) counted as failed, so every "switch X connected" re-planned
around the ones still away and ``auto`` jobs ended on other cores though no link failed. Many
switches losing the controller at once is a daemon restart, the management network or the
controller's host: their data planes are not known to have failed. So when at least
``restart_quorum`` switches of the fabric in use (3, and always more than one) disconnect
within ``restart_window`` (1 s) of the first of them, they form a round; a switch lost later,
while members of the round are still away, joins it (one of 20 bridges of an ``ovs-ctl
restart`` was seen lost after the window, failed at the dead-after and moved 94 routes). Its
members do not count as failed by the dead-after while it is open (``SwitchSeen.held_until``,
read by ``state.failed_links``), and their peers' echoes do not judge them silent
(``liveness.Liveness.round``'s ``spared``). The round closes when every member is back
(nothing was re-planned), or ``restart_grace`` (30 s) after it began, when the members still
away count as failed together: one re-plan, its cause naming the round. 30 s: SONiC's
fast-reboot lets a switch's data plane be disrupted for at most 25 s (its control plane 90 s;
https://github.com/Azure/SONiC/wiki/Fast-Reboot), an Open vSwitch restart took up to ~23 s
here; 30 s covers both with a margin and leaves a switch that does not return in time failed.

Not weakened: a port that goes down (carrier) is a data-plane failure and re-planned at once,
round or not, and so is a switch judged silent before its round formed. What it costs: several
switches losing their control connection and their data plane together, with their
neighbours' carrier up, are re-planned around only after ``restart_grace``.

``Restarts`` is pure (times are the service's monotonic clock, passed in; events are
returned); ``back`` and ``expire`` apply it to a ``RouteService`` under its lock.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from controller.service import oplog


@dataclass
class Round:
    began: float  # monotonic: the first member's disconnect
    ends: float  # began + restart_grace: members still away count as failed then
    members: set = field(default_factory=set)  # dpids
    announced: bool = False  # its event said (once its window passed: every member known)


class Restarts:
    """The open rounds and the recent disconnects that may form one (``lost``, ``back``,
    ``step``); counters of rounds closed, by outcome (``mlroute_restart_rounds_total``)."""

    def __init__(self):
        self.open: list[Round] = []
        self._recent: list[tuple[float, int]] = []  # (when, dpid) lost outside any round
        self.closed = {"returned": 0, "expired": 0}

    def away(self, switches: dict) -> set[int]:
        """Members of open rounds that are not connected: not failed, not judged silent."""
        return {d for r in self.open for d in _away(r, switches)}

    def lost(self, dpid: int, now: float, switches: dict, settings) -> None:
        """A switch of the fabric in use lost its connection at ``now``: it goes back into
        its open round, joins one still within its window or with members still away, or may
        form one with the others lost within the window (all held from then on)."""
        if settings.restart_grace <= 0:
            return
        for r in self.open:
            if dpid in r.members or now <= r.began + settings.restart_window or \
                    _away(r, switches):
                r.members.add(dpid)
                _hold(switches, dpid, r.ends)
                return
        window = settings.restart_window
        self._recent = [(t, d) for t, d in self._recent if t >= now - window and d != dpid
                        and d in switches and not switches[d].connected and not
                        switches[d].silent and now < switches[d].since + settings.dead_after]
        self._recent.append((now, dpid))
        if len(self._recent) < max(2, settings.restart_quorum):
            return
        began = self._recent[0][0]
        r = Round(began, began + settings.restart_grace, {d for _, d in self._recent})
        self.open.append(r)
        self._recent = []
        for d in r.members:
            _hold(switches, d, r.ends)

    def back(self, dpid: int, now: float, switches: dict, name) -> list[dict]:
        """A switch reconnected: events of the rounds it completes (every member back)."""
        events = []
        for r in list(self.open):
            if dpid in r.members and not any(
                    d in switches and not switches[d].connected for d in r.members):
                self.open.remove(r)
                self.closed["returned"] += 1
                events += self._announce(r, name)
                events.append({"cause": f"restart round over: all {len(r.members)} back after "
                                        f"{now - r.began:.1f} s; nothing re-planned",
                               "restart_round": _names(r.members, name)})
        return events

    def step(self, now: float, switches: dict, settings, name) -> tuple[list[dict], str | None]:
        """(events of rounds whose window passed, the cause of the re-plan of rounds whose
        grace ended with members away: they count as failed from now; None: none)."""
        events, causes = [], []
        for r in list(self.open):
            if not r.announced and now >= r.began + settings.restart_window:
                events += self._announce(r, name)
            if now >= r.ends:
                self.open.remove(r)
                self.closed["expired"] += 1
                away = _names([d for d in r.members if d in switches
                               and not switches[d].connected], name)
                causes.append(f"restart round over: {len(away)} of {len(r.members)} switches "
                              f"still away after {settings.restart_grace:g} s "
                              f"({oplog.names(away)}): re-planned around them")
        return events, "; ".join(causes) or None

    def _announce(self, r: Round, name) -> list[dict]:
        if r.announced:
            return []
        r.announced = True
        return [{"cause": f"restart round: {len(r.members)} switches lost together; not "
                          f"re-planned until they return or {r.ends - r.began:g} s",
                 "restart_round": _names(r.members, name)}]


def _away(r: Round, switches: dict) -> list[int]:
    """The members of round ``r`` that are not connected."""
    return [d for d in r.members if d in switches and not switches[d].connected]


def _hold(switches: dict, dpid: int, until: float) -> None:
    s = switches.get(dpid)
    if s is not None and not s.connected:
        s.held_until = until


def _names(dpids, name) -> list[str]:
    return sorted(name(d) for d in dpids)


def back(svc, dpid: int) -> None:
    """A switch of the fabric in use reconnected (``RouteService.note_switches``, under the
    lock): the round it completes is over, said in the events and the log."""
    st = svc.state
    note(st, st.restarts.back(dpid, svc.monotonic(), st.switches, svc.switch_name), svc.clock())


def expire(svc) -> None:
    """Grace times that ended (``RouteService.expire`` and its tick, under the lock): rounds
    whose window passed are said; a round that ended with members away names the re-plan
    (said alone if nothing changes), else lost switches past ``dead_after`` re-plan."""
    st = svc.state
    events, cause = st.restarts.step(svc.monotonic(), st.switches, svc.settings,
                                     svc.switch_name)
    note(st, events, svc.clock())
    if not svc._topology_changed(cause or "switch disconnected for longer than "
                                 f"{svc.settings.dead_after:g} s") and cause:
        note(st, [{"cause": cause}], svc.clock())


def note(state, events: list[dict], wall: float) -> None:
    """Events without a change: recorded (``time``: wall clock, what users read) and logged."""
    for ev in events:
        state.add_event({"time": wall, **ev})
        oplog.event(ev)
