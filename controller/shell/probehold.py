"""LLDP probe rounds held while connected switches wait for their synchronisation.

When the controller starts (or restarts), every switch of the fabric connects within a second
or two and is read and repaired (``tablesync``): that is what makes it ready. A probe round
meanwhile costs both: a packet-out per port from the controller, and Open vSwitch forwards
each probe and sends it back as a packet-in, on the same two cores. On a k = 16 fat-tree of
Open vSwitch bridges (320 switches, 4,096 probes a round, paced at 1,000 a second) the first
start was ready 4.03 s after the process started with its rounds and 3.26 s without them, the
restart 3.73 s and 2.95 s, Open vSwitch's CPU seconds 3.25 and 1.84 (one run each, under
``flock /tmp/mlroute-live.lock``, the load 1.9-2.7 and 5.5-6.0). A declared fabric is
reconciled from its declaration, not from what the probes find, so the rounds wait until no
connected switch waits for its synchronisation; at most ``HOLD_MAX`` seconds in a row, so
that a switch whose table read never ends does not stop discovery for the others.
"""
from __future__ import annotations

HOLD_MAX = 10.0  # seconds the rounds are held at most in a row


class ProbeHold:
    """Whether a probe round that is due goes out: held while a switch of the declared fabric
    is connected and not synchronised (``/v1/ready``'s counts), at most ``hold_max`` seconds
    in a row; never held without a declared fabric (discovery needs the rounds). O(switches)
    a round (the readiness counts).

    >>> hold = ProbeHold()
    >>> hold.counted({"connected": 320, "synchronised": 100}, now=0.0)
    False
    >>> hold.counted({"connected": 320, "synchronised": 320}, now=2.0)
    True
    >>> [hold.counted({"connected": 5, "synchronised": 4}, now=t) for t in (3.0, 12.9, 13.0)]
    [False, False, True]
    """

    def __init__(self, hold_max: float = HOLD_MAX):
        self.hold_max = hold_max
        self.since: float | None = None  # when the hold in force began

    def allows(self, service, now: float) -> bool:
        """For ``service`` (a ``RouteService``) at ``now`` (seconds, monotonic)."""
        if service.state.declared is None:
            return True
        return self.counted(service.ready_view()[1], now)

    def counted(self, counts: dict, now: float) -> bool:
        if counts.get("connected", 0) <= counts.get("synchronised", 0):
            self.since = None
            return True
        if self.since is None:
            self.since = now
        return now - self.since >= self.hold_max
