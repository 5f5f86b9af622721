"""The longest stretch of the controller's work between two yields, for the benchmarks.

Under eventlet (Ryu) a REST request is answered only when the green thread doing the
controller's work yields: at the service's ``pause`` (the shell's ``hub.sleep(0)``: the lock's
``released``, the desired tables, the predictions), at every wait for the switches (an
install's barriers, a table read) and between the shell's own units of work (a switch noted,
a batch of packet-ins or of port changes, a REST request). A stretch of Python between two of
them delays every request that arrives meanwhile by up to its length. ``Stretches`` times
them with the wall clock and the process's CPU time (less sensitive to other processes on a
shared machine): ``mark()`` at every yield point, ``start()`` and ``stop()`` around a unit of
measurement; the longest by CPU is kept with where it began and ended.

``YieldingSwitches``: fake switches (``fake_switch.FakeSwitches``) whose installs and table
reads are yield points, as the real ones' waits for barrier replies and table stats are.
"""
from __future__ import annotations

import os
import sys
import time

from emulation.harness.fake_switch import FakeSwitches

HERE = __file__
CONTROLLER = os.sep + "controller" + os.sep


def _where(depth: int = 2):
    """The innermost caller in the controller's own code (the service lock's ``released``
    and ``pacing.Pacer`` left out: the code around them is named), else the innermost outside this module, as
    (code, line): ``_name`` writes it."""
    frame = sys._getframe(depth)
    first = None
    while frame is not None:
        code = frame.f_code
        path = code.co_filename
        if path != HERE:
            if first is None:
                first = (code, frame.f_lineno)
            if CONTROLLER in path and not path.endswith(("servicelock.py", "pacing.py")):
                return code, frame.f_lineno
        frame = frame.f_back
    return first or "?"


def _name(where) -> str:
    """A yield point as ``module.py:line function`` (``where``: a name, or ``_where``'s)."""
    if isinstance(where, str):
        return where
    code, line = where
    return f"{os.path.basename(code.co_filename)}:{line} {code.co_name}"


class Stretches:
    """Stretches between yield points: ``mark(where)`` at each (``where`` None: the caller
    in the controller's code, found on the stack), ``start()`` and ``stop()`` around what is
    measured. ``stop()`` returns the longest stretch by CPU: {"cpu_ms", "wall_ms", "at"}
    (``at``: "where it began -> where it ended"), and ``yields``, the marks counted."""

    def __init__(self):
        self.start()
        self.running = False  # marks count from ``start()`` on

    def start(self, where: str = "start") -> None:
        self.running = True
        self.longest = (0.0, 0.0, "")  # (cpu s, wall s, at)
        self.yields = 0
        self._wall, self._cpu, self._from = time.perf_counter(), time.process_time(), where

    def mark(self, where: str | None = None) -> None:
        if not self.running:
            return
        cpu, wall = time.process_time(), time.perf_counter()
        where = where or _where()
        self.yields += 1
        if cpu - self._cpu > self.longest[0]:
            self.longest = (cpu - self._cpu, wall - self._wall,
                            f"{_name(self._from)} -> {_name(where)}")
        self._from, self._wall, self._cpu = where, wall, cpu

    def skip(self, where: str) -> None:
        """A stretch that is not the controller's (the fake switches' own work): not counted,
        the next one starts here."""
        if self.running:
            self._from = where
            self._wall, self._cpu = time.perf_counter(), time.process_time()

    def stop(self, where: str = "end") -> dict:
        self.mark(where)
        self.running = False
        cpu, wall, at = self.longest
        return {"cpu_ms": round(cpu * 1e3, 2), "wall_ms": round(wall * 1e3, 2), "at": at,
                "yields": self.yields - 1}

    def pause(self) -> None:
        """The service's ``on_progress``/``pause`` (the shell's ``hub.sleep(0)``)."""
        self.mark()


class YieldingSwitches(FakeSwitches):
    """``FakeSwitches`` whose installs and table reads are yield points (``stretches.mark``):
    the real switches' are waits for the switches' replies. The fake's own work between
    them (applying messages to its tables, copying them for a read) is not counted: the
    shell's sends yield while a switch's send queue (16 messages under Ryu) is full, and its
    table reads decode the replies with a yield every 128 entries
    (``controller/shell/translate.state_of``)."""

    def __init__(self, dpids, fabric=None, stretches: Stretches | None = None):
        super().__init__(dpids, fabric)
        self.stretches = stretches or Stretches()

    def install(self, batches):
        self.stretches.mark("install")
        try:
            super().install(batches)
        finally:
            self.stretches.skip("installed")

    def read_tables(self, dpid):
        self.stretches.mark("read_tables")
        try:
            return super().read_tables(dpid)
        finally:
            self.stretches.skip("read")
