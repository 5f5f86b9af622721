"""What both framework adapters share, as a mixin: the shell started from the parsed options
and one method per OpenFlow event onto ``core.Shell``. Light on purpose: an adapter imports it
at load time, and the rest of mlroute (``core`` and everything it imports, about 0.17 s of CPU:
numpy, not scipy nor networkx, which the planners and discovery import where they use them)
only once the OpenFlow ports listen (``listener.open_early``).
"""
from __future__ import annotations

import gc
import logging

from controller.service.listen import check_free
from controller.shell.hub import Hub
from controller.shell.listener import open_early, plain_ports

LOG = logging.getLogger("mlroute")


def listening_line(rest_host: str, rest_port: int, of_host: str, of_ports: list[int]) -> str:
    """The log line that says where the controller listens, once it does.

    >>> listening_line("127.0.0.1", 8080, "", [6653, 6633])
    'mlroute: REST API and web view on http://127.0.0.1:8080/, OpenFlow on port 6653, 6633 of every address'
    """
    where = f"of {of_host}" if of_host not in ("", "0.0.0.0", "::") else "of every address"
    return (f"mlroute: REST API and web view on http://{rest_host}:{rest_port}/, OpenFlow on "
            f"port {', '.join(map(str, of_ports))} {where}")


def adapter_events(set_ev_cls, ofp_event, config: str, main: str, dead: str) -> type:
    """The part both framework adapters share, as a mixin class: the shell started from the
    parsed options, ``close``, and one method per OpenFlow event onto ``Shell``, registered
    with the framework's own ``set_ev_cls`` (Ryu and os-ken name their events and dispatchers
    alike). An adapter passes its framework's decorator, ``ofp_event`` module and dispatcher
    names, and lists the mixin before its framework's app class (whose ``close`` it replaces);
    this module imports no framework."""
    both = [config, main]

    class AdapterEvents:
        def start_shell(self, conf, hub: Hub, of_ports: list[int]) -> None:
            """``of_ports``: where the framework listens for switches; they and the REST
            port are checked free, and the OpenFlow ports opened, before the rest of
            mlroute is imported (``listener``)."""
            check_free([(conf.ofp_listen_host, p, "OpenFlow") for p in of_ports] +
                       [(conf.wsapi_host, conf.wsapi_port, "REST")])
            open_early(conf.ofp_listen_host, plain_ports(conf, of_ports))
            from controller.shell.core import Shell  # the service, the planners, numpy
            # the modules just imported live as long as the process: out of the full
            # collections that building the service brings (two of 40-60 ms at k = 16)
            gc.freeze()
            self.shell = Shell(conf, hub)
            self.service = self.shell.service
            # The heap built so far (framework, fabric, the desired tables: about 1.4e5
            # objects at the paper's scale) lives as long as the process; a full collection
            # scanned it in about 40 ms, stalling every green thread, REST included: frozen
            # (and what later survives a slow full collection: ``heap.Heap``).
            self.shell.heap.start()
            # said before serving starts: the ports are bound and listening already (the
            # REST socket in ``Shell``), and a client that gets an answer and then stops the
            # controller must find the line in its log (it raced the first answers)
            LOG.info(listening_line(conf.wsapi_host, conf.wsapi_port, conf.ofp_listen_host,
                                    of_ports))
            self.shell.start()

        def close(self):
            self.shell.stop()

        @set_ev_cls(ofp_event.EventOFPSwitchFeatures, config)
        def _features(self, ev):
            self.shell.switch_features(ev.msg.datapath)

        @set_ev_cls(ofp_event.EventOFPPortDescStatsReply, main)
        def _port_desc(self, ev):
            self.shell.port_desc(ev.msg)

        @set_ev_cls(ofp_event.EventOFPStateChange, dead)
        def _dead(self, ev):
            self.shell.switch_dead(ev.datapath)

        @set_ev_cls(ofp_event.EventOFPPortStatus, main)
        def _port_status(self, ev):
            self.shell.port_status(ev.msg)

        @set_ev_cls(ofp_event.EventOFPPacketIn, main)
        def _packet_in(self, ev):
            self.shell.packet_in(ev.msg)

        @set_ev_cls(ofp_event.EventOFPPortStatsReply, main)
        def _port_stats(self, ev):
            self.shell.port_stats(ev.msg)

        @set_ev_cls(ofp_event.EventOFPFlowStatsReply, main)
        def _flow_stats(self, ev):
            self.shell.flow_stats(ev.msg)

        @set_ev_cls(ofp_event.EventOFPGroupDescStatsReply, main)
        def _group_desc(self, ev):
            self.shell.group_desc(ev.msg)

        @set_ev_cls(ofp_event.EventOFPBarrierReply, main)
        def _barrier_reply(self, ev):
            self.shell.barrier_reply(ev.msg)

        @set_ev_cls(ofp_event.EventOFPErrorMsg, both)
        def _error(self, ev):
            self.shell.error(ev.msg)

        @set_ev_cls(ofp_event.EventOFPRoleReply, both)
        def _role_reply(self, ev):
            self.shell.role_reply(ev.msg)

    return AdapterEvents
