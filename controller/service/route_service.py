"""The controller's operations: REST requests and switch events in, state changes out. Free of
any SDN framework: the shell and the REST dispatcher (``api.py``) call these methods; rules
reach switches through the ``Installer``.

A thin sequencer: under one lock, every operation asks ``decide`` for a ``Change`` (pure) and
hands it to the ``Transaction``, which installs it make before break, commits, stores and
records it. A switch that connects is queued; its tables are read without the lock and
repaired under it (``tablesync.py``), never by a nested call (the lock is not re-entrant).
The lock has two levels (``servicelock.py``): a change holds it whole, views take its state
level alone (``self.lock.views``), which a change lets go of while it waits for the switches.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial

from controller.discovery.finder import FabricFinder
from controller.enforcement.reconcile import Installer, Reconciler
from controller.enforcement.rules import bootstrap_messages
from controller.errors import ConflictError, InputError, InstallError, NotFoundError
from controller.model.clos import Clos, as_clos, load_fabric
from controller.model.jobs import parse_job
from controller.planners.plan import planner_options
from controller.planners.ringorder import advise_order
from controller.service import anytime, decide, mastership, oplog, restarts, silence, tablesync, views
from controller.service.admission import check_algorithm
from controller.service.change import Change, Outcome
from controller.service.clusterview import standalone_view
from controller.service.hostports import HostPortService
from controller.service.hoststatus import with_hosts
from controller.service.matrices import MatrixLearning
from controller.service.pathstate import PathEvidence, restore
from controller.service.predictions import Predictions
from controller.service.resolver import Resolver
from controller.service.servicelock import ServiceLock
from controller.service.settings import Settings
from controller.service.state import ControllerState, SwitchSeen, from_doc, next_failure
from controller.service.transaction import Transaction

LOG = logging.getLogger("mlroute")


class RouteService:
    def __init__(self, installer: Installer, fabric: Clos | None = None,
                 settings: Settings | None = None, store=None,
                 clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep,
                 on_progress: Callable[[], None] | None = None,
                 monotonic: Callable[[], float] | None = None, **options):
        """``options`` are ``Settings`` fields, for callers that set a few of them. ``clock``
        stamps events and records; ``monotonic`` (``time.monotonic``; a test's own ``clock``
        when it gives one) measures learning windows, re-plan bounds and the grace times of
        lost switches, which a step of the wall clock must neither stall nor hurry."""
        self.settings = settings or Settings(**options)
        fabric = as_clos(fabric)  # every fabric is served as a Clos (a leaf-spine: one plane)
        if fabric is not None:
            decide.check_servable(fabric)
        self.clock = clock
        self.monotonic = monotonic or (time.monotonic if clock is time.time else clock)
        self.sleep = sleep  # waits without holding the lock (the shell's sleep)
        self.lock = ServiceLock(on_progress)  # ``with self.lock``: a change; ``.views``: a view
        self._readers = threading.Semaphore(tablesync.TABLE_READERS)  # tables read at once
        self.passive = False  # a standby of redundant controllers: observes, never sends
        self.cluster = None  # controller.service.cluster.Cluster when controllers share etcd
        self.state = ControllerState()
        self.paths = PathEvidence()  # hosts' probe reports (no OpenFlow: pathstate.py)
        doc = store.load() if store else None
        self.state.load(*from_doc(doc, fabric))  # declared fabric, jobs, number, links down
        self.reconciler = Reconciler(installer, self.state.counters, self.switch_name,
                                     self.lock.waiting, on_progress, self.monotonic)
        self.hostports = HostPortService(getattr(installer, "probe", None), doc, sleep)
        self.tx = Transaction(self.state, self.reconciler, self.hostports, store, clock,
                              self.switch_name, self.settings.ecmp,
                              labels=self.settings.mode == "sr")
        self.tx.desired.pause = on_progress  # long table computations yield (eventlet)
        self.predictions = Predictions(on_progress)
        # discovery: checks a declared fabric, or finds the fabric when none is declared
        self.finder = FabricFinder(fabric, self.settings.link_gbps,
                                   recognised=None if fabric is not None else self.state.declared)
        # learned matrices: what the members of each job send each other (sFlow samples)
        self.learning = MatrixLearning(self.settings.learn_window, self.settings.sampling_points)
        self.learning.follow(self.state.fabric)
        self.resolver = Resolver(self.finder, self._packet_out)  # ARP answers and probes
        self.unproven: set[tuple[str, str]] = set()  # auto groups off-path stages may improve
        self._reoptimise_at: float | None = None
        if self.state.fabric is not None:  # before REST serves: about 1 s at paper scale
            self.tx.current_tables()

    # read-only shortcuts for the shell, the metrics and tests
    fabric = property(lambda self: self.state.fabric)
    jobs = property(lambda self: self.state.jobs)
    installed = property(lambda self: self.reconciler.installed)
    counters = property(lambda self: self.state.counters)
    telemetry = property(lambda self: self.state.telemetry)
    host = property(lambda self: self.hostports.ports)  # host mode's learned maps and ports

    def switch_name(self, dpid: int) -> str:
        """A switch's name in the fabric in use, else its dpid in hex."""
        f = self.state.fabric
        return (f.switch_of_dpid.get(dpid) if f is not None else None) or f"{dpid:#x}"

    # ---- the one way to change state ----------------------------------------------------------
    def _apply(self, change: Change | None) -> Outcome | None:
        """Apply a decided change (call under the lock); errors are raised to the caller."""
        if change is None:
            return None
        outcome = self.tx.apply(change)
        self.learning.track(self.state, self.monotonic())  # a new job's windows start now
        if change.replanned is not None:
            for key, improvable in change.replanned.improvable.items():
                (self.unproven.add if improvable else self.unproven.discard)(key)
        return outcome

    def _apply_or_record(self, change: Change | None) -> Outcome | None:
        """Apply a change no client waits for (events, timers): errors become its event."""
        if change is None or self.passive:
            return None
        try:
            return self._apply(change)
        except (ConflictError, InputError, InstallError) as e:
            self.tx.fail(change, e)
            return None

    def _topology_changed(self, cause: str, force: bool = False,
                          detected: float | None = None) -> bool:
        if self.passive or self.state.declared is None:  # a standby follows the master
            return False
        st = self.state
        change = self.lock.read_only(decide.topology, st, self.settings, self.monotonic(),
                                     cause, force=force, detected=detected)
        if change is not None and change.event.get("links_up") and self.settings.hold_down > 0:
            self._reoptimise_at = self.monotonic() + self.settings.hold_down
        self._apply_or_record(change)
        return change is not None

    # ---- switch events ----------------------------------------------------------------------
    def switch_connected(self, dpid: int, ports: dict, speeds: dict | None = None) -> None:
        for error in self.note_switches([(dpid, ports, speeds)]).values():
            raise error
        self.sync_queued()  # its tables read and repaired

    def note_switches(self, connected: list[tuple[int, dict, dict | None]]) -> dict:
        """Switches that (re)connected, (dpid, ports, speeds: port -> kbps or None) each: note
        their ports, queue them for reconciliation (tables read, only the difference sent), the
        links they bring back (``tablesync.links_back``), bootstrap those outside the fabric;
        in one hold of the lock. Returns dpid -> the exception of those that failed."""
        failed, strangers, noted = {}, [], {}
        with self.lock:
            for dpid, ports, speeds in connected:
                try:
                    self.state.switches[dpid] = SwitchSeen(True, dict(ports), self.monotonic())
                    self.finder.switch_up(dpid, ports, self.clock(), speeds, tablesync.holds(self, dpid))
                    f = self.state.declared
                    if f is None or dpid not in f.switch_of_dpid:
                        strangers.append(dpid)
                    else:
                        restarts.back(self, dpid)  # the last of its restart round?
                        self.reconciler.connected(dpid)
                        noted[dpid] = f.switch_of_dpid[dpid]
                except Exception as e:  # noqa: BLE001 - the caller says; the others are noted
                    failed[dpid] = e
            tablesync.links_back(self, noted, failed)
            self._bootstrap(strangers)
            self._discovery_out()  # probes out of their ports (a stranger's: it traps LLDP)
        return failed

    def sync_queued(self) -> None:
        """Read and repair the queued switches (``tablesync.sync_queued``: off the lock)."""
        tablesync.sync_queued(self.lock, self._readers, self.state, self.reconciler, self.tx,
                              lambda: self.sends, self.switch_name, self.monotonic,
                              partial(tablesync.probes_out, self))

    def switch_disconnected(self, dpid: int) -> None:
        with self.lock:
            s = self.state.switches.setdefault(dpid, SwitchSeen())
            s.connected, s.since, s.held_until = False, self.monotonic(), None
            self.finder.switch_down(dpid, self.clock())
            self.reconciler.disconnected(dpid)
            f = self.state.declared
            if f is not None and dpid in f.switch_of_dpid:  # lost with others: a restart round
                self.state.restarts.lost(dpid, s.since, self.state.switches, self.settings)
                self._topology_changed(f"switch {f.switch_of_dpid[dpid]} disconnected")
                self._drain()

    def port_changed(self, dpid: int, port: int, up: bool, speed: int | None = None) -> None:
        """A port went up or down (``ports_changed`` of one); ``speed`` in kbps, if reported."""
        self.ports_changed([(dpid, port, up, speed)])

    def more_ports_coming(self, changes: list[tuple]) -> bool:  # the shell's port gather
        return decide.switch_going(self.state.fabric, changes)

    def ports_changed(self, changes: list[tuple[int, int, bool, int | None]],
                      detected: float | None = None) -> None:
        """Ports that went up or down, as (dpid, port, up, speed in kbps or None), noted
        together: the switch links among them re-plan the jobs using them once for all. A
        switch lost takes all its links down at once; one re-plan per port was 16 re-plans
        in a row at k = 16 (3 s, the REST API waiting behind them). ``detected``: when the
        first of them reached the controller (the event records it)."""
        with self.lock:
            for dpid, port, up, speed in changes:
                self.state.switches.setdefault(dpid, SwitchSeen(True)).ports[port] = up
                self.finder.port_changed(dpid, port, up, self.clock(), speed)
            self._discovery_out()
            cause = decide.ports_cause(self.state.declared, changes)
            if cause is not None:  # switch links, not host ports
                self._topology_changed(cause, detected=detected)
                self._drain()

    def _drain(self) -> None:
        if self.sends:
            self.tx.drain()

    def tick(self, probe: bool = True, sync: bool = True) -> None:
        """Called periodically (each second): LLDP probes out of every port (``probe``), the
        fabric adopted once discovery settled, a switch disconnected for longer than ``dead_after``
        counts as failed (``expire`` acts on it at the moment; this is the backstop), auto
        re-optimises once returned links held for the hold-down, and (``sync``; the shell's
        workers do it instead, so that no switch holds its loop) queued switches are read. A
        standby only measures (learned matrices survive a failover)."""
        if self.passive:
            with self.lock:
                self._learn()
            if self.sends and sync:  # a member writing its share: failed reads tried again
                self.sync_queued()
            return
        with self.lock:
            now = self.clock()
            for dpid, port, frame in self.finder.lldp_probes(now) if probe else ():
                self._packet_out(dpid, port, frame)
            self._settle(now)
            restarts.expire(self)
            if self._reoptimise_at is not None and self.monotonic() >= self._reoptimise_at:
                self._reoptimise_at = None
                self._apply_or_record(self.lock.read_only(decide.reoptimise, self.state,
                                                          self.settings))
            self._learn()
        if sync:  # switches queued, or whose read failed before: tried again
            self.sync_queued()

    def next_deadline(self) -> float | None:
        """When a lost switch's grace time (or restart round) next ends, by ``monotonic`` (None:
        none runs): the shell calls ``expire`` then, not at its next tick (``next_failure``)."""
        with self.lock.views:
            if self.passive or self.state.declared is None:
                return None
            return next_failure(self.state.declared, self.state.switches, self.monotonic(),
                                self.settings.dead_after)

    def expire(self) -> None:
        """Switches whose grace time ended count as failed: jobs crossing them re-planned."""
        with self.lock:
            restarts.expire(self)  # a restart round that ended names the re-plan

    def echo_round(self) -> bool:
        """Echoes through every switch's data plane: one whose echoes are lost fails (silence)."""
        return silence.echo_round(self, self._packet_out, self._topology_changed)

    # ---- learned matrices (service/matrices.py) ------------------------------------------------
    def traffic_samples(self, samples) -> None:
        """Packet samples from the switches (the sFlow collector's thread; no service lock)."""
        self.learning.observe(samples, self.monotonic())

    def traffic_rejected(self, sender: str) -> None:
        """A datagram from an unknown sFlow agent was dropped (the sFlow thread; no lock)."""
        self.learning.reject(sender)

    def _learn(self) -> None:
        """Learned matrices folded; on the master, applied (``MatrixLearning.step``)."""
        self.learning.step(self.state, self.settings, self.monotonic(), not self.passive,
                           self._apply_or_record, self.tx.fail, wall=self.clock())

    def _settle(self, now: float, force: bool = False) -> bool:
        """Adopt what discovery found, if it changed; then send the frames it asks for and
        record its alarm events (call under the lock). True when a fabric was adopted."""
        found = self.finder.settle(now, force=force) if not self.passive else None
        if found is not None:
            self._adopt(found, self.finder.last_cause or "fabric discovered")
        self._discovery_out()
        return found is not None

    def _discovery_out(self) -> None:
        for dpid, port, frame in self.finder.take_frames():
            self._packet_out(dpid, port, frame)
        oplog.discovered(self.state, self.finder, self.clock())  # events; problems once

    def _adopt(self, fabric: Clos, cause: str) -> None:
        """Use a discovered fabric (kept out when it conflicts with running jobs)."""
        try:
            change = self.lock.read_only(decide.adopt, self.state, self.settings, fabric,
                                         self.monotonic(), cause)
        except ConflictError as e:
            self.state.add_event({"time": self.clock(), "cause": cause, "error": str(e)})
            return
        self._apply_or_record(change)

    def improve(self, run=None) -> dict | None:
        """Anytime planning of one auto group the request path left improvable: its layer-2,
        jobs and ILP stages off the request path (``service/anytime.py``)."""
        return anytime.improve(self.lock, self.state, self.settings, self.unproven,
                               lambda: not self.passive, self._apply, run)

    # ---- packets ------------------------------------------------------------------------------
    def packet_in(self, dpid: int, port: int, frame: bytes) -> None:
        """An LLDP probe or a host's ARP/IPv4 packet reached the controller: discovery
        (through its guard) may adopt a fabric at once (a new host: static entries only)."""
        self.packets_in([(dpid, port, frame)])

    def packets_in(self, packets: list[tuple[int, int, bytes]]) -> None:
        """Packets that reached the controller, (dpid, port, frame) each, under one hold of
        the lock: a switch connecting returns an LLDP probe per port, thousands at the
        paper's scale, and one lock per packet kept REST requests waiting behind them."""
        with self.lock:
            now = self.clock()
            for dpid, port, frame in packets:
                self.finder.packet_in(dpid, port, frame, now)
            adopted = self._settle(now)
        if adopted:
            self.sync_queued()

    def _packet_out(self, dpid: int, port: int, frame: bytes) -> None:
        if not self.sends or not self.reconciler.manages(dpid):
            return
        try:
            self.reconciler.installer.packet_out(dpid, port, frame)
        except InstallError as e:  # a switch that just left; the next round tries again
            LOG.debug("mlroute: packet-out to %s failed: %s", self.switch_name(dpid), e)

    def _bootstrap(self, dpids: list[int]) -> None:
        """Switches that are not part of the fabric (yet): LLDP and ARP to the controller, so
        that discovery can see their links and hosts. Reconciled like any entry once known."""
        if self.passive or not dpids:
            return
        try:
            with self.lock.waiting():  # views answer meanwhile (the switches are noted already)
                self.reconciler.installer.install({d: bootstrap_messages(d) for d in dpids})
        except InstallError as e:
            for dpid, why in e.per_switch(dpids).items():
                LOG.error("mlroute: switch %#x: %s", dpid, why)

    def arp_answer(self, ip: str, dpid: int | None = None) -> str | None:
        """The MAC owning ``ip`` for the controller's ARP answers (asked at switch ``dpid``:
        only in the address's plane): the fabric's hosts, else a host discovery has heard. An
        unknown address is looked for with ARP probes (at most one round per second per
        address) and None is returned for now."""
        return self.arp_answers([(dpid, ip)])[(dpid, ip)]

    def arp_answers(self, asks: list[tuple[int | None, str]]) -> dict:
        """``arp_answer`` of several (switch, address) under one hold of the lock."""
        with self.lock:
            return self.resolver.answers(self.state.fabric, asks, self.clock())

    def _resolve_addresses(self, doc):
        """A job may name hosts by IPv4 address: each is replaced by its host's name. An
        address no host has is probed for ``resolve_timeout`` s, then is a 400 naming it."""
        return self.resolver.resolve(doc, self.lock, lambda: self.state.fabric, self.clock,
                                     self.sleep, self.settings.resolve_timeout, self._settle)

    # ---- REST operations ----------------------------------------------------------------------
    def put_fabric(self, doc) -> dict:
        with self.lock:
            fabric = load_fabric(doc)
            change = decide.declare_fabric(self.state, fabric, self.settings, self.monotonic())
            self._apply(change)
            self.finder.declare(fabric)
            return self._fabric_view()

    def post_job(self, doc) -> dict:
        doc = self._resolve_addresses(doc)
        with self.lock:
            job = parse_job(doc, views.need_fabric(self.state))
            change = self.lock.read_only(decide.post_job, self.state, self.settings, job,
                                         self.clock(), self.switch_name)
            outcome = self._apply(change)
            view = self.lock.read_only(self._job_view, job.id, self.lock.pause)
            view.update(install_ms=round((outcome.stats["seconds"] or 0) * 1e3, 3), rules=outcome.rules,
                        moved_flows=change.moved_flows, plane_changes=change.plane_changes, **change.answer)
            if self.host.ports:
                view["port_changes"] = outcome.port_changes
            if outcome.members_pending:
                view["members_pending"] = outcome.members_pending
            return view

    def advise(self, doc) -> dict:
        """Ring order advice, nothing installed: per ring the order crossing fewest leaves and
        the saving in inter-leaf flows and predicted time (the job alone, its algorithm)."""
        doc = self._resolve_addresses(doc)
        with self.lock:
            fabric = views.need_fabric(self.state)
            job = parse_job(doc, fabric)
            if not job.is_collective:
                raise InputError(f"job {job.id}: ring order advice needs a ring All-Reduce")
            algorithm = job.options.get("algorithm", self.settings.algorithm)
            check_algorithm(job.id, algorithm)
            opts = dict(self.settings.planner_opts.get(algorithm, planner_options(algorithm)))
            opts["ilp_time_limit"] = 0  # advice answers at once: no ILP stage (auto, jobs)
        return advise_order(fabric, [job], algorithm, predict=True, **opts)

    def delete_job(self, job_id: str) -> dict:
        with self.lock:
            outcome = self._apply(decide.delete_job(self.state, job_id))
            return {"deleted": job_id, "rules": outcome.rules}

    def optimize(self) -> dict:
        """Re-plan every running job together (per algorithm) and install the difference."""
        with self.lock:
            views.need_fabric(st := self.state)
            change = self.lock.read_only(decide.optimize, st, self.settings)
            outcome = self._apply(change)
            return {"jobs": list(st.jobs), "rules": outcome.rules,
                    "moved_flows": change.moved_flows, "plane_changes": change.plane_changes,
                    **change.answer,  # moved_why
                    **self.lock.read_only(lambda: views.links_view(st, self.current_plan()))[
                        "summary"]}

    # ---- views --------------------------------------------------------------------------------
    def current_plan(self):
        """The running jobs and their installed routes as one Plan (call under the lock)."""
        return self.tx.current_plan()

    def fabric_view(self) -> dict:
        with self.lock.views:
            return self._fabric_view()

    def ready_view(self) -> tuple[int, dict]:
        with self.lock.views:  # GET /v1/ready, a readiness probe: 200 ready, else 503
            return with_hosts(views.ready_view(self.state, self.reconciler), self)

    def _fabric_view(self) -> dict:
        return views.service_fabric_view(self.state, self.reconciler, self.settings,
                                         self.hostports.view(), self.finder, self.switch_name)

    def job_view(self, job_id: str) -> dict:
        with self.lock.views:
            return self._job_view(job_id)

    def _job_view(self, job_id: str, pause=None) -> dict:  # pause: with the lock let go
        r = self.state.jobs.get(job_id)
        if r is None:
            raise NotFoundError(f"no job {job_id!r}")
        prediction = self.predictions.of(self.state, job_id, self.current_plan)
        return views.full_job_view(self.state, r, prediction,
                                   self.host.ports.get(job_id), self.finder.link_speed(),
                                   self.learning.explain(self.state, self.settings, r), pause)

    def jobs_view(self) -> dict:
        with self.lock.views:
            return views.jobs_view(self.state)

    def routes_view(self) -> dict:
        with self.lock.views:
            return views.routes_view(self.state, self.host.ports)

    def links_view(self) -> dict:
        with self.lock.views:
            return views.links_view(self.state, self.current_plan())

    def imbalance_view(self) -> dict:
        with self.lock.views:
            return views.imbalance_view(self.state)

    def job_ports(self, job_id: str) -> str:
        """The source port of every connection of a job as text, one line per connection
        (what a job launcher reads: host mode's chosen ports, or the flows' own)."""
        with self.lock.views:
            r = self.state.jobs.get(job_id)
            if r is None:
                raise NotFoundError(f"no job {job_id!r}")
            return views.ports_export(self.state, r, self.host.ports.get(job_id))

    # ---- telemetry ---------------------------------------------------------------------------
    def port_stats(self, dpid: int, tx_bytes: dict[int, int], now: float | None = None) -> None:
        with self.lock:
            if self.state.fabric is not None:
                self.state.telemetry.port_stats(self.state.fabric, dpid, tx_bytes,
                                                self.clock() if now is None else now)

    def flow_stats(self, dpid: int, entries, now: float | None = None) -> None:
        """entries: (table, priority, match dict, bytes, packets) of a switch's rules."""
        with self.lock:
            keyed = [((dpid, table, prio, tuple(sorted(match.items()))), nbytes, npackets)
                     for table, prio, match, nbytes, npackets in entries]
            self.state.telemetry.flow_stats(keyed, self.clock() if now is None else now)

    # ---- redundant controllers (controller/service/cluster.py) --------------------------------
    @property
    def _shared(self) -> bool:  # one of controllers sharing the switches out (ownership.py)
        return self.cluster is not None and self.cluster.shares is not None

    @property
    def sends(self) -> bool:
        """Writes switches: the master, or any member when mastership is shared out."""
        return not self.passive or self._shared

    def join(self, cluster) -> None:
        """One of redundant controllers (``Cluster``): a standby until elected; with shared
        switch mastership, the writer of its share (``mastership.share_out``)."""
        self.passive, self.cluster = True, cluster
        self.share_revision = -1  # the member set whose share this member writes
        if cluster.shares is not None:  # no switch of its own until its first share
            mastership.share_out(lambda dpid: False, self.state, self.reconciler)
            self.tx.confirm = lambda: mastership.confirm(
                cluster.shares, cluster.store, self.state, self.lock.waiting,
                lambda: cluster.role == "master")

    def enforce_share(self) -> int | None:
        """Shared mastership, a member that does not plan: the followed intent on its share
        (``mastership.enforce``). Returns the revision of the member set whose share is then
        synchronised (acknowledged with it), or None: not yet."""
        with self.lock:
            if self.share_revision != self.cluster.shares.revision:
                return None  # the roles of the newest member set are not confirmed yet
            if not self.passive or mastership.enforce(
                    self.state, self.reconciler,
                    lambda: self.reconciler.converge(self.tx.current_tables()), self.tx.drain):
                return self.share_revision
            return None

    def reshare(self, owns, revision: int) -> None:
        """Shared mastership: the switches confirmed the roles of the member set of
        ``revision``; this member now writes the switches ``owns`` accepts."""
        with self.lock:
            mastership.reshare(self.state, self.reconciler, owns)
            self.share_revision = revision
        self.sync_queued()

    def follow_intent(self, doc: dict | None) -> bool:
        """A standby takes the master's stored intent; on the master: False, ignored (at
        once: a change of the master may be waiting for the members' acknowledgements, which
        the same watch loop brings)."""
        if not self.passive:
            return False
        with self.lock:
            if not self.passive:
                return False
            mastership.load_intent(self.state, self.reconciler, self.finder, self.hostports, doc)
            return True

    def take_over(self, doc: dict | None) -> dict:
        """Become the master, as a restarted controller (``mastership.take_over``)."""
        with self.lock:
            mastership.load_intent(self.state, self.reconciler, self.finder, self.hostports, doc)
            self.passive = False
            answer = mastership.take_over(self.state, self.reconciler, self.finder, self.clock(),
                                          partial(self._topology_changed, force=True),
                                          self._drain, trusted=self._shared)
        restore(self, time.monotonic())  # no OpenFlow: links down stay down until probed
        return answer

    def stand_by(self) -> None:
        """Stop acting on switches; the shadows are dropped unless it writes its share."""
        self.passive = True
        if not self._shared:
            with self.lock:
                mastership.stand_by(self.reconciler)

    def cluster_view(self) -> dict:
        return self.cluster.view() if self.cluster is not None else standalone_view()
