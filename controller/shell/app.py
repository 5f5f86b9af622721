"""The Ryu shell: turns OpenFlow events and REST requests into ``RouteService`` calls and sends
what the service returns. This is the only module that imports Ryu.

    ryu-manager --user-flags controller/shell/flags.py --mlroute-fabric fabric.json controller/shell/app.py

OpenFlow 1.3 on 6653 (and 6633), REST on 8080 (``--wsapi-port``).
"""
from __future__ import annotations

import hmac
import json
import logging
import os
import socket
import threading
import time

from ryu import cfg
from ryu.app.wsgi import ControllerBase, Response, WSGIApplication, route
from ryu.base import app_manager
from ryu.controller import ofp_event
from ryu.controller.handler import (CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER,
                                    set_ev_cls)
from ryu.lib import hub
from ryu.lib.packet import arp, ethernet, packet
from ryu.ofproto import ofproto_common, ofproto_v1_3

from controller.service import api

from controller.shell import flags
from controller.service.cluster import Cluster
from controller.service.etcd import Etcd, EtcdError
from controller.jsonio import read_json
from controller.service.listen import check_free
from controller.errors import InputError, InstallError
from controller.model.fabric import Fabric
from controller.service.metrics import exposition
from controller.enforcement.openflow import (COOKIE_EXACT, COOKIE_JOB, COOKIE_OWNER_MASK, FlowRule,
                                             GroupEntry, Message, SwitchState)
from controller.planners.offpath import plan_in_subprocess
from controller.enforcement.hostmode import parse_probe
from controller.planners.plan import planner_options
from controller.service.route_service import RouteService
from controller.service.store import StateStore

LOG = logging.getLogger("mlroute")
flags.register(cfg.CONF)


class MlrouteApp(app_manager.RyuApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]
    _CONTEXTS = {"wsgi": WSGIApplication}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        conf = cfg.CONF
        ofp_ports = ([conf.ofp_tcp_listen_port] if conf.ofp_tcp_listen_port
                     else [ofproto_common.OFP_TCP_PORT, ofproto_common.OFP_TCP_PORT_OLD])
        check_free([(conf.ofp_listen_host, p, "OpenFlow") for p in ofp_ports] +
                   [(conf.wsapi_host, conf.wsapi_port, "REST")])
        fabric = None
        if conf.mlroute_fabric:
            fabric = Fabric.from_dict(read_json(conf.mlroute_fabric, "fabric"))
            if not fabric.wired:
                raise InputError("fabric: the controller needs dpids, ports, host_ip and host_mac")
        opts = {a: planner_options(a, conf.mlroute_seed, conf.mlroute_ecmp_salt,
                                   conf.mlroute_ilp_time_limit)
                for a in ("annealing", "ecmp", "ilp", "auto")}
        self.timeout = conf.mlroute_barrier_timeout
        self.datapaths = {}
        self.waiting = {}  # barrier xid -> hub.Event
        self.reads = {}  # (dpid, xid) of a table read -> (hub.Event, entries so far)
        self.errors = {}  # dpid -> list of (xid, text)
        store = self._store(conf)
        self.service = RouteService(self, fabric, conf.mlroute_algorithm, conf.mlroute_mode,
                                    planner_opts=opts, store=store,
                                    objective=conf.mlroute_objective,
                                    on_progress=lambda: hub.sleep(0),
                                    dead_after=conf.mlroute_dead_after, sleep=hub.sleep,
                                    link_gbps=conf.mlroute_link_gbps,
                                    hold_down=conf.mlroute_hold_down,
                                    max_flow_rules=conf.mlroute_max_flow_rules,
                                    over_budget=conf.mlroute_over_budget)
        self.probe_wait = None  # host mode: (tokens awaited, arrivals, event) of a probe batch
        self.lldp_interval = conf.mlroute_lldp_interval
        self.improving = False
        self.multipart = {}  # (dpid, xid) -> parts received so far
        self.stats_interval = conf.mlroute_stats_interval
        kwargs["wsgi"].register(RestController, {"app": self})
        if self.cluster is not None:
            self._join_cluster()
        if self.stats_interval > 0:
            self.poller = hub.spawn(self._poll_stats)
        self.ticker = hub.spawn(self._tick)
        LOG.info("mlroute: algorithm %s, mode %s, fabric %s", conf.mlroute_algorithm,
                 conf.mlroute_mode, conf.mlroute_fabric or "(none yet)")

    # ---- Installer (called by the service, never from this app's event loop) ---------------
    def install(self, batches: dict[int, list[Message]]) -> None:
        pending = []
        for dpid, msgs in batches.items():
            if not msgs:
                continue
            dp = self.datapaths.get(dpid)
            if dp is None:
                raise InstallError(f"switch {self._name(dpid)} is not connected")
            self.errors[dpid] = []
            xids = []
            for m in msgs:
                ofmsg = self._translate(dp, m)
                dp.send_msg(ofmsg)
                xids.append(ofmsg.xid)
            pending.append((dpid, set(xids), self._barrier(dp)))
        problems = []  # wait for every switch, so no barrier is left registered
        deadline = time.monotonic() + self.timeout
        for dpid, xids, (xid, event) in pending:
            ok = event.wait(timeout=max(0.0, deadline - time.monotonic()))
            self.waiting.pop(xid, None)
            if not ok:
                problems.append(f"switch {self._name(dpid)} did not confirm its rules within "
                                f"{self.timeout:g} s; nothing was changed")
                continue
            failed = [text for x, text in self.errors.get(dpid, []) if x in xids]
            if failed:
                problems.append(f"switch {self._name(dpid)} rejected a rule ({failed[0]}); "
                                "nothing was changed")
        if problems:
            raise InstallError(problems[0])

    def read_tables(self, dpid: int) -> SwitchState:
        """The switch's flow entries (flow stats) and groups (group description), as neutral
        entries, so the reconciler can send only the difference."""
        dp = self.datapaths.get(dpid)
        if dp is None:
            raise InstallError(f"switch {self._name(dpid)} is not connected")
        ofp, parser = dp.ofproto, dp.ofproto_parser
        requests = [parser.OFPFlowStatsRequest(dp, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY,
                                               0, 0, parser.OFPMatch()),
                    parser.OFPGroupDescStatsRequest(dp, 0)]
        replies = []
        for req in requests:
            dp.set_xid(req)
            event = hub.Event()
            self.reads[(dpid, req.xid)] = (event, [])
            replies.append((req.xid, event))
            dp.send_msg(req)
        deadline = time.monotonic() + self.timeout
        bodies = []
        try:
            for xid, event in replies:
                if not event.wait(timeout=max(0.0, deadline - time.monotonic())):
                    raise InstallError(f"switch {self._name(dpid)} did not send its tables "
                                       f"within {self.timeout:g} s")
                bodies.append(self.reads[(dpid, xid)][1])
        finally:
            for xid, _ in replies:
                self.reads.pop((dpid, xid), None)
        flows, groups = bodies
        state = SwitchState()
        for s in flows:
            r = self._rule_of(dpid, s)
            state.rules[r.key] = r
        for g in groups:
            state.groups[g.group_id] = GroupEntry(
                dpid, g.group_id, tuple(self._actions_of(b.actions) for b in g.buckets))
        return state

    @staticmethod
    def _rule_of(dpid: int, s) -> FlowRule:
        """A flow stats entry as the rule builders would have written it."""
        actions, goto = (), None
        for inst in s.instructions:
            if hasattr(inst, "actions"):
                actions = MlrouteApp._actions_of(inst.actions)
            elif hasattr(inst, "table_id"):
                goto = inst.table_id
        return FlowRule(dpid, s.table_id, s.priority, tuple(sorted(s.match.items())),
                        actions, goto, s.cookie)

    @staticmethod
    def _actions_of(acts) -> tuple:
        out = []
        for a in acts:
            name = type(a).__name__
            if name == "OFPActionOutput":
                ofp = ofproto_v1_3
                out.append(("controller",) if a.port == ofp.OFPP_CONTROLLER else ("output", a.port))
            elif name == "OFPActionGroup":
                out.append(("group", a.group_id))
            elif name == "OFPActionPushMpls":
                out.append(("push_mpls", a.ethertype))
            elif name == "OFPActionPopMpls":
                out.append(("pop_mpls", a.ethertype))
            elif name == "OFPActionSetField":
                out.append(("set_field", a.key, a.value))
            else:  # something mlroute never writes: keep it distinct so the entry is replaced
                out.append(("unknown", repr(a)))
        return tuple(out)

    def packet_out(self, dpid: int, port: int, frame: bytes) -> None:
        dp = self.datapaths.get(dpid)
        if dp is None:
            raise InstallError(f"switch {self._name(dpid)} is not connected")
        ofp, parser = dp.ofproto, dp.ofproto_parser
        dp.send_msg(parser.OFPPacketOut(dp, buffer_id=ofp.OFP_NO_BUFFER,
                                        in_port=ofp.OFPP_CONTROLLER,
                                        actions=[parser.OFPActionOutput(port)], data=frame))

    def _barrier(self, dp):
        msg = dp.ofproto_parser.OFPBarrierRequest(dp)
        dp.set_xid(msg)
        event = hub.Event()
        self.waiting[msg.xid] = event
        dp.send_msg(msg)
        return msg.xid, event

    def _name(self, dpid: int) -> str:
        f = self.service.fabric
        return (f.switch_of_dpid.get(dpid) if f else None) or f"{dpid:#x}"

    @staticmethod
    def _translate(dp, m: Message):
        ofp, parser = dp.ofproto, dp.ofproto_parser

        def actions(spec):
            out = []
            for a in spec:
                if a[0] == "output":
                    out.append(parser.OFPActionOutput(a[1]))
                elif a[0] == "controller":
                    out.append(parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER))
                elif a[0] == "group":
                    out.append(parser.OFPActionGroup(a[1]))
                elif a[0] == "push_mpls":
                    out.append(parser.OFPActionPushMpls(a[1]))
                elif a[0] == "pop_mpls":
                    out.append(parser.OFPActionPopMpls(a[1]))
                elif a[0] == "set_field":
                    out.append(parser.OFPActionSetField(**{a[1]: a[2]}))
                else:
                    raise ValueError(f"unknown action {a!r}")
            return out

        if m.kind in ("flow_add", "flow_delete"):
            r = m.rule
            match = parser.OFPMatch(**r.match_dict())
            if m.kind == "flow_delete":
                msg = parser.OFPFlowMod(dp, cookie=r.cookie, cookie_mask=COOKIE_EXACT,
                                        table_id=r.table, command=ofp.OFPFC_DELETE_STRICT,
                                        priority=r.priority, match=match,
                                        out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY)
            else:
                inst = []
                if r.actions:
                    inst.append(parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS,
                                                             actions(r.actions)))
                if r.goto is not None:
                    inst.append(parser.OFPInstructionGotoTable(r.goto))
                msg = parser.OFPFlowMod(dp, cookie=r.cookie, table_id=r.table,
                                        command=ofp.OFPFC_ADD, priority=r.priority, match=match,
                                        instructions=inst)
        else:
            g = m.group
            command = {"group_add": ofp.OFPGC_ADD, "group_modify": ofp.OFPGC_MODIFY,
                       "group_delete": ofp.OFPGC_DELETE}[m.kind]
            buckets = [parser.OFPBucket(weight=1, watch_port=ofp.OFPP_ANY,
                                        watch_group=ofp.OFPG_ANY, actions=actions(b))
                       for b in g.buckets] if m.kind != "group_delete" else []
            msg = parser.OFPGroupMod(dp, command, ofp.OFPGT_SELECT, g.group_id, buckets)
        dp.set_xid(msg)
        return msg

    # ---- OpenFlow events ----------------------------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _features(self, ev):
        dp = ev.msg.datapath
        self.datapaths[dp.id] = dp
        dp.send_msg(dp.ofproto_parser.OFPPortDescStatsRequest(dp, 0))

    @set_ev_cls(ofp_event.EventOFPPortDescStatsReply, MAIN_DISPATCHER)
    def _port_desc(self, ev):
        dp = ev.msg.datapath
        ofp = dp.ofproto
        ports = {p.port_no: not (p.state & ofp.OFPPS_LINK_DOWN or p.config & ofp.OFPPC_PORT_DOWN)
                 for p in ev.msg.body if p.port_no < ofp.OFPP_MAX}
        hub.spawn(self._provision, dp.id, ports)

    def _provision(self, dpid: int, ports: dict) -> None:
        try:
            self.service.switch_connected(dpid, ports)
            LOG.info("mlroute: switch %s provisioned", self._name(dpid))
        except InstallError as e:
            LOG.error("mlroute: provisioning %s failed: %s", self._name(dpid), e)

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def _dead(self, ev):
        dp = ev.datapath
        if dp.id is not None and self.datapaths.get(dp.id) is dp:
            del self.datapaths[dp.id]
            hub.spawn(self._guarded, self.service.switch_disconnected, dp.id)

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _port_status(self, ev):
        msg = ev.msg
        ofp = msg.datapath.ofproto
        p = msg.desc
        up = msg.reason != ofp.OFPPR_DELETE and not (
            p.state & ofp.OFPPS_LINK_DOWN or p.config & ofp.OFPPC_PORT_DOWN)
        hub.spawn(self._guarded, self.service.port_changed, msg.datapath.id, p.port_no, up)

    def _guarded(self, fn, *args) -> None:
        """Run a service call off the event loop: it may wait for the service lock or for
        barrier replies, which this app's event loop must stay free to deliver."""
        try:
            fn(*args)
        except InputError as e:
            LOG.error("mlroute: %s: %s", fn.__name__, e)

    def _improve(self) -> None:
        """Anytime planning off the request path: the ILP runs in a child process."""
        try:
            result = self.service.improve(plan_in_subprocess)
            if result:
                LOG.info("mlroute: off-path planning: %s", result)
        except Exception:  # noqa: BLE001 - logged; the installed plan stays
            LOG.exception("mlroute: off-path planning failed")
        finally:
            self.improving = False

    def _tick(self) -> None:
        """Time for the service: switches silent past the grace time count as failed."""
        last_probe = 0.0
        while True:
            hub.sleep(1.0)
            probe = self.lldp_interval > 0 and time.monotonic() - last_probe >= self.lldp_interval
            last_probe = time.monotonic() if probe else last_probe
            if self.service.unproven and not self.improving:
                self.improving = True
                hub.spawn(self._improve)
            try:
                self.service.tick(probe=probe)
            except Exception:  # noqa: BLE001 - keep ticking; the error is logged
                LOG.exception("mlroute: periodic check failed")

    # ---- redundant controllers: OpenFlow roles (controller/service/cluster.py elects) --------------
    def _store(self, conf):
        """Where the intent is kept: sqlite (--mlroute-state), etcd shared by redundant
        controllers (--mlroute-etcd), or nowhere."""
        self.cluster = None
        self.role_waits = {}  # (dpid, xid) of a role request -> (hub.Event, role asked)
        self.role_lock = threading.Lock()
        if not conf.mlroute_etcd:
            return StateStore(conf.mlroute_state) if conf.mlroute_state else None
        if conf.mlroute_state:
            raise InputError("--mlroute-state and --mlroute-etcd exclude each other (with etcd "
                             "the intent is kept in etcd)")
        try:
            client = Etcd(conf.mlroute_etcd)
        except ValueError as e:
            raise InputError(f"--mlroute-etcd: {e}") from None
        host = conf.wsapi_host
        if host in ("", "0.0.0.0", "::"):
            host = socket.gethostname()
        self.cluster = Cluster(client, conf.mlroute_id or f"{socket.gethostname()}:"
                               f"{conf.wsapi_port}", f"http://{host}:{conf.wsapi_port}",
                               conf.mlroute_etcd_prefix, conf.mlroute_lease_ttl,
                               conf.mlroute_failover_probe)
        self.cluster.check()
        return self.cluster.store

    def _join_cluster(self) -> None:
        """Standby until etcd elects this controller; then master of every switch."""
        self.service.passive = True
        self.service.cluster = self.cluster
        self.cluster.start(on_role=lambda role, gen: hub.spawn(self._apply_role, role, gen),
                           on_state=self._follow)
        LOG.info("mlroute: controller %s joined the controllers at etcd %s as %s",
                 self.cluster.id, self.cluster.client.url, self.cluster.role)

    def _follow(self, doc, revision: int) -> None:
        try:
            if self.service.follow_intent(doc):
                LOG.info("mlroute: standby follows the intent of revision %d", revision)
        except InputError as e:
            LOG.error("mlroute: stored intent of revision %d: %s", revision, e)

    def _apply_role(self, role: str, generation: int) -> None:
        """Tell every switch this controller's role with the master's generation id (a
        switch refuses a smaller one, so a deposed master cannot change tables); once the
        switches confirmed the master role, take over: read every switch, send only the
        difference."""
        c = self.cluster
        with self.role_lock:
            if (c.role, c.generation) != (role, generation):
                return  # a newer change follows
            master = role == "master"
            if not master:
                self.service.stand_by()
            waits = [self._send_role(dp, master, generation)
                     for dp in list(self.datapaths.values())]
            deadline = time.monotonic() + self.timeout
            for dpid, xid, event in waits:
                if not event.wait(timeout=max(0.0, deadline - time.monotonic())):
                    LOG.error("mlroute: switch %s did not answer the role request",
                              self._name(dpid))
                self.role_waits.pop((dpid, xid), None)
            if not master or (c.role, c.generation) != (role, generation):
                return
            roles_at = time.time()
            try:
                doc = c.store.load()
            except EtcdError as e:  # the followed intent is as recent as etcd had it
                LOG.error("mlroute: taking over without reading etcd: %s", e)
                doc = None
            stats = self.service.take_over(doc)
            c.took_over(generation, {"roles_confirmed": roles_at, "synced": time.time(),
                                     "role_requests": len(waits), **stats})
            LOG.info("mlroute: master (generation %d): %d switches read, %d messages sent",
                     generation, stats["switches"], stats["messages"])

    def _send_role(self, dp, master: bool, generation: int):
        ofp, parser = dp.ofproto, dp.ofproto_parser
        msg = parser.OFPRoleRequest(dp, ofp.OFPCR_ROLE_MASTER if master else ofp.OFPCR_ROLE_SLAVE,
                                    generation)
        dp.set_xid(msg)
        event = hub.Event()
        self.role_waits[(dp.id, msg.xid)] = (event, "master" if master else "slave")
        dp.send_msg(msg)
        return dp.id, msg.xid, event

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _features_role(self, ev):
        """A switch connected: its role first (before any table change is sent)."""
        if self.cluster is not None:
            self._send_role(ev.msg.datapath, self.cluster.role == "master",
                            self.cluster.generation)

    @set_ev_cls(ofp_event.EventOFPRoleReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _role_reply(self, ev):
        msg = ev.msg
        ofp = msg.datapath.ofproto
        wait = self.role_waits.get((msg.datapath.id, msg.xid))
        role = {ofp.OFPCR_ROLE_MASTER: "master", ofp.OFPCR_ROLE_SLAVE: "slave"}.get(msg.role,
                                                                                 "equal")
        if self.cluster is not None:
            self.cluster.switch_role(msg.datapath.id, role)
        if wait is not None:
            wait[0].set()

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _role_error(self, ev):
        msg = ev.msg
        wait = self.role_waits.get((msg.datapath.id, msg.xid))
        if wait is None:
            return
        stale = msg.type == msg.datapath.ofproto.OFPET_ROLE_REQUEST_FAILED
        text = ("refused: a newer generation is known to the switch" if stale
                else f"refused: OpenFlow error type {msg.type} code {msg.code}")
        if self.cluster is not None:
            self.cluster.switch_role(msg.datapath.id, f"{wait[1]} {text}")
        wait[0].set()

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def _dead_role(self, ev):
        if self.cluster is not None and ev.datapath.id is not None:
            self.cluster.switch_role(ev.datapath.id, None)

    # ---- statistics ---------------------------------------------------------------------------
    def _poll_stats(self) -> None:
        """Ask every switch for port counters and for the counters of the job rules."""
        while True:
            for dp in list(self.datapaths.values()):
                ofp, parser = dp.ofproto, dp.ofproto_parser
                try:
                    dp.send_msg(parser.OFPPortStatsRequest(dp, 0, ofp.OFPP_ANY))
                    dp.send_msg(parser.OFPFlowStatsRequest(
                        dp, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY, COOKIE_JOB,
                        COOKIE_OWNER_MASK, parser.OFPMatch()))
                except Exception as e:  # noqa: BLE001 - a switch that just left; next round
                    LOG.debug("mlroute: stats request failed: %s", e)
            hub.sleep(self.stats_interval)

    def _whole(self, msg):
        """The body of a multipart reply once its last part arrived, else None."""
        key = (msg.datapath.id, msg.xid)
        parts = self.multipart.setdefault(key, [])
        parts.extend(msg.body)
        if msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE:
            return None
        return self.multipart.pop(key)

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)
    def _port_stats(self, ev):
        body = self._whole(ev.msg)
        if body is not None:  # off the event loop: the service lock may be held by an install
            hub.spawn(self._guarded, self.service.port_stats, ev.msg.datapath.id,
                      {p.port_no: p.tx_bytes for p in body})

    def _table_read(self, msg) -> bool:
        """Collect a reply to ``read_tables``; True if it was one."""
        pending = self.reads.get((msg.datapath.id, msg.xid))
        if pending is None:
            return False
        pending[1].extend(msg.body)
        if not msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE:
            pending[0].set()
        return True

    @set_ev_cls(ofp_event.EventOFPGroupDescStatsReply, MAIN_DISPATCHER)
    def _group_desc(self, ev):
        self._table_read(ev.msg)

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def _flow_stats(self, ev):
        if self._table_read(ev.msg):
            return
        body = self._whole(ev.msg)
        if body is not None:
            hub.spawn(self._guarded, self.service.flow_stats, ev.msg.datapath.id,
                      [(s.table_id, s.priority, dict(s.match.items()), s.byte_count,
                        s.packet_count) for s in body])

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier_reply(self, ev):
        event = self.waiting.get(ev.msg.xid)
        if event is not None:
            event.set()

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _error(self, ev):
        msg = ev.msg
        text = f"OpenFlow error type {msg.type} code {msg.code}"
        LOG.error("mlroute: switch %s: %s (xid %s)", self._name(msg.datapath.id), text, msg.xid)
        self.errors.setdefault(msg.datapath.id, []).append((msg.xid, text))

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        if self._probe_arrived(dp.id, msg.match["in_port"], msg.data):
            return
        hub.spawn(self._guarded, self._answer, dp, msg.match["in_port"], msg.data)

    # ---- host mode: probes through the leaves' own tables (controller/enforcement/hostmode.py) ---------
    PROBE_BATCH = 256

    def probe(self, probes) -> dict:
        """Installer: each probe as a packet-out into its leaf's tables (in_port the host's
        port, output TABLE), answered by the spine it reached (packet-in); returns token ->
        (spine dpid, in_port). Batches of 256, each waited for up to the barrier timeout;
        lost probes are sent once more, then left out (the caller reports them)."""
        got: dict = {}
        todo = list(probes)
        for _attempt in range(2):
            lost = []
            for i in range(0, len(todo), self.PROBE_BATCH):
                batch = todo[i:i + self.PROBE_BATCH]
                event = hub.Event()
                self.probe_wait = ({p.token for p in batch}, got, event)
                try:
                    for p in batch:
                        dp = self.datapaths.get(p.dpid)
                        if dp is None:
                            raise InstallError(f"switch {self._name(p.dpid)} is not connected")
                        ofp, parser = dp.ofproto, dp.ofproto_parser
                        dp.send_msg(parser.OFPPacketOut(
                            dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=p.in_port,
                            actions=[parser.OFPActionOutput(ofp.OFPP_TABLE)], data=p.data))
                    event.wait(timeout=self.timeout)
                finally:
                    self.probe_wait = None
                lost += [p for p in batch if p.token not in got]
            todo = lost
            if not todo:
                break
        return got

    def _probe_arrived(self, dpid: int, in_port: int, data: bytes) -> bool:
        """A probe's packet-in (on the event loop, never blocks): note where it arrived.
        True for every probe, late ones too, so they never reach discovery."""
        h = parse_probe(data)
        if h is None:
            return False
        wait = self.probe_wait
        if wait is not None and h["token"] in wait[0]:
            wait[1][h["token"]] = (dpid, in_port)
            wait[0].discard(h["token"])
            if not wait[0]:
                wait[2].set()
        return True

    def _answer(self, dp, in_port: int, data: bytes) -> None:
        """Feed discovery, then answer an ARP request for a known address (off the loop:
        the service may be busy)."""
        self.service.packet_in(dp.id, in_port, data)
        pkt = packet.Packet(data)
        req = pkt.get_protocol(arp.arp)
        if req is None or req.opcode != arp.ARP_REQUEST:
            return
        mac = self.service.arp_answer(req.dst_ip)
        if mac is None:
            return
        reply = packet.Packet()
        reply.add_protocol(ethernet.ethernet(dst=req.src_mac, src=mac, ethertype=0x0806))
        reply.add_protocol(arp.arp(opcode=arp.ARP_REPLY, src_mac=mac, src_ip=req.dst_ip,
                                   dst_mac=req.src_mac, dst_ip=req.src_ip))
        reply.serialize()
        ofp, parser = dp.ofproto, dp.ofproto_parser
        dp.send_msg(parser.OFPPacketOut(dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=ofp.OFPP_CONTROLLER,
                                        actions=[parser.OFPActionOutput(in_port)],
                                        data=reply.data))


WEB_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "service", "web")
WEB_FILES = {"index.html": "text/html; charset=utf-8",  # the live view, served as it is
             "app.js": "application/javascript; charset=utf-8",
             "style.css": "text/css; charset=utf-8"}


class RestController(ControllerBase):
    """Every request under /v1 goes to ``controller.service.api.handle``."""

    def __init__(self, req, link, data, **config):
        super().__init__(req, link, data, **config)
        self.app = data["app"]

    @route("mlroute-web-index", "/", methods=["GET"])
    def web_index(self, req, **_kwargs):
        return _web_file("index.html")

    @route("mlroute-web", "/web/{name}", methods=["GET"])
    def web_file(self, req, name, **_kwargs):
        return _web_file(name)

    @route("mlroute-metrics", "/metrics", methods=["GET"])
    def metrics(self, req, **_kwargs):
        body, content_type = exposition(self.app.service)
        return Response(status=200, body=body, content_type=content_type.split(";")[0],
                        charset="utf-8")

    @route("mlroute", "/v1/{tail}", requirements={"tail": r"[\s\S]*"})  # any byte, newlines too
    def dispatch(self, req, tail, **_kwargs):
        # WSGI hands the path over as latin-1; job ids are UTF-8
        path = "/v1/" + tail.encode("latin-1", "replace").decode("utf-8", "replace")
        token = cfg.CONF.mlroute_token
        if (token and req.method not in ("GET", "HEAD") and
                not hmac.compare_digest(req.headers.get("Authorization", ""), f"Bearer {token}")):
            status, doc = 401, {"error": "this controller needs 'Authorization: Bearer <token>' "
                                         "for writing requests (--mlroute-token)"}
            return Response(status=status, content_type="application/json", charset="utf-8",
                            body=json.dumps(doc).encode())
        body = _read_body(req)
        if body is None:
            status, doc = 413, {"error": f"request body larger than {api.MAX_BODY} bytes"}
        else:
            status, doc = api.handle(self.app.service, req.method, path, body,
                                     dict(req.headers))
        if isinstance(doc, str):  # a text document (GET /v1/jobs/{id}/ports)
            return Response(status=status, content_type="text/plain", charset="utf-8",
                            body=doc.encode())
        return Response(status=status, content_type="application/json", charset="utf-8",
                        body=json.dumps(doc).encode())


def _read_body(req) -> bytes | None:
    """The request body, read at most up to the limit (None: larger than the limit). A
    declared length over the limit is refused unread; a chunked body is read as it comes."""
    length = req.content_length
    if length is not None and length > api.MAX_BODY:
        return None
    chunked = "chunked" in req.environ.get("HTTP_TRANSFER_ENCODING", "").lower()
    stream = req.environ.get("wsgi.input")
    if stream is None or (length is None and not chunked):
        return b""
    want = api.MAX_BODY + 1 if length is None else length
    chunks, got = [], 0
    while got < want:
        chunk = stream.read(min(65536, want - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    body = b"".join(chunks)
    return None if len(body) > api.MAX_BODY else body


def _web_file(name: str):
    """One file of the live view; only the names in WEB_FILES (no path from the request)."""
    content_type = WEB_FILES.get(name)
    if content_type is None:
        return Response(status=404, content_type="application/json", charset="utf-8",
                        body=json.dumps({"error": f"no such resource: /web/{name}"}).encode())
    with open(os.path.join(WEB_DIR, name), "rb") as fh:
        body = fh.read()
    resp = Response(status=200, body=body, content_type=content_type)
    resp.headers["Cache-Control"] = "no-cache"  # a new version shows at the next reload
    return resp
