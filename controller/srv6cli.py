"""``mlroute srv6-config``: every switch's and host's static SRv6 configuration of a fabric,
computed once from the fabric model (``enforcement/srv6_config.py``, ``srv6_hosts.py``), as
``ip -batch`` files for Linux routers (a leaf's IPv6 source check in a second one, for
``ip -6 -batch``; the probes' priority class on every fabric port in a ``tc -batch`` file),
SONiC CONFIG_DB JSON for ``config load``, per host an ``ip -batch`` file and systemd-networkd
files, and the sysctl.d files of routers and hosts; one folder.

A fabric document without wiring (``mlroute fabric``) is wired here as ``topologies/clos.py``
wires it (``clos_wiring.wire``: deterministic), and the document the files were computed from
is written beside them (``fabric.json``): the controller must get that one."""
from __future__ import annotations

import json
import os

from controller.enforcement.ifnames import SCHEMES, names_for
from controller.enforcement.srv6 import BLOCK, SidPlan
from controller.enforcement.srv6_config import PROBE_DSCP, configs, priority_tc
from controller.enforcement.srv6_hosts import (
    host_batch,
    host_networkd,
    host_sysctls,
    plane_networks,
    router_sysctls,
)
from controller.errors import InputError
from controller.jsonio import HelpFormatter, read_json
from controller.model.clos import load_fabric

LINE = "write the routers' and hosts' static SRv6 configuration (ip -batch, SONiC, networkd)"
DESCRIPTION = ("Write every switch's and host's static configuration for srv6 mode, computed "
               "once from the fabric: link addresses, uN, uA and End.X SIDs, a decapsulation "
               "SID per host at its leaf, every locator and host over all shortest paths. Per "
               "switch: SWITCH.batch for `ip -batch` on Linux routers (and at a leaf "
               "SWITCH.batch6 for `ip -6 -batch`: its host ports' IPv6 source check), SWITCH.tc "
               "for `tc -batch` (the agents' probes, DSCP 48, first on every fabric port), "
               "SWITCH.json with SONiC's CONFIG_DB tables for `config load`. Per host, in "
               "hosts/: HOST.batch for `ip -batch` (its addresses, the uSID block and the "
               "fabric's IPv4 through its leaf) and HOST.network for systemd-networkd. The "
               "sysctls in sysctl.d/ (routers, hosts), and fabric.json, the wired document "
               "the files were computed from, for the controller "
               "(docs/reference/srv6-config.md, docs/howto/router-fabric.md).")


def add_command(sub, line: str, description: str) -> None:
    p = sub.add_parser("srv6-config", help=line, description=description,
                       formatter_class=HelpFormatter)
    p.add_argument("--fabric", required=True, metavar="FILE",
                   help="fabric document: as cabled (mlroute fabric --cabling), or generated "
                        "(mlroute fabric, wired here as python -m topologies.clos wires it)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write into")
    p.add_argument("--format", choices=("iproute2", "sonic", "both"), default="both",
                   help="SWITCH.batch (ip -batch), SWITCH.json (CONFIG_DB) or both")
    p.add_argument("--interfaces", metavar="|".join(SCHEMES) + "|FILE",
                   help="port names where the fabric document has none: the platform's "
                        "(linux SWITCH-eth<port>, sonic Ethernet<4(port-1)>, sonic8 "
                        "Ethernet<8(port-1)>, cumulus swp<port>) or a JSON file {node: {port: "
                        "name}} (a host: {plane: name}), which comes first (default: linux "
                        "for the .batch files, sonic for the .json files)")
    p.add_argument("--block", default=BLOCK, help="the uSID block, a /32")


def _write(out: str, name: str, text: str) -> None:
    path = os.path.join(out, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


def probe_tc(cfg) -> list[str]:
    """``tc -batch`` lines serving the agents' probes first on every fabric port of a Linux
    router (``priority_tc`` per port: those with a link address), what the router page
    once told operators to type per port."""
    return [line for dev in sorted({i for i, _ in cfg.addresses})
            for line in priority_tc(dev, PROBE_DSCP)]


def run(args) -> str:
    """Writes the files; returns the summary line."""
    fabric = load_fabric(read_json(args.fabric, "fabric"))
    wired_here = not fabric.wired
    if wired_here:
        fabric = fabric.wire()
    plan = SidPlan.of(fabric, args.block)
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        raise InputError(f"--out {args.out}: {e.strerror}") from None
    switch_files = 0
    linux = names_for(fabric, args.interfaces, "linux")
    if args.format in ("iproute2", "both"):
        for name, cfg in configs(plan, linux.port).items():
            _write(args.out, f"{name}.batch", "\n".join(cfg.iproute2()) + "\n")
            switch_files += 1
            if cfg.iproute2_v6():  # a leaf's IPv6 source check: `ip -6 -batch` only
                _write(args.out, f"{name}.batch6", "\n".join(cfg.iproute2_v6()) + "\n")
                switch_files += 1
            _write(args.out, f"{name}.tc", "\n".join(probe_tc(cfg)) + "\n")
            switch_files += 1
        _write(args.out, "sysctl.d/90-mlroute-router.conf", router_sysctls())
    if args.format in ("sonic", "both"):
        sonic = names_for(fabric, args.interfaces, "sonic")
        for name, cfg in configs(plan, sonic.port).items():
            _write(args.out, f"{name}.json", json.dumps(cfg.sonic(), indent=1) + "\n")
            switch_files += 1
    networks, host_files = plane_networks(fabric), 0
    for h in fabric.host_leaves:
        _write(args.out, f"hosts/{h}.batch",
               "\n".join(host_batch(plan, h, linux.host, networks)) + "\n")
        for q, text in host_networkd(plan, h, linux.host, networks).items():
            _write(args.out, f"hosts/{h}{f'.plane{q}' if q else ''}.network", text)
            host_files += 1
        host_files += 1
    _write(args.out, "sysctl.d/90-mlroute-host.conf", host_sysctls())
    _write(args.out, "fabric.json", json.dumps(fabric.to_dict(), indent=1) + "\n")
    wired = ("; the fabric had no wiring: wired as python -m topologies.clos wires it, give "
             f"the controller {os.path.join(args.out, 'fabric.json')}" if wired_here else "")
    return (f"wrote {switch_files} files for {len(plan.node)} switches, {host_files} for "
            f"{len(fabric.host_leaves)} hosts (hosts/), the sysctl.d files and fabric.json "
            f"into {args.out}{wired}")
