"""Path sets for NICs that spray (OpenAI's MRC, Ultra Ethernet): per flow of a job posted with
``"spray": true`` a weighted set of paths over every plane, in its source's segments document
(``sprays``), beside the one list per part that the kernel agent steers (``flows``).

Why: a spraying NIC spreads one connection over 128-256 entropy values (EVs) across its
planes and moves EVs off a path it finds failed, at once, without the controller. It needs
more than the planned parts: the plan's shares say how much goes where, and paths of weight
0 on every plane say where EVs may go when a planned path fails.

What, per flow: its parts first (``weight`` = the part's share, ``entropy`` = how many of
``ENTROPY`` EVs map to it, by largest remainder, every positive share at least one), then
standby paths of weight 0: alive shortest paths between the flow's leaves, the plane with
the fewest paths first (round robin), each plane's paths rotated by a hash of the flow plus
the plane so that flows and planes spread over the middles, until every plane with an alive
path has one and there are ``LEAST`` paths, at most ``MOST`` (the parts are always kept).
Each entry carries its plane, the destination's address on that plane, the path and its
segment list.

Cost per flow: O(planes x middles) numpy for the alive middles of its leaf pairs (kept per
fabric and pair: ``ClosLinks.table``), O(paths x planes) to choose, one segment list per
path (kept on the SID plan). A host's set: the sum over its spraying flows.

>>> entropy_counts([0.5, 0.3, 0.2, 0.0])
[128, 77, 51, 0]
>>> entropy_counts([0.999, 0.001])  # a positive share gets one EV at least
[255, 1]
"""
from __future__ import annotations

import zlib

from controller.enforcement.srv6 import SidPlan, segments
from controller.model.clos import Clos
from controller.model.clospaths import ClosLinks

ENTROPY = 256  # entropy values a connection sprays over (MRC: 128-256)
LEAST = 8  # paths per flow at least (every plane of an 8-plane fabric)
MOST = 64  # standby paths stop here (a flow's parts are all kept)


def sprays(record) -> bool:
    """Whether the job of ``record`` (a ``JobRecord``) was posted with ``"spray": true``."""
    return bool(record.job.options.get("spray"))


def entropy_counts(weights: list[float], total: int = ENTROPY) -> list[int]:
    """``total`` EVs over ``weights`` by largest remainder (Hamilton), every positive weight
    at least one where there are at most ``total`` of them (taken from the largest count).
    O(n log n)."""
    whole = sum(w for w in weights if w > 0)
    if whole <= 0:
        return [0] * len(weights)
    exact = [total * w / whole if w > 0 else 0.0 for w in weights]
    out = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (out[i] - exact[i], i))
    for i in order[:total - sum(out)]:
        out[i] += 1
    for i, w in enumerate(weights):
        if w > 0 and out[i] == 0:
            j = max(range(len(out)), key=lambda k: out[k])
            if out[j] > 1:
                out[j] -= 1
                out[i] = 1
    return out


def alive_paths(fabric: Clos, q: int, a: str, b: str,
                links: ClosLinks | None = None) -> list[tuple[str, ...]]:
    """The alive shortest paths of plane ``q`` from leaf ``a`` to leaf ``b``, in middle order
    (the aggregation slot within a pod, the core between pods; ``clospaths``), kept per
    fabric's links and pair (``links``: ``ClosLinks.of(fabric)``, when the caller has it)."""
    links = links or ClosLinks.of(fabric)
    memo = links.table("pathsets_alive", lambda _: {})
    key = (q, a, b)
    got = memo.get(key)
    if got is None:
        got = memo[key] = _alive_paths(fabric, links, q, a, b)
    return got


def _alive_paths(fabric: Clos, links: ClosLinks, q: int, a: str, b: str) -> list[tuple]:
    if a == b:
        return [(a,)]
    plane = fabric.planes[q]
    i, j = links.leaf_at[q][a], links.leaf_at[q][b]
    p, r = plane.pod_of_leaf[i], plane.pod_of_leaf[j]
    u1, d1, u2, d2 = links.ok(q)
    if p == r:
        return [(a, plane.aggs[p][m], b) for m in (u1[i] & d1[j]).nonzero()[0].tolist()]
    g = links.group_of_core[q]
    usable = (u1[i] & d1[j])[g] & u2[p] & d2[r]
    cores = links.core_names[q]
    return [(a, plane.aggs[p][g[m]], cores[m], plane.aggs[r][g[m]], b)
            for m in usable.nonzero()[0].tolist()]


def _members(fabric: Clos, path) -> tuple[int, ...]:
    """Per hop the first alive member (the member a standby path's list names)."""
    out = []
    for x, y in zip(path, path[1:]):
        lower, upper = (x, y) if fabric.tier_of[x] < fabric.tier_of[y] else (y, x)
        alive = fabric.alive_members(lower, upper)
        out.append(alive[0] if alive else 0)
    return tuple(out)


def selection(fabric: Clos, flow, parts) -> list[tuple[int, tuple, tuple | None, float]]:
    """The flow's path set as (plane, path, members, weight): its parts (see the module
    text), then standby paths of weight 0. What the watches' fingerprints hold."""
    out: list = []
    seen: dict[tuple, int] = {}
    for where, share in parts:
        path = tuple(where)
        if path in seen:  # two parts on one path (members apart): one entry
            k = seen[path]
            out[k] = out[k][:3] + (out[k][3] + share,)
            continue
        seen[path] = len(out)
        out.append((fabric.plane_of[path[0]], path, getattr(where, "members", None), share))
    src, dst = fabric.host_leaves[flow.src], fabric.host_leaves[flow.dst]
    # the planes where both hosts have a leaf and the destination an address (if any is known)
    planes = min(len(src), len(dst), len(fabric.host_ips.get(flow.dst, ())) or len(dst))
    start = zlib.crc32(repr(flow.five_tuple()).encode())
    links = ClosLinks.of(fabric)
    alive = [alive_paths(fabric, q, src[q], dst[q], links) for q in range(planes)]
    tried = [0] * planes  # per plane: paths looked at, from the flow's rotation
    count = [0] * planes
    for q, *_ in out:
        if q < planes:
            count[q] += 1
    open_ = {q for q in range(planes) if alive[q]}
    bundled = fabric.bundled
    cap = max(MOST, len(out))
    while open_ and len(out) < cap and (len(out) < LEAST or not all(count[q] for q in open_)):
        q = min(open_, key=lambda x: (count[x], (x - start) % planes))
        paths = alive[q]
        path = None
        while tried[q] < len(paths) and path is None:
            x = paths[(start + q + tried[q]) % len(paths)]  # planes apart: other middles
            tried[q] += 1
            path = None if x in seen else x
        if tried[q] >= len(paths):
            open_.discard(q)
        if path is None:
            continue
        seen[path] = len(out)
        count[q] += 1
        out.append((q, path, _members(fabric, path) if bundled else None, 0.0))
    return out


def flow_set(fabric: Clos, plan: SidPlan, job: str, flow, parts) -> dict:
    """One flow's entry of ``sprays``: its match (the connection's own ports) and its paths,
    each with its plane, weight, EVs, the destination's address there and its list."""
    chosen = selection(fabric, flow, parts)
    evs = entropy_counts([w for *_, w in chosen])
    paths = []
    for (q, path, members, weight), n in zip(chosen, evs):
        paths.append({"plane": q, "dst_ip": fabric.ip_of(flow.dst, q), "path": list(path),
                      "weight": weight, "entropy": n,
                      **_segments(plan, path, members, flow.dst)})
    return {"job": job, "dst": flow.dst, "proto": flow.proto, "sport": flow.sport,
            "dport": flow.dport, "entropy": ENTROPY, "paths": paths}


def _segments(plan: SidPlan, path: tuple, members, host: str) -> dict:
    """``segments(...).to_doc()``, kept on the plan: the sets of a job's flows share paths."""
    memo = plan.__dict__.setdefault("_pathset_docs", {})
    key = (path, tuple(members) if members else None, host)
    got = memo.get(key)
    if got is None:
        got = memo[key] = segments(plan, path, members, host).to_doc()
    return got


def host_doc(fabric: Clos, plan: SidPlan, host: str, items) -> dict:
    """``{"sprays": [...]}`` of the spraying flows ``host`` sends among ``items`` (its
    ``segments.by_host`` entries: record, flow, parts), or {} when it sends none: the
    documents of hosts that do not spray stay as they were."""
    out = [flow_set(fabric, plan, r.job.id, flow, parts) for r, flow, parts in items
           if flow.src == host and sprays(r)]
    return {"sprays": out} if out else {}
