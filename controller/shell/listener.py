"""The OpenFlow listener: opened before the controller's own imports, with a backlog that holds
a whole fabric connecting at once.

Open vSwitch retries a lost controller 1, 2, 4 and 8 s after it went (3.1 applies a record's
``max_backoff`` to a connection only at a reconfigure while it is up: docs/explanation/
environment-notes.md), and each try waits as long as its back-off for the controller's HELLO.
The framework opens its listener only once the apps are built: about 1.1 s after a restart,
0.8 s of it importing mlroute (scipy, networkx, etcd3gw) and building the shell, so the
switches' try at 1 s was refused and they came back at 3 s. ``open_early`` binds the ports
first (before those imports); the kernel completes the switches' handshakes into the backlog,
and the framework's listener, when it opens, adopts the early socket and answers them well
within their back-off.

Ryu and os-ken open their OpenFlow listener with eventlet's (or their own) default backlog of
50. When a restarted controller comes back, every switch of the fabric connects within a
second; past the first 50 unaccepted connections the kernel drops the handshakes, and those
switches retry only after TCP's retransmission timeout (1 s, then 3 s, 7 s): on a k = 16
fat-tree (320 switches) 138 of them waited 2.6 s. ``adopt_listeners`` makes the framework's
``StreamServer`` listen with ``BACKLOG`` (the kernel caps it at ``net.core.somaxconn``) on
the early socket where there is one; the framework's adapter applies it to its own controller
module before the listener opens.

    >>> class Socket:
    ...     def listen(self, n): self.backlog = n
    >>> class StreamServer:
    ...     def __init__(self, info, handle=None): self.server = Socket()
    >>> class Module: StreamServer = StreamServer
    >>> adopt_listeners(Module, 1024)
    >>> Module.StreamServer(("0.0.0.0", 6653)).server.backlog
    1024
"""
from __future__ import annotations

import errno
import fcntl
import os
import socket

BACKLOG = 1024  # connections the kernel holds until the event loop accepts them
_EARLY: dict[tuple[str, int], socket.socket] = {}  # (host, port): listening, not yet adopted


def open_early(host: str, ports: list[int], backlog: int = BACKLOG) -> None:
    """Listen on ``ports`` of ``host`` now, until the framework's listener adopts them.
    Raises SystemExit naming a port another process holds (as ``service.listen.check_free``:
    no SO_REUSEPORT, so a controller already there is found, not shared)."""
    for port in ports:
        if (host, port) in _EARLY:
            continue
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            s.listen(backlog)
        except OSError as e:
            s.close()
            if e.errno != errno.EADDRINUSE:
                raise
            raise SystemExit(f"mlroute: OpenFlow port {host or '*'}:{port} is in use by another "
                             "process (another controller?): stop it or choose other ports") from None
        _EARLY[(host, port)] = s


def plain_ports(conf, ports: list[int]) -> list[int]:
    """The OpenFlow ports to open early: none when the framework serves TLS (``ctl_privkey``
    and ``ctl_cert``: it then listens on its TLS port alone, and nothing would adopt a plain
    one).

    >>> from types import SimpleNamespace as Conf
    >>> plain_ports(Conf(ctl_privkey=None, ctl_cert=None), [6653, 6633])
    [6653, 6633]
    >>> plain_ports(Conf(ctl_privkey="k.pem", ctl_cert="c.pem"), [6653])
    []
    """
    tls = getattr(conf, "ctl_privkey", None) and getattr(conf, "ctl_cert", None)
    return [] if tls else list(ports)


def _adopt(server, early: socket.socket) -> None:
    """Make ``server`` (the framework's listening socket object, green or native) use
    ``early``'s socket: its file status flags (non-blocking for a green socket) copied onto
    it, then duplicated over ``server``'s descriptor, whose own socket closes."""
    fcntl.fcntl(early.fileno(), fcntl.F_SETFL, fcntl.fcntl(server.fileno(), fcntl.F_GETFL))
    os.dup2(early.fileno(), server.fileno())
    early.close()


def adopt_listeners(controller_module, backlog: int = BACKLOG) -> None:
    """Replace ``controller_module.StreamServer`` (the name the framework's OpenFlow
    controller opens its listener with) by a subclass that takes over the early socket of its
    address (the framework's own socket built on a free port first, so it has the
    framework's kind) and listens with ``backlog`` (listen() on a listening socket only
    changes its backlog). Idempotent."""
    base = controller_module.StreamServer
    if getattr(base, "mlroute_backlog", None) == backlog:
        return

    class WideStreamServer(base):
        mlroute_backlog = backlog

        def __init__(self, listen_info, *args, **kwargs):
            early = None if kwargs else _EARLY.pop(tuple(listen_info), None)  # not TLS
            if early is None:
                super().__init__(listen_info, *args, **kwargs)
            else:
                super().__init__((listen_info[0], 0), *args, **kwargs)
                _adopt(self.server, early)
            self.server.listen(backlog)

    controller_module.StreamServer = WideStreamServer
