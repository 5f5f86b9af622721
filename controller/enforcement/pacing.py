"""Yield within a long computation: ``Pacer.add(n)`` counts units of work (entries built,
joined, compared or diffed) and calls ``pause`` (the shell's yield, ``hub.sleep(0)``: under
eventlet REST answers only where the controller's work yields) once ``every`` were done since
the last call.

>>> calls = []
>>> p = Pacer(lambda: calls.append(1), every=10)
>>> for n in (4, 4, 4, 9, 1): p.add(n)
>>> len(calls)
2
>>> Pacer(None).add(10 ** 9)  # no pause given: nothing to call
"""
from __future__ import annotations

from collections.abc import Callable

# units of work between two pauses: about 10 ms of CPU (an entry per host at k = 16: 32
# switches' static entries took 40-50 ms, a link's 17 switches' diffs 35 ms)
PAUSE_ENTRIES = 4096


class Pacer:
    __slots__ = ("pause", "every", "work")

    def __init__(self, pause: Callable[[], None] | None, every: int | None = None):
        self.pause, self.work = pause, 0
        self.every = PAUSE_ENTRIES if every is None else every

    def add(self, n: int) -> None:
        if self.pause is None:
            return
        self.work += n
        if self.work >= self.every:
            self.pause()
            self.work = 0
