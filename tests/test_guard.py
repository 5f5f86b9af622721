"""Topology guard and connect-at-once, on the finder alone (pure: frames are delivered by a
small wiring simulator, time by a number). Signed probes show links; unsigned, forged,
replayed probes and probes on host ports are alarms and change nothing; an address moves only
when its owner's location is gone; the switch graph is adopted as soon as it is consistent and
hosts as soon as they are heard; link speeds come from the switches, the option or a default."""
import pytest

from controller.discovery import lldp
from controller.discovery.finder import QUIET_S, SWITCH_QUIET_S, FabricFinder
from controller.discovery.guard import ALARM_EVERY_S, FRESH_S, VERIFY_S
from controller.model.clos import TIERS, Clos, as_clos


def spines(fabric: Clos) -> list[str]:
    """The spines of a leaf-spine's one plane (its one pod's aggregation switches)."""
    return fabric.planes[0].aggs[0]

ATTACKER_MAC = "02:00:00:00:99:01"


class Net:
    """A wired fabric in front of a finder: frames out of a port arrive at the far end."""

    def __init__(self, spines=2, leaves=3, hosts=2, declared=False, link_gbps=None,
                 speeds=None):
        self.f = Clos.generate(spines, leaves, hosts, 0.02, wiring=True)
        self.finder = FabricFinder(self.f if declared else None, link_gbps, secret=b"s" * 32)
        self.now = 100.0
        self.speeds = speeds

    def connect(self, names=None):
        for name in names or spines(self.f) + self.f.leaves:
            ports = {p: True for p in self.f.ports[name].values()}
            speeds = {p: self.speeds for p in ports} if self.speeds else None
            self.finder.switch_up(self.f.dpids[name], ports, self.now, speeds)

    def deliver(self, frames=None) -> int:
        """Deliver frames (default: the finder's queued ones) to the far port; frames to a
        host port are answered like a host would answer an ARP probe for its address."""
        frames = self.finder.take_frames() if frames is None else frames
        n = 0
        for dpid, port, frame in frames:
            name = self.f.switch_of_dpid[dpid]
            peer = self.f.peer(name, port)
            if peer in self.f.hosts:
                self._host_answers(peer, frame)
                continue
            self.finder.packet_in(self.f.dpids[peer], self.f.port(peer, name), frame, self.now)
            n += 1
        return n

    def _host_answers(self, host, frame):
        arp = lldp.parse_arp(frame)
        if arp is not None and arp[0] == 1 and arp[3] == self.f.host_ip[host]:
            self.speak(host)

    def speak(self, host, ip=None, mac=None, at=None, target="10.255.0.1"):
        leaf = self.f.hosts[host]
        dpid, port = at or (self.f.dpids[leaf], self.f.port(leaf, host))
        frame = lldp.arp_request(mac or self.f.host_mac[host], target,
                                 sender_ip=ip or self.f.host_ip[host])
        return self.finder.packet_in(dpid, port, frame, self.now)

    def at(self, host):
        leaf = self.f.hosts[host]
        return self.f.dpids[leaf], self.f.port(leaf, host)

    def settled(self):
        """Connect every switch, exchange probes until nothing is queued, and adopt."""
        self.connect()
        while self.deliver():
            pass
        self.now += SWITCH_QUIET_S
        return self.finder.settle(self.now)

    def links(self):
        return dict(self.finder.topology.links)


def kinds(events):
    return [e["kind"] for e in events]


# ---- link fabrication ----------------------------------------------------------------------
def test_signed_probes_show_every_link_and_nothing_else_is_sent_to_hosts():
    n = Net()
    fabric = n.settled()
    assert fabric is not None and fabric.down == set()
    assert n.finder.take_events() == []
    probed = {(d, p) for d, p, _f in n.finder.lldp_probes(n.now)}
    for h in n.f.hosts:
        n.speak(h)
    probed_after = {(d, p) for d, p, _f in n.finder.lldp_probes(n.now)}
    host_ports = {n.at(h) for h in n.f.hosts}
    assert host_ports <= probed  # silent ports are probed (they might be cables)
    assert not host_ports & probed_after  # ports with host traffic are not


@pytest.mark.parametrize("attack", ["unsigned", "forged", "replayed", "stale", "looped"])
def test_a_probe_a_host_sends_is_an_alarm_naming_switch_and_port_and_changes_nothing(attack):
    n = Net()
    n.settled()
    l1 = n.f.dpids["l1"]
    h_dpid, h_port = n.at("h1_0")
    claim_dpid, claim_port = n.f.dpids["l2"], 1
    if attack == "unsigned":
        frame = lldp.lldp_frame(claim_dpid, claim_port)
    elif attack == "forged":
        frame = lldp.lldp_frame(claim_dpid, claim_port, sign=(b"guess" * 4, n.now, 1))
    elif attack == "replayed":  # a real probe, captured on the cable and sent again
        d, p, frame = next(x for x in n.finder.lldp_probes(n.now) if x[:2] == (claim_dpid, 1))
        n.deliver([(d, p, frame)])
    elif attack == "stale":
        frame = n.finder.guard.probe(claim_dpid, claim_port, n.now - FRESH_S - 1)
    else:  # the probe sent out of the host's own port, sent back into it
        frame = n.finder.guard.probe(h_dpid, h_port, n.now)
        claim_dpid, claim_port = h_dpid, h_port
    links, version = n.links(), n.finder.topology.version
    assert n.finder.packet_in(h_dpid, h_port, frame, n.now) == "alarm"
    assert n.finder.topology.version == version
    assert {k: v[:2] for k, v in n.finder.topology.links.items()} == \
        {k: v[:2] for k, v in links.items()}
    (event,) = n.finder.take_events()
    want = {"unsigned": "lldp_unsigned", "forged": "lldp_forged"}.get(attack, "lldp_replayed")
    assert event["kind"] == want and event["category"] == "security"
    assert (event["switch"], event["port"]) == ("l1", h_port) and h_dpid == l1
    assert f"{n.f.switch_of_dpid[claim_dpid]} port {claim_port}" in event["message"]
    assert n.finder.settle(n.now + QUIET_S + 1) is None  # nothing to adopt


def test_a_signed_probe_on_a_host_port_is_an_alarm():
    """A host that relays real probes from another port: fresh, signed, never seen, but on a
    port that carries its own traffic."""
    n = Net()
    n.settled()
    n.speak("h1_0")
    d, p, frame = next(x for x in n.finder.lldp_probes(n.now) if x[:2] == (n.f.dpids["l2"], 1))
    assert n.finder.packet_in(*n.at("h1_0"), frame, n.now) == "alarm"
    (event,) = n.finder.take_events()
    assert event["kind"] == "lldp_on_host_port" and event["switch"] == "l1"


def test_the_poisoning_of_the_issue_ten_per_second_is_one_event_per_window_every_frame_counted():
    n = Net()
    base = n.settled()
    for h in n.f.hosts:
        n.speak(h)
    n.finder.settle(n.now)
    before = n.finder.recognised.to_dict()
    events = []
    for i in range(150):  # 15 s at 10/s
        n.now += 0.1
        n.finder.packet_in(*n.at("h1_1"), lldp.lldp_frame(n.f.dpids["l1"], 3), n.now)
        if i % 10 == 0:
            n.deliver(n.finder.lldp_probes(n.now))
        events += n.finder.take_events()
        assert n.finder.settle(n.now) is None
    assert kinds(events) == ["lldp_unsigned"] * 2  # at 0 s and after ALARM_EVERY_S
    assert abs(events[1]["frames"] - ALARM_EVERY_S * 10) <= 1  # the frames in between
    assert n.finder.guard.counts["lldp_unsigned"] == 150
    assert n.finder.recognised.to_dict() == before and base is not None
    assert set(n.finder.recognised.hosts) == set(n.f.hosts)


def test_a_host_port_is_trusted_again_after_it_went_down():
    n = Net()
    n.settled()
    n.speak("h1_0")
    at = n.at("h1_0")
    assert at in n.finder.guard.host_ports
    n.finder.port_changed(*at, False, n.now)
    n.finder.port_changed(*at, True, n.now)
    assert at not in n.finder.guard.host_ports
    assert any(x[:2] == at for x in n.finder.take_frames())  # probed at once when it came up


# ---- host location hijacking ---------------------------------------------------------------
def _owned(n):
    for h in n.f.hosts:
        n.speak(h)
    n.finder.settle(n.now)
    n.finder.take_frames()
    return n.finder.recognised


def test_a_gratuitous_arp_for_anothers_address_is_a_conflict_when_the_owner_answers():
    n = Net()
    n.settled()
    before = _owned(n).to_dict()
    victim_ip = n.f.host_ip["h1_0"]
    # the attacker on h2_1's port sends gratuitous ARP for h1_0's address
    assert n.speak("h2_1", ip=victim_ip, mac=ATTACKER_MAC, target=victim_ip) == "host"
    assert n.finder.mac_of(victim_ip) == n.f.host_mac["h1_0"]
    (probe,) = n.finder.take_frames()  # an ARP probe out of the owner's port
    assert probe[:2] == n.at("h1_0") and lldp.parse_arp(probe[2])[3] == victim_ip
    n.now += 0.01
    n.deliver([probe])  # the owner answers
    (event,) = n.finder.take_events()
    assert event["kind"] == "address_conflict" and event["address"] == victim_ip
    assert (event["switch"], event["port"]) == ("l2", n.at("h2_1")[1])
    assert event["owner"] == f"l1 port {n.at('h1_0')[1]}" and event["mac"] == ATTACKER_MAC
    for _ in range(30):  # it keeps sending: no new probe within the trust window, no change
        n.now += 0.1
        n.speak("h2_1", ip=victim_ip, mac=ATTACKER_MAC, target=victim_ip)
        assert n.finder.settle(n.now) is None
    assert n.finder.take_frames() == []
    assert n.finder.recognised.to_dict() == before
    assert n.finder.mac_of(victim_ip) == n.f.host_mac["h1_0"]
    assert n.finder.guard.counts["address_conflict"] == 31


def test_a_mac_and_address_spoofed_from_another_port_is_a_conflict_too():
    n = Net()
    n.settled()
    before = _owned(n).to_dict()
    n.speak("h2_1", ip=n.f.host_ip["h1_0"], mac=n.f.host_mac["h1_0"])
    n.deliver()
    assert kinds(n.finder.take_events()) == ["address_conflict"]
    n.now += VERIFY_S + 1
    assert n.finder.settle(n.now) is None and n.finder.recognised.to_dict() == before


def test_an_address_moves_when_its_owner_does_not_answer():
    n = Net()
    n.settled()
    _owned(n)
    ip = n.f.host_ip["h1_0"]
    n.speak("h2_1", ip=ip, mac=ATTACKER_MAC)
    assert len(n.finder.take_frames()) == 1  # the probe, not answered (owner gone silently)
    n.now += VERIFY_S / 2
    assert n.finder.settle(n.now) is None and n.finder.mac_of(ip) == n.f.host_mac["h1_0"]
    n.now += VERIFY_S
    fabric = n.finder.settle(n.now)
    assert n.finder.mac_of(ip) == ATTACKER_MAC
    (event,) = n.finder.take_events()
    assert event["kind"] == "host_moved" and event["address"] == ip
    assert fabric is not None and ATTACKER_MAC in fabric.host_mac.values()
    assert n.f.host_mac["h1_0"] not in fabric.host_mac.values()


def test_an_address_moves_at_once_when_its_owners_port_is_down():
    n = Net()
    n.settled()
    _owned(n)
    ip = n.f.host_ip["h1_0"]
    n.finder.port_changed(*n.at("h1_0"), False, n.now)
    n.speak("h2_1", ip=ip, mac=ATTACKER_MAC)
    assert n.finder.mac_of(ip) == ATTACKER_MAC
    assert kinds(n.finder.take_events()) == ["host_moved"]


def test_with_a_declared_fabric_the_same_attacks_are_alarms():
    n = Net(declared=True)
    n.connect()
    while n.deliver():
        pass
    for h in n.f.hosts:
        n.speak(h)
    n.finder.take_events()
    n.speak("h2_1", ip=n.f.host_ip["h1_0"], mac=ATTACKER_MAC)
    n.finder.packet_in(*n.at("h2_1"), lldp.lldp_frame(n.f.dpids["l1"], 1), n.now)
    got = n.finder.take_events()
    assert kinds(got) == ["address_conflict", "lldp_unsigned"]
    assert all(e["switch"] == "l2" and e["port"] == n.at("h2_1")[1] for e in got)
    n.now += QUIET_S + 1
    assert n.finder.settle(n.now) is None
    assert {p["kind"] for p in n.finder.problems} <= {"unknown_host"}


# ---- connect at once -------------------------------------------------------------------------
def test_the_switch_graph_is_adopted_once_consistent_without_a_quiet_period():
    n = Net(spines=2, leaves=4)
    n.connect()
    sent = n.finder.sent["lldp_connect"]
    assert sent == sum(len(p) for p in n.f.ports.values())  # every port at connect
    n.deliver()
    assert n.finder.sent["lldp_answer"] > 0  # the way back, probed at once
    n.deliver()
    assert n.finder.settle(n.now) is None  # switches connected just now
    n.now += SWITCH_QUIET_S
    fabric = n.finder.settle(n.now)
    assert fabric is not None and fabric.planes == as_clos(n.f).planes  # spines and leaves
    assert fabric.dpids == n.f.dpids and fabric.down == set() and fabric.hosts == {}
    assert n.now - 100.0 < QUIET_S


def test_a_partial_graph_waits():
    n = Net(spines=2, leaves=4)
    n.connect(["s0", "s1", "l0", "l1"])  # spines' ports to l2, l3 are up and not cabled yet
    while n.deliver():
        pass
    n.now += SWITCH_QUIET_S
    assert n.finder.settle(n.now) is None
    n.connect(["l2", "l3"])
    while n.deliver():
        pass
    n.now += SWITCH_QUIET_S
    assert n.finder.settle(n.now).leaves == n.f.leaves


def test_hosts_are_added_one_by_one_as_they_are_heard():
    n = Net()
    n.settled()
    for k, h in enumerate(n.f.hosts):
        n.now += 0.01
        n.speak(h)
        fabric = n.finder.settle(n.now)
        assert fabric is not None and len(fabric.hosts) == k + 1 and h in fabric.hosts


def test_an_arp_request_for_an_address_not_heard_yet_is_answered_when_it_is_found():
    n = Net()
    n.settled()
    n.speak("h0_0", target=n.f.host_ip["h2_1"])
    n.finder.settle(n.now)
    assert n.finder.take_frames() == []
    n.now += 0.05
    n.speak("h2_1")  # answers the controller's locating probe
    n.finder.settle(n.now)
    (answer,) = n.finder.take_frames()
    assert answer[:2] == n.at("h0_0")
    assert lldp.parse_arp(answer[2]) == (2, n.f.host_mac["h2_1"], n.f.host_ip["h2_1"],
                                         n.f.host_ip["h0_0"])
    assert n.finder.sent["arp_answer"] == 1


def test_odd_wiring_is_still_adopted_after_the_quiet_period():
    n = Net(spines=2, leaves=3)
    n.connect()
    frames = [x for x in n.finder.take_frames()
              if not (n.f.switch_of_dpid[x[0]] == "l2" and x[1] == 1)]  # l2 -> s0 is lost
    n.deliver(frames)
    n.finder.take_frames()  # answers lost too
    n.now += SWITCH_QUIET_S
    assert n.finder.settle(n.now) is None
    n.now += QUIET_S
    fabric = n.finder.settle(n.now)
    assert fabric is not None and ("l2", "s0") in fabric.down


# ---- link speed ------------------------------------------------------------------------------
@pytest.mark.parametrize("option, reported, gbps, source", [
    (None, None, 100.0, "default"), (None, 10_000_000, 10.0, "port_desc"),
    (0.02, 10_000_000, 0.02, "option"), (0.5, None, 0.5, "option")])
def test_link_speed_and_where_it_came_from(option, reported, gbps, source):
    n = Net(link_gbps=option, speeds=reported)
    fabric = n.settled()
    speed = n.finder.link_speed()
    assert (speed["gbps"], speed["source"]) == (gbps, source)
    assert fabric.link_gbps == dict.fromkeys(TIERS, gbps)
    assert n.finder.view()["link_speed"]["source"] == source


def test_the_slowest_port_in_use_sets_the_speed():
    n = Net(speeds=25_000_000)
    n.connect()
    l0 = n.f.dpids["l0"]
    n.finder.switch_up(l0, {p: True for p in n.f.ports["l0"].values()}, n.now,
                       {p: (10_000_000 if p == 1 else 25_000_000) for p in n.f.ports["l0"].values()})
    while n.deliver():
        pass
    n.now += SWITCH_QUIET_S
    assert n.finder.settle(n.now).link_gbps == dict.fromkeys(TIERS, 10.0)
    assert n.finder.link_speed()["reported_gbps"] == [10.0, 25.0]
