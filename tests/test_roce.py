"""The RoCE-like transport: wire format against scapy's RoCEv2 layers, the RC-like state
machines (window, ACK/NAK, go-back-N, retransmission timeout, counters) without a network, and
two agents on loopback sockets."""
import json
import random
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emulation.harness.roce import (
    ACKNOWLEDGE,
    PSN_MASK,
    SEND_FIRST,
    SEND_LAST,
    SEND_MIDDLE,
    SEND_ONLY,
    SYNDROME_ACK,
    SYNDROME_NAK_PSN,
    Requester,
    Responder,
    ack_packet,
    data_packet,
    icrc_ok,
    parse,
    run_agent,
    unwrap,
)

SRC, DST = "10.0.0.1", "10.0.1.1"


def scapy_udp_payload(layer, sport, src=SRC, dst=DST):
    """What scapy puts after the UDP header of the same packet (it computes the ICRC itself)."""
    from scapy.layers.inet import IP, UDP
    pkt = IP(src=src, dst=dst, id=0, flags="DF", ttl=64) / UDP(sport=sport, dport=4791) / layer
    return bytes(IP(bytes(pkt))[UDP].payload)


def test_data_packet_matches_scapy_roce():
    from scapy.contrib.roce import BTH, opcode
    ours = data_packet(SRC, DST, 49152, SEND_LAST, 0x1234, 77, 10, ackreq=True)
    ref = scapy_udp_payload(BTH(opcode=opcode("RC", "SEND_LAST")[0], dqpn=0x1234, psn=77, ackreq=1,
                                padcount=2) / (b"\0" * 12), 49152)
    assert ours == ref
    from scapy.layers.inet import UDP
    seen = UDP(sport=49152, dport=4791) / ours
    bth = UDP(bytes(seen))[BTH]
    assert (bth.opcode, bth.dqpn, bth.psn, bth.ackreq, bth.padcount) == (2, 0x1234, 77, 1, 2)


def test_ack_and_nak_match_scapy_aeth():
    from scapy.contrib.roce import AETH, BTH
    for syndrome in (SYNDROME_ACK, SYNDROME_NAK_PSN):
        ours = ack_packet(DST, SRC, 49152, 0x22, 5, syndrome, 3)
        ref = scapy_udp_payload(BTH(opcode=ACKNOWLEDGE, dqpn=0x22, psn=5) /
                                AETH(syndrome=syndrome, msn=3), 49152, src=DST, dst=SRC)
        assert ours == ref
        h = parse(ours)
        assert (h.opcode, h.dqpn, h.psn, h.syndrome, h.msn) == (ACKNOWLEDGE, 0x22, 5, syndrome, 3)


def test_parse_and_icrc_check():
    pkt = data_packet(SRC, DST, 50000, SEND_ONLY, 9, PSN_MASK, 4097)
    h = parse(pkt)
    assert (h.opcode, h.dqpn, h.psn, h.nbytes, h.ackreq) == (SEND_ONLY, 9, PSN_MASK, 4097, False)
    assert icrc_ok(SRC, DST, 50000, pkt)
    assert not icrc_ok(SRC, DST, 50001, pkt)  # another 5-tuple
    flipped = bytearray(pkt)
    flipped[20] ^= 1
    assert not icrc_ok(SRC, DST, 50000, bytes(flipped))
    with pytest.raises(ValueError):
        parse(pkt[:10])


def test_unwrap_nearest():
    assert unwrap(5, 10) == 5
    assert unwrap(PSN_MASK, 1 << 24) == PSN_MASK
    assert unwrap(1, (1 << 24) - 2) == (1 << 24) + 1


def drain(rq, now=0.0):
    out = []
    while (p := rq.next_packet(now)) is not None:
        out.append(p)
    return out


def deliver(rs, rq, packets, now=0.0, drop_acks=False):
    """Packets reach the responder in order; its replies reach the requester unless dropped."""
    for psn, op, n, ackreq in packets:
        reply = rs.on_packet(psn & PSN_MASK, op, ackreq, n)
        if reply is not None and not drop_acks:
            syndrome, p, _ = reply
            (rq.on_nak if syndrome == SYNDROME_NAK_PSN else rq.on_ack)(p, now)


def test_message_opcodes_and_window():
    rq = Requester(mtu=100, window=3, ack_every=4)
    rq.post(250)
    rq.post(30)
    first = drain(rq)
    assert [(p[0], p[1], p[2]) for p in first] == [(0, SEND_FIRST, 100), (1, SEND_MIDDLE, 100),
                                                   (2, SEND_LAST, 50)]
    assert first[2][3]  # last packet of a message asks for an ACK
    rq.on_ack(1, 0.0)
    assert rq.next_packet(0.0)[:3] == (3, SEND_ONLY, 30)
    assert rq.messages_done == 0 and not rq.done
    rq.on_ack(3, 0.0)
    assert rq.done and rq.messages_done == 2 and rq.bytes_acked == 280


def test_lost_packet_nak_go_back_n_from_the_gap():
    rq, rs = Requester(mtu=10, window=8, ack_every=4), Responder()
    rq.post(100)  # 10 packets
    burst = drain(rq)
    assert [p[0] for p in burst] == list(range(8))
    deliver(rs, rq, [p for p in burst if p[0] != 3])  # psn 3 lost in the network
    assert rs.naks_sent == 1 and rs.out_of_order == 4 and rs.delivered == 3
    assert rq.naks == 1 and rq.base == 3
    again = drain(rq)
    assert [p[0] for p in again] == [3, 4, 5, 6, 7, 8, 9]  # exactly from the gap on
    assert rq.retransmitted == 5  # 3..7 again; 8 and 9 are new
    deliver(rs, rq, again)
    assert rq.done and rs.delivered == 10 and rs.msn == 1 and rs.bytes == 100
    assert rq.packets_sent == 15 and rs.packets_received == 14  # one lost
    assert rq.timeouts == 0


def test_one_nak_per_gap_and_stale_nak_ignored():
    rq, rs = Requester(mtu=10, window=8), Responder()
    rq.post(80)
    burst = drain(rq)
    replies = [rs.on_packet(p[0], p[1], p[3], p[2]) for p in burst[1:]]
    naks = [r for r in replies if r and r[0] == SYNDROME_NAK_PSN]
    assert naks == [(SYNDROME_NAK_PSN, 0, 0)]
    rq.on_ack(7, 0.0)
    assert rq.done
    rq.on_nak(0, 0.0)  # arrives late: already acknowledged past it
    assert rq.done and rq.next_packet(0.0) is None


def test_lost_ack_retransmission_timeout():
    rq, rs = Requester(mtu=10, window=8, rto=1.0, min_rto=0.2), Responder()
    rq.post(20)  # 2 packets
    burst = drain(rq, now=0.0)
    deliver(rs, rq, burst, drop_acks=True)  # the responder got both; its ACK is lost
    assert rs.delivered == 2 and rs.acks_sent == 1 and not rq.done
    assert not rq.on_timer(0.99)
    assert rq.on_timer(1.0) and rq.timeouts == 1 and rq.rto == 2.0  # doubled
    again = drain(rq, now=1.0)
    assert [p[0] for p in again] == [0, 1] and all(p[3] for p in again)  # retransmits ask for ACKs
    deliver(rs, rq, again, now=1.5)
    assert rq.done and rq.retransmitted == 2 and rs.duplicates == 2 and rs.delivered == 2
    assert rq.timer is None and not rq.on_timer(100.0)


def test_rtt_estimate_sets_the_timeout():
    rq, rs = Requester(mtu=10, window=8, rto=1.0, min_rto=0.05), Responder()
    rq.post(10)
    deliver(rs, rq, drain(rq, now=0.0), now=0.1)
    assert rq.srtt == pytest.approx(0.1) and rq.rto == pytest.approx(0.1 + 4 * 0.05)


def test_psn_wraps_around():
    start = (1 << 24) - 3
    rq, rs = Requester(mtu=10, window=4, psn0=start), Responder(psn0=start)
    rq.post(100)
    wire = []
    while not rq.done:
        burst = drain(rq)
        wire += [p[0] & PSN_MASK for p in burst]
        deliver(rs, rq, burst)
    assert rs.delivered == 10 and rs.msn == 1 and rq.retransmitted == 0
    assert wire[:5] == [PSN_MASK - 2, PSN_MASK - 1, PSN_MASK, 0, 1]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10 ** 6), loss=st.floats(0.0, 0.4), window=st.integers(1, 12),
       sizes=st.lists(st.integers(0, 95), min_size=1, max_size=5))
def test_lossy_channel_delivers_every_message_once_in_order(seed, loss, window, sizes):
    """A FIFO channel that drops data and ACKs at random: every message arrives exactly once,
    and the counters add up."""
    rng = random.Random(seed)
    rq, rs = Requester(mtu=10, window=window, ack_every=3, rto=1.0, min_rto=1.0), Responder()
    for n in sizes:
        rq.post(n)
    now, lost, lost_acks, rounds = 0.0, 0, 0, 0
    while not rq.done:
        rounds += 1
        assert rounds < 20000
        rq.on_timer(now)
        for psn, op, n, ackreq in drain(rq, now):
            if rng.random() < loss:
                lost += 1
                continue
            reply = rs.on_packet(psn & PSN_MASK, op, ackreq, n)
            if reply is not None and rng.random() < loss:
                lost_acks += 1
            elif reply is not None:
                syndrome, p, _ = reply
                (rq.on_nak if syndrome == SYNDROME_NAK_PSN else rq.on_ack)(p, now)
        now = max(now + 0.01, rq.timer or now)
    packets = sum(max(1, -(-n // 10)) for n in sizes)
    assert rs.delivered == packets and rs.msn == len(sizes) and rs.bytes == sum(sizes)
    assert rq.packets_sent == packets + rq.retransmitted
    assert rs.packets_received == rq.packets_sent - lost
    assert rs.packets_received == rs.delivered + rs.out_of_order + rs.duplicates
    if lost == lost_acks == 0:
        assert rq.retransmitted == 0 and rq.timeouts == 0


def _agents(tmp_path, specs):
    results, errors = [None] * len(specs), []

    def one(i):
        try:
            results[i] = run_agent(specs[i])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(specs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "agents did not finish"
    assert not errors, errors
    return results


@pytest.mark.timeout(90)
@pytest.mark.parametrize("drop", [0.0, 0.05])
def test_ring_of_two_on_loopback(tmp_path, drop):
    """Two ranks on 127.0.0.1 and 127.0.0.2, the successor flow split in two queue pairs
    (two source ports), three synchronous steps; with 5 % of packets dropped on receipt the
    transfer still completes and the retransmissions are counted."""
    barrier = str(tmp_path / "ring.sock")
    chunk = 120_000
    common = {"steps": 3, "iterations": 1, "barrier": barrier, "size": 2, "mtu": 1024,
              "window": 8, "min_rto": 0.05, "stall_s": 20, "drop": drop}
    a = {**common, "ip": "127.0.0.1", "rank": 0, "seed": 1,
         "send": [{"qpn": 0x100, "peer": "127.0.0.2", "sport": 40100, "bytes": chunk // 2},
                  {"qpn": 0x101, "peer": "127.0.0.2", "sport": 40101, "bytes": chunk // 2}],
         "recv": [{"qpn": 0x102, "peer": "127.0.0.2", "sport": 40100, "bytes": chunk}]}
    b = {**common, "ip": "127.0.0.2", "rank": 1, "seed": 2,
         "send": [{"qpn": 0x102, "peer": "127.0.0.1", "sport": 40100, "bytes": chunk}],
         "recv": [{"qpn": 0x100, "peer": "127.0.0.1", "sport": 40100, "bytes": chunk // 2},
                  {"qpn": 0x101, "peer": "127.0.0.1", "sport": 40101, "bytes": chunk // 2}]}
    ra, rb = _agents(tmp_path, [a, b])
    for r in (ra, rb):
        assert r["received_bytes"] == 3 * chunk and r["sent_bytes"] == 3 * chunk
        assert len(r["iterations"][0]["steps"]) == 3
        assert r["agent"]["bad_packets"] == 0
    sent = {q["qpn"]: q for r in (ra, rb) for q in r["send"]}
    recv = {q["qpn"]: q for r in (ra, rb) for q in r["recv"]}
    assert set(sent) == set(recv) == {0x100, 0x101, 0x102}
    for qpn, s in sent.items():
        assert recv[qpn]["messages"] == 3 and s["messages"] == 3
        assert recv[qpn]["delivered"] == s["packets_sent"] - s["retransmitted"]
    retx = sum(q["retransmitted"] for q in sent.values())
    if drop:
        dropped = ra["agent"]["dropped_on_purpose"] + rb["agent"]["dropped_on_purpose"]
        assert dropped > 0 and retx > 0
        assert sum(q["out_of_order"] for q in recv.values()) > 0
    else:
        assert retx == 0 and sum(q["out_of_order"] for q in recv.values()) == 0


# ------------------------------------------------------------------ the runner's RoCE side

def fabric():
    from topologies.clos import clos_fabric
    return clos_fabric(2, 4, 2, 10)


def ring(jid, ranks, **kw):
    return {"id": jid, "collective": "ring_allreduce", "ranks": ranks, "bytes": 4e5, **kw}


def test_prepare_jobs_picks_the_transport():
    from emulation.harness.run import job_transport, prepare_jobs
    doc = {"jobs": [ring("t", ["h0_0", "h1_0"]),
                    ring("u", ["h0_1", "h1_1"], proto="udp", dport=4791),
                    {"id": "x", "flows": [{"src": "h2_0", "dst": "h3_0", "bytes": 1e5},
                                          {"src": "h2_0", "dst": "h3_0", "bytes": 1e5}]}]}
    jobs = prepare_jobs(doc, fabric())
    assert [job_transport(j) for j in jobs] == ["tcp", "roce", "roce"]
    assert (jobs[0]["proto"], jobs[0]["dport"], jobs[0]["sport"]) == ("tcp", 5000, 6000)
    assert (jobs[1]["proto"], jobs[1]["dport"], jobs[1]["sport"]) == ("udp", 4791, 49153)
    sports = [f["sport"] for f in jobs[2]["flows"]]
    assert len(set(sports)) == 2 and all(f["dport"] == 4791 for f in jobs[2]["flows"])
    host = prepare_jobs({"jobs": [ring("t", ["h0_0", "h1_0"])]}, fabric(), mode="host")
    assert job_transport(host[0]) == "roce" and host[0]["dport"] == 4791
    forced = prepare_jobs({"jobs": [ring("t", ["h0_0", "h1_0"])]}, fabric(), transport="roce")
    assert job_transport(forced[0]) == "roce"


@pytest.mark.parametrize("doc, transport, words", [
    ({"jobs": [{"id": "x", "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1}]}]}, "tcp",
     "explicit-flow"),
    ({"jobs": [ring("u", ["h0_0", "h1_0"], proto="udp", dport=5000)]}, "auto", "port 4791"),
    ({"jobs": [ring("u", ["h0_0", "h1_0"], proto="udp")]}, "tcp", "--transport roce"),
    ({"jobs": [ring("t", ["h0_0", "h1_0"], proto="tcp")]}, "roce", "TCP job"),
    ({"jobs": [{"id": "x", "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1,
                                      "proto": "tcp", "dport": 80}]}]}, "auto", "flow 0"),
    ({"jobs": [ring("t", ["h0_0", "h1_0"])]}, "quic", "transport must be"),
])
def test_prepare_jobs_refuses_what_the_agents_cannot_send(doc, transport, words):
    from controller.errors import InputError
    from emulation.harness.run import prepare_jobs
    with pytest.raises(InputError, match=words):
        prepare_jobs(doc, fabric(), transport)


class _Host:
    def __init__(self, name):
        self.name = name


class _Net:
    def get(self, name):
        return _Host(name)


class _Agents:
    def __init__(self):
        self.started = []

    def start(self, host, cmd, name):
        self.started.append((host.name, cmd))


def _specs(agents):
    out = {}
    for host, cmd in agents.started:
        assert cmd[1:3] == ["-m", "emulation.harness.roce"]
        with open(cmd[cmd.index("--spec") + 1]) as fh:
            out[host] = json.load(fh)
    return out


def test_roce_specs_pair_every_queue_pair_end_to_end(tmp_path):
    """A ring of three with one split flow: each QP number appears once as a sender and once
    as a receiver, with the part's source port and bytes on both ends."""
    from emulation.harness.run import _start_roce, prepare_jobs, route_payloads
    f = fabric()
    job = prepare_jobs({"jobs": [ring("r", ["h0_0", "h1_0", "h2_0"], proto="udp")]}, f)[0]
    routes = [{"src": "h0_0", "dst": "h1_0", "spine": "s0", "sport": job["sport"]},
              {"src": "h1_0", "dst": "h2_0", "sport": job["sport"],
               "split": [{"spine": "s0", "share": 0.5, "sport": 40000},
                         {"spine": "s1", "share": 0.5, "sport": 40001}]},
              {"src": "h2_0", "dst": "h0_0", "spine": "s1", "sport": job["sport"]}]
    agents, groups, qps = _Agents(), [], {}
    _start_roce(agents, _Net(), f, job, routes, 2, str(tmp_path), "t", "gate", groups, qps,
                {"window": 8})
    specs = _specs(agents)
    assert set(specs) == {"h0_0", "h1_0", "h2_0"} and len(groups) == 3 and len(qps) == 4
    chunk = int(4e5 / 3)
    senders = {q["qpn"]: (h, q) for h, s in specs.items() for q in s["send"]}
    receivers = {q["qpn"]: (h, q) for h, s in specs.items() for q in s["recv"]}
    assert set(senders) == set(receivers) == set(qps)
    for qpn, (h, q) in senders.items():
        rh, rq = receivers[qpn]
        assert (h, rh) == (qps[qpn]["src"], qps[qpn]["dst"])
        assert q["peer"] == f.host_ip[rh] and rq["peer"] == f.host_ip[h]
        assert q["sport"] == rq["sport"] == qps[qpn]["sport"] and q["bytes"] == rq["bytes"]
    assert sorted(q["sport"] for q in specs["h1_0"]["send"]) == [40000, 40001]
    assert sum(q["bytes"] for q in specs["h1_0"]["send"]) == chunk
    assert all(s["steps"] == 4 and s["size"] == 3 and s["window"] == 8 and s["iterations"] == 2
               for s in specs.values())
    assert route_payloads(job, 1) == pytest.approx([4e5 / 3 * 4] * 3)


def test_explicit_flow_specs(tmp_path):
    from emulation.harness.run import _start_roce, prepare_jobs
    f = fabric()
    job = prepare_jobs({"jobs": [{"id": "x", "flows": [
        {"src": "h0_0", "dst": "h1_0", "bytes": 3000}, {"src": "h0_0", "dst": "h2_0", "bytes": 5000},
        {"src": "h2_0", "dst": "h1_0", "bytes": 7000}]}]}, f)[0]
    routes = [{"src": fl["src"], "dst": fl["dst"], "spine": "s0", "sport": fl["sport"]}
              for fl in job["flows"]]
    agents, groups, qps = _Agents(), [], {}
    _start_roce(agents, _Net(), f, job, routes, 1, str(tmp_path), "t", "gate", groups, qps, {})
    specs = _specs(agents)
    assert sorted(specs) == ["h0_0", "h1_0", "h2_0"]
    assert sorted(q["bytes"] for q in specs["h0_0"]["send"]) == [3000, 5000]
    assert sorted(q["bytes"] for q in specs["h1_0"]["recv"]) == [3000, 7000]
    assert specs["h1_0"]["send"] == [] and all(s["steps"] == 1 for s in specs.values())
    assert len({s["barrier"] for s in specs.values()}) == 1
    assert sorted(s["rank"] for s in specs.values()) == [0, 1, 2]


@pytest.mark.integration
@pytest.mark.timeout(400)
@pytest.mark.parametrize("mode", ["flow", pytest.param("sr", marks=pytest.mark.extended)])
def test_roce_ring_and_explicit_flows_in_emulation(tmp_path, mode):
    """Real ryu-manager, OVS and Mininet: a RoCE ring and an explicit UDP 4791 job (two flows
    between the same hosts on different source ports) run at once; every flow part is proved
    on its planned spine by its ingress rule, and the per-flow packet counters are consistent
    from both ends."""
    from tests.integration import require_root_and_ovs
    require_root_and_ovs()
    from emulation.harness.run import emulate
    jobs = {"jobs": [ring("r", ["h0_0", "h1_0", "h2_0", "h3_0"], bytes=800_000),
                     {"id": "x", "flows": [
                         {"src": "h0_1", "dst": "h3_1", "bytes": 300_000},
                         {"src": "h0_1", "dst": "h3_1", "bytes": 200_000, "sport": 50000},
                         {"src": "h2_1", "dst": "h1_1", "bytes": 100_000}]}]}
    summary = emulate(2, 4, 2, 10, jobs, ["greedy"], mode, 1, str(tmp_path), ping=False,
                      transport="roce")
    (r,) = summary["rounds"]
    assert r["paths_verified"] == r["paths_total"] == 7, r["path_checks"]
    assert r["paths_method"] == "ingress rule counters" and r["job_rules"] >= 7
    assert {j["transport"] for j in r["jobs"].values()} == {"roce"}
    assert all(t > 0 for j in r["jobs"].values() for t in j["allreduce_s"])
    flows = r["flows"]
    assert len(flows) == 7 and {f["sport"] for f in flows if f["job"] == "x"} >= {50000}
    for f in flows:
        if f["job"] == "r":
            payload = 200_000 * 6  # 2(n-1) steps of bytes / n
        elif f["sport"] == 50000:
            payload = 200_000
        else:
            payload = {("h0_1", "h3_1"): 300_000, ("h2_1", "h1_1"): 100_000}[f["src"], f["dst"]]
        assert f["bytes"] == payload, f
        assert f["packets_sent"] >= -(-payload // 4096) and f["received"] <= f["packets_sent"]
        assert f["lost"] == f["packets_sent"] - f["received"] >= 0
    totals = r["packets"]
    assert totals["packets_sent"] == sum(f["packets_sent"] for f in flows)
    with open(tmp_path / "summary.json") as fh:
        assert json.load(fh)["rounds"][0]["flows"] == flows


def test_packet_larger_than_the_path_mtu_is_a_clear_error():
    """With DF set, a packet over the path MTU fails to send (EMSGSIZE): the agent says which
    option to change instead of dying on an OSError."""
    import errno

    from emulation.harness.roce import Agent

    class TooBig:
        def sendto(self, payload, addr):
            raise OSError(errno.EMSGSIZE, "Message too long")

        def close(self):
            pass
    agent = Agent({"ip": "127.0.0.1", "steps": 1, "recv": [],
                   "send": [{"qpn": 1, "peer": "127.0.0.2", "sport": 40200, "bytes": 10}]})
    try:
        agent.tx[40200].close()
        agent.tx[40200] = TooBig()
        with pytest.raises(ValueError, match="smaller RoCE MTU"):
            agent._send(40200, "127.0.0.2", b"x" * 4154)
    finally:
        agent.close()
