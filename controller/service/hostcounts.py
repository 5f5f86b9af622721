"""What each host sent, from its agent (``POST /v1/hosts/{host}/traffic``): a source of
learned matrices beside sFlow, for fabrics whose routers export no samples (srv6 mode).

The agent reads its TCP connections' acknowledged bytes (``controller/agent/traffic.py``):
exact, at the source, once; the learner takes them as samples at a rate of 1 and drops the
reporting host's own sFlow samples (``TrafficLearner.count``).

A report speaks only for its host. Checked before anything is recorded (else a 400 that
names the problem, and nothing of the report counts):
* a source address of another host is a forgery (a host cannot add pairs to another's job);
* bytes and packets are finite, not negative; the interval is (0, 60] s;
* the report's bytes fit the host's links over the interval (with 10% and 1 MB to spare for
  a late read): a host cannot send more than its links carry. The interval is the one
  claimed only up to the time that passed since the host's previous report
  (``measurement.usual.ReportClock``): one report of 60 s at line rate, a second after the
  previous one, froze a job's learning for 114 windows (issue 74).
Pairs whose source or destination is no host of the fabric (the agent's own connection to the
controller, a storage network) are ignored and counted.

>>> from controller.model.clos import Clos
>>> f = Clos.leaf_spine(2, 2, 1, link_gbps=1).wire()
>>> parse({"interval_s": 1, "pairs": [{"src": "10.0.0.1", "dst": "10.0.1.1", "bytes": 9e4,
...        "packets": 60}]}, f, "h0_0")
([('10.0.0.1', '10.0.1.1', 90000.0, 60)], 0)
"""
from __future__ import annotations

import math

from controller.errors import InputError, NotFoundError

MAX_PAIRS = 4096
MAX_INTERVAL_S = 60.0
SLACK = (1.1, 1e6)  # a report may exceed the links' bytes by 10% and 1 MB (a late read)


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise InputError(f"traffic report: {what} must be a finite number >= 0, not {value!r}")
    return float(value)


def _owners(fabric) -> dict[str, str]:
    """Address -> its host, every plane's."""
    return {ip: h for h, ips in fabric.host_ips.items() for ip in ips if ip}


def parse(doc, fabric, host: str, believed=None) -> tuple[list[tuple[str, str, float, int]], int]:
    """The report's counts between hosts of ``fabric``, and the number of pairs ignored
    (an address of no host). ``believed(claimed) -> seconds``: the time the report may
    cover (``usual.ReportClock``; None: its claim). An InputError names what is wrong."""
    if not isinstance(doc, dict) or not isinstance(doc.get("pairs"), list):
        raise InputError("traffic report: expected an object with 'interval_s' and a list "
                         "'pairs'")
    if len(doc["pairs"]) > MAX_PAIRS:
        raise InputError(f"traffic report: at most {MAX_PAIRS} pairs")
    interval = _number(doc.get("interval_s"), "'interval_s'")
    if not 0 < interval <= MAX_INTERVAL_S:
        raise InputError(f"traffic report: 'interval_s' must be in (0, {MAX_INTERVAL_S:g}], "
                         f"not {interval:g}")
    owner = fabric.derived("host_of_address", _owners)  # once per fabric, not per report
    out, ignored, total = [], 0, 0.0
    for i, p in enumerate(doc["pairs"]):
        if not isinstance(p, dict) or not all(isinstance(p.get(k), str) for k in ("src", "dst")):
            raise InputError(f"traffic report: pair {i} needs 'src' and 'dst' addresses, "
                             "'bytes' and 'packets'")
        nbytes = _number(p.get("bytes"), f"pair {i}: 'bytes'")
        packets = _number(p.get("packets", 0), f"pair {i}: 'packets'")
        src, dst = p["src"], p["dst"]
        if owner.get(src, host) != host:
            raise InputError(f"traffic report: pair {i}: source {src} is {owner[src]}'s "
                             f"address, not {host}'s: a host reports only what it sent")
        if src not in owner or dst not in owner:
            ignored += 1
            continue
        total += nbytes
        out.append((src, dst, nbytes, int(packets)))
    links = max(1, len(fabric.host_leaves[host]))
    covered = interval if believed is None else believed(interval)
    cap = covered * links * fabric.link_bps("host") * SLACK[0] + SLACK[1]
    if total > cap:
        since = "" if covered == interval else \
            f" (it claims {interval:g} s; {covered:.3g} s at most since its previous report)"
        raise InputError(f"traffic report: {total:.0f} bytes in {covered:.3g} s{since} is more "
                         f"than {host}'s {links} link(s) carry ({cap:.0f} bytes at most)")
    return out, ignored


def counted(service, host: str, doc, now: float) -> dict:
    """POST /v1/hosts/{host}/traffic: add ``host``'s counts to the learned matrices at
    ``now`` (the service's monotonic clock, as sFlow samples are)."""
    fabric = service.state.fabric
    if fabric is None:
        raise InputError("no fabric yet: traffic reports need a fabric")
    if host not in fabric.host_leaves:
        raise NotFoundError(f"no host {host!r} in the fabric")
    learner = service.learning.learner

    def believed(claimed: float) -> float:
        return learner.reports.believed(host, claimed, now)
    counts, ignored = parse(doc, fabric, host, believed)
    learner.reports.note(host, believed(float(doc["interval_s"])), now)
    learner.count(counts, now)
    return {"host": host, "pairs": len(counts), "ignored": ignored}
