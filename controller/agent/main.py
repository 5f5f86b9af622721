"""``mlroute-agent``: one per host; it follows its host's flows from the controller and
installs their SRv6 segment lists as policy rules and encapsulation routes (srv6 mode), or
learns the source ports of its host-mode flows from the routers' answers (host mode).

    mlroute-agent --url https://ctl:8080 --host h0_0 --credential-file /etc/mlroute/agent.credential

* a watch, not a poll: ``GET /v1/hosts/{host}/segments`` with ``Prefer: wait=120`` and
  ``If-None-Match`` returns as soon as the controller's state changes;
* no document can turn it against its host: every field is checked and typed before
  anything is built (``steering.read``: SIDs inside the document's uSID block, addresses,
  ports and protocols bounded, at most ``steering.MAX_PARTS`` parts, the device its own
  ``--dev``, documents of at most ``MAX_DOCUMENT_BYTES``), and only lines of the agent's own
  forms reach ``ip -batch``;
* a document that fails a check is refused as a whole: its rules stay as they were, a
  WARNING names the flow and the field, the watch asks again after a back-off (0.5 s doubling
  to 10 s), and its next probe report tells the controller (``"refused": {"version",
  "error"}``; ``"refused": null`` once a document is taken again). Two flows with one match
  and different lists: a WARNING, the first steers it;
* one ``ip -batch`` per change, make before break (``steering.batch``); a batch the kernel
  refuses half way is rolled back to what was installed before, read back from the kernel;
  at start it reads every rule and table it owns (``ip -j``; tables without a rule too), so
  a restarted agent reconciles and duplicates nothing;
* the controller unreachable: the rules stay, retried with back-off (0.5 s doubling to 10 s);
* a second agent on the host refuses to start (a lock file per host; the running agent's
  pid stays in it);
* it probes the paths it may use (``probe.py``): the lists its parts use every 10 ms
  (``--probe-period``), their other lists every 30 ms, every other path to their
  destinations once a second, at most 2,700 probes a second; a part whose list fails
  (``probe.PathHealth``: three probes unanswered for max(60 ms, 2 of the list's round
  trips)) moves at once to the backup list the controller gave (one atomic route replace;
  the routes' ``rto_min`` of 35 ms lets TCP resend soon after), and back once it answers
  again for a second; the results go to the controller (``POST /v1/hosts/{host}/probes``:
  its link state without OpenFlow);
* every second it reports what its host sent per destination (``traffic.py``: its TCP
  connections' acknowledged bytes; ``POST /v1/hosts/{host}/traffic``): the controller
  learns members-only jobs from it where the routers export no sFlow;
* a report the controller refuses for its credential (HTTP 401 or 403) is a WARNING once
  per cause, saying what to check;
* host mode on routers (the document's ``ports``): for each document version it learns a
  source port per host-mode part lacking one, whose hops the routers' ECMP hash makes the
  planned path (``portmap.py``: TTL-limited probes, the routers' ICMP answers; at most 24
  rounds of 0.3 s), re-checks every port it holds once (``hostports.py``), reports the new
  ones (``POST /v1/hosts/{host}/ports``; a port that goes elsewhere now and has no
  replacement is reported with ``sport`` null: withdrawn) and writes every port that holds
  to ``--ports-file``
  (``GET /v1/jobs/{id}/ports``'s lines: source IP, destination IP, protocol, source port,
  destination port), where the application reads the port to bind before it connects;
* every loop (the watch, the probes, the traffic and port reports) runs supervised: one that
  raises is logged with its traceback and started again after a back-off (0.5 s doubling to
  5 s, ``supervise.py``); one that fails 5 times within a minute ends the agent with exit
  status 1, its rules kept, for its service manager to restart it
  (``integrations/systemd/mlroute-agent.service``);
* the routes the kernel drops (its port set down and up) are put back as soon as the port is
  up, at WARNING (``routes.py``: a netlink monitor, no cost while nothing changes);
* only SIGTERM or Ctrl-C removes every rule and table it owns (read back from the kernel, again
  until none is left) and the ports file, exit 0; any other end keeps them (exit 1; 2 for bad
  options or a second agent).
"""
from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
import urllib.parse

from controller.agent import hostports, options, portmap, steering
from controller.agent import probe as _probe
from controller.agent.kernel import ip_batch, read_installed
from controller.agent.probe import FAST_FAIL_S, FAST_S, PathHealth, Prober, Schedule
from controller.agent.routes import RouteKeeper
from controller.agent.supervise import AgentFailed, Supervisor
from controller.agent.supervise import lock as _lock
from controller.agent.traffic import SentBytes, read_tcp, report
from controller.client import Client, ControllerError, read_token
from controller.errors import InputError

LOG = logging.getLogger("mlroute-agent")
# Each watch asks the controller to hold the answer this long (at most ``api.WATCH_MAX_S``),
# and gives up on an answer 10 s after it (``step``'s read timeout): a controller process
# frozen on a live machine is left after 130 s and the next URL asked (a machine lost or a
# partition: after about 25 s, the connection's TCP keepalive, ``client.KEEPALIVE``).
# Why 120 s, not 25 (issue 73): each renewal is a connection the controller accepts and
# answers 304; 8,192 agents renewing every 25 s took 3.3-3.5% of its core with nothing
# changing (14% in one run), every 120 s (68 renewals a second) 1.0-1.7%
# (``benchmarks.agents``, three runs). A change is answered at once whatever the wait; only
# a frozen controller process is found later (35 s before).
WAIT_S = 120.0
BACKOFF = (0.5, 10.0)
REPORT_S = 2.0  # probe results go to the controller at least this often
TRAFFIC_S = 1.0  # what the host sent goes to the controller this often
PORTS_WAIT_S = 1.0  # the ports thread looks for a new document at least this often
MAX_DOCUMENT_BYTES = 16 << 20  # a larger segments document is refused (as JSON, compact)
CREDENTIAL_ADVICE = ("the controller refused this host's credential: check --credential-file "
                     "/ mlroute agent-credential {host}")


class Agent(Supervisor):
    def __init__(self, client: Client, host: str, dev, apply=ip_batch, read=read_installed,
                 sockets=read_tcp, ports_file: str = ""):
        # the interface, or one per plane (``steering.devices``)
        self.client, self.host, self.dev = client, host, steering.devices(dev)
        self.ports_file = ports_file  # host mode's ports for the applications ("": none)
        self.ports_lock = threading.Lock()  # no write of it after ``remove_all``'s unlink
        self.port_entries: list[dict] = []  # the document's host-mode parts
        self.routers: dict[str, str] = {}  # router address -> switch name
        self.new_document = threading.Event()  # wakes the ports thread
        self.apply, self.read, self.sockets = apply, read, sockets
        self.have: dict = {}
        self.version = ""
        Supervisor.__init__(self)  # ``stopping``, the loops' restarts
        self.lock = threading.Lock()  # the watch and the probes both install
        self.steers: list = []
        self.src_ip = ""
        self.lists = _probe.Lists([], [], {})  # the document's lists: built once per document
        self.block = None  # the fabric's uSID block: probes are answered along it
        self.addresses: frozenset[str] = frozenset()  # the host's fabric addresses (traffic)
        self.failed: set[tuple] = set()  # primary lists that do not answer: backups in use
        self.refused: dict | None = None  # the last document refused, until one is taken
        self.told: dict | None = None  # the refusal the controller last heard of
        self.probing = False  # a probe loop runs (it carries the refusal to the controller)
        self.said: dict = {}  # what was last logged per cause: said once, not every round
        self.traffic_s = TRAFFIC_S
        self.probe_s = FAST_S  # between probe rounds (``--probe-period``)

    # ---- the watch -------------------------------------------------------------------------
    def step(self, wait: float = WAIT_S) -> bool:
        """One watch and, if the document changed, one install. True if it installed;
        InputError if it refused the document (its rules stay as they were)."""
        raw = self.client.segments(self.host, self.version, wait, timeout=wait + 10)
        if isinstance(raw, dict) and raw.get("version") == self.version and self.version:
            return False
        try:
            size = len(json.dumps(raw, separators=(",", ":")))
            if size > MAX_DOCUMENT_BYTES:
                raise InputError(f"segments document: {size:,} bytes, at most "
                                 f"{MAX_DOCUMENT_BYTES:,}")
            doc = steering.read(raw)
        except (InputError, TypeError, ValueError, RecursionError) as e:
            error = e if isinstance(e, InputError) else InputError(f"segments document: {e}")
            self._refuse(raw, error)
            raise error from None
        with self.lock:
            kept = self.steers
            self.steers = doc.steers
            try:
                want, lines = self._install()
            except InputError as e:
                self.steers = kept
                self._refuse(raw, InputError(f"the kernel refused its rules: {e}"))
                raise
            self.version, self.src_ip = doc.version, doc.src_ip
            self.lists = _probe.Lists(doc.steers, doc.probes, doc.plane_ips)
            self.block = doc.block
            self.addresses, self.port_entries, self.routers = (doc.addresses, doc.ports,
                                                               doc.routers)
            self.refused = None
            self.new_document.set()
        for note in doc.notes:
            LOG.warning("mlroute-agent: document %s: %s", doc.version, note)
        if lines:
            LOG.info("mlroute-agent: %d flow parts steered (%d commands, version %s)",
                     len(want), len(lines), self.version)
        return True

    def _refuse(self, raw, error: InputError) -> None:
        version = raw.get("version") if isinstance(raw, dict) else None
        version = version[:steering.MAX_VERSION] if isinstance(version, str) and \
            version.isprintable() else ""  # a line break would forge log lines
        refused = {"version": version, "error": str(error)[:steering.MAX_ERROR]}
        if refused != self.refused:
            LOG.warning("mlroute-agent: refused the controller's document %r, kept the rules "
                        "in force: %s", version, error)
        self.refused = refused

    def watch_once(self, delay: float) -> float:
        """One ``step``, its refusal or the controller's silence handled; the next back-off."""
        try:
            self.step()
            self._tell_refusal()
            return BACKOFF[0]
        except InputError:  # logged by ``_refuse``: the rules stay, asked again later
            self._tell_refusal()
        except (ControllerError, OSError, ValueError) as e:
            LOG.warning("mlroute-agent: controller: %s; rules kept, retrying in %.1f s", e, delay)
        self.stopping.wait(delay)
        return min(delay * 2, BACKOFF[1])

    def watch_loop(self) -> None:
        delay = BACKOFF[0]
        while not self.stopping.is_set():
            delay = self.watch_once(delay)

    def _tell_refusal(self) -> None:
        """Without a probe loop, the watch itself reports a refusal (or its end)."""
        if not self.probing and self.refused != self.told:
            self._report([])

    # ---- installing ------------------------------------------------------------------------
    def _install(self) -> tuple[dict, list[str]]:
        """The steers as wanted now (failed primaries on their backups), installed; under
        ``lock``. A batch the kernel refuses is rolled back (``_roll_back``), InputError."""
        if self.stopping.is_set():  # SIGTERM: ``remove_all`` has the last word
            return self.have, []
        before, done = self.have, []
        current = before
        try:
            for want in steering.steps(self.steers, before, self.dev, frozenset(self.failed)):
                lines = steering.batch(current, want)
                self.apply(lines)
                current = want
                done += lines
        except InputError as e:
            self._roll_back(before, e)
            raise
        self.have = current
        return current, done

    def _roll_back(self, before: dict, error: InputError) -> None:
        """Back to ``before`` exactly: from what the kernel holds now (read back), the batch
        to ``before``; what the log says is what the kernel says afterwards."""
        whole = {m: i for m, i in before.items() if i.route and i.rule}
        try:
            self.apply(steering.batch(self.read(), whole))
            after = self.read()
        except InputError as e:
            LOG.error("mlroute-agent: ip -batch failed (%s), and so did its rollback (%s); "
                      "retrying from what the kernel holds", error, e)
            try:
                self.have = self.read()
            except InputError:
                pass  # ``have`` stays: the next install replaces what differs
            return
        self.have = after
        if after == whole:
            LOG.warning("mlroute-agent: ip -batch failed (%s); rolled back to the %d parts "
                        "installed before", error, len(whole))
        else:
            LOG.error("mlroute-agent: ip -batch failed (%s); its rollback left %d entries in "
                      "the kernel for the %d parts before; retrying from there", error,
                      len(after), len(whole))

    def remove_all(self) -> None:
        """Every rule and table the agent owns, read back from the kernel, removed (SIGTERM)."""
        held = self.lock.acquire(timeout=30)
        if not held:
            LOG.warning("mlroute-agent: an install still runs after 30 s; removing anyway")
        try:  # again from what is left: a route the kernel flushed meanwhile stops a batch
            for attempt in range(3):
                try:
                    self.apply(steering.batch(self.read(), {}))
                    break
                except InputError:
                    if attempt == 2:
                        raise
            self.have = {}
        finally:
            if held:
                self.lock.release()
        with self.ports_lock:  # (``stopping`` is set: the ports loop writes it no more)
            if self.ports_file and os.path.exists(self.ports_file):
                os.unlink(self.ports_file)

    # ---- probes and fail-over ----------------------------------------------------------------
    def probe_loop(self, prober) -> None:
        """Probe, fail over, report (see the module text); until ``stopping``."""
        period = self.probe_s  # a round (``--probe-period``)
        paths, schedule = PathHealth(), Schedule(round_s=period)
        sent: dict[int, tuple] = {}  # sequence number -> (the list it probed, when)
        last_report, last_state, known = 0.0, None, None
        while not self.stopping.is_set():
            start = time.monotonic()
            with self.lock:
                lists, src, prober.block = self.lists, self.src_ip, self.block
                failed = frozenset(self.failed)
            if lists is not known:  # a new document: only its lists are judged
                paths.forget(set(lists.dst_of))
                known = lists
            state = []
            if src and lists.dst_of:
                prober.src = src
                active, standby = lists.split(failed)
                targets = schedule.pick(active, standby, lists.others, start)
                seqs = prober.send([(str(x[0]), str(lists.dst_of[x]), lists.back_of.get(x),
                                     lists.src_of.get(x)) for x in targets])
                for seq, sids in zip(seqs, targets):
                    sent[seq] = (sids, start)
                    paths.sent(sids, start)
                for seq, heard in prober.receive(start + period):
                    if seq in sent:
                        sids, at = sent.pop(seq)
                        if sids in lists.dst_of:  # not a list of an older document
                            paths.answered(sids, heard, heard - at)
                _probe.forget_old(sent, start)
                now = time.monotonic()
                self._fail_over(lists.backed, paths, now)
                state = _probe.verdicts(paths, lists.probes, lists.steered_set, now)
            due = start - last_report >= REPORT_S  # a report waits up to 1 s: not each round
            if (state and state != last_state) or (due and (state or self.refused != self.told)):
                self._report(state)
                last_report, last_state = start, state
            self.stopping.wait(max(0.0, period - (time.monotonic() - start)))

    def _fail_over(self, backed: list, paths: PathHealth, now: float) -> None:
        """``backed``: (primary, backup) of the parts with a backup (``Lists.backed``)."""
        failed = {p for p, b in backed if paths.known(p)  # the backup heard since the
                  and not paths.ok(p, now, FAST_FAIL_S)  # primary fell silent (not: the
                  and paths.ok(b, now, FAST_FAIL_S)  # host's own port)
                  and paths.answered_since(b, paths.since(p, now))}
        kept = {sids for sids in self.failed if not paths.back(sids, now, FAST_FAIL_S)}
        if failed | kept == self.failed:
            return
        with self.lock:
            was = self.failed
            moved = (failed | kept) - was
            self.failed = failed | kept
            try:
                self._install()
            except InputError as e:
                self.failed = was  # tried again next round
                self._say("fail-over", logging.ERROR, f"mlroute-agent: failing over: {e}")
                return
        LOG.info("mlroute-agent: %d paths failed, on their backups (%d just moved%s)",
                 len(self.failed), len(moved), "".join(  # the first one's evidence
                     f"; {paths.silent(m, now) * 1e3:.0f} ms unanswered, round trip "
                     f"{paths.rtt.get(m, (0.0,))[0] * 1e3:.0f} ms" for m in list(moved)[:1]))

    # ---- reports -------------------------------------------------------------------------------
    def _report(self, state: list[dict]) -> None:
        """The probe results, and the refusal while there is one or until it is heard
        gone: ``POST /v1/hosts/{host}/probes``."""
        doc, refused = {"paths": state}, self.refused
        if refused is not None or self.told is not None:
            doc["refused"] = refused
        try:
            self.client.call("POST", f"/v1/hosts/{urllib.parse.quote(self.host, safe='')}"
                             "/probes", doc=doc, timeout=1.0)
            self.told = refused
            self.said.pop("probe", None)
        except (ControllerError, OSError) as e:
            self._unsent("probe", e, logging.DEBUG)

    def _unsent(self, kind: str, e: Exception, level: int) -> None:
        """A report not sent: a refused credential is a WARNING with what to do, once per
        cause; anything else at ``level``, once per cause."""
        if isinstance(e, ControllerError) and e.status in (401, 403):
            self._say(kind, logging.WARNING, f"mlroute-agent: {kind} report refused (HTTP "
                      f"{e.status}): " + CREDENTIAL_ADVICE.format(host=self.host))
        elif isinstance(e, ControllerError) and 400 <= e.status < 500:  # counted there too
            self._say(kind, logging.WARNING, f"mlroute-agent: {kind} report refused (HTTP "
                      f"{e.status}): {e}; the controller names this host in /v1/ready")
        else:
            self._say(kind, level, f"mlroute-agent: {kind} report not sent: {e}")

    def _say(self, cause: str, level: int, message: str) -> None:
        if self.said.get(cause) != message:
            LOG.log(level, "%s", message)
        self.said[cause] = message

    def traffic_loop(self, every: float | None = None) -> None:
        """Report what the host sent per destination every ``every`` seconds; until
        ``stopping``. From its fabric addresses only (every plane's), once the controller
        named them: not its management connections."""
        sent, last = SentBytes(), time.monotonic()
        while not self.stopping.wait(self.traffic_s if every is None else every):
            try:
                pairs = sent.delta(self.sockets())
            except OSError as e:
                self._say("connections", logging.WARNING,
                          f"mlroute-agent: cannot read the host's connections: {e}")
                continue
            now = time.monotonic()
            doc, last = report(pairs, now - last, self.addresses or {self.src_ip}), now
            if doc["pairs"]:
                try:
                    self.client.report_traffic(self.host, doc, timeout=1.0)
                    if self.said.get("traffic") != "":  # the first, or after a failure
                        LOG.info("mlroute-agent: reporting what the host sends (%d pairs)",
                                 len(doc["pairs"]))
                    self.said["traffic"] = ""
                except (ControllerError, OSError) as e:
                    self._unsent("traffic", e, logging.WARNING)

    def ports_loop(self, prober) -> None:
        """Host mode on routers (see the module text), until ``stopping``: each document
        version once, again after a back-off while a report failed or a part has no port."""
        keeper = hostports.PortKeeper(lambda probes: {} if self.stopping.is_set()
                                      else prober(probes))
        done, delay = None, BACKOFF[0]
        while not self.stopping.is_set():
            self.new_document.wait(PORTS_WAIT_S)
            self.new_document.clear()
            with self.lock:  # a new version's only: the rest is the document's (once)
                version = self.version
                if not version or version == done:
                    continue
                entries = self.port_entries  # (each document's own: replaced, not changed)
                prober.src, prober.routers = self.src_ip, self.routers
                used = {(s.match[1], s.match[2]) for s in self.steers if s.match[2]}
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
                self.said.pop("ports", None)
                withdrawn = sum(r["sport"] is None for r in report)
                LOG.info("mlroute-agent: %d source ports learned and reported, %d withdrawn "
                         "(they go elsewhere now; %d probes so far)", len(report) - withdrawn,
                         withdrawn, keeper.probes)
            except (ControllerError, OSError) as e:
                self._unsent("ports", e, logging.WARNING)
                for r in report:  # not the controller's: not the application's either
                    ports.pop(hostports.name_of(r), None)
                    keeper.checked.pop(hostports.name_of(r), None)
        with self.ports_lock:  # not after SIGTERM: ``remove_all`` took it away
            if self.ports_file and not self.stopping.is_set() and (
                    entries or os.path.exists(self.ports_file)):
                try:
                    hostports.write(self.ports_file, hostports.export(
                        self.host, self.src_ip, entries, ports))
                except OSError as e:
                    LOG.warning("mlroute-agent: cannot write %s: %s", self.ports_file, e)
        missing = len(entries) - len(ports)
        if missing:
            LOG.warning("mlroute-agent: %d host-mode parts without a source port yet", missing)
        return not missing

    def run(self, prober=None, traffic: bool = True, port_prober=None, routes=None) -> None:
        """Every loop supervised in a thread of its own, until ``stopping``; AgentFailed when
        one kept failing. This thread only waits: SIGTERM reaches it at once, and a fatal
        failure ends the agent without waiting for a watch held by the controller."""
        self.have = self.read()
        self.probing = prober is not None
        self.start("watch", self.watch_loop)
        if prober is not None:
            self.start("probe", self.probe_loop, prober)
        if port_prober is not None:
            self.start("ports", self.ports_loop, port_prober)
        if traffic:
            self.start("traffic", self.traffic_loop)
        if routes is not None:  # a ``RouteKeeper``
            self.start("routes", routes.loop, self)
        self.stopping.wait()
        if self.fatal:
            raise AgentFailed(self.fatal)


def main(argv=None) -> int:
    ap = options.parser(__doc__.split("\n\n")[0])
    args = ap.parse_args(argv)
    try:
        devs = options.devices(args)
        token = read_token(args.token, args.credential_file)
        client = Client(args.url, token, ca_file=args.ca_file)
    except (ValueError, InputError) as e:
        ap.error(str(e))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        lock = _lock(args.lock or f"/run/mlroute-agent.{args.host}.lock")
    except (InputError, OSError) as e:
        print(f"mlroute-agent: {e}", file=sys.stderr)
        return 2
    agent = Agent(client, args.host, devs,
                  ports_file=args.ports_file or f"/run/mlroute-agent.{args.host}.ports")
    agent.probe_s = args.probe_period

    def stop(*_):
        agent.stopping.set()
        raise KeyboardInterrupt

    handlers = {s: signal.signal(s, stop if s == signal.SIGTERM else signal.getsignal(s))
                for s in (signal.SIGTERM, signal.SIGINT)}  # put back at the end (tests)
    status, remove = 0, False
    try:
        if args.once:
            agent.have = agent.read()
            agent.step(wait=0)
        else:
            prober, port_prober = _probers(args)
            agent.run(prober, traffic=not args.no_traffic, port_prober=port_prober,
                      routes=RouteKeeper(devs))
    except KeyboardInterrupt:  # SIGTERM or Ctrl-C: the only end that removes the rules
        remove = not args.once
    except AgentFailed as e:
        LOG.critical("mlroute-agent: %s; exiting 1 with its rules kept", e)
        status = 1
    except (InputError, ControllerError, OSError) as e:
        print(f"mlroute-agent: {e}; rules kept", file=sys.stderr)
        status = 1
    except Exception:  # whatever it was, the rules stay (logged with its traceback)
        LOG.critical("mlroute-agent: unexpected failure; exiting 1 with its rules kept",
                     exc_info=True)
        status = 1
    if remove:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        agent.stopping.set()
        agent.join()
        try:
            agent.remove_all()
            LOG.info("mlroute-agent: removed its rules and tables")
        except (InputError, OSError) as e:
            LOG.error("mlroute-agent: could not remove its rules: %s", e)
            status = 1
    lock.close()
    for sig, handler in handlers.items():
        signal.signal(sig, handler)
    return status


def _probers(args) -> tuple:
    """(path prober, port prober), None for those not wanted or without raw sockets."""
    try:
        prober = None if args.no_probes else Prober("", args.probe_dscp)
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
    return prober, ports


if __name__ == "__main__":
    sys.exit(main())
