"""Switch I/O for the service (its ``Installer``): connected datapaths, rules installed with a
barrier confirmation and error collection, table reads, packet-outs, host-mode probe batches,
multipart assembly and statistics requests. Framework-neutral: datapaths and messages are Ryu's
or os-ken's (same attribute names), messages are built by ``translate``, concurrency comes from
a ``Hub``.

Reply handlers (``on_*``) run on the framework's event loop and never block; the service's
calls (``install``, ``read_tables``, ``probe``) run off it and wait for those replies. Every
shared dict is guarded by one lock held only around dict operations (never across a send or a
wait), so this is safe under native threads (os-ken) and green threads (Ryu) alike.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from controller.enforcement.hostmode import parse_probe
from controller.enforcement.openflow import Message, SwitchState
from controller.enforcement.pacing import Pacer
from controller.errors import InstallError
from controller.shell import translate
from controller.shell.hub import Hub

LOG = logging.getLogger("mlroute")
# Stragglers: once the others of an install or a read have answered, a switch still silent
# is waited for STRAGGLER_WAIT seconds more plus the messages it was sent at STRAGGLER_RATE a
# second (or STRAGGLER_TIMES what the others took, if longer: ``straggler_wait``), then given
# up on, so that one switch does not hold the rest for the timeout; only while the silent
# ones are a minority (one in STRAGGLER_SHARE, one at least): a fabric whose switches are all
# slow is waited for up to the timeout. STRAGGLER_RATE is an assumed floor of the flow mods a
# healthy switch applies a second (hardware switches apply some hundreds to thousands, slow
# ASIC tables about 200: Kuzniar et al., "What you need to know about SDN flow tables", PAM
# 2015), so that a bigger batch is not taken for silence (issue 74: a switch sent 600 mods
# at 1,000 a second while the others got 20 was given up on after 0.56 s; it confirms at
# 1.66 s)
STRAGGLER_WAIT = 0.5
STRAGGLER_RATE = 200.0
STRAGGLER_TIMES = 4
STRAGGLER_SHARE = 8
STRAGGLER_HOLD = 0.05  # a table read's silent switches hold the others this long at least


def straggler_wait(sent: int, others_took: float) -> float:
    """Seconds a switch still silent once the others answered is waited for after them:
    ``STRAGGLER_WAIT`` plus the ``sent`` messages (flow and group mods, the barrier) at
    ``STRAGGLER_RATE`` a second, or ``STRAGGLER_TIMES`` what the others took
    (``others_took``), whichever is longer. 20 mods: 0.6 s; 600 mods: 3.5 s.

    >>> straggler_wait(0, 0.06), straggler_wait(600, 0.06), straggler_wait(0, 1.0)
    (0.5, 3.5, 4.0)
    """
    return max(STRAGGLER_WAIT + max(0, sent) / STRAGGLER_RATE, STRAGGLER_TIMES * others_took)


class Switches:
    PROBE_BATCH = 256

    def __init__(self, hub: Hub, timeout: float,
                 name: Callable[[int], str] = lambda dpid: f"{dpid:#x}"):
        self.hub = hub
        self.timeout = timeout  # seconds a switch has to answer (barrier, table read, probes)
        self.name = name  # dpid -> switch name for messages
        self.lock = threading.Lock()  # guards every table below and those given to send
        self._dps: dict = {}  # dpid -> datapath
        self._barriers: dict = {}  # (dpid, xid) -> (Event, its call's bell)
        self._reads: dict = {}  # (dpid, xid) of a table read -> (Event, entries, bell)
        self._cut: set = set()  # (dpid, xid) of barriers and reads ended by a disconnection
        self._errors: dict = {}  # dpid -> [(xid, text, table full)] while an install collects
        self._multipart: dict = {}  # (dpid, xid) -> parts received so far
        self._probe_wait = None  # (tokens awaited, arrivals, Event) of the current batch
        self._out: dict = {}  # dpid -> deque of (datapath, packet-out) for its sender
        self._sending: set = set()  # dpids whose sender is running

    # ---- datapaths -------------------------------------------------------------------------
    def connected(self, dp) -> None:
        """``dp`` is its dpid's connection from now on. One that replaces another (the switch
        reconnected before its old connection was declared dead) ends the old one's pending
        barriers and table reads at once, as failed: nothing answers them any more, and an
        install waiting for them held the change lock for the whole timeout."""
        with self.lock:
            old = self._dps.get(dp.id)
            self._dps[dp.id] = dp
            waits = self._cut_waits(dp.id) if old is not None and old is not dp else []
        _ring(waits)

    def disconnected(self, dp) -> bool:
        """Forget ``dp`` if it is still the connection of its dpid (True then). Its pending
        barriers and table reads end at once, as failed (``_cut``): an install that waited
        for a switch gone with its connection would hold the service for the whole timeout,
        and the disconnection with it (a switch lost with its links: every re-plan stalled)."""
        with self.lock:
            if dp.id is None or self._dps.get(dp.id) is not dp:
                return False
            del self._dps[dp.id]
            waits = self._cut_waits(dp.id)
        _ring(waits)
        return True

    def _cut_waits(self, dpid: int) -> list:
        """Mark the switch's unanswered barriers and table reads as cut (call with the lock
        held); returns their (Event, bell) for the caller to set once it let go of it."""
        waits = [(k, e, b) for k, (e, b) in self._barriers.items() if k[0] == dpid]
        waits += [(k, r[0], r[2]) for k, r in self._reads.items() if k[0] == dpid]
        waits = [w for w in waits if not w[1].is_set()]  # answered ones stand
        self._cut.update(k for k, _, _ in waits)
        return [(e, b) for _, e, b in waits]

    def holds(self, dp) -> bool:
        """Whether ``dp`` is still its dpid's connection (not gone, not replaced)."""
        with self.lock:
            return self._dps.get(dp.id) is dp

    def datapaths(self) -> list:
        with self.lock:
            return list(self._dps.values())

    def get(self, dpid: int):
        with self.lock:
            dp = self._dps.get(dpid)
        if dp is None:
            raise InstallError(f"switch {self.name(dpid)} is not connected")
        return dp

    def send(self, dp, msg, table: dict | None = None, value=None) -> int:
        """Give ``msg`` the datapath's next xid (registered in ``table`` before it leaves, so
        the reply always finds it), send it, return the xid."""
        with self.lock:  # set_xid is a read-modify-write of the datapath's counter
            dp.set_xid(msg)
            if table is not None:
                table[(dp.id, msg.xid)] = value
        dp.send_msg(msg)
        return msg.xid

    # ---- Installer ---------------------------------------------------------------------------
    def install(self, batches: dict[int, list[Message]]) -> None:
        """Send every batch, then one barrier per switch; raise InstallError naming the first
        switch that is not connected, did not confirm in time or rejected a message, and
        every such switch in its ``failed`` (the others were sent theirs and confirmed them;
        ``full``: those refused only for a full table). A straggler is given up on soon after
        the others confirmed (``_gather``), not at the timeout: the change lock is held
        meanwhile. Yields while it encodes (``pacing.Pacer``): REST answers meanwhile."""
        pending = []
        problems: dict[int, str] = {}  # dpid -> what went wrong there
        full: set[int] = set()
        pacer = Pacer(lambda: self.hub.sleep(0))  # encoding 1,000 flow mods took 60 ms
        bell = self.hub.Event()
        try:
            for dpid, msgs in batches.items():
                if not msgs:
                    continue
                try:
                    dp = self.get(dpid)
                except InstallError as e:  # it left: the others are still sent theirs
                    problems[dpid] = str(e)
                    continue
                with self.lock:
                    self._errors[dpid] = []
                xids = set()
                for m in msgs:
                    xids.add(self.send(dp, translate.encoded(dp, m)))
                    pacer.add(1)
                event = self.hub.Event()
                pending.append((dpid, xids, self.send(dp, translate.barrier(dp), self._barriers,
                                                      (event, bell)), event))
            # wait for every switch, so no barrier is left registered
            late = self._gather({p[0]: [p[3]] for p in pending}, bell,
                                time.monotonic() + self.timeout,
                                sent={dpid: len(batches[dpid]) + 1 for dpid, *_ in pending})
            for dpid, xids, xid, _event in pending:
                with self.lock:
                    failed = [(t, f) for x, t, f in self._errors.get(dpid, []) if x in xids]
                    cut = (dpid, xid) in self._cut
                if cut:
                    problems[dpid] = (f"switch {self.name(dpid)} disconnected before it "
                                      "confirmed its rules; nothing was changed")
                elif dpid in late:
                    problems[dpid] = (f"switch {self.name(dpid)} did not confirm its rules "
                                      f"within {late[dpid]}; nothing was changed")
                elif failed:
                    problems[dpid] = (f"switch {self.name(dpid)} rejected a rule ({failed[0][0]}); "
                                      "nothing was changed")
                    if all(f for _, f in failed):
                        full.add(dpid)
        finally:
            with self.lock:
                for dpid, _xids, xid, _event in pending:
                    self._barriers.pop((dpid, xid), None)
                    self._cut.discard((dpid, xid))
                for dpid in batches:
                    self._errors.pop(dpid, None)
        if problems:
            raise InstallError(next(iter(problems.values())), problems, full)

    def _gather(self, waits: dict[int, list], bell, deadline: float,
                done: Callable[[list[int]], None] | None = None,
                sent: dict[int, int] | None = None,
                straggling: Callable[[], None] | None = None) -> dict[int, str]:
        """Wait until every switch of ``waits`` (dpid -> the Events of its replies) has all
        its replies, calling ``done(dpids)`` with those that have as they come; ``bell`` is
        set at each reply. Returns the switches given up on, with how long they were waited
        for: silent at ``deadline``, or stragglers (``straggler_wait``: one switch that never
        answers held the 63 read with it for the whole timeout, issue 59), each waited for as
        its batch needs (``sent``: dpid -> messages sent to it, for the largest batch among
        those still silent; none: its replies' requests). ``straggling()`` is called while
        some are still silent once they were silent as long as the others took
        (``STRAGGLER_HOLD`` at least), stragglers or not."""
        start = time.monotonic()
        left, last = dict(waits), None  # last: when the latest switch completed
        while left:
            bell.clear()  # before the check: a reply after it rings again
            now = time.monotonic()
            complete = [d for d, events in left.items() if all(e.is_set() for e in events)]
            if complete:
                for dpid in complete:
                    del left[dpid]
                last = now
                if done is not None:
                    done(complete)
                continue
            until = deadline
            if last is not None and len(left) <= max(1, len(waits) // STRAGGLER_SHARE):
                most = max((sent or {}).get(d, len(left[d])) for d in left)
                until = min(deadline, last + straggler_wait(most, last - start))
            if last is not None and straggling is not None:  # silent as long as the others took
                hold = last + max(STRAGGLER_HOLD, last - start)
                if now >= hold:
                    straggling()
                else:
                    until = min(until, hold)
            if now >= until:
                break
            bell.wait(until - now)
        if not left:
            return {}
        if last is None or time.monotonic() >= deadline:
            return dict.fromkeys(left, f"{self.timeout:g} s")
        waited = f"{time.monotonic() - start:.2g} s, when the {len(waits) - len(left)} others had"
        return dict.fromkeys(left, waited)

    def read_tables(self, dpid: int) -> SwitchState:
        """The switch's flow entries and groups as neutral entries, so the reconciler can send
        only the difference."""
        got = self.read_many([dpid])[dpid]
        if isinstance(got, InstallError):
            raise got
        return got

    def read_many(self, dpids: list[int], ready: Callable[[dict], None] | None = None
                  ) -> dict[int, SwitchState | InstallError]:
        """``read_tables`` of several switches at once: every request is sent before any
        reply is waited for, so no switch waits for another's round trip (a fat-tree's 320
        switches read one after another took seconds). Per switch its state, or the
        InstallError that says why it could not be read. ``ready``: called with those read
        so far once the others were silent as long as they took (they are not returned
        again), so that a switch that does not answer holds none of them; a straggler is
        given up on soon after the others answered (``_gather``). Not each time some are
        read: a first start's repairs then came in 2-4 installs a batch, each waiting for
        its barriers under the service lock (issue 74)."""
        out: dict = {}
        waits: dict = {}  # dpid -> (datapath, [(xid, Event)])
        bell = self.hub.Event()

        def decode(complete: list[int]) -> None:
            out.update((d, self._state(d, *waits[d])) for d in complete)

        def straggling() -> None:  # the others answered: they go on without the stragglers
            if ready is not None and out:
                got = dict(out)
                out.clear()
                ready(got)
        try:
            for dpid in dpids:
                try:
                    dp = self.get(dpid)
                except InstallError as e:
                    out[dpid] = e
                    continue
                waits[dpid] = (dp, [])
                for req in translate.table_requests(dp):
                    event = self.hub.Event()
                    waits[dpid][1].append((self.send(dp, req, self._reads, (event, [], bell)),
                                           event))
            late = self._gather({d: [e for _, e in pairs] for d, (_, pairs) in waits.items()},
                                bell, time.monotonic() + self.timeout, decode,
                                straggling=straggling)
            for dpid, waited in late.items():
                out[dpid] = InstallError(f"switch {self.name(dpid)} did not send its tables "
                                         f"within {waited}")
        finally:
            with self.lock:
                for dpid, (_dp, pairs) in waits.items():
                    for xid, _ in pairs:
                        self._reads.pop((dpid, xid), None)
                        self._cut.discard((dpid, xid))
        return out

    def _state(self, dpid: int, dp, pairs: list) -> SwitchState | InstallError:
        """A switch's tables from the replies to its requests (``pairs``: xid, Event), all
        answered, or why not."""
        bodies = []
        with self.lock:
            for xid, _ in pairs:
                if (dpid, xid) in self._cut:
                    return InstallError(f"switch {self.name(dpid)} disconnected while its "
                                        "tables were read")
                bodies.append(list(self._reads[(dpid, xid)][1]))
        try:
            return translate.state_of(dp.ofproto, dpid, *bodies,
                                      pause=lambda: self.hub.sleep(0))
        except Exception as e:  # noqa: BLE001 - a reply not understood: named
            return InstallError(f"switch {self.name(dpid)} sent tables that could not be "
                                f"read: {e}")

    OUT_QUEUE = 8192  # packet-outs waiting per switch; older ones are dropped beyond

    def packet_out(self, dpid: int, port: int, frame: bytes) -> None:
        """Queue a packet-out for the switch's sender; never waits. A datapath's send queue
        is short (Ryu's holds 16 messages) and a full one blocks until it drains, while the
        caller may hold the service's lock (LLDP out of every port each second: 4,096 frames
        at the paper's scale), which REST requests wait for. One sender per switch: a stalled
        switch holds up only its own frames (LLDP and ARP, resent anyway)."""
        dp = self.get(dpid)
        msg = translate.packet_out(dp, port, frame)
        with self.lock:
            out = self._out.setdefault(dpid, deque(maxlen=self.OUT_QUEUE))
            out.append((dp, msg))
            start = dpid not in self._sending
            self._sending.add(dpid)
        if start:
            self._spawn_sender(dpid)

    def _spawn_sender(self, dpid: int) -> None:
        try:
            self.hub.spawn(self._send_out, dpid)
        except BaseException:
            with self.lock:
                self._sending.discard(dpid)
            raise

    def _send_out(self, dpid: int) -> None:
        """Send the switch's queued packet-outs in order until none is left (those of a
        connection that was replaced or closed are dropped)."""
        try:
            while True:
                with self.lock:
                    out = self._out.get(dpid)
                    if not out:
                        self._out.pop(dpid, None)
                        return
                    dp, msg = out.popleft()
                    current = self._dps.get(dpid) is dp
                if current:
                    try:
                        self.send(dp, msg)
                    except Exception as e:  # noqa: BLE001 - it just left: the next round
                        LOG.debug("mlroute: packet-out to %#x failed: %s", dpid, e)
        finally:
            with self.lock:
                self._sending.discard(dpid)
                again = bool(self._out.get(dpid))
                if again:
                    self._sending.add(dpid)
            if again:  # queued as this sender ended (or it was interrupted)
                self._spawn_sender(dpid)

    def probe(self, probes) -> dict:
        """Host mode: each probe as a packet-out into its leaf's tables (in_port the host's
        port, output TABLE), answered by the spine it reached (packet-in); returns token ->
        (spine dpid, in_port). Batches of 256, each waited for up to the timeout; lost probes
        are sent once more, then left out (the caller reports them)."""
        got: dict = {}
        todo = list(probes)
        for _attempt in range(2):
            lost = []
            for i in range(0, len(todo), self.PROBE_BATCH):
                batch = todo[i:i + self.PROBE_BATCH]
                event = self.hub.Event()
                with self.lock:
                    self._probe_wait = ({p.token for p in batch}, got, event)
                try:
                    for p in batch:
                        dp = self.get(p.dpid)
                        self.send(dp, translate.packet_out(dp, dp.ofproto.OFPP_TABLE, p.data,
                                                           in_port=p.in_port))
                    event.wait(self.timeout)
                finally:
                    with self.lock:
                        self._probe_wait = None
                with self.lock:
                    lost += [p for p in batch if p.token not in got]
            todo = lost
            if not todo:
                break
        return got

    def request_stats(self) -> None:
        """Ask every switch for port counters and the counters of the job rules."""
        for dp in self.datapaths():
            try:
                for req in translate.stats_requests(dp):
                    self.send(dp, req)
            except Exception as e:  # noqa: BLE001 - a switch that just left; next round
                LOG.debug("mlroute: stats request to %s failed: %s", self.name(dp.id), e)

    # ---- replies (on the event loop: never block) --------------------------------------------
    def on_barrier_reply(self, msg) -> None:
        with self.lock:
            wait = self._barriers.get((msg.datapath.id, msg.xid))
        if wait is not None:
            _ring([wait])

    def on_error(self, msg) -> None:
        ofp = msg.datapath.ofproto
        full = (msg.type == ofp.OFPET_FLOW_MOD_FAILED
                and msg.code == ofp.OFPFMFC_TABLE_FULL)  # Open vSwitch's flow_limit
        text = f"OpenFlow error type {msg.type} code {msg.code}" + (": table full" * full)
        LOG.error("mlroute: switch %s: %s (xid %s)", self.name(msg.datapath.id), text, msg.xid)
        with self.lock:
            errors = self._errors.get(msg.datapath.id)
            if errors is not None:
                errors.append((msg.xid, text, full))

    def on_multipart(self, msg) -> list | None:
        """A part of a multipart reply: a table read's parts go to its waiter (None is
        returned); others are assembled, and the whole body is returned with the last part."""
        key = (msg.datapath.id, msg.xid)
        last = not msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE
        with self.lock:
            read = self._reads.get(key)
            if read is not None:
                read[1].extend(msg.body)
            else:
                parts = self._multipart.setdefault(key, [])
                parts.extend(msg.body)
                if last:
                    return self._multipart.pop(key)
                return None
        if last:
            _ring([(read[0], read[2])])
        return None

    def probe_arrived(self, dpid: int, in_port: int, data: bytes) -> bool:
        """A probe's packet-in: note where it arrived. True for every probe, late ones too, so
        they never reach discovery."""
        h = parse_probe(data)
        if h is None:
            return False
        with self.lock:
            wait = self._probe_wait
            done = False
            if wait is not None and h["token"] in wait[0]:
                wait[1][h["token"]] = (dpid, in_port)
                wait[0].discard(h["token"])
                done = not wait[0]
        if done:
            wait[2].set()
        return True


def _ring(waits) -> None:
    """Set each (Event, bell): a reply came, or it never will."""
    for event, bell in waits:
        event.set()
        bell.set()
