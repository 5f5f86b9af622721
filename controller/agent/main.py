"""``mlroute-agent``: one per host; it follows its host's flows from the controller and
installs their SRv6 segment lists as policy rules and encapsulation routes (srv6 mode), or
learns the source ports of its host-mode flows from the routers' answers (host mode).

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
  path to their destinations every second; a part whose path fails (``probe.PathHealth``:
  three probes unanswered for max(0.5 s, 4 round trips)) moves at once to the backup list
  the controller gave (one atomic route replace), and back once it answers again for a
  second; the results go to the controller (``POST /v1/hosts/{host}/probes``: its link
  state on fabrics without OpenFlow);
* every second it reports what its host sent per destination (``traffic.py``: its TCP
  connections' acknowledged bytes; ``POST /v1/hosts/{host}/traffic``): the controller
  learns members-only jobs from it where the routers export no sFlow;
* host mode on routers (the document's ``ports``): for each document version it learns a
  source port per host-mode part lacking one, whose hops the routers' ECMP hash makes the
  planned path (``portmap.py``: TTL-limited probes, the routers' ICMP answers; at most 24
  rounds of 0.3 s), re-checks every port it holds once (``hostports.py``), reports the new
  ones (``POST /v1/hosts/{host}/ports``; a port that goes elsewhere now and has no
  replacement is reported with ``sport`` null: withdrawn) and writes every port that holds
  to ``--ports-file``
  (``GET /v1/jobs/{id}/ports``'s lines: source IP, destination IP, protocol, source port,
  destination port), where the application reads the port to bind before it connects;
* SIGTERM or Ctrl-C removes every rule and table it owns (and the ports file), then it
  exits 0.
"""
from __future__ import annotations

import argparse
import fcntl
import logging
import os
import signal
import sys
import threading
import time

from controller import __version__
from controller.agent import hostports, portmap, steering
from controller.agent.kernel import ip_batch, read_installed
from controller.agent.probe import PathHealth, Prober
from controller.agent.traffic import SentBytes, read_tcp, report
from controller.client import Client, ControllerError
from controller.errors import InputError

LOG = logging.getLogger("mlroute-agent")
WAIT_S = 25.0  # each watch asks the controller to hold the answer this long
BACKOFF = (0.5, 10.0)
PROBE_S = 0.1  # between probes of the paths in use
ALL_PATHS_EVERY = 10  # every other path is probed once in this many rounds
REPORT_S = 2.0  # probe results go to the controller at least this often
TRAFFIC_S = 1.0  # what the host sent goes to the controller this often
PORTS_WAIT_S = 1.0  # the ports thread looks for a new document at least this often


class Agent:
    def __init__(self, client: Client, host: str, dev: str, apply=ip_batch, read=read_installed,
                 sockets=read_tcp, ports_file: str = ""):
        self.client, self.host, self.dev = client, host, dev
        self.ports_file = ports_file  # host mode's ports for the applications ("": none)
        self.port_entries: list[dict] = []  # the document's host-mode parts
        self.routers: dict[str, str] = {}  # router address -> switch name
        self.new_document = threading.Event()  # wakes the ports thread
        self.apply, self.read, self.sockets = apply, read, sockets
        self.have: dict = {}
        self.version = ""
        self.stopping = threading.Event()
        self.lock = threading.Lock()  # the watch and the probes both install
        self.steers: list = []
        self.probes: list[dict] = []  # every path to the parts' destinations (the document's)
        self.src_ip = ""
        self.addresses: set[str] = set()  # the host's fabric addresses (traffic reports)
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
            self.addresses = set(doc.get("addresses") or [self.src_ip])
            self.port_entries = list(doc.get("ports") or [])
            self.routers = dict(doc.get("routers") or {})
            self.new_document.set()
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

    def traffic_loop(self, every: float = TRAFFIC_S) -> None:
        """Report what the host sent per destination every ``every`` seconds; until
        ``stopping``. From its fabric addresses only (every plane's), once the controller
        named them: not its management connections."""
        sent, last, said = SentBytes(), time.monotonic(), None
        while not self.stopping.wait(every):
            try:
                pairs = sent.delta(self.sockets())
            except OSError as e:
                LOG.warning("mlroute-agent: cannot read the host's connections: %s", e)
                continue
            now = time.monotonic()
            doc, last = report(pairs, now - last, self.addresses or {self.src_ip}), now
            if doc["pairs"]:
                try:
                    self.client.report_traffic(self.host, doc, timeout=1.0)
                    if said != "":
                        LOG.info("mlroute-agent: reporting what the host sends (%d pairs)",
                                 len(doc["pairs"]))
                    said = ""
                except (ControllerError, OSError) as e:
                    if str(e) != said:  # once per cause, not every second
                        LOG.warning("mlroute-agent: traffic report not sent: %s", e)
                    said = str(e)

    def ports_loop(self, prober) -> None:
        """Host mode on routers (see the module text), until ``stopping``: each document
        version once, again after a back-off while a report failed or a part has no port."""
        keeper = hostports.PortKeeper(lambda probes: {} if self.stopping.is_set()
                                      else prober(probes))
        done, delay = None, BACKOFF[0]
        while not self.stopping.is_set():
            self.new_document.wait(PORTS_WAIT_S)
            self.new_document.clear()
            with self.lock:
                version, entries = self.version, list(self.port_entries)
                prober.src, prober.routers = self.src_ip, dict(self.routers)
                used = {(s.match[2], s.match[3]) for s in self.steers if s.match[3]}
            if not version or version == done:
                continue
            if self._ports_once(keeper, entries, used):
                done, delay = version, BACKOFF[0]
            else:
                self.stopping.wait(delay)
                delay = min(delay * 2, BACKOFF[1])

    def _ports_once(self, keeper, entries: list[dict], used: set) -> bool:
        """Learn, report and write one document's ports; True when every part has one."""
        report, ports = keeper.handle(entries, used)
        if report:
            try:
                self.client.report_ports(self.host, report, timeout=2.0)
                withdrawn = sum(r["sport"] is None for r in report)
                LOG.info("mlroute-agent: %d source ports learned and reported, %d withdrawn "
                         "(they go elsewhere now; %d probes so far)", len(report) - withdrawn,
                         withdrawn, keeper.probes)
            except (ControllerError, OSError) as e:
                LOG.warning("mlroute-agent: source ports not reported: %s", e)
                for r in report:  # not the controller's: not the application's either
                    ports.pop(hostports.name_of(r), None)
                    keeper.checked.pop(hostports.name_of(r), None)
        if self.ports_file and (entries or os.path.exists(self.ports_file)):
            try:
                hostports.write(self.ports_file, hostports.export(
                    self.host, self.src_ip, entries, ports))
            except OSError as e:
                LOG.warning("mlroute-agent: cannot write %s: %s", self.ports_file, e)
        missing = len(entries) - len(ports)
        if missing:
            LOG.warning("mlroute-agent: %d host-mode parts without a source port yet", missing)
        return not missing

    def run(self, prober=None, traffic: bool = True, port_prober=None) -> None:
        self.have = self.read()
        if prober is not None:
            threading.Thread(target=self.probe_loop, args=(prober,), daemon=True).start()
        if port_prober is not None:
            threading.Thread(target=self.ports_loop, args=(port_prober,), daemon=True).start()
        if traffic:
            threading.Thread(target=self.traffic_loop, daemon=True).start()
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
        if self.ports_file and os.path.exists(self.ports_file):
            os.unlink(self.ports_file)


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
    ap.add_argument("--no-traffic", action="store_true",
                    help="no traffic reports: the controller learns from sFlow only")
    ap.add_argument("--no-ports", action="store_true",
                    help="host mode on routers: learn no source ports (the host's host-mode "
                         "flows then take whatever spine the routers' hash gives)")
    ap.add_argument("--ports-file", metavar="FILE", help="where host mode's ports are written for the "
                                         "applications (default: /run/mlroute-agent.HOST.ports)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        lock = _lock(args.lock or f"/run/mlroute-agent.{args.host}.lock")
    except InputError as e:
        print(f"mlroute-agent: {e}", file=sys.stderr)
        return 2
    agent = Agent(Client(args.url, args.token), args.host, args.dev or f"{args.host}-eth0",
                  ports_file=args.ports_file or f"/run/mlroute-agent.{args.host}.ports")

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
            try:
                ports = None if args.no_ports else portmap.Prober("")
            except PermissionError:
                print("mlroute-agent: host mode's port probes need raw sockets (root or "
                      "CAP_NET_RAW); running without (--no-ports)", file=sys.stderr)
                ports = None
            agent.run(prober, traffic=not args.no_traffic, port_prober=ports)
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
