"""What both framework adapters share: the controller built from its options (fabric, store or
redundant controllers, ``RouteService``, switch I/O, REST server) and one method per OpenFlow
event (the adapters' mixin that calls them: ``events.adapter_events``).

Event methods run on the framework's event loop and never block: anything that may wait for the
service lock or for switch replies is spawned (the loop must stay free to deliver those
replies). Periodic work (liveness and LLDP ticks, statistics, off-path planning) runs in loops
of its own.
"""
from __future__ import annotations

import logging
import socket
import threading
import time
from collections import deque

from controller.errors import InputError, InstallError
from controller.jsonio import read_json
from controller.measurement.sflow import SenderFilter, SflowCollector
from controller.model.clos import load_fabric
from controller.planners import PLANNERS
from controller.planners.plan import planner_options
from controller.service import oplog, pathstate
from controller.service.cluster import Cluster
from controller.service.etcd import Etcd
from controller.service.route_service import RouteService
from controller.service.store import StateStore
from controller.service.tablesync import TABLE_READERS
from controller.shell import arp, translate
from controller.shell.heap import Heap
from controller.shell.hub import Hub
from controller.shell.rest import RestServer, write_token
from controller.shell.restsecurity import rest_security
from controller.shell.roles import Roles
from controller.shell.static import StaticSwitches
from controller.shell.switches import Switches
from controller.shell.switchlog import SwitchLog

LOG = logging.getLogger("mlroute")
PACKET_BATCH = 64  # packet-ins handed to the service under one hold of its lock (24 ms of
# CPU at k = 16 for a connect-time LLDP burst; 256 took 35 ms: benchmarks.controlplane)
PORT_GATHER = 0.02  # seconds without a port change that end a batch of them
PORT_GATHER_MAX = 0.1  # seconds the first port change of a batch waits at most
PORT_LOSS_MAX = 0.6  # seconds the first report of a lost switch's links waits for the others
TICK = 1.0  # seconds between the periodic rounds of _tick


def quiet(conf) -> bool:
    """``--mlroute-quiet``: warnings and errors only, mlroute's and the framework's."""
    on = bool(getattr(conf, "mlroute_quiet", False))
    if on:
        for logger in (logging.getLogger(), LOG):
            logger.setLevel(logging.WARNING)
    return on


def tick_wait(to_tick: float, to_deadline: float | None) -> float:
    """Seconds the tick loop waits: until its next round, or until a disconnected switch's
    grace time ends (``RouteService.next_deadline``) when that comes first; never negative."""
    return max(0.0, to_tick if to_deadline is None else min(to_tick, to_deadline))


class Shell:
    def __init__(self, conf, hub: Hub):
        """``conf``: the parsed options (``flags``); its ports were checked free and the
        OpenFlow ones opened by the adapter first (``events``)."""
        quiet(conf)
        fabric = None
        if conf.mlroute_fabric:
            fabric = load_fabric(read_json(conf.mlroute_fabric, "fabric"))
        opts = {a: planner_options(a, conf.mlroute_seed, conf.mlroute_ecmp_salt,
                                   conf.mlroute_ilp_time_limit)
                for a in PLANNERS}  # each name's options (registry: those it takes)
        token = write_token(conf.mlroute_token, conf.mlroute_token_file)
        self.hub = hub
        southbound = getattr(conf, "mlroute_southbound", "openflow")
        if southbound not in ("openflow", "none"):
            raise InputError(f"--mlroute-southbound: {southbound!r}: openflow or none")
        self.static = StaticSwitches(fabric) if southbound == "none" else None
        self.switches = self.static or Switches(hub, conf.mlroute_barrier_timeout, self.name)
        self.cluster = _cluster(conf)
        store = self.cluster.store if self.cluster else (
            StateStore(conf.mlroute_state) if conf.mlroute_state else None)
        self.service = RouteService(self.switches, fabric, algorithm=conf.mlroute_algorithm,
                                    mode="srv6" if self.static else conf.mlroute_mode,
                                    planner_opts=opts, store=store,
                                    objective=conf.mlroute_objective,
                                    on_progress=lambda: hub.sleep(0),
                                    dead_after=conf.mlroute_dead_after, sleep=hub.sleep,
                                    restart_grace=conf.mlroute_restart_grace,
                                    restart_quorum=conf.mlroute_restart_quorum,
                                    probe_quorum=getattr(conf, "mlroute_probe_quorum", 2),
                                    link_gbps=conf.mlroute_link_gbps,
                                    hold_down=conf.mlroute_hold_down,
                                    max_flow_rules=conf.mlroute_max_flow_rules,
                                    over_budget=conf.mlroute_over_budget,
                                    learn_window=conf.mlroute_learn_window,
                                    learn_min_gain=conf.mlroute_learn_min_gain,
                                    learn_replans_per_minute=(
                                        conf.mlroute_learn_replans_per_minute),
                                    sampling_points=conf.mlroute_sflow_sampling_points,
                                    ecmp=conf.mlroute_ecmp)
        # sFlow has no authentication: only known agents are heard (the switches' addresses
        # unless --mlroute-sflow-agents names others)
        self.sflow_agents = SenderFilter(conf.mlroute_sflow_agents)
        self.sflow = (SflowCollector(conf.mlroute_sflow_host, conf.mlroute_sflow_port,
                                     self.service.traffic_samples, allow=self.sflow_agents,
                                     on_rejected=self.service.traffic_rejected)
                      if conf.mlroute_sflow_port else None)
        self.roles = Roles(self.cluster, self.service, self.switches) if self.cluster else None
        native = getattr(conf, "mlroute_rest_native_reads", True)
        policy, tls = rest_security(conf, token, native)
        self.rest = RestServer(self.service, conf.wsapi_host, conf.wsapi_port, token, hub,
                               native=native, policy=policy, tls=tls)
        self.heap = Heap()  # started once the shell is built (the adapters' start_shell)
        self.switchlog = SwitchLog(hub, self.name)  # connected and lost, a line per batch
        self.lldp_interval = 0.0 if self.static else conf.mlroute_lldp_interval
        if conf.mlroute_lldp_budget < 0:
            raise InputError("--mlroute-lldp-budget: probes a second, 0 or more")
        self.service.finder.pace(self.lldp_interval, conf.mlroute_lldp_budget)
        self.echo_interval = 0.0 if self.static else conf.mlroute_echo_interval
        if self.echo_interval < 0:
            raise InputError("--mlroute-echo-interval: seconds, 0 or more")
        self.service.finder.liveness.interval = self.echo_interval
        self.stats_interval = conf.mlroute_stats_interval
        self.improving = False
        self._packets: deque = deque()  # packet-ins waiting for the service (_answer)
        self._ports: deque = deque()  # port changes waiting for the service (_report_ports)
        self._reporting = False  # a _report_ports worker runs
        self._answering = False
        self._connecting: deque = deque()  # switches that connected, for _provision_queued
        self._provisioning = False
        self._intents: deque = deque()  # shared mastership: followed revisions to enforce
        self._enforcing = False
        self._syncers = 0  # _sync workers running (at most TABLE_READERS)
        self._syncers_lock = threading.Lock()
        self._running = True
        self._wake = hub.Event()  # set when a switch is lost: _tick waits for its grace time
        LOG.info("mlroute: algorithm %s, mode %s, fabric %s%s", conf.mlroute_algorithm,
                 self.service.settings.mode, conf.mlroute_fabric or "(none yet)",
                 ", no OpenFlow (hosts push SRv6 paths)" if self.static else "")

    def start(self) -> None:
        if self.cluster is not None:
            self._join_cluster()
        if self.stats_interval > 0:
            self.hub.spawn(self._poll_stats)
        self.hub.spawn(self._tick)
        if self.echo_interval > 0:
            self.hub.spawn(self._echoes)
        if self.static is not None:  # no OpenFlow: every declared switch is there from now
            self.service.note_switches(self.static.connected_now())
            pathstate.restore(self.service, time.monotonic())  # links down stay down
            oplog.switches("counted as connected (no OpenFlow)", list(self.static.fabric.dpids))
            with self.service.lock:
                for link in self.static.links():
                    self.service.finder.topology.link_seen(*link, self.service.clock())
            self._start_syncers()
        self.rest.start()
        if self.sflow is not None:
            try:
                self.sflow.start()
            except OSError as e:
                raise InputError(f"{e.strerror} (--mlroute-sflow-port; 0 turns traffic "
                                 "measurement off)") from None

    def stop(self) -> None:
        """End the loops (each at its next round), the sFlow collector and the REST server."""
        self._running = False
        self.heap.stop()
        if self.sflow is not None:
            self.sflow.stop()
        self.rest.stop()

    def name(self, dpid: int) -> str:
        f = self.service.fabric if hasattr(self, "service") else None
        return (f.switch_of_dpid.get(dpid) if f else None) or f"{dpid:#x}"

    # ---- OpenFlow events (on the event loop: never block) --------------------------------
    def switch_features(self, dp) -> None:
        self.switches.connected(dp)
        self.sflow_agents.switch_at(getattr(dp, "address", None))
        if self.roles is not None:  # the role first, before any table change is sent
            self.roles.on_connected(dp)
        self.switches.send(dp, translate.port_desc_request(dp))

    def port_desc(self, msg) -> None:
        dp = msg.datapath
        self._connecting.append((dp, translate.ports_of(dp.ofproto, msg.body),
                                 translate.port_speeds(dp.ofproto, msg.body)))
        if not self._provisioning:
            self._provisioning = True
            self.hub.spawn(self._provision_queued)

    def switch_dead(self, dp) -> None:
        if self.switches.disconnected(dp):
            self.switchlog.lost(dp.id)
            self.hub.spawn(self._disconnected, dp.id)
        if self.roles is not None:
            self.roles.on_disconnected(dp.id)

    def port_status(self, msg) -> None:
        """Queued: one worker hands every port change waiting to the service at once
        (``_report_ports``), so the links a lost switch takes down are re-planned together."""
        port, up = translate.port_status(msg.datapath.ofproto, msg)
        speed = int(getattr(msg.desc, "curr_speed", 0) or 0)  # kbps, 0: not reported
        self._ports.append((msg.datapath.id, port, up, speed, self.service.clock()))
        if not self._reporting:
            self._reporting = True
            self.hub.spawn(self._guarded, self._report_ports)

    def packet_in(self, msg) -> None:
        """Queued: one worker feeds them to the service in batches (``_answer``)."""
        dpid, in_port = msg.datapath.id, msg.match["in_port"]
        if not self.switches.probe_arrived(dpid, in_port, msg.data):
            self._packets.append((dpid, in_port, msg.data))
            if not self._answering:
                self._answering = True
                self.hub.spawn(self._guarded, self._answer)

    def port_stats(self, msg) -> None:
        body = self.switches.on_multipart(msg)
        if body is not None:
            self.hub.spawn(self._guarded, self.service.port_stats, msg.datapath.id,
                           {p.port_no: p.tx_bytes for p in body})

    def flow_stats(self, msg) -> None:
        body = self.switches.on_multipart(msg)
        if body is not None:
            self.hub.spawn(self._guarded, self.service.flow_stats, msg.datapath.id,
                           translate.flow_counters(body))

    def group_desc(self, msg) -> None:
        self.switches.on_multipart(msg)

    def barrier_reply(self, msg) -> None:
        self.switches.on_barrier_reply(msg)

    def error(self, msg) -> None:
        self.switches.on_error(msg)
        if self.roles is not None:
            self.roles.on_error(msg)

    def role_reply(self, msg) -> None:
        if self.roles is not None:
            self.roles.on_reply(msg)

    # ---- off the event loop ------------------------------------------------------------------
    def _provision_queued(self) -> None:
        """Switches that connected, noted by one worker, every one queued at the time in one
        call (``RouteService.note_switches``), their tables read and repaired meanwhile by up
        to ``TABLE_READERS`` workers. Why one worker: when every switch connects at once (a
        restart), a task per switch queued them all on the service lock ahead of any REST
        request (568-938 ms at the paper's scale, 96 switches). Why all at once: noted one
        at a time, each waited for the lock behind the repairs, which hold it while the
        switches confirm (a k = 16 fat-tree's first start: 1.8-2.4 s from the first switch
        noted to the last, then 0.2-0.3 s). A switch that left while queued is skipped."""
        try:
            while self._connecting:
                batch = []
                while self._connecting:
                    dp, ports, speeds = self._connecting.popleft()
                    if self.switches.holds(dp):  # else it left (or reconnected) while queued
                        batch.append((dp.id, ports, speeds))
                try:
                    failed = self.service.note_switches(batch)
                except Exception:  # noqa: BLE001 - logged; switches connecting later are served
                    LOG.exception("mlroute: noting switches failed")
                    failed = {}
                for dpid, e in failed.items():
                    LOG.error("mlroute: noting switch %s failed: %s", self.name(dpid), e,
                              exc_info=None if isinstance(e, InstallError) else e)
                self.switchlog.connected(d for d, _, _ in batch if d not in failed)
                self._start_syncers()
                self.hub.sleep(0)  # REST and switch events before the next batch
        finally:
            self._provisioning = False
            if self._connecting and self._running:  # one arrived as this worker ended
                self._provisioning = True
                self.hub.spawn(self._provision_queued)

    def _start_syncers(self) -> None:
        with self._syncers_lock:
            start = TABLE_READERS - self._syncers
            self._syncers += start
        for _ in range(start):
            self.hub.spawn(self._sync)

    def _sync(self, counted: bool = True) -> None:
        """Read and repair queued switches until none is left; then, no longer counted, one
        more pass: a switch noted between the last claim and the count going down found
        every worker busy (a switch whose read failed is tried again after its back-off, by
        a worker the tick starts)."""
        try:
            self.service.sync_queued()
        except Exception:  # noqa: BLE001 - logged; the switches stay queued (next tick)
            LOG.exception("mlroute: reading switch tables failed")
        finally:
            if counted:
                with self._syncers_lock:
                    self._syncers -= 1
        if counted:
            self._sync(counted=False)

    def _disconnected(self, dpid: int) -> None:
        """The service notes the lost switch, then the tick loop is woken to wait for the end
        of its grace time, which may come before the loop's next round."""
        self._guarded(self.service.switch_disconnected, dpid)
        self._wake.set()

    def _guarded(self, fn, *args) -> None:
        """A service call off the event loop; bad input is logged, a bug too (with its
        traceback, in the log only), and the controller keeps running."""
        try:
            fn(*args)
        except InputError as e:
            LOG.error("mlroute: %s: %s", fn.__name__, e)
        except Exception:  # noqa: BLE001 - logged; the next event is served
            LOG.exception("mlroute: %s failed", fn.__name__)

    def _answer(self) -> None:
        """Feed the queued packets to discovery, up to ``PACKET_BATCH`` under one hold of the
        service lock, then answer the ARP requests among them for known addresses; until the
        queue is empty."""
        try:
            while True:
                batch = []
                while self._packets and len(batch) < PACKET_BATCH:
                    try:
                        batch.append(self._packets.popleft())
                    except IndexError:  # another worker took it (native threads)
                        break
                if not batch:
                    break
                self.service.packets_in(batch)
                asks = [(dpid, port, req) for dpid, port, data in batch
                        if (req := arp.parse_request(data)) is not None]
                if asks:
                    macs = self.service.arp_answers([(dpid, req[2]) for dpid, _, req in asks])
                    for dpid, port, req in asks:
                        if macs[(dpid, req[2])] is not None:
                            self.switches.packet_out(dpid, port,
                                                     arp.reply(req, macs[(dpid, req[2])]))
                self.hub.sleep(0)  # REST and switch events between batches
        finally:
            self._answering = False
            if self._packets and self._running:  # one arrived as this worker ended
                self._answering = True
                self.hub.spawn(self._guarded, self._answer)

    def _report_ports(self) -> None:
        """Hand the service every queued port change at once, until the queue is empty: those
        that arrive while it re-plans for the last ones make the next batch. The first waits
        for the others a lost switch's neighbours send (over their own connections, a few ms
        apart) until none came for ``PORT_GATHER``, at most ``PORT_GATHER_MAX``: without it,
        the first port alone made a re-plan of its own (0.36 s at k = 16) before the other 15
        made the next. Reports that look like a lost switch's (``decide.switch_going``) wait
        for its other links, at most ``PORT_LOSS_MAX``: Open vSwitch sent them over up to
        0.33 s at k = 16, 0.52 s for a paper-scale spine's 64. The service learns when the
        first of a batch arrived (``detected``)."""
        try:
            seen, waits = -1, 0
            while True:  # until quiet, or the bound, unless a lost switch's reports are due
                if (len(self._ports) == seen or waits >= round(PORT_GATHER_MAX / PORT_GATHER)) \
                        and not (waits < round(PORT_LOSS_MAX / PORT_GATHER)
                                 and self.service.more_ports_coming(list(self._ports))):
                    break
                seen, waits = len(self._ports), waits + 1
                self.hub.sleep(PORT_GATHER)
            while True:
                batch = []
                while True:
                    try:
                        batch.append(self._ports.popleft())
                    except IndexError:  # empty, or another worker took it (native threads)
                        break
                if not batch:
                    break
                self._guarded(self.service.ports_changed, [c[:4] for c in batch],
                              min(c[4] for c in batch))
                self.hub.sleep(0)  # REST and switch events between batches
        finally:
            self._reporting = False
            if self._ports and self._running:  # one arrived as this worker ended
                self._reporting = True
                self.hub.spawn(self._guarded, self._report_ports)

    def _improve(self) -> None:
        """Anytime planning off the request path: layer 2 and the jobs search in this process,
        on two tiers the ILP (when it has a budget) in a child process (the group instance's
        stages: ``planners.offpath``)."""
        try:
            result = self.service.improve()
            if result:
                LOG.debug("mlroute: off-path planning: %s", result)  # oplog says it
        except Exception:  # noqa: BLE001 - logged; the installed plan stays
            LOG.exception("mlroute: off-path planning failed")
        finally:
            self.improving = False

    def _tick(self) -> None:
        """Time for the service: every ``TICK`` its periodic round (LLDP probe rounds,
        off-path planning of groups not proven optimal, ``RouteService.tick``, and queued
        switches read by the sync workers, not here: a switch that never answered its
        table read held each round for the timeout, and the deadlines with it); between
        rounds, a disconnected switch counts as failed at the moment its grace time ends
        (``next_deadline``, ``expire``), not at the next round: the loop waits for whichever
        comes first, and a switch lost meanwhile wakes it (``_disconnected``)."""
        last_probe = 0.0
        due = time.monotonic() + TICK
        while self._running:
            try:
                deadline = self.service.next_deadline()
            except Exception:  # noqa: BLE001 - the rounds go on; the error is logged
                LOG.exception("mlroute: grace times could not be read")
                deadline = None
            self._wake.wait(tick_wait(due - time.monotonic(), None if deadline is None
                                      else deadline - self.service.monotonic()))
            self._wake.clear()
            if deadline is not None and self.service.monotonic() >= deadline:
                self._guarded(self.service.expire)
            if time.monotonic() < due:
                continue  # woken for a deadline, or to wait for a new one
            probe = self.lldp_interval > 0 and time.monotonic() - last_probe >= self.lldp_interval
            last_probe = time.monotonic() if probe else last_probe
            if self.service.unproven and not self.improving:
                self.improving = True
                self.hub.spawn(self._improve)
            try:
                self.service.tick(probe=probe, sync=False)
            except Exception:  # noqa: BLE001 - keep ticking; the error is logged
                LOG.exception("mlroute: periodic check failed")
            self._start_syncers()  # queued switches read by workers: none holds the loop
            if getattr(self, "static", None) is not None and self.rest.published is not None:
                self._guarded(self.rest.published.again, self.service)  # agents' reports
            kept = self.heap.tick()
            if kept:
                LOG.log(logging.INFO if kept == "thawed" else logging.DEBUG,
                        "mlroute: heap %s after a slow full collection (%d objects frozen)",
                        kept, self.heap.frozen)
            due = time.monotonic() + TICK

    def _echoes(self) -> None:
        """A round of echoes through every switch's data plane every ``echo_interval``
        (``RouteService.echo_round``: a switch whose echoes are lost, its ports up, fails
        within three rounds); the sync workers start when one came back (read and repaired)."""
        while self._running:
            self.hub.sleep(self.echo_interval)
            try:
                if self.service.echo_round():
                    self._start_syncers()
            except Exception:  # noqa: BLE001 - the rounds go on; the error is logged
                LOG.exception("mlroute: echo round failed")

    def _poll_stats(self) -> None:
        while self._running:
            self.switches.request_stats()
            self.hub.sleep(self.stats_interval)

    # ---- redundant controllers -------------------------------------------------------------
    def _join_cluster(self) -> None:
        """Standby until etcd elects this controller; then master of every switch."""
        self.service.join(self.cluster)
        self.cluster.start(on_role=lambda role, gen: self.hub.spawn(self._roles, self.roles.apply,
                                                                    role, gen),
                           on_state=self._follow,
                           on_members=lambda rev: self.hub.spawn(self._roles,
                                                                 self.roles.reshare))
        LOG.info("mlroute: controller %s joined the controllers at etcd %s as %s",
                 self.cluster.id, self.cluster.client.url, self.cluster.role)

    def _follow(self, doc, revision: int) -> None:
        try:
            followed = self.service.follow_intent(doc)
        except InputError as e:
            LOG.error("mlroute: stored intent of revision %d: %s", revision, e)
            return
        if followed:
            LOG.info("mlroute: standby follows the intent of revision %d", revision)
            self._enforce_queued(revision)

    def _roles(self, change, *args) -> None:
        """A role change (``Roles.apply``, ``Roles.reshare``); with shared mastership the
        newest intent is then enforced on the new share and acknowledged with it."""
        change(*args)
        if self.cluster.state_revision:
            self._enforce_queued(self.cluster.state_revision)

    def _enforce_queued(self, revision: int) -> None:
        if self.cluster.shares is not None:  # its share written, then acknowledged
            self._intents.append(revision)
            if not self._enforcing:
                self._enforcing = True
                self.hub.spawn(self._guarded, self._enforce)

    def _enforce(self) -> None:
        """Shared mastership: the newest followed intent enforced on this member's share,
        then its revision acknowledged (the planner's answer waits for it). Off the watch
        loop: the installs wait for barriers."""
        try:
            while self._intents:
                revision = self._intents.popleft()
                while self._intents:  # older revisions: the newest includes them
                    revision = self._intents.popleft()
                for _ in range(ENFORCE_TRIES):  # a share moving meanwhile: tried again
                    members = self.service.enforce_share()
                    if members is not None and self.cluster.acknowledge(revision, members):
                        break
                    if self._intents or not self._running:
                        break  # a newer intent is enforced instead
                    self.hub.sleep(ENFORCE_RETRY)
                else:
                    LOG.error("mlroute: revision %d not acknowledged: this controller's share "
                              "was not synchronised within %g s", revision,
                              ENFORCE_TRIES * ENFORCE_RETRY)
        finally:
            self._enforcing = False
            if self._intents and self._running:  # one arrived as this worker ended
                self._enforcing = True
                self.hub.spawn(self._guarded, self._enforce)


ENFORCE_RETRY, ENFORCE_TRIES = 0.25, 30  # s between tries of a member's share; at most


def _cluster(conf) -> Cluster | None:
    """Redundant controllers sharing etcd (--mlroute-etcd), checked before anything starts."""
    if conf.mlroute_share_switches and not conf.mlroute_etcd:
        raise InputError("--mlroute-share-switches shares the switches among controllers "
                         "sharing etcd: give --mlroute-etcd too")
    if not conf.mlroute_etcd:
        return None
    if conf.mlroute_state:
        raise InputError("--mlroute-state and --mlroute-etcd exclude each other (with etcd "
                         "the intent is kept in etcd)")
    try:
        client = Etcd(conf.mlroute_etcd, ca_file=getattr(conf, "mlroute_etcd_ca", None),
                      cert_file=getattr(conf, "mlroute_etcd_cert", None),
                      key_file=getattr(conf, "mlroute_etcd_key", None))
    except ValueError as e:
        raise InputError(f"--mlroute-etcd: {e}") from None
    host = conf.wsapi_host
    if host in ("", "0.0.0.0", "::"):
        host = socket.gethostname()
    if conf.mlroute_share_switches and not conf.mlroute_fabric:
        raise InputError("--mlroute-share-switches needs a declared fabric (--mlroute-fabric): "
                         "discovery's LLDP probes reach the controllers only through each "
                         "switch's master")
    if conf.mlroute_share_switches and conf.mlroute_mode == "host":
        raise InputError("--mlroute-share-switches works with --mlroute-mode flow or sr: host "
                         "mode's probes cross switches that other controllers master")
    cluster = Cluster(client, conf.mlroute_id or f"{socket.gethostname()}:{conf.wsapi_port}",
                      f"http://{host}:{conf.wsapi_port}", conf.mlroute_etcd_prefix,
                      conf.mlroute_lease_ttl, conf.mlroute_failover_probe,
                      share=conf.mlroute_share_switches)
    cluster.check()
    return cluster
