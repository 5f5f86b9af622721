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
* it probes every path it may use (``probe.py``): its parts' paths every 0.1 s, every
  path to their destinations every second; a part whose path misses ``FAIL_AFTER`` probes
  in a row moves at once to the backup list the controller gave (one atomic route replace)
  and back once it answers again; the results go to the controller
  (``POST /v1/hosts/{host}/probes``: its link state on fabrics without OpenFlow);
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
import time

from controller import __version__
from controller.agent import steering
from controller.agent.probe import Prober
from controller.client import Client, ControllerError
from controller.errors import InputError

LOG = logging.getLogger("mlroute-agent")
WAIT_S = 25.0  # each watch asks the controller to hold the answer this long
BACKOFF = (0.5, 10.0)
PROBE_S = 0.1  # between probes of the paths in use
ALL_PATHS_EVERY = 10  # every other path is probed once in this many rounds
FAIL_S = 0.5  # a path that worked fails when its probes of this long ago still have no
FAIL_PROBES = 3  # answer, this many of them (a reply delayed by a queue still counts)
BACK_S = 1.0  # a failed path answering again for this long is used again
REPORT_S = 2.0  # probe results go to the controller at least this often


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
        self.lock = threading.Lock()  # the watch and the probes both install
        self.steers: list = []
        self.probes: list[dict] = []  # every path to the parts' destinations (the document's)
        self.src_ip = ""
        self.failed: set[tuple] = set()  # primary lists that do not answer: backups in use

    def step(self, wait: float = WAIT_S) -> bool:
        """One watch and, if the document changed, one install. True if it installed."""
        doc = self.client.segments(self.host, self.version, wait, timeout=wait + 10)
        if not isinstance(doc, dict):
            raise InputError("segments document: expected a JSON object")
        if doc.get("version") == self.version:
            return False
        steers = steering.parse(doc)
        with self.lock:
            self.steers, self.version = steers, doc.get("version", "")
            self.probes = [p for p in doc.get("probes") or [] if p.get("form") == "usid"]
            self.src_ip = doc.get("src_ip", self.src_ip)
            want, lines = self._install()
        if lines:
            LOG.info("mlroute-agent: %d flow parts steered (%d commands, version %s)",
                     len(want), len(lines), self.version)
        return True

    def _install(self) -> tuple[dict, list[str]]:
        """The steers as wanted now (failed primaries on their backups), installed; under
        ``lock``."""
        want = steering.wanted(self.steers, self.have, self.dev, frozenset(self.failed))
        lines = steering.batch(self.have, want)
        try:
            self.apply(lines)
        except InputError:
            self.have = self.read()  # the kernel took part of it: start again from there
            self.version = ""
            raise
        self.have = want
        return want, lines

    def probe_loop(self, prober) -> None:
        """Probe, fail over, report (see the module text); until ``stopping``."""
        paths = PathHealth()
        sent: dict[int, tuple] = {}  # sequence number -> the list it probed
        last_report, last_state, rounds = 0.0, None, 0
        while not self.stopping.is_set():
            start = time.monotonic()
            with self.lock:
                steers, probes, src = list(self.steers), list(self.probes), self.src_ip
            lists = {}
            for s in steers:
                if s.encap == "encap.red":
                    lists[s.sids] = s.match[1]
                if s.backup and s.backup_encap == "encap.red":
                    lists[s.backup] = s.match[1]
            if rounds % ALL_PATHS_EVERY == 0:
                for p in probes:
                    lists.setdefault(tuple(p["sids"]), p["dst_ip"])
            rounds += 1
            if src and lists and prober is not None:
                prober.src = src
                targets = list(lists)
                for seq, sids in zip(prober.send([(x[0], lists[x]) for x in targets]), targets):
                    sent[seq] = (sids, start)
                    paths.sent(sids, start)
                for seq in prober.receive(start + PROBE_S):
                    if seq in sent:
                        sids, at = sent.pop(seq)
                        now = time.monotonic()
                        paths.answered(sids, now, now - at)
                if len(sent) > 4096:  # replies that never came
                    sent = dict(list(sent.items())[-1024:])
                now = time.monotonic()
                self._fail_over(steers, paths, now)
                state = [{"path": p["path"], "ok": paths.ok(tuple(p["sids"]), now)}
                         for p in probes if paths.known(tuple(p["sids"]))]
                if state and (state != last_state or start - last_report >= REPORT_S):
                    self._report(state)
                    last_report, last_state = start, state
            self.stopping.wait(max(0.0, PROBE_S - (time.monotonic() - start)))

    def _fail_over(self, steers, paths: PathHealth, now: float) -> None:
        failed = {s.sids for s in steers if s.backup and paths.known(s.sids)
                  and not paths.ok(s.sids, now) and paths.ok(s.backup, now)}
        kept = {sids for sids in self.failed if not paths.back(sids, now)}
        if failed | kept != self.failed:
            with self.lock:
                moved = (failed | kept) - self.failed
                self.failed = failed | kept
                try:
                    self._install()
                except InputError as e:
                    LOG.error("mlroute-agent: failing over: %s", e)
            LOG.info("mlroute-agent: %d paths failed, on their backups (%d just moved)",
                     len(self.failed), len(moved))

    def _report(self, state: list[dict]) -> None:
        try:
            self.client.report_probes(self.host, state, timeout=1.0)
        except (ControllerError, OSError) as e:
            LOG.debug("mlroute-agent: probe report not sent: %s", e)

    def run(self, prober=None) -> None:
        self.have = self.read()
        if prober is not None:
            threading.Thread(target=self.probe_loop, args=(prober,), daemon=True).start()
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


class PathHealth:
    """Per segment list: when it last answered, the probes sent since, and since when it
    answers again. A list fails when ``FAIL_PROBES`` probes went unanswered and the oldest
    of them left ``FAIL_S`` ago (a late reply still counts: a queue under load delays it);
    a list probed seldom fails as slowly as it is probed. A list that never answered is
    unknown (neighbours still resolving at start): only a list that worked can fail.

    >>> h = PathHealth(); h.sent(("a",), 0.0); h.known(("a",))
    False
    >>> h.answered(("a",), 0.1)
    >>> for t in (0.2, 0.3, 0.4): h.sent(("a",), t)
    >>> h.ok(("a",), 0.6), h.ok(("a",), 0.8)
    (True, False)
    """

    def __init__(self):
        self.last_ok: dict[tuple, float] = {}
        self.pending: dict[tuple, list[float]] = {}  # send times since the last answer
        self.ok_since: dict[tuple, float] = {}
        self.srtt = 0.0  # smoothed round trip of every answer: queues stretch the wait

    def sent(self, sids: tuple, now: float) -> None:
        self.pending.setdefault(sids, []).append(now)
        if not self.ok(sids, now):
            self.ok_since.pop(sids, None)

    def answered(self, sids: tuple, now: float, rtt: float = 0.0) -> None:
        self.srtt = rtt if not self.srtt else 0.875 * self.srtt + 0.125 * rtt
        if sids not in self.ok_since:
            self.ok_since[sids] = now
        self.last_ok[sids] = now
        self.pending[sids] = []

    def known(self, sids: tuple) -> bool:
        return sids in self.last_ok

    def ok(self, sids: tuple, now: float) -> bool:
        waiting = self.pending.get(sids, [])
        wait = max(FAIL_S, 4 * self.srtt)  # a loaded queue answers late, not never
        return sids in self.last_ok and not (len(waiting) >= FAIL_PROBES
                                             and now - waiting[0] > wait)

    def back(self, sids: tuple, now: float) -> bool:
        return self.ok(sids, now) and now - self.ok_since.get(sids, now) >= BACK_S


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
    ap.add_argument("--version", action="version", version=f"mlroute-agent {__version__}")
    ap.add_argument("--url", required=True, help="the controller's REST URL (comma-separated "
                                                 "for redundant controllers)")
    ap.add_argument("--host", required=True, help="this host's name in the fabric")
    ap.add_argument("--dev", help="the interface towards the leaf (default: HOST-eth0)")
    ap.add_argument("--lock", help="lock file (default: /run/mlroute-agent.HOST.lock)")
    ap.add_argument("--token", default=os.environ.get("MLROUTE_TOKEN"))
    ap.add_argument("--once", action="store_true", help="install once and exit (no watch)")
    ap.add_argument("--no-probes", action="store_true",
                    help="no path probes: no fail-over and no link state for the controller")
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
            try:
                prober = None if args.no_probes else Prober("")
            except PermissionError:
                print("mlroute-agent: probes need raw sockets (root or CAP_NET_RAW); "
                      "running without (--no-probes)", file=sys.stderr)
                prober = None
            agent.run(prober)
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
