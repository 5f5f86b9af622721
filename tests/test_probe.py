"""The agent's probes carry their class (``--probe-dscp``): outside in the IPv6 traffic class,
inside in the IPv4 TOS, and an answer along a way back keeps the request's; a DSCP that is
not 0 to 63 is refused with a message naming it."""
import ipaddress
import socket

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
