"""``FabricFinder``'s probes around a (re)start (issue 74): a switch's connect probes held until
its tables were read (``switch_up(hold=True)``, ``release``), the switch in no round and no
check of the declared fabric meanwhile (the other switches' rounds go on), and no answer to a
probe whose way back is already under way.
At k = 16 a restart's 5,120 connect probes and 2,048 answers competed with the table reads."""
from controller.discovery.finder import PROBE_HOLD_S, QUIET_S, FabricFinder
from topologies.clos import fattree_fabric

A, B = 1, 2  # two switches cabled port 1 to port 1


def probes(f: FabricFinder) -> dict:
    """(dpid, port) -> frame of the frames the finder asks to send now."""
    return {(d, p): frame for d, p, frame in f.take_frames()}


def test_held_probes_go_out_at_release_and_rounds_skip_the_held_switch():
    f = FabricFinder()
    f.pace(1.0, 1000)
    f.switch_up(A, {1: True, 2: True, 3: False}, 0.0, hold=True)
    f.switch_up(B, {1: True}, 0.0)
    assert set(probes(f)) == {(B, 1)} and f.holding  # A's wait, B's went
    assert {(d, p) for d, p, _ in f.lldp_probes(1.0)} == {(B, 1)}  # A held: not in a round
    assert f.release(1.5) == 1 and not f.holding
    assert set(probes(f)) == {(A, 1), (A, 2)}  # every port that is up
    assert f.sent["lldp_connect"] == 3
    assert {(d, p) for d, p, _ in f.lldp_probes(2.0)} == {(A, 1), (A, 2), (B, 1)}


def test_held_probes_go_out_after_the_hold_at_most_and_not_for_a_switch_gone():
    f = FabricFinder()
    f.switch_up(A, {1: True}, 0.0, hold=True)
    f.switch_up(B, {1: True}, 0.0, hold=True)
    f.switch_down(B, 0.5)  # gone: its hold with it
    assert f.lldp_probes(PROBE_HOLD_S - 0.1) == [] and probes(f) == {}
    round_ = f.lldp_probes(PROBE_HOLD_S)  # held that long: released, and the rounds go on
    assert set(probes(f)) == {(A, 1)} and not f.holding
    assert {(d, p) for d, p, _ in round_} == {(A, 1)}
    assert f.release(PROBE_HOLD_S + 1) == 0


def test_a_port_up_while_held_waits_for_the_release():
    f = FabricFinder()
    f.switch_up(A, {1: True, 2: False}, 0.0, hold=True)
    f.port_changed(A, 2, True, 0.1)
    assert probes(f) == {}
    f.release(0.2)
    assert set(probes(f)) == {(A, 1), (A, 2)}


def test_a_probe_is_answered_only_when_its_way_back_is_not_under_way():
    # B connects after A: A's probe was lost (B had no controller); B's reaches A, answered
    f = FabricFinder()
    f.switch_up(A, {1: True}, 0.0)
    probes(f)
    f.switch_up(B, {1: True}, 1.0)
    assert f.packet_in(A, 1, probes(f)[(B, 1)], 1.1) == "lldp"
    assert set(probes(f)) == {(A, 1)} and f.sent["lldp_answer"] == 1
    # both connected, then probed (held until read): each way has its probe, no answer
    f = FabricFinder()
    f.switch_up(A, {1: True}, 0.0, hold=True)
    f.switch_up(B, {1: True}, 0.1, hold=True)
    f.release(1.0)
    out = probes(f)
    assert f.packet_in(A, 1, out[(B, 1)], 1.1) == "lldp"
    assert f.packet_in(B, 1, out[(A, 1)], 1.1) == "lldp"
    assert probes(f) == {} and f.sent["lldp_answer"] == 0
    assert (A, 1) in f.topology.links and (B, 1) in f.topology.links


def test_the_declared_fabric_is_not_checked_while_probes_are_held():
    fabric = fattree_fabric(4)
    f = FabricFinder(declared=fabric)
    leaf = fabric.dpids[fabric.leaves[0]]
    f.switch_up(leaf, {p: True for p in fabric.ports[fabric.leaves[0]].values()}, 0.0,
                hold=True)
    assert f.settle(QUIET_S + 1) is None and not f.checked  # its links not probed yet
    f.release(QUIET_S + 1)
    assert f.settle(2 * QUIET_S + 2) is None and f.checked


def test_one_switch_held_its_longest_leaves_the_others_links_in_place():
    """A switch reconnecting to a running fabric is held until its tables are read, at most
    ``PROBE_HOLD_S``, longer than a link lives unprobed: the rounds of the others go on (when
    a hold stopped every round, every link of the fabric expired during a slow read)."""
    C = 3
    f = FabricFinder()
    for d in (A, B):
        f.switch_up(d, {1: True}, 0.0)
    for d, p, frame in f.take_frames():  # A and B find their link both ways
        f.packet_in(B if d == A else A, 1, frame, 0.1)
    assert (A, 1) in f.topology.links and (B, 1) in f.topology.links
    f.switch_up(C, {1: True}, 0.5, hold=True)
    t = 1.0
    while t < PROBE_HOLD_S:
        for d, p, frame in f.lldp_probes(t):
            assert d != C
            f.packet_in(B if d == A else A, 1, frame, t + 0.01)
        t += 1.0
    assert (A, 1) in f.topology.links and (B, 1) in f.topology.links and f.holding


def test_a_busy_controller_does_not_expire_links_it_could_not_probe():
    """Rounds that come seconds late (the controller busy installing 1,000 rules while
    statistics flow; a Python 3.12 CI run lost l0's links so and a POST got 409) do not
    count against the links: each still has its ``link_timeout`` of rounds to be seen."""
    f = FabricFinder()
    f.pace(1.0, 1000)
    for d in (A, B):
        f.switch_up(d, {1: True}, 0.0)
    for d, p, frame in f.take_frames():
        f.packet_in(B if d == A else A, 1, frame, 0.1)
    f.lldp_probes(1.0)  # sent; the controller then stalls before it reads the answers
    assert f.lldp_probes(5.5) and (A, 1) in f.topology.links  # 5.4 s old, 4.5 s of stall
    t = 6.5
    while (A, 1) in f.topology.links:  # no answers any more: gone after the timeout
        f.lldp_probes(t)
        t += 1.0
    assert 5.5 < t - 1.0 <= 5.5 + 3.5  # within the timeout of the late round, not at it
