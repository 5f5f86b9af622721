"""The agent's path probes: an ICMP echo to a destination host, carried inside IPv6 to a uSID
container (what ``encap.red`` with one segment sends), so each probe crosses exactly the path
of its list. No rule or table is needed: the probe names its path itself.

The way back: a probe carries the container of its path reversed (``segments.back_container``,
the request's data: ``MAGIC`` and the 16-byte container), and the destination's agent answers
along it (``Prober.receive``, at most ``ANSWERS_PER_S`` a second, only into the fabric's
block). Why: the destination's kernel answers too, but by plain IPv4 over the routers' ECMP,
which knows of no failed link beyond a router's own ports; a reply hashed onto the failed
link is lost whichever list the probe took, and a flow's two ends would then see their
backups fail as well and never move. A probe answered proves its path both ways; where no
agent runs at the destination the kernel's answer still counts.

Why ICMP to the host and not to a SID: a router's SIDs do not answer pings, and the host's
answer proves the whole path including the decapsulation at its leaf.

Why three rates (``Schedule``), and the routes' ``rto_min`` of 35 ms (``steering``): a running
flow's receive gap on a link failure ends with TCP's first resend after the move. Linux
resends a lost tail after its probe timeout (about 2 round trips), then after its
retransmission timeout (its smoothed round trip and max(4 deviations, ``rto_min``)),
doubling each time: the move must come before a resend, and the resends come sooner with a
lower ``rto_min``. In the outage benchmark (``benchmarks/srv6.py``: the flow's round trip
about 31 ms at its queue, the move 65 to 90 ms after the failure) the longest gap was 150 to
225 ms with an ``rto_min`` of 50 ms (2 runs of 6 over 200 ms), 117 to 140 ms with 35 ms
(``ss``: a timeout of 68 to 72 ms). So the lists the parts use now (``active``) are probed
every ``FAST_S`` (10 ms) and fail after ``FAIL_PROBES`` unanswered probes of at least
max(``FAST_FAIL_S``, 2 smoothed round trips of that list, its smoothed round trip and 4 of
its deviations, as TCP's timeout) ago: 60 to 70 ms on idle lists, about 2 round trips on a
list whose queue delays its answers (a late answer counts: a queue answers late, not never;
the destination's kernel answers too, so a busy agent there delays nothing). Why 10 ms and
60 ms: a flow starting on a list fills its queue within a few round trips, and a list
judged by 30 ms failed at the start of the benchmark's flow (its round trip from 1 to 35
ms at once); probed every 10 ms, answers keep coming while a queue grows, and only a jump
of the queue by more than 60 ms at once looks like a failure (tests/test_agent_safety.py:
no false failure on a queue growing by 5 ms a millisecond up to 200 ms, where 3 x 30 ms with
90 ms failed, and 3 x 10 ms with 30 ms from 3 ms a millisecond; measured: no false move in
the outage benchmark's runs). Their
other lists (the backups, a failed primary coming back: ``standby``) every ``STANDBY_S``,
the other paths (the controller's link state) once every ``SLOW_S``. The bound: at most
``FAST_LISTS`` + ``STANDBY_PER_ROUND`` + ``SLOW_PER_ROUND`` probes a round, (16 + 8 + 3) /
0.01 s = 2,700 probes a second of 88 bytes (about 240 kB/s) whatever the document holds;
a host with a part or two (a ring's rank: its data and its acknowledgements) sends 130 to
270. Lists beyond a rate's cap are probed in turn (each less often, and fails as much later).

>>> len(echo("10.0.0.1", "10.0.1.1", 7, 1)), len(echo("10.0.0.1", "10.0.1.1", 7, 1, "fc::1"))
(36, 48)
>>> ip_checksum(echo("10.0.0.1", "10.0.1.1", 7, 1)[:20])  # a valid IPv4 header sums to 0
0
>>> request = echo("10.0.0.1", "10.0.1.1", 7, 1, "fcbb:bbbb:3:1:f001::")
>>> answer_of(request, ipaddress.IPv6Network("fcbb:bbbb::/32"))[0]  # its way back
'fcbb:bbbb:3:1:f001::'
>>> answer_of(request, ipaddress.IPv6Network("fc00::/16"))  # not into another block
"""
from __future__ import annotations

import ipaddress
import os
import select
import socket
import struct
import time

from controller.enforcement.probepacket import ip_checksum  # one IP checksum
from controller.enforcement.srv6_config import PROBE_DSCP

IPPROTO_IPIP = 4  # IPv4 inside IPv6, no SRH (one uSID container)
FAST_S = 0.01  # between probes of the lists the parts use (a round; BFD-like;
PERIOD_S = (0.01, 1.0)  # ``mlroute-agent --probe-period`` sets it within these bounds)
GATHER_S = 0.005  # a round reads its socket at most this often (one wake, every packet)
FAST_LISTS = 16  # such lists probed per round at most (round robin beyond)
STANDBY_S = 0.03  # between probes of the parts' other lists (backups; 3 rounds at least)
STANDBY_PER_ROUND = 8  # of those per round at most
SLOW_S = 1.0  # between probes of every other path
SLOW_PER_ROUND = 3  # other paths probed per round at most
FAST_FAIL_S = 0.06  # a list in use fails when its probes of this long ago still have no
FAIL_S = 0.5  # answer (another path: this long), FAIL_PROBES of them (a reply delayed
FAIL_PROBES = 3  # by a queue still counts), and at least 4 smoothed round trips
BACK_S = 1.0  # a failed path answering again for this long is used again
ICMP_ECHO, ICMP_REPLY = 8, 0
MAGIC = b"mlrB"  # a probe's data: MAGIC and the container of its way back
ANSWERS_PER_S = 5000  # the answers an agent sends along ways back, at most
SENT_KEEP_S = 5.0  # a probe unanswered this long is forgotten (its reply counts no more)
MAX_SENT = 8192  # probes awaited at most
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux's: when each packet came
TEMPLATES = 4096  # probe packets kept built (a list's, between its probes) at most


def echo(src: str, dst: str, ident: int, seq: int, back=None, kind: int = ICMP_ECHO,
         data: bytes | None = None, tos: int = 0) -> bytes:
    """An IPv4 packet holding an ICMP echo (request, or ``kind`` reply) with 8 bytes of data,
    or with ``MAGIC`` and the ``back`` container (20 bytes); ``tos``: its DSCP << 2 (the
    destination leaf forwards the inner packet by it, and the kernel's reply keeps it)."""
    if data is None:
        data = MAGIC + ipaddress.IPv6Address(back).packed if back is not None else b"mlroute!"
    icmp = struct.pack("!BBHHH", kind, 0, 0, ident, seq) + data
    icmp = icmp[:2] + struct.pack("!H", ip_checksum(icmp)) + icmp[4:]
    header = struct.pack("!BBHHHBBH4s4s", 0x45, tos, 20 + len(icmp), seq, 0, 64, 1, 0,
                         socket.inet_aton(src), socket.inet_aton(dst))
    header = header[:10] + struct.pack("!H", ip_checksum(header)) + header[12:]
    return header + icmp


def answer_of(packet: bytes, block) -> tuple[str, bytes] | None:
    """(the way back, the echo reply to send along it) for a probe request carrying its way
    back in ``block``; None for anything else (any host may send the raw socket anything)."""
    ihl = (packet[0] & 0x0F) * 4 if packet else 0
    if ihl < 20 or len(packet) < ihl + 8 + len(MAGIC) + 16 or packet[9] != 1:
        return None
    kind, _code, _sum, ident, seq = struct.unpack("!BBHHH", packet[ihl:ihl + 8])
    data = packet[ihl + 8:ihl + 8 + len(MAGIC) + 16]
    if kind != ICMP_ECHO or not data.startswith(MAGIC):
        return None
    back = data[len(MAGIC):]
    if block is None or int.from_bytes(back, "big") & int(block.netmask) != int(
            block.network_address):
        return None
    src, dst = socket.inet_ntoa(packet[12:16]), socket.inet_ntoa(packet[16:20])
    return (socket.inet_ntop(socket.AF_INET6, back),
            echo(dst, src, ident, seq, kind=ICMP_REPLY, data=data, tos=packet[1]))


def with_seq(template: bytes, seq: int) -> bytes:
    """``template`` (an ``echo`` of sequence number 0) with sequence number ``seq``, as IP id
    and ICMP sequence number, both checksums updated for it (RFC 1624: the word was 0, so
    the sum grows by ``seq``). O(1) in Python: no checksum of the whole packet again.

    >>> t = echo("10.0.0.1", "10.0.1.1", 7, 0, "fcbb:bbbb:3:1:f001::")
    >>> with_seq(t, 513) == echo("10.0.0.1", "10.0.1.1", 7, 513, "fcbb:bbbb:3:1:f001::")
    True
    """
    ip_sum, icmp_sum = struct.unpack_from("!H", template, 10)[0], struct.unpack_from(
        "!H", template, 22)[0]
    return b"".join((template[:4], struct.pack("!H", seq), template[6:10],
                     struct.pack("!H", _plus(ip_sum, seq)), template[12:22],
                     struct.pack("!H", _plus(icmp_sum, seq)), template[24:26],
                     struct.pack("!H", seq), template[28:]))


def _plus(checksum: int, value: int) -> int:
    """The Internet checksum after a 16-bit word that was 0 became ``value``."""
    total = (~checksum & 0xFFFF) + value
    total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


CMSG_SPACE = socket.CMSG_SPACE(16)  # one struct timespec


def heard(ancillary: list, offset: float) -> float:
    """When the kernel received a packet (its SO_TIMESTAMPNS, wall clock), on the monotonic
    clock (``offset``: wall clock minus monotonic now); now if the kernel gave no stamp."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = struct.unpack("@qq", data[:16])
            return min(sec + nsec * 1e-9 - offset, time.monotonic())
    return time.monotonic()


class Prober:
    """Raw sockets of one host: sends probes down uSID containers, hears the echo replies
    whenever they come (a queue under load delays them: late answers count). Probes and the
    answers it sends carry ``dscp`` outside (IPv6 traffic class) and inside (IPv4 TOS): the
    class the routers serve first (``srv6_config.PROBE_DSCP``), so that a queue of data does
    not delay them into a false failure."""

    def __init__(self, src_ip: str, dscp: int = PROBE_DSCP):
        self.src = src_ip
        self.tos = int(dscp) << 2
        self.block = None  # the fabric's uSID block: answers go along ways back inside it
        self.ident = os.getpid() & 0xFFFF
        self.seq = 0
        self.answers = (0.0, 0)  # (second, answers sent in it): ``ANSWERS_PER_S``
        self.tx = socket.socket(socket.AF_INET6, socket.SOCK_RAW, IPPROTO_IPIP)
        self.tx.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, self.tos)
        self.rx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        self.rx.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.rx.setblocking(False)  # drained each wake (``receive``)
        self.built: dict[tuple, bytes] = {}  # a list's probe packet, sequence number 0

    def close(self) -> None:
        self.tx.close()
        self.rx.close()

    def send(self, probes: list[tuple]) -> list[int]:
        """One probe per (uSID container, destination IPv4[, way back[, source IPv4]]) (the
        source: the host's address on the list's plane, else ``src``); their sequence
        numbers. Each list's packet is built once (``self.built``) and only its sequence
        number and checksums change between its probes (``with_seq``)."""
        seqs = []
        for container, dst, *more in probes:
            self.seq = (self.seq + 1) & 0xFFFF
            seqs.append(self.seq)
            back, src = (more + [None, None])[:2]
            key = (container, dst, back, src or self.src)
            template = self.built.get(key)
            if template is None:
                if len(self.built) >= TEMPLATES:
                    self.built.clear()
                template = self.built[key] = echo(key[3], dst, self.ident, 0, back,
                                                  tos=self.tos)
            try:
                self.tx.sendto(with_seq(template, self.seq), (str(container), 0))
            except OSError:
                pass  # no route: never answered
        return seqs

    def receive(self, until: float) -> list[tuple[int, float]]:
        """(sequence number, when heard) of the replies heard until ``until`` (monotonic);
        meanwhile the probes of other hosts' agents are answered along their ways back
        (module text). Why it wakes at most every ``GATHER_S``, reading every packet come
        meanwhile: a host in a busy exchange hears about 3 packets a millisecond (its probes'
        replies, the destination kernels' too, others' probes), and a wake per packet was
        most of the agent's CPU; the kernel stamps each packet as it comes (SO_TIMESTAMPNS),
        so a round trip still ends when its reply came, and an answer to another host waits
        at most ``GATHER_S`` (its list fails after 60 ms)."""
        got = self._drain()
        while (left := until - time.monotonic()) > 0:
            if not select.select([self.rx], [], [], left)[0]:
                break
            time.sleep(min(GATHER_S, max(0.0, until - time.monotonic())))
            got += self._drain()
        return got

    def _drain(self) -> list[tuple[int, float]]:
        """Every packet waiting on the socket, read without waiting: the replies (sequence
        number, when the kernel heard it, monotonic), and others' probes answered."""
        got, offset = [], time.time() - time.monotonic()
        while True:
            try:
                data, ancillary, _flags, _addr = self.rx.recvmsg(2048, CMSG_SPACE)
            except (BlockingIOError, InterruptedError):
                break
            ihl = (data[0] & 0x0F) * 4 if data else 0
            if len(data) < ihl + 8 or ihl < 20:
                continue  # not an echo reply: any host may send the raw socket anything
            kind, _code, _sum, ident, seq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
            if kind == ICMP_REPLY and ident == self.ident:
                got.append((seq, heard(ancillary, offset)))
            elif kind == ICMP_ECHO:
                self._answer(data)
        return got

    def _answer(self, request: bytes) -> None:
        answer = answer_of(request, self.block)
        second, sent = self.answers
        now = int(time.monotonic())
        if answer is None or (now == second and sent >= ANSWERS_PER_S):
            return
        self.answers = (now, sent + 1 if now == second else 1)
        try:
            self.tx.sendto(answer[1], (answer[0], 0))
        except OSError:
            pass  # no route back: the kernel's own answer may still come


class Schedule:
    """Which lists a round probes (the module text): every list the parts use, ``fast`` at
    most (in turn beyond); their other lists due (each once every ``STANDBY_S`` or 3 rounds
    if longer: a longer ``--probe-period`` slows them alike), ``standby``
    at most; and the other paths due (each once every ``SLOW_S``), ``slow`` at most.

    Why the lists' due times are rebuilt only when the lists given change (other objects:
    ``Lists`` keeps them per document): a round comes every ``FAST_S``, and rebuilding them
    each round cost O(lists) (0.8 ms a round for 4,096 other paths); kept in the order they
    fall due, a round reads only the ones it picks. O(fast + picked) a round.

    >>> s = Schedule()
    >>> s.pick(["a"], ["b"], ["c", "d"], 0.0), s.pick(["a"], ["b"], ["c", "d"], 0.01)
    (['a', 'b', 'c', 'd'], ['a'])
    >>> s.pick(["a"], ["b"], ["c", "d"], 0.03), s.pick(["b"], ["a"], ["c", "d"], 1.0)
    (['a', 'b'], ['b', 'a', 'c', 'd'])
    """

    def __init__(self, fast: int = FAST_LISTS, standby: int = STANDBY_PER_ROUND,
                 slow: int = SLOW_PER_ROUND, round_s: float = FAST_S):
        self.fast, self.most = fast, {"standby": standby, "slow": slow}
        self.round_s = round_s  # between rounds (``--probe-period``)
        self.every = {"standby": max(STANDBY_S, 3 * round_s), "slow": SLOW_S}
        self.turn = 0  # where the next round starts among the lists in use
        # list -> probed next, in the order they fall due (a new list: at once)
        self.due: dict[str, dict] = {"standby": {}, "slow": {}}
        self.given: tuple = ()  # the lists the due times were built for

    def pick(self, active: list, standby: list, others: list, now: float) -> list:
        n = len(active)
        if n > self.fast:
            start = self.turn % n
            fast = [active[(start + i) % n] for i in range(self.fast)]
            self.turn = start + self.fast
        else:
            fast = list(active)
        given = (active, standby, others)
        if len(self.given) != 3 or any(a is not b for a, b in zip(given, self.given)):
            self._rebuild(active, standby, others, now)
            self.given = given
        out = fast
        for kind, every in self.every.items():
            due, picked = self.due[kind], []
            for p, at in due.items():  # (half a round early: rounds do not fall on the
                if at > now + self.round_s / 2 or len(picked) >= self.most[kind]:  # exact time)
                    break
                picked.append(p)
            for p in picked:  # to the end: due last
                del due[p]
                due[p] = now + every
            out = out + picked
        return out

    def _rebuild(self, active: list, standby: list, others: list, now: float) -> None:
        """The due times of the lists given now: kept for the lists kept, ``now`` for new
        ones (first: due at once), none for the lists gone."""
        taken = set(active)
        for kind, paths in (("standby", standby), ("slow", others)):
            wanted = {p for p in paths if p not in taken}
            old = self.due[kind]
            self.due[kind] = {**{p: now for p in paths if p in wanted and p not in old},
                              **{p: at for p, at in old.items() if p in wanted}}
            taken |= wanted


class PathHealth:
    """Per segment list: when it last answered, how many probes went unanswered since and
    when the oldest of them left (not a list of them: a dead list costs no more memory the
    longer it is dead), its smoothed round trip and deviation, and since when it answers
    again. A list fails when ``FAIL_PROBES`` probes went unanswered and the oldest of them
    left ``fail_s`` ago, 2 of its smoothed round trips, and its smoothed round trip and 4
    deviations (a late reply still counts: a queue under load delays it, and only this
    list's answers tell how much; one list's queue does not slow another's judgement); a
    list probed seldom
    fails as slowly as it is probed. A list that never answered is unknown (neighbours still
    resolving at start): only a list that worked can fail. A list judged failed stays failed
    until it answers: a list that stops being in use (the controller re-planned around its
    link) is not judged working again by the slower wait of the other paths; that made the
    controller bring the link back, re-plan onto it, and take it down again, ten times a
    second.

    >>> h = PathHealth(); h.sent(("a",), 0.0); h.known(("a",))
    False
    >>> h.answered(("a",), 0.1)
    >>> for t in (0.2, 0.3, 0.4): h.sent(("a",), t)
    >>> h.ok(("a",), 0.6), h.ok(("a",), 0.8), h.ok(("a",), 0.6, fail_s=FAST_FAIL_S)  # in use
    (True, False, False)
    >>> h.answered(("q",), 0.0, 0.05); h.answered(("b",), 0.0, 0.001)  # a queue of 50 ms
    >>> for t in (0.0, 0.01, 0.02): h.sent(("q",), t); h.sent(("b",), t)
    >>> h.ok(("q",), 0.1, FAST_FAIL_S), h.ok(("b",), 0.1, FAST_FAIL_S)  # 2 x 50 ms, 30 ms
    (True, False)
    >>> h.ok(("a",), 0.8, fail_s=5.0)  # failed: not working again by a longer wait
    False
    >>> h.forget(set()); h.known(("a",)), h.unanswered, h.down
    (False, {}, set())
    """

    def __init__(self):
        self.last_ok: dict[tuple, float] = {}
        self.unanswered: dict[tuple, tuple[int, float]] = {}  # (count, oldest send time)
        self.ok_since: dict[tuple, float] = {}
        self.rtt: dict[tuple, tuple[float, float]] = {}  # (smoothed round trip, deviation)
        self.down: set[tuple] = set()  # judged failed, until they answer
        self.sent_ok: dict[tuple, float] = {}  # when the last probe answered was sent

    def sent(self, sids: tuple, now: float) -> None:
        count, oldest = self.unanswered.get(sids, (0, now))
        self.unanswered[sids] = (count + 1, oldest)
        if not self.ok(sids, now):
            self.ok_since.pop(sids, None)

    def answered(self, sids: tuple, now: float, rtt: float = 0.0) -> None:
        srtt, dev = self.rtt.get(sids, (rtt, rtt / 2))  # as TCP's (RFC 6298)
        self.rtt[sids] = (0.875 * srtt + 0.125 * rtt, 0.75 * dev + 0.25 * abs(srtt - rtt))
        if sids not in self.ok_since:
            self.ok_since[sids] = now
        self.last_ok[sids] = now
        self.sent_ok[sids] = max(now - rtt, self.sent_ok.get(sids, now - rtt))
        self.unanswered.pop(sids, None)
        self.down.discard(sids)

    def known(self, sids: tuple) -> bool:
        return sids in self.last_ok

    def ok(self, sids: tuple, now: float, fail_s: float = FAIL_S) -> bool:
        if sids in self.down or sids not in self.last_ok:
            return False
        count, oldest = self.unanswered.get(sids, (0, now))
        srtt, dev = self.rtt.get(sids, (0.0, 0.0))  # a loaded queue answers late, not never
        wait = max(fail_s, 2 * srtt, srtt + 4 * dev)
        if count >= FAIL_PROBES and now - oldest > wait:
            self.down.add(sids)
            return False
        return True

    def silent(self, sids: tuple, now: float) -> float:
        """How long the list's oldest unanswered probe has waited (0: none waits)."""
        return now - self.since(sids, now)

    def since(self, sids: tuple, now: float) -> float:
        """When the list's oldest unanswered probe left (``now``: none waits)."""
        return self.unanswered.get(sids, (0, now))[1]

    def answered_since(self, sids: tuple, t: float) -> bool:
        """Whether a probe of the list sent at ``t`` or later was answered."""
        return self.sent_ok.get(sids, -1e18) >= t

    def back(self, sids: tuple, now: float, fail_s: float = FAIL_S) -> bool:
        return self.ok(sids, now, fail_s) and now - self.ok_since.get(sids, now) >= BACK_S

    def forget(self, keep: set) -> None:
        """Drop every list not in ``keep`` (no longer probed)."""
        for d in (self.last_ok, self.unanswered, self.ok_since, self.rtt, self.sent_ok):
            for sids in [x for x in d if x not in keep]:
                del d[sids]
        self.down &= keep


def verdicts(health: PathHealth, probes: list, fast: set, now: float) -> list[dict]:
    """What a report says of the paths probed ({"path", "ok"}; the lists in ``fast`` judged
    as lists in use). A path to a leaf where another path failed is left out until a probe of
    it sent since that failure began answers, or it fails too: a host whose own port went
    down fails its lists one by one (at different rates), and one failed and one working
    would blame the fabric's links for the host's port. O(probes).

    >>> from controller.agent.steering import Probe
    >>> a, b = Probe(("l0", "s0", "l1"), None, ("a",)), Probe(("l0", "s1", "l1"), None, ("b",))
    >>> h = PathHealth()
    >>> h.answered(("a",), 0.0); h.answered(("b",), 0.0)
    >>> for t in (0.01, 0.02, 0.03): h.sent(("a",), t)
    >>> [v["ok"] for v in verdicts(h, [a, b], {("a",), ("b",)}, 0.1)]  # b not heard since
    [False]
    >>> h.sent(("b",), 0.04); h.answered(("b",), 0.041, 0.001)
    >>> [v["ok"] for v in verdicts(h, [a, b], {("a",), ("b",)}, 0.1)]
    [False, True]
    """
    judged = [(p, health.ok(p.sids, now, FAST_FAIL_S if p.sids in fast else FAIL_S))
              for p in probes if len(p.path) > 1 and health.known(p.sids)]
    silent: dict[str, float] = {}  # destination leaf -> when its first failed path fell silent
    for p, ok in judged:
        if not ok:
            silent[p.path[-1]] = min(silent.get(p.path[-1], now), health.since(p.sids, now))
    return [{"path": list(p.path), "ok": ok} for p, ok in judged
            if not ok or p.path[-1] not in silent
            or health.answered_since(p.sids, silent[p.path[-1]])]


class Lists:
    """A document's lists as the probe rounds read them, built once per document (a round
    comes every ``FAST_S``; the document seldom): each list's destination, way back and
    source (``sources``), every list a part may use (``steered``, uSID ones: a probe rides
    one container; judged as lists in use), the parts with a backup (``backed``: (primary,
    backup)) and the other paths (``others``). O(parts + probes) per document; ``split``
    O(parts) when the failed primaries change, else O(failed).

    >>> from controller.agent.steering import Probe, Steer
    >>> s = Steer(("10.0.1.1", 6, 0, 0), "encap.red", ("p",), ("b",), "encap.red", plane=1)
    >>> lists = Lists([s], [Probe(("l0", "s0", "l1"), "10.0.1.2", ("o",))], {1: "10.16.0.1"})
    >>> lists.split(frozenset()), lists.split(frozenset({("p",)})), lists.others
    (([('p',)], [('b',)]), ([('b',)], [('p',)]), [('o',)])
    >>> lists.src_of, lists.dst_of[("o",)]
    ({('p',): '10.16.0.1', ('b',): '10.16.0.1'}, '10.0.1.2')
    """

    def __init__(self, steers: list, probes: list, ips: dict):
        dst_of, back_of = {}, {}
        for s in steers:
            if s.encap == "encap.red":
                dst_of[s.sids], back_of[s.sids] = s.match[0], s.back
            if s.backup and s.backup_encap == "encap.red":
                dst_of[s.backup], back_of[s.backup] = s.match[0], s.backup_back
        self.steered = list(dst_of)
        self.steered_set = frozenset(dst_of)
        self.pairs = [(s.sids, s.backup) for s in steers]
        self.backed = [(s.sids, s.backup) for s in steers if s.backup]
        for p in probes:
            dst_of.setdefault(p.sids, p.dst)
            back_of.setdefault(p.sids, p.back)
        self.dst_of, self.back_of, self.probes = dst_of, back_of, list(probes)
        self.others = list(dict.fromkeys(p.sids for p in probes))
        self.src_of = sources(steers, probes, ips)  # plane 0's: the prober's own source
        self._split: tuple = (None, [], [])  # (failed, active, standby) last split

    def split(self, failed: frozenset) -> tuple[list, list]:
        """(the lists the parts use now: the primary, its backup once the primary failed;
        the parts' other lists (``standby``)), given the failed primaries."""
        if failed != self._split[0]:
            used = (b if b and p in failed else p for p, b in self.pairs)
            active = [x for x in dict.fromkeys(used) if x in self.steered_set]
            taken = set(active)
            self._split = (failed, active, [x for x in self.steered if x not in taken])
        return self._split[1], self._split[2]


def sources(steers: list, probes: list, ips: dict) -> dict:
    """List -> the host's address on its plane (``ips``: plane -> address), for lists off
    plane 0: a leaf's source check passes only the host's address on its own plane. A plane
    the document names no address of is left out (its lists go from plane 0's)."""
    out = {}
    for s in steers:
        if s.plane > 0 and s.plane in ips:
            out[s.sids] = ips[s.plane]
            if s.backup:
                out[s.backup] = ips[s.plane]
    for p in probes:
        if p.plane > 0 and p.plane in ips:
            out.setdefault(p.sids, ips[p.plane])
    return out


def forget_old(sent: dict, now: float) -> None:
    """Probes (sequence number -> (list, when sent)) unanswered for ``SENT_KEEP_S``, or
    beyond ``MAX_SENT``, forgotten (oldest first: the dict keeps the order of sending)."""
    while sent:
        seq, (_sids, at) = next(iter(sent.items()))
        if now - at <= SENT_KEEP_S and len(sent) <= MAX_SENT:
            break
        del sent[seq]
