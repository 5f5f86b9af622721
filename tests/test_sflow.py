"""The sFlow v5 decoder and collector, on datagrams built here with struct (an encoder written
from the specification, independent of the decoder) and on datagrams captured from Open vSwitch
3.1's userspace datapath (tests/test_sflow_live.py checks them against live traffic)."""
import binascii
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.measurement.sflow import (
    PacketSample,
    SenderFilter,
    SflowCollector,
    SflowError,
    parse_datagram,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- an encoder from sflow_version_5.txt --------------------------------------------------------

def opaque(b: bytes) -> bytes:
    return struct.pack("!I", len(b)) + b + b"\0" * (-len(b) % 4)


def ipv4(src, dst, proto=6, sport=40000, dport=5201, frag=0, total=1500, ihl=5, cut=None):
    ip = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, total, 1, frag, 64, proto, 0,
                     socket.inet_aton(src), socket.inet_aton(dst)) + b"\0" * (4 * ihl - 20)
    l4 = struct.pack("!HH", sport, dport) + b"\0" * 16 if proto in (6, 17, 132) else b"\0" * 8
    pkt = ip + l4
    return pkt if cut is None else pkt[:cut]


def ethernet(payload, etype=0x0800, vlans=(), labels=()):
    head = b"\x02" * 6 + b"\x04" * 6
    for v in vlans:
        head += struct.pack("!HH", 0x8100, v)
    if labels:
        head += struct.pack("!H", 0x8847)
        for i, lab in enumerate(labels):
            head += struct.pack("!I", (lab << 12) | (0x100 if i == len(labels) - 1 else 0) | 64)
        return head + payload
    return head + struct.pack("!H", etype) + payload


def record(fmt, body):
    return struct.pack("!II", fmt, len(body)) + body


def raw_header(header, frame_length=1518, proto=1, stripped=4):
    return record(1, struct.pack("!III", proto, frame_length, stripped) + opaque(header))


def flow_sample(records, rate=32, source=(0, 7), inp=3, outp=4, pool=3200, drops=0, seq=1):
    body = struct.pack("!8I", seq, (source[0] << 24) | source[1], rate, pool, drops, inp, outp,
                       len(records)) + b"".join(records)
    return record(1, body)


def expanded_sample(records, rate=64, source=(0, 70000), inp=(0, 9), outp=(0, 10), pool=640):
    body = struct.pack("!11I", 1, source[0], source[1], rate, pool, 0, inp[0], inp[1], outp[0],
                       outp[1], len(records)) + b"".join(records)
    return record(3, body)


def counter_sample():
    generic = record(1, b"\0" * 88)  # if_counters
    return record(2, struct.pack("!III", 1, 7, 1) + generic)


def datagram(samples, agent="10.1.2.3", sub_agent=0, seq=1):
    if ":" in agent:
        addr = struct.pack("!I", 2) + socket.inet_pton(socket.AF_INET6, agent)
    else:
        addr = struct.pack("!I", 1) + socket.inet_aton(agent)
    return struct.pack("!I", 5) + addr + struct.pack("!4I", sub_agent, seq, 1000,
                                                     len(samples)) + b"".join(samples)


def tcp_datagram(src="10.0.0.1", dst="10.0.0.2", **kw):
    return datagram([flow_sample([raw_header(ethernet(ipv4(src, dst)))], **kw)])


# --- datagrams captured from Open vSwitch 3.1, userspace datapath --------------------------------
# h1 (10.0.0.1) - s1 - s2 - h2 (10.0.0.2), iperf3 h1 -> h2, sampling=32, s1 with agent=127.1.0.1,
# s2 with agent=10.255.0.2; between the bridges s1 pushes MPLS label 100, s2 label 200.
OVS_S1 = (
    "00000005000000017f0100010000000000000174000017700000000300000001000000d0000008ea020003e800"
    "00002000011d40000000000000002c0000002f00000002000003e9000000100000000000000000000000000000"
    "0000000000010000009000000001000005ee00000004000000800000000000020000000000010800450005dc50"
    "d140004006d0480a0000010a000002985c1451bf430331dd5283e780100053306500000101080aecae73031c6e"
    "9ec9ee726c95b16d7a7436a8730bd695115aad08c75e25bb56bed39ab2959a52596bbce9fe4d61a0fc07764b9e"
    "9d9237b8003b0d665a68a958a135eadc55102c00000001000000d0000008eb020003e80000002000011d600000"
    "00000000002c0000002f00000002000003e9000000100000000000000000000000000000000000000001000000"
    "9000000001000005ee00000004000000800000000000020000000000010800450005dc50ea40004006d02f0a00"
    "00010a000002985c1451bf439099dd5283e780100053df1900000101080aecae73031c6e9ec93b63adfdd68206"
    "cecc7f10c7859666545f6d6a060d4eb8d9c53af8f520fe35eb8f01c993131b353e7b4d87aa4c15fcf8186b530a"
    "f39a95ec84853fed725c0000000100000098000008ec020003e80000002000011d80000000000000002f000000"
    "2c00000002000003e900000010000000000000000000000000000000000000000100000058000000010000004b"
    "00000004000000470000000000010000000000028847000c814045000035eed94000400637e70a0000020a0000"
    "011451984eabae0380067eae5980180055192800000101080af0607b4f6f2850b60d11")
OVS_S2 = (
    "00000005000000010aff0002000000010000005500000bb80000000200000001000000d000000210020003e900"
    "00002000004200000000000000002e0000002d00000002000003e9000000100000000000000000000000000000"
    "0000000000010000009000000001000005f2000000040000008000000000000200000000000188470006414045"
    "0005dc8f734000400691a60a0000010a000002985c1451bbb82269dd5283e780100053b27000000101080aecae"
    "6a1b1c6e95ded40a5b91702474961d0769e0965961311131ca19cb32f3c4e926dd782db5f4ff6780bfae1e3954"
    "230ffd97579858ba7cc11119e365d30d5507b100000001000000d000000211020003e900000020000042200000"
    "00000000002e0000002d00000002000003e9000000100000000000000000000000000000000000000001000000"
    "9000000001000005f20000000400000080000000000002000000000001884700064140450005dc8f8b40004006"
    "918e0a0000010a000002985c1451bbb8aa29dd5283e780180053c0a500000101080aecae6a1b1c6e95ded63f81"
    "b2a2e6bfcb0598984943530e73baeedfdea3d79e6ebe8daba3dd1b7383590494b7d439c5b32700b87df6ebfb8b"
    "6d6c1b3b66b2c58cc15e")
OVS_IPV6_RS = (  # a router solicitation: not IPv4, dropped by the pipeline (no output ifIndex)
    "00000005000000017f0100010000000000000001000003e800000001000000010000009800000001020003e800"
    "00002000000020000000000000002c4000010000000002000003e9000000100000000000000000000000000000"
    "00000000000100000058000000010000004a000000040000004633330000000200000000000186dd6000000000"
    "103afffe80000000000000020000fffe000001ff02000000000000000000000000000285007b2c000000000101"
    "0000000000010000")


def test_open_vswitch_datagram_with_plain_and_mpls_samples():
    s = parse_datagram(binascii.unhexlify(OVS_S1))
    assert [(x.src, x.dst, x.proto, x.mpls) for x in s] == [
        ("10.0.0.1", "10.0.0.2", 6, ()), ("10.0.0.1", "10.0.0.2", 6, ()),
        ("10.0.0.2", "10.0.0.1", 6, (200,))]
    first = s[0]
    assert (first.agent, first.sub_agent, first.source_type, first.source_index) == \
        ("127.1.0.1", 0, 2, 1000)
    assert (first.sampling_rate, first.input_if, first.output_if) == (32, 44, 47)
    assert (first.sport, first.dport, first.frame_length) == (39004, 5201, 1518)
    assert first.estimated_bytes == 1518 * 32
    assert s[2].frame_length == 75 and (s[2].sport, s[2].dport) == (5201, 38990)


def test_open_vswitch_second_bridge_reports_its_own_agent_and_labels():
    s = parse_datagram(binascii.unhexlify(OVS_S2))
    assert {(x.agent, x.sub_agent, x.source_index, x.input_if, x.mpls, x.src, x.dst)
            for x in s} == {("10.255.0.2", 1, 1001, 46, (100,), "10.0.0.1", "10.0.0.2")}
    assert [x.frame_length for x in s] == [1522, 1522]  # 4 bytes of label on top of 1518


def test_open_vswitch_non_ipv4_sample_has_no_addresses():
    (s,) = parse_datagram(binascii.unhexlify(OVS_IPV6_RS))
    assert s.src is None and s.dst is None and s.output_if is None and s.input_if == 44


# --- built datagrams ----------------------------------------------------------------------------

def test_tcp_sample_fields():
    (s,) = parse_datagram(tcp_datagram(rate=64, inp=3, outp=4, source=(0, 7)))
    assert s == PacketSample(agent="10.1.2.3", sub_agent=0, source_type=0, source_index=7,
                             sampling_rate=64, sample_pool=3200, drops=0, input_if=3,
                             output_if=4, frame_length=1518, src="10.0.0.1", dst="10.0.0.2",
                             proto=6, sport=40000, dport=5201)


def test_vlan_and_mpls_stack_then_ipv4_udp():
    hdr = ethernet(ipv4("10.0.1.1", "10.0.2.1", proto=17, sport=4791, dport=4791),
                   vlans=(5,), labels=(16001, 16002))
    (s,) = parse_datagram(datagram([flow_sample([raw_header(hdr)])]))
    assert (s.vlan, s.mpls, s.src, s.dst, s.proto, s.sport, s.dport) == \
        (5, (16001, 16002), "10.0.1.1", "10.0.2.1", 17, 4791, 4791)


def test_expanded_sample_ipv6_agent_raw_ipv4_header_and_skipped_records_and_samples():
    unknown_record = record((4300 << 12) | 9, b"\x01" * 12)  # a vendor record before the header
    ext_switch = record(1001, b"\0" * 16)
    exp = expanded_sample([unknown_record, ext_switch,
                           raw_header(ipv4("192.168.0.9", "192.168.1.9", ihl=6), proto=11,
                                      frame_length=900)],
                          source=(0, 70000), inp=(0, 9), outp=(2, 3))
    vendor_sample = record((9 << 12) | 1, b"\0" * 20)
    d = datagram([counter_sample(), exp, vendor_sample, counter_sample()], agent="fd00::1",
                 sub_agent=3)
    (s,) = parse_datagram(d)
    assert (s.agent, s.sub_agent, s.source_index, s.input_if, s.output_if) == \
        ("fd00::1", 3, 70000, 9, None)
    assert (s.src, s.dst, s.sport, s.frame_length, s.sampling_rate) == \
        ("192.168.0.9", "192.168.1.9", 40000, 900, 64)


def test_header_cut_short_or_fragment_gives_what_it_can():
    cases = {  # header -> (src, sport)
        ethernet(ipv4("10.0.0.1", "10.0.0.2", cut=12)): (None, None),
        ethernet(ipv4("10.0.0.1", "10.0.0.2", cut=22)): ("10.0.0.1", None),
        ethernet(ipv4("10.0.0.1", "10.0.0.2", frag=5)): ("10.0.0.1", None),
        ethernet(ipv4("10.0.0.1", "10.0.0.2"), labels=(1, 2))[:20]: (None, None),
        ethernet(b"\x00" * 28, etype=0x0806): (None, None),  # ARP
        b"\x02" * 10: (None, None),
    }
    for hdr, want in cases.items():
        (s,) = parse_datagram(datagram([flow_sample([raw_header(hdr)])]))
        assert (s.src, s.sport) == want, hdr.hex()


def test_sample_without_header_record_and_counter_only_datagram_give_nothing():
    assert parse_datagram(datagram([flow_sample([record(1001, b"\0" * 16)])])) == []
    assert parse_datagram(datagram([counter_sample()])) == []
    assert parse_datagram(datagram([])) == []


@pytest.mark.parametrize("data, words", [
    (b"", "too short"),
    (struct.pack("!II", 4, 1) + b"\0" * 30, "version 4"),
    (struct.pack("!II", 5, 7) + b"\0" * 30, "agent address type 7"),
    (struct.pack("!II", 5, 1) + b"\0\0", "agent address"),
    (struct.pack("!II", 5, 1) + b"\0" * 16 + struct.pack("!I", 10 ** 9), "claims"),
    ("not bytes", "not str"),
])
def test_malformed_datagrams_are_named(data, words):
    with pytest.raises(SflowError, match=words):
        parse_datagram(data)


def test_lengths_that_lie_are_errors():
    hdr = ethernet(ipv4("10.0.0.1", "10.0.0.2"))
    bad_header_len = struct.pack("!III", 1, 1518, 4) + struct.pack("!I", 4000) + hdr
    with pytest.raises(SflowError, match="does not fit"):
        parse_datagram(datagram([flow_sample([record(1, bad_header_len)])]))
    too_many_records = flow_sample([raw_header(hdr)])
    too_many_records = too_many_records[:36] + struct.pack("!I", 50) + too_many_records[40:]
    with pytest.raises(SflowError, match="claims 50 records"):
        parse_datagram(datagram([too_many_records]))
    with pytest.raises(SflowError, match="too short"):
        parse_datagram(datagram([record(1, b"\0" * 12)]))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_cut_of_a_datagram_is_an_error(data):
    """A datagram cut anywhere before its end is malformed, and the only exception is
    SflowError."""
    d = datagram([counter_sample(), flow_sample([raw_header(ethernet(ipv4("10.0.0.1", "10.0.0.3"),
                                                                 labels=(9,)))]),
                  expanded_sample([raw_header(ipv4("10.0.0.2", "10.0.0.1"), proto=11)])])
    cut = data.draw(st.integers(0, len(d) - 1))
    with pytest.raises(SflowError):
        parse_datagram(d[:cut])


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=600), st.integers(0, 2000), st.binary(min_size=1, max_size=8))
def test_garbage_and_corruption_raise_only_sflow_error(noise, where, patch):
    """Random bytes, and a valid datagram with bytes overwritten anywhere: decoded or
    SflowError, never another exception, and never more samples than bytes allow."""
    d = bytearray(binascii.unhexlify(OVS_S1))
    at = where % len(d)
    d[at:at + len(patch)] = patch
    for blob in (noise, bytes(d), struct.pack("!II", 5, 1) + noise):
        try:
            out = parse_datagram(blob)
        except SflowError:
            continue
        assert len(out) <= len(blob) // 8


# --- IPv4 inside IPv6: srv6 mode's encapsulation, packets built with scapy ---------------------

def _srv6(*layers, inner=None, sport=40000, dport=5201, proto="tcp"):
    """Ethernet / IPv6 (the host's link address to a uSID container) / ``layers`` / IPv4
    10.0.0.1 -> 10.0.0.2 / TCP or UDP, as a host's agent encapsulates it."""
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether
    l4 = TCP(sport=sport, dport=dport) if proto == "tcp" else UDP(sport=sport, dport=dport)
    pkt = IPv6(src="fdfe::1", dst="fcbb:bbbb:3:4:2:e000::")
    for layer in layers:
        pkt = pkt / layer
    pkt = pkt / (inner if inner is not None else IP(src="10.0.0.1", dst="10.0.0.2") / l4)
    return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / pkt)


def _fields(header, proto=1):
    (s,) = parse_datagram(datagram([flow_sample([raw_header(header, proto=proto)])]))
    return s.src, s.dst, s.proto, s.sport, s.dport


def test_ipv4_inside_ipv6_is_attributed_to_the_inner_hosts():
    """A uSID container (next header 4, no SRH) and classic SIDs in an SRH (next header 43,
    routing type 4): the sample counts for the inner IPv4 pair and its ports."""
    from scapy.layers.inet6 import IPv6ExtHdrSegmentRouting
    container = _srv6()
    assert container[14 + 6] == 4
    assert _fields(container) == ("10.0.0.1", "10.0.0.2", 6, 40000, 5201)
    srh = _srv6(IPv6ExtHdrSegmentRouting(addresses=["fcbb:bbbb:3::", "fcbb:bbbb:4::",
                                                    "fcbb:bbbb:2:e000::"], segleft=2, nh=4))
    assert srh[14 + 6] == 43 and srh[14 + 40 + 2] == 4  # routing header, type 4
    assert _fields(srh) == ("10.0.0.1", "10.0.0.2", 6, 40000, 5201)
    udp = _srv6(proto="udp", sport=4791, dport=4791)
    assert _fields(udp) == ("10.0.0.1", "10.0.0.2", 17, 4791, 4791)


def test_ipv4_inside_ipv6_after_other_extension_headers_vlan_mpls_and_raw_ipv6():
    from scapy.layers.inet import IP, TCP
    from scapy.layers.inet6 import (
        IPv6ExtHdrDestOpt,
        IPv6ExtHdrFragment,
        IPv6ExtHdrHopByHop,
        IPv6ExtHdrSegmentRouting,
        PadN,
    )
    from scapy.layers.ipsec import AH
    want = ("10.0.0.1", "10.0.0.2", 6, 40000, 5201)
    chain = _srv6(IPv6ExtHdrHopByHop(nh=60, options=[PadN(optdata=b"\0" * 12)]),
                  IPv6ExtHdrDestOpt(nh=43),
                  IPv6ExtHdrSegmentRouting(addresses=["fcbb::1"], nh=44),
                  IPv6ExtHdrFragment(nh=51, offset=0, m=1),
                  AH(nh=4, payloadlen=4, spi=1, icv=b"\0" * 12))  # 24 bytes
    assert _fields(chain) == want
    # raw IPv6 header (header protocol 12), no Ethernet
    assert _fields(_srv6()[14:], proto=12) == want
    # behind an 802.1Q tag; behind an MPLS label (recognised by its version nibble)
    (s,) = parse_datagram(datagram([flow_sample([raw_header(
        ethernet(_srv6()[14:], etype=0x86DD, vlans=(7,)))])]))
    assert (s.vlan, s.src, s.dst, s.sport) == (7, "10.0.0.1", "10.0.0.2", 40000)
    (s,) = parse_datagram(datagram([flow_sample([raw_header(
        ethernet(_srv6()[14:], labels=(16005,)))])]))
    assert (s.mpls, s.src, s.dst, s.dport) == ((16005,), "10.0.0.1", "10.0.0.2", 5201)
    # a fragment after the first: its inner header is in the first, so no addresses
    later = _srv6(IPv6ExtHdrFragment(nh=4, offset=185), inner=b"\0" * 40)
    assert _fields(later) == (None,) * 5
    # the inner IPv4 is itself a fragment: addresses, no ports (as plain IPv4)
    frag = _srv6(inner=IP(src="10.0.0.1", dst="10.0.0.2", frag=100) / TCP())
    assert _fields(frag) == ("10.0.0.1", "10.0.0.2", 6, None, None)


def test_ipv6_carrying_no_ipv4_has_no_addresses_as_before():
    """Plain IPv6 (TCP, ICMPv6), IPv6 inside IPv6, ESP and an unknown next header: no
    addresses, as every IPv6 sample had before IPv4 in IPv6 was read (the learner ignores
    them); the VLAN and labels are still reported."""
    from scapy.layers.inet import TCP
    from scapy.layers.inet6 import ICMPv6EchoRequest, IPv6
    from scapy.layers.ipsec import ESP
    from scapy.layers.l2 import Ether
    plain = [bytes(Ether() / IPv6(src="fd00::1", dst="fd00::2") / TCP(sport=1, dport=2)),
             bytes(Ether() / IPv6() / ICMPv6EchoRequest()),
             _srv6(inner=IPv6(src="fd00::1", dst="fd00::2") / TCP()),
             _srv6(ESP(spi=7, data=b"\0" * 40), inner=b""),
             _srv6(inner=b"")[:14 + 6] + b"\xfd" + _srv6(inner=b"")[14 + 7:] + b"\0" * 40]
    for hdr in plain:
        assert _fields(hdr) == (None,) * 5, hdr.hex()
        assert _fields(hdr[14:], proto=12) == (None,) * 5, hdr.hex()
    (s,) = parse_datagram(datagram([flow_sample([raw_header(
        ethernet(plain[0][14:], etype=0x86DD, vlans=(9,)))])]))
    assert (s.vlan, s.src) == (9, None)
    (s,) = parse_datagram(binascii.unhexlify(OVS_IPV6_RS))
    assert s.src is None


def test_ipv4_inside_ipv6_cut_anywhere_gives_all_or_nothing_of_the_inner_header():
    """A header cut before the inner IPv4 addresses (a sampler's header length, 128 bytes by
    default, is shorter than an SRH of many SIDs): no addresses, never an error; cut after
    them, the addresses; after the ports, the ports too."""
    from scapy.layers.inet6 import IPv6ExtHdrSegmentRouting
    hdr = _srv6(IPv6ExtHdrSegmentRouting(addresses=[f"fcbb::{i}" for i in range(1, 6)], nh=4))
    inner = 14 + 40 + 8 + 16 * 5
    for cut in range(len(hdr) + 1):
        src, dst, _proto, sport, _dport = _fields(hdr[:cut])
        assert (src is not None) == (cut >= inner + 20), cut
        assert (sport is not None) == (cut >= inner + 24), cut


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120), st.sampled_from([0, 4, 6, 41, 43, 44, 51, 58, 60, 135]))
def test_ipv6_garbage_never_raises(payload, nh):
    """Any bytes after an IPv6 header of any next header: decoded, never an exception, and
    no address that is not the inner IPv4 header's."""
    head = _srv6(inner=b"")
    hdr = head[:14 + 6] + bytes([nh]) + head[14 + 7:] + payload
    for proto, h in ((1, hdr), (12, hdr[14:])):
        src, dst, *_ = _fields(h, proto=proto)
        if src is not None:
            assert payload.find(socket.inet_aton(src)) >= 0


# --- the collector ------------------------------------------------------------------------------

def _wait(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        time.sleep(0.02)


def test_collector_receives_decodes_counts_and_stops():
    got = []
    c = SflowCollector("127.0.0.1", 0, got.extend, poll_s=0.1).start()
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for i in range(20):
            tx.sendto(tcp_datagram(src=f"10.0.0.{i + 1}", seq=i), c.address)
        tx.sendto(b"\x00\x00\x00\x05garbage", c.address)
        tx.sendto(binascii.unhexlify(OVS_S1), c.address)
        _wait(lambda: c.datagrams == 22)
        assert c.stats() == {"datagrams": 22, "samples": 23, "errors": 1, "rejected": 0,
                             "callback_errors": 0}
        assert c.last_error == "unknown agent address type 1734439522"  # b"garb"
        assert [s.src for s in got].count("10.0.0.1") == 3  # one built, two from OVS
        assert {s.src for s in got} == {f"10.0.0.{i + 1}" for i in range(20)}
    finally:
        t0 = time.monotonic()
        assert c.stop(timeout=5)
        assert time.monotonic() - t0 < 2
        tx.close()
    # the port is free again
    again = SflowCollector("127.0.0.1", c.address[1], None).start()
    assert again.stop()


def test_datagrams_from_senders_that_are_not_known_agents_are_counted_and_dropped():
    """Real UDP from two loopback addresses: the switch's (127.0.0.1, where it connected
    from) is heard, a forger's (127.0.0.2) is counted, reported once and dropped."""
    got, rejected = [], []
    agents = SenderFilter("")
    agents.switch_at(("127.0.0.1", 40000))
    c = SflowCollector("127.0.0.1", 0, got.extend, poll_s=0.1, allow=agents,
                       on_rejected=rejected.append).start()
    switch = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    forger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    forger.bind(("127.0.0.2", 0))
    try:
        for i in range(3):
            forger.sendto(tcp_datagram(src="10.9.9.9", seq=i), c.address)
        switch.sendto(tcp_datagram(src="10.0.0.1", seq=9), c.address)
        _wait(lambda: c.datagrams == 1 and c.rejected == 3)
        assert {s.src for s in got} == {"10.0.0.1"}
        assert rejected == ["127.0.0.2"] * 3 and c.rejected_from == {"127.0.0.2"}
        assert c.stats()["rejected"] == 3 and c.stats()["samples"] == 1
    finally:
        assert c.stop(timeout=5)
        switch.close()
        forger.close()
    allow_list = SenderFilter("127.0.0.0/30")
    assert allow_list("127.0.0.2") and not allow_list("127.0.0.9") and not allow_list("x")


def test_failing_callback_is_counted_and_collector_goes_on():
    calls = []

    def boom(samples):
        calls.append(len(samples))
        raise RuntimeError("consumer bug")
    c = SflowCollector("127.0.0.1", 0, boom, poll_s=0.1).start()
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _ in range(3):
            tx.sendto(tcp_datagram(), c.address)
        _wait(lambda: c.datagrams == 3)
        assert c.callback_errors == 3 and calls == [1, 1, 1]
    finally:
        assert c.stop()
        tx.close()


def test_port_in_use_is_a_clear_error():
    a = SflowCollector("127.0.0.1", 0).start()
    try:
        with pytest.raises(OSError, match=f"cannot bind udp 127.0.0.1:{a.address[1]}"):
            SflowCollector("127.0.0.1", a.address[1]).start()
    finally:
        a.stop()


def test_stop_without_start_and_twice():
    c = SflowCollector("127.0.0.1", 0)
    assert c.stop() and c.stop()
    c.start()
    assert c.stop() and c.stop()


EVENTLET_SCRIPT = r"""
import eventlet
eventlet.monkey_patch()
import binascii, json, socket, sys, time
sys.path.insert(0, sys.argv[1])
from controller.measurement.sflow import SflowCollector
datagrams = [binascii.unhexlify(h) for h in json.load(sys.stdin)]
got = []
c = SflowCollector("127.0.0.1", 0, got.extend, poll_s=0.1).start()
tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
ticks = 0
for d in datagrams:
    tx.sendto(d, c.address)
deadline = time.monotonic() + 10
while c.datagrams < 10 and time.monotonic() < deadline:
    eventlet.sleep(0.05); ticks += 1
t0 = time.monotonic()
ended = c.stop(timeout=5)
print(json.dumps({"stats": c.stats(), "srcs": len({s.src for s in got}), "ended": ended,
                  "stop_s": time.monotonic() - t0, "ticks": ticks}))
"""


def test_collector_under_eventlet_monkey_patching():
    """As inside ryu-manager: green threads, green sockets."""
    pytest.importorskip("eventlet")
    built = [binascii.hexlify(tcp_datagram(src=f"10.0.0.{i + 1}")).decode() for i in range(10)]
    out = subprocess.run([sys.executable, "-c", EVENTLET_SCRIPT, REPO], capture_output=True,
                         text=True, timeout=60, cwd=REPO, input=json.dumps(built))
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["stats"]["datagrams"] == 10 and r["stats"]["samples"] == 10
    assert r["srcs"] == 10 and r["ended"] and r["stop_s"] < 2


def test_collector_feed_from_many_threads_counts_every_datagram():
    got = []
    lock = threading.Lock()

    def keep(samples):
        with lock:
            got.extend(samples)
    c = SflowCollector("127.0.0.1", 0, keep)
    d = tcp_datagram()
    threads = [threading.Thread(target=lambda: [c.feed(d) for _ in range(200)])
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(got) == 800 and c.stats()["datagrams"] == c.stats()["samples"] == 800


# --- the emulation's switches: sFlow settings (topologies/clos.py) ------------------------------

def test_topology_sflow_settings_checked_and_agent_names_the_switch(monkeypatch):
    from topologies import clos
    monkeypatch.delenv("MLROUTE_SFLOW_SAMPLING", raising=False)
    monkeypatch.delenv("MLROUTE_SFLOW_TARGET", raising=False)
    assert clos.sflow_sampling() == clos.SFLOW_SAMPLING == 16
    assert clos.sflow_sampling(0) == 0 and clos.sflow_sampling("64") == 64
    monkeypatch.setenv("MLROUTE_SFLOW_SAMPLING", "32")
    assert clos.sflow_sampling() == 32 and clos.sflow_sampling(8) == 8  # argument first
    for bad in ("x", "-1", "1.5", ""):
        monkeypatch.setenv("MLROUTE_SFLOW_SAMPLING", bad)
        if bad == "":  # unset: the default
            assert clos.sflow_sampling() == 16
            continue
        with pytest.raises(ValueError, match="MLROUTE_SFLOW_SAMPLING"):
            clos.sflow_sampling()
    assert clos.sflow_target() == "127.0.0.1:6343"
    monkeypatch.setenv("MLROUTE_SFLOW_TARGET", "127.0.0.1:16343")
    assert clos.sflow_target() == "127.0.0.1:16343"
    assert clos.sflow_target("127.0.0.1:6343, 127.0.0.1:6344") == "127.0.0.1:6343,127.0.0.1:6344"
    with pytest.raises(ValueError, match="several separated by commas"):
        clos.sflow_target("127.0.0.1:6343,127.0.0.1")
    for bad in ("localhost:6343", "127.0.0.1", "127.0.0.1:0", "1.2.3.300:5"):
        with pytest.raises(ValueError, match="IPv4:port"):
            clos.sflow_target(bad)
    f = clos.clos_fabric(2, 4, 1)
    agents = {sw: clos.sflow_agent(f.dpids[sw]) for sw in f.switches()}
    assert agents["s1"] == "127.1.0.1" and agents["l3"] == "127.2.0.3"
    assert len(set(agents.values())) == len(agents)
