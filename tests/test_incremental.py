"""What the controller computes incrementally or keeps between operations equals what a
computation from scratch gives: the links seen down (``state.failed_links``, an index of link
ends kept per fabric) against the definition, link by link; a fabric's static entries
computed together (link-state answers kept per plane) against each switch alone; the
desired tables kept between changes (``desired.DesiredTables``) against ``desired_tables``
after every operation of a sequence (posts in every mode, a conflict, deletes, a link down
and up, a switch away and back, a re-plan), with the switches holding exactly them, and the
plan kept per state version against one built now (links view, predictions); a diff of a
switch's job entries alone against a whole diff."""
from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from controller.enforcement.clos_rules import clos_all_static, clos_static_rules
from controller.enforcement.desired import DesiredTables, desired_tables, installed_plan
from controller.enforcement.openflow import GroupEntry, SwitchState, diff, diff_jobs, job_cookie, rule
from controller.enforcement.openflow import apply as apply_messages
from controller.errors import ConflictError
from controller.model.clos import Clos, as_clos
from controller.model.intent import JobRecord, flow_key
from controller.model.jobs import parse_job
from controller.service import api, views
from controller.service.predictions import predict_all
from controller.service.route_service import RouteService
from controller.service.state import SwitchSeen, failed_links, next_failure
from emulation.harness.fake_switch import FakeSwitches
from tests.helpers import FakeClock


def bundled_fat_tree() -> Clos:
    f = Clos.fat_tree(4, 2)
    f.bundles[("l0", "a0_1")] = 2
    f.bundles[("a0_0", "c0_1")] = 3
    return f.wire()


def failed_by_definition(declared, switches, now, dead_after) -> set:
    """Every link, both ends: a member is down where an end port says so or the end switch
    has been disconnected for ``dead_after`` seconds."""
    out = set()
    for lower, upper in declared.links():
        n = len(declared.ports_to(lower, upper))
        failed = set()
        for sw, peer in ((lower, upper), (upper, lower)):
            s = switches.get(declared.dpids.get(sw))
            if s is None:
                continue
            dead = not s.connected and now >= s.since + dead_after
            failed |= {m for m, port in enumerate(declared.ports_to(sw, peer))
                       if dead or s.ports.get(port) is False}
        if len(failed) == n:
            out.add((lower, upper))
        else:
            out |= {(lower, upper, m) for m in failed}
    return out


@pytest.mark.parametrize("fabric", [
    Clos.generate(3, 4, 2, wiring=True), Clos.fat_tree(4, 2).wire(), bundled_fat_tree(),
    Clos.leaf_spine(2, 3, 1, bundle=2).wire()], ids=["leaf-spine", "fat-tree", "bundled",
                                                      "leaf-spine-bundled"])
def test_failed_links_equal_the_definition_link_by_link(fabric):
    rng = random.Random(7)
    names = list(fabric.dpids)
    for _ in range(60):
        switches = {}
        for name in rng.sample(names, rng.randint(0, len(names))):
            ports = {p: rng.random() > 0.15 for p in ports_up(fabric, name)}
            connected = rng.random() > 0.1
            switches[fabric.dpids[name]] = SwitchSeen(connected, ports, rng.choice([0.0, 9.0]))
        got = failed_links(fabric, switches, now=10.0, dead_after=3.0)
        assert got == failed_by_definition(fabric, switches, 10.0, 3.0)


@pytest.mark.parametrize("fabric", [Clos.fat_tree(4, 2).wire(), bundled_fat_tree()],
                         ids=["fat-tree", "bundled"])
def test_next_failure_is_when_the_failed_links_next_change_by_the_clock(fabric):
    """``next_failure``: the failed links stay as they are until then, and change then (a
    grace time ends there); None when none runs, so nothing changes however long one waits."""
    rng = random.Random(11)
    names = list(fabric.dpids)
    for _ in range(60):
        switches = {}
        for name in rng.sample(names, rng.randint(0, len(names))):
            ports = {p: rng.random() > 0.1 for p in ports_up(fabric, name)}
            switches[fabric.dpids[name]] = SwitchSeen(rng.random() > 0.3, ports,
                                                      rng.uniform(5.0, 10.0))
        switches[0xdead] = SwitchSeen(False, {}, 9.0)  # not in the fabric: never waited for
        now = 10.0
        at = next_failure(fabric, switches, now, 3.0)
        failed_now = failed_links(fabric, switches, now, 3.0)
        if at is None:
            assert failed_links(fabric, switches, 1e9, 3.0) == failed_now
            continue
        assert at > now
        assert failed_links(fabric, switches, at - 1e-9, 3.0) == failed_now
        # then the switches whose grace time ends count as failed: as if every port were down
        ending = {d: SwitchSeen(True, {p: False for p in ports_up(fabric, fabric.switch_of_dpid[d])})
                  for d, s in switches.items() if not s.connected and s.since + 3.0 == at}
        assert ending
        assert failed_links(fabric, switches, at, 3.0) == failed_links(
            fabric, {**switches, **ending}, now, 3.0)


def test_alive_members_kept_on_a_degraded_fabric_equal_the_definition():
    rng = random.Random(3)
    base = bundled_fat_tree()
    links = base.links()
    for _ in range(20):
        down = set(rng.sample(links, 3)) | {("a0_0", "c0_1", rng.randrange(3))}
        f = base.with_down(down)
        f.down_switches = set(rng.sample(f.switches(), rng.randint(0, 2)))
        for _twice in range(2):  # computed, then kept
            for lower, upper in links:
                want = () if (lower, upper) in down or {lower, upper} & f.down_switches else \
                    tuple(m for m in range(f.bundle(lower, upper)) if (lower, upper, m) not in down)
                assert f.alive_members(lower, upper) == want, (lower, upper)


@pytest.mark.parametrize("down, switches", [
    (set(), set()), ({("a0_0", "c0_0")}, set()), ({("l0", "a0_1"), ("a2_1", "c1_1")}, set()),
    ({("a0_0", "c0_1", 1)}, set()), (set(), {"c1_0"}), ({("l5", "a2_0")}, {"a1_1"}),
], ids=["healthy", "core-link", "two-links", "member", "core-switch", "link-and-agg"])
def test_static_entries_of_one_computation_equal_each_switch_alone(down, switches):
    """``clos_all_static`` keeps its planes' link-state answers (``PlaneView(keep=True)``)
    across the switches; each switch computed alone, as before, gives the same."""
    f = bundled_fat_tree().with_down(down)
    f.down_switches = set(switches)
    for ecmp in ("per-tier", "polarised"):
        together = clos_all_static(f, ecmp)
        for sw in f.switches():
            assert together[f.dpids[sw]] == clos_static_rules(f, sw, ecmp), (sw, ecmp)


# ---- desired tables kept between changes (desired.DesiredTables) ---------------------------
def ports_up(fabric, name) -> dict:
    return {p: True for ps in fabric.ports[name].values()
            for p in (ps if isinstance(ps, list) else [ps])}


def start(fabric, **kw):
    sw = FakeSwitches(fabric.dpids.values(), fabric=fabric)
    clock = FakeClock(100.0)
    svc = RouteService(sw, fabric, clock=clock, sleep=clock.sleep, **kw)
    for name, d in fabric.dpids.items():
        svc.switch_connected(d, ports_up(fabric, name))
    return sw, svc, clock


def call(svc, method, path, doc=None):
    return api.handle(svc, method, path, None if doc is None else json.dumps(doc).encode())


def same_as_from_scratch(svc, sw) -> None:
    """The kept tables equal a computation from scratch entry for entry and in order, and
    every synchronised switch (and its shadow) holds exactly them; the plan kept per state
    version gives the links view a plan built now gives."""
    st = svc.state
    assert views.links_view(st, svc.current_plan()) == views.links_view(
        st, installed_plan(st.fabric, st.jobs.values()))
    assert predict_all(st, None, svc.current_plan) == predict_all(st)
    fresh = desired_tables(st.fabric, st.jobs.values(), ecmp=svc.settings.ecmp)
    kept = svc.tx.current_tables()
    assert set(kept) == set(fresh)
    for dpid, (rules, groups) in fresh.items():
        name = st.fabric.switch_of_dpid[dpid]
        assert list(kept[dpid][0]) == rules and list(kept[dpid][1]) == groups, name
        if dpid in svc.reconciler.installed:
            assert sw.rules[dpid] == {x.key: x for x in rules}, name
            assert sw.groups[dpid] == {g.group_id: g for g in groups}, name
            shadow = svc.reconciler.installed[dpid]
            assert shadow.rules == sw.rules[dpid] and shadow.groups == sw.groups[dpid], name


def flows(hosts, jid, **opts):
    return {"id": jid, "flows": [{"src": a, "dst": b, "bytes": 1e6} for a in hosts
                                 for b in hosts if a != b], **opts}


def ring(hosts, jid, **opts):
    return {"id": jid, "collective": "ring_allreduce", "ranks": hosts, "bytes": 1e6, **opts}


def steps(fabric, upper_link):
    """(name, operation, the REST status it must give) of a sequence: jobs posted in every
    mode and deleted, a conflict refused, a link down and up, a switch that stays away and
    comes back, a re-plan on request."""
    hosts = sorted(fabric.hosts)
    lower, upper = upper_link
    dpid, port = fabric.dpids[lower], fabric.port(lower, upper)
    return [
        ("ring", lambda svc, c: call(svc, "POST", "/v1/jobs", ring(hosts[::3], "r")), 201),
        ("sr", lambda svc, c: call(svc, "POST", "/v1/jobs", flows(hosts[1::4], "s", mode="sr")),
         201),
        ("host", lambda svc, c: call(svc, "POST", "/v1/jobs",
                                     ring(hosts[2::5], "h", mode="host", proto="udp",
                                          dport=4791)), 201),
        ("conflict", lambda svc, c: call(svc, "POST", "/v1/jobs", ring(hosts[::3], "r2")), 409),
        ("down", lambda svc, c: svc.port_changed(dpid, port, False), None),
        ("delete", lambda svc, c: call(svc, "DELETE", "/v1/jobs/s"), 200),
        ("again", lambda svc, c: call(svc, "POST", "/v1/jobs", flows(hosts[1::4], "s2")), 201),
        ("up", lambda svc, c: svc.port_changed(dpid, port, True), None),
        ("away", lambda svc, c: (svc.switch_disconnected(fabric.dpids[upper]), c.sleep(5),
                                 svc.tick(probe=False)), None),
        ("back", lambda svc, c: svc.switch_connected(fabric.dpids[upper],
                                                     ports_up(fabric, upper)), None),
        ("optimize", lambda svc, c: call(svc, "POST", "/v1/optimize"), 200),
        ("host gone", lambda svc, c: call(svc, "DELETE", "/v1/jobs/h"), 200),
        ("ring gone", lambda svc, c: call(svc, "DELETE", "/v1/jobs/r"), 200),
        ("all gone", lambda svc, c: call(svc, "DELETE", "/v1/jobs/s2"), 200),
    ]


@pytest.mark.parametrize("fabric, link, ecmp", [
    (Clos.fat_tree(4, 2, link_gbps=0.02).wire(), ("a0_0", "c0_0"), "per-tier"),
    (Clos.fat_tree(4, 2, link_gbps=0.02).wire(), ("a1_1", "c1_0"), "polarised"),
    (bundled_fat_tree(), ("a0_0", "c0_1"), "per-tier"),
    (Clos.generate(4, 8, 2, 0.02, wiring=True), ("l0", "s1"), "per-tier"),
], ids=["fat-tree", "polarised", "bundled", "leaf-spine"])
def test_kept_tables_equal_a_rebuild_after_every_operation(fabric, link, ecmp):
    sw, svc, clock = start(fabric, ecmp=ecmp)
    same_as_from_scratch(svc, sw)
    down = {}
    for name, step, status in steps(fabric, link):
        got = step(svc, clock)
        if status is not None:
            assert got[0] == status, (name, got)
        down[name] = set(svc.state.fabric.down)
        try:
            same_as_from_scratch(svc, sw)
        except AssertionError as e:
            raise AssertionError(f"after {name}: {e}") from None
    assert down["down"] and not down["up"] and down["away"] and not down["back"]
    assert not svc.state.jobs


def test_a_post_gives_new_lists_only_to_the_switches_it_touches():
    f = Clos.fat_tree(4, 2, link_gbps=0.02).wire()
    sw, svc, _ = start(f)
    before = dict(svc.tx.current_tables())
    sent = len(sw.sent)
    assert call(svc, "POST", "/v1/jobs", ring(["h0_0", "h2_0", "h4_0"], "r"))[0] == 201
    after = svc.tx.current_tables()
    touched = {m.dpid for m in sw.sent[sent:]}
    assert touched and {d for d in after if after[d] is not before[d]} == touched
    # the switches not touched were not diffed either: their shadow's basis is unchanged
    assert all(svc.reconciler.basis[d][1] is before[d][0] for d in after if d not in touched)
    # the touched ones name their static entries: their job entries alone were diffed
    assert all(after[d][0].static is before[d][0] for d in touched)


def test_kept_tables_refuse_a_conflict_as_a_rebuild_does():
    f = as_clos(Clos.generate(2, 2, 1, wiring=True))
    a = parse_job(flows(["h0_0", "h1_0"], "a"), f)
    b = parse_job(flows(["h0_0", "h1_0"], "b"), f)
    records = [JobRecord(job, n, "greedy", "flow", 0.0,
                         {flow_key(x): (((f.hosts[x.src], "s0", f.hosts[x.dst]), 1.0),)
                          for x in job.flows()})
               for n, job in ((1, a), (2, b))]
    kept = DesiredTables()
    kept.tables(f, records[:1])
    with pytest.raises(ConflictError) as got:
        kept.tables(f, records)
    with pytest.raises(ConflictError) as fresh:
        desired_tables(f, records)
    assert str(got.value) == str(fresh.value)
    assert kept.tables(f, records[:1]) == desired_tables(f, records[:1])


def test_kept_static_entries_follow_the_fabric_object():
    f = Clos.fat_tree(4, 2).wire()
    kept = DesiredTables()
    healthy = kept.tables(f, [])
    down = f.with_down({("a0_0", "c0_0")})
    degraded = kept.tables(down, [])
    assert degraded == desired_tables(down, [])
    changed = {f.switch_of_dpid[d] for d in degraded if degraded[d] is not healthy[d]}
    assert "c0_0" in changed and "a0_0" in changed and "l4" not in changed
    assert kept.tables(f, []) == desired_tables(f, [])
    assert kept.tables(f, [], host=True) == desired_tables(f, [], host=True)


@pytest.mark.parametrize("fabric", [bundled_fat_tree(), Clos.fat_tree(4, 2, planes=2).wire(),
                                    Clos.leaf_spine(3, 4, 1, bundle=2).wire(),
                                    as_clos(Clos.generate(3, 4, 2, wiring=True))],
                         ids=["bundled", "two-planes", "leaf-spine", "two-tier"])
def test_tables_follow_a_walk_of_link_states(fabric):
    """Links, members and switches going down and up at random under jobs in flow and sr
    mode: every state's kept tables (only the switches whose link-state inputs changed
    recomputed, flow entries that read only the wiring kept) equal a rebuild."""
    rng = random.Random(11)
    links = fabric.links()
    kept = DesiredTables()
    _, svc, _ = start(fabric)
    hosts = sorted(fabric.hosts)
    assert call(svc, "POST", "/v1/jobs", ring(hosts[::2], "r"))[0] == 201
    assert call(svc, "POST", "/v1/jobs", flows(hosts[1::2], "s", mode="sr"))[0] == 201
    records = list(svc.state.jobs.values())
    down: set = set()
    for _ in range(25):
        lower, upper = rng.choice(links)
        n = fabric.bundle(lower, upper)  # every fabric here is a Clos, the controller's model
        item = (lower, upper) if n == 1 or rng.random() < 0.5 else (lower, upper, rng.randrange(n))
        down ^= {item}
        state = fabric.with_down(down) if down else fabric
        if rng.random() < 0.2:
            state = fabric.with_down(down)
            state.down_switches = {rng.choice(state.switches())}
        jobs = records if rng.random() < 0.7 else records[:1]
        assert kept.tables(state, jobs) == desired_tables(state, jobs), sorted(down)


def test_a_diff_of_the_job_entries_alone_equals_a_whole_diff():
    """``diff_jobs`` gives the messages ``diff`` gives, in the same order, for a shadow that
    holds the same static entries and other job entries (added, kept, changed, removed)."""
    rng = random.Random(5)
    static = [rule(1, 0, 100 + i, {"in_port": i}) for i in range(40)]
    groups = [GroupEntry(1, 7, ((("output", 1),), (("output", 2),)))]
    job = [rule(1, 0, 500, {"in_port": i, "ip_proto": 6}, [("output", i % 3 + 1)],
                cookie=job_cookie(1)) for i in range(30)]
    for _ in range(50):
        had = rng.sample(job, rng.randint(0, 30))
        want = rng.sample(job, rng.randint(0, 30))
        want = [replace(x, actions=(("output", 9),)) if rng.random() < 0.2 else x for x in want]
        have = SwitchState()
        apply_messages(have, diff(1, have, static + had, groups)[0])
        assert diff_jobs(have, want, had) == diff(1, have, static + want, groups)


def test_long_table_computations_yield_and_compute_the_same(monkeypatch):
    """Under eventlet a view answers only where the writer yields: the desired tables (a
    link state's static entries, a large job's entries) call ``pause`` as they go. The
    static entries pause every ``pacing.PAUSE_S`` (none allowed here: after every switch)."""
    from controller.enforcement import pacing
    monkeypatch.setattr(pacing, "PAUSE_S", 0.0)
    f = Clos.fat_tree(8, 2, link_gbps=0.02).wire()
    pauses = []
    kept = DesiredTables(pause=lambda: pauses.append(1))
    kept.tables(f, [])
    down = f.with_down({("a0_0", "c0_0")})
    pauses.clear()
    assert kept.tables(down, []) == desired_tables(down, [])
    assert len(pauses) >= len(f.switches())  # after every switch of the new state
    hosts = sorted(f.host_leaves)[:24]
    sw, svc, _ = start(f)
    assert call(svc, "POST", "/v1/jobs", {"id": "a2a", "flows": [
        {"src": a, "dst": b, "bytes": 1e6} for a in hosts for b in hosts if a != b]})[0] == 201
    records = list(svc.state.jobs.values())
    pauses.clear()
    assert DesiredTables(pause=lambda: pauses.append(1)).tables(f, records) == \
        desired_tables(f, records)
    assert len(pauses) >= 552 // 256  # 552 flows: a yield every 256
