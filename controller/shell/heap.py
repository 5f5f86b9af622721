"""Keep the garbage collector's full collections short: what a long-lived controller holds is
frozen out of them, and thawed once in a while so that dead cycles do not stay.

CPython's full (generation 2) collection walks every tracked object that is not frozen, and
under eventlet every green thread waits meanwhile, REST included. The shell freezes the heap
its start built (``gc.freeze``); at k = 16 the switches' shadows, the desired tables and the
framework's datapaths come after it, and a full collection walked them in 33-45 ms about once
a second (a stall watcher on ``benchmarks.scale``'s switch loss). ``Heap`` times the full
collections (``gc.callbacks``) and, after one that took longer than ``slow_s``, freezes what
survived it at the shell's next round: the later ones walk only what came since (17-21 ms in
the same run).

A frozen object is never collected, so a cycle that dies frozen (an old fabric, a closed
datapath) would stay. Once the frozen heap has grown to ``regrow`` times its size after the
last collection of everything, the round thaws it and collects all of it (``gc.unfreeze``,
``gc.collect``, ``gc.freeze``): memory kept by dead frozen cycles is bounded by that factor,
for one long collection each time the heap doubles (tests/test_heap.py).
"""
from __future__ import annotations

import gc
import time
from collections.abc import Callable

SLOW_S = 0.01  # a full collection longer than this freezes what survived it
REGROW = 2.0  # the frozen heap this many times its size after the last full thaw: thaw


class Heap:
    def __init__(self, collector=gc, clock: Callable[[], float] = time.perf_counter,
                 slow_s: float = SLOW_S, regrow: float = REGROW):
        self.gc, self.clock, self.slow_s, self.regrow = collector, clock, slow_s, regrow
        self.base = 1  # frozen objects after the last collection of everything
        self.frozen = 0  # frozen objects after the last freeze
        self.slow = False  # a full collection took longer than slow_s since the last round
        self._began: float | None = None
        self.freezes = self.thaws = 0

    def start(self) -> None:
        """Freeze what the start built; time the full collections from now on."""
        self.gc.freeze()
        self.base = self.frozen = max(self.gc.get_freeze_count(), 1)
        self.gc.callbacks.append(self._watch)

    def stop(self) -> None:
        if self._watch in self.gc.callbacks:
            self.gc.callbacks.remove(self._watch)

    def _watch(self, phase: str, info: dict) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._began = self.clock()
        elif self._began is not None:
            self.slow = self.slow or self.clock() - self._began > self.slow_s
            self._began = None

    def tick(self) -> str | None:
        """The shell's round: after a slow full collection, freeze ("frozen"), or thaw and
        collect everything once the frozen heap has grown ``regrow`` times ("thawed");
        None: nothing to do."""
        if not self.slow:
            return None
        self.slow = False
        self.gc.freeze()
        self.freezes += 1
        self.frozen = self.gc.get_freeze_count()  # a walk of the frozen list: 2 ms at 4e5
        if self.frozen <= self.regrow * self.base:
            return "frozen"
        self.gc.unfreeze()
        self.gc.collect()
        self.gc.freeze()
        self.slow = False  # that collection was long, and expected
        self.base = self.frozen = max(self.gc.get_freeze_count(), 1)
        self.thaws += 1
        return "thawed"
