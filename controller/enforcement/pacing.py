"""Yield within a long computation: ``Pacer.add(n)`` counts units of work (entries built,
joined, compared or diffed) and calls ``pause`` (the shell's yield, ``hub.sleep(0)``: under
eventlet REST answers only where the controller's work yields) once ``every`` were done since
the last call, or once ``budget`` seconds went by since it (units do not all weigh the same:
an aggregation switch's static entries at k = 16 took 3 ms where a leaf's took 0.3, and 32
switches between two pauses were one stretch of 110 ms during a restart).

>>> calls = []
>>> p = Pacer(lambda: calls.append(1), every=10, budget=60.0)
>>> for n in (4, 4, 4, 9, 1): p.add(n)
>>> len(calls)
2
>>> p = Pacer(lambda: calls.append(1), budget=0.0)  # every unit takes longer than no time
>>> p.add(1); len(calls)
3
>>> Pacer(None).add(10 ** 9)  # no pause given: nothing to call
"""
from __future__ import annotations

from collections.abc import Callable
from time import perf_counter

# units of work between two pauses: about 10 ms of CPU (an entry per host at k = 16: 32
# switches' static entries took 40-50 ms, a link's 17 switches' diffs 35 ms)
PAUSE_ENTRIES = 4096
PAUSE_S = 0.01  # and at most this long between two pauses, whatever the units weighed


class Pacer:
    __slots__ = ("pause", "every", "budget", "work", "since")

    def __init__(self, pause: Callable[[], None] | None, every: int | None = None,
                 budget: float | None = None):
        self.pause, self.work, self.since = pause, 0, perf_counter()
        self.every = PAUSE_ENTRIES if every is None else every
        self.budget = PAUSE_S if budget is None else budget

    def add(self, n: int) -> None:
        if self.pause is None:
            return
        self.work += n
        if self.work >= self.every or perf_counter() - self.since >= self.budget:
            self.pause()
            self.work, self.since = 0, perf_counter()
