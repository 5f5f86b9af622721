"""The agent's probes carry their class (``--probe-dscp``): outside in the IPv6 traffic class,
inside in the IPv4 TOS, and an answer along a way back keeps the request's; a DSCP that is
not 0 to 63 is refused with a message naming it. A document's lists (``probe.Lists``) are
built once per document, not each 10 ms round, and each plane's lists go from the host's
address on that plane, keyed by plane."""
import ipaddress
import select
import socket
import struct
import time

import pytest

from controller.agent import probe
from controller.enforcement.srv6_config import PROBE_DSCP, priority_tc
from controller.errors import InputError


def test_a_probe_and_its_answer_carry_the_class_inside():
    request = probe.echo("10.0.0.1", "10.0.1.1", 7, 3, "fcbb:bbbb:3:1:f001::", tos=48 << 2)
    assert request[1] == 0xC0
    back, answer = probe.answer_of(request, ipaddress.IPv6Network("fcbb:bbbb::/32"))
    assert answer[1] == 0xC0 and probe.ip_checksum(answer[:20]) == 0
    assert probe.echo("10.0.0.1", "10.0.1.1", 7, 3)[1] == 0  # unmarked unless told


class FakeSocket:
    made: list = []

    def __init__(self, family, kind, proto):
        self.family, self.opts, self.sent = family, {}, []
        FakeSocket.made.append(self)

    def setsockopt(self, level, name, value):
        self.opts[(level, name)] = value

    def sendto(self, packet, addr):
        self.sent.append((packet, addr))

    def setblocking(self, flag):
        self.opts["blocking"] = flag

    def close(self):
        pass


@pytest.mark.parametrize("dscp", [PROBE_DSCP, 46, 0])
def test_the_prober_marks_outside_and_inside(monkeypatch, dscp):
    FakeSocket.made = []
    monkeypatch.setattr(probe.socket, "socket", FakeSocket)
    p = probe.Prober("10.0.0.1", dscp)
    p.send([("fcbb:bbbb:3:1:f001::", "10.0.1.1", "fcbb:bbbb:1:3:f001::")])
    tx = next(s for s in FakeSocket.made if s.family == socket.AF_INET6)
    assert tx.opts[(socket.IPPROTO_IPV6, socket.IPV6_TCLASS)] == dscp << 2
    assert tx.sent[0][0][1] == dscp << 2


def test_the_routers_priority_matches_the_probes_class():
    lines = priority_tc("s0-eth1", PROBE_DSCP, 20, 500_000)
    assert any("match ip6 priority 0xc0 0xfc flowid 5:10" in x for x in lines)
    assert any("match ip tos 0xc0 0xfc flowid 5:10" in x for x in lines)
    assert "bfifo limit 500000" in lines[-3]
    with pytest.raises(InputError, match="a DSCP is 0 to 63, not 64"):
        priority_tc("s0-eth1", 64)


def test_a_documents_lists_are_built_once_per_document_not_each_round(monkeypatch):
    """The probe loop runs every 10 ms: the lists, their sources (``probe.sources``) and
    what ``PathHealth`` forgets are a document's, built when one arrives, not each round."""
    import threading

    from tests.test_agent_hostports import wait_for
    from tests.test_agent_safety import P1, P2, FakeKernel, FakeProber, agent_on, document
    built, forgot, rounds = [], [], []
    real_sources, real_forget = probe.sources, probe.PathHealth.forget
    monkeypatch.setattr(probe, "sources", lambda *a: built.append(1) or real_sources(*a))
    monkeypatch.setattr(probe.PathHealth, "forget",
                        lambda self, keep: forgot.append(set(keep)) or real_forget(self, keep))
    two = document("e:2", flows=[document()["flows"][0]])  # one part less
    agent = agent_on(FakeKernel(), [document(), two])
    built.clear()  # (the agent's empty lists before any document)
    agent.step(wait=0)
    prober = FakeProber({P1, P2})
    send = prober.send
    prober.send = lambda probes: rounds.append(len(probes)) or send(probes)
    loop = threading.Thread(target=agent.probe_loop, args=(prober,), daemon=True)
    loop.start()
    try:
        assert wait_for(lambda: len(rounds) >= 10)
        assert len(built) == 1 and len(forgot) == 1  # the first document's, once
        agent.step(wait=0)
        seen = len(rounds)
        assert wait_for(lambda: len(rounds) >= seen + 10)
        assert len(built) == 2 and len(forgot) == 2  # and the second's, once
        assert forgot[-1] == {(ipaddress.IPv6Address(P1),), (ipaddress.IPv6Address(P2),)}
    finally:
        agent.stopping.set()
        loop.join(3)
    assert not loop.is_alive()


def test_an_answer_to_a_list_of_an_older_document_is_not_kept(monkeypatch):
    """A reply that comes after its list left the document is no list's health: the loop
    judges the lists of the document it holds only (forgotten once per document)."""
    import threading

    from controller.agent import main as agent_main
    from tests.test_agent_hostports import wait_for
    from tests.test_agent_safety import P1, P2, FakeKernel, FakeProber, agent_on, document
    health = []
    monkeypatch.setattr(agent_main, "PathHealth", lambda: health.append(probe.PathHealth())
                        or health[-1])
    only_p2 = {"path": ["l0", "s1", "l1"], "dst_ip": "10.0.1.1", "form": "usid", "sids": [P2]}
    two = document("e:2", flows=[{"dst_ip": "10.0.1.1", "form": "usid", "sids": [P2]}],
                   probes=[only_p2])
    agent = agent_on(FakeKernel(), [document(), two])
    agent.step(wait=0)
    prober, p1 = FakeProber({P1, P2}), []
    send, receive = prober.send, prober.receive

    def sending(probes):
        seqs = send(probes)
        p1.extend(s for s, x in zip(seqs, probes) if x[0] == P1)
        return seqs

    def late(until):  # P1's answers keep coming after the document without it
        got = receive(until)
        return got if agent.version == "e:1" else got + [(s, time.monotonic()) for s in p1]
    prober.send, prober.receive = sending, late
    loop = threading.Thread(target=agent.probe_loop, args=(prober,), daemon=True)
    loop.start()
    try:
        p1_list = (ipaddress.IPv6Address(P1),)
        assert wait_for(lambda: health and p1_list in health[0].last_ok)
        agent.step(wait=0)
        time.sleep(0.1)  # ten rounds with P1's late answers
        assert p1_list not in health[0].last_ok and p1_list not in health[0].rtt
        assert (ipaddress.IPv6Address(P2),) in health[0].last_ok
    finally:
        agent.stopping.set()
        loop.join(3)


def test_every_noqa_in_the_agent_silences_a_finding():
    """A ``noqa`` that silences nothing misleads its reader (one in probe.py called an import
    unused that the prober's default uses); ruff's RUF100 finds them."""
    import os
    import subprocess
    import sys
    ruff = os.path.join(os.path.dirname(sys.executable), "ruff")
    if not os.path.exists(ruff):
        pytest.skip("ruff is not installed beside this Python")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run([ruff, "check", "--extend-select", "RUF100", "--output-format",
                        "concise", "controller/agent"], cwd=repo, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_agents_plane_addresses_are_keyed_by_plane():
    """A plane without an address of the host (null or "" in ``addresses``) shifts no other
    plane's: plane 2's lists go from plane 2's address, plane 1's from plane 0's, with a
    note; the traffic reports' sources are the addresses given."""
    from controller.agent import steering
    flows = [{"dst_ip": f"10.{16 * q}.1.1", "form": "usid", "sids": [f"fcbb:bbbb:{q + 6}:8::"],
              "plane": q} for q in (1, 2)]
    for empty in (None, ""):
        read = steering.read({"src_ip": "10.0.0.1", "flows": flows,
                              "addresses": ["10.0.0.1", empty, "10.32.0.1"]})
        assert read.plane_ips == {0: "10.0.0.1", 2: "10.32.0.1"}
        src = probe.sources(read.steers, read.probes, read.plane_ips)
        assert src == {read.steers[1].sids: "10.32.0.1"}  # plane 1's: none (plane 0's)
        assert read.addresses == {"10.0.0.1", "10.32.0.1"}
        assert any("no address of this host on plane(s) 1" in n for n in read.notes)
    assert steering.read({"src_ip": "10.0.0.1", "flows": []}).plane_ips == {0: "10.0.0.1"}


def test_a_rounds_schedule_reads_the_lists_only_when_they_change():
    """Each round (10 ms) picks from the lists ``probe.Lists`` keeps per document: the due
    times are rebuilt when other lists come, not each round; the rate stays what it was."""
    class Counted(list):
        reads = 0

        def __iter__(self):
            Counted.reads += 1
            return super().__iter__()
    others = Counted([(i,) for i in range(100)])
    s, active, standby = probe.Schedule(), [("a",)], [("b",)]
    rounds = [s.pick(active, standby, others, i * probe.FAST_S) for i in range(100)]
    assert Counted.reads <= 2  # once per set of lists (each round before)
    slow = [x for r in rounds for x in r if x in others]
    assert sorted(slow) == sorted(others) and len(slow) == 100  # each once a second
    assert max(len([x for x in r if x in others]) for r in rounds) == probe.SLOW_PER_ROUND
    assert sum(("b",) in r for r in rounds) == 34  # every 30 ms
    new = others + [("new",)]  # the next document: one path more
    assert s.pick(active, standby, new, 1.0) == [("a",), ("new",), (0,), (1,)]  # new first


def test_a_lists_probe_is_built_once_and_only_its_number_changes(monkeypatch):
    """A round comes every 10 ms: each list's packet is built once (``Prober.built``), and
    each probe of it differs only in its sequence number and checksums, every one valid."""
    FakeSocket.made = []
    monkeypatch.setattr(probe.socket, "socket", FakeSocket)
    built, real = [], probe.echo
    monkeypatch.setattr(probe, "echo", lambda *a, **k: built.append(a) or real(*a, **k))
    p = probe.Prober("10.0.0.1")
    lists = [("fcbb:bbbb:3:1:f001::", "10.0.1.1", "fcbb:bbbb:1:3:f001::"),
             ("fcbb:bbbb:4:1:f001::", "10.0.1.1", "fcbb:bbbb:1:4:f001::", "10.16.0.1")]
    p.seq = 0xFFFD  # across the wrap of the sequence number
    seqs = [s for _ in range(4) for s in p.send(lists)]
    assert len(built) == 2 and seqs[:3] == [0xFFFE, 0xFFFF, 0]
    tx = next(s for s in FakeSocket.made if s.family == socket.AF_INET6)
    for (packet, addr), seq, (container, dst, back, *src) in zip(
            tx.sent, seqs, lists * 4):
        assert addr == (container, 0)
        assert packet == real((src or ["10.0.0.1"])[0], dst, p.ident, seq, back, tos=p.tos)
        assert probe.ip_checksum(packet[:20]) == 0 and probe.ip_checksum(packet[20:]) == 0
    for seq in range(0, 0x10000, 7):  # every sum the update can give stays valid
        packet = probe.with_seq(real("10.255.255.255", "10.0.0.1", 0xFFFF, 0), seq)
        assert probe.ip_checksum(packet[:20]) == 0 and probe.ip_checksum(packet[20:]) == 0


class ArrivingRx:
    """A raw socket a packet arrives on every 0.2 ms, each stamped by the kernel when it came
    (``SO_TIMESTAMPNS``): half of them echo replies to ``ident``, half others' probes."""

    def __init__(self, ident, start):
        self.ident, self.start, self.taken, self.wakes = ident, start, 0, 0

    def _due(self):
        return int((time.monotonic() - self.start) / 0.0002)

    def recvmsg(self, n, ancillary):
        if self.taken >= self._due():
            raise BlockingIOError
        seq, self.taken = self.taken, self.taken + 1
        came = self.start + seq * 0.0002 + (time.time() - time.monotonic())
        stamp = struct.pack("@qq", int(came), int(came % 1 * 1e9))
        kind = probe.ICMP_REPLY if seq % 2 == 0 else probe.ICMP_ECHO
        packet = probe.echo("10.0.1.1", "10.0.0.1", self.ident, seq, kind=kind)
        return packet, [(socket.SOL_SOCKET, probe.SO_TIMESTAMPNS, stamp)], 0, None


def test_a_round_wakes_seldom_and_a_reply_is_heard_when_it_came(monkeypatch):
    """A busy host hears a packet every 0.2 ms here: a round reads them all, waking at most
    every ``GATHER_S`` (not once a packet), and each reply's time is when the kernel got it,
    not when the round read it."""
    p = probe.Prober.__new__(probe.Prober)
    p.ident, p.block, p.answers = 7, None, (0.0, 0)
    start = time.monotonic()
    p.rx = ArrivingRx(7, start)
    real = select.select

    def woken(r, w, x, t):
        p.rx.wakes += 1
        real([], [], [], min(t, 0.0002))  # the next packet comes
        return r, [], []
    monkeypatch.setattr(probe.select, "select", woken)
    got = p.receive(start + 0.05)
    assert p.rx.taken >= 200 and len(got) >= 100  # 250 came, half of them replies
    assert p.rx.wakes <= 0.05 / probe.GATHER_S + 2
    for seq, heard in got:
        assert abs(heard - (start + seq * 0.0002)) < 0.001, (seq, heard - start)
