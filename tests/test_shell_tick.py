"""The shell's tick loop (``core.Shell._tick``) on a fake clock: its periodic round every
second, and between rounds a lost switch counted as failed at the end of its grace time
(``RouteService.next_deadline``/``expire``), not at the next round; a switch lost while the
loop waits wakes it, so a grace time shorter than a round is kept too."""
from __future__ import annotations

import json
import threading
import types

import pytest

from controller.model.clos import Clos
from controller.service import api
from controller.service.route_service import RouteService
from controller.shell import core
from controller.shell.core import Shell, tick_wait
from controller.shell.heap import Heap
from controller.shell.hub import Hub
from emulation.harness.fake_switch import FakeSwitches
from tests.helpers import FakeClock

DEAD = "switch disconnected for longer than"


@pytest.mark.parametrize("to_tick, to_deadline, wait", [
    (1.0, None, 1.0),  # no grace time runs: the next round
    (1.0, 0.25, 0.25),  # a grace time ends first
    (0.5, 2.0, 0.5),  # the round comes first
    (1.0, 0.0, 0.0),  # ends now
    (1.0, -0.1, 0.0),  # already past (the loop was late): at once, never negative
    (-0.2, None, 0.0),  # a round that overran its second
])
def test_the_loop_waits_for_the_round_or_the_deadline_whichever_comes_first(
        to_tick, to_deadline, wait):
    assert tick_wait(to_tick, to_deadline) == wait


class FakeWake:
    """The loop's ``hub.Event`` on the fake clock: ``wait(timeout)`` runs the actions due
    within the timeout, each at its time, and returns early when one sets the event."""

    def __init__(self, clock: FakeClock, actions: list, end: float, shell):
        self.clock, self.actions, self.end, self.shell = clock, actions, end, shell
        self.flag = False
        self.waits: list[float] = []

    def wait(self, timeout: float) -> bool:
        self.waits.append(timeout)
        until = self.clock.now + timeout
        while not self.flag and self.actions and self.actions[0][0] <= until:
            at, action = self.actions.pop(0)
            self.clock.now = max(self.clock.now, at)
            action()
        if not self.flag:
            self.clock.now = until
        if self.clock.now >= self.end:
            self.shell._running = False
        return self.flag

    def set(self):
        self.flag = True

    def clear(self):
        self.flag = False

    def is_set(self):
        return self.flag


def loop(dead_after: float, actions: list, end: float, spawned: list | None = None):
    """A shell around a real service (a ring on a leaf-spine) and fake switches, its loop run
    on the fake clock from 100 s until ``end``. ``actions``: (time, "down" | "up", switch),
    or (time, fn) to call with (service, switches). Returns the service, the times the
    periodic round (``tick``) ran and those ``expire`` ran, and the loop's waits. What the
    shell spawns runs at once, or is only listed in ``spawned`` when it is given (a worker
    the loop must not wait for)."""
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    clock = FakeClock(100.0)
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, f, clock=clock, sleep=clock.sleep, dead_after=dead_after,
                       algorithm="greedy")
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    code, _ = api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": "a", "collective": "ring_allreduce", "ranks": ["h0_0", "h1_0", "h2_0", "h3_0"],
         "bytes": 8e6}).encode())
    assert code == 201
    rounds, expiries = [], []
    tick, expire = svc.tick, svc.expire
    svc.tick = lambda **kw: (rounds.append(clock.now), tick(**kw))[1]
    svc.expire = lambda: (expiries.append(clock.now), expire())[1]
    shell = Shell.__new__(Shell)  # only what the loop uses: no sockets, no framework
    shell.service, shell.lldp_interval, shell.improving, shell._running = svc, 0, False, True
    shell.hub = Hub(spawn=lambda fn, *a: fn(*a) if spawned is None else spawned.append(fn),
                    sleep=clock.sleep, Event=None)
    shell._syncers, shell._syncers_lock = 0, threading.Lock()
    shell.heap = Heap()  # not started: its rounds do nothing

    def act(what, name=None):
        if callable(what):
            return lambda: what(svc, sw)
        dpid = f.dpids[name]
        if what == "down":  # as the framework reports it: the shell's handler
            return lambda: shell._disconnected(dpid)
        ports = {p: True for p in f.ports[name].values()}
        return lambda: svc.switch_connected(dpid, ports)

    shell._wake = FakeWake(clock, sorted(((a[0], act(*a[1:])) for a in actions),
                                         key=lambda x: x[0]), end, shell)
    original = core.time
    core.time = types.SimpleNamespace(monotonic=clock)  # the loop's rounds on the fake clock
    try:
        shell._tick()
    finally:
        core.time = original
    return svc, rounds, expiries, shell._wake.waits


def failures(svc) -> list:
    return [e for e in svc.state.events if e["cause"].startswith(DEAD)]


def test_a_lost_switch_is_acted_on_at_its_deadline_between_rounds():
    svc, rounds, expiries, waits = loop(3.0, [(100.4, "down", "s0")], end=106.0)
    assert rounds == pytest.approx([101.0, 102.0, 103.0, 104.0, 105.0, 106.0])
    assert expiries == [103.4]  # once, at the deadline, not at the 104.0 round
    assert [e["time"] for e in failures(svc)] == [103.4]
    assert failures(svc)[0]["links_down"] == ["l0-s0", "l1-s0", "l2-s0", "l3-s0"]
    assert {r["spine"] for r in api.handle(svc, "GET", "/v1/routes")[1]["routes"]} == {"s1"}
    assert all(0 <= w <= 1.0 for w in waits)


def test_a_grace_time_shorter_than_a_round_ends_on_time():
    """The lost switch wakes the loop (``_disconnected``), which then waits for 0.3 s."""
    svc, rounds, expiries, _ = loop(0.3, [(101.5, "down", "s1")], end=103.0)
    assert [e["time"] for e in failures(svc)] == [pytest.approx(101.8)]
    assert expiries == [pytest.approx(101.8)]
    assert rounds == pytest.approx([101.0, 102.0, 103.0])  # the rounds keep their second


def test_a_switch_back_before_its_deadline_costs_a_quiet_check_only():
    sent = []
    svc, rounds, expiries, _ = loop(3.0, [
        (100.4, "down", "s0"), (101.5, "down", "l1"), (103.2, "up", "s0"),
        (103.25, lambda svc, sw: sent.append(len(sw.sent))),
        (104.45, lambda svc, sw: sent.append(len(sw.sent)))], end=105.0)
    # the loop waited for s0's deadline; s0 came back meanwhile: nothing to do at 103.4
    assert expiries == pytest.approx([103.4, 104.5])
    assert sent[0] == sent[1]  # nothing sent by the check at 103.4 (nor by the 104.0 round)
    assert [e["time"] for e in failures(svc)] == [104.5]  # l1's, at its own deadline
    assert failures(svc)[0]["links_down"] == ["l1-s0", "l1-s1"]


def test_a_switch_that_never_answers_does_not_hold_the_loop():
    """Issue 59, item 2: l3 reconnects at 100.2 and answers nothing; a worker's first read
    of its tables fails (that read's wait runs beside the loop: no fake time passes), and
    every later read lasts the 5 s timeout. Its tables are read again by the shell's sync
    workers, never in the loop nor under the lock: s0, lost at 100.4, counts as failed at
    its deadline, 103.4, and every round keeps its second (before, the round at 101 and
    the lost switch's drain read l3 for 5 s each, and s0 failed late)."""
    spawned: list = []

    def l3_goes_silent(svc, sw):
        l3 = svc.fabric.dpids["l3"]
        sw.silent = {l3}
        assert svc.note_switches([(l3, {p: True for p in svc.fabric.ports["l3"].values()},
                                   None)]) == {}
        svc.sync_queued()  # the shell's worker: its read fails
        sw.stall = svc.clock.sleep  # from now on a read of l3 takes 5 s of the fake clock
    svc, rounds, expiries, _ = loop(3.0, [(100.2, l3_goes_silent), (100.4, "down", "s0")],
                                    end=107.0, spawned=spawned)
    assert expiries == [103.4] and [e["time"] for e in failures(svc)] == [103.4]
    assert rounds == pytest.approx([101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0])
    assert spawned and {fn.__name__ for fn in spawned} == {"_sync"}  # read off the loop
    assert svc.reconciler.pending == {svc.fabric.dpids["l3"]}
