"""Make switches hold what the state wants, entry by entry, and nothing else.

The reconciler keeps a shadow of every synchronised switch's tables. A switch that connects (or
whose table became uncertain after a failed change) is queued; ``drain`` reads its flow and
group tables from the switch itself, diffs them against the desired tables and sends only the
difference: entries that match stay untouched (their packet counters keep counting), missing
ones are added, entries nobody planned are deleted. A controller restart or a flapping control
connection therefore sends nothing to a switch whose table is right.

Every change is make before break: additions (and overwrites) first, confirmed by a barrier,
then deletions. If a switch rejects an addition or does not confirm in time, the additions are
undone and the change fails with nothing changed; a switch whose undo could not be confirmed
is queued, so its table is read back and repaired rather than trusted. A switch that refuses
additions because a table is full gets the entries no running job owns deleted first, then
the additions again (``_make``): stale entries would otherwise wait for the additions, which
wait for room, forever. A switch that failed to be read or repaired is tried again after a
back-off that doubles (``RETRY_FIRST`` to ``RETRY_CAP``), and only off the change lock
(``claim``; ``drain`` leaves it): a switch that never answers was read on every tick, and
after every change under the lock, for the whole timeout each time.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol

from controller.enforcement.openflow import (
    COOKIE_JOB,
    COOKIE_OWNER_MASK,
    COOKIE_STATIC,
    Message,
    SwitchState,
    apply,
    diff,
    diff_jobs,
)
from controller.enforcement.pacing import Pacer
from controller.errors import ConflictError, InstallError

RETRY_FIRST, RETRY_CAP = 1.0, 30.0  # seconds before a failed switch is tried again


class Installer(Protocol):
    def install(self, batches: dict[int, list[Message]]) -> None:
        """Send each switch its messages and wait for its barrier reply; raise InstallError
        naming the switch if one rejects a message or does not answer in time."""

    def read_tables(self, dpid: int) -> SwitchState:
        """The flow and group entries a switch holds now (flow stats, group description);
        raise InstallError if it does not answer in time."""

    def read_many(self, dpids: list[int], ready: Callable[[dict], None] | None = None
                  ) -> dict[int, SwitchState | InstallError]:
        """``read_tables`` of several switches, all at once: per switch its state or why it
        could not be read; those read while others are awaited may go to ``ready`` instead
        (one that does not answer holds none of them)."""

    def packet_out(self, dpid: int, port: int, frame: bytes) -> None:
        """Send a frame out of a switch port (LLDP and ARP probes of discovery)."""


def _parts(rules: list) -> tuple[list, list]:
    """(static entries, job entries) of a switch's wanted rules: a ``desired.Entries`` says
    them; any other list counts as static entries alone."""
    static = getattr(rules, "static", None)
    return (rules, ()) if static is None else (static, rules.jobs)


def _job_cookies(want: dict) -> set[int]:
    """The cookies of the running jobs: those of the job entries of ``want`` (every switch's
    (rules, groups)), asked for only when a table is full."""
    out = set()
    for rules, _groups in want.values():
        static, jobs = _parts(rules)
        out.update(r.cookie for r in (rules if static is rules else jobs)
                   if r.cookie & COOKIE_OWNER_MASK == COOKIE_JOB)
    return out


class Reconciler:
    def __init__(self, installer: Installer, counters: dict, describe: Callable[[int], str] = hex,
                 waiting: Callable[[], AbstractContextManager] = nullcontext,
                 pause: Callable[[], None] | None = None,
                 clock: Callable[[], float] | None = None):
        """``clock``: monotonic seconds for the back-off of switches that failed (None: they
        are tried again at once, by ``drain`` too)."""
        self.installer = installer
        self.clock = clock
        # dpid -> (failures in a row, when to try again): set aside from ``drain``
        self.retry: dict[int, tuple[int, float]] = {}
        # around every wait for the switches (an install, a table read) and the diffs: the
        # service lets views read its state meanwhile (``servicelock.ServiceLock.waiting``);
        # nothing here is mutated inside it, only before or after
        self.waiting = waiting
        # called every ``pacing.PAUSE_ENTRIES`` entries diffed, inside ``waiting`` (the
        # shell's yield: under eventlet views answer only where the writer yields)
        self.pause = pause
        self.counters = counters  # shared with the state, for views and metrics
        self.describe = describe  # dpid -> switch name, for messages
        self.installed: dict[int, SwitchState] = {}  # synchronised switches
        self.pending: set[int] = set()  # connected switches to read and repair
        self.syncing: set[int] = set()  # claimed: being read outside the service lock
        self.last_sync: dict[int, dict] = {}  # dpid -> what its last read-and-repair sent
        # dpid -> (shadow, rules, groups): the wanted lists its shadow was last brought to;
        # while the shadow object and both lists are the same, a converge has nothing to send
        self.basis: dict[int, tuple] = {}
        # the switches this controller writes: all, or its share when redundant controllers
        # share mastership out (``service/ownership.py``); the others' owners write theirs
        self.manages: Callable[[int], bool] = lambda dpid: True
        self.elsewhere: Callable[[int], bool] = lambda dpid: False  # connected, another's

    # ---- switches coming and going --------------------------------------------------------
    def connected(self, dpid: int) -> None:
        """Queued to be read (if this controller writes it); a read of an earlier connection
        in flight is dropped; a new connection starts without a back-off."""
        self.installed.pop(dpid, None)
        self.basis.pop(dpid, None)
        self.syncing.discard(dpid)
        self.retry.pop(dpid, None)
        if self.manages(dpid):
            self.pending.add(dpid)

    def disconnected(self, dpid: int) -> None:
        self.installed.pop(dpid, None)
        self.basis.pop(dpid, None)
        self.pending.discard(dpid)
        self.syncing.discard(dpid)
        self.retry.pop(dpid, None)

    def doubt(self, dpid: int) -> float | None:
        """A switch that failed to be read, repaired or to confirm an undo: queued, and with
        a clock tried again after a back-off (1 s, doubling up to 30 s), off the change lock
        (``claim``, not ``drain``). Returns that wait."""
        self.installed.pop(dpid, None)
        self.pending.add(dpid)
        if self.clock is None:
            return None
        failures = self.retry.get(dpid, (0, 0.0))[0] + 1
        wait = min(RETRY_CAP, RETRY_FIRST * 2 ** (failures - 1))
        self.retry[dpid] = (failures, self.clock() + wait)
        return wait

    def forget(self, keep: Callable[[int], bool]) -> None:
        """Stop managing switches that ``keep`` rejects (not part of the fabric any more, or
        another controller's share); a read of one in flight is dropped."""
        for dpid in [d for d in self.installed if not keep(d)]:
            del self.installed[dpid]
            self.basis.pop(dpid, None)
        self.pending = {d for d in self.pending if keep(d)}
        self.syncing = {d for d in self.syncing if keep(d)}
        self.retry = {d: r for d, r in self.retry.items() if keep(d)}

    def drain(self, want: dict) -> list[tuple[int, str]]:
        """Read and repair every queued switch against ``want`` (dpid -> (rules, groups)),
        all read at once and repaired at once (``repair_many``), but those in a back-off
        (the caller holds the change lock; ``claim`` takes them off it). Returns (dpid,
        error) for switches that could not be synchronised; they stay queued."""
        t0 = time.perf_counter()
        dpids = sorted(self.pending - self.retry.keys())
        with self.waiting():
            reads = self.installer.read_many(dpids) if dpids else {}
        failed = {d: str(r) for d, r in reads.items() if isinstance(r, Exception)}
        haves = {d: r for d, r in reads.items() if not isinstance(r, Exception)}
        failed.update(self.repair_many(haves, want, t0))
        for dpid in failed:
            self.doubt(dpid)
        return sorted(failed.items())

    def reading(self) -> bool:
        """Whether a switch is being read or waits to be (not counting those in a back-off):
        what the held probes and the silence rounds wait for."""
        return bool(self.syncing) or bool(self.pending - self.retry.keys())

    def claim(self, limit: int = 1, now: float = float("inf")) -> list[int]:
        """Take up to ``limit`` queued switches to read outside the caller's lock
        (``repair_many`` afterwards), lowest dpid first, but those whose back-off lasts
        beyond ``now``."""
        dpids = sorted(d for d in self.pending if self.retry.get(d, (0, now))[1] <= now)
        dpids = dpids[:limit]
        self.pending.difference_update(dpids)
        self.syncing.update(dpids)
        return dpids

    def unclaim(self, dpid: int) -> bool:
        """A claimed switch whose read failed: False if it left meanwhile."""
        if dpid in self.syncing:
            self.syncing.discard(dpid)
            return True
        return False

    def requeue(self, failed: set, connected: Callable[[int], bool]) -> dict[int, float | None]:
        """Switches whose read or repair failed, still connected: tried again after their
        back-off (``doubt``); returns the wait of each."""
        return {d: self.doubt(d) for d in sorted(failed)
                if d not in self.installed and connected(d) and self.manages(d)}

    def repair_many(self, haves: dict[int, SwitchState], want: dict,
                    t0: float | None = None) -> dict[int, str]:
        """Send switches whose tables were read (``haves``) only the difference to ``want``
        (dpid -> (rules, groups)): the additions of all of them in one install, then their
        deletions (make before break on each; no switch waits for another's barrier).
        Returns dpid -> error for those that failed: not synchronised, and left queued or
        not as they were (the caller queues them again)."""
        t0 = time.perf_counter() if t0 is None else t0
        plans = {}
        for dpid, have in haves.items():
            self.syncing.discard(dpid)
            rules, groups = want.get(dpid, ([], []))
            plans[dpid] = (*diff(dpid, have, rules, groups), rules, groups)
        failed, freed = self._make({d: p[0] for d, p in plans.items() if p[0]},
                                   {d: p[1] for d, p in plans.items()}, want)
        failed.update(self._send_each(_without({d: p[1] for d, p in plans.items()
                                                if p[1] and d not in failed}, freed)))
        for dpid, (make, brk, rules, groups) in plans.items():
            if dpid in failed:
                continue
            have = haves[dpid]
            apply(have, make)
            apply(have, brk)
            self.installed[dpid] = have
            self.basis[dpid] = (have, rules, groups)
            self.pending.discard(dpid)
            self.retry.pop(dpid, None)
            self.counters["reconnects"] += 1
            stats = self._count(make, brk)
            stats.update(messages=len(make) + len(brk), entries=len(have.rules),
                         switches=len(plans), seconds=round(time.perf_counter() - t0, 6))
            self.last_sync[dpid] = stats
        return failed

    def _make(self, makes: dict, breaks: dict, want: dict) -> tuple[dict[int, str], dict]:
        """Send the additions ``makes``. A switch that refused some only because a table is
        full: its deletions (``breaks``) of entries no running job owns (stale entries of a
        job deleted while the controller was away, foreign ones; by cookie, ``want``'s job
        entries giving the running jobs) are sent first, then its additions once more.
        Returns (dpid -> error of those that failed, dpid -> the deletions sent early)."""
        try:
            self._send(makes)
            return {}, {}
        except InstallError as e:
            failed = e.per_switch(makes)
            full = [d for d in sorted(e.full) if d in failed]
        if not full:
            return failed, {}
        running = _job_cookies(want) if any(breaks.get(d) for d in full) else set()
        freed = {d: [m for m in breaks.get(d, ()) if m.kind == "flow_delete"
                     and m.rule.cookie not in running] for d in full}
        freed = {d: ms for d, ms in freed.items() if ms}
        tried = self._send_each(freed)
        tried.update(self._send_each({d: [m for m in makes[d] if m.kind == "flow_add"]
                                      for d in freed if d not in tried}))
        c = self.counters
        c["table_full_freed"] = c.get("table_full_freed", 0) + sum(map(len, freed.values()))
        for dpid in full:
            cured = dpid in freed and dpid not in tried
            key = "table_full_made_room" if cured else "table_full_still_full"
            c[key] = c.get(key, 0) + 1
            if cured:
                del failed[dpid]
        return failed, freed

    def _send_each(self, batches: dict) -> dict[int, str]:
        """``_send``, its failures per switch (every switch of ``batches`` where the installer
        does not say which failed)."""
        try:
            self._send(batches)
        except InstallError as e:
            return e.per_switch(batches)
        return {}

    # ---- changes --------------------------------------------------------------------------
    def check_offline(self, want: dict, current: Callable[[], dict], name: Callable[[int], str]):
        """A change that needs job rules on a switch that is not synchronised cannot be
        confirmed: refuse it, naming the switch (static entries follow when it connects)."""
        now = None
        for dpid, (rules, _) in want.items():
            if (dpid in self.installed or dpid in self.pending or dpid in self.syncing
                    or self.elsewhere(dpid)):
                continue  # synchronised, or about to be read and repaired with the newest
                # state (here, or by the controller that masters it)
            now = current() if now is None else now
            new = {x for x in rules if x.cookie != COOKIE_STATIC}
            old = {x for x in now.get(dpid, ([], []))[0] if x.cookie != COOKIE_STATIC}
            if new != old:
                raise ConflictError(f"switch {name(dpid)} (dpid {dpid:#x}) is not connected: "
                                    "cannot install its rules")

    def converge(self, want: dict) -> dict:
        """Bring every synchronised switch to ``want``: additions first, then deletions. A
        switch whose wanted lists are the very ones its shadow was brought to last is not
        diffed (``desired.DesiredTables`` hands unchanged switches the same lists); one whose
        static entries are the same list is diffed by its jobs' entries only
        (``desired.Entries``, ``openflow.diff_jobs``)."""
        t0 = time.perf_counter()
        with self.waiting():  # the diffs only read the shadows: views may read them too
            makes, breaks, reached = self._diffs(want)
        failed, freed = self._make(makes, breaks, want)
        if failed:
            self.counters["install_failures"] += 1
            self._rollback(makes)
            for dpid in freed:  # entries deleted early: its shadow is wrong now
                self.doubt(dpid)
            raise InstallError(next(iter(failed.values())), failed)
        for dpid, msgs in makes.items():
            apply(self.installed[dpid], msgs)
        try:
            self._send(_without(breaks, freed))
        except InstallError as e:
            # the new entries are in place and confirmed, so the change stands; the switches
            # whose deletions were not confirmed are read back and repaired
            self.counters["install_failures"] += 1
            for dpid in e.per_switch(breaks):
                self.doubt(dpid)
        breaks = {d: ms for d, ms in breaks.items() if d in self.installed}  # confirmed
        for dpid, msgs in breaks.items():
            apply(self.installed[dpid], msgs)
        for dpid, basis in reached.items():
            if self.installed.get(dpid) is basis[0]:
                self.basis[dpid] = basis
        stats = self._count([m for ms in makes.values() for m in ms],
                            [m for ms in breaks.values() for m in ms])
        self.counters["installs"] += 1
        stats["switches"] = len(set(makes) | set(breaks))
        stats["seconds"] = time.perf_counter() - t0 if (makes or breaks) else None
        return stats

    def _diffs(self, want: dict) -> tuple[dict, dict, dict]:
        """(additions, deletions, wanted lists reached) per synchronised switch (``converge``);
        mutates nothing. ``pause()`` every ``pacing.PAUSE_ENTRIES`` entries diffed (an entry
        per host: a link's 17 switches took 35 ms at k = 16)."""
        makes, breaks, reached = {}, {}, {}
        pacer = Pacer(self.pause)
        for dpid, state in self.installed.items():
            rules, groups = want.get(dpid, ([], []))
            basis = self.basis.get(dpid)
            if basis is None or basis[0] is not state or basis[2] is not groups:
                make, brk = diff(dpid, state, rules, groups)
                pacer.add(len(rules) + len(state.rules))
            elif basis[1] is rules:
                continue
            elif _parts(basis[1])[0] is _parts(rules)[0]:  # the same static entries
                make, brk = diff_jobs(state, _parts(rules)[1], _parts(basis[1])[1])
                pacer.add(len(_parts(rules)[1]) + len(_parts(basis[1])[1]))
            else:
                make, brk = diff(dpid, state, rules, groups)
                pacer.add(len(rules) + len(state.rules))
            reached[dpid] = (state, rules, groups)
            if make:
                makes[dpid] = make
            if brk:
                breaks[dpid] = brk
        return makes, breaks, reached

    def _send(self, batches: dict) -> None:
        if batches:
            self.counters["messages_sent"] += sum(len(m) for m in batches.values())
            with self.waiting():
                self.installer.install(batches)

    def _count(self, make: list, brk: list) -> dict:
        added = sum(m.kind == "flow_add" for m in make)
        removed = sum(m.kind == "flow_delete" for m in brk)
        self.counters["rules_installed"] += added
        self.counters["rules_removed"] += removed
        return {"added": added, "removed": removed}

    def _rollback(self, makes: dict) -> None:
        """Undo additions that may have reached switches: restore overwritten entries, delete
        new ones. Switches whose undo is not confirmed are read back and repaired later (all
        of them where the installer does not say which)."""
        undo = {}
        for dpid, msgs in makes.items():
            state = self.installed[dpid]
            back = []
            for m in msgs:
                if m.kind == "flow_add":
                    old = state.rules.get(m.rule.key)
                    back.append(Message("flow_add", rule=old) if old
                                else Message("flow_delete", rule=m.rule))
                elif m.kind == "group_add":
                    back.append(Message("group_delete", group=m.group))
                elif m.kind == "group_modify":
                    back.append(Message("group_modify", group=state.groups[m.group.group_id]))
            undo[dpid] = back
        try:
            self._send(undo)
        except InstallError as e:
            for dpid in e.per_switch(makes):
                self.doubt(dpid)


def _without(batches: dict, sent: dict) -> dict:
    """``batches`` but the messages of ``sent`` (the same objects), and no empty batch."""
    out = {}
    for dpid, msgs in batches.items():
        early = {id(m) for m in sent.get(dpid, ())}
        rest = [m for m in msgs if id(m) not in early]
        if rest:
            out[dpid] = rest
    return out
