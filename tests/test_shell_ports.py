"""The shell's port changes (``core.Shell.port_status``, ``_report_ports``): one worker hands
the service every change waiting at once, so the links a lost switch takes down together are
re-planned together (``RouteService.ports_changed``), and changes that arrive while the service
works make the next batch; none is lost."""
from __future__ import annotations

from collections import deque
from types import SimpleNamespace

from controller.shell.core import PORT_GATHER, PORT_GATHER_MAX, PORT_LOSS_MAX, Shell
from controller.shell.hub import Hub


class Service:
    def __init__(self, shell, arrive: list):
        self.shell, self.arrive, self.batches, self.detected = shell, arrive, [], []
        self.now = 100.0
        self.going = lambda changes: False  # decide.switch_going's answer
        self.asked: list[int] = []

    def more_ports_coming(self, changes) -> bool:
        self.asked.append(len(changes))
        return self.going(changes)

    def clock(self) -> float:
        self.now += 1.0
        return self.now

    def ports_changed(self, batch, detected):
        self.batches.append(list(batch))
        self.detected.append(detected)
        for msg in self.arrive:  # arrive while the service works on this batch
            self.shell.port_status(msg)
        self.arrive = []


def status(dpid: int, port: int, up: bool):
    ofproto = SimpleNamespace(OFPPR_DELETE=1, OFPPR_MODIFY=2, OFPPC_PORT_DOWN=1,
                              OFPPS_LINK_DOWN=1)
    desc = SimpleNamespace(port_no=port, config=0, state=0 if up else 1, curr_speed=10_000)
    return SimpleNamespace(datapath=SimpleNamespace(id=dpid, ofproto=ofproto), reason=2,
                           desc=desc)


shell_sleeps: list[float] = []


def shell_with(arrive: list, sleep=shell_sleeps.append) -> tuple[Shell, Service, list]:
    spawned = []  # run by hand: the framework's loop would run them after the handler
    shell = Shell.__new__(Shell)  # only what the port path uses: no sockets, no framework
    shell.hub = Hub(spawn=lambda fn, *a: spawned.append((fn, a)), sleep=sleep, Event=None)
    shell._running, shell._reporting = True, False
    shell._ports = deque()
    shell.service = Service(shell, arrive)
    return shell, shell.service, spawned


def run(spawned: list) -> None:
    while spawned:
        fn, args = spawned.pop(0)
        fn(*args)


def test_port_changes_waiting_together_reach_the_service_as_one_batch():
    later = [status(9, p, False) for p in (1, 2)]
    shell, service, spawned = shell_with(later)
    for port in range(1, 17):  # a switch lost: its 16 neighbours' ports, back to back
        shell.port_status(status(port, 1, False))
    assert len(spawned) == 1  # one worker, however many arrive
    shell_sleeps.clear()
    run(spawned)
    assert shell_sleeps[0] == PORT_GATHER  # the first waits for those that come with it
    assert [len(b) for b in service.batches] == [16, 2]  # those that came meanwhile: next
    assert service.detected[0] == 101.0  # when the first of the batch arrived
    assert service.batches[0][0] == (1, 1, False, 10_000)
    assert service.batches[1] == [(9, 1, False, 10_000), (9, 2, False, 10_000)]
    assert not shell._reporting and not shell._ports
    shell.port_status(status(3, 4, True))  # a later change starts a worker again
    run(spawned)
    assert service.batches[-1] == [(3, 4, True, 10_000)]


def test_the_first_change_waits_until_none_came_for_a_while_and_no_longer_than_a_bound():
    """A lost switch's neighbours report over a few hundred ms where Open vSwitch applies the
    deletions one by one: a batch gathers until ``PORT_GATHER`` passed without a new one."""
    sleeps, due = [], [[status(2, 1, False)], [status(3, 1, False), status(4, 1, False)]]

    def sleep(seconds):  # more arrive during the first two waits, none during the third
        sleeps.append(seconds)
        for msg in due.pop(0) if due else []:
            shell.port_status(msg)
    shell, service, spawned = shell_with([], sleep)
    shell.port_status(status(1, 1, False))
    run(spawned)
    assert sleeps[:3] == [PORT_GATHER] * 3 and [len(b) for b in service.batches] == [4]
    assert service.detected == [101.0]

    sleeps.clear()  # a steady stream: the batch goes at PORT_GATHER_MAX
    due.extend([status(5, n, False)] for n in range(100))
    shell.port_status(status(1, 2, False))
    run(spawned)
    waits = round(PORT_GATHER_MAX / PORT_GATHER)
    assert sleeps[:waits + 1] == [PORT_GATHER] * waits + [0]  # then the batch went
    assert len(service.batches[1]) == waits + 1


def test_a_lost_switchs_first_reports_wait_for_the_others_up_to_a_bound():
    """Reports that look like a lost switch's (the service says more are coming) keep the
    batch open through a quiet spell, until they stop looking so, or ``PORT_LOSS_MAX``."""
    sleeps, due = [], [[status(2, 1, False)], [], [], [], [status(3, 1, False)]]

    def sleep(seconds):  # a burst, 80 ms of quiet, the rest
        sleeps.append(seconds)
        for msg in due.pop(0) if due else []:
            shell.port_status(msg)
    shell, service, spawned = shell_with([], sleep)
    service.going = lambda changes: len(changes) < 3  # the switch has three links
    shell.port_status(status(1, 1, False))
    run(spawned)
    assert [len(b) for b in service.batches] == [3]  # one batch: one re-plan
    assert sleeps == [PORT_GATHER] * 5 + [0]  # the third came: went at once

    sleeps.clear()  # the others never come: the batch goes at the bound
    service.going = lambda changes: True
    shell.port_status(status(1, 2, False))
    run(spawned)
    assert sleeps == [PORT_GATHER] * round(PORT_LOSS_MAX / PORT_GATHER) + [0]
    assert [len(b) for b in service.batches] == [3, 1]


def test_a_single_link_failure_is_not_kept_waiting():
    shell, service, spawned = shell_with([], shell_sleeps.append)
    shell_sleeps.clear()
    shell.port_status(status(1, 1, False))
    run(spawned)
    assert shell_sleeps == [PORT_GATHER, 0] and service.asked == [1]
