"""The os-ken 4 adapter: os-ken's OpenFlow events onto ``core.Shell`` (Ryu's twin: ``app.py``).
Every os-ken import of mlroute is in this module and in ``osken_main.py``, which starts it; the
event methods both adapters share are ``events.adapter_events``:

    mlroute-controller --mlroute-fabric fabric.json      (python -m controller.shell.osken_main)

OpenFlow 1.3 on 6653, REST on 8080 (``--wsapi-port``, served by ``rest.py``). os-ken's default
hub runs native threads; the shell gets plain threads (``hub.THREADS``).
"""
from __future__ import annotations

from os_ken import cfg
from os_ken.base import app_manager
from os_ken.controller import controller as of_controller
from os_ken.controller import ofp_event
from os_ken.controller.handler import (
    CONFIG_DISPATCHER,
    DEAD_DISPATCHER,
    MAIN_DISPATCHER,
    set_ev_cls,
)
from os_ken.ofproto import ofproto_common, ofproto_v1_3

from controller.shell import flags
from controller.shell.events import adapter_events
from controller.shell.hub import THREADS
from controller.shell.listener import adopt_listeners

flags.register(cfg.CONF)
adopt_listeners(of_controller)  # before ofp_handler opens the OpenFlow listener
AdapterEvents = adapter_events(set_ev_cls, ofp_event, CONFIG_DISPATCHER, MAIN_DISPATCHER,
                               DEAD_DISPATCHER)


class MlrouteApp(AdapterEvents, app_manager.OSKenApp):  # the mixin's close() first
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        conf = cfg.CONF
        of_ports = [conf.ofp_tcp_listen_port or ofproto_common.OFP_TCP_PORT]  # 6653 only
        self.start_shell(conf, THREADS, of_ports)
