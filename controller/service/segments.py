"""What each host's agent pushes in srv6 mode: per flow part its match, its segment list and a
backup list over another path, as ``GET /v1/hosts/{host}/segments`` serves it.

Why a backup in the document: a host that finds its path dead (its probes fail) moves the
flow at once, without a round trip to the controller; the controller re-plans when it hears.

A flow part is matched by what the job fixes: the destination address, protocol and ports
(a part of a split flow by its source port, ``rules.part_sport``); a flow with no ports
(gloo, Open MPI) by its pair of hosts, so frameworks that pick ephemeral ports need no change.

The destination's document carries every part back (``"reverse": true``: the path reversed,
ports swapped): its acknowledgements then follow a probed path with a backup too. Why: the
routers' static ECMP does not learn of a failed link beyond their own ports (no routing
protocol withdraws it), so a reply hashed towards a spine that lost its link to the source's
leaf would be lost, and the flow would stall however well its data was moved. A host's own
flow to that peer comes first and steers the pair (``steering.parse`` keeps the first).
"""
from __future__ import annotations

import os
from itertools import islice

from controller.enforcement.modes import mode_of
from controller.enforcement.rules import part_sport
from controller.enforcement.srv6 import SidPlan, segments
from controller.enforcement.srv6_config import alive_neighbours
from controller.errors import InputError, NotFoundError
from controller.model.clos import Clos
from controller.model.intent import UNROUTABLE
from controller.service import duties, hostreports, pathsets
from controller.service.pathstate import MAX_PATHS


def shortest_paths(fabric: Clos, src: str, dst: str):
    """The shortest switch paths from ``src`` to ``dst`` over alive links, depth first (in
    the fabric's neighbour order), one at a time."""
    if src == dst:
        yield [src]
        return
    up = fabric.derived("srv6_alive_neighbours", alive_neighbours)
    dist = _up_down(fabric, up, src, dst)
    frontier = [] if dist else [dst]
    dist = dist or {dst: 0}
    while frontier and src not in dist:
        nxt = []
        for s in frontier:
            for n in up.get(s, ()):
                if n not in dist:
                    dist[n] = dist[s] + 1
                    nxt.append(n)
        frontier = nxt
    if src not in dist:
        return
    stack = [[src]]
    while stack:
        path = stack.pop()
        here = path[-1]
        if here == dst:
            yield path
            continue
        for n in reversed(up.get(here, ())):
            if dist.get(n) == dist[here] - 1:
                stack.append(path + [n])


def _up_down(fabric: Clos, up: dict, src: str, dst: str) -> dict[str, int]:
    """Hops to ``dst`` of every switch on a shortest path up from ``src`` and down to ``dst``
    ({} where no such path is alive: the breadth-first search then looks further). Why: a
    search from ``dst`` over the whole fabric before ``src`` is found cost 0.3 ms a pair of
    leaves at k = 16, most of a woken ring's documents; climbing from both leaves to the
    lowest tier where they meet costs the switches above them only."""
    climbs = fabric.derived("srv6_climbs", lambda f: {})  # leaf -> switches above, by tier
    for leaf in (src, dst):
        if leaf not in climbs:
            climbs[leaf] = _climb(fabric.tier_of, up, leaf)
    a, b = climbs[src], climbs[dst]
    top = next((t for t in range(min(len(a), len(b))) if a[t] & b[t]), None)
    if top is None:
        return {}
    dist: dict[str, int] = {}
    for levels, far in ((a, True), (b, False)):
        keep = a[top] & b[top]
        for j in range(top, -1, -1):
            if j < top:
                keep = {x for x in levels[j] if any(n in keep for n in up.get(x, ()))}
            for x in keep:
                dist[x] = 2 * top - j if far else j
    return dist


def _climb(tier: dict, up: dict, leaf: str) -> list[set[str]]:
    """The switches ``leaf`` reaches going up only, tier by tier."""
    levels = [{leaf}]
    while True:
        nxt = {n for x in levels[-1] for n in up.get(x, ()) if tier[n] == tier[x] + 1}
        if not nxt:
            return levels
        levels.append(nxt)


def backup_path(fabric: Clos, path: list[str]) -> list[str] | None:
    """Another shortest path between the same leaves, sharing the fewest switches with
    ``path`` (the next one in order among equals, so backups spread); None if there is none.
    Kept on the fabric object: the watches' fingerprints and the documents ask alike."""
    memo = fabric.derived("srv6_backups", lambda f: {})
    key = tuple(path)
    if key not in memo:
        memo[key] = _backup_path(fabric, path)
    got = memo[key]
    return list(got) if got is not None else None


def _backup_path(fabric: Clos, path: list[str], limit: int = 64) -> list[str] | None:
    """The first of the first ``limit`` other shortest paths that shares the fewest inner
    switches with ``path``, the search ending at one that shares none."""
    inner, best, fewest = set(path[1:-1]), None, None
    for p in islice(shortest_paths(fabric, path[0], path[-1]), limit):
        if p == list(path):
            continue
        shared = len(inner.intersection(p[1:-1]))
        if fewest is None or shared < fewest:
            best, fewest = p, shared
            if not shared:
                break
    return best


def segments_doc(plan: SidPlan, path, members, host: str) -> dict:
    """``segments(...).to_doc()``, kept on the plan (one per fabric object): after a change
    the woken documents ask for the same lists again and again (a ring's part is in both
    ends' documents, its container in the other end's probe as its way back)."""
    memo = plan.__dict__.setdefault("_segment_docs", {})
    key = (tuple(path), tuple(members) if members and _bundled(plan) else None, host)
    got = memo.get(key)
    if got is None:
        got = memo[key] = segments(plan, path, members, host).to_doc()
    return got


def _bundled(plan: SidPlan) -> bool:
    """Whether any link of the plan's fabric is a bundle of several members. Without one, a
    list does not depend on the members it is asked with (``srv6.usids``: a uN per hop):
    none are looked up (``_members``: a tenth of a woken ring's documents at k = 16), and a
    part's own list and its probe's are one memo entry, not two (a third of the ring's
    lists; with both, 512 documents took 20% less, issue 73)."""
    got = plan.__dict__.get("_bundled")
    if got is None:
        got = plan.__dict__["_bundled"] = any(m for adj in plan.adjacency.values()
                                              for _, m in adj)
    return got


def _members(fabric: Clos, path) -> tuple[int, ...]:
    """The bundle member each hop of ``path`` takes (its first alive one), kept per fabric
    object (immutable in use): a woken ring's documents ask for their probes' and backups'
    paths again and again (a quarter of their building at k = 16, issue 73)."""
    memo = fabric.derived("srv6_path_members", lambda f: {})
    key = tuple(path)
    got = memo.get(key)
    if got is None:
        out = []
        for a, b in zip(key, key[1:]):
            lower, upper = (a, b) if fabric.tier_of[a] < fabric.tier_of[b] else (b, a)
            alive = fabric.alive_members(lower, upper)
            out.append(alive[0] if alive else 0)
        got = memo[key] = tuple(out)
    return got


EPOCH = os.urandom(4).hex()  # this process's tag of state versions: a restart changes it


def segments_view(state, host: str, ports: dict | None = None,
                  version: str | None = None) -> dict:
    """``host_segments`` with the SID plan of the state's fabric, computed once per fabric
    object (``derived``: O(links); SIDs depend on the fabric's shape only). ``version``: the
    host's document version (``watches.HostVersions``), else the state's."""
    fabric = state.fabric
    if fabric is None:
        raise InputError("no fabric yet: srv6 segments need a declared fabric")
    return host_segments(state, host, fabric.derived("srv6_sid_plan", SidPlan.of), EPOCH,
                         ports, version)


def host_segments(state, host: str, plan: SidPlan, epoch: str,
                  ports: dict | None = None, version: str | None = None) -> dict:
    """The document of ``host``'s srv6 flow parts (see the module text), and of its
    host-mode parts where hosts learn their ports (``ports``: the reported ones, None on
    OpenFlow fabrics; ``hostreports.entries``) with the routers' addresses its agent's
    probes hear."""
    fabric = state.fabric
    if fabric is None:
        raise InputError("no fabric yet: srv6 segments need a declared fabric")
    if host not in fabric.host_leaves:
        raise NotFoundError(f"no host {host!r} in the fabric")
    flows, back = [], []
    for r, flow, parts in by_host(state).get(host, ()):
        for i, (where, share) in enumerate(parts):
            sport = part_sport(flow, i, len(parts))
            members = getattr(where, "members", None)
            q = fabric.part_plane(where)
            if flow.src == host:
                flows.append(_part(fabric, plan, r.job.id, flow.dst, q, list(where), members,
                                   (flow.proto, sport, flow.dport), share, host))
            else:  # the part back: its acknowledgements (module text)
                back.append({**_part(fabric, plan, r.job.id, flow.src, q, list(where)[::-1],
                                     members[::-1] if members else members,
                                     (flow.proto, flow.dport, sport), share, host),
                             "reverse": True})
    flows += back
    learn = hostreports.entries(state, host, ports) if ports is not None else []
    return {"host": host, "version": version or f"{epoch}:{state.version}",
            "block": _block(plan),
            "src_ip": fabric.ip_of(host), "addresses": [a or None for a in fabric.host_ips[host]],
            "flows": flows,
            "probes": probe_paths(fabric, plan, flows, host),
            "ports": learn,
            # only to a host that probes for ports: 320 routers at k = 16 more than doubled
            # every document (bench/srv6.json, scale)
            "routers": hostreports.routers(fabric) if learn else {},
            # a spraying job's flows: weighted paths on every plane (``pathsets``)
            **pathsets.host_doc(fabric, plan, host, by_host(state).get(host, ()))}


def _block(plan: SidPlan) -> str:
    """``str(plan.block)``, kept on the plan: formatting an IPv6 network cost a fifth of a
    warm document (issue 73)."""
    got = plan.__dict__.get("_block_text")
    if got is None:
        got = plan.__dict__["_block_text"] = str(plan.block)
    return got


def by_host(state) -> dict[str, list]:
    """Host -> (record, flow, parts) of every srv6 flow it sends or receives, built once per
    state version: after a change every agent asks at once (1,024 documents at k = 16), and
    each scanning every job's flows would cost hosts x flows."""
    key = (state.version, id(state.fabric))
    kept = state.__dict__.get("_segments_by_host")
    if kept is None or kept[0] != key:
        index: dict[str, list] = {}
        for r in state.jobs.values():
            if not mode_of(r.mode).segments:
                continue
            for flow, parts in r.flows_with_parts():
                if flow.src == flow.dst or parts in (None, UNROUTABLE):
                    continue
                index.setdefault(flow.src, []).append((r, flow, parts))
                index.setdefault(flow.dst, []).append((r, flow, parts))
        kept = state.__dict__["_segments_by_host"] = (key, index)
    return kept[1]


def _part(fabric: Clos, plan: SidPlan, job: str, dst: str, plane: int, path: list[str],
          members, ports: tuple, share: float, host: str) -> dict:
    """One part's entry: its match, list and backup list, each with its way back to
    ``host`` (``back_container``)."""
    proto, sport, dport = ports
    doc = {"job": job, "dst": dst, "dst_ip": fabric.ip_of(dst, plane), "proto": proto,
           "sport": sport, "dport": dport, "share": share, "path": path,
           **segments_doc(plan, path, members, dst),
           **back_container(plan, path, members, host)}
    if fabric.plane_count > 1:  # the agent's interface and addresses of that plane
        doc["plane"] = plane
    other = backup_path(fabric, path) if len(path) > 1 else None
    if other is not None:
        m = _members(fabric, other) if _bundled(plan) else None
        doc["backup"] = {"path": other, **segments_doc(plan, other, m, dst),
                         **back_container(plan, other, m, host)}
    return doc


def back_container(plan: SidPlan, path: list[str], members, host: str) -> dict:
    """``{"back": container}``: the uSID container of ``path`` reversed, to ``host``, that a
    probe along ``path`` carries for its answer ({} where it takes more than one container).

    Why: the destination host's kernel answers a probe by plain IPv4, over the routers' ECMP,
    which knows of no failed link beyond a router's own ports: a reply hashed onto the failed
    link is lost, whichever list the probe took, and both ends of a flow would then see their
    backups fail too and never move (its acknowledgements lost). The destination's agent
    answers along the container the probe carries, so a probe proves its path both ways.
    """
    if len(path) < 2:
        return {}
    try:
        seg = segments_doc(plan, path[::-1], members[::-1] if members else members, host)
    except InputError:  # the host is not at the path's first leaf (another plane's)
        return {}
    return {"back": seg["sids"][0]} if seg["form"] == "usid" else {}


def probe_paths(fabric: Clos, plan: SidPlan, flows: list[dict], host: str) -> list[dict]:
    """The paths the host's agent probes, each with its way back (``back_container``): its
    parts' own paths and their backups (probed by their source and, reversed, by their
    destination: two hosts, the quorum of a link down), then its probe duties
    (``duties.of``: every link of the fabric crossed by two hosts' probes, links down
    included, for their return). At most ``pathstate.MAX_PATHS``, what one report holds."""
    out, probed = [], set()

    memo = plan.__dict__.setdefault("_probe_entries", {})  # one per fabric, as segments_doc

    def probe(path: list[str], dst: str, dst_ip: str) -> None:
        key = tuple(path)
        if key in probed or len(out) >= MAX_PATHS:
            return
        probed.add(key)
        entry = memo.get((key, dst, dst_ip, host))
        if entry is None:  # the same entries in the host's next document (kept: not changed)
            m = _members(fabric, path) if _bundled(plan) else None
            entry = memo[key, dst, dst_ip, host] = {
                "path": list(path), "dst_ip": dst_ip, **segments_doc(plan, path, m, dst),
                **back_container(plan, path, m, host),
                **({"plane": fabric.plane_of[path[0]]} if fabric.plane_count > 1 else {})}
        out.append(entry)

    for f in flows:  # the paths in use first
        probe(f["path"], f["dst"], f["dst_ip"])
        if "backup" in f:
            probe(f["backup"]["path"], f["dst"], f["dst_ip"])
    for path, dst in duties.of(fabric, host):
        probe(path, dst, fabric.ip_of(dst, fabric.plane_of[path[0]]))
    return out
