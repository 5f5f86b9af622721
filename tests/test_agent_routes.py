"""The agent keeps its routes (``agent/routes.py``; issue 75, point 8) against a fake kernel:
what the kernel dropped is put back at WARNING, nothing is read or run while nothing is
missing, nothing is tried while the device is down or once SIGTERM came, and SIGTERM removes
every rule and table even when the kernel changes under its batch. The real kernel's side:
tests/test_agent_routes_live.py."""
import logging
import struct
import threading

from controller.agent import routes
from controller.agent.routes import RouteKeeper, changes
from tests.test_agent_safety import DEV, FakeKernel, agent_on, document


def installed(kernel=None):
    kernel = kernel or FakeKernel()
    agent = agent_on(kernel, [document()])
    agent.have = agent.read()
    agent.step(wait=0)
    assert len(kernel.routes) == 2 and len(kernel.rules) == 2
    return kernel, agent


def test_routes_the_kernel_dropped_come_back_at_warning(caplog):
    kernel, agent = installed()
    keeper = RouteKeeper(DEV)
    try:
        kernel.routes.clear()  # the port went down: the rules stay, on empty tables
        with caplog.at_level(logging.WARNING, logger="mlroute-agent"):
            assert keeper.restore(agent) > 0
        assert len(kernel.routes) == 2 and len(kernel.rules) == 2
        assert agent.read() == agent.have and all(m[0] != "rule" for m in agent.have)
        tables = {int(r["table"]) for rules in kernel.rules.values() for r in rules}
        assert tables == {int(t) for t, _dst in kernel.routes}  # every rule finds its route
        assert "the kernel dropped 2 of the 2 parts' routes" in caplog.text
        lines = len(kernel.lines)
        assert keeper.restore(agent) == 0 and len(kernel.lines) == lines  # nothing missing
    finally:
        keeper.close()


def test_nothing_is_put_back_once_sigterm_came():
    kernel, agent = installed()
    keeper = RouteKeeper(DEV)
    try:
        kernel.routes.clear()
        agent.stopping.set()
        assert keeper.restore(agent) == 0 and not kernel.routes
    finally:
        keeper.close()


def _link(index: int, up: bool) -> bytes:
    return struct.pack("=IHHII", 32, routes.RTM_NEWLINK, 0, 0, 0) + \
        struct.pack("=BxHiII", 0, 1, index, int(up), 0)


def test_a_burst_of_messages_is_read_whole_and_other_devices_are_ignored():
    route = struct.pack("=IHHII", 28, routes.RTM_NEWLINK + 8, 0, 0, 0) + bytes(12)  # NEWROUTE
    assert changes(route, {3}) == (False, {})
    assert changes(_link(4, False) + _link(3, False) + _link(3, True), {3}) == (True, {3: True})
    assert changes(_link(4, False) + _link(3, True), {3, 4}) == (True, {3: True, 4: False})
    assert changes(b"\x00" * 8, {3}) == (False, {})  # truncated: nothing


def test_the_loop_waits_while_the_device_is_down_and_restores_once_it_is_up(monkeypatch):
    kernel, agent = installed()
    keeper = RouteKeeper(DEV)
    events = [(True, False), (True, None), (True, True)]  # down, a route gone, up
    seen = []

    def wait(timeout):
        if not events:
            agent.stopping.set()
            return False
        touched, up = events.pop(0)
        if up is not None:
            keeper.up = up
        seen.append((keeper.up, len(kernel.routes)))
        return touched
    monkeypatch.setattr(keeper, "wait", wait)
    kernel.routes.clear()
    keeper.loop(agent)
    assert seen == [(False, 0), (False, 0), (True, 0)]  # nothing tried while down
    assert len(kernel.routes) == 2 and agent.read() == agent.have


def test_sigterm_removes_everything_when_a_route_vanishes_under_its_batch():
    """The kernel flushed a table between the agent's read and its batch: the batch stops at
    that route's delete; the agent reads again and removes the rest."""
    kernel, agent = installed()
    real = kernel.apply
    calls = []

    def flushing(lines):
        calls.append(lines)
        if len(calls) == 1:
            kernel.routes.clear()  # meanwhile, the device went down
        real(lines)
    agent.apply = flushing
    agent.remove_all()
    assert len(calls) == 2 and not kernel.rules and not kernel.routes and agent.have == {}


def test_the_keepers_socket_hears_the_hosts_route_changes():
    """A real netlink socket (no root needed): bound, it answers ``wait`` in time."""
    keeper = RouteKeeper(DEV)
    try:
        done = threading.Event()
        threading.Thread(target=lambda: (keeper.wait(0.05), done.set()), daemon=True).start()
        assert done.wait(5)
    finally:
        keeper.close()
