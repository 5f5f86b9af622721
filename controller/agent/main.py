"""``mlroute-agent``: one per host; it follows its host's flows from the controller and
installs their SRv6 segment lists as policy rules and encapsulation routes (srv6 mode).

    mlroute-agent --url http://ctl:8080 --host h0_0 [--dev h0_0-eth0]

* a watch, not a poll: ``GET /v1/hosts/{host}/segments`` with ``Prefer: wait=25`` and
  ``If-None-Match`` returns as soon as the controller's state changes;
* one ``ip -batch`` per change, make before break (``steering.batch``); at start it reads
  the rules and tables it owns from the kernel (``ip -j``), so a restarted agent reconciles
  and duplicates nothing;
* a document it cannot apply is refused with a message naming the flow, and its rules stay;
* the controller unreachable: the rules stay, retried with back-off (0.5 s doubling to 10 s);
* a second agent on the host refuses to start (a lock file per host);
* SIGTERM or Ctrl-C removes every rule and table it owns, then it exits 0.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import threading

from controller.agent import steering
from controller.client import Client, ControllerError
from controller.errors import InputError

LOG = logging.getLogger("mlroute-agent")
WAIT_S = 25.0  # each watch asks the controller to hold the answer this long
BACKOFF = (0.5, 10.0)


def ip_batch(lines: list[str]) -> None:
    """Run ``lines`` through one ``ip -batch -`` (one process per change, not per rule)."""
    if not lines:
        return
    p = subprocess.run(["ip", "-batch", "-"], input="\n".join(lines) + "\n", text=True,
                       capture_output=True, timeout=30)
    if p.returncode:
        raise InputError(f"ip -batch refused: {p.stderr.strip() or p.stdout.strip()}")


def read_installed() -> dict:
    """The rules and encapsulation routes this agent owns, read back from the kernel."""
    rules = json.loads(subprocess.run(["ip", "-j", "-4", "rule", "show"], capture_output=True,
                                      text=True, timeout=10, check=True).stdout or "[]")
    out = {}
    for r in rules:
        pref, table = r.get("priority"), r.get("table")
        try:
            table = int(table)
        except (TypeError, ValueError):
            continue
        if not steering.owned(pref=pref) or not steering.owned(table=table):
            continue
        routes = json.loads(subprocess.run(["ip", "-j", "-d", "-4", "route", "show", "table",
                                            str(table)], capture_output=True, text=True,
                                           timeout=10).stdout or "[]")
        if not routes:
            continue
        rt = routes[0]  # iproute2 6.1: "encap": "seg6", then "mode" and "segs" beside it
        dst = r.get("dst")
        match = (None, dst, _proto(r.get("ipproto")), _port(r.get("sport")),
                 _port(r.get("dport")))
        route = steering.route_text(dst, rt.get("mode", "?"), rt.get("segs", []),
                                    rt.get("dev", "?"))
        out[match] = steering.Installed(table, pref, route, steering.rule_text(match, table, pref))
    return out


def _proto(name) -> int:
    return {"tcp": 6, "udp": 17}.get(name, name if isinstance(name, int) else 0)


def _port(value) -> int:
    if isinstance(value, dict):
        value = value.get("start", 0)
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


class Agent:
    def __init__(self, client: Client, host: str, dev: str, apply=ip_batch, read=read_installed):
        self.client, self.host, self.dev = client, host, dev
        self.apply, self.read = apply, read
        self.have: dict = {}
        self.version = ""
        self.stopping = threading.Event()

    def step(self, wait: float = WAIT_S) -> bool:
        """One watch and, if the document changed, one install. True if it installed."""
        headers = {"Prefer": f"wait={wait:g}"} if self.version else {}
        if self.version:
            headers["If-None-Match"] = f'"{self.version}"'
        status, doc = self.client.request("GET", f"/v1/hosts/{self.host}/segments",
                                          headers=headers, timeout=wait + 10)
        if status >= 400:
            raise ControllerError(str(doc.get("error") if isinstance(doc, dict) else doc),
                                  status, "GET", self.client.url)
        if doc.get("version") == self.version:
            return False
        want = steering.wanted(steering.parse(doc), self.have, self.dev)
        lines = steering.batch(self.have, want)
        try:
            self.apply(lines)
        except InputError:
            self.have = self.read()  # the kernel took part of it: start again from there
            raise
        self.have, self.version = want, doc.get("version", "")
        if lines:
            LOG.info("mlroute-agent: %d flow parts steered (%d commands, version %s)",
                     len(want), len(lines), self.version)
        return True

    def run(self) -> None:
        self.have = self.read()
        delay = BACKOFF[0]
        while not self.stopping.is_set():
            try:
                self.step()
                delay = BACKOFF[0]
            except InputError as e:
                LOG.error("mlroute-agent: refused the controller's paths, kept the old "
                          "ones: %s", e)
                self.version = ""  # ask again without waiting, after the back-off
                self.stopping.wait(delay)
                delay = min(delay * 2, BACKOFF[1])
            except (ControllerError, OSError, ValueError) as e:
                LOG.warning("mlroute-agent: controller: %s; rules kept, retrying in %.1f s",
                            e, delay)
                self.stopping.wait(delay)
                delay = min(delay * 2, BACKOFF[1])

    def remove_all(self) -> None:
        installed = self.read()
        self.apply(steering.batch(installed, {}))
        self.have = {}


def _lock(path: str):
    fh = open(path, "w")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise InputError(f"another mlroute-agent runs for this host (lock {path})") from None
    fh.write(str(os.getpid()))
    fh.flush()
    return fh


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="mlroute-agent", description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True, help="the controller's REST URL (comma-separated "
                                                 "for redundant controllers)")
    ap.add_argument("--host", required=True, help="this host's name in the fabric")
    ap.add_argument("--dev", help="the interface towards the leaf (default: HOST-eth0)")
    ap.add_argument("--lock", help="lock file (default: /run/mlroute-agent.HOST.lock)")
    ap.add_argument("--token", default=os.environ.get("MLROUTE_TOKEN"))
    ap.add_argument("--once", action="store_true", help="install once and exit (no watch)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        lock = _lock(args.lock or f"/run/mlroute-agent.{args.host}.lock")
    except InputError as e:
        print(f"mlroute-agent: {e}", file=sys.stderr)
        return 2
    agent = Agent(Client(args.url, args.token), args.host, args.dev or f"{args.host}-eth0")

    def stop(*_):
        agent.stopping.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        if args.once:
            agent.have = agent.read()
            agent.step(wait=0)
        else:
            agent.run()
    except KeyboardInterrupt:
        pass
    except (InputError, ControllerError, OSError) as e:
        print(f"mlroute-agent: {e}", file=sys.stderr)
        return 1
    finally:
        if not args.once:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            agent.remove_all()
            LOG.info("mlroute-agent: removed its rules and tables")
        lock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
