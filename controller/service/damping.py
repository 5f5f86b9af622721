"""Flap damping of the links the hosts' probes take down (RFC 2439's route flap damping, on
a scale of seconds): a link that keeps failing and coming back is held down for a while, so
that an intermittent fault re-plans the jobs on it a few times, not every few seconds.

Each time a link is taken down it earns ``PENALTY``; the penalty halves every
``HALF_LIFE_S``. Once it reaches ``SUPPRESS`` the link is *suppressed*: held down even when
probes through it answer, until the penalty has decayed below ``REUSE``. The penalty is capped
at ``CEILING``, the value that decays to ``REUSE`` in ``MAX_HOLD_S``: no link is held for
longer than that after its last failure (RFC 2439's maximum suppress time).

The constants are RFC 2439's defaults (1000 a flap, suppress at 2000, reuse at 750) with the
half-life scaled from 15 minutes to 15 seconds: agents report every 2 s, and a re-plan costs
milliseconds, not a BGP table walk. A link taken down once or twice comes back at its next
working probe; the third down within some 20 s suppresses it for 25 s or more (60 s at most).

>>> d = FlapDamping()
>>> [d.flapped("l", t) for t in (0.0, 5.0, 10.0)]  # the third down in 10 s suppresses
[False, False, True]
>>> d.suppressed("l", 30.0), d.suppressed("l", 40.0)  # until the penalty decays below reuse
(True, False)
"""
from __future__ import annotations

HALF_LIFE_S = 15.0  # the penalty halves in this time
PENALTY = 1000.0  # earned by each down transition
SUPPRESS = 2000.0  # at or above: the link is held down, probes answering or not
REUSE = 750.0  # a suppressed link may come back once its penalty is below this
MAX_HOLD_S = 60.0  # the longest a link is suppressed after its last failure
CEILING = REUSE * 2 ** (MAX_HOLD_S / HALF_LIFE_S)  # 12000: decays to REUSE in MAX_HOLD_S
FORGET = 1.0  # a penalty below this is dropped (memory stays bounded by recent flaps)


def decayed(penalty: float, elapsed: float) -> float:
    """``penalty`` after ``elapsed`` seconds of exponential decay."""
    return penalty * 0.5 ** (max(elapsed, 0.0) / HALF_LIFE_S)


class FlapDamping:
    """Penalties of keys (links), each with the time it was last updated (``now``: any
    monotonic clock, passed in)."""

    def __init__(self):
        self.penalties: dict = {}  # key -> (penalty, when it had that value)
        self.held: set = set()  # keys suppressed (until their penalty is below REUSE)

    def penalty(self, key, now: float) -> float:
        value, at = self.penalties.get(key, (0.0, now))
        return decayed(value, now - at)

    def flapped(self, key, now: float) -> bool:
        """``key`` went down at ``now``: its penalty grows; returns whether it is suppressed."""
        value = min(self.penalty(key, now) + PENALTY, CEILING)
        self.penalties[key] = (value, now)
        if value >= SUPPRESS:
            self.held.add(key)
        return key in self.held

    def suppressed(self, key, now: float) -> bool:
        """Whether ``key`` must stay down whatever the probes say; a suppressed key whose
        penalty decayed below ``REUSE`` is released (and forgotten once negligible)."""
        if key not in self.held:
            return False
        value = self.penalty(key, now)
        if value >= REUSE:
            return True
        self.held.discard(key)
        if value < FORGET:
            self.penalties.pop(key, None)
        return False

    def forget_settled(self, now: float) -> None:
        """Drop the penalties that decayed to nothing (keys not suppressed)."""
        for key in [k for k, (v, at) in self.penalties.items()
                    if k not in self.held and decayed(v, now - at) < FORGET]:
            del self.penalties[key]
