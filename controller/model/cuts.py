"""Where routing stops helping: a job's demand across a cut above the cut's capacity.

A *cut* separates the hosts behind one leaf (on three tiers also one pod) from the rest of the
fabric: the hosts that share that leaf (pod) in every plane. A flow from one of them to a host
with which it shares no leaf (pod) in any plane must leave through the alive uplinks of those
leaves in some plane (the pod's links from its aggregation switches to the cores), and a flow
into them through the links down: the cut's *capacity* each way is what is alive of those
links over every plane, bundles' members counted one by one, in bytes per second.

A job's *demand* across a cut is what its flows that cross it carry per iteration divided by
its ideal communication time (``Job.ideal_allreduce_s`` at the hosts' line rate): the rate it
needs there to meet its ideal. Above the capacity, no routing meets the ideal: every byte of
those flows crosses the cut, so the job's communication takes at least its bytes over the
capacity, ``bound`` = demand / capacity times its ideal, whatever the paths. Moving the job
does help (MonkeyTree, 2026: routing cannot fix demand above a cut's capacity; there, moving
jobs is what helps): all its hosts under one leaf (pod) take its flows off the cut, and fewer
of its hosts behind the cut take fewer flows across it. Several jobs can also exceed a cut
together while none does alone (``shared``): then the slowest of them takes at least
``bound`` times its ideal (``shared_bound``: the cut as one link shared over time, in any
order, no job faster than its hosts' line rate), and moving one of them off the cut is what
helps. Whole flows (one path each, as every planner but split routes) can do no better than
``unsplit_bound``: ceil(flows / links) of them on one link, where the flows have one rate and
the links one capacity (and, shared, the jobs one ideal).

``findings`` lists every cut-bound cut, the worst first: the cut, the jobs, the demand and the
capacity (Gb/s), the bound, what a placement would need and one sentence saying all that
(``message``); ``bounds`` gives per job the least communication time any routing can reach
given its own cuts. Only jobs' flows count (not the ideal of a job that has none); a cut with
no alive link at all is left out (its flows have no path: the planners say so).

What a placement would need (``placement``), for a job: the leaves (pods) that could hold all
of its hosts, those already holding most of them first (free: not a host of another job given,
``busy``); else at most m of its hosts behind a cut of this capacity, m = floor(k x capacity /
demand) for the k hosts behind it now (its demand per host kept: exact for flows between its
hosts and the rest, a bound for a ring); for a ring All-Reduce that crosses the cut more than
once per ring, the ring order (``ring_order: advised``) that crosses it once per ring, when
that fits. For several jobs: the jobs to move off the cut, the largest demand first.

Cost: the table of a fabric O(hosts x planes + links) numpy, once per fabric object (kept on
it); ``findings`` O(F x planes) numpy over the F flows, plus per cut-bound cut O(hosts) for its
placement and, shared by n jobs, O(n^2 log(1 / tol)) for its bound.

The issue's example: a leaf whose 4 hosts send 4 flows at line rate to other leaves over 2
uplinks meets at most half its ideal rate; with 4 uplinks it is not cut-bound.

>>> from controller.model.clos import Clos
>>> from controller.model.jobs import Flow, Job
>>> job = Job("j", explicit=[Flow("j", f"h0_{i}", f"h1_{i}", 1e6) for i in range(4)])
>>> [f["cut"] for f in findings(Clos.leaf_spine(2, 4, 4), [job])]
['leaf l0', 'leaf l1']
>>> f = findings(Clos.leaf_spine(2, 4, 4), [job])[0]
>>> f["demand_gbps"], f["capacity_gbps"], f["bound"], f["placement"]["at_most"]
(400.0, 200.0, 2.0, 2)
>>> print(f["message"])  # doctest: +NORMALIZE_WHITESPACE
job j: leaf l0: its 4 hosts there send 400 Gb/s to other leaves at its ideal rate, over 200
Gb/s of alive uplinks: no routing brings its communication below 2.00x its ideal; a placement
would: at most 2 of its 8 hosts per leaf (4 leaves)
>>> findings(Clos.leaf_spine(4, 4, 4), [job])
[]
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from controller.model.clos import Clos
from controller.model.clospaths import ClosLinks, ClosProblem
from controller.model.jobs import Job

TOL = 1e-9  # relative: a demand equal to the capacity meets the ideal
NAMED = 3  # leaves (pods) a placement names at most
WORDS = {"leaf": ("other leaves", "uplinks", "leaf"), "pod": ("other pods", "links to the cores", "pod")}


@dataclass
class Kind:
    """The cuts of one kind (leaf or pod) of a fabric: per host id its cut (``group``) and its
    leaf (pod) per plane (``key``, for the test that two hosts share one), per cut its name,
    hosts and alive capacity out (``up_bps``) and in (``down_bps``), its alive links (bundles'
    members one by one) and, when they all have one capacity, that capacity (else 0)."""
    name: str
    group: np.ndarray  # (hosts,) -> cut index
    key: np.ndarray  # (planes, hosts) -> leaf (pod) index in the plane
    names: list[str]
    hosts: list[list[str]]
    up_bps: np.ndarray
    down_bps: np.ndarray
    up_links: np.ndarray
    down_links: np.ndarray
    up_link_bps: np.ndarray  # 0: alive links of several capacities
    down_link_bps: np.ndarray

    def side(self, side: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(capacity, links, one link's capacity) per cut, out of it or into it."""
        return ((self.up_bps, self.up_links, self.up_link_bps) if side == "out" else
                (self.down_bps, self.down_links, self.down_link_bps))


@dataclass
class CutTable:
    host_id: dict[str, int]
    kinds: dict[str, Kind]
    host_bps: float


def table(fabric: Clos) -> CutTable:
    """The cuts of ``fabric``, computed once per fabric object (O(hosts x planes + links))."""
    return fabric.derived("cuts", _table)


def _table(fabric: Clos) -> CutTable:
    L = ClosLinks(fabric)
    cap = np.append(L.capacity_bps(), 0.0) * L.alive  # the sentinel id -1 carries nothing

    def alive(ids: np.ndarray) -> tuple:  # (rows, ..., members) -> per row: capacity,
        c = cap[L.sentinel(ids)].reshape(ids.shape[0], -1)  # alive links, one link's capacity
        on = c > 0
        hi = c.max(axis=1, initial=0.0)
        lo = np.where(on, c, np.inf).min(axis=1, initial=np.inf)
        return c.sum(axis=1), on.sum(axis=1), np.where(hi == lo, hi, 0.0)

    planes = fabric.planes
    kinds = {"leaf": _kind("leaf", L, L.host_leaf, [p.leaves for p in planes],
                           [alive(L.up1[q]) for q in range(len(planes))],
                           [alive(L.down1[q]) for q in range(len(planes))])}
    if fabric.tiers == 3 and all(p.cores for p in planes):  # a plane of two tiers: no pod cut
        key = np.stack([L.pod_of_leaf[q][L.host_leaf[q]] for q in range(len(planes))])
        kinds["pod"] = _kind("pod", L, key, [p.pods for p in planes],
                             [alive(L.up2[q]) for q in range(len(planes))],
                             [alive(L.down2[q]) for q in range(len(planes))])
    return CutTable(dict(L.host_id), kinds, fabric.link_bps("host"))


def _kind(name: str, L: ClosLinks, key: np.ndarray, labels, up, down) -> Kind:
    groups, gid = np.unique(key.T, axis=0, return_inverse=True)
    gid = gid.ravel()
    names = [" / ".join(dict.fromkeys(labels[q][g[q]] for q in range(len(labels))))
             for g in groups]
    hosts: list[list[str]] = [[] for _ in groups]
    for h, g in zip(L.hosts, gid.tolist()):
        hosts[g].append(h)
    sides = [_side(groups, per_plane) for per_plane in (up, down)]
    return Kind(name, gid, key, names, hosts, sides[0][0], sides[1][0], sides[0][1],
                sides[1][1], sides[0][2], sides[1][2])


def _side(groups: np.ndarray, per_plane: list) -> tuple:
    """Per cut (a leaf or pod per plane) its capacity, alive links and their one capacity."""
    out = []
    for g in groups:
        cells = [(float(c[g[q]]), int(n[g[q]]), float(one[g[q]]))
                 for q, (c, n, one) in enumerate(per_plane)]
        ones = {one for _, n, one in cells if n}
        out.append((sum(c for c, _, _ in cells), sum(n for _, n, _ in cells),
                    ones.pop() if len(ones) == 1 else 0.0))
    return tuple(np.array(x) for x in zip(*out))


def _flows(t: CutTable, jobs: list[Job]):
    """Over the jobs' flows between two known hosts: source and destination ids, bytes per
    iteration (a ring's flow moves 2(n-1) chunks), the job's index; and every job's ideal."""
    src, dst, nbytes, owner = [], [], [], []
    for j, job in enumerate(jobs):
        sizes = [len(r) for r in job.rings]
        for f in job.flows():
            a, b = t.host_id.get(f.src), t.host_id.get(f.dst)
            if a is None or b is None or a == b:
                continue
            src.append(a)
            dst.append(b)
            owner.append(j)
            nbytes.append(f.bytes * 2 * (sizes[f.ring] - 1) if job.is_collective else f.bytes)
    ideal = [float(job.ideal_allreduce_s(t.host_bps)) for job in jobs]
    return (np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64),
            np.array(nbytes, dtype=float), np.array(owner, dtype=np.int64), ideal)


def crossings(t: CutTable, jobs: list[Job]) -> tuple[dict, list[float]]:
    """{(kind, "out" | "in"): (job indices, cut indices, bytes per iteration, flows, least and
    largest flow rate at the job's ideal)}: what each job sends out of (into) each cut, over the
    flows whose ends share no leaf (pod) in any plane; and the jobs' ideals. O(F x planes)."""
    src, dst, nbytes, owner, ideal = _flows(t, jobs)
    per = np.asarray(ideal, dtype=float)[owner] if len(owner) else np.zeros(0)
    rate = np.divide(nbytes, per, out=np.zeros_like(nbytes), where=per > 0)
    out = {}
    for name, k in t.kinds.items():
        cross = ~(k.key[:, src] == k.key[:, dst]).any(axis=0) if len(src) else src > 0
        width = len(k.names)
        for side, ends in (("out", src), ("in", dst)):
            combo = owner[cross] * width + k.group[ends[cross]]
            uniq, inv = np.unique(combo, return_inverse=True)
            inv = inv.ravel()
            lo, hi = np.full(len(uniq), np.inf), np.zeros(len(uniq))
            np.minimum.at(lo, inv, rate[cross])
            np.maximum.at(hi, inv, rate[cross])
            out[(name, side)] = (uniq // width, uniq % width,
                                 np.bincount(inv, weights=nbytes[cross], minlength=len(uniq)),
                                 np.bincount(inv, minlength=len(uniq)), lo, hi)
    return out, ideal


def split_bound(problem: ClosProblem, weight=None) -> float:
    """A bound no routing beats on the fabric links, split or not: ``clospaths.lower_bound``
    without its rounding up to whole flows per link. For every cut, what its flows carry
    across it (one per flow, or ``weight``: one value per inter-leaf flow, e.g. its bytes in
    seconds at the leaf links' rate) over its alive capacity in leaf-link units, both ways.
    What ``planners.clos_split``'s LPs minimise is never below it (plus, on flow counts,
    ``split.FLOOR``). O(F + groups) numpy (the cuts once per fabric:
    ``ClosLinks.cut_tables``); 0 without flows.

    >>> from controller.model.clospaths import ClosProblem
    >>> from controller.model.jobs import Flow
    >>> job = Job("j", explicit=[Flow("j", f"h0_{i}", f"h1_{i}", 1e6) for i in range(3)])
    >>> p = ClosProblem.build(Clos.leaf_spine(2, 4, 4), [job])
    >>> split_bound(p), split_bound(p, [2.0, 2.0, 1.0])  # 3 flows over 2 uplinks
    (1.5, 2.5)
    """
    ratios = [r[~np.isnan(r)] for _, _, r in _cut_ratios(problem, weight)]
    return max((float(r.max()) for r in ratios if len(r)), default=0.0)


def tight_links(problem: ClosProblem, bound: float, weight=None) -> np.ndarray:
    """The alive links of every cut whose ``split_bound`` (with ``weight``) is ``bound``
    (relative 1e-9): a routing at that bound has every one of them at it, so does every
    optimum. O(F + groups + their links) numpy.

    >>> from controller.model.clospaths import ClosProblem
    >>> from controller.model.jobs import Flow
    >>> job = Job("j", explicit=[Flow("j", f"h0_{i}", f"h1_{i}", 1e6) for i in range(4)])
    >>> p = ClosProblem.build(Clos.leaf_spine(2, 4, 4), [job])
    >>> len(tight_links(p, split_bound(p)))  # l0's 2 uplinks, l1's 2 downlinks
    4
    """
    L, out = problem.links, [np.zeros(0, dtype=np.int64)]
    tables = L.cut_tables()
    for t, side, ratio in _cut_ratios(problem, weight):
        tight = np.flatnonzero(ratio >= bound * (1 - 1e-9))  # nan: not a cut of these flows
        if len(tight):
            key, gid = tables[t][:2]
            first = np.unique(gid, return_index=True)[1][tight]  # a host per tight group
            for q, arr in enumerate(((L.up1, L.down1) if t == 0 else (L.up2, L.down2))[side]):
                ids = arr.reshape(arr.shape[0], -1)[key[q, first]].ravel()
                ids = ids[ids >= 0]
                out.append(ids[L.alive[ids]])
    return np.unique(np.concatenate(out))


def _cut_ratios(problem: ClosProblem, weight):
    """Per cut table (0: leaves, 1: pods) and side (0: out, 1: in): what its flows (each one,
    or its ``weight``) carry across each group's cut over its alive capacity in leaf-link
    units, nan where nothing crosses or nothing is alive."""
    src, dst = np.asarray(problem.src), np.asarray(problem.dst)
    w = np.ones(len(src)) if weight is None else np.asarray(weight, dtype=float)
    for t, (key, gid, alive, unit) in enumerate(problem.links.cut_tables() if len(src) else []):
        keep = ~(key[:, src] == key[:, dst]).any(axis=0)
        for side, (hosts, cap) in enumerate(((src[keep], alive[0]), (dst[keep], alive[1]))):
            n = np.bincount(gid[hosts], w[keep], minlength=len(cap))
            with np.errstate(divide="ignore", invalid="ignore"):
                yield t, side, np.where((n > 0) & (cap > 0), n / cap / unit, np.nan)


def bounds(fabric: Clos, jobs: list[Job]) -> dict[str, float]:
    """Per job the least communication time of one iteration any routing can reach given its
    own cuts (seconds): its ideal, or more where its demand exceeds a cut's capacity."""
    t = table(fabric)
    cross, ideal = crossings(t, jobs)
    best = {job.id: ideal[j] for j, job in enumerate(jobs)}
    for (name, side), (js, gs, b, *_) in cross.items():
        cap = t.kinds[name].side(side)[0][gs]
        for j, c, x in zip(js.tolist(), cap.tolist(), b.tolist()):
            if c > 0:
                best[jobs[j].id] = max(best[jobs[j].id], x / c)
    return best


def findings(fabric: Clos, jobs: list[Job], busy=(), times: dict | None = None) -> list[dict]:
    """Every cut-bound cut of ``jobs`` on ``fabric``, the worst first: one document per cut and
    job (its own demand above the capacity) and per cut and set of jobs (their demands
    together above it, no single one: ``shared``), the worse direction when both exceed.
    ``bound`` holds for any routing, split flows and spraying included; ``unsplit_bound``
    for whole flows (one path each, as every planner but split routes): where the cut's alive
    links have one capacity c and the flows across it one rate r at their ideal (and, shared,
    the jobs one ideal), n flows over L links put ceil(n / L) on some link, at least
    ceil(n / L) x r / c times the ideal; elsewhere it is ``bound``. ``busy``: hosts a placement
    may not take besides those of the other jobs. ``times``: per job its planned communication
    time (seconds), to say how far the plan is from the bounds (``planned``,
    ``planned_over_bound``, ``planned_over_unsplit``)."""
    t = table(fabric)
    cross, ideal = crossings(t, jobs)
    found: dict[tuple, dict] = {}
    for (name, side), (js, gs, b, n, lo, hi) in cross.items():
        caps, links, one = t.kinds[name].side(side)
        rate = b / np.maximum(np.asarray(ideal)[js], 1e-300) if len(js) else b
        total = np.bincount(gs, weights=rate, minlength=len(caps))
        over = (total > caps * (1 + TOL))[gs]  # the cuts some job, or all together, exceed
        per_cut: dict[int, list] = {}
        for e in zip(js[over].tolist(), gs[over].tolist(), b[over].tolist(), n[over].tolist(),
                     lo[over].tolist(), hi[over].tolist()):
            per_cut.setdefault(e[1], []).append(e)
        for g, entries in per_cut.items():
            cap, width, each = float(caps[g]), int(links[g]), float(one[g])
            if cap <= 0:
                continue  # no alive link: no path (the planners say so)
            live = [e for e in entries if ideal[e[0]] > 0]
            rates = {j: x / ideal[j] for j, _, x, *_ in live}
            for j, _, x, count, r0, r1 in live:
                if rates[j] > cap * (1 + TOL):
                    _keep(found, (name, g, (j,)), side, rates[j], cap, rates[j] / cap,
                          _unsplit(count, r0, r1, width, each), {j: rates[j]})
            if len(rates) > 1 and sum(rates.values()) > cap * (1 + TOL):
                bound = shared_bound([(r, ideal[j]) for j, r in rates.items()], cap)
                whole = _unsplit_shared(live, ideal, width, each)
                _keep(found, (name, g, tuple(sorted(rates))), side, sum(rates.values()), cap,
                      bound, whole, rates)
    busy = set(busy)
    out = [_document(t, key, f, jobs, ideal, busy, times) for key, f in found.items()]
    return sorted(out, key=lambda d: (-d["bound"], d["cut"], d["jobs"]))


def _unsplit_shared(live: list, ideal: list, links: int, each: float) -> float | None:
    """Whole flows of several jobs of one ideal, one rate over links of one capacity: ceil(n /
    L) of them share some link (``_unsplit``); None otherwise (the jobs' ideals differ: which
    flows share a link then changes the bound, and trying every choice costs too much)."""
    times = [ideal[e[0]] for e in live]
    if max(times) > min(times) * (1 + 1e-6):
        return None
    return _unsplit(sum(e[3] for e in live), min(e[4] for e in live), max(e[5] for e in live),
                    links, each)


def _unsplit(flows: int, r0: float, r1: float, links: int, each: float) -> float | None:
    """ceil(flows / links) x r / c: whole flows of one rate over links of one capacity (None
    where rates or capacities differ)."""
    if each <= 0 or links <= 0 or r1 > r0 * (1 + 1e-6):
        return None
    return max(1.0, math.ceil(flows / links - TOL) * r1 / each)


def shared_bound(jobs: list[tuple[float, float]], cap: float, tol: float = 1e-7) -> float:
    """The least x such that jobs of (rate, ideal seconds) across one cut of ``cap`` (bytes
    per second) can each end by x times its ideal, none faster than its rate (its hosts'
    line rate): by time s job j must have sent rate_j x clip(s - (x - 1) I_j, 0, I_j), and
    the cut carries at most cap x s (checked where that piecewise-linear slack turns). Bisection
    between 1 and sum(rates) / cap (every job at rate_j x cap / sum: all end at that stretch)
    to ``tol`` relative; O(log(1 / tol) x n^2) numpy.

    >>> shared_bound([(100, 1.0), (100, 1.0)], 100)  # two at once: twice as long
    2.0
    >>> round(shared_bound([(100, 1.0), (100, 1.0), (100, 2.0)], 200), 3)
    1.333
    """
    rate = np.array([r for r, _ in jobs], dtype=float)
    ideal = np.array([i for _, i in jobs], dtype=float)
    total = float(rate.sum())
    if total <= cap * (1 + TOL):
        return 1.0

    def fits(x: float) -> bool:
        s = np.concatenate(((x - 1) * ideal, x * ideal))
        s = s[s > 0]
        need = rate @ np.clip(s[None, :] - (x - 1) * ideal[:, None], 0.0, ideal[:, None])
        return bool((need <= cap * s * (1 + TOL)).all())
    lo, hi = 1.0, total / cap
    if fits(lo):
        return lo
    while hi - lo > tol * hi:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return round(hi, 6)


def _keep(found: dict, key: tuple, side: str, rate: float, cap: float, bound: float,
          whole: float | None, rates: dict) -> None:
    """One finding per cut and jobs: both directions, the figures of the worse."""
    fig = {"rate": rate, "cap": cap, "bound": bound, "rates": rates,
           "unsplit": max(bound, whole or bound)}
    seen = found.get(key)
    if seen is None:
        found[key] = {"sides": {side}, **fig}
        return
    seen["sides"].add(side)
    if (bound, fig["unsplit"]) > (seen["bound"], seen["unsplit"]):
        seen.update(fig)


def _document(t: CutTable, key: tuple, f: dict, jobs: list[Job], ideal, busy: set,
              times: dict | None) -> dict:
    name, g, js = key
    k = t.kinds[name]
    side = "both" if len(f["sides"]) == 2 else next(iter(f["sides"]))
    behind = set(k.hosts[g])
    ids = [jobs[j].id for j in js]
    doc = {"cut": f"{name} {k.names[g]}", "kind": name, "name": k.names[g], "direction": side,
           "jobs": ids, "shared": len(js) > 1,
           "hosts": sum(len(jobs[j].hosts() & behind) for j in js),
           "demand_gbps": _gbps(f["rate"]), "capacity_gbps": _gbps(f["cap"]),
           "bound": round(f["bound"], 4), "unsplit_bound": round(f["unsplit"], 4)}
    if len(js) == 1:
        j = js[0]
        others = {h for i, job in enumerate(jobs) if i != j for h in job.hosts()}
        doc["bound_s"] = f["bound"] * ideal[j]
        doc["placement"] = _placement(t, k, g, jobs[j], f["rate"], f["cap"], ideal[j],
                                      (busy | others) - jobs[j].hosts())
    else:
        doc["placement"] = {"move": _move(f["rates"], f["cap"], jobs)}
    if times:
        planned = [times[i] / ideal[j] for i, j in zip(ids, js)
                   if times.get(i) is not None and ideal[j] > 0]
        if planned:
            doc["planned"] = round(max(planned), 4)
            doc["planned_over_bound"] = round(max(planned) / f["bound"], 4)
            doc["planned_over_unsplit"] = round(max(planned) / f["unsplit"], 4)
    doc["message"] = message(doc)
    return doc


def _gbps(bytes_per_s: float) -> float:
    return round(bytes_per_s * 8 / 1e9, 3)


def _placement(t: CutTable, k: Kind, g: int, job: Job, rate: float, cap: float, ideal: float,
               busy: set) -> dict:
    """Where all the job's hosts fit behind one cut of this kind (those holding most of them
    first), how many at most may stay behind a cut of this capacity, and whether a ring order
    crossing it once per ring would do."""
    mine = job.hosts() & set(t.host_id)
    n = len(mine)
    own = [len(mine.intersection(hs)) for hs in k.hosts]
    free = [sum(1 for h in hs if h not in busy) for hs in k.hosts]
    fits = sorted((u for u in range(len(k.hosts)) if free[u] >= n),
                  key=lambda u: (-own[u], free[u], k.names[u]))
    at_most = math.floor(own[g] * cap / rate * (1 + TOL)) if own[g] else 0
    spread = (at_most >= 1 and sum(min(at_most, x) for x in free) >= n)
    out = {"hosts": n, "pack": [k.names[u] for u in fits[:NAMED]], "pack_options": len(fits),
           "at_most": at_most if spread else None,
           "units": math.ceil(n / at_most) if spread else None, "ring_order": False}
    if job.is_collective and ideal > 0:
        inside = set(k.hosts[g])
        least = sum(2 * (len(r) - 1) * job.ring_bytes / len(r) / ideal for r in job.rings
                    if any(h in inside for h in r) and not all(h in inside for h in r))
        out["ring_order"] = least <= cap * (1 + TOL) < rate
    return out


def _move(rates: dict, cap: float, jobs: list[Job]) -> list[str]:
    """The jobs to move off a cut their demands exceed together, the largest demand first."""
    left, out = sum(rates.values()), []
    for j in sorted(rates, key=lambda j: (-rates[j], jobs[j].id)):
        if left <= cap * (1 + TOL):
            break
        out.append(jobs[j].id)
        left -= rates[j]
    return out


def message(doc: dict) -> str:
    """The finding in one sentence: the cut, the demand and capacity, the bound, the remedy."""
    other, links, unit = WORDS[doc["kind"]]
    verb = {"out": f"send {doc['demand_gbps']:.4g} Gb/s to {other}",
            "in": f"receive {doc['demand_gbps']:.4g} Gb/s from {other}",
            "both": f"send and receive up to {doc['demand_gbps']:.4g} Gb/s to and from "
                    f"{other}"}[doc["direction"]]
    over = f"over {doc['capacity_gbps']:.4g} Gb/s of alive {links}"
    whole = doc.get("unsplit_bound", doc["bound"])
    bound = f"{doc['bound']:.2f}x" + (f" ({whole:.2f}x with whole flows)"
                                       if whole > doc["bound"] * 1.001 else "")
    planned = (f" (the plan: {doc['planned']:.2f}x)" if "planned" in doc else "")
    p = doc["placement"]
    if doc["shared"]:
        moved = " and ".join(p["move"])
        return (f"{doc['cut']}: jobs {', '.join(doc['jobs'])} {verb} at their ideal rates, "
                f"{over}: no routing brings the slowest of them below {bound} its ideal"
                f"{planned}; moving {moved} off it leaves the others within its capacity")
    ways = []
    if p["pack"]:
        more = ", ..." if p["pack_options"] > len(p["pack"]) else ""
        ways.append(f"all {p['hosts']} hosts under one {unit} ({', '.join(p['pack'])}{more})")
    if p["at_most"]:
        ways.append(f"at most {p['at_most']} of its {p['hosts']} hosts per {unit} "
                    f"({p['units']} {other.split()[1]})")
    remedy = ("a placement would: " + "; or ".join(ways) if ways else
              f"no placement on this fabric would (free {other.split()[1]} too few)")
    if p["ring_order"]:
        remedy += "; so would a ring order crossing it once per ring (ring_order advised)"
    return (f"job {doc['jobs'][0]}: {doc['cut']}: its {doc['hosts']} hosts there {verb} at "
            f"its ideal rate, {over}: no routing brings its communication below "
            f"{bound} its ideal{planned}; {remedy}")


def notes(found: list[dict], limit: int = 10) -> list[str]:
    """The findings' messages, at most ``limit``, then how many more."""
    out = [d["message"] for d in found[:limit]]
    if len(found) > limit:
        out.append(f"... {len(found) - limit} more cut-bound cuts")
    return out
