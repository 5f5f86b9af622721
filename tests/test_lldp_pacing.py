"""LLDP probe rounds paced by a budget (``FabricFinder.pace``): a fabric with more switch ports
than the budget allows a second is probed in turns, every port once per cycle, and a link
expires only after ``LOST_ROUNDS`` whole cycles unheard (at k = 16, 4,096 probes a second took
half a core of the controller and delayed failures' re-plans; see benchmarks.scale
--lldp-interval)."""
from controller.discovery.finder import LOST_ROUNDS, FabricFinder
from controller.discovery.topology import DEFAULT_LINK_TIMEOUT

SWITCHES, PORTS = 6, 4


def finder() -> FabricFinder:
    f = FabricFinder()
    for dpid in range(1, SWITCHES + 1):
        f.switch_up(dpid, {p: True for p in range(1, PORTS + 1)}, 0.0)
    f.take_frames()  # the probes at connect
    return f


def rounds(f: FabricFinder, n: int) -> list[set]:
    return [{(d, p) for d, p, _ in f.lldp_probes(float(t))} for t in range(1, n + 1)]


def test_a_budget_probes_every_port_once_per_cycle_in_turns():
    f = finder()
    f.pace(1.0, budget=10)
    got = rounds(f, 6)
    assert [len(r) for r in got] == [10, 10, 10, 10, 10, 10]
    every = {(d, p) for d in range(1, SWITCHES + 1) for p in range(1, PORTS + 1)}
    assert got[0] | got[1] | got[2] == every  # 24 ports: a cycle of three rounds
    assert not got[0] & got[1] and got[3] | got[4] | got[5] == every
    assert f.topology.link_timeout == LOST_ROUNDS * 3 * 1.0
    assert f.view()["probes"]["per_round"] == 10


def test_without_a_budget_or_under_it_every_port_each_round():
    for budget in (0, 1000):
        f = finder()
        f.pace(1.0, budget)
        assert [len(r) for r in rounds(f, 2)] == [SWITCHES * PORTS] * 2
        assert f.topology.link_timeout == DEFAULT_LINK_TIMEOUT


def test_the_link_timeout_follows_the_interval():
    """Rounds 5 s apart: a link is not dropped between two of them (it was at 3.5 s)."""
    f = finder()
    f.pace(5.0, 1000)
    rounds(f, 1)
    assert f.topology.link_timeout == LOST_ROUNDS * 5.0
