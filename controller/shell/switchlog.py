"""Switches connected or lost, said in one log line per batch (``oplog.switches``): on a
fabric of 320 switches that all connect at once, one line, not 320.

A switch noted starts a gathering worker (if none runs) that waits until no switch was noted
for ``GATHER`` seconds, at most ``MOST``, then says every one noted meanwhile: connected ones
in one line, lost ones in another. Runs on the shell's hub; names are read when said (the
fabric in use then: a switch connected before the fabric was found is named by its dpid).
"""
from __future__ import annotations

import time
from collections.abc import Callable

from controller.service import oplog

GATHER = 0.2  # seconds without a switch noted that end a batch
MOST = 2.0  # seconds a batch gathers at most


class SwitchLog:
    def __init__(self, hub, name: Callable[[int], str], clock=time.monotonic):
        self.hub, self.name, self.clock = hub, name, clock
        self.pending: dict[str, list[int]] = {}  # "connected"/"lost" -> dpids, in order
        self._last = 0.0
        self._gathering = False

    def connected(self, dpids) -> None:
        self._note("connected", dpids)

    def lost(self, dpid: int) -> None:
        self._note("lost", [dpid])

    def _note(self, what: str, dpids) -> None:
        dpids = list(dpids)
        if not dpids:
            return
        self.pending.setdefault(what, []).extend(dpids)
        self._last = self.clock()
        if not self._gathering:
            self._gathering = True
            self.hub.spawn(self._gather)

    def _gather(self) -> None:
        start = self.clock()
        try:
            while self.clock() - self._last < GATHER and self.clock() - start < MOST:
                self.hub.sleep(GATHER)
            self.flush()
        finally:
            self._gathering = False
            if self.pending:  # noted as this worker ended
                self._gathering = True
                self.hub.spawn(self._gather)

    def flush(self) -> None:
        """Say what is pending now (one line per kind)."""
        pending, self.pending = self.pending, {}
        for what in ("connected", "lost"):
            dpids = list(dict.fromkeys(pending.get(what, ())))
            oplog.switches(what, [self.name(d) for d in dpids])
