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
"""
from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace

from controller.errors import ConflictError, InputError
from controller.measurement.estimate import MatrixEstimate
from controller.measurement.learner import TrafficLearner, clos_samplers
from controller.model.clos import Clos
from controller.model.fabric import Fabric
from controller.service import decide, learning
from controller.service.change import Change
from controller.service.settings import Settings
from controller.service.state import ControllerState

REPLAN_PERIOD = 60.0  # seconds over which learn_replans_per_minute counts
GROWN = 1.5  # growth of the share of a job's bytes its kept plan lacks that has it judged again


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
        self.estimates: dict[str, tuple[float, MatrixEstimate]] = {}  # job -> (created, est.)
        self.judged: dict[str, tuple] = {}  # job -> what was last judged (Decision.pairs)
        # job -> ((state version, others' unplanned pairs), share of its bytes the plan lacked)
        self.kept: dict[str, tuple] = {}
        self._kept_event: dict[str, str] = {}  # job -> the last "plan kept" event's cause
        self.replans: dict[str, list[float]] = {}  # job -> times of its recent re-plans
        self.deferred = 0  # re-plans put off by the per-job bound
        self.replanned: dict[str, int] = {}  # job -> (re-)plans on measured matrices
        self.rejected = 0  # sFlow datagrams dropped: their sender is not a known agent
        self._rejected_new: list[str] = []  # senders dropped for the first time, not reported
        self._rejected_seen: set[str] = set()
        self._lock = threading.Lock()  # reject() runs in the sFlow thread
        self._folded = -math.inf  # index of the last window folded
        self._interfaces: list = []  # (host, plane, address, MAC, leaf) the maps are of
        self._canon: dict[str, str] = {}  # address -> its host's first-plane address
        self._plane_of: dict[str, int] = {}  # address -> its plane (several planes only)

    def follow(self, fabric: Fabric | Clos | None) -> None:
        """Count sampling points on ``fabric``'s leaves and pods (hosts adopted, moved or
        declared): the maps are built once per change, not per sampled pair. With them, per
        address, the host's first-plane address (``_canon``: one matrix per host pair) and,
        on several planes, the address's plane (``_plane_of``)."""
        interfaces = [x for x in fabric.interfaces() if x[2]] if fabric else []
        if interfaces != self._interfaces:
            self._interfaces = interfaces
            leaf_of = {ip: leaf for _, _, ip, _, leaf in interfaces}
            self._canon = {ip: fabric.host_ip.get(h) for h, _, ip, _, _ in interfaces}
            self._plane_of = {ip: q for _, q, ip, _, _ in interfaces} \
                if len(getattr(fabric, "planes", ())) > 1 else {}
            pods = ({leaf: pod for p in fabric.planes for leaf, pod in
                     zip(p.leaves, p.pod_of_leaf)} if isinstance(fabric, Clos) else None)
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

    def fold(self, state: ControllerState, now: float) -> None:
        """Fold the windows closed since the last call into the estimate of every job that
        may learn (each job from the first window that began after it was posted). On a
        multi-plane fabric a pair's samples on every plane add up, keyed by the hosts'
        first-plane addresses, and its bytes per plane (its source address's) are kept
        beside: the plane its framework uses (``MatrixEstimate.plane``)."""
        self.follow(state.fabric)
        fabric = state.fabric
        jobs = {jid: r for jid, r in state.jobs.items() if r.learn} if fabric else {}
        for jid in [j for j in self.estimates if j not in jobs or
                    self.estimates[j][0] != jobs[j].created]:
            del self.estimates[jid]
        for jid in [j for j in self.judged if j not in jobs]:
            self.judged.pop(jid)
            self.kept.pop(jid, None)
            self._kept_event.pop(jid, None)
            self.replans.pop(jid, None)
            self.replanned.pop(jid, None)
        windows = self.learner.closed(self._folded, now)
        if not windows:
            return
        self._folded = windows[-1].index
        canon, plane = self._canon, self._plane_of  # built by follow() above
        members, jobs_of = {}, {}
        for jid, r in jobs.items():
            if jid not in self.estimates:
                self.estimates[jid] = (r.created, MatrixEstimate())
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
                created, estimate = self.estimates[jid]
                if w.index * window_s >= created - 1e-9:
                    estimate.fold(b, n, by_plane)

    def measured(self, state: ControllerState, settings: Settings) -> dict:
        """Job -> ``learning.Measured`` of every estimate with pairs (what the job view shows;
        only steady ones are decided on: an estimate between phases still shows its pairs)."""
        if state.fabric is None:
            return {}
        out = {}
        for jid, (_, estimate) in self.estimates.items():
            if jid in state.jobs:
                m = learning.measured_pairs(state.fabric, estimate, self.learner.window_s,
                                            settings.learn_min_rate)
                if m.pairs:
                    out[jid] = replace(m, replans=self.replanned.get(jid, 0))
        return out

    def decisions(self, state: ControllerState, settings: Settings, measured: dict,
                  now: float) -> Iterator[Decision]:
        """A decision for each job whose steady matrix has not been judged in its present
        form and calls for a (re-)plan, or is kept on its plan; a kept plan is judged again
        once the state or what the other jobs send beside their plans changed. Each is made
        on ``state`` as it is when asked for: the caller applies one before asking for the
        next, so a job learned in the same window as another is planned with it, never over
        it."""
        for jid, m in measured.items():
            r = state.jobs.get(jid)
            if r is None or not m.steady:
                continue
            # judged again when pairs leave their route's plane (the framework reconnected)
            pairs = frozenset(m.pairs), frozenset(learning.off_plane(state.fabric, r, m))
            also = learning.sending_unplanned(state.fabric, state.jobs, measured, jid)
            context = (state.version, frozenset((j, frozenset(o.pairs)) for j, o in also.items()))
            kept = self.kept.get(jid)
            if self.judged.get(jid) == pairs and (kept is None or (
                    kept[0] == context and not _grown(state.fabric, r, m, kept[1]))):
                continue
            found = learning.verdict(state.fabric, r, m)
            if found is None:
                self.judged[jid] = pairs
                self.kept.pop(jid, None)
                continue
            recent = [t for t in self.replans.get(jid, ()) if now - t < REPLAN_PERIOD]
            self.replans[jid] = recent
            if len(recent) >= settings.learn_replans_per_minute:
                self.deferred += 1
                continue  # judged again once the bound allows
            self.judged[jid] = pairs
            self.kept.pop(jid, None)
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
                    self.kept[jid] = (context, _lacking(state.fabric, r, m))
                    event = (f"{cause}: plan kept, {text}, a re-plan needs "
                             f"{100 * settings.learn_min_gain:g}%")
                    if event != self._kept_event.get(jid):  # judged again, nothing new
                        self._kept_event[jid] = event
                        yield Decision(jid, pairs, event={
                            "time": now, "job": jid, "mismatch": mismatch, "cause": event})
                    continue
                change.cause = f"{cause}: re-planned on the measured matrix" + (
                    f", {text}" if text else "")
            self._kept_event.pop(jid, None)
            yield Decision(jid, pairs, change)

    def applied(self, decision: Decision, ok: bool, now: float) -> None:
        """Note the outcome of a decided change: a re-plan counts against the bound; a
        refused matrix is not tried again until its pairs change."""
        if ok:
            self.replans.setdefault(decision.job, []).append(now)
            self.replanned[decision.job] = self.replanned.get(decision.job, 0) + 1


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
