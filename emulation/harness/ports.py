"""Free TCP ports for the processes a test or a benchmark starts (a controller's OpenFlow and
REST ports, an etcd member's), as the system hands them out: fixed ports inside the
ephemeral range were taken at times by another process's outgoing connection."""
from __future__ import annotations

import socket


def free_ports(n: int, host: str = "127.0.0.1", udp: bool = False) -> list[int]:
    """``n`` distinct ports no socket holds now on ``host`` (bound together, then released);
    TCP ports, or UDP ones (``udp``: a collector's).

    >>> a, b = free_ports(2); a != b and 0 < a < 65536
    True
    """
    kind = socket.SOCK_DGRAM if udp else socket.SOCK_STREAM
    socks = [socket.socket(socket.AF_INET, kind) for _ in range(n)]
    try:
        for s in socks:
            s.bind((host, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port(host: str = "127.0.0.1") -> int:
    """One port nobody listens on now: a controller that is not there, or one to start."""
    return free_ports(1, host)[0]
