"""Refuse to start beside another controller: is a TCP port already listened on?

Ryu's eventlet binds its OpenFlow listeners with SO_REUSEPORT, so a second ryu-manager would bind
6653 without error and the switches would split between the two processes. A probe socket
without SO_REUSEPORT cannot bind an address that any socket listens on, which tells us. The
REST port (mlroute's own server, ``controller/shell/rest.py``) is checked at the same time, so
either framework refuses to start beside another controller before anything listens.
"""
from __future__ import annotations

import errno
import socket


def taken(host: str, port: int) -> bool:
    """True if some socket listens on (host, port). O(1); SO_REUSEADDR ignores TIME_WAIT."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def check_free(addresses: list[tuple[str, int, str]]) -> None:
    """Raise SystemExit naming the first (host, port, what) that another process listens on."""
    for host, port, what in addresses:
        if taken(host, port):
            raise SystemExit(f"mlroute: {what} port {host or '*'}:{port} is in use by another "
                             "process (another controller?): stop it or choose other ports")
