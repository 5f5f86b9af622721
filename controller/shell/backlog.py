"""A listen backlog that holds a whole fabric connecting at once.

Ryu and os-ken open their OpenFlow listener with eventlet's default backlog of 50. When a
restarted controller comes back, every switch of the fabric connects within a second; past the
first 50 unaccepted connections the kernel drops the handshakes, and those switches retry only
after TCP's retransmission timeout (1 s, then 3 s, 7 s): on a k = 16 fat-tree (320 switches)
138 of them waited 2.6 s. ``widen_backlog`` makes the framework's ``StreamServer`` listen with
``BACKLOG`` (the kernel caps it at ``net.core.somaxconn``); the framework's adapter applies it
to its own controller module before the listener opens.

    >>> class Socket:
    ...     def listen(self, n): self.backlog = n
    >>> class StreamServer:
    ...     def __init__(self, info): self.server = Socket()
    >>> class Module: StreamServer = StreamServer
    >>> widen_backlog(Module, 1024)
    >>> Module.StreamServer(("0.0.0.0", 6653)).server.backlog
    1024
"""
from __future__ import annotations

BACKLOG = 1024  # connections the kernel holds until the event loop accepts them


def widen_backlog(controller_module, backlog: int = BACKLOG) -> None:
    """Replace ``controller_module.StreamServer`` (the name the framework's OpenFlow
    controller opens its listener with) by a subclass that listens again with ``backlog``
    (listen() on a listening socket only changes its backlog). Idempotent."""
    base = controller_module.StreamServer
    if getattr(base, "mlroute_backlog", None) == backlog:
        return

    class WideStreamServer(base):
        mlroute_backlog = backlog

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.server.listen(backlog)

    controller_module.StreamServer = WideStreamServer
