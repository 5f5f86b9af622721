"""Issue 59, item 4: make before break on a full flow table. Entries of a job deleted while
the controller was away fill a leaf's table (the fake switch refuses additions beyond a
limit, as Open vSwitch with ``flow_limit`` and ``overflow_policy=refuse``: OFPET_FLOW_MOD_FAILED,
OFPFMFC_TABLE_FULL); the additions the leaf needs were refused and the deletions that would
make room waited for them, on every tick, forever. Now the entries no running job owns are
deleted first and the additions sent again; Prometheus counts it. Entries of a running job
are never deleted first: a table full of wanted entries refuses the change, which changes
nothing."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from controller.enforcement.openflow import COOKIE_STATIC, SwitchState, job_cookie, rule
from controller.enforcement.reconcile import Reconciler
from controller.errors import InstallError
from controller.model.clos import Clos
from controller.service import api
from controller.service.metrics import exposition
from controller.service.route_service import RouteService
from controller.service.store import StateStore
from emulation.harness.fake_switch import FakeSwitches
from tests.test_control_plane import tables_match


def flows(jid, pairs):
    return json.dumps({"id": jid, "mode": "flow", "flows": [
        {"src": s, "dst": d, "bytes": 1e6, "proto": "tcp", "sport": 4000 + i, "dport": 5000}
        for i, (s, d) in enumerate(pairs)]}).encode()


def connect_all(f, svc):
    for name, d in f.dpids.items():
        svc.switch_connected(d, {p: True for p in f.ports[name].values()})


def per_table(rules) -> Counter:
    return Counter(r.table for r in rules)


def test_stale_entries_that_fill_a_table_are_deleted_before_the_additions(tmp_path):
    """The controller comes back (its state file) to a leaf whose table 0 is full of the
    entries of job a, which another controller sharing the store deleted meanwhile, before
    it posted job b. The leaf refuses b's entries (table full); the controller deletes a's
    (no running job owns them), then adds b's: one read and repair, not a refusal on every
    tick. ``mlroute_table_full_total{outcome="made_room"}`` counts it, and
    ``mlroute_table_full_freed_rules_total`` the entries deleted first."""
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    path = str(tmp_path / "state.db")
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, f, store=StateStore(path), algorithm="greedy")
    connect_all(f, svc)
    pairs_a = [("h0_0", "h1_0"), ("h0_1", "h2_0"), ("h0_0", "h3_0"), ("h0_1", "h3_1")]
    assert api.handle(svc, "POST", "/v1/jobs", flows("a", pairs_a))[0] == 201
    # another controller on the same store, its own switches: a deleted, b posted
    other = RouteService(FakeSwitches(f.dpids.values()), f, store=StateStore(path),
                         algorithm="greedy")
    connect_all(f, other)
    assert api.handle(other, "DELETE", "/v1/jobs/a")[0] == 200
    assert api.handle(other, "POST", "/v1/jobs", flows("b", [("h0_0", "h2_1")]))[0] == 201
    l0 = f.dpids["l0"]
    stale = [r for r in sw.rules[l0].values() if r.cookie != COOKIE_STATIC]
    assert len(stale) == 4 and per_table(stale) == {0: 4}  # a's flows enter at l0
    sw.limit[l0] = per_table(sw.rules[l0].values())[0]  # table 0 is full
    sent = len(sw.sent)

    back = RouteService(sw, f, store=StateStore(path), algorithm="greedy")  # the restart
    connect_all(f, back)
    for _ in range(3):
        back.tick()  # before: refused again on every tick
    assert back.fabric_view()["ready"], back.fabric_view()["seen"]["l0"]
    tables_match(f, sw, back)
    assert not {r.cookie for r in sw.rules[l0].values()} & {r.cookie for r in stale}
    msgs = [(m.kind, m.rule.cookie) for m in sw.sent[sent:] if m.dpid == l0]
    freed = [i for i, (kind, cookie) in enumerate(msgs)
             if kind == "flow_delete" and cookie == stale[0].cookie]
    added = [i for i, (kind, cookie) in enumerate(msgs)
             if kind == "flow_add" and cookie == job_cookie(back.jobs["b"].number)]
    assert len(freed) == 4 and len(added) == 2  # b's entry refused once, then taken
    assert max(freed) < added[-1]  # room made before the additions were sent again
    page = exposition(back)[0].decode()
    assert 'mlroute_table_full_total{outcome="made_room"} 1.0' in page
    assert 'mlroute_table_full_total{outcome="still_full"} 0.0' in page
    assert "mlroute_table_full_freed_rules_total 4.0" in page


def test_a_table_full_of_wanted_entries_refuses_the_change_and_keeps_them():
    """A leaf whose table 0 holds no entry nobody wants: nothing is deleted first, the job
    is refused (409, table full) with nothing changed, and counted as still full."""
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, f, algorithm="greedy")
    connect_all(f, svc)
    assert api.handle(svc, "POST", "/v1/jobs", flows("a", [("h0_0", "h1_0")]))[0] == 201
    l0 = f.dpids["l0"]
    sw.limit[l0] = per_table(sw.rules[l0].values())[0]
    before = sw.snapshot()
    code, doc = api.handle(svc, "POST", "/v1/jobs", flows("b", [("h0_1", "h2_0")]))
    assert code == 409 and "full" in doc["error"], doc
    assert sw.snapshot() == before and list(svc.jobs) == ["a"]
    page = exposition(svc)[0].decode()
    assert 'mlroute_table_full_total{outcome="still_full"} 1.0' in page
    assert "mlroute_table_full_freed_rules_total 0.0" in page


def entry(dpid, n, cookie):
    return rule(dpid, 0, 100, {"eth_type": 0x0800, "ipv4_dst": f"10.0.0.{n}"},
                [("output", 1)], cookie=cookie)


@pytest.mark.parametrize("owner", ["gone", "running"])
def test_a_change_makes_room_only_with_entries_no_running_job_owns(owner):
    """A change on a synchronised switch whose table is full: the entry it removes is
    deleted first when its job is gone (7: no wanted entry carries its cookie anywhere),
    and never when a running job (8, wanted on another switch) still owns it; then the
    change is refused and undone, as before."""
    sw = FakeSwitches([1, 2])
    rec = Reconciler(sw, {"install_failures": 0, "installs": 0, "rules_installed": 0,
                          "rules_removed": 0, "messages_sent": 0, "reconnects": 0})
    old = entry(1, 1, job_cookie(7 if owner == "gone" else 8))
    keep, new = entry(1, 2, job_cookie(8)), entry(1, 3, job_cookie(9))
    sw.rules[1] = {r.key: r for r in (old, keep)}
    rec.installed = {1: SwitchState(dict(sw.rules[1]), {}), 2: SwitchState({}, {})}
    sw.limit[1] = 2
    want = {1: ([keep, new], []), 2: ([entry(2, 4, job_cookie(8))], [])}
    if owner == "running":
        with pytest.raises(InstallError, match="full"):
            rec.converge(want)
        assert set(sw.rules[1].values()) == {old, keep} and rec.counters["install_failures"]
        assert rec.counters["table_full_still_full"] == 1
        return
    rec.converge(want)
    assert set(sw.rules[1].values()) == {keep, new} == set(rec.installed[1].rules.values())
    assert [(m.kind, m.rule) for m in sw.sent if m.dpid == 1] == [
        ("flow_add", new), ("flow_delete", old), ("flow_add", new)]  # refused, room, taken
    assert rec.counters["table_full_made_room"] == 1 and rec.counters["table_full_freed"] == 1
