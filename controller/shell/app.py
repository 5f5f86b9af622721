"""The Ryu adapter: Ryu's OpenFlow events onto ``core.Shell``. Every Ryu import of mlroute is
in this module (os-ken's twin: ``osken_app.py``).

    ryu-manager --user-flags controller/shell/flags.py --mlroute-fabric fabric.json \
        controller/shell/app.py

OpenFlow 1.3 on 6653 (and 6633), REST on 8080 (``--wsapi-port``, served by ``rest.py``).
"""
from __future__ import annotations

from ryu import cfg
from ryu.base import app_manager
from ryu.controller import ofp_event
from ryu.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from ryu.lib import hub
from ryu.ofproto import ofproto_common, ofproto_v1_3

from controller.shell import flags
from controller.shell.core import Shell
from controller.shell.hub import Hub

flags.register(cfg.CONF)
BOTH = [CONFIG_DISPATCHER, MAIN_DISPATCHER]


class MlrouteApp(app_manager.RyuApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        conf = cfg.CONF
        of_ports = ([conf.ofp_tcp_listen_port] if conf.ofp_tcp_listen_port
                    else [ofproto_common.OFP_TCP_PORT, ofproto_common.OFP_TCP_PORT_OLD])
        self.shell = Shell(conf, Hub(hub.spawn, hub.sleep, hub.Event), of_ports)
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
