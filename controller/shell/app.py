"""The Ryu adapter: Ryu's OpenFlow events onto ``core.Shell``. Every Ryu import of mlroute is in
this module (os-ken's twin: ``osken_app.py``); the event methods both share are
``events.adapter_events``.

    mlroute-controller --mlroute-fabric fabric.json      (ryu_main.py, on Python 3.11)
    ryu-manager --user-flags controller/shell/flags.py --mlroute-fabric fabric.json \
        controller/shell/app.py                          (the same app and options)

OpenFlow 1.3 on 6653 (and 6633), REST on 8080 (``--wsapi-port``, served by ``rest.py``).
"""
from __future__ import annotations

from ryu import cfg
from ryu.base import app_manager
from ryu.controller import controller as of_controller
from ryu.controller import ofp_event
from ryu.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from ryu.lib import hub
from ryu.ofproto import ofproto_common, ofproto_v1_3

from controller.shell import flags
from controller.shell.events import adapter_events
from controller.shell.hub import Hub
from controller.shell.listener import adopt_listeners

flags.register(cfg.CONF)
adopt_listeners(of_controller)  # before ofp_handler opens the OpenFlow listener
AdapterEvents = adapter_events(set_ev_cls, ofp_event, CONFIG_DISPATCHER, MAIN_DISPATCHER,
                               DEAD_DISPATCHER)


class MlrouteApp(AdapterEvents, app_manager.RyuApp):  # the mixin's close() first
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        conf = cfg.CONF
        of_ports = ([conf.ofp_tcp_listen_port] if conf.ofp_tcp_listen_port
                    else [ofproto_common.OFP_TCP_PORT, ofproto_common.OFP_TCP_PORT_OLD])
        self.start_shell(conf, Hub(hub.spawn, hub.sleep, hub.Event), of_ports)
