"""Link state from the hosts' probes, for fabrics without OpenFlow (``--mlroute-southbound
none``): each agent probes the paths it may use (``segments.probe_paths``) and reports which
answer; a link is down when a path through it fails and no path through it works.

Why both: a failed path names several links, and only the working paths around it tell which
one failed; a link that no working path clears stays down until a probe through it answers.
A host that reaches a leaf by no path at all takes nothing down (``PathEvidence.down``).

>>> ev = PathEvidence()
>>> ev.report("h0", [(["l0", "s0", "l1"], False), (["l0", "s1", "l1"], True),
...                  (["l0", "s0", "l2"], True)], now=0.0)
>>> sorted(ev.down(now=1.0))
[('s0', 'l1')]
>>> ev.report("h0", [(["l0", "s0", "l1"], False), (["l0", "s1", "l1"], False)], now=2.0)
>>> ev.down(now=2.0)  # every path to l1 fails: congestion or l1 itself, no link named
set()
"""
from __future__ import annotations

from controller.errors import InputError, NotFoundError

WINDOW_S = 10.0  # a host's report counts this long (agents report every few seconds)


def links_of(path) -> list[tuple[str, str]]:
    return list(zip(path, path[1:]))


class PathEvidence:
    """The latest probe results of every host, with the time each arrived (monotonic)."""

    def __init__(self):
        self.reports: dict[str, tuple[float, list[tuple[tuple, bool]]]] = {}
        self.applied: set[tuple[str, str]] = set()  # links taken down through the service

    def report(self, host: str, paths, now: float) -> None:
        self.reports[host] = (now, [(tuple(p), bool(ok)) for p, ok in paths])

    def down(self, now: float, window: float = WINDOW_S) -> set[tuple[str, str]]:
        """Directed links on a failed path and on no working one, over the recent reports. A
        failed path counts only where the same host reaches the same leaf by a working path:
        a host whose every path to a leaf fails names a problem of that leaf, of the host or
        of a queue, not of one link, and takes nothing down."""
        fresh = [paths for t, paths in self.reports.values() if now - t <= window]
        working = {link for paths in fresh for p, ok in paths if ok for link in links_of(p)}
        out = set()
        for paths in fresh:
            reached = {(p[0], p[-1]) for p, ok in paths if ok}
            out |= {link for p, ok in paths if not ok and (p[0], p[-1]) in reached
                    for link in links_of(p) if link not in working}
        return out


def parse_report(doc, switches) -> list[tuple[list[str], bool]]:
    """``{"paths": [{"path": [switch, ...], "ok": bool}, ...]}``, checked against the
    fabric's switches; an InputError names what is wrong (nothing is recorded then)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("paths"), list):
        raise InputError("probe report: expected an object with a list 'paths'")
    if len(doc["paths"]) > 4096:
        raise InputError("probe report: at most 4096 paths")
    out = []
    for i, p in enumerate(doc["paths"]):
        path = p.get("path") if isinstance(p, dict) else None
        if not isinstance(path, list) or len(path) < 2 or not isinstance(p.get("ok"), bool):
            raise InputError(f"probe report: path {i} needs 'path' (2 switches or more) and "
                             "'ok' (true or false)")
        unknown = [s for s in path if s not in switches]
        if unknown:
            raise InputError(f"probe report: path {i}: no switch {unknown[0]!r} in the fabric")
        out.append((path, p["ok"]))
    return out


def port_changes(fabric, down_now: set, down_before: set) -> list[tuple[int, int, bool, None]]:
    """The (dpid, port, up, speed) changes that take the links newly inferred down down and
    bring back those no longer inferred down (every member, both ends)."""
    def ends(a, b):
        return [(fabric.dpids[x], port) for x, y in ((a, b), (b, a))
                for port in fabric.ports_to(x, y)]

    def undirected(links):
        return {tuple(sorted(link)) for link in links}
    gone, back = undirected(down_now) - undirected(down_before), \
        undirected(down_before) - undirected(down_now)
    return [(d, p, False, None) for a, b in sorted(gone) for d, p in ends(a, b)] + \
        [(d, p, True, None) for a, b in sorted(back) for d, p in ends(a, b)]


def reported(service, host: str, doc, now: float) -> dict:
    """POST /v1/hosts/{host}/probes: record ``host``'s probe results and take the links
    they prove down (or back up) through the service's port changes, which re-plan the jobs
    on them as a failed port would. Returns the links now inferred down."""
    fabric = service.state.fabric
    if fabric is None:
        raise InputError("no fabric yet: probe reports need a declared fabric")
    if host not in fabric.host_leaves:
        raise NotFoundError(f"no host {host!r} in the fabric")
    paths = parse_report(doc, fabric.tier_of)
    evidence = service.paths
    with service.lock:
        evidence.report(host, paths, now)
        down = evidence.down(now)
        changes = port_changes(fabric, down, evidence.applied)
        evidence.applied = down
    if changes:
        service.ports_changed(changes)
    return {"host": host, "links_down": [list(link) for link in sorted(down)]}
