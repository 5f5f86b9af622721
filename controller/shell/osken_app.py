"""The os-ken 4 adapter: os-ken's OpenFlow events onto ``core.Shell`` (Ryu's twin: ``app.py``).
Every os-ken import of mlroute is in this module and in ``osken_main.py``, which starts it:

    mlroute-controller --mlroute-fabric fabric.json      (python -m controller.shell.osken_main)

OpenFlow 1.3 on 6653, REST on 8080 (``--wsapi-port``, served by ``rest.py``). os-ken's default
hub runs native threads; the shell gets plain threads (``hub.THREADS``).
"""
from __future__ import annotations

from os_ken import cfg
from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import (
    CONFIG_DISPATCHER,
    DEAD_DISPATCHER,
    MAIN_DISPATCHER,
    set_ev_cls,
)
from os_ken.ofproto import ofproto_common, ofproto_v1_3

from controller.shell import flags
from controller.shell.core import Shell
from controller.shell.hub import THREADS

flags.register(cfg.CONF)
BOTH = [CONFIG_DISPATCHER, MAIN_DISPATCHER]


class MlrouteApp(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        conf = cfg.CONF
        of_ports = [conf.ofp_tcp_listen_port or ofproto_common.OFP_TCP_PORT]  # 6653 only
        self.shell = Shell(conf, THREADS, of_ports)
        self.service = self.shell.service
        self.shell.start()

    def close(self):
        self.shell.stop()

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _features(self, ev):
        self.shell.switch_features(ev.msg.datapath)

    @set_ev_cls(ofp_event.EventOFPPortDescStatsReply, MAIN_DISPATCHER)
    def _port_desc(self, ev):
        self.shell.port_desc(ev.msg)

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def _dead(self, ev):
        self.shell.switch_dead(ev.datapath)

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _port_status(self, ev):
        self.shell.port_status(ev.msg)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _packet_in(self, ev):
        self.shell.packet_in(ev.msg)

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)
    def _port_stats(self, ev):
        self.shell.port_stats(ev.msg)

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def _flow_stats(self, ev):
        self.shell.flow_stats(ev.msg)

    @set_ev_cls(ofp_event.EventOFPGroupDescStatsReply, MAIN_DISPATCHER)
    def _group_desc(self, ev):
        self.shell.group_desc(ev.msg)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier_reply(self, ev):
        self.shell.barrier_reply(ev.msg)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, BOTH)
    def _error(self, ev):
        self.shell.error(ev.msg)

    @set_ev_cls(ofp_event.EventOFPRoleReply, BOTH)
    def _role_reply(self, ev):
        self.shell.role_reply(ev.msg)
