"""The learning loop: sFlow samples in (any thread); at each tick the windows closed since the
last one folded into every learning job's estimate (``measurement.estimate``), on the master and
on standbys alike, so that a standby that takes over knows what the jobs send; then, on the
master only, the jobs whose steady estimate calls for a (re-)plan, as decided changes.

Hysteresis: a measured matrix is judged once (planned, kept or refused), and again only when
its pairs change, when learned pairs leave their route's plane (``learning.off_plane``: their
framework reconnected on another plane; re-planned without the gain test, since the plan in
force is not enforced) or, when it was kept, once the state (a job re-planned, posted or
deleted) or the pairs other jobs send beside their plans changed: whether a plan is worth
changing depends on them, or once the share of its bytes on pairs the kept plan lacks grew
by half (``GROWN``: pairs that joined late, a phase the job had not yet run, are judged on
their first windows' mean, which their later windows raise); a re-plan needs a predicted
gain of ``learn_min_gain`` and at most ``learn_replans_per_minute`` happen per job. A job
is judged on the windows that began after it was posted: what its hosts sent before (an
earlier job, another library's ring) neither teaches nor contradicts it.

Everything kept for a job belongs to its record (``Tracked``): a job deleted and posted again,
under a new id or its old one, starts afresh, and nothing of a deleted job outlives it. Each
job also says why it is not acting (``explain``): the samples and bytes its members sent each
other in the last windows, the windows counted, and the one reason.
"""
from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from controller.errors import ConflictError, InputError
from controller.measurement.estimate import MatrixEstimate
from controller.measurement.learner import TrafficLearner, clos_samplers
from controller.model.clos import Clos
from controller.model.intent import JobRecord
from controller.service import decide, learning, oplog
from controller.service.change import Change
from controller.service.settings import Settings
from controller.service.state import ControllerState

REPLAN_PERIOD = 60.0  # seconds over which learn_replans_per_minute counts
GROWN = 1.5  # growth of the share of a job's bytes its kept plan lacks that has it judged again
RECENT = 4  # closed windows of each job the view shows


@dataclass
class Tracked:
    """What the learning loop keeps for one job record (``created`` tells a job posted again
    under its old id from the one before): its estimate, what was last judged, a kept plan,
    its re-plans, and what its members sent each other in its recent windows."""
    created: float
    number: int = 0  # the record's number: with ``created``, tells records apart
    since: float = -math.inf  # monotonic time it was first tracked: its windows begin after
    estimate: MatrixEstimate = field(default_factory=MatrixEstimate)
    judged: tuple | None = None  # what was last judged (Decision.pairs)
    kept: tuple | None = None  # ((state version, others' unplanned pairs), share lacking)
    kept_event: str | None = None  # the last "plan kept" event's cause
    replans: list = field(default_factory=list)  # times of its recent re-plans
    replanned: int = 0  # (re-)plans on measured matrices
    deferred: bool = False  # its last re-plan was put off by the per-job bound
    samples: int = 0  # samples between its members since it was posted
    bytes: float = 0.0  # their estimated bytes
    recent: deque = field(default_factory=lambda: deque(maxlen=RECENT))  # window summaries

    record = property(lambda self: (self.created, self.number))


@dataclass
class Decision:
    """What the learning loop asks of the sequencer for one job: a change to apply (or the
    error that deciding it raised), or only an event (a matrix kept on its plan)."""
    job: str
    pairs: tuple  # what was judged: the measured pairs and those off their route's plane
    change: Change | None = None
    error: Exception | None = None
    event: dict | None = None


class MatrixLearning:
    def __init__(self, window_s: float, sampling_points: str = "all"):
        self.points = sampling_points  # where the switches sample (learner.clos_samplers)
        # no fabric yet: every pair counts as crossing leaves until the first tick that has one
        self.learner = TrafficLearner(window_s, samplers=clos_samplers({}, sampling_points))
        self.jobs: dict[str, Tracked] = {}  # job id -> what is kept for its record
        self.deferred = 0  # re-plans put off by the per-job bound
        self.datagrams = 0  # sFlow datagrams with samples from known agents (the sFlow thread)
        self.rejected = 0  # sFlow datagrams dropped: their sender is not a known agent
        self._rejected_new: list[str] = []  # senders dropped for the first time, not reported
        self._rejected_seen: set[str] = set()
        self._lock = threading.Lock()  # reject() runs in the sFlow thread
        self._folded = -math.inf  # index of the last window folded
        self._interfaces: list = []  # (host, plane, address, MAC, leaf) the maps are of
        self._followed: Clos | None = None  # the fabric object they were read from
        self._canon: dict[str, str] = {}  # address -> its host's first-plane address
        self._plane_of: dict[str, int] = {}  # address -> its plane (several planes only)

    def observe(self, samples, now: float) -> None:
        """One datagram's packet samples (the sFlow thread)."""
        self.datagrams += 1
        self.learner.observe(samples, now)

    def follow(self, fabric: Clos | None) -> None:
        """Count sampling points on ``fabric``'s leaves and pods (hosts adopted, moved or
        declared): the maps are built once per change, not per sampled pair. With them, per
        address, the host's first-plane address (``_canon``: one matrix per host pair) and,
        on several planes, the address's plane (``_plane_of``). The service calls it every
        second: a fabric object seen last time is not read again (a change of hosts or links
        is a new ``Clos``; at k = 32 reading and comparing its 8,192 host interfaces took
        about 4 ms every second of an idle controller)."""
        if fabric is not None and fabric is self._followed:
            return
        self._followed = fabric
        interfaces = [x for x in fabric.interfaces() if x[2]] if fabric else []
        if interfaces != self._interfaces:
            self._interfaces = interfaces
            leaf_of = {ip: leaf for _, _, ip, _, leaf in interfaces}
            self._canon = {ip: fabric.host_ip.get(h) for h, _, ip, _, _ in interfaces}
            self._plane_of = {ip: q for _, q, ip, _, _ in interfaces} \
                if fabric and len(fabric.planes) > 1 else {}
            pods = ({leaf: pod for p in fabric.planes for leaf, pod in
                     zip(p.leaves, p.pod_of_leaf)} if fabric else None)
            self.learner.set_samplers(clos_samplers(leaf_of, self.points, pods))

    def reject(self, sender: str) -> None:
        with self._lock:
            self.rejected += 1
            if sender not in self._rejected_seen:
                self._rejected_seen.add(sender)
                self._rejected_new.append(sender)

    def new_rejected(self) -> list[str]:
        """Senders dropped for the first time since the last call."""
        with self._lock:
            out, self._rejected_new = self._rejected_new, []
        return out

    def track(self, state: ControllerState, now: float) -> dict:
        """Track every job that may learn from ``now`` (monotonic seconds) on, if it is not
        yet (the service calls it as soon as a change is applied, so a job's first window is
        the first that began after it was posted), and forget the records that are gone.
        Returns the jobs that may learn. The record's ``created`` is a wall-clock time (of
        this controller or of another): windows are never compared with it."""
        jobs = {jid: r for jid, r in state.jobs.items() if r.learn} if state.fabric else {}
        self.jobs = {jid: t for jid, t in self.jobs.items()
                     if jid in jobs and t.record == (jobs[jid].created, jobs[jid].number)}
        for jid, r in jobs.items():
            self.jobs.setdefault(jid, Tracked(r.created, r.number, since=now))
        return jobs

    def fold(self, state: ControllerState, now: float) -> None:
        """Fold the windows closed since the last call (``now``: monotonic seconds, as every
        time of the learning loop) into the estimate of every job that may learn (each job
        from the first window that began after it was tracked). On a multi-plane fabric a
        pair's samples on every plane add up, keyed by the hosts' first-plane addresses, and
        its bytes per plane (its source address's) are kept beside: the plane its framework
        uses (``MatrixEstimate.plane``)."""
        self.follow(state.fabric)
        fabric = state.fabric
        jobs = self.track(state, now)
        windows = self.learner.closed(self._folded, now)
        if not windows:
            return
        self._folded = windows[-1].index
        canon, plane = self._canon, self._plane_of  # built by follow() above
        members, jobs_of = {}, {}
        for jid, r in jobs.items():
            members[jid] = {fabric.host_ip[h] for h in r.members if h in fabric.host_ip}
            for ip in members[jid]:
                jobs_of.setdefault(ip, []).append(jid)
        window_s = self.learner.window_s
        for w in windows:
            got = {jid: ({}, {}, {}) for jid in jobs}
            for pair, b in w.bytes.items():
                key = (canon.get(pair[0], pair[0]), canon.get(pair[1], pair[1]))
                for jid in jobs_of.get(key[0], ()):
                    if key[1] in members[jid]:
                        got[jid][0][key] = got[jid][0].get(key, 0) + b
                        got[jid][1][key] = got[jid][1].get(key, 0) + w.samples[pair]
                        if pair[0] in plane:
                            by = got[jid][2].setdefault(key, {})
                            by[plane[pair[0]]] = by.get(plane[pair[0]], 0) + b
            for jid, (b, n, by_plane) in got.items():
                t = self.jobs[jid]
                if w.index * window_s >= t.since - 1e-9:
                    counted = t.estimate.fold(b, n, by_plane)
                    t.samples += sum(n.values())
                    t.bytes += sum(b.values())
                    t.recent.append({"window": w.index, "samples": sum(n.values()),
                                     "bytes": round(sum(b.values())), "counted": counted})

    def samples_by_job(self) -> dict[str, int]:
        """Job -> samples between its members since it was posted (the metrics)."""
        return {jid: t.samples for jid, t in self.jobs.items()}

    def measured(self, state: ControllerState, settings: Settings) -> dict:
        """Job -> ``learning.Measured`` of every estimate with pairs (what the job view shows;
        only steady ones are decided on: an estimate between phases still shows its pairs)."""
        if state.fabric is None:
            return {}
        out = {}
        for jid, t in self.jobs.items():
            if jid in state.jobs:
                m = learning.measured_pairs(state.fabric, t.estimate, self.learner.window_s,
                                            settings.learn_min_rate)
                if m.pairs:
                    out[jid] = replace(m, replans=t.replanned)
        return out

    def explain(self, state: ControllerState, settings: Settings, r: JobRecord) -> dict | None:
        """What the learning loop has of a job that may learn (None: it does not): samples
        and bytes between its members since it was posted and in its last windows, the
        windows counted, and ``reason``, the one reason it is not acting (None: its plan
        holds its steady measured matrix, or follows it). What a user reads to see why a
        job is not learned."""
        if not r.learn:
            return None
        t = self.jobs.get(r.job.id)
        if t is None or t.record != (r.created, r.number):
            t = Tracked(r.created, r.number)  # posted since the last window closed
        e, m = t.estimate, state.measured.get(r.job.id)
        return {"samples": t.samples, "bytes": round(t.bytes),
                "windows": {"active": e.active, "quiet": e.quiet, "empty": e.empty},
                "recent": list(t.recent), "active_windows": e.active,
                "replans": t.replanned, "steady": m is not None and m.steady,
                "reason": self._reason(state, settings, r, t, m)}

    def _reason(self, state, settings, r, t: Tracked, m) -> str | None:
        """The one reason the job is not acting on its traffic (``explain``)."""
        fabric, e = state.fabric, t.estimate
        if fabric is None:
            return "no fabric yet: samples cannot be told apart by host"
        if m is not None and m.steady and t.judged is not None and \
                t.judged[0] == frozenset(m.pairs) and t.kept is None and not t.deferred:
            return None  # judged on this matrix: planned on it, or its plan holds it
        unknown = [h for h in r.members if h not in fabric.host_ip]
        if not t.samples:
            if unknown:
                return (f"members unknown to the fabric: {', '.join(unknown)} (no address: "
                        "their samples cannot be attributed)")
            return (f"no samples between its members since it was posted "
                    f"({self.learner.observed} data samples accepted from "
                    f"{self.datagrams} datagrams in all)")
        heard = [w for w in t.recent if w["counted"] != "empty"]
        if m is None or not m.steady:
            if heard and heard[-1]["counted"] == "quiet":
                return (f"below the quarter-of-peak floor: its last window of traffic "
                        f"carried less than {100 * e.active_share:g}% of its peak (a pause, a "
                        "launch's start or end): such windows neither teach nor contradict")
        if m is None:
            matrix = e.matrix()
            floor = learning.rate_floor(fabric, self.learner.window_s, settings.learn_min_rate)
            if matrix and sum(matrix.values()) < floor:
                w = self.learner.window_s
                return (f"below the minimum rate: its members send each other "
                        f"{sum(matrix.values()) / w:.0f} B/s, under "
                        f"{100 * settings.learn_min_rate:g}% of a link ({floor / w:.0f} B/s "
                        f"of {fabric.link_bps() * 8 / 1e9:g} Gb/s; on an emulated fabric "
                        "say the shaped speed with --mlroute-link-gbps)")
            if matrix:
                return "its measured pairs stay within a leaf: nothing to route"
            return e.unsteady() or "no pair measured"
        if not m.steady:
            return e.unsteady()
        if t.deferred:
            return (f"re-plans bound: {settings.learn_replans_per_minute} re-plans a minute "
                    "at most (--mlroute-learn-replans-per-minute)")
        if t.kept is not None:
            return f"gain under the threshold: {t.kept_event or 'plan kept'}"
        return "judged at the next window"

    def decisions(self, state: ControllerState, settings: Settings, measured: dict,
                  now: float, wall: float | None = None) -> Iterator[Decision]:
        """A decision for each job whose steady matrix has not been judged in its present
        form and calls for a (re-)plan, or is kept on its plan; a kept plan is judged again
        once the state or what the other jobs send beside their plans changed. Each is made
        on ``state`` as it is when asked for: the caller applies one before asking for the
        next, so a job learned in the same window as another is planned with it, never over
        it."""
        for jid, m in measured.items():
            r, t = state.jobs.get(jid), self.jobs.get(jid)
            if r is None or t is None or not m.steady:
                continue
            # judged again when pairs leave their route's plane (the framework reconnected)
            pairs = frozenset(m.pairs), frozenset(learning.off_plane(state.fabric, r, m))
            also = learning.sending_unplanned(state.fabric, state.jobs, measured, jid)
            context = (state.version, frozenset((j, frozenset(o.pairs)) for j, o in also.items()))
            kept = t.kept
            if t.judged == pairs and (kept is None or (
                    kept[0] == context and not _grown(state.fabric, r, m, kept[1]))):
                continue
            found = learning.verdict(state.fabric, r, m)
            if found is None:
                t.judged, t.kept, t.deferred = pairs, None, False
                continue
            t.replans = [x for x in t.replans if now - x < REPLAN_PERIOD]
            t.deferred = len(t.replans) >= settings.learn_replans_per_minute
            if t.deferred:
                self.deferred += 1
                continue  # judged again once the bound allows
            t.judged, t.kept = pairs, None
            cause, mismatch = found
            try:
                change = decide.learned(state, settings, jid, m, cause, mismatch)
            except (ConflictError, InputError) as e:  # e.g. over the rule budget
                yield Decision(jid, pairs, Change(cause, state.jobs, event={
                    "job": jid, "mismatch": mismatch}), e)
                continue
            if r.matrix != "learning" and not (mismatch or {}).get("off_plane_pairs"):
                pays, text = _pays(state, settings, jid, m, change, measured, also)
                if not pays:
                    t.kept = (context, _lacking(state.fabric, r, m))
                    event = (f"{cause}: plan kept, {text}, a re-plan needs "
                             f"{100 * settings.learn_min_gain:g}%")
                    if event != t.kept_event:  # judged again, nothing new
                        t.kept_event = event
                        yield Decision(jid, pairs, event={
                            "time": now if wall is None else wall, "job": jid,
                            "mismatch": mismatch, "cause": event})
                    continue
                change.cause = f"{cause}: re-planned on the measured matrix" + (
                    f", {text}" if text else "")
            t.kept_event = None
            yield Decision(jid, pairs, change)

    def step(self, state: ControllerState, settings: Settings, now: float, active: bool,
             apply: Callable[[Change], object], fail: Callable[[Change, Exception], None],
             wall: float | None = None) -> None:
        """A tick of learning (under the service lock) at ``now``, monotonic seconds (windows,
        the re-plan bound), ``wall`` the events' time (default ``now``): senders dropped for
        the first time become events, the closed windows are folded into the jobs'
        estimates (master and standby alike: learned matrices survive a failover); on the
        master (``active``) each decision is applied as any change: ``apply`` returns None
        when it was refused, ``fail`` records a matrix refused before it was applied."""
        for sender in self.new_rejected():
            state.add_event({"time": now if wall is None else wall,
                             "cause": f"sFlow datagrams from {sender} "
                             "dropped: not a known agent (--mlroute-sflow-agents)"})
        self.fold(state, now)
        state.measured = self.measured(state, settings)
        if not active:
            return
        for d in self.decisions(state, settings, state.measured, now, wall):
            if d.change is None:
                state.add_event(d.event)
                oplog.event(d.event)  # a learning decision: the plan kept
                continue
            if d.error is not None:
                fail(d.change, d.error)
            self.applied(d, d.error is None and apply(d.change) is not None, now)

    def applied(self, decision: Decision, ok: bool, now: float) -> None:
        """Note the outcome of a decided change: a re-plan counts against the bound; a
        refused matrix is not tried again until its pairs change."""
        t = self.jobs.get(decision.job)
        if ok and t is not None:
            t.replans.append(now)
            t.replanned += 1


def _lacking(fabric, r, m) -> float:
    """The share of the measured bytes on pairs the job's plan lacks."""
    planned = learning.declared_pairs(fabric, r)
    total = sum(m.pairs.values())
    return sum(v for p, v in m.pairs.items() if p not in planned) / total if total else 0.0


def _grown(fabric, r, m, kept_share: float) -> bool:
    """The share of the measured bytes on pairs the job's plan lacks grew by ``GROWN``
    since the plan was kept with ``kept_share`` of them lacking (computed alike: the same
    measurement never counts as grown)."""
    share = _lacking(fabric, r, m)
    return share > 0 and share >= GROWN * kept_share


NOT_SLOWER = 0.01  # a re-plan must not make the job this much slower while others still wait


def _pays(state: ControllerState, settings: Settings, jid: str, m, change: Change,
          measured: dict, also: dict) -> tuple[bool, str]:
    """Whether re-planning the job on its measured matrix (``change``) pays, and the
    prediction that says so. With other jobs sending pairs their plans lack (``also``), the
    gain is predicted with them re-planned too, as each is judged in turn (two jobs colliding
    on hashed paths gain nothing from planning one of them alone: the other's hashed flows
    still meet it, and both would be kept for good), and the job's own re-plan must not make
    it slower meanwhile. A figure that cannot be predicted does not stop a re-plan."""
    f = state.fabric
    before = learning.predicted_now(f, state.jobs, jid, m, measured)
    alone = learning.predicted_after(f, change.jobs, jid, measured)
    after, note = alone, ""
    if also:
        try:
            joint = decide.learned(state, settings, jid, m, change.cause, None, also).jobs
            after = learning.predicted_after(f, joint, jid, measured)
            note = f" with {', '.join(sorted(also))} re-planned too"
        except (ConflictError, InputError):
            pass
    if before is None or after is None:
        return True, ""
    if before <= 0:
        return False, "no iteration time predicted"
    text = (f"predicted iteration {before:.3g} s -> {after:.3g} s "
            f"({100 * (after / before - 1):+.0f}%){note}")
    if note and alone is not None and alone > (1 + NOT_SLOWER) * before:
        return False, f"{text}, but {alone:.3g} s alone"
    return after <= (1 - settings.learn_min_gain) * before, text
