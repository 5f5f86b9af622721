"""Issue 59, item 10: restarting Open vSwitch moves no running job. ``ovs-ctl restart`` drops
every bridge's OpenFlow connection within milliseconds; they reconnect one by one over up to
~23 s. A switch away for ``--mlroute-dead-after`` (3 s) used to count as failed, so every
"switch X connected" re-planned around the ones still away and ``auto`` jobs ended on other
cores though no link failed. Switches that drop together form a restart round
(``controller/service/restarts.py``): not re-planned around until they are all back, or until
``--mlroute-restart-grace`` (30 s); a port that goes down is re-planned at once regardless, and
a switch lost alone still fails after the dead-after. The grace runs on the monotonic clock: a
step of the wall clock neither fails nor revives a switch.

On a declared k = 4 fat-tree over fake switches (``tests/test_silent_switch.Net``: echo rounds
every 0.2 s of fake time, LLDP and echoes crossing the fake tables, a tick every second)."""
import json

from prometheus_client.parser import text_string_to_metric_families

from controller.service import api
from controller.service.metrics import exposition
from controller.service.restarts import Restarts
from controller.service.route_service import RouteService
from controller.service.settings import Settings
from emulation.harness.fake_switch import FakeSwitches
from tests.helpers import FakeClock
from tests.test_silent_switch import Net
from topologies.clos import fattree_fabric

AUTO = ["h0_0", "h2_0", "h4_0", "h6_0", "h1_1", "h3_1", "h5_1", "h7_1"]
GREEDY = ["h0_1", "h3_0", "h5_0", "h7_0", "h1_0", "h2_1", "h4_1", "h6_1"]


def post(svc, jid, ranks, **extra):
    code, doc = api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": jid, "ranks": ranks, "bytes": 1e8, **extra}).encode())
    assert code == 201, doc
    return doc


def routes(svc):
    """The routes in force; an unroutable flow's path is empty."""
    return [dict(r, path=r.get("path") or []) for r in
            api.handle(svc, "GET", "/v1/routes")[1]["routes"]]


def metric(svc, name, **labels):
    body, _ = exposition(svc)
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    raise KeyError(name)


def fabric_view(svc):
    return api.handle(svc, "GET", "/v1/fabric")[1]


def running(**settings):
    """A k = 4 fat-tree with two jobs, one auto and one greedy, every switch synchronised
    and proven by echoes."""
    f = fattree_fabric(4, 2)
    net = Net(f)
    if settings:  # the same service with other settings
        net.svc = RouteService(net.sw, f, clock=net.clock, sleep=net.clock.sleep,
                               settings=Settings(**settings))
        for name, dpid in f.dpids.items():
            net.svc.switch_connected(dpid, {p: True for p in f.ports[name].values()})
        net.sw.packets_out.clear()
    post(net.svc, "ring", AUTO)
    post(net.svc, "other", GREEDY, algorithm="greedy")
    net.round(10)
    assert net.svc.finder.liveness.silent == set() and fabric_view(net.svc)["links_down"] == []
    return net


def restart(net, order):
    """``ovs-ctl restart``: every switch of ``order`` loses its connection within 10 ms, its
    datapath stops and its tables are gone (the daemon starts with empty tables)."""
    for d in order:
        net.clock.now += 0.0005
        net.dead.add(d)
        net.sw.rules[d], net.sw.groups[d] = {}, {}
        net.svc.switch_disconnected(d)


def back(net, d):
    """A restarted switch reconnects: its datapath forwards (empty tables until repaired)."""
    net.dead.discard(d)
    net.svc.switch_connected(d, {p: True for p in net.f.ports[net.f.switch_of_dpid[d]].values()})


def wait(net, seconds):
    """Echo rounds and ticks for ``seconds``; the shell's wake-up at every deadline."""
    end = net.clock.now + seconds
    while net.clock.now < end - 1e-9:
        net.round()
        due = net.svc.next_deadline()
        if due is not None and net.svc.monotonic() >= due:
            net.svc.expire()


def replans(svc, since):
    return [e for e in svc.state.events[since:] if e.get("links_down") or e.get("links_up")
            or e.get("moved_flows")]


def test_an_open_vswitch_restart_moves_nothing_and_leaves_the_tables_as_they_were():
    net = running()
    before, tables, events = routes(net.svc), net.sw.snapshot(), len(net.svc.state.events)
    order = sorted(net.f.dpids.values())
    restart(net, order)
    for k, d in enumerate(order):  # one by one over 20 s: most away far past the dead-after
        wait(net, 1.0)
        assert len(net.svc.state.restarts.away(net.svc.state.switches)) == 20 - k
        if k == 5:
            assert metric(net.svc, "mlroute_restart_round_switches") == 15
        assert fabric_view(net.svc)["links_down"] == [], net.f.switch_of_dpid[d]
        back(net, d)
    wait(net, 2.0)
    net.svc.sync_queued()
    assert routes(net.svc) == before
    assert net.sw.snapshot() == tables
    assert replans(net.svc, events) == [] and net.svc.counters.get("moved_flows", 0) == 0
    assert net.svc.finder.liveness.silent == set()
    assert net.svc.state.restarts.closed == {"returned": 1, "expired": 0}
    assert net.svc.state.restarts.open == []
    causes = [e["cause"] for e in net.svc.state.events[events:]]
    assert any(c.startswith("restart round: 20 switches lost together") for c in causes), causes
    assert any(c.startswith("restart round over: all 20 back after") and
               c.endswith("nothing re-planned") for c in causes), causes


def test_switches_that_stay_away_are_re_planned_around_once_after_the_restart_grace():
    net = running()
    events = len(net.svc.state.events)
    order = sorted(net.f.dpids.values())
    away = [net.f.dpids["a0_0"], net.f.dpids["c0_1"]]  # never return
    restart(net, order)
    t0 = net.clock.now
    for d in order:
        wait(net, 1.0)
        if d not in away:
            back(net, d)
    wait(net, 30.0 - (net.clock.now - t0) - 0.3)  # just before the grace ends
    assert replans(net.svc, events) == []
    assert any(a in r["path"] for r in routes(net.svc) for a in ("a0_0", "c0_1"))
    wait(net, 1.0)
    done = replans(net.svc, events)
    assert len(done) == 1, [e["cause"] for e in done]
    assert done[0]["cause"].startswith(
        "restart round over: 2 of 20 switches still away after 30 s (a0_0, c0_1)")
    assert "a0_0" in done[0]["cause"] and "c0_1" in done[0]["cause"]
    assert not any(a in r["path"] for r in routes(net.svc) for a in ("a0_0", "c0_1"))
    wait(net, 5.0)
    assert len(replans(net.svc, events)) == 1
    assert net.svc.state.restarts.closed == {"returned": 0, "expired": 1}
    assert metric(net.svc, "mlroute_restart_round_switches") == 0
    assert metric(net.svc, "mlroute_restart_rounds_total", outcome="expired") == 1


def test_a_switch_lost_after_the_window_while_its_round_is_away_joins_it():
    """One of 20 bridges of an ``ovs-ctl restart`` lost 2 s after the others (seen on the
    chaos suite's fat-tree): it joins the round whose members are still away, and nothing is
    re-planned when all are back."""
    net = running()
    before, events = routes(net.svc), len(net.svc.state.events)
    order = sorted(net.f.dpids.values())
    late = order[-1]
    restart(net, order[:-1])
    wait(net, 2.0)
    restart(net, [late])
    wait(net, 4.0)  # the late one away past the dead-after
    assert late in net.svc.state.restarts.away(net.svc.state.switches)
    assert fabric_view(net.svc)["links_down"] == []
    for d in order:
        back(net, d)
        wait(net, 0.2)
    wait(net, 2.0)
    net.svc.sync_queued()
    assert routes(net.svc) == before
    assert replans(net.svc, events) == [] and net.svc.counters.get("moved_flows", 0) == 0
    assert net.svc.state.restarts.closed == {"returned": 1, "expired": 0}


def test_a_switch_lost_once_its_round_is_back_is_no_member():
    net = running()
    order = sorted(net.f.dpids.values())
    restart(net, order[:5])
    for d in order[:5]:
        back(net, d)
    net.svc.sync_queued()
    wait(net, 0.5)
    assert net.svc.state.restarts.open == []
    a = net.f.dpids["a0_0"]
    assert a not in order[:5]
    net.svc.switch_disconnected(a)  # alone: it fails at the dead-after, as before
    assert net.svc.state.restarts.open == [] and a not in net.svc.state.restarts.away(
        net.svc.state.switches)
    assert net.svc.state.switches[a].held_until is None
    wait(net, 3.4)  # the dead-after and the tick after it
    last = net.svc.state.events[-1]
    assert last["cause"] == "switch disconnected for longer than 3 s", last
    assert {"l0-a0_0", "l1-a0_0", "a0_0-c0_0", "a0_0-c0_1"} <= set(last["links_down"])


def test_a_switch_lost_alone_still_fails_after_the_dead_after():
    net = running()
    a = net.f.dpids["a0_0"]
    net.svc.switch_disconnected(a)  # its controller lost, its data plane forwarding
    wait(net, 2.8)
    assert net.crossing("a0_0")
    wait(net, 0.4)
    assert net.crossing("a0_0") == []
    assert not any(e["cause"].startswith("restart round") for e in net.svc.state.events)


def test_two_switches_lost_together_are_no_round():
    """Fewer than ``restart_quorum`` (3): each fails after its dead-after as before."""
    net = running()
    for name in ("a0_0", "a1_0"):
        net.svc.switch_disconnected(net.f.dpids[name])
    wait(net, 3.2)
    assert net.crossing("a0_0") == [] and net.crossing("a1_0") == []


def test_a_port_down_during_a_round_is_re_planned_at_once():
    net = running()
    order = sorted(net.f.dpids.values())
    restart(net, order)
    for d in order[:10]:
        wait(net, 0.5)
        back(net, d)
    wait(net, 3.0)
    up = [n for n in net.f.switches() if net.f.dpids[n] in order[:10]]
    link = next((lo, hi) for lo, hi in net.f.links() if lo in up and hi in up and any(
        lo in r["path"] and hi in r["path"] for r in routes(net.svc)))
    net.svc.port_changed(net.f.dpids[link[0]], net.f.port(link[0], link[1]), False)
    assert "-".join(link) in fabric_view(net.svc)["links_down"]
    assert not any(link[0] in r["path"] and link[1] in r["path"] and
                   r["path"].index(link[1]) - r["path"].index(link[0]) in (-1, 1)
                   for r in routes(net.svc))


def test_round_members_away_are_not_judged_silent_by_their_peers_echoes():
    """Issue 59's echoes: the last switches of a restart to come back have empty tables and
    lose every echo; with one or two left (within one in eight) they would be judged silent
    and re-planned around at once. While the round is open they are not."""
    net = running()
    order = sorted(net.f.dpids.values())
    restart(net, order)
    for d in order[:-2]:
        wait(net, 0.5)
        back(net, d)
    wait(net, 5.0)  # every returned switch synchronised and sending echoes
    assert fabric_view(net.svc)["links_down"] == []
    assert not set(order[-2:]) & {d for d, s in net.svc.state.switches.items() if s.silent}
    for d in order[-2:]:
        back(net, d)
    wait(net, 2.0)
    assert fabric_view(net.svc)["links_down"] == []


def test_a_switch_not_in_a_round_is_still_judged_silent():
    net = running()
    a = net.f.dpids["a0_0"]
    net.dead.add(a)
    net.svc.switch_disconnected(a)
    wait(net, 1.0)
    assert net.crossing("a0_0") == []


def clock_pair(start=1000.0):
    """(wall, monotonic): fake clocks that move together unless the wall clock is stepped."""
    return FakeClock(start), FakeClock(50.0)


def two_tier_service(wall, mono):
    from controller.model.clos import Clos
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, f, clock=wall, monotonic=mono, dead_after=3.0)
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    post(svc, "a", ["h0_0", "h1_0", "h2_0", "h3_0"])
    return f, svc


def advance(wall, mono, s):
    wall.now += s
    mono.now += s


def test_a_step_of_the_wall_clock_neither_fails_nor_revives_a_disconnected_switch():
    for step in (-60.0, 60.0):
        wall, mono = clock_pair()
        f, svc = two_tier_service(wall, mono)
        svc.switch_disconnected(f.dpids["s0"])
        advance(wall, mono, 1.0)
        wall.now += step  # NTP steps the wall clock
        svc.tick(probe=False)
        svc.expire()
        assert svc.fabric_view()["links_down"] == [], step  # 1 s of its 3 s grace
        due = svc.next_deadline()
        assert due is not None and abs(due - (svc.monotonic() + 2.0)) < 1e-9
        advance(wall, mono, 2.0)
        svc.expire()
        assert len(svc.fabric_view()["links_down"]) == 4, step  # failed, on time
        wall.now -= step  # stepped back again: still failed
        svc.tick(probe=False)
        assert len(svc.fabric_view()["links_down"]) == 4, step


def test_settings_of_the_round():
    s = Settings()
    assert (s.restart_grace, s.restart_quorum, s.restart_window) == (30.0, 3, 1.0)


def seen(n, now):
    from controller.service.state import SwitchSeen
    return {d: SwitchSeen(False, {}, now) for d in range(n)}


def test_switches_lost_further_apart_than_the_window_form_no_round():
    """Three switches lost 0.6 s apart: the first and the third are 1.2 s apart, more than
    ``restart_window`` (1 s): each keeps its own grace time."""
    rounds, switches, s = Restarts(), {}, Settings()
    for k in range(3):
        switches.update({k: seen(1, 10.0 + 0.6 * k)[0]})
        rounds.lost(k, 10.0 + 0.6 * k, switches, s)
    assert rounds.open == [] and all(x.held_until is None for x in switches.values())


def test_a_member_lost_again_within_its_round_is_held_to_the_round_end():
    rounds, s = Restarts(), Settings()
    switches = seen(4, 10.0)
    for d in range(4):
        rounds.lost(d, 10.0 + 0.01 * d, switches, s)
    assert len(rounds.open) == 1 and rounds.open[0].members == {0, 1, 2, 3}
    switches[0].connected = True  # back, then lost again 12 s later
    switches[0] = seen(1, 22.0)[0]
    rounds.lost(0, 22.0, switches, s)
    assert switches[0].held_until == 40.0 and switches[0].fails_at(3.0) == 40.0
    assert rounds.away(switches) == {0, 1, 2, 3}
    events, cause = rounds.step(40.0, switches, s, str)
    assert cause.startswith("restart round over: 4 of 4 switches still away after 30 s")
    assert rounds.open == [] and rounds.closed == {"returned": 0, "expired": 1}


def test_no_rounds_with_a_restart_grace_of_0():
    rounds, s = Restarts(), Settings(restart_grace=0)
    switches = seen(5, 10.0)
    for d in range(5):
        rounds.lost(d, 10.0, switches, s)
    assert rounds.open == [] and switches[0].fails_at(3.0) == 13.0
