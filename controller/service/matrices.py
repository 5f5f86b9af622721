"""The learning loop: sFlow samples in (any thread), at each tick the jobs whose steady
measured pattern calls for a (re-)plan out, as decided changes (``learning.verdict`` says when,
``decide.learned`` how). A pattern whose change was refused (e.g. over the rule budget) is not
tried again until it changes. A job is judged on the windows that began after it was posted:
what its hosts sent before (an earlier job, another library's ring) neither teaches nor
contradicts it.
"""
from __future__ import annotations

from controller.errors import ConflictError, InputError
from controller.measurement.learner import TrafficLearner, clos_samplers
from controller.model.fabric import Fabric
from controller.service import decide, learning
from controller.service.change import Change
from controller.service.settings import Settings
from controller.service.state import ControllerState


class MatrixLearning:
    def __init__(self, window_s: float, sampling_points: str = "all"):
        self.points = sampling_points  # where the switches sample (learner.clos_samplers)
        # no fabric yet: every pair counts as crossing leaves until the first tick that has one
        self.learner = TrafficLearner(window_s, samplers=clos_samplers({}, sampling_points))
        self.refused: dict[str, frozenset] = {}  # job -> measured pairs that could not run
        self._leaf_of: dict[str, str] = {}  # address -> leaf the samplers were counted for

    def follow(self, fabric: Fabric | None) -> None:
        """Count sampling points on ``fabric``'s leaves (hosts adopted, moved or declared):
        the map is built once per change, not per sampled pair."""
        leaf_of = {ip: fabric.hosts[h] for h, ip in fabric.host_ip.items()} if fabric else {}
        if leaf_of != self._leaf_of:
            self._leaf_of = leaf_of
            self.learner.set_samplers(clos_samplers(leaf_of, self.points))

    def decisions(self, state: ControllerState, settings: Settings,
                  now: float) -> list[tuple[str, frozenset, Change, Exception | None]]:
        """(job, measured pairs, change, error deciding it) for each job to (re-)plan; notes
        every job's last steady pattern in ``state.measured`` (what the job view shows)."""
        for jid in [j for j in state.measured if j not in state.jobs]:
            del state.measured[jid]
        self.follow(state.fabric)
        if state.fabric is None:
            return []
        out = []
        for jid, r in list(state.jobs.items()):
            if not r.learn:
                continue
            pattern = self.learner.pattern({state.fabric.host_ip[h] for h in r.members}, now,
                                           since=r.created)
            if pattern is None or not pattern.steady:
                continue
            measured = learning.measured_pairs(state.fabric, pattern, settings.learn_min_rate)
            if measured.pairs:  # an idle or noisy window keeps the last real pattern
                state.measured[jid] = measured
            found = learning.verdict(state.fabric, r, measured, settings.learn_share)
            pairs = frozenset(measured.pairs)
            if found is None or self.refused.get(jid) == pairs:
                continue
            try:
                out.append((jid, pairs, decide.learned(state, settings, jid, measured, *found),
                            None))
            except (ConflictError, InputError) as e:  # e.g. over the rule budget
                out.append((jid, pairs, Change(found[0], state.jobs, event={
                    "job": jid, "mismatch": found[1]}), e))
        return out

    def applied(self, jid: str, pairs: frozenset, ok: bool) -> None:
        if ok:
            self.refused.pop(jid, None)
        else:
            self.refused[jid] = pairs  # not again until the pattern changes
