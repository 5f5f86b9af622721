"""LLDP probe rounds held while switches wait for their synchronisation (``probehold``), in the
shell's tick loop on a fake clock: no round while a connected switch is being read, the
rounds again once every connected switch is synchronised, and never held longer than
``HOLD_MAX`` in a row."""
from __future__ import annotations

import threading
import types

from controller.shell import core
from controller.shell.core import Shell
from controller.shell.heap import Heap
from controller.shell.hub import Hub
from controller.shell.probehold import HOLD_MAX, ProbeHold
from tests.helpers import FakeClock
from tests.test_shell_tick import FakeWake


class Service:
    """What the loop asks of the service; ``counts(now)``: /v1/ready's counts then."""

    unproven = False

    def __init__(self, clock: FakeClock, counts, declared: bool = True):
        self.clock, self.counts, self.rounds = clock, counts, []
        self.state = types.SimpleNamespace(declared=object() if declared else None)

    def next_deadline(self):
        return None

    def monotonic(self):
        return self.clock.now

    def ready_view(self):
        return 503, self.counts(self.clock.now)

    def tick(self, probe: bool, sync: bool) -> None:
        self.rounds.append((round(self.clock.now - 100.0, 1), probe))

    def sync_queued(self) -> None:
        pass


def probes(counts, end: float, declared: bool = True) -> list[float]:
    """The seconds (from the loop's start) of the rounds that sent probes, one a second."""
    clock = FakeClock(100.0)
    svc = Service(clock, counts, declared)
    shell = Shell.__new__(Shell)  # only what the loop uses: no sockets, no framework
    shell.service, shell.lldp_interval, shell.improving, shell._running = svc, 1.0, False, True
    shell.hub = Hub(spawn=lambda fn, *a: fn(*a), sleep=clock.sleep, Event=None)
    shell._syncers, shell._syncers_lock, shell.heap = 0, threading.Lock(), Heap()
    shell._wake = FakeWake(clock, [], 100.0 + end, shell)
    original = core.time
    core.time = types.SimpleNamespace(monotonic=clock)
    try:
        shell._tick()
    finally:
        core.time = original
    return [t for t, probe in svc.rounds if probe]


def test_no_round_while_connected_switches_are_read_then_every_second():
    def counts(now):  # 320 switches connect 1.5 s after the loop's start; all read by 3.5 s
        connected = 320 if now >= 101.5 else 0
        return {"switches": 320, "connected": connected,
                "synchronised": connected if now >= 103.5 else 0}
    # 1 s: nothing connected, nothing held; 2 and 3 s: held
    assert probes(counts, 6.5)[:4] == [1.0, 4.0, 5.0, 6.0]
    # no declared fabric: discovery needs every round (a fabric it adopted is being read)
    assert probes(counts, 6.5, declared=False)[:4] == [1.0, 2.0, 3.0, 4.0]


def test_a_switch_whose_read_never_ends_holds_the_rounds_for_hold_max_only():
    def counts(now):
        return {"switches": 5, "connected": 5, "synchronised": 4}
    sent = probes(counts, HOLD_MAX + 3.5)  # held from the first round (1 s) for HOLD_MAX
    assert sent[:3] == [HOLD_MAX + 1.0, HOLD_MAX + 2.0, HOLD_MAX + 3.0]


def test_the_hold_starts_again_after_the_switches_were_all_read():
    hold = ProbeHold(hold_max=5.0)
    assert not hold.counted({"connected": 2, "synchronised": 1}, now=0.0)
    assert hold.counted({"connected": 2, "synchronised": 2}, now=4.0)
    assert not hold.counted({"connected": 3, "synchronised": 2}, now=8.0)  # a new switch
    assert not hold.counted({"connected": 3, "synchronised": 2}, now=12.9)
    assert hold.counted({"connected": 3, "synchronised": 2}, now=13.0)
