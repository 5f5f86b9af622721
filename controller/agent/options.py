"""The agent's command line: its options, and the interfaces it steers on, one per plane.

Why a module of its own: the options are the agent's interface to its service manager (the
systemd unit, ``integrations/systemd``) and its --help is checked (``tests/test_launch.py``);
the agent's loops (``main.py``) need only the parsed values.
"""
from __future__ import annotations

import argparse
import socket

from controller import __version__
from controller.agent import steering
from controller.agent.probe import FAST_S, PERIOD_S
from controller.enforcement.srv6_config import PROBE_DSCP
from controller.errors import InputError


def _dev(text: str) -> str:
    try:
        return steering.check_dev(text)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _dscp(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 63:
        raise argparse.ArgumentTypeError(f"a DSCP is a number from 0 to 63, not {text!r}")
    return value


def _period(text: str) -> float:
    """Seconds between probe rounds, within ``probe.PERIOD_S``: shorter would pass the probe
    rate's bound (2,700 a second), longer would leave a failed list in use for seconds."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    low, high = PERIOD_S
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"a probe period is {low:g} to {high:g} seconds, "
                                         f"not {text!r}")
    return value


def parser(description: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="mlroute-agent", description=description)
    ap.add_argument("--version", action="version", version=f"mlroute-agent {__version__}")
    ap.add_argument("--url", required=True, help="the controller's REST URL (comma-separated "
                                                 "for redundant controllers)")
    ap.add_argument("--host", required=True, help="this host's name in the fabric")
    ap.add_argument("--dev", type=_dev, action="append",
                    help="the interface towards the leaf; once per plane, in plane order, on "
                         "a fabric of several planes (default: HOST-eth0, then HOST-eth1, "
                         "HOST-eth2, ... while the host has them)")
    ap.add_argument("--lock", help="lock file (default: /run/mlroute-agent.HOST.lock)")
    ap.add_argument("--credential-file", metavar="FILE", help=(
        "a file whose first line is this host's credential: what `mlroute agent-credential HOST "
        "--secret-file S` writes for a controller with --mlroute-host-secret-file S (it then reads and "
        "reports for HOST only); the admin token if the controller has --mlroute-token-file alone; none "
        "if neither (docs/howto/security.md; default: $MLROUTE_TOKEN_FILE)"))
    ap.add_argument("--token", help="that credential itself (default: $MLROUTE_TOKEN); prefer "
                                    "--credential-file: a command line shows in ps")
    ap.add_argument("--ca-file", metavar="FILE",
                    help="CA certificates to verify an https controller with (default: the "
                         "system's)")
    ap.add_argument("--once", action="store_true", help="install once and exit (no watch)")
    ap.add_argument("--no-probes", action="store_true",
                    help="no path probes: no fail-over and no link state for the controller")
    ap.add_argument("--probe-dscp", type=_dscp, default=PROBE_DSCP, metavar="DSCP",
                    help="the probes' and their answers' DSCP, which the routers must serve "
                         "first (strict priority: docs/howto/router-fabric.md); default "
                         f"{PROBE_DSCP} (CS6, network control)")
    ap.add_argument("--probe-period", type=_period, default=FAST_S, metavar="S", help=(
        "seconds between probes of the lists in use (default %(default)g; their backups every "
        "3 periods, at least 0.03): longer sends fewer probes and detects a failed list later, "
        "after about max(0.06, 2 periods) plus one or two periods (0.06 to 0.07 s at 0.01; "
        "0.09 to 0.12 at 0.03)"))
    ap.add_argument("--no-traffic", action="store_true",
                    help="no traffic reports: the controller learns from sFlow only")
    ap.add_argument("--no-ports", action="store_true",
                    help="host mode on routers: learn no source ports (the host's host-mode "
                         "flows then take whatever spine the routers' hash gives)")
    ap.add_argument("--ports-file", metavar="FILE", help="where host mode's ports are written for the "
                                         "applications (default: /run/mlroute-agent.HOST.ports)")
    return ap


def devices(args, exists=None) -> tuple[str, ...]:
    """The interfaces by plane: every ``--dev`` given, else ``HOST-eth0`` (plane 0's, whose
    name the kernel must take: InputError otherwise) and ``HOST-eth<q>`` for the planes
    after it as long as the host has that interface (``exists``: the kernel's answer). Why
    not every name up to ``MAX_PLANES``: a part on a plane this host has no interface of
    must be refused by name (``steering.wanted``), not routed to a device that is not there.

    >>> from types import SimpleNamespace as A
    >>> has = {"h0_0-eth0", "h0_0-eth1", "h0_0-eth3"}.__contains__
    >>> devices(A(dev=None, host="h0_0"), has), devices(A(dev=["e0", "e1"], host="h"))
    (('h0_0-eth0', 'h0_0-eth1'), ('e0', 'e1'))
    >>> devices(A(dev=None, host="h0_0"), lambda name: False)  # not there (yet): plane 0's
    ('h0_0-eth0',)
    """
    if args.dev:
        return steering.devices(args.dev)
    exists = exists or _exists
    names = [steering.check_dev(f"{args.host}-eth0")]
    for q in range(1, steering.MAX_PLANES):
        name = f"{args.host}-eth{q}"
        if not steering.DEV.fullmatch(name) or not exists(name):
            break
        names.append(name)
    return tuple(names)


def _exists(name: str) -> bool:
    """Whether this host (its network namespace) has the interface ``name`` now."""
    try:
        socket.if_nametoindex(name)
    except OSError:
        return False
    return True
