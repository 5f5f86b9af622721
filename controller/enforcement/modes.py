"""Enforcement modes as one type: everything that differs between ``flow``, ``sr`` and ``host``
lives in its class, so a new mode is one class here plus its rule builder.

* ``flow``: a per-flow entry at the ingress leaf outputs to the planned spine.
* ``sr``: the same entry pushes the destination leaf's and the spine's MPLS labels (segment
  routing); spines and leaves forward on labels.
* ``host``: no per-flow entry; leaves pick the uplink from source-port bits and the host opens
  each connection from the source port the controller chose (``hostmode.py``).
* ``srv6``: no per-flow entry and no OpenFlow needed: each source host pushes the part's
  segment list (``srv6.py``) through switches that hold static SIDs (``srv6_config.py``);
  ``mlroute-agent`` installs them.

>>> mode_of("sr").per_flow_entries, mode_of("host").per_flow_entries
(True, False)
>>> mode_of("tunnel")
Traceback (most recent call last):
...
controller.errors.InputError: unknown mode 'tunnel' (choose from flow, sr, host, srv6)
"""
from __future__ import annotations

from controller.errors import InputError


class Mode:
    """How a planned flow is pinned to its spine."""
    name = ""
    per_flow_entries = True  # one ingress entry per flow part (counted by the rule budget)
    host_ports = False  # the controller chooses each connection's source port
    labels = False  # the ingress entry pushes MPLS labels
    segments = False  # the source host pushes an SRv6 segment list (mlroute-agent)

    def __repr__(self) -> str:
        return f"Mode({self.name!r})"


class FlowMode(Mode):
    name = "flow"


class SegmentRoutingMode(Mode):
    name = "sr"
    labels = True


class HostMode(Mode):
    name = "host"
    per_flow_entries = False
    host_ports = True


class Srv6Mode(Mode):
    name = "srv6"
    per_flow_entries = False
    segments = True


MODES: dict[str, Mode] = {m.name: m for m in (FlowMode(), SegmentRoutingMode(), HostMode(),
                                                Srv6Mode())}


def mode_of(name: str) -> Mode:
    """The mode called ``name``; a clear error for anything else."""
    mode = MODES.get(name) if isinstance(name, str) else None
    if mode is None:
        raise InputError(f"unknown mode {name!r} (choose from {', '.join(MODES)})")
    return mode


ECMP_HASHES = ("per-tier", "polarised")  # the static select groups' hashing (clos_rules)


def check_ecmp(ecmp: str) -> None:
    """An ECMP hashing outside ``ECMP_HASHES`` is an InputError naming the choices."""
    if ecmp not in ECMP_HASHES:
        raise InputError(f"unknown ECMP hashing {ecmp!r} (choose from {', '.join(ECMP_HASHES)})")
