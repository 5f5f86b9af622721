"""The one way a decided ``Change`` reaches the switches and the state.

``apply``: the desired tables of the new intent (conflicting matches refused), the offline
check (job rules for a switch that is not synchronised cannot be confirmed), make before break
on every synchronised switch (rolled back on failure), host mode's ports (probed through the
new tables; undone on failure), then the commit: intent, effective fabric, counters,
persistence, the event. Queued switches are read and repaired after it. Either everything
happens or nothing changes, on the switches and in memory.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

from controller.enforcement.desired import DesiredTables, installed_plan
from controller.enforcement.reconcile import Reconciler
from controller.errors import ConflictError, InputError, InstallError
from controller.service import oplog
from controller.service.change import Change, Outcome
from controller.service.hostports import HostPortService
from controller.service.state import ControllerState, to_doc

LOG = logging.getLogger("mlroute")


class Transaction:
    """Applies changes for one controller: its state, switches, host ports and store."""

    def __init__(self, state: ControllerState, reconciler: Reconciler,
                 hostports: HostPortService, store, clock: Callable[[], float],
                 name: Callable[[int], str], ecmp: str = "per-tier", labels: bool = False,
                 released: Callable[[], AbstractContextManager] | None = None):
        self.state = state
        self.ecmp = ecmp  # the aggregation switches' hashing on a Clos (Settings.ecmp)
        self.reconciler = reconciler
        self.hostports = hostports
        self.store = store
        self.clock = clock
        self.name = name
        # around the parts of a change that mutate nothing views read: the writer lets go of
        # the state lock (``servicelock.ServiceLock.released``; by default the reconciler's)
        self.released = released or reconciler.waiting
        # desired tables, recomputed where changes touch; ``labels``: sr's label entries even
        # with no job in sr mode (sr is the default mode: its first job installs no more)
        self.desired = DesiredTables(ecmp, labels)
        self._tables: tuple = (None, {})
        self._plan: tuple = (None, None)
        # shared switch mastership: after a change is stored, waits for the members that
        # write the other switches; returns those that did not confirm (``ownership.py``)
        self.confirm: Callable[[], list[str]] | None = None

    def current_tables(self) -> dict:
        """Desired tables of the committed state, asked for once per change (``DesiredTables``
        recomputes only what the change touched). Computed with the state lock let go (only
        a writer calls it; views never read ``desired``), kept in one assignment."""
        st = self.state
        key = (st.version, id(st.fabric), id(st.jobs))
        if self._tables[0] != key:
            with self.released():
                tables = self.desired.tables(st.fabric, st.jobs.values())
            self._tables = (key, tables)
        return self._tables[1]

    def current_plan(self):
        """The running jobs and their installed routes as one Plan (``installed_plan``; None
        without a fabric or jobs), computed once per state version: the links view and the
        metrics ask for it on every request (40 ms for 1,120 flows on a k = 16 fat-tree).
        Views fill it under the state lock alone, maybe while a change plans: built into a
        local, kept in one assignment (two computing it at once keep equal plans)."""
        st = self.state
        key = (st.version, id(st.fabric), id(st.jobs))
        if self._plan[0] != key:
            plan = installed_plan(st.fabric, st.jobs.values()) if st.fabric else None
            self._plan = (key, plan)
        return self._plan[1]

    def apply(self, change: Change) -> Outcome:
        """Install and commit ``change``; on error nothing changed and the error is raised.
        The desired tables, the offline check, the diffs, host mode's probes and the store
        write run with the state lock let go (``released``: they mutate nothing views read);
        what changes the state (forgetting switches, the shadows, the commit, the event)
        runs under it."""
        t0 = time.perf_counter()
        st, rec = self.state, self.reconciler
        fabric = change.fabric or st.fabric
        with self.released():
            want = self.desired.tables(fabric, change.jobs.values())
        forgotten = []
        if change.declared is not None:  # switches outside the new fabric are let go
            forgotten = [d for d in rec.installed if d not in change.declared.switch_of_dpid]
            rec.forget(lambda d: d in change.declared.switch_of_dpid)
        try:
            if change.offline_check:
                with self.released():
                    rec.check_offline(want, self.current_tables, self.name)
            stats = rec.converge(want)
            try:
                ports = self.hostports.place(fabric, change.jobs, self.released)
            except (ConflictError, InputError, InstallError):  # probes lost or no ports
                self._undo()
                raise
        except (ConflictError, InputError, InstallError):
            for dpid in forgotten:
                rec.connected(dpid)  # read back and repaired against the state in force
            raise
        self._commit(change, fabric, stats)
        self._tables = ((st.version, id(st.fabric), id(st.jobs)), want)  # committed: in force
        outcome = Outcome(stats, self.hostports.commit(fabric, change.jobs, ports))
        self.drain()
        self.save()
        if self.confirm is not None:
            outcome.members_pending = self.confirm()
        if change.event is not None:
            self.record_event(change, outcome=outcome, ms=(time.perf_counter() - t0) * 1e3)
        oplog.applied(change, outcome)  # the operator's line (``oplog.py``)
        return outcome

    def _commit(self, change: Change, fabric, stats: dict) -> None:
        st, rec = self.state, self.reconciler
        if change.declared is not None:
            st.declared, st.presumed_down = change.declared, frozenset()  # its own links
        st.fabric = fabric
        st.set_jobs(change.jobs)  # measurements of deleted records dropped with them
        if change.new_job is not None:
            st.next_number += 1
        st.version += 1
        if change.replanned is not None:
            st.counters["moved_flows"] = st.counters.get("moved_flows", 0) + change.moved_flows
            for ms in change.replanned.planner_ms:
                st.record("planner_ms", ms)
        if stats.get("seconds") is not None:
            st.record("install_s", stats["seconds"])
        if change.declared is not None:  # connected switches of the new fabric: read, repair
            for dpid, seen in st.switches.items():
                if (seen.connected and dpid in change.declared.switch_of_dpid
                        and dpid not in rec.installed):
                    rec.connected(dpid)

    def _undo(self) -> None:
        """Bring the switches back to the committed state (host ports could not be placed)."""
        try:
            self.reconciler.converge(self.current_tables())
        except InstallError as e:
            LOG.error("mlroute: undoing a change whose probes failed: %s", e)

    def fail(self, change: Change, error: Exception) -> None:
        """A change that could not be applied: a topology change still takes its effective
        fabric (views show the link down; the next event tries the re-plan again) unless the
        switches could not be reached; the error is recorded as its event."""
        st = self.state
        if change.fabric_stands and not isinstance(error, InstallError):
            if change.declared is not None:
                st.declared, st.presumed_down = change.declared, frozenset()  # its own links
            st.fabric = change.fabric or st.fabric
            st.version += 1
        oplog.failed(change, error)
        self.save()
        if change.event is not None:
            self.record_event(change, error=str(error))

    def record_event(self, change: Change, outcome: Outcome | None = None,
                     error: str | None = None, ms: float | None = None) -> None:
        st = self.state
        event = {"time": self.clock(), "cause": change.cause, **change.event,
                 "replanned": sorted({g[0] for g in change.replanned.groups})
                 if change.replanned and error is None else [],
                 "moved_flows": change.moved_flows if error is None else 0,
                 "rules": outcome.rules if outcome else None, "error": error,
                 "unroutable_flows": sum(len(r.unroutable()) for r in st.jobs.values())}
        if outcome is not None and outcome.port_changes:
            event["port_changes"] = outcome.port_changes
        if outcome is not None and outcome.members_pending:
            event["members_pending"] = outcome.members_pending
        if error is None and change.plane_changes:
            event["plane_changes"] = change.plane_changes
        if error is None and change.moved_why:
            event["moved_why"] = change.moved_why
        if ms is not None:
            event["recovery_ms"] = round(ms, 3)
        st.add_event(event)
        if change.event.get("links_down"):
            st.counters["failures_handled"] += 1
            if ms is not None:
                st.record("recovery_ms", event["recovery_ms"])

    def drain(self) -> None:
        """Read and repair every queued switch (after the operation that queued it), then
        give host-mode flows new ports where the switches' buckets changed."""
        st, rec = self.state, self.reconciler
        if not rec.pending or st.fabric is None:
            return
        for dpid, error in rec.drain(self.current_tables()):
            LOG.error("mlroute: switch %s could not be reconciled: %s", self.name(dpid), error)
        self.refresh_host_ports()

    def refresh_host_ports(self) -> dict:
        """After a topology change or a switch synchronised: new ports for host-mode flows
        whose port no longer leads to the planned spine. Returns the event's fields."""
        st = self.state
        if (st.fabric is None or self.reconciler.pending
                or not self.hostports.needs_refresh(st.fabric, st.jobs)):
            return {}
        fields = self.hostports.refresh(st.fabric, st.jobs, self.released)
        if "host_error" in fields:
            LOG.error("mlroute: host mode: %s", fields["host_error"])
        else:
            st.version += 1
        return fields

    def save(self) -> None:
        """Persist the committed intent: the document is built under the state lock, the
        write (a sqlite transaction, an etcd round trip) runs with it let go. The change lock
        stays held, so saves keep the order of the changes."""
        if self.store is not None:
            doc = to_doc(self.state, self.hostports.ports.ports)
            with self.released():
                self.store.save(doc)
