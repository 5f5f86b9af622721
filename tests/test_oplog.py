"""The operator's log of a normal session, in process (issue 61): switches connected and lost
(one line per batch), the declared fabric checked or a fabric found, a job added, refused and
removed, a re-plan with its cause; and ``--mlroute-quiet``. The listen line is tested with the
launcher (``test_launch.py``)."""
from __future__ import annotations

import json
import logging
import types
from collections import deque

import pytest

from controller.model.clos import Clos
from controller.service import api, oplog
from controller.service.route_service import RouteService
from controller.shell import core
from controller.shell.core import Shell
from controller.shell.hub import Hub
from controller.shell.switchlog import SwitchLog
from emulation.harness.fake_switch import FakeSwitches
from tests.helpers import FakeClock
from tests.test_zero_config import deliver, found_with_no_file, hosts_speak


class HeldSwitches:
    """The shell's switch connections, as far as the provisioning worker asks."""

    def __init__(self):
        self.dps = {}

    def holds(self, dp) -> bool:
        return self.dps.get(dp.id) is dp

    def disconnected(self, dp) -> bool:
        return self.dps.pop(dp.id, None) is dp


def shell_over(svc: RouteService, clock: FakeClock) -> Shell:
    """A shell around ``svc`` with only what switch events use: no sockets, no framework;
    its hub runs what it spawns at once and sleeps on the fake clock."""
    shell = Shell.__new__(Shell)
    shell.service, shell._running = svc, True
    shell.hub = Hub(spawn=lambda fn, *a: fn(*a), sleep=clock.sleep, Event=None)
    shell.switches = HeldSwitches()
    shell.roles = None
    shell._connecting, shell._provisioning = deque(), False
    shell._syncers, shell._syncers_lock = 0, __import__("threading").Lock()
    shell._wake = types.SimpleNamespace(set=lambda: None)
    shell.switchlog = SwitchLog(shell.hub, shell.name, clock=clock)
    return shell


def connect_all(shell: Shell, f: Clos) -> None:
    """Every switch of ``f`` connects at once, as the framework reports it (port description
    queued, one provisioning worker)."""
    for name, dpid in f.dpids.items():
        dp = types.SimpleNamespace(id=dpid)
        shell.switches.dps[dpid] = dp
        shell._connecting.append((dp, {p: True for n in f.ports[name]
                                       for p in f.ports_to(name, n)}, None))
    shell._provision_queued()


def lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "mlroute"]


def post(svc, doc) -> tuple[int, dict]:
    return api.handle(svc, "POST", "/v1/jobs", json.dumps(doc).encode())


def test_a_normal_session_on_a_declared_fabric_is_in_the_log(caplog):
    caplog.set_level(logging.INFO, logger="mlroute")
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    clock = FakeClock()
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, f, clock=clock, sleep=clock.sleep, algorithm="greedy")
    shell = shell_over(svc, clock)
    connect_all(shell, f)
    for _ in range(2):
        svc.tick()
        deliver(f, svc, sw)
    hosts_speak(f, svc)
    clock.now += 3
    svc.tick()
    code, _ = post(svc, {"id": "a", "collective": "ring_allreduce",
                         "ranks": ["h0_0", "h1_0", "h2_0", "h3_0"], "bytes": 8e6})
    assert code == 201
    code, _ = post(svc, {"id": "b", "collective": "ring_allreduce",
                         "ranks": ["h0_0", "nobody"], "bytes": 8e6})
    assert code == 400
    assert api.handle(svc, "DELETE", "/v1/jobs/a")[0] == 200
    dp = shell.switches.dps[f.dpids["s0"]]
    shell.switch_dead(dp)
    got = lines(caplog)
    connected = [x for x in got if " connected: " in x]
    assert connected == ["mlroute: 6 switches connected: l0, l1, l2, l3, s0, s1"], got
    assert "mlroute: the declared fabric matches what is seen" in got
    added = [x for x in got if x.startswith("mlroute: job a added: ")]
    assert len(added) == 1 and "4 flows, algorithm greedy" in added[0], got
    assert any(x.startswith("mlroute: job b refused (400): ") and "nobody" in x for x in got)
    assert any(x.startswith("mlroute: job a removed") for x in got), got
    assert "mlroute: 1 switch lost: s0" in got
    # nothing is said per switch as it connects, and the wiring once
    assert not any("switch l0 connected" in x for x in got if x.startswith("mlroute: switch"))
    assert got.count("mlroute: the declared fabric matches what is seen") == 1
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "mlroute")


def test_a_found_fabric_and_a_replan_with_its_cause_are_in_the_log(caplog):
    caplog.set_level(logging.INFO, logger="mlroute")
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    svc, sw, clock = found_with_no_file(f, 10.0)
    found = [x for x in lines(caplog) if x.startswith("mlroute: fabric discovered: ")]
    assert found == ["mlroute: fabric discovered: 2 tiers: 2 spines, 4 leaves, 8 hosts, "
                     "0 links down"], lines(caplog)
    code, view = post(svc, {"id": "a", "collective": "ring_allreduce",
                            "ranks": ["h0_0", "h1_0", "h2_0", "h3_0"], "bytes": 8e6})
    assert code == 201
    spine = view["routes"][0]["spine"]
    caplog.clear()
    svc.ports_changed([(f.dpids["l0"], f.port("l0", spine), False, None)])
    replans = [x for x in lines(caplog) if "re-planned the auto group (jobs a)" in x]
    assert len(replans) == 1 and replans[0].startswith(f"mlroute: port l0:{f.port('l0', spine)}"
                                                       f" to {spine} down: "), lines(caplog)


def test_switches_connected_together_are_one_line_however_many():
    said = []
    clock = FakeClock()
    log = SwitchLog(Hub(spawn=lambda fn, *a: fn(*a), sleep=clock.sleep, Event=None),
                    lambda d: f"sw{d}", clock=clock)
    original = oplog.switches
    oplog.switches = lambda what, named: said.append((what, len(named))) if named else None
    try:
        log.connected(range(320))
    finally:
        oplog.switches = original
    assert said == [("connected", 320)]
    assert oplog.names([f"sw{i}" for i in range(320)]).endswith(" and 312 more")


@pytest.mark.parametrize("quiet", [True, False])
def test_quiet_keeps_warnings_and_errors_only(quiet):
    mlroute, root = logging.getLogger("mlroute"), logging.getLogger()
    levels = mlroute.level, root.level
    try:
        assert core.quiet(types.SimpleNamespace(mlroute_quiet=quiet)) is quiet
        if quiet:
            assert not mlroute.isEnabledFor(logging.INFO)
            assert not root.isEnabledFor(logging.INFO)  # the framework's lines too
        else:
            assert (mlroute.level, root.level) == levels
        assert mlroute.isEnabledFor(logging.WARNING)
    finally:
        mlroute.setLevel(levels[0])
        root.setLevel(levels[1])
