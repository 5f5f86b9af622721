"""``mlroute srv6-config``: every switch's static SRv6 configuration of a fabric, computed
once from the fabric model (``enforcement/srv6_config.py``), as ``ip -batch`` files for Linux
routers (a leaf's IPv6 source check in a second one, for ``ip -6 -batch``) and SONiC
CONFIG_DB JSON for ``config load``; one file per switch in a folder."""
from __future__ import annotations

import json
import os

from controller.enforcement.srv6 import BLOCK, SidPlan
from controller.enforcement.srv6_config import configs, mininet_ifname, sonic_ifname
from controller.errors import InputError
from controller.jsonio import HelpFormatter, read_json
from controller.model.clos import load_fabric

LINE = "write every switch's static SRv6 configuration (ip -batch files, SONiC JSON)"
DESCRIPTION = ("Write every switch's static SRv6 configuration for srv6 mode, computed once "
               "from the fabric: link addresses, uN, uA and End.X SIDs, a decapsulation SID per "
               "host at its leaf, every locator and host over all shortest paths. One file per "
               "switch: SWITCH.batch for `ip -batch` on Linux routers (and at a leaf SWITCH.batch6 "
               "for `ip -6 -batch`: its host ports' IPv6 source check), SWITCH.json with "
               "SONiC's CONFIG_DB tables for `config load` (docs/reference/srv6-config.md).")


def add_command(sub, line: str, description: str) -> None:
    p = sub.add_parser("srv6-config", help=line, description=description,
                       formatter_class=HelpFormatter)
    p.add_argument("--fabric", required=True, metavar="FILE",
                   help="wired fabric document (python -m topologies.clos ... --out FILE)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write into")
    p.add_argument("--format", choices=("iproute2", "sonic", "both"), default="both",
                   help="SWITCH.batch (ip -batch), SWITCH.json (CONFIG_DB) or both")
    p.add_argument("--block", default=BLOCK, help="the uSID block, a /32")


def run(args) -> str:
    """Writes the files; returns the summary line."""
    plan = SidPlan.of(load_fabric(read_json(args.fabric, "fabric")), args.block)
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        raise InputError(f"--out {args.out}: {e.strerror}") from None
    written = 0
    if args.format in ("iproute2", "both"):
        for name, cfg in configs(plan, mininet_ifname).items():
            with open(os.path.join(args.out, f"{name}.batch"), "w") as fh:
                fh.write("\n".join(cfg.iproute2()) + "\n")
            written += 1
            if cfg.iproute2_v6():  # a leaf's IPv6 source check: `ip -6 -batch` only
                with open(os.path.join(args.out, f"{name}.batch6"), "w") as fh:
                    fh.write("\n".join(cfg.iproute2_v6()) + "\n")
                written += 1
    if args.format in ("sonic", "both"):
        for name, cfg in configs(plan, sonic_ifname).items():
            with open(os.path.join(args.out, f"{name}.json"), "w") as fh:
                json.dump(cfg.sonic(), fh, indent=1)
                fh.write("\n")
            written += 1
    return f"wrote {written} files for {len(plan.node)} switches into {args.out}"
