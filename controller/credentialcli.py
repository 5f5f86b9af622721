"""``mlroute agent-credential``: each host agent's own credential, an HMAC of the host's name
under the controller's host secret (``service/credentials.py``): the controller checks it with
no table per host, and it lets its holder read and write only ``/v1/hosts/HOST/...``."""
from __future__ import annotations

import os

from controller.errors import InputError
from controller.jsonio import HelpFormatter, read_json
from controller.model.clos import load_fabric
from controller.service import credentials

LINE = "issue host agents' credentials (an HMAC of each host's name under the host secret)"
DESCRIPTION = ("Issue the credential of each host's mlroute-agent from the controller's host "
               "secret file (--mlroute-host-secret-file; its first secret issues). A host's "
               "credential reads and writes only /v1/hosts/HOST/... (its segments, its probe, "
               "traffic and port reports); give it to the agent with --credential-file. One "
               "host and no --out: the credential alone on stdout. With --out DIR: one file "
               "DIR/HOST.credential per host, readable by its owner only.")


def add_command(sub, line: str, description: str) -> None:
    p = sub.add_parser("agent-credential", help=line, description=description,
                       formatter_class=HelpFormatter)
    p.add_argument("hosts", nargs="*", metavar="HOST", help="host names (as in the fabric)")
    p.add_argument("--secret-file", required=True, metavar="FILE",
                   help="the controller's host secrets, one per line (the first issues)")
    p.add_argument("--fabric", metavar="FILE",
                   help="a fabric document: check the hosts are in it; with no HOST, every "
                        "host of it")
    p.add_argument("--out", metavar="DIR", help="write DIR/HOST.credential (mode 0600) per host")


def run(args) -> str:
    """The credential (one host, no --out) or the summary line; InputError on bad input."""
    try:
        secret = credentials.read_secrets(args.secret_file)[0]
    except ValueError as e:
        raise InputError(str(e)) from None
    hosts = list(args.hosts)
    if args.fabric:
        known = load_fabric(read_json(args.fabric, "fabric")).host_leaves
        unknown = [h for h in hosts if h not in known]
        if unknown:
            raise InputError(f"no host {unknown[0]!r} in the fabric {args.fabric}")
        hosts = hosts or sorted(known)
    if not hosts:
        raise InputError("name at least one HOST (or give --fabric for every host)")
    try:
        issued = {h: credentials.host_credential(secret, h) for h in hosts}
    except ValueError as e:
        raise InputError(str(e)) from None
    if not args.out:
        if len(issued) > 1:
            raise InputError("several hosts: give --out DIR (one file per host)")
        return issued[hosts[0]]
    try:
        os.makedirs(args.out, exist_ok=True)
        for host, cred in issued.items():
            path = os.path.join(args.out, f"{host}.credential")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(cred + "\n")
            os.chmod(path, 0o600)
    except OSError as e:
        raise InputError(f"--out {args.out}: {e.strerror}") from None
    return f"wrote {len(issued)} credentials into {args.out}"
