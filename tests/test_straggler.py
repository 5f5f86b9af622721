"""Issue 74, point 7: the straggler rule (``controller/shell/switches.py``) gave up on a switch
still silent 0.5 s after the others confirmed (or four times what they took), whatever it was
sent: at 1,000 flow mods a second a healthy switch sent 600 mods while the others got 20 was
refused after 0.56 s, the change rolled back and the POST answered 409 (with the rule off it
confirmed at 1.66 s). Now a straggler's wait grows with its batch (``straggler_wait``:
``STRAGGLER_WAIT`` plus its messages at ``STRAGGLER_RATE`` a second), and a silent switch is
still given up on long before the timeout. Through ``Switches.install`` with Ryu's or
os-ken's OpenFlow 1.3 messages (each when installed), on a fake clock: datapaths apply their
mods at a given rate and confirm their barrier when done (or never), so the figures hold on
any machine."""
from __future__ import annotations

import heapq
import importlib
from types import SimpleNamespace

import pytest

from controller.errors import InstallError
from controller.model.clos import Clos
from controller.shell import switches
from controller.shell.hub import Hub
from controller.shell.switches import (
    STRAGGLER_RATE,
    STRAGGLER_WAIT,
    Switches,
    straggler_wait,
)
from tests.test_switch_io import static

TIMEOUT = 5.0  # the controller's default barrier timeout


class FakeTime:
    """Seconds that move only when a wait does, to the next reply due or its timeout."""

    def __init__(self):
        self.t, self.due, self.n = 0.0, [], 0

    def monotonic(self) -> float:
        return self.t

    def at(self, when: float, fn) -> None:
        self.n += 1
        heapq.heappush(self.due, (when, self.n, fn))


class FakeEvent:
    def __init__(self, clock: FakeTime):
        self.clock, self.flag = clock, False

    def set(self):
        self.flag = True

    def clear(self):
        self.flag = False

    def is_set(self) -> bool:
        return self.flag

    def wait(self, timeout=None) -> bool:
        c = self.clock
        end = c.t + (1e9 if timeout is None else timeout)
        while not self.flag:
            if not c.due or c.due[0][0] > end:
                c.t = max(c.t, end)
                return self.flag
            when, _, fn = heapq.heappop(c.due)
            c.t = max(c.t, when)
            fn()
        return True


class Datapath:
    """Applies its flow and group mods at ``rate`` a second, one after another, and confirms
    a barrier once those before it are applied (``rate`` None: never)."""

    def __init__(self, ofp, dpid: int, io: Switches, clock: FakeTime, rate: float | None):
        self.ofproto, self.ofproto_parser = ofp
        self.id, self.xid, self.io, self.clock, self.rate = dpid, 0, io, clock, rate
        self.busy_until = 0.0

    def set_xid(self, msg):
        self.xid += 1
        msg.set_xid(self.xid)

    def send_msg(self, msg):
        msg.serialize()
        if self.rate is None:
            return
        start = max(self.clock.t, self.busy_until)
        if type(msg).__name__ == "OFPBarrierRequest":
            reply = SimpleNamespace(datapath=self, xid=msg.xid)
            self.clock.at(start + 0.001, lambda: self.io.on_barrier_reply(reply))
        else:
            self.busy_until = start + 1.0 / self.rate


@pytest.fixture(params=["ryu", "os_ken"])
def ofp(request):
    pytest.importorskip(request.param, reason=f"{request.param} is not installed in this venv")
    return tuple(importlib.import_module(f"{request.param}.ofproto.{m}")
                 for m in ("ofproto_v1_3", "ofproto_v1_3_parser"))


def install(ofp, monkeypatch, sizes: list[int], rates: list[float | None]):
    """``install`` of batches of ``sizes`` mods to switches applying ``rates`` mods a second:
    (the InstallError or None, when it returned on the fake clock)."""
    clock = FakeTime()
    monkeypatch.setattr(switches, "time", SimpleNamespace(monotonic=clock.monotonic))
    hub = Hub(spawn=None, sleep=lambda s: None, Event=lambda: FakeEvent(clock))
    f = Clos.generate(2, 8, 1, 0.01, wiring=True)
    io = Switches(hub, TIMEOUT, f.switch_of_dpid.get)
    names = sorted(f.dpids)[:len(sizes)]
    dps = [Datapath(ofp, f.dpids[n], io, clock, rate) for n, rate in zip(names, rates)]
    for dp in dps:
        io.connected(dp)
    batches = {}
    for dp, n, size in zip(dps, names, sizes):
        msgs = static(f, n)
        batches[dp.id] = (msgs * (size // len(msgs) + 1))[:size]
    try:
        io.install(batches)
    except InstallError as e:
        return e, clock.t, dps
    return None, clock.t, dps


def test_a_healthy_switch_with_a_bigger_batch_is_not_a_straggler(ofp, monkeypatch):
    """The issue's case: 8 switches at 1,000 mods a second, one sent 600, the others 20. The
    old rule gave it up 0.5 s after the others (at 0.56 s), before its 0.6 s of mods."""
    err, took, _ = install(ofp, monkeypatch, [600] + [20] * 7, [1000.0] * 8)
    assert err is None, err
    assert took == pytest.approx(0.601, abs=0.01)
    # one slower still (600 mods at 360 a second: confirmed at 1.66 s, as in the issue)
    err, took, _ = install(ofp, monkeypatch, [600] + [20] * 7, [360.0] + [1000.0] * 7)
    assert err is None, err
    assert took == pytest.approx(1.668, abs=0.01)


def test_a_silent_switch_is_still_given_up_on_before_the_timeout(ofp, monkeypatch):
    """Its wait grows with its batch (and its barrier), not beyond: 20 mods 0.6 s after the
    others (about as before), 600 mods 3.5 s after them, both within the 5 s timeout."""
    others = 20 / 1000.0 + 0.001  # when the others confirmed
    for size, at in ((20, 0.63), (600, 3.53)):
        err, took, dps = install(ofp, monkeypatch, [size] + [20] * 7, [None] + [1000.0] * 7)
        assert err is not None and set(err.failed) == {dps[0].id}
        assert "when the 7 others had" in err.failed[dps[0].id]
        assert took == pytest.approx(others + straggler_wait(size + 1, others))
        assert took == pytest.approx(at, abs=0.01) and took < TIMEOUT


def test_straggler_wait():
    assert straggler_wait(0, 0.0) == STRAGGLER_WAIT
    assert straggler_wait(601, 0.021) == pytest.approx(STRAGGLER_WAIT + 601 / STRAGGLER_RATE)
    assert straggler_wait(601, 0.021) + 0.021 > 1.66  # the switch confirms by then
    assert straggler_wait(21, 1.0) == 4.0  # four times what the others took, if longer
