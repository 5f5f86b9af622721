"""``python -m emulation.routers``: a fabric of Linux routers with static SRv6 SIDs in Mininet,
an ``mlroute-agent`` on every host, until Ctrl-C (root).

    python -m emulation.routers --fabric fabric.json [--rest-port 8080] [--bw 0]

The fabric document is the controller's (``python -m topologies.clos ... --out``); its
routers get ``mlroute srv6-config``'s configuration. Each host reaches the controller over its
management link at 172.30.255.254: start ``mlroute-controller --mlroute-fabric fabric.json
--mlroute-southbound none --wsapi-host 172.30.255.254`` once this command says the fabric is
up (the address exists from then). Ctrl-C or SIGTERM removes the agents' rules, the routers
and the hosts; the logs stay in ``--logs``.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading

from controller.errors import InputError
from controller.jsonio import first_paragraph, read_json
from controller.model.clos import load_fabric


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emulation.routers",
                                 description=first_paragraph(__doc__))
    ap.add_argument("--fabric", required=True, help="wired fabric document")
    ap.add_argument("--rest-port", type=int, default=8080, help="the controller's REST port")
    ap.add_argument("--bw", type=float, default=0.0, help="link speed in Mbit/s (0: unshaped)")
    ap.add_argument("--logs", help="folder of the agents' logs (default: a new one in /tmp)")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("emulation.routers: needs root (Mininet)", file=sys.stderr)
        return 2
    from emulation.harness.routers import RouterSession
    try:
        fabric = load_fabric(read_json(args.fabric, "fabric"))
    except InputError as e:
        print(f"emulation.routers: {e}", file=sys.stderr)
        return 2
    logs = args.logs or tempfile.mkdtemp(prefix="mlroute-routers-")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with RouterSession(fabric, logs, bw=args.bw, controller=args.rest_port) as s:
        print(f"fabric up: {len(fabric.switches())} routers, {len(fabric.host_leaves)} hosts, "
              f"an agent on each, following {s.url}; logs in {logs}; Ctrl-C stops", flush=True)
        stop.wait()
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
