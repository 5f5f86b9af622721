"""Slurm's controller-side prolog and epilog: declare a job to mlroute by its members when Slurm
allocates it, remove it when the job ends.

    # slurm.conf (on the slurmctld host)
    PrologSlurmctld=/opt/mlroute/integrations/slurm/prolog.sh
    EpilogSlurmctld=/opt/mlroute/integrations/slurm/epilog.sh

or the console entry points ``mlroute-slurm-prolog`` / ``mlroute-slurm-epilog``. Slurm gives
the job in SLURM_JOB_ID and SLURM_JOB_NODELIST (a hostlist such as ``gpu[01-03,07]``, expanded
with python-hostlist, or ``scontrol show hostnames`` when the library is missing). A host map
(MLROUTE_HOST_MAP or --host-map: JSON ``{"node": "10.0.0.1"}`` or lines ``node address``) turns
node names into the IPv4 addresses or mlroute host names the controller knows; without one the
node names are sent as they are. The job is ``{"id": "slurm-<id>", "members": [...]}``: the
controller learns its traffic matrix. Controller URL and token: MLROUTE_URL, MLROUTE_TOKEN or
MLROUTE_TOKEN_FILE (or options).

Slurm must never wait on mlroute nor fail a job because of it. A failing PrologSlurmctld
requeues a batch job (an interactive one is cancelled); a failing node Prolog or Epilog drains
the node; and while PrologSlurmctld runs the job sits in CONFIGURING. So every request has a
timeout (--timeout, 5 s), the whole run a deadline (--deadline, 20 s, enforced by an alarm), and
the exit status is 0 whatever happens: an unreachable controller, a refused job, a bad host map
are one line on stderr (and in --log / MLROUTE_SLURM_LOG if given). The job then simply runs on
the fabric's default paths.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from controller import __version__
from controller.client import Client, ControllerError, members_job, read_token


class SlurmHookError(Exception):
    """Anything that stops the hook from declaring or removing the job, in one line."""


def expand_nodelist(text: str, use_library: bool = True) -> list[str]:
    """Node names of a Slurm hostlist expression, in Slurm's order."""
    text = text.strip()
    if not text:
        raise SlurmHookError("SLURM_JOB_NODELIST is empty")
    if "[" not in text:
        return [n.strip() for n in text.split(",") if n.strip()]
    if use_library:
        try:
            import hostlist
        except ImportError:
            pass
        else:
            try:
                return hostlist.expand_hostlist(text)
            except hostlist.BadHostlist as e:
                raise SlurmHookError(f"bad hostlist {text!r}: {e}") from None
    scontrol = shutil.which("scontrol")
    if not scontrol:
        raise SlurmHookError(f"cannot expand hostlist {text!r}: neither the python-hostlist "
                             "package nor scontrol is available")
    try:
        out = subprocess.run([scontrol, "show", "hostnames", text], capture_output=True,
                             text=True, timeout=10)
    except subprocess.TimeoutExpired:
        raise SlurmHookError("scontrol show hostnames timed out") from None
    if out.returncode != 0:
        raise SlurmHookError(f"scontrol show hostnames {text!r}: {out.stderr.strip()}")
    return out.stdout.split()


def read_host_map(path: str) -> dict[str, str]:
    """Node name -> address or mlroute host name, from JSON or ``node address`` lines."""
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError as e:
        raise SlurmHookError(f"cannot read host map {path}: {e.strerror}") from None
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise SlurmHookError(f"host map {path} is not valid JSON: {e}") from None
        bad = [k for k, v in doc.items() if not isinstance(v, str) or not v]
        if bad:
            raise SlurmHookError(f"host map {path}: node {bad[0]!r} needs an address string")
        return dict(doc)
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 2:
            raise SlurmHookError(f"host map {path} line {n}: expected 'node address'")
        out[words[0]] = words[1]
    return out


def members(env, host_map_path: str | None, use_library: bool = True) -> list[str]:
    nodes = expand_nodelist(env.get("SLURM_JOB_NODELIST", ""), use_library)
    if not host_map_path:
        return nodes
    host_map = read_host_map(host_map_path)
    missing = [n for n in nodes if n not in host_map]
    if missing:
        raise SlurmHookError(f"host map {host_map_path} has no entry for "
                             f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
    return list(dict.fromkeys(host_map[n] for n in nodes))


def job_id(env, prefix: str) -> str:
    jid = env.get("SLURM_JOB_ID", "").strip()
    if not jid:
        raise SlurmHookError("SLURM_JOB_ID is not set (run by Slurm as PrologSlurmctld or "
                             "EpilogSlurmctld?)")
    return f"{prefix}{jid}"


def prolog(args, env) -> str:
    jid = job_id(env, args.job_prefix)
    hosts = members(env, args.host_map)
    if len(hosts) < 2:
        return f"job {jid} runs on {hosts[0] if hosts else 'no node'}: nothing to declare"
    doc = members_job(jid, hosts, args.bytes, False if args.no_learn else None,
                      algorithm=args.algorithm, mode=args.mode)
    _client(args).add_job(doc)
    return f"job {jid} declared with {len(hosts)} members"


def epilog(args, env) -> str:
    jid = job_id(env, args.job_prefix)
    try:
        _client(args).delete_job(jid)
    except ControllerError as e:
        if e.status == 404:
            return f"job {jid} was not declared (nothing to remove)"
        raise
    return f"job {jid} removed"


def _client(args) -> Client:
    if not args.url:
        raise SlurmHookError("no controller URL (MLROUTE_URL or --url)")
    try:
        token = read_token(args.token, args.token_file)
        return Client(args.url, token=token, timeout=args.timeout)
    except ValueError as e:
        raise SlurmHookError(str(e)) from None


class _Deadline(Exception):
    pass


def _parser(env) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="mlroute-slurm", description="mlroute's Slurm hooks")
    ap.add_argument("--version", action="version", version=f"mlroute-slurm {__version__}")
    ap.add_argument("hook", choices=["prolog", "epilog"])
    ap.add_argument("--url", default=env.get("MLROUTE_URL"))
    ap.add_argument("--token")
    ap.add_argument("--token-file")
    ap.add_argument("--host-map", default=env.get("MLROUTE_HOST_MAP"))
    ap.add_argument("--job-prefix", default=env.get("MLROUTE_JOB_PREFIX", "slurm-"))
    ap.add_argument("--bytes", type=float, help="bytes per rank and step, a hint")
    ap.add_argument("--no-learn", action="store_true")
    ap.add_argument("--algorithm")
    ap.add_argument("--mode")
    ap.add_argument("--timeout", type=float, default=float(env.get("MLROUTE_TIMEOUT", 5)),
                    help="seconds per request (5)")
    ap.add_argument("--deadline", type=float, default=float(env.get("MLROUTE_DEADLINE", 20)),
                    help="seconds for the whole run (20)")
    ap.add_argument("--log", default=env.get("MLROUTE_SLURM_LOG"),
                    help="append one line per run to this file")
    return ap


def main(argv=None, env=None) -> int:
    """Always 0: Slurm must not requeue, cancel or drain because of mlroute."""
    env = os.environ if env is None else env
    try:
        args = _parser(env).parse_args(argv)
    except SystemExit:
        return 0
    except ValueError as e:  # a bad MLROUTE_TIMEOUT / MLROUTE_DEADLINE
        print(f"mlroute-slurm: error: {e}", file=sys.stderr)
        return 0
    t0 = time.monotonic()

    def expired(signum, frame):
        raise _Deadline()
    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, max(0.1, args.deadline))
    try:
        line, ok = (prolog if args.hook == "prolog" else epilog)(args, env), True
    except (SlurmHookError, ControllerError) as e:
        line, ok = f"error: {' '.join(str(e).split())}", False
    except _Deadline:
        line, ok = f"error: gave up after the {args.deadline:g} s deadline", False
    except Exception as e:  # noqa: BLE001 - a bug must not fail the Slurm job either
        line, ok = f"error: internal: {type(e).__name__}: {e}", False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    line = f"mlroute-slurm {args.hook}: {line} ({time.monotonic() - t0:.2f} s)"
    print(line, file=sys.stderr if not ok else sys.stdout)
    if args.log:
        try:
            with open(args.log, "a") as fh:
                fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")
        except OSError:
            pass
    return 0


def prolog_main() -> int:
    return main(["prolog", *sys.argv[1:]])


def epilog_main() -> int:
    return main(["epilog", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
