"""The switches of a fabric without OpenFlow (``--mlroute-southbound none``): plain IP routers
configured once from the fabric model (``mlroute srv6-config``), whose hosts push each path.

Why an installer at all: the service plans, checks and commits every change through one
transaction (``service/transaction.py``). Here every declared switch counts as connected and
synchronised; what the transaction would install is kept in memory and nothing is sent, so
the routers hold no state of the controller's and a job is committed as soon as it is
planned. Paths reach the hosts through ``GET /v1/hosts/{host}/segments`` (``mlroute-agent``);
in host mode the agents report the source ports they learned (``POST /v1/hosts/{host}/ports``).
"""
from __future__ import annotations

from controller.enforcement.openflow import SwitchState, apply
from controller.errors import InputError
from controller.model.clos import Clos
from controller.service.hostports import FROM_HOSTS


class StaticSwitches:
    """An ``Installer`` (``enforcement.reconcile``) over switches that take no messages."""

    timeout = 0.0  # no role request or barrier is ever awaited (redundant controllers too)
    probe = FROM_HOSTS  # host mode: each host's agent learns its ports (service/hostreports.py)

    def __init__(self, fabric: Clos | None):
        if fabric is None:
            raise InputError("--mlroute-southbound none needs a declared fabric "
                             "(--mlroute-fabric): there is no OpenFlow to discover it")
        self.fabric = fabric
        self.tables = {d: SwitchState() for d in fabric.dpids.values()}

    def connected_now(self) -> list[tuple[int, dict, None]]:
        """Every declared switch as if it had connected: (dpid, port -> up, speeds)."""
        return [(dpid, {p: True for peer in self.fabric.ports[name]
                        for p in self.fabric.ports_to(name, peer)}, None)
                for name, dpid in self.fabric.dpids.items()]

    def links(self) -> list[tuple[int, int, int, int]]:
        """Every declared cable, both ways, as a probe would report it: the routers' links
        are taken as declared (no LLDP crosses them here)."""
        f = self.fabric
        return [(f.dpids[a], pa, f.dpids[b], pb) for a in f.dpids for b in f.ports[a]
                if b in f.dpids for pa, pb in zip(f.ports_to(a, b), f.ports_to(b, a))]

    def install(self, batches) -> None:
        for dpid, msgs in batches.items():
            apply(self.tables.setdefault(dpid, SwitchState()), msgs)

    def read_tables(self, dpid: int) -> SwitchState:
        state = self.tables.get(dpid, SwitchState())
        return SwitchState(dict(state.rules), dict(state.groups))

    def read_many(self, dpids, ready=None) -> dict:
        return {d: self.read_tables(d) for d in dpids}  # all at once: nothing to wait for

    def packet_out(self, dpid: int, port: int, frame: bytes) -> None:
        """No channel: discovery's probes go nowhere (the fabric is declared)."""

    # what the shell asks of its switches
    def holds(self, dp) -> bool:
        return True

    def datapaths(self) -> list:
        return []

    def request_stats(self) -> None:
        """No counters from the routers here (per-SID counters: ``ip -s -6 route``)."""
