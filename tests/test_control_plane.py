"""The state model and the reconciler on the fake switch tables: hitless reconnect and restart,
repair of drifted tables, a cut leaf pair that degrades only its own flows, ids that a URL can
address, and a state machine that checks every connected switch against the desired tables
after any sequence of requests and events."""
import json
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from controller.enforcement.desired import desired_tables
from controller.enforcement.openflow import COOKIE_STATIC
from controller.enforcement.openflow import rule as make_rule
from controller.model.clos import Clos
from controller.service import api
from controller.service.metrics import exposition
from controller.service.route_service import RouteService
from controller.service.store import StateStore
from emulation.harness.fake_switch import FakeSwitches
from tests.helpers import FakeClock


def wired(spines=2, leaves=4, hosts=2):
    return Clos.generate(spines, leaves, hosts, 0.01, wiring=True)


def start(f, switches=None, store=None, **kw):
    sw = switches or FakeSwitches(f.dpids.values())
    svc = RouteService(sw, f, store=store, **kw)
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    return sw, svc


def post(svc, doc):
    return api.handle(svc, "POST", "/v1/jobs", json.dumps(doc).encode())


def ring(jid, ranks, size=8e6, **extra):
    return {"id": jid, "collective": "ring_allreduce", "ranks": ranks, "bytes": size, **extra}


def tables_match(f, sw, svc):
    want = desired_tables(svc.state.fabric, svc.state.jobs.values())
    for dpid in svc.reconciler.installed:
        rules, groups = want.get(dpid, ([], []))
        assert set(sw.rules[dpid].values()) == set(rules), f.switch_of_dpid[dpid]
        assert set(sw.groups[dpid].values()) == set(groups), f.switch_of_dpid[dpid]
        shadow = svc.reconciler.installed[dpid]
        assert shadow.rules == sw.rules[dpid] and shadow.groups == sw.groups[dpid]


def test_reconnect_of_a_matching_switch_sends_nothing():
    f = wired()
    sw, svc = start(f)
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201
    sent, before = len(sw.sent), sw.snapshot()
    # a new control connection replaces the old one (as Ryu sees a quick flap)
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    assert len(sw.sent) == sent and sw.snapshot() == before
    assert svc.fabric_view()["ready"]


def test_a_flapping_control_connection_moves_nothing_until_the_grace_time_ends():
    f = wired()
    now = [100.0]
    sw, svc = start(f, clock=lambda: now[0], dead_after=3.0)
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201
    routes = api.handle(svc, "GET", "/v1/routes")[1]
    sent, before = len(sw.sent), sw.snapshot()
    s0 = f.dpids["s0"]
    svc.switch_disconnected(s0)
    now[0] += 2.0
    svc.tick()
    assert api.handle(svc, "GET", "/v1/routes")[1] == routes and len(sw.sent) == sent
    svc.switch_connected(s0, {p: True for p in f.ports["s0"].values()})
    assert len(sw.sent) == sent and sw.snapshot() == before
    svc.switch_disconnected(s0)  # this time it stays away: after 3 s its links count as down
    now[0] += 3.0
    svc.tick()
    assert {r["spine"] for r in api.handle(svc, "GET", "/v1/routes")[1]["routes"]} == {"s1"}
    assert svc.fabric_view()["links_down"] == ["l0-s0", "l1-s0", "l2-s0", "l3-s0"]


def test_a_lost_switch_fails_at_the_end_of_its_grace_time_not_at_a_tick():
    """``next_deadline`` says when the grace time of a lost switch ends; ``expire`` at that
    moment re-plans (the shell wakes for it), and just before it changes nothing."""
    f = wired()
    clock = FakeClock(100.0)
    sw, svc = start(f, clock=clock, dead_after=3.0)
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201
    assert svc.next_deadline() is None  # every switch connected
    routes, sent, events = api.handle(svc, "GET", "/v1/routes")[1], len(sw.sent), len(svc.state.events)
    clock.now = 100.4
    svc.switch_disconnected(f.dpids["s0"])
    assert svc.next_deadline() == 103.4
    clock.now = 103.4 - 1e-6
    svc.expire()
    assert api.handle(svc, "GET", "/v1/routes")[1] == routes and len(sw.sent) == sent
    assert len(svc.state.events) == events and svc.fabric_view()["links_down"] == []
    assert svc.next_deadline() == 103.4
    clock.now = 103.4
    svc.expire()
    assert {r["spine"] for r in api.handle(svc, "GET", "/v1/routes")[1]["routes"]} == {"s1"}
    assert svc.fabric_view()["links_down"] == ["l0-s0", "l1-s0", "l2-s0", "l3-s0"]
    assert len(sw.sent) > sent and svc.state.events[-1]["time"] == 103.4
    assert svc.state.events[-1]["cause"] == "switch disconnected for longer than 3 s"
    assert svc.next_deadline() is None  # counted failed: nothing left to wake for
    sent, events = len(sw.sent), len(svc.state.events)
    svc.tick(probe=False)  # the periodic backstop finds it done
    assert len(sw.sent) == sent and len(svc.state.events) == events


def test_a_switch_back_before_its_deadline_makes_the_deadline_a_no_op():
    f = wired()
    clock = FakeClock(100.0)
    sw, svc = start(f, clock=clock, dead_after=3.0)
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201
    s0, l1 = f.dpids["s0"], f.dpids["l1"]
    svc.switch_disconnected(s0)
    clock.now = 101.0
    svc.switch_disconnected(l1)
    assert svc.next_deadline() == 103.0  # the earliest of the two
    clock.now = 102.0
    svc.switch_connected(s0, {p: True for p in f.ports["s0"].values()})
    assert svc.next_deadline() == 104.0  # only l1's is left
    sent, before, events = len(sw.sent), sw.snapshot(), len(svc.state.events)
    clock.now = 103.0  # s0's old deadline: a wake-up then finds nothing to do
    svc.expire()
    assert len(sw.sent) == sent and sw.snapshot() == before
    assert len(svc.state.events) == events
    svc.join(SimpleNamespace(shares=None))  # a standby waits for no deadline: it does not act
    assert svc.next_deadline() is None


def test_switches_connecting_together_are_noted_at_once_and_one_that_fails_alone(tmp_path):
    """The shell notes every switch queued at a time in one call (``note_switches``): one
    whose notes raise is returned with its error, the others are noted, queued and then
    synchronised; it is noted when it connects again. A restart noted the same way sends
    nothing."""
    f = wired()
    path = str(tmp_path / "state.db")
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, f, store=StateStore(path))
    bad = f.dpids["l2"]
    up, fails = svc.finder.switch_up, [bad]

    def switch_up(dpid, *args):
        if dpid in fails:
            fails.remove(dpid)
            raise RuntimeError("boom")
        up(dpid, *args)
    svc.finder.switch_up = switch_up
    ports = {d: {p: True for p in f.ports[f.switch_of_dpid[d]].values()}
             for d in f.dpids.values()}
    failed = svc.note_switches([(d, ports[d], None) for d in f.dpids.values()])
    assert set(failed) == {bad} and str(failed[bad]) == "boom"
    assert svc.reconciler.pending == set(f.dpids.values()) - {bad}
    svc.sync_queued()
    assert set(svc.installed) == set(f.dpids.values()) - {bad}
    assert svc.note_switches([(bad, ports[bad], None)]) == {}  # connects again
    svc.sync_queued()
    assert svc.fabric_view()["ready"]
    tables_match(f, sw, svc)
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201
    sent, before = len(sw.sent), sw.snapshot()
    svc2 = RouteService(sw, f, store=StateStore(path))  # a restart: all noted at once
    assert svc2.note_switches([(d, ports[d], None) for d in f.dpids.values()]) == {}
    svc2.sync_queued()
    assert svc2.fabric_view()["ready"] and len(sw.sent) == sent and sw.snapshot() == before


def test_restart_with_state_file_sends_nothing_to_matching_switches(tmp_path):
    f = wired()
    path = str(tmp_path / "state.db")
    sw, svc = start(f, store=StateStore(path))
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"], mode="sr"))[0] == 201
    assert post(svc, {"id": "b", "flows": [{"src": "h0_1", "dst": "h2_1", "bytes": 7,
                                            "proto": "udp", "dport": 4791}]})[0] == 201
    sent, before = len(sw.sent), sw.snapshot()
    _, svc2 = start(f, switches=sw, store=StateStore(path))  # same switches, new process
    assert len(sw.sent) == sent and sw.snapshot() == before
    assert api.handle(svc2, "GET", "/v1/routes") == api.handle(svc, "GET", "/v1/routes")
    assert svc2.counters["messages_sent"] == 0


@pytest.mark.parametrize("repaired", [False, True])
def test_a_restart_with_a_link_down_keeps_it_down_until_both_ends_report(tmp_path, repaired):
    """A link seen down is stored (``links_down``); the new process holds it down until both
    its ends have reported, so a leaf that reconnects first keeps its tables for it (a
    moment of tables for it up sent 4 messages to l0 before). Repaired while the controller
    was down, both ends report it up and it is up again."""
    f = wired(3, 4, 2)
    path = str(tmp_path / "state.db")
    sw, svc = start(f, store=StateStore(path))
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201
    for a, b in (("l1", "s0"), ("s0", "l1")):
        svc.port_changed(f.dpids[a], f.port(a, b), False)
    assert StateStore(path).load()["links_down"] == [["l1", "s0"]]
    sent, before = len(sw.sent), sw.snapshot()
    svc2 = RouteService(sw, f, store=StateStore(path))
    assert svc2.state.fabric.down == {("l1", "s0")}
    for name in ["l0", "l2", "l3", "l1", "s1", "s2", "s0"]:  # leaves first, l1 and s0 last
        ports = {p: True for p in f.ports[name].values()}
        if not repaired and name in ("l1", "s0"):
            ports[f.port(name, "s0" if name == "l1" else "l1")] = False
        svc2.switch_connected(f.dpids[name], ports)
        if name != "s0":  # s0 not seen yet: the link is still held down
            assert ("l1", "s0") in svc2.state.fabric.down and len(sw.sent) == sent
    if repaired:
        assert svc2.state.fabric.down == set() and len(sw.sent) > sent
        assert "links_down" not in StateStore(path).load()
    else:
        assert svc2.state.fabric.down == {("l1", "s0")}
        assert len(sw.sent) == sent and sw.snapshot() == before
    tables_match(f, sw, svc2)


def test_links_held_down_from_the_state_file_do_not_follow_a_new_fabric(tmp_path):
    """A fabric declared over REST has links of its own: the links the state file held
    down (here l1-s0, with neither end reconnected) are not carried over to it."""
    f = wired(3, 4, 2)
    path = str(tmp_path / "state.db")
    sw, svc = start(f, store=StateStore(path))
    for a, b in (("l1", "s0"), ("s0", "l1")):
        svc.port_changed(f.dpids[a], f.port(a, b), False)
    fat = Clos.fat_tree(4).wire()
    svc2 = RouteService(FakeSwitches(fat.dpids.values()), f, store=StateStore(path))
    assert svc2.state.fabric.down == {("l1", "s0")}
    code, doc = api.handle(svc2, "PUT", "/v1/fabric", json.dumps(fat.to_dict()).encode())
    assert code == 200, doc
    svc2.switch_connected(fat.dpids["l0"], {p: True for p in fat.ports["l0"].values()})
    assert svc2.state.fabric.down == set() and api.handle(svc2, "GET", "/v1/fabric")[0] == 200


def test_drifted_table_is_repaired_with_exactly_the_difference():
    f = wired()
    sw, svc = start(f)
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201
    l1 = f.dpids["l1"]
    planned = next(r for r in sw.rules[l1].values() if r.cookie != COOKIE_STATIC)
    del sw.rules[l1][planned.key]  # an entry lost
    foreign = make_rule(l1, 0, 7, {"eth_type": 0x0800, "ip_dscp": 1}, cookie=0x99)
    sw.rules[l1][foreign.key] = foreign  # an entry nobody planned
    kept = {k: v for k, v in sw.rules[l1].items() if k != foreign.key}
    sent = len(sw.sent)
    svc.switch_connected(l1, {p: True for p in f.ports["l1"].values()})
    msgs = sw.sent[sent:]
    assert [(m.kind, m.rule) for m in msgs] == [("flow_add", planned), ("flow_delete", foreign)]
    assert all(sw.rules[l1][k] is v for k, v in kept.items())  # untouched entries
    tables_match(f, sw, svc)


def test_a_switch_that_does_not_answer_stays_pending_and_is_repaired_later():
    f = wired()
    sw = FakeSwitches(f.dpids.values())
    sw.offline = {f.dpids["l2"]}
    _, svc = start(f, switches=sw)
    view = svc.fabric_view()
    assert not view["ready"] and view["seen"]["l2"]["pending"]
    sw.offline = set()
    svc.switch_connected(f.dpids["l2"], {p: True for p in f.ports["l2"].values()})
    assert svc.fabric_view()["ready"]
    tables_match(f, sw, svc)


def cut_l0_l1(f, svc):
    """l0 loses s0 and l1 loses s1: the pair (l0, l1) has no spine in common."""
    svc.port_changed(f.dpids["l0"], f.port("l0", "s0"), False)
    svc.port_changed(f.dpids["l1"], f.port("l1", "s1"), False)


def test_a_cut_leaf_pair_degrades_only_its_own_flows():
    f = wired()
    sw, svc = start(f)
    assert post(svc, ring("cut", ["h0_0", "h1_0"]))[0] == 201
    assert post(svc, ring("other", ["h2_0", "h3_0"]))[0] == 201
    cut_l0_l1(f, svc)
    fabric = api.handle(svc, "GET", "/v1/fabric")[1]
    assert fabric["unroutable_pairs"] == [
        {"src_leaf": "l0", "dst_leaf": "l1", "flows": 1, "jobs": ["cut"]},
        {"src_leaf": "l1", "dst_leaf": "l0", "flows": 1, "jobs": ["cut"]}]
    code, job = api.handle(svc, "GET", "/v1/jobs/cut")
    assert code == 200 and job["predicted_allreduce_s"] is None and "no alive path" in \
        job["prediction_error"] and all(r.get("unroutable") for r in job["routes"])
    code, other = api.handle(svc, "GET", "/v1/jobs/other")
    assert code == 200 and other["predicted_allreduce_s"] == pytest.approx(other["ideal_s"])
    assert api.handle(svc, "GET", "/v1/links")[0] == 200
    assert api.handle(svc, "GET", "/v1/routes")[0] == 200
    assert api.handle(svc, "POST", "/v1/optimize")[0] == 200
    assert post(svc, ring("new", ["h2_1", "h3_1"]))[0] == 201
    code, doc = post(svc, ring("bad", ["h0_1", "h1_1"]))
    assert code == 409 and "no alive path between leaves l0 and l1" in doc["error"]
    page = exposition(svc)[0].decode()
    assert 'mlroute_unroutable_flows{dst_leaf="l1",src_leaf="l0"} 1.0' in page
    tables_match(f, sw, svc)
    # a link comes back: the cut flows are planned and installed again
    svc.port_changed(f.dpids["l0"], f.port("l0", "s0"), True)
    job = api.handle(svc, "GET", "/v1/jobs/cut")[1]
    assert not any(r.get("unroutable") for r in job["routes"])
    assert job["predicted_allreduce_s"] == pytest.approx(job["ideal_s"])
    assert api.handle(svc, "GET", "/v1/fabric")[1]["unroutable_pairs"] == []
    tables_match(f, sw, svc)


@pytest.mark.parametrize("jid", ["a/b", "a b", "..%2f", "x" * 65, "é"])
def test_ids_a_url_cannot_address_are_refused(jid):
    f = wired()
    sw, svc = start(f)
    before = sw.snapshot()
    code, doc = post(svc, ring(jid, ["h0_0", "h1_0"]))
    assert code == 400 and "id" in doc["error"]
    assert sw.snapshot() == before and svc.jobs == {}


def test_deeply_nested_json_is_a_400():
    f = wired()
    _, svc = start(f)
    code, doc = api.handle(svc, "POST", "/v1/jobs", b"[" * 100_000)
    assert code == 400 and "nested" in doc["error"]


def test_repeated_flow_in_a_job_is_a_400():
    f = wired()
    _, svc = start(f)
    code, doc = post(svc, {"id": "d", "rings": [["h0_0", "h1_0"], ["h0_0", "h1_0"]],
                           "collective": "ring_allreduce", "bytes": 1e6})
    assert code == 400 and "twice" in doc["error"]


def test_state_file_of_version_1_is_read(tmp_path):
    f = wired()
    store = StateStore(str(tmp_path / "s.db"))
    job = ring("old", ["h0_0", "h1_0", "h2_0"])
    store.save({"version": 1, "next_number": 5, "fabric": f.to_dict(),
                "jobs": [{"job": job, "number": 4, "algorithm": "greedy", "mode": "flow",
                          "created": 1.0, "routes": [[[0, 1.0]], [[1, 1.0]], [[0, 1.0]]]}]})
    _, svc = start(f, store=store)
    routes = api.handle(svc, "GET", "/v1/routes")[1]["routes"]
    assert [r["spine"] for r in routes] == ["s0", "s1", "s0"]
    assert post(svc, ring("new", ["h0_1", "h1_1"]))[1]["number"] == 5


def test_state_file_of_spine_indices_is_read_and_written_as_paths(tmp_path):
    """A record of a leaf-spine written before the controller served it as a Clos (a route
    part a spine index) is read as the path leaf, spine, leaf, and written back as paths."""
    f = wired()
    store = StateStore(str(tmp_path / "s.db"))
    job = ring("old", ["h0_0", "h1_0", "h2_0"])
    keys = [["h0_0", "h1_0", 6, 0, 0], ["h1_0", "h2_0", 6, 0, 0], ["h2_0", "h0_0", 6, 0, 0]]
    store.save({"version": 2, "next_number": 5, "fabric": f.to_dict(),
                "jobs": [{"job": job, "number": 4, "algorithm": "greedy", "mode": "flow",
                          "created": 1.0, "routes": [[k, [[s, 1.0]]] for k, s in
                                                     zip(keys, (0, 1, 0))]}]})
    _, svc = start(f, store=store)
    routes = api.handle(svc, "GET", "/v1/routes")[1]["routes"]
    assert [r["spine"] for r in routes] == ["s0", "s1", "s0"]
    assert post(svc, ring("new", ["h0_1", "h1_1"]))[0] == 201  # the intent is stored again
    old = next(x for x in store.load()["jobs"] if x["job"]["id"] == "old")
    assert [p for _, p in old["routes"]] == [[[["l0", "s0", "l1"], 1.0]],
                                             [[["l1", "s1", "l2"], 1.0]],
                                             [[["l2", "s0", "l0"], 1.0]]]


# ---- state machine --------------------------------------------------------------------------
HOSTS = [f"h{l}_{k}" for l in range(4) for k in range(2)]


class ControlPlane(RuleBasedStateMachine):
    """Any sequence of requests and events; after each, every synchronised switch holds exactly
    the desired tables, and a connected switch is synchronised."""

    def __init__(self):
        super().__init__()
        self.f = Clos.generate(3, 4, 2, 0.01, wiring=True)
        self.sw = FakeSwitches(self.f.dpids.values())
        self.store = StateStore(":memory:")
        _, self.svc = start(self.f, switches=self.sw, store=self.store)
        self.n = 0

    def ports(self, name):
        return {p: True for p in self.f.ports[name].values()}

    @rule(ranks=st.lists(st.sampled_from(HOSTS), min_size=2, max_size=5, unique=True),
          alg=st.sampled_from(["greedy", "split", "ecmp", "edge-coloring", "annealing"]),
          mode=st.sampled_from(["flow", "sr"]))
    def post_job(self, ranks, alg, mode):
        self.n += 1
        code, doc = post(self.svc, ring(f"j{self.n}", ranks, algorithm=alg, mode=mode,
                                        dport=5000 + self.n))
        assert code in (201, 409), doc

    @precondition(lambda self: self.svc.jobs)
    @rule(data=st.data())
    def delete_job(self, data):
        jid = data.draw(st.sampled_from(sorted(self.svc.jobs)))
        assert api.handle(self.svc, "DELETE", f"/v1/jobs/{jid}")[0] == 200

    @rule(leaf=st.sampled_from(["l0", "l1", "l2", "l3"]), spine=st.sampled_from(["s0", "s1", "s2"]),
          up=st.booleans())
    def link(self, leaf, spine, up):
        self.svc.port_changed(self.f.dpids[leaf], self.f.port(leaf, spine), up)
        self.svc.port_changed(self.f.dpids[spine], self.f.port(spine, leaf), up)

    @rule(name=st.sampled_from(["l0", "l1", "l2", "l3", "s0", "s1", "s2"]), drift=st.booleans())
    def reconnect(self, name, drift):
        dpid = self.f.dpids[name]
        self.svc.switch_disconnected(dpid)
        if drift and self.sw.rules[dpid]:
            key = sorted(self.sw.rules[dpid])[0]
            del self.sw.rules[dpid][key]
            junk = make_rule(dpid, 0, 3, {"eth_type": 0x0800, "ip_dscp": 2}, cookie=0x77)
            self.sw.rules[dpid][junk.key] = junk
        self.svc.switch_connected(dpid, self.ports(name))

    @rule()
    def optimize(self):
        assert api.handle(self.svc, "POST", "/v1/optimize")[0] == 200

    @rule()
    def restart(self):
        sent = len(self.sw.sent)
        before = self.sw.snapshot()
        down = {(l, s) for l, s in self.svc.state.fabric.down}
        svc = RouteService(self.sw, self.f, store=self.store)
        for name, dpid in self.f.dpids.items():
            ports = self.ports(name)
            for l, s in down:  # the new process sees the same ports down
                if name == l:
                    ports[self.f.port(l, s)] = False
                if name == s:
                    ports[self.f.port(s, l)] = False
            svc.switch_connected(dpid, ports)
        self.svc = svc
        # every switch matched before the restart: nothing is sent, nothing changes
        assert len(self.sw.sent) == sent and self.sw.snapshot() == before

    @invariant()
    def switches_hold_the_desired_tables(self):
        tables_match(self.f, self.sw, self.svc)
        connected = {d for d, s in self.svc.state.switches.items() if s.connected}
        assert connected <= set(self.svc.reconciler.installed)
        f = self.svc.state.fabric  # served as a Clos: a part is its path, leaf-spine-leaf
        for r in self.svc.jobs.values():
            for _, parts in r.flows_with_parts():
                for path, _share in parts or ():
                    assert any((leaf, path[1]) not in f.down for leaf in f.leaves)

    @invariant()
    def views_answer(self):
        for path in ("/v1/fabric", "/v1/links", "/v1/routes", "/v1/jobs"):
            assert api.handle(self.svc, "GET", path)[0] == 200
        for jid in self.svc.jobs:
            assert api.handle(self.svc, "GET", f"/v1/jobs/{jid}")[0] == 200
        exposition(self.svc)


ControlPlane.TestCase.settings = settings(max_examples=8, stateful_step_count=12,
                                          deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
TestControlPlane = ControlPlane.TestCase


@pytest.mark.slow
class TestControlPlaneInFull(TestControlPlane):
    """The same machine with the 25 runs of before (issue 60: 8 in the fast tier)."""
    settings = settings(max_examples=25, stateful_step_count=12, deadline=None,
                        suppress_health_check=[HealthCheck.too_slow])


def test_anytime_planning_installs_a_better_routing_found_off_path():
    from controller.planners.auto import auto
    f = wired(2, 4, 2)
    sw, svc = start(f, planner_opts={"auto": {"ilp_time_limit": 1.0}})
    # ECMP collides on this ring; pretend its group awaits a proof, as auto's would
    assert post(svc, ring("e", ["h0_0", "h1_0", "h2_0", "h3_0", "h0_1", "h1_1", "h2_1", "h3_1"],
                          algorithm="ecmp", dport=1))[0] == 201
    before = api.handle(svc, "GET", "/v1/links")[1]["summary"]["max_link_load"]
    svc.unproven.add(("ecmp", "flows"))
    result = svc.improve(lambda p, previous, objective, budget: auto(p, ilp_time_limit=budget))
    after = api.handle(svc, "GET", "/v1/links")[1]["summary"]["max_link_load"]
    if before > 1:
        assert result["improved"] and after == 1 and result["moved_flows"] >= 1
        assert svc.state.events[-1]["cause"].startswith("off-path")
    else:
        assert result["improved"] is False and after == before
    tables_match(f, sw, svc)
    # a change while the ILP runs makes its result stale: nothing is installed
    svc.unproven.add(("ecmp", "flows"))

    def slow(p, previous, objective, budget):
        post(svc, ring("x", ["h0_0", "h3_1"], dport=2))
        return auto(p, ilp_time_limit=budget)
    assert svc.improve(slow)["stale"]
    tables_match(f, sw, svc)


def test_links_that_come_back_are_used_after_the_hold_down():
    f = wired(2, 4, 2)
    now = [0.0]
    sw, svc = start(f, clock=lambda: now[0], hold_down=5.0)
    svc.port_changed(f.dpids["l0"], f.port("l0", "s1"), False)
    assert post(svc, ring("r", ["h0_0", "h1_0", "h0_1", "h1_1"]))[0] == 201
    load = api.handle(svc, "GET", "/v1/links")[1]["summary"]["max_link_load"]
    svc.port_changed(f.dpids["l0"], f.port("l0", "s1"), True)
    now[0] += 2
    svc.tick()
    assert api.handle(svc, "GET", "/v1/links")[1]["summary"]["max_link_load"] == load
    now[0] += 4
    svc.tick()
    assert api.handle(svc, "GET", "/v1/links")[1]["summary"]["max_link_load"] == 1 < load
    assert "re-optimised" in svc.state.events[-1]["cause"]
    tables_match(f, sw, svc)


def test_ring_order_advice_is_returned_and_used_only_when_asked():
    f = wired(2, 4, 2)
    sw, svc = start(f)
    ranks = ["h0_0", "h1_0", "h0_1", "h1_1"]  # crosses l0-l1 four times; grouped: twice
    code, advice = api.handle(svc, "POST", "/v1/advise", json.dumps(ring("adv", ranks)).encode())
    assert code == 200 and advice["inter_leaf_flows"] == {"given": 4, "advised": 2}
    assert svc.jobs == {}  # nothing installed
    code, doc = post(svc, ring("given", ranks))
    assert code == 201 and doc["job"]["rings"] == [ranks] and "ring_order_advice" not in doc
    code, doc = post(svc, ring("adv", ["h2_0", "h3_0", "h2_1", "h3_1"], ring_order="advised"))
    assert code == 201 and doc["ring_order_advice"]["rings"][0]["inter_leaf_flows"] == \
        {"given": 4, "advised": 2}
    crossing = [r for r in doc["routes"] if f.hosts[r["src"]] != f.hosts[r["dst"]]]
    assert len(crossing) == 2
    code, doc = post(svc, ring("bad", ranks, ring_order="sideways"))
    assert code == 400 and "ring_order" in doc["error"]
    code, doc = api.handle(svc, "POST", "/v1/advise", json.dumps(
        {"id": "x", "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1}]}).encode())
    assert code == 400 and "ring" in doc["error"]
