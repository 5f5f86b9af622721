"""How the switches (Open vSwitch bridges) came to a starting controller, from ovs-vswitchd's
own log (``rconn``): per start, when each bridge tried, connected, and how long it backed off
between tries. A start's time is the controller's work and the switches' reconnect back-off
(1, 2, 4, 8 s, or 1 s once ``max_backoff`` took: ``reconcile.backoff_takes``); the controller's
side is its CPU and its wait for one (``scale.Meter``), this is the switches' side, by Open
vSwitch's clock. ``benchmarks.scale`` records it for the first start and the restart
(``*_switch_connects``).
"""
from __future__ import annotations

import calendar
import os
import re

OVS_LOG = "/var/log/openvswitch/ovs-vswitchd.log"
_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)Z\|\d+\|rconn\|\w+\|"
                   r"([^<|]+)<->\S+: (.*)$")
_WAIT = re.compile(r"waiting (\d+) seconds before reconnect")


def log_end(path: str = OVS_LOG) -> int | None:
    """The log's size now: where a start's lines begin (None: no log to read)."""
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def _wall(stamp: str) -> float:
    """Seconds since the epoch of an Open vSwitch log time stamp (UTC).

    >>> _wall("1970-01-01T00:00:01.250")
    1.25
    """
    whole, _, frac = stamp.partition(".")
    return calendar.timegm(tuple(map(int, re.split(r"[-T:]", whole))) + (0, 0, 0)) + float(
        "0." + (frac or "0"))


def events(lines, bridges: set[str], since: float) -> dict[str, list[tuple[float, str]]]:
    """Per bridge of ``bridges``, its rconn lines at or after ``since`` (epoch seconds): (seconds
    after ``since``, what it said).

    >>> events(["2026-11-29T17:00:01.500Z|00001|rconn|INFO|l0<->tcp:127.0.0.1:6653: connected",
    ...         "2026-11-29T17:00:00.500Z|00002|rconn|INFO|l0<->tcp:127.0.0.1:6653: connecting..."],
    ...        {"l0"}, _wall("2026-11-29T17:00:01.000"))
    {'l0': [(0.5, 'connected')]}
    """
    out: dict[str, list[tuple[float, str]]] = {}
    for line in lines:
        m = _LINE.match(line)
        if m is None or m.group(2) not in bridges:
            continue
        t = _wall(m.group(1)) - since
        if t >= 0:
            out.setdefault(m.group(2), []).append((round(t, 3), m.group(3).strip()))
    return out


def summary(by_bridge: dict[str, list[tuple[float, str]]], bridges: int) -> dict:
    """What the switches did: how many connected, when the first and the last did (seconds
    after the start), tries refused or timed out (the controller not answering yet), and the
    back-offs Open vSwitch announced (the longest, and how many bridges waited more than 1 s).

    >>> summary({"l0": [(0.1, "connection failed (Connection refused)"),
    ...                 (0.1, "waiting 2 seconds before reconnect"), (2.1, "connected")],
    ...          "l1": [(0.9, "connected")]}, 2)["last_connected_s"]
    2.1
    """
    connected = {b: next((t for t, what in ev if what == "connected"), None)
                 for b, ev in by_bridge.items()}
    times = sorted(t for t in connected.values() if t is not None)
    waits = {b: [int(m.group(1)) for _, what in ev if (m := _WAIT.search(what))]
             for b, ev in by_bridge.items()}
    failed = sum(1 for ev in by_bridge.values() for _, what in ev
                 if what.startswith(("connection failed", "connection timed out")))
    return {"bridges": bridges, "connected": len(times),
            "first_connected_s": times[0] if times else None,
            "last_connected_s": times[-1] if times else None,
            "tries_failed": failed,
            "longest_backoff_s": max((w for ws in waits.values() for w in ws), default=0),
            "bridges_backed_off_over_1s": sum(1 for ws in waits.values() if any(w > 1 for w in ws))}


def since_start(start: tuple[int | None, float], bridges: list[str],
                path: str = OVS_LOG) -> dict | None:
    """``summary`` of the bridges' rconn lines written since ``start`` (``log_end()`` and the
    epoch time just before the controller started); None without a log."""
    offset, wall = start
    if offset is None:
        return None
    try:
        with open(path, errors="replace") as fh:
            fh.seek(offset)
            lines = fh.read().splitlines()
    except OSError:
        return None
    return summary(events(lines, set(bridges), wall), len(bridges))
