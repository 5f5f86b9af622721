"""What this host sent, per destination: the agent's matrix source for fabrics whose routers
export no packet samples (``POST /v1/hosts/{host}/traffic``).

Why sockets and not packets: the kernel already counts every TCP connection's acknowledged
bytes (``tcp_info.tcpi_bytes_acked``, read with sock_diag), so a read costs one netlink
request per interval, needs no rule per flow and is exact: a report is what sFlow would say
at a sampling rate of 1 at the source, counted once. Only what this host sent is counted
(the data direction); a connection that closes between two reads loses at most one
interval's bytes. TCP only: RDMA NICs count their queue pairs themselves.

>>> sent = SentBytes()
>>> sent.delta([(1, "10.0.0.1", "10.0.1.1", 5000, 4)])  # the first read is the baseline
{}
>>> sent.delta([(1, "10.0.0.1", "10.0.1.1", 9000, 7), (2, "10.0.0.1", "10.0.1.1", 100, 1)])
{('10.0.0.1', '10.0.1.1'): [4100, 4]}
"""
from __future__ import annotations

import socket

# the states in which a connection's acknowledged bytes may still grow: ESTABLISHED,
# FIN_WAIT1, FIN_WAIT2, CLOSE_WAIT, LAST_ACK, CLOSING (1 << the kernel's TCP state number)
TCP_ACTIVE = sum(1 << s for s in (1, 4, 5, 8, 9, 11))
INET_DIAG_INFO = 1 << 1  # sock_diag extension: struct tcp_info


class SentBytes:
    """Per socket (its cookie), the acknowledged bytes and data segments last read; ``delta``
    returns what every (source, destination) address pair sent since the last read. The
    first read only sets the baseline: connections open before the agent started would
    otherwise report their whole history as one interval's traffic."""

    def __init__(self):
        self.last: dict[int, tuple[int, int]] | None = None

    def delta(self, sockets) -> dict[tuple[str, str], list[int]]:
        """``sockets``: (cookie, source, destination, bytes acknowledged, data segments out)."""
        first, now, out = self.last is None, {}, {}
        last = self.last or {}
        for cookie, src, dst, acked, segs in sockets:
            now[cookie] = (acked, segs)
            b0, s0 = last.get(cookie, (0, 0))
            if first or acked <= b0:
                continue
            entry = out.setdefault((src, dst), [0, 0])
            entry[0] += acked - b0
            entry[1] += max(segs - s0, 1)
        self.last = now
        return out


def read_tcp() -> list[tuple[int, str, str, int, int]]:
    """This network namespace's IPv4 TCP connections that may still send (sock_diag)."""
    from pyroute2 import DiagSocket
    with DiagSocket() as ds:
        ds.bind()
        found = ds.get_sock_stats(family=socket.AF_INET, states=TCP_ACTIVE,
                                  extensions=INET_DIAG_INFO)
    out = []
    for m in found:
        info = m.get_attr("INET_DIAG_INFO")
        if info:
            out.append((m["idiag_cookie"], m["idiag_src"], m["idiag_dst"],
                        info.get("tcpi_bytes_acked", 0), info.get("tcpi_data_segs_out", 0)))
    return out


def report(pairs: dict, interval_s: float, sources=None) -> dict:
    """The body of ``POST /v1/hosts/{host}/traffic`` for ``pairs`` (from ``delta``), only
    the ``sources`` given (this host's fabric addresses: not its management connections).

    >>> report({("10.0.0.1", "10.0.1.1"): [4100, 4], ("172.30.0.1", "172.30.255.254"): [9, 1]},
    ...        1.0, {"10.0.0.1"})
    {'interval_s': 1.0, 'pairs': [{'src': '10.0.0.1', 'dst': '10.0.1.1', 'bytes': 4100, 'packets': 4}]}
    """
    return {"interval_s": round(interval_s, 3),
            "pairs": [{"src": s, "dst": d, "bytes": b, "packets": n}
                      for (s, d), (b, n) in sorted(pairs.items())
                      if sources is None or s in sources]}
