"""The data-plane echo every switch of the fabric holds (issue 59): an LLDP frame to
``ECHO_MAC`` goes back out of the port it came in on, to ``ECHO_BACK_MAC``, which the sender's
LLDP trap sends to the controller (``discovery/liveness.py``). It crosses the switch's
forwarding and nothing of its control connection, so a neighbour's echo tells a switch that
vanished with its ports up from one that lost only its controller. One entry per switch, the
same on every tier, shape and mode, just above the LLDP trap; it needs ``OFPP_IN_PORT`` and
``set_field`` of ``eth_dst`` (docs/reference/switches.md).

>>> r = echo_entry(0x10001)
>>> dict(r.match)["eth_dst"], r.actions[-1]
('02:6d:6c:72:74:e0', ('output', 4294967288))
"""
from __future__ import annotations

from controller.enforcement.openflow import FlowRule, rule
from controller.enforcement.rules import ETH_LLDP, PRIO_LLDP, T_CLASSIFY

ECHO_MAC, ECHO_BACK_MAC = "02:6d:6c:72:74:e0", "02:6d:6c:72:74:e1"  # as discovery/lldp.py's
IN_PORT = 0xFFFFFFF8  # OFPP_IN_PORT: out of the port the packet came in on
PRIO_ECHO = PRIO_LLDP + 1


def echo_entry(dpid: int) -> FlowRule:
    return rule(dpid, T_CLASSIFY, PRIO_ECHO, {"eth_type": ETH_LLDP, "eth_dst": ECHO_MAC},
                [("set_field", "eth_dst", ECHO_BACK_MAC), ("output", IN_PORT)])


def with_echo(tables: dict) -> dict:
    """Static tables (dpid -> (rules, groups)) with every switch's echo entry first."""
    return {dpid: ([echo_entry(dpid), *rules], groups) for dpid, (rules, groups) in tables.items()}
