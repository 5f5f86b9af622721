"""Link state from the hosts' probes (``service/pathstate.py``, ``service/damping.py``): one
host can neither fake nor flap a link, a failed path blames the smallest explanation, a link
comes back on positive evidence only, and a report costs what its size costs."""
from __future__ import annotations

import json
import random
import time
from itertools import islice

import pytest

from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.clos_wiring import wire
from controller.service import api, damping, pathstate
from controller.service.pathstate import PathEvidence, reported
from controller.service.route_service import RouteService
from controller.service.segments import shortest_paths
from controller.service.settings import Settings
from controller.service.store import StateStore
from controller.shell import flags
from controller.shell.static import StaticSwitches


def service_on(fabric, store=None, **options) -> RouteService:
    switches = StaticSwitches(fabric)
    svc = RouteService(switches, fabric, mode="srv6", algorithm="greedy", store=store,
                       **options)
    svc.note_switches(switches.connected_now())
    svc.sync_queued()
    return svc


def fat_tree(k: int = 4) -> Clos:
    c = Clos.fat_tree(k)
    return c.wire(wire(c))


def post(svc, host, doc):
    return api.handle(svc, "POST", f"/v1/hosts/{host}/probes", json.dumps(doc).encode())


def report_of(svc, host, dst_leaves, broken=(), lost=None) -> dict:
    """What ``host``'s agent reports: every shortest path (as ``probe_paths``, links down
    included) from its leaf to each of ``dst_leaves``; a path fails when it crosses a
    direction in ``broken`` or ``lost()`` says its probe was lost."""
    whole = svc.state.fabric.with_down(())
    leaf = svc.state.fabric.host_leaves[host][0]
    paths = []
    for dst in dst_leaves:
        if dst == leaf:
            continue
        for p in islice(shortest_paths(whole, leaf, dst), 16):
            ok = not any(hop in broken for hop in zip(p, p[1:])) and not (lost and lost())
            paths.append({"path": p, "ok": ok})
    return {"paths": paths}


def both(a, b):
    return {(a, b), (b, a)}


def down_links(svc) -> set:
    return {tuple(x[:2]) for x in svc.state.fabric.down}


# ---- what a report may say ---------------------------------------------------------------------
def test_a_path_from_another_leaf_is_refused_and_nothing_is_stored():
    """One host reporting a path between two other pods as failed took 4 links down."""
    svc = service_on(fat_tree())
    doc = {"paths": [{"path": ["l0", "a0_0", "l1"], "ok": True},
                     {"path": ["l2", "a1_0", "c0_0", "a2_0", "l4"], "ok": False}]}
    status, answer = post(svc, "h0_0", doc)
    assert status == 400
    assert "path 1 (l2 a1_0 c0_0 a2_0 l4) starts at l2, not at h0_0's leaf (l0)" in \
        answer["error"]
    assert svc.paths.seen == {} and svc.paths.working == {} and not svc.state.fabric.down


def test_switches_no_cable_joins_answer_400_and_later_reports_still_work():
    """The uncabled pair was stored first, then answered 500 (``KeyError``), and so did every
    later report of any host."""
    svc = service_on(fat_tree())
    doc = {"paths": [{"path": ["l0", "a0_0", "c1_0", "a1_1", "l2"], "ok": False},
                     {"path": ["l0", "a0_1", "c1_0", "a1_1", "l2"], "ok": True}]}
    status, answer = post(svc, "h0_0", doc)
    assert status == 400
    assert answer["error"] == ("probe report: path 0 (l0 a0_0 c1_0 a1_1 l2): hop a0_0 -> c1_0 "
                               "is no cable of the fabric")
    assert svc.paths.seen == {}
    status, answer = post(svc, "h0_1", report_of(svc, "h0_1", ["l2"]))
    assert (status, answer) == (200, {"host": "h0_1", "links_down": [], "suppressed": []})


def test_a_refused_report_is_counted_and_named_in_ready_until_one_is_taken():
    """Issue 73: a refused probe report was logged at DEBUG by the agent and counted
    nowhere; now /v1/ready and the metrics name the host until its next report is taken."""
    from controller.service import metrics
    svc = service_on(fat_tree())
    bad = {"paths": [{"path": ["l2", "a1_0", "l3"], "ok": True}]}  # not from h0_0's leaf
    assert post(svc, "h0_0", bad)[0] == 400
    assert post(svc, "h0_0", bad)[0] == 400
    hosts = api.handle(svc, "GET", "/v1/ready")[1]["hosts"]
    assert hosts["report_refused"] == 1
    assert hosts["report_refused_hosts"]["h0_0"]["count"] == 2
    assert "starts at l2" in hosts["report_refused_hosts"]["h0_0"]["error"]
    assert b"mlroute_agents_report_refused 1.0" in metrics.exposition(svc)[0]
    assert post(svc, "h0_0", report_of(svc, "h0_0", ["l2"]))[0] == 200
    assert api.handle(svc, "GET", "/v1/ready")[1]["hosts"]["report_refused"] == 0


def test_malformed_reports_are_refused_by_name():
    svc = service_on(fat_tree())
    cases = [({"paths": [{"path": ["l0", ["a0_0"]], "ok": True}]}, "no switch ['a0_0']"),
             ({"paths": [{"path": ["l0"] + ["a0_0", "l1"] * 8, "ok": True}]}, "2 to 16"),
             ({"paths": [{"path": ["l0", "a0_0"], "ok": "yes"}]}, "'ok' (true or false)"),
             ({"paths": []}, None),
             ({"paths": [], "refused": {"version": 3, "error": "x"}}, "'refused' must be")]
    for doc, error in cases:
        status, answer = post(svc, "h0_0", doc)
        assert (status == 200) if error is None else (status == 400 and error in answer["error"])
    assert post(svc, "nobody", {"paths": []})[0] == 404


def test_a_refused_document_is_kept_per_host_capped_and_shown():
    svc = service_on(fat_tree())
    doc = {**report_of(svc, "h0_0", ["l2"]), "future": [1],  # unknown keys: ignored
           "refused": {"version": "v" * 300, "error": "e" * 900}}
    assert post(svc, "h0_0", doc)[0] == 200
    shown = svc.paths.status(time.monotonic())["refused"]["h0_0"]
    assert (len(shown["version"]), len(shown["error"])) == (200, 500)
    assert post(svc, "h0_0", {**doc, "refused": None})[0] == 200
    assert svc.paths.status(time.monotonic())["refused"] == {}


# ---- who may take a link down ------------------------------------------------------------------
def test_one_host_failing_while_two_others_cross_the_link_fine_keeps_it_up():
    svc = service_on(fat_tree())
    broken = {("c1_1", "a1_1")}
    reported(svc, "h0_1", report_of(svc, "h0_1", ["l2"]), 0.0)  # crosses c1_1 -> a1_1 fine
    reported(svc, "h4_0", report_of(svc, "h4_0", ["l2"]), 0.5)  # likewise, from pod 2
    answer = reported(svc, "h0_0", report_of(svc, "h0_0", ["l2"], broken), 1.0)
    assert answer["links_down"] == [] and not svc.state.fabric.down


def test_a_direction_is_judged_apart_and_one_host_is_no_quorum():
    """Ten hosts crossing a link downwards did not protect it from one host saying the upward
    direction fails; now one host is no quorum, and two are, whatever the other direction."""
    svc = service_on(fat_tree())
    up = {("a1_1", "c1_1")}  # pod 1 upwards; the other pods cross c1_1 -> a1_1 fine
    for t, host in enumerate(["h0_0", "h0_1", "h1_0", "h4_0", "h4_1", "h6_0"]):
        reported(svc, host, report_of(svc, host, ["l0", "l2", "l3"]), float(t))
    reported(svc, "h2_0", report_of(svc, "h2_0", ["l0"], up), 10.0)
    assert not svc.state.fabric.down  # one host
    answer = reported(svc, "h3_0", report_of(svc, "h3_0", ["l0"], up), 11.0)
    assert answer["links_down"] == [["a1_1", "c1_1"]]
    assert down_links(svc) == {("a1_1", "c1_1")}  # the whole link, every member


def test_a_flows_two_ends_each_seeing_one_way_make_a_quorum():
    """A cable that fails fails both ways: a flow's source (its data) and its destination
    (the part back) each see one direction, and together they are two hosts."""
    ev = PathEvidence()
    ev.report("h0", [(["l0", "s0", "l1"], False), (["l0", "s1", "l1"], True)], now=0.0)
    ev.report("h1", [(["l1", "s0", "l0"], False), (["l1", "s1", "l0"], True)], now=0.0)
    down, _ = ev.judge(now=0.0)
    assert down == {("l0", "s0"), ("l1", "s0")}  # a tie: nothing tells the two links apart


def test_the_quorum_is_a_setting_and_an_option():
    assert Settings().probe_quorum == 2 == pathstate.QUORUM
    opt = next(o for o in flags.OPTS if o.name == "mlroute-probe-quorum")
    assert opt.default == Settings.probe_quorum
    with pytest.raises(InputError, match="probe quorum"):
        Settings(probe_quorum=0)
    svc = service_on(fat_tree(), probe_quorum=1)
    reported(svc, "h4_0", report_of(svc, "h4_0", ["l0"]), 0.0)  # clears c1_1 -> a0_1
    answer = reported(svc, "h2_0", report_of(svc, "h2_0", ["l0"], {("a1_1", "c1_1")}), 0.0)
    assert answer["links_down"] == [["a1_1", "c1_1"]]


def test_only_the_failed_link_goes_down_with_sparse_evidence():
    """k = 16's a9_1-c1_1 at k = 4: a1_1-c1_1 fails; the hosts of pods 0 and 2 probe only
    towards l2 (pod 1), so nothing clears their first core hops, which went down too."""
    svc = service_on(fat_tree())
    broken = both("a1_1", "c1_1")
    reported(svc, "h0_0", report_of(svc, "h0_0", ["l2"], broken), 0.0)
    answer = reported(svc, "h4_0", report_of(svc, "h4_0", ["l2"], broken), 1.0)
    assert answer["links_down"] == [["a1_1", "c1_1"]]
    assert down_links(svc) == {("a1_1", "c1_1")}


def test_a_tie_blames_every_tied_link():
    """Nothing tells l0-a0_0 from a0_0-l1 when the only failed paths cross both: both go."""
    ev = PathEvidence()
    for host in ("h0", "h1"):
        ev.report(host, [(["l0", "a0_0", "l1"], False), (["l0", "a0_1", "l1"], True)], 0.0)
    assert ev.judge(0.0) == ({("a0_0", "l0"), ("a0_0", "l1")}, set())


def test_a_host_reaching_a_leaf_by_no_working_path_blames_nothing_there():
    svc = service_on(fat_tree())
    everything = {hop for lo, up in svc.state.fabric.links() for hop in both(lo, up)}
    for t, host in enumerate(["h0_0", "h0_1"]):
        reported(svc, host, report_of(svc, host, ["l2"], everything), float(t))
    assert not svc.state.fabric.down


# ---- how a link comes back ---------------------------------------------------------------------
def test_a_link_down_stays_down_without_reports_and_comes_back_on_a_working_probe():
    """It came back by itself 10 s later, the reports aged out, with no probe answering."""
    svc = service_on(fat_tree())
    broken = both("a1_1", "c1_1")
    reported(svc, "h0_0", report_of(svc, "h0_0", ["l2"], broken), 0.0)
    reported(svc, "h4_0", report_of(svc, "h4_0", ["l2"], broken), 1.0)
    assert down_links(svc) == {("a1_1", "c1_1")}
    answer = reported(svc, "h6_0", {"paths": [{"path": ["l6", "a3_0", "l7"], "ok": True}]},
                      61.0)  # a minute without a word on it
    assert answer["links_down"] == [["a1_1", "c1_1"]] and down_links(svc)
    answer = reported(svc, "h0_0", report_of(svc, "h0_0", ["l2"]), 62.0)  # it answers
    assert answer["links_down"] == [] and not svc.state.fabric.down


def test_a_link_comes_back_only_once_every_failed_direction_answers():
    ev = PathEvidence()
    ev.report("h0", [(["l0", "s0", "l1"], False), (["l0", "s1", "l1"], True)], 0.0)
    ev.report("h2", [(["l2", "s0", "l1"], False), (["l2", "s1", "l1"], True)], 1.0)
    ev.report("h1", [(["l1", "s0", "l0"], False), (["l1", "s1", "l0"], True)], 2.0)
    ev.report("h1b", [(["l1", "s0", "l2"], False), (["l1", "s1", "l2"], True)], 3.0)
    assert ev.judge(3.0) == ({("l1", "s0")}, set())
    assert set(ev.held[("l1", "s0")].failed) == {("s0", "l1"), ("l1", "s0")}
    ev.report("h1", [(["l1", "s0", "l0"], True), (["l1", "s1", "l0"], True)], 4.0)
    ev.report("h1b", [(["l1", "s0", "l2"], True), (["l1", "s1", "l2"], True)], 4.0)
    assert ev.judge(4.0) == (set(), set())  # l1 -> s0 answers, s0 -> l1 not yet
    ev.report("h0", [(["l0", "s0", "l1"], True), (["l0", "s1", "l1"], True)], 5.0)
    assert ev.judge(5.0) == (set(), {("l1", "s0")})


def test_a_link_the_first_reports_named_comes_back_when_later_ones_explain_them_better():
    """The first two hosts of pod 0 to report a failed a1_1-c1_1 name a0_1-c1_1 as well (a
    tie); pod 2's report shows the failed paths share a1_1-c1_1 alone."""
    svc = service_on(fat_tree())
    broken = both("a1_1", "c1_1")
    for t, host in enumerate(["h0_0", "h0_1"]):
        reported(svc, host, report_of(svc, host, ["l2"], broken), float(t))
    assert down_links(svc) == {("a0_1", "c1_1"), ("a1_1", "c1_1")}
    reported(svc, "h4_0", report_of(svc, "h4_0", ["l2"], broken), 2.0)
    assert down_links(svc) == {("a1_1", "c1_1")}
    for t, host in enumerate(["h0_0", "h0_1", "h4_0"]):  # and it stays so
        reported(svc, host, report_of(svc, host, ["l2"], broken), 3.0 + t)
    assert down_links(svc) == {("a1_1", "c1_1")}


# ---- flapping -----------------------------------------------------------------------------------
def test_a_flapping_link_is_held_down_by_damping():
    """Two hosts see a link fail and work in turns every 5 s: it went down and up every time;
    damped, it is held down from its third down in 10 s, probes answering, for 25 s."""
    svc = service_on(fat_tree())
    broken = both("a1_1", "c1_1")
    transitions, was = [], False
    for i in range(12):  # two minutes
        now = 10.0 * i
        for dt, ok in ((0.0, False), (5.0, True)):
            for j, host in enumerate(("h0_0", "h4_0")):
                reported(svc, host, report_of(svc, host, ["l2"], () if ok else broken),
                         now + dt + 0.1 * j)
            is_down = bool(svc.state.fabric.down)
            if is_down != was:
                transitions.append(now + dt)
            was = is_down
    assert transitions[:5] == [0.0, 5.0, 10.0, 15.0, 20.0]  # the third down suppresses
    assert all(b - a >= 5.0 for a, b in zip(transitions, transitions[1:]))
    assert 25.0 not in transitions and 30.0 not in transitions  # held, probes answering
    per_minute = [sum(1 for t in transitions if m * 60 <= t < (m + 1) * 60) for m in range(2)]
    assert max(per_minute) <= 8, transitions  # undamped: 24 a minute


def test_a_suppressed_link_is_held_at_most_the_maximum_hold():
    d = damping.FlapDamping()
    for t in range(100):
        d.flapped("l", float(t))
    assert d.penalty("l", 99.0) == damping.CEILING
    assert d.suppressed("l", 99.0 + damping.MAX_HOLD_S - 0.1)
    assert not d.suppressed("l", 99.0 + damping.MAX_HOLD_S + 0.1)


def lossy_minute(svc, lossy: dict, seconds: float = 60.0, start: float = 0.0, period=2.0):
    """Every host reports every ``period`` s towards two leaves of other pods, the hosts of
    ``lossy`` losing that share of their probes; returns the links' ups and downs."""
    rng = random.Random(7)
    hosts = sorted(svc.state.fabric.host_leaves)
    before = svc.paths.changes
    t = start
    while t < start + seconds:
        for i, host in enumerate(hosts):
            pod = int(host[1:].split("_")[0]) // 2
            dst = [f"l{2 * ((pod + 1) % 4)}", f"l{2 * ((pod + 2) % 4) + 1}"]
            share = lossy.get(host, 0.0)
            reported(svc, host, report_of(svc, host, dst, lost=lambda: rng.random() < share),
                     t + i * period / len(hosts))
        t += period
    return svc.paths.changes - before


def test_a_host_losing_a_fifth_of_its_probes_causes_no_replan():
    svc = service_on(fat_tree())
    assert lossy_minute(svc, {"h0_0": 0.2}) == 0
    assert not svc.state.fabric.down
    assert svc.paths.status(60.0)["contradicting"] == ["h0_0"]  # others' probes answer


def test_two_lossy_hosts_on_one_link_replan_a_bounded_number_of_times():
    """h0_0 and h0_1 share their leaf's links; at 20% loss each their failed paths sometimes
    coincide: other hosts' working paths contradict them, damping bounds the rest."""
    svc = service_on(fat_tree())
    changes = lossy_minute(svc, {"h0_0": 0.2, "h0_1": 0.2}, seconds=300.0)
    assert changes / 5 <= 2, changes


# ---- hosts whose failures others contradict -----------------------------------------------------
def test_a_contradicted_host_is_counted_and_discounted_for_a_while():
    svc = service_on(fat_tree())
    fake = {("c1_1", "a1_1")}
    for t in (0.0, 2.0, 4.0):  # h0_0 says the path fails, h0_1 crosses it fine just after
        reported(svc, "h0_0", report_of(svc, "h0_0", ["l2"], fake), t)
        reported(svc, "h0_1", report_of(svc, "h0_1", ["l2"]), t + 1)
    assert svc.paths.status(5.0)["contradicting"] == ["h0_0"]
    broken = both("a1_1", "c1_1")  # later, a real failure: h0_0 does not count towards it
    reported(svc, "h0_0", report_of(svc, "h0_0", ["l2"], broken), 20.0)
    reported(svc, "h4_0", report_of(svc, "h4_0", ["l2"], broken), 21.0)
    assert not svc.state.fabric.down
    status = svc.paths.status(70.0)
    assert status["contradicting"] == [] and status["reporting"] == 0
    reported(svc, "h0_0", report_of(svc, "h0_0", ["l2"], broken), 70.0)
    reported(svc, "h4_0", report_of(svc, "h4_0", ["l2"], broken), 71.0)
    assert down_links(svc) == {("a1_1", "c1_1")}


def test_a_real_failure_contradicts_nobody():
    svc = service_on(fat_tree())
    broken = both("a1_1", "c1_1")
    for t in range(0, 30, 2):
        for j, host in enumerate(("h0_0", "h0_1", "h4_0", "h6_0")):
            reported(svc, host, report_of(svc, host, ["l2"], broken if t >= 10 else ()),
                     t + 0.1 * j)
    assert down_links(svc) == {("a1_1", "c1_1")}
    assert svc.paths.status(30.0)["contradicting"] == [] and svc.paths.contradicted == {}


# ---- a new master ------------------------------------------------------------------------------
def test_links_down_before_a_restart_come_back_on_positive_evidence_only(tmp_path):
    """The stored state had a link down; the restarted controller's static switches connected
    with every port up, and nothing held the link down: jobs were planned onto it."""
    store = StateStore(str(tmp_path / "state.db"))
    fabric = fat_tree()
    svc = service_on(fabric, store=store)
    broken = both("a1_1", "c1_1")
    reported(svc, "h0_0", report_of(svc, "h0_0", ["l2"], broken), 0.0)
    reported(svc, "h4_0", report_of(svc, "h4_0", ["l2"], broken), 1.0)
    assert store.load()["links_down"] == [["a1_1", "c1_1"]]  # the store keeps it
    again = service_on(fabric, store=store)
    assert again.state.presumed_down == {("a1_1", "c1_1")}
    assert not again.state.fabric.down  # what the restart loses without pathstate
    pathstate.restore(again, 100.0)  # the lead's call after a start or a takeover
    assert down_links(again) == {("a1_1", "c1_1")}
    reported(again, "h6_0", report_of(again, "h6_0", ["l0"]), 101.0)  # silent about it
    assert down_links(again) == {("a1_1", "c1_1")}
    reported(again, "h4_0", report_of(again, "h4_0", ["l2"]), 102.0)  # crosses it, works
    assert not again.state.fabric.down


def test_without_restore_the_first_report_takes_over_the_links_down(tmp_path):
    store = StateStore(str(tmp_path / "state.db"))
    fabric = fat_tree()
    svc = service_on(fabric, store=store)
    svc.ports_changed(pathstate.port_changes(fabric, {("a1_1", "c1_1")}, set()))
    assert down_links(svc) == {("a1_1", "c1_1")}
    svc.paths = PathEvidence()  # a new master: no evidence yet
    reported(svc, "h6_0", report_of(svc, "h6_0", ["l0"]), 0.0)
    assert down_links(svc) == {("a1_1", "c1_1")}
    reported(svc, "h0_0", report_of(svc, "h0_0", ["l2"]), 1.0)
    assert not svc.state.fabric.down


def test_port_changes_skip_links_the_fabric_lacks():
    fabric = fat_tree()
    assert pathstate.port_changes(fabric, {("l0", "c0_0")}, set()) == []


# ---- cost ---------------------------------------------------------------------------------------
def _per_report_seconds(hosts: int, reports: int = 3000) -> float:
    """Seconds per report, every host reporting 32 paths of 5 switches (k = 16's host probes
    two destination leaves, 16 paths each), a few of them failed (two lossy hosts)."""
    rng = random.Random(1)

    def paths(h):
        leaf, out = f"l{h // 8}", []
        for d in (1, 2):
            dst = f"l{(h // 8 + 8 * d) % max(hosts // 8, 1)}x"
            for j in range(16):
                a, c, b = f"a{h // 64}_{j % 8}", f"c{j % 8}_{j // 8}", f"a{d}_{j % 8}"
                out.append(([leaf, a, c, b, dst], not (h < 2 and rng.random() < 0.2)))
        return out
    ev = PathEvidence()
    docs = [paths(h) for h in range(hosts)]
    for h in range(hosts):
        ev.report(f"h{h}", docs[h], 0.0)
    best = float("inf")
    for trial in range(3):
        t0 = time.perf_counter()
        for i in range(reports):
            now = 1.0 + trial * 2 + i * 1e-3
            h = i % hosts
            ev.report(f"h{h}", docs[h], now)
            ev.judge(now)
        best = min(best, (time.perf_counter() - t0) / reports)
    return best


def test_a_report_costs_its_own_size_not_the_number_of_hosts():
    """Every report re-derived the link state from every fresh report: 21 ms at k = 16."""
    small, large = _per_report_seconds(100), _per_report_seconds(1000)
    assert large / small < 3, (small, large)


def test_a_host_of_several_planes_reports_from_any_of_its_leaves():
    fabric = Clos.leaf_spine(2, 2, 1, planes=2)
    leaves = fabric.host_leaves["h0_0"]
    assert len(leaves) == 2
    for leaf in leaves:
        spine = next(s for s in fabric.neighbours(leaf) if s in fabric.tier_of)
        other = next(x for x in fabric.neighbours(spine) if x != leaf)
        paths, refused = pathstate.parse_report(
            {"paths": [{"path": [leaf, spine, other], "ok": True}]}, fabric, "h0_0")
        assert paths == [([leaf, spine, other], True)] and refused is None
    with pytest.raises(InputError, match="not at h1_0's leaf"):
        pathstate.parse_report({"paths": [{"path": [leaves[1], spine, other], "ok": True}]},
                               fabric, "h1_0")
