"""The agent's encapsulation routes kept in the kernel: the host's port set down (a cable
pulled, ``ip link set DEV down``) makes the kernel delete every IPv4 route through it, the
agent's tables' too, while its policy rules stay, pointing at empty tables: the flows then
fall back to the routers' ECMP and the probes (which name their paths themselves) notice
nothing. ``RouteKeeper`` puts back what the kernel dropped, at WARNING.

Why a netlink monitor and not a check each probe round: IPv4's flush on a device going
down sends no message per route, but the device's own message comes (``RTMGRP_LINK``), and
a route or rule deleted by hand does send one (``RTMGRP_IPV4_ROUTE``, ``_RULE``). So the
agent reads its state back (``kernel.read_installed``: two ``ip -j`` processes, 4 ms for
one part and 44 ms for 1,000, measured in a namespace on Linux 6.18) only when something
changed: nothing while nothing does, where a check each probe round (30 ms) would cost
that read every round (the 1,000 parts' read alone longer than the round), and a check a
second would leave the flows on ECMP for up to that second.

The kernel refuses a route through a device that is down ("Device for nexthop is not up"):
while it is down nothing is tried; once it is up (its next message says so) the routes go
back at once. A re-install the kernel refuses is tried again after a back-off (0.5 s
doubling to 10 s).
"""
from __future__ import annotations

import logging
import select
import socket
import struct

from controller.errors import InputError

LOG = logging.getLogger("mlroute-agent")
RTMGRP_LINK, RTMGRP_IPV4_ROUTE, RTMGRP_IPV4_RULE = 0x1, 0x40, 0x10000000
RTM_NEWLINK, RTM_DELLINK, RTM_DELROUTE, RTM_DELRULE = 16, 17, 25, 33
IFF_UP = 0x1
SETTLE_S = 0.05  # after a message, more of the same burst are awaited this long
BACKOFF = (0.5, 10.0)


def changes(data: bytes, ifindex) -> tuple[bool, dict[int, bool]]:
    """Of a netlink datagram: (whether it may have taken something of the agent's away, the
    IFF_UP of each of the agent's devices (``ifindex``: their indices) a message says).

    >>> link = struct.pack("=IHHII", 32, RTM_NEWLINK, 0, 0, 0) + struct.pack("=BxHiII", 0, 1, 3, 0, 0)
    >>> changes(link, {3}), changes(link, {4})
    ((True, {3: False}), (False, {}))
    >>> changes(struct.pack("=IHHII", 16, RTM_DELROUTE, 0, 0, 0), {3})
    (True, {})
    """
    touched, up, at = False, {}, 0
    while at + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, at)
        if length < 16:
            break
        if kind in (RTM_NEWLINK, RTM_DELLINK) and at + 32 <= len(data):
            _family, _type, index, flags, _change = struct.unpack_from("=BxHiII", data, at + 16)
            if index in ifindex:
                touched, up[index] = True, kind == RTM_NEWLINK and bool(flags & IFF_UP)
        elif kind in (RTM_DELROUTE, RTM_DELRULE):
            touched = True
        at += (length + 3) & ~3
    return touched, up


def _names(indices) -> str:
    names = []
    for i in sorted(indices):
        try:
            names.append(socket.if_indextoname(i))
        except OSError:
            names.append(f"interface {i}")  # gone since
    return ", ".join(names)


class RouteKeeper:
    """A netlink socket of the host's route changes; ``loop(agent)`` re-installs what the
    kernel dropped of ``agent``'s (under its lock) until the agent stops."""

    def __init__(self, dev):
        self.devs = (dev,) if isinstance(dev, str) else tuple(dev)  # one per plane
        self.down: set[int] = set()  # the devices whose last message said down
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        self.sock.bind((0, RTMGRP_LINK | RTMGRP_IPV4_ROUTE | RTMGRP_IPV4_RULE))
        self.up = True
        self.went_down: set[int] = set()  # devices seen down since the last restore
        self.restored = 0  # routes and rules put back so far

    def close(self) -> None:
        self.sock.close()

    def _index(self) -> set[int]:
        out = set()
        for dev in self.devs:
            try:
                out.add(socket.if_nametoindex(dev))
            except OSError:
                pass  # not there (yet): its messages name it by index once it is
        return out

    def wait(self, timeout: float | None) -> bool:
        """Whether something of the agent's may have gone within ``timeout`` (None: until a
        message), messages of one burst read together."""
        index, touched = self._index(), False
        while select.select([self.sock], [], [], timeout)[0]:
            try:
                data = self.sock.recv(1 << 16)
            except OSError:  # ENOBUFS: messages lost, so something may have changed
                touched = True
                continue
            hit, up = changes(data, index)
            touched = touched or hit
            for i, is_up in up.items():
                (self.down.discard if is_up else self.down.add)(i)
                if not is_up:
                    self.went_down.add(i)
            self.up = not self.down  # (a device still down: its routes could not go back)
            timeout = SETTLE_S
        return touched

    def restore(self, agent) -> int:
        """What the kernel lacks of ``agent``'s installed state, put back (under its lock);
        the number of lines run (0: nothing was missing). InputError if the kernel refused."""
        with agent.lock:
            if agent.stopping.is_set():  # SIGTERM: ``remove_all`` has the last word
                return 0
            now = agent.read()
            if now == agent.have:
                return 0
            lost = sum(1 for m, i in agent.have.items() if now.get(m) != i)
            agent.have = now  # what the kernel holds: the install goes from there
            _, lines = agent._install()
        LOG.warning("mlroute-agent: the kernel dropped %d of the %d parts' routes or rules "
                    "(%s); re-installed them (%d commands)", lost, len(agent.steers),
                    f"{_names(self.went_down)} went down and up" if self.went_down else "deleted",
                    len(lines))
        self.restored += len(lines)
        self.went_down = set()
        return len(lines)

    def loop(self, agent) -> None:
        """Until ``agent.stopping``: wait for a change, then ``restore`` while the device is
        up; a refused re-install is tried again after a back-off."""
        pending, delay = False, BACKOFF[0]
        try:
            while not agent.stopping.is_set():
                pending = self.wait(delay if pending else 1.0) or pending
                if not pending or not self.up or agent.stopping.is_set():
                    continue
                try:
                    self.restore(agent)
                    pending, delay = False, BACKOFF[0]
                except InputError as e:
                    agent._say("restore", logging.WARNING, "mlroute-agent: re-installing "
                               f"the routes the kernel dropped: {e}; trying again")
                    delay = min(delay * 2, BACKOFF[1])
        finally:
            self.close()
