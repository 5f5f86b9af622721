"""Link state from the hosts' probes, for fabrics without OpenFlow (``--mlroute-southbound
none``): each agent probes the paths it may use (``segments.probe_paths``) and reports which
answer (``POST /v1/hosts/{host}/probes``); the links they prove down are taken down as failed
ports would be, and come back when probes across them answer again.

One host can neither fake nor flap a link, and a report costs what its own size costs:

* a report is checked whole before anything of it is kept: every path starts at one of the
  reporter's leaves and follows cables of the fabric (``parse_report``);
* evidence is kept per direction of a link, from each host's latest report only (a new
  report replaces the host's earlier one): a direction is *cleared* while some host's fresh
  report (``WINDOW_S``) crosses it by a working path;
* a failed path blames only the smallest explanation: among the links of failed paths that
  no working path clears, greedily the links that explain the most failed paths (all of them
  on a tie), then the same for the paths left (``PathEvidence.judge``). A host that reaches a
  leaf by no working path at all blames nothing there (a problem of that leaf, the host or a
  queue, not of one link);
* a link is judged failed only when at least ``quorum`` hosts (``--mlroute-probe-quorum``,
  2) have failed paths blamed on its uncleared directions, together (a cable that fails
  fails both ways, and a flow's source and its destination each see one way); it then goes
  down whole, with those directions judged failed;
* a link taken down comes back only on evidence, never by the reports ageing out: in each
  direction judged failed, a working path across it newer than the judgement, or fresh failed
  paths through it that other links judged down explain (the first two reports of a failure
  may tie a neighbour with the failed link; the next ones tell them apart). A link down after
  a restart or a takeover, its failed direction unknown, needs a working path either way
  (``adopt``). Probes keep crossing links that are down, so that evidence comes; a link
  back is seen again by discovery (``seen_again``: no ``missing_link`` left behind);
* a link that keeps failing is held down for a while (flap damping, ``damping.py``);
* a host whose failed paths other hosts' later working paths contradict (every hop of the
  failed path crossed, in its direction, by another host since) is counted; with
  ``CONTRADICTION_LIMIT`` contradicted reports in ``CONTRADICTION_WINDOW_S`` its failure
  evidence is discounted until fewer remain (``status`` names it).

Cost: a report updates the evidence of the directions it crosses, O(its size), and is
judged again only when it changed something a judgement reads (its failed paths, or a
direction that a failed path or a link down crosses), else at most once a ``REJUDGE_S``
(evidence ageing out); a judgement is O(the failed evidence), which is rare. The evidence has
its own lock: the service's is taken only to apply port changes.

>>> ev = PathEvidence()
>>> ev.report("h0", [(["l0", "s0", "l1"], False), (["l0", "s1", "l1"], True)], now=0.0)
>>> ev.judge(now=0.0)  # one host alone takes nothing down
(set(), set())
>>> ev.report("h2", [(["l2", "s0", "l1"], False), (["l2", "s1", "l1"], True)], now=1.0)
>>> ev.judge(now=1.0)  # two hosts blame s0 -> l1, the one link both failed paths share
({('l1', 's0')}, set())
>>> ev.report("h0", [(["l0", "s0", "l1"], True), (["l0", "s1", "l1"], True)], now=60.0)
>>> ev.judge(now=60.0)  # no report for a minute kept it down; a working probe brings it back
(set(), {('l1', 's0')})
"""
from __future__ import annotations

import threading
from collections import Counter, deque
from dataclasses import dataclass, field

from controller.errors import InputError, NotFoundError
from controller.service.damping import FlapDamping
from controller.service.hostports import FROM_HOSTS

WINDOW_S = 10.0  # a host's report counts this long (agents report every 2 s)
QUORUM = 2  # hosts whose failed paths must blame a direction (Settings.probe_quorum)
REJUDGE_S = 1.0  # reports that change nothing judged still judge this often (ageing out)
CONTRADICTION_WINDOW_S = 60.0  # contradicted reports of a host are counted this long
CONTRADICTION_LIMIT = 3  # that many in the window: the host's failed paths are discounted
MAX_PATHS = 4096  # paths in one report
MAX_SWITCHES = 16  # switches in one path
VERSION_CHARS, ERROR_CHARS = 200, 500  # a refused document's version and error, capped

Hop = tuple[str, str]  # a link in one direction, as a path crosses it
Link = tuple[str, str]  # a link, both directions: its two switches in name order


def hops_of(path) -> tuple[Hop, ...]:
    return tuple(zip(path, path[1:]))


def link_of(hop: Hop) -> Link:
    a, b = hop
    return (a, b) if a <= b else (b, a)


@dataclass
class Claim:
    """One failed path of a host's latest report (the host reaching the same leaf by some
    working path): the directions it crosses, one of which failed."""
    host: str
    at: float
    hops: tuple[Hop, ...]
    contradicted: bool = False


@dataclass
class Held:
    """A link taken down by probes: each direction judged failed with when it last was
    (none: adopted after a restart or a takeover, a working path either way brings it back)."""
    since: float
    failed: dict = field(default_factory=dict)  # hop -> when judged failed


class PathEvidence:
    """The hosts' probe evidence and the links it holds down (times: a monotonic clock)."""

    def __init__(self, window: float = WINDOW_S):
        self.window = window
        self.lock = threading.Lock()  # the evidence (reports take it, not the service's lock)
        self.applying = threading.Lock()  # port changes reach the service in judged order
        self.reset()

    def reset(self) -> None:
        """Forget every report and every link held down (a new master starts afresh)."""
        self.working: dict[Hop, dict[str, float]] = {}  # hop -> host -> when; freshest last
        self.clears: dict[str, set[Hop]] = {}  # host -> hops its latest report crossed working
        self.claims: dict[str, list[Claim]] = {}  # host -> its latest report's failed paths
        self.failing: dict[Hop, set[str]] = {}  # hop -> hosts whose claims cross it
        self.seen: dict[str, float] = {}  # host -> its latest report
        self.refused: dict[str, dict] = {}  # host -> the document its agent refused
        self.reports_refused: dict[str, dict] = {}  # host -> its reports refused (count, why)
        self.contradicted: dict[str, deque] = {}  # host -> its contradicted reports' times
        self.held: dict[Link, Held] = {}  # links down by the probes' evidence
        self.damping = FlapDamping()
        self.changes = 0  # links taken down or brought back so far (each one a re-plan)
        self.adopted = False  # links down before any evidence were taken over (``adopt``)
        self.dirty, self.judged_at = True, None  # something changed since the last judgement
        self.applied: set[Link] = set()  # the links down as the service was last told
        self.handed: set[Link] = set()  # the links down as last handed to the service

    # ---- recording ------------------------------------------------------------------------
    def report(self, host: str, paths, now: float, refused: dict | None = None) -> None:
        """Record ``host``'s probe results [(path, ok)] (and the document its agent refused,
        if any), replacing its earlier report. O(the report)."""
        reached = {(p[0], p[-1]) for p, ok in paths if ok}
        ok_hops: set[Hop] = set()
        failed = set()
        for p, ok in paths:
            if ok:
                ok_hops.update(hops_of(p))
            elif (p[0], p[-1]) in reached:  # else: that leaf, the host or a queue
                failed.add(hops_of(p))
        fresh = now - self.seen.get(host, now) <= self.window
        before = self.clears.get(host, set())
        self._working(host, ok_hops, before, now)
        self._claims(host, failed, now)
        self.seen[host] = now
        if refused is None:
            self.refused.pop(host, None)
        else:
            self.refused[host] = {**refused, "at": now}
        self._contradictions(host, ok_hops, now)
        if not self.dirty:  # a direction cleared or no longer: does a judgement read it?
            self.dirty = any(h in self.failing or link_of(h) in self.held
                             for h in (ok_hops ^ before if fresh else ok_hops))

    def _working(self, host: str, ok_hops: set, before: set, now: float) -> None:
        for hop in before - ok_hops:
            hosts = self.working.get(hop)
            if hosts is not None:
                hosts.pop(host, None)
                if not hosts:
                    del self.working[hop]
        for hop in ok_hops:
            hosts = self.working.setdefault(hop, {})
            hosts.pop(host, None)  # moved last: the freshest
            hosts[host] = now
        self.clears[host] = ok_hops

    def _claims(self, host: str, failed: set, now: float) -> None:
        old = self.claims.get(host, ())
        if {c.hops for c in old} == failed:  # the same failed paths: fresher
            for c in old:  # each report claims again (and may be contradicted again)
                c.at, c.contradicted = now, False
            return
        self._drop_claims(host)
        if failed:
            self.claims[host] = [Claim(host, now, hops) for hops in sorted(failed)]
            for hops in failed:
                for hop in hops:
                    self.failing.setdefault(hop, set()).add(host)
        self.dirty = True

    def _drop_claims(self, host: str) -> None:
        for claim in self.claims.pop(host, ()):
            for hop in claim.hops:
                hosts = self.failing.get(hop)
                if hosts is not None:
                    hosts.discard(host)
                    if not hosts:
                        del self.failing[hop]

    # ---- hosts whose failures others contradict ---------------------------------------------
    def _contradictions(self, host: str, ok_hops: set, now: float) -> None:
        """Claims that this report's working paths (or, at the same time, others') prove
        wrong: every hop crossed, in its direction, by another host since the claim."""
        seen = {id(c): c for c in self.claims.get(host, ())}
        for hop in ok_hops:
            for other in self.failing.get(hop, ()):
                if other != host:
                    seen.update((id(c), c) for c in self.claims[other] if hop in c.hops)
        for claim in seen.values():
            if not claim.contradicted and now - claim.at <= self.window and all(
                    self._worked_since(hop, claim.at, now, not_by=claim.host)
                    for hop in claim.hops):
                claim.contradicted = True
                times = self.contradicted.setdefault(claim.host, deque())
                if not times or times[-1] != claim.at:  # one count per report
                    times.append(claim.at)
                self.dirty = True

    def discounted(self, host: str, now: float) -> bool:
        """Whether ``host``'s failed paths are left out: too many were contradicted lately."""
        times = self.contradicted.get(host)
        while times and now - times[0] > CONTRADICTION_WINDOW_S:
            times.popleft()
        if times is not None and not times:
            del self.contradicted[host]
        return bool(times) and len(times) >= CONTRADICTION_LIMIT

    # ---- judging --------------------------------------------------------------------------
    def _worked_since(self, hop: Hop, since: float, now: float, not_by: str | None = None
                      ) -> bool:
        """Some host (other than ``not_by``) crossed ``hop`` by a working path at ``since``
        or later, within the window (its latest report)."""
        for host, at in reversed((self.working.get(hop) or {}).items()):  # freshest first
            if host != not_by:
                return at >= since and now - at <= self.window
        return False

    def adopt(self, links, now: float) -> None:
        """Links down before any evidence (after a restart, or a takeover: the stored state's)
        count as taken down by probes: they come back on a working path across them only."""
        self.adopted = True
        for link in links:
            self.held.setdefault(link_of(tuple(link)[:2]), Held(now))
        self.dirty = True

    def judge(self, now: float, quorum: int = QUORUM) -> tuple[set[Link], set[Link]]:
        """Update the links held down; returns (links taken down, links brought back). Skipped
        when no report since the last judgement changed what it reads, for up to REJUDGE_S."""
        if not self.dirty and self.judged_at is not None and now - self.judged_at < REJUDGE_S:
            return set(), set()
        self.dirty, self.judged_at = False, now
        judged, away = self._blame(now, quorum)
        down, back = set(), set()
        for link, hops in judged.items():
            held = self.held.get(link)
            if held is None:
                self.held[link] = Held(now, dict.fromkeys(hops, now))
                self.damping.flapped(link, now)
                down.add(link)
            else:
                held.failed.update(dict.fromkeys(hops, now))
        for link, held in list(self.held.items()):
            if link not in judged and self._answered(link, held, away, now) \
                    and not self.damping.suppressed(link, now):
                del self.held[link]
                back.add(link)
        self.changes += len(down) + len(back)
        return down, back

    def _answered(self, link: Link, held: Held, away: dict, now: float) -> bool:
        """Positive evidence: in every direction judged failed, a working path across it
        since, or fresh failed paths that other links now judged down explain better
        (``away``; a link taken down while the first reports of a failure named it too).
        Adopted (no direction known): a working path across it either way."""
        if not held.failed:
            a, b = link
            return self._worked_since((a, b), held.since, now) or \
                self._worked_since((b, a), held.since, now)
        return all(self._worked_since(hop, at, now) or away.get(hop, False)
                   for hop, at in held.failed.items())

    def _blame(self, now: float, quorum: int) -> tuple[dict[Link, set[Hop]], dict[Hop, bool]]:
        """The links the fresh failed paths prove down, each with its directions judged
        failed: the smallest explanation of the failed paths (greedy, ties all blamed), a
        link kept where ``quorum`` hosts or more blame its directions. Also, for each direction of a
        link held down and not judged now that failed paths cross: whether every one of them
        is explained by a link judged down now. O(the failed evidence)."""
        open_claims = []  # (host, the hops of its failed path that no working path clears)
        for host in list(self.claims):
            if now - self.seen[host] > self.window:
                self._drop_claims(host)  # aged out
                continue
            if self.discounted(host, now):
                continue
            for claim in self.claims[host]:
                suspects = [h for h in claim.hops if not self._worked_since(h, -1e18, now)]
                if suspects:  # else: every hop works (congestion, a lost probe)
                    open_claims.append((host, suspects))
        blamed: dict[Link, dict[Hop, set[str]]] = {}
        explained = []  # (suspects, the links that explain them)
        left = open_claims
        while left:
            counts = Counter(link for _, hops in left for link in {link_of(h) for h in hops})
            best = max(counts.values())
            top = {link for link, n in counts.items() if n == best}
            rest = []
            for host, hops in left:
                named = [h for h in hops if link_of(h) in top]
                if not named:
                    rest.append((host, hops))
                    continue
                explained.append((hops, {link_of(h) for h in named}))
                for hop in named:
                    blamed.setdefault(link_of(hop), {}).setdefault(hop, set()).add(host)
            left = rest
        judged = {}
        for link, directions in blamed.items():  # a cable fails both ways, seen one way
            if len(set().union(*directions.values())) >= quorum:  # by each of its hosts
                judged[link] = set(directions)
        away: dict[Hop, bool] = {}
        for hops, why in explained:
            for hop in hops:
                if link_of(hop) in self.held and link_of(hop) not in judged:
                    away[hop] = away.get(hop, True) and any(
                        link in judged for link in why if link != link_of(hop))
        return judged, away

    # ---- views ----------------------------------------------------------------------------
    def status(self, now: float) -> dict:
        """What ``/v1/ready`` and the metrics show: hosts reporting (within the window), hosts
        whose failed paths are discounted, the documents agents refused, the links held down
        and those of them suppressed by flap damping. O(hosts)."""
        with self.lock:
            return self._status(now)

    def _status(self, now: float) -> dict:
        return {"reporting": sum(1 for t in self.seen.values() if now - t <= self.window),
                "contradicting": sorted(h for h in list(self.contradicted)
                                        if self.discounted(h, now)),
                "refused": {h: dict(r) for h, r in sorted(self.refused.items())},
                "reports_refused": {h: dict(r) for h, r in sorted(self.reports_refused.items())},
                "links_down": [list(link) for link in sorted(self.held)],
                "suppressed": [list(link) for link in sorted(self.held)
                               if self.damping.suppressed(link, now)],
                "changes": self.changes}


# ---- the REST request --------------------------------------------------------------------
def _cables(fabric) -> set[Hop]:
    return {hop for lo, up in fabric.links() for hop in ((lo, up), (up, lo))}


def _name(value) -> str:
    text = repr(value)
    return text if len(text) <= 64 else text[:60] + "...'"


def parse_report(doc, fabric, host: str) -> tuple[list[tuple[list[str], bool]], dict | None]:
    """``{"paths": [{"path": [switch, ...], "ok": bool}, ...], "refused": {"version": str,
    "error": str} or null}`` from ``host``, checked whole against ``fabric`` (any state of
    its links): each path starts at one of the host's leaves and follows its cables. An
    InputError names the path and the hop (nothing of the report is recorded then); other
    keys are ignored. Returns (paths, refused)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("paths"), list):
        raise InputError("probe report: expected an object with a list 'paths'")
    if len(doc["paths"]) > MAX_PATHS:
        raise InputError(f"probe report: at most {MAX_PATHS} paths")
    leaves = fabric.host_leaves[host]
    cables = fabric.derived("probe_cables", _cables)
    out = []
    for i, p in enumerate(doc["paths"]):
        path = p.get("path") if isinstance(p, dict) else None
        if not isinstance(path, list) or not 2 <= len(path) <= MAX_SWITCHES \
                or not isinstance(p.get("ok"), bool):
            raise InputError(f"probe report: path {i} needs 'path' (2 to {MAX_SWITCHES} "
                             "switches) and 'ok' (true or false)")
        unknown = [s for s in path if not isinstance(s, str) or s not in fabric.tier_of]
        if unknown:
            raise InputError(f"probe report: path {i}: no switch {_name(unknown[0])} in the "
                             "fabric")
        shown = " ".join(path)
        if path[0] not in leaves:
            raise InputError(f"probe report: path {i} ({shown}) starts at {path[0]}, not at "
                             f"{host}'s leaf ({', '.join(leaves)}): a host reports the paths "
                             "from its own leaf")
        for a, b in zip(path, path[1:]):
            if (a, b) not in cables:
                raise InputError(f"probe report: path {i} ({shown}): hop {a} -> {b} is no "
                                 "cable of the fabric")
        out.append((path, p["ok"]))
    return out, parse_refused(doc.get("refused"))


def parse_refused(value) -> dict | None:
    """The agent refused the controller's last document (its version, why); None: it did
    not. The strings are capped (VERSION_CHARS, ERROR_CHARS)."""
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("version"), str) \
            or not isinstance(value.get("error"), str):
        raise InputError("probe report: 'refused' must be null or {\"version\": string, "
                         "\"error\": string}")
    return {"version": value["version"][:VERSION_CHARS], "error": value["error"][:ERROR_CHARS]}


def port_changes(fabric, down_now: set, down_before: set) -> list[tuple[int, int, bool, None]]:
    """The (dpid, port, up, speed) changes that take the links newly down down and bring
    back those no longer down (every member, both ends; links the fabric lacks: none)."""
    def ends(a, b):
        return [(fabric.dpids[x], port) for x, y in ((a, b), (b, a))
                if x in fabric.dpids and y in fabric.ports.get(x, {})
                for port in fabric.ports_to(x, y)]

    def undirected(links):
        return {tuple(sorted(link)) for link in links}
    gone, back = undirected(down_now) - undirected(down_before), \
        undirected(down_before) - undirected(down_now)
    return [(d, p, False, None) for a, b in sorted(gone) for d, p in ends(a, b)] + \
        [(d, p, True, None) for a, b in sorted(back) for d, p in ends(a, b)]


def adoptable(state) -> set[Link]:
    """The links down in the service's state that probes may bring back: those its
    effective fabric has down and those the stored state had down (``presumed_down``; the
    static switches' ports came back up when they 'connected'), less the declared ones.
    Members of bundles down alone are left out (probes tell links, not members)."""
    if state.declared is None or state.fabric is None:
        return set()
    links = (set(state.fabric.down) | set(state.presumed_down)) - set(state.declared.down)
    return {link_of(tuple(x)) for x in links if len(x) == 2}


def oriented(fabric, links) -> list[list[str]]:
    """Links as the fabric names them, [lower, upper], sorted."""
    tier = fabric.tier_of
    return sorted([a, b] if tier.get(a, 0) <= tier.get(b, 0) else [b, a] for a, b in links)


def apply(service, fabric) -> None:
    """Tell the service the links the evidence holds down, as port changes (which re-plan the
    jobs on them). A report that changes nothing returns at once, whatever the service is
    doing; changes reach it one at a time, each with the newest judgement."""
    evidence = service.paths
    with evidence.lock:
        if set(evidence.held) == evidence.handed:
            return
    with evidence.applying:
        with evidence.lock:
            target = evidence.handed = set(evidence.held)
        changes = port_changes(fabric, target, evidence.applied)
        try:
            if changes:
                service.ports_changed(changes)
                seen_again(service, fabric, evidence.applied - target)
        except BaseException:
            with evidence.lock:
                evidence.handed = set(evidence.applied)  # the next report tries again
            raise
        evidence.applied = target


def seen_again(service, fabric, links) -> None:
    """Links the probes brought back, seen again by discovery, every member both ways: where
    the hosts' probes are the link state (no OpenFlow) they are what sees a link. Else the
    port that went down took the link out of discovery's topology for good (the start took
    every declared cable as seen once, ``shell/core.py``), and ``/v1/ready`` and
    ``/v1/fabric`` kept naming it ``missing_link ... no probe seen``. O(the links' members)."""
    if not links or getattr(service.reconciler.installer, "probe", None) != FROM_HOSTS:
        return
    with service.lock:
        now, topology = service.clock(), service.finder.topology
        for a, b in sorted(links):
            if a not in fabric.dpids or b not in fabric.dpids or \
                    b not in fabric.ports.get(a, {}) or a not in fabric.ports.get(b, {}):
                continue
            for pa, pb in zip(fabric.ports_to(a, b), fabric.ports_to(b, a)):
                topology.link_seen(fabric.dpids[a], pa, fabric.dpids[b], pb, now)
                topology.link_seen(fabric.dpids[b], pb, fabric.dpids[a], pa, now)


def restore(service, now: float) -> None:
    """A new master (restart, takeover), before reports come: evidence afresh, the links down
    in its state held as if probes had taken them down (``adopt``), and taken down again
    where they came back meanwhile (static switches 'connect' with every port up). Only
    where the hosts' probes are the link state (no OpenFlow): else nothing."""
    if getattr(service.reconciler.installer, "probe", None) != FROM_HOSTS:
        return
    evidence = service.paths
    with evidence.lock:
        evidence.reset()
        evidence.adopt(adoptable(service.state), now)
    if service.state.fabric is not None:
        apply(service, service.state.fabric)


def reported(service, host: str, doc, now: float) -> dict:
    """POST /v1/hosts/{host}/probes: record ``host``'s probe results and take the links they
    prove down (or back up) through the service's port changes, which re-plan the jobs on
    them as a failed port would. Answers the links down by the probes' evidence ([lower,
    upper], sorted) and those of them held by flap damping."""
    fabric = service.state.fabric
    if fabric is None:
        raise InputError("no fabric yet: probe reports need a declared fabric")
    if host not in fabric.host_leaves:
        raise NotFoundError(f"no host {host!r} in the fabric")
    evidence = service.paths
    try:
        paths, refused = parse_report(doc, service.state.declared or fabric, host)
    except InputError as e:  # counted per host, named in /v1/ready, until one is taken
        with evidence.lock:
            r = evidence.reports_refused.setdefault(host, {"count": 0})
            r.update(count=r["count"] + 1, error=str(e)[:300], at=now)
        raise
    with evidence.lock:  # O(the report), plus the failed evidence when it changed
        evidence.reports_refused.pop(host, None)
        if not evidence.adopted:  # the first report since a start: links already down stay
            evidence.adopt(adoptable(service.state), now)
        evidence.report(host, paths, now, refused)
        evidence.judge(now, service.settings.probe_quorum)
        down = set(evidence.held)
        damped = {link for link in down if evidence.damping.suppressed(link, now)}
    apply(service, fabric)
    return {"host": host, "links_down": oriented(fabric, down),
            "suppressed": oriented(fabric, damped)}
