"""``Transaction.apply`` called directly with decided changes, on the fake switch tables
(``emulation/harness/fake_switch.py``, the Installer) without a service or a lock: make before break, the
commit of intent, counters, store and event on success, and nothing changed (switches, state,
store, events) when a switch rejects a rule or is not connected. Fast tier: a 2-spine, 4-leaf
fabric."""
from __future__ import annotations

import pytest

from controller.enforcement.desired import desired_tables
from controller.enforcement.reconcile import Reconciler
from controller.errors import ConflictError, InstallError
from controller.model.clos import Clos
from controller.model.jobs import parse_job
from controller.service import decide
from controller.service.hostports import HostPortService
from controller.service.settings import Settings
from controller.service.state import ControllerState, SwitchSeen, to_doc
from controller.service.transaction import Transaction
from emulation.harness.fake_switch import FakeSwitches
from tests.helpers import FakeClock

SETTINGS = Settings(algorithm="greedy")
MAKE = ("flow_add", "group_add", "group_modify")
BREAK = ("flow_delete", "group_delete")


class Store:
    def __init__(self):
        self.docs = []

    def save(self, doc):
        self.docs.append(doc)


def setup(spines=2, leaves=4, hosts=2, connect=None):
    """(fabric, fake switches, transaction) with the ``connect`` switches (all by default)
    synchronised against the empty intent."""
    f = Clos.generate(spines, leaves, hosts, 100.0, wiring=True)
    sw = FakeSwitches(f.dpids.values(), f)
    st = ControllerState()
    st.load(f, {}, 1)
    name = lambda d: f.switch_of_dpid.get(d) or hex(d)  # noqa: E731
    tx = Transaction(st, Reconciler(sw, st.counters, name), HostPortService(sw.probe),
                     Store(), FakeClock(), name)
    for sw_name in (f.dpids if connect is None else connect):
        d = f.dpids[sw_name]
        st.switches[d] = SwitchSeen(True, {p: True for p in f.ports[sw_name].values()}, 0.0)
        tx.reconciler.connected(d)
    tx.drain()  # static entries: read (empty) and repaired
    return f, sw, tx


def ring(jid, ranks, **extra) -> dict:
    return {"id": jid, "collective": "ring_allreduce", "ranks": ranks, "bytes": 8e6, **extra}


def post(tx, doc):
    st = tx.state
    return decide.post_job(st, SETTINGS, parse_job(doc, st.fabric), tx.clock(), tx.name)


def used_link(f, record) -> tuple[str, str]:
    """(leaf, spine) of a link the first flow of a job crosses (its path leaf, spine, leaf)."""
    flow, parts = record.flows_with_parts()[0]
    return parts[0][0][0], parts[0][0][1]


def take_down(tx, leaf, spine) -> None:
    """The leaf reports its port to the spine down (as ``port_changed`` notes it)."""
    f = tx.state.declared
    tx.state.switches[f.dpids[leaf]].ports[f.port(leaf, spine)] = False


def tables_match(sw, tx):
    """Every synchronised switch holds the desired tables of the committed state."""
    want = desired_tables(tx.state.fabric, tx.state.jobs.values())
    for dpid in tx.reconciler.installed:
        rules, groups = want.get(dpid, ([], []))
        assert set(sw.rules[dpid].values()) == set(rules)
        assert set(sw.groups[dpid].values()) == set(groups)


def test_static_entries_follow_the_connected_switches():
    f, sw, tx = setup()
    assert set(tx.reconciler.installed) == set(f.dpids.values())
    assert all(sw.rules[d] for d in f.dpids.values())
    tables_match(sw, tx)


def test_apply_installs_and_commits_a_new_job():
    f, sw, tx = setup()
    st = tx.state
    change = post(tx, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))
    version, saved = st.version, len(tx.store.docs)
    outcome = tx.apply(change)
    assert st.jobs is change.jobs and list(st.jobs) == ["a"]
    assert st.next_number == 2 and st.version == version + 1
    assert outcome.rules["added"] > 0 and outcome.rules["removed"] == 0
    assert outcome.rules["switches"] > 0 and outcome.stats["seconds"] is not None
    assert st.counters["rules_installed"] >= outcome.rules["added"]
    assert len(st.planner_ms) == 1 and len(st.install_s) == 1
    assert len(tx.store.docs) == saved + 1 and tx.store.docs[-1] == to_doc(st)
    assert st.events == []  # a posted job is answered, not recorded as an event
    tables_match(sw, tx)


def test_apply_is_make_before_break():
    """A link down moves flows: every addition (and group change) of the change reaches the
    switches before the first deletion."""
    f, sw, tx = setup()
    st = tx.state
    tx.apply(post(tx, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0", "h0_1", "h1_1", "h2_1",
                                 "h3_1"])))
    leaf, spine = used_link(f, st.jobs["a"])
    take_down(tx, leaf, spine)
    change = decide.topology(st, SETTINGS, tx.clock(), "link down")
    sent = len(sw.sent)
    outcome = tx.apply(change)
    kinds = [m.kind for m in sw.sent[sent:]]
    assert any(k in MAKE for k in kinds) and any(k in BREAK for k in kinds), kinds
    last_make = max(i for i, k in enumerate(kinds) if k in MAKE)
    first_break = min(i for i, k in enumerate(kinds) if k in BREAK)
    assert last_make < first_break, kinds
    assert outcome.rules["removed"] > 0
    assert st.fabric is change.fabric and st.fabric.down == {(leaf, spine)}
    tables_match(sw, tx)


def test_a_switch_that_rejects_its_repair_leaves_the_others_synchronised():
    """Queued switches are read and repaired together (one install): one that rejects a
    rule stays queued and unsynchronised, the others are synchronised with their entries;
    the next drain repairs it from what it read back (its half-applied batch)."""
    f, sw, tx = setup(connect=[])
    rec, bad = tx.reconciler, f.dpids["l1"]
    for name, d in f.dpids.items():
        tx.state.switches[d] = SwitchSeen(True, {p: True for p in f.ports[name].values()}, 0.0)
        rec.connected(d)
    sw.fail.add(bad)
    tx.drain()
    assert set(rec.installed) == set(f.dpids.values()) - {bad} and rec.pending == {bad}
    assert len(sw.rules[bad]) + len(sw.groups[bad]) == 1  # the first message only
    assert rec.last_sync[f.dpids["l0"]]["switches"] == len(f.dpids)  # one batch for all
    tx.drain()
    assert set(rec.installed) == set(f.dpids.values()) and not rec.pending
    tables_match(sw, tx)


def test_an_install_error_changes_nothing():
    f, sw, tx = setup()
    st = tx.state
    tx.apply(post(tx, ring("a", ["h0_0", "h1_0"])))
    before = (sw.snapshot(), to_doc(st), st.version, st.next_number, len(tx.store.docs),
              list(st.events), st.jobs)
    change = post(tx, ring("b", ["h2_0", "h3_0", "h0_1"]))
    sw.fail.add(f.dpids["l2"])  # l2 applies the first message of its batch, then rejects
    with pytest.raises(InstallError, match="rejected"):
        tx.apply(change)
    assert (sw.snapshot(), to_doc(st), st.version, st.next_number, len(tx.store.docs),
            list(st.events), st.jobs) == before  # the half-applied batch was rolled back
    assert st.counters["install_failures"] == 1
    tables_match(sw, tx)
    tx.apply(change)  # the switch takes it the next time
    assert list(st.jobs) == ["a", "b"]
    tables_match(sw, tx)


def test_only_a_switch_whose_undo_failed_is_read_back():
    """A rejected change is undone on every switch it reached; one that does not confirm its
    undo is queued to be read back and repaired, the others keep their shadows."""
    f, sw, tx = setup()
    rec = tx.reconciler
    tx.apply(post(tx, ring("a", ["h0_0", "h1_0"])))
    change = post(tx, ring("b", ["h2_0", "h3_0", "h0_1"]))
    l2, l3 = f.dpids["l2"], f.dpids["l3"]
    sw.fail.add(l2)  # rejects the change
    calls, install = [], sw.install

    def undo_fails_on_l3(batches):
        calls.append(set(batches))
        if len(calls) == 2:
            sw.fail.add(l3)  # the undo: l3 rejects its own
        install(batches)
    sw.install = undo_fails_on_l3
    with pytest.raises(InstallError, match="rejected"):
        tx.apply(change)
    assert l3 in calls[1] and l2 in calls[1] and len(calls[1]) > 2  # undone everywhere
    assert rec.pending == {l3} and l3 not in rec.installed
    assert set(rec.installed) == set(f.dpids.values()) - {l3}
    tx.drain()  # l3 read back (its half-applied undo) and repaired
    assert not rec.pending and list(tx.state.jobs) == ["a"]
    tables_match(sw, tx)


def test_job_rules_for_a_switch_not_connected_are_refused_before_sending():
    f, sw, tx = setup(connect=["s0", "s1", "l0", "l1", "l2"])  # l3 has not connected
    st = tx.state
    sent, version = len(sw.sent), st.version
    with pytest.raises(ConflictError, match="l3 .* is not connected"):
        tx.apply(post(tx, ring("a", ["h0_0", "h3_0"])))
    assert len(sw.sent) == sent and st.version == version and st.jobs == {}
    tx.apply(post(tx, ring("a", ["h0_0", "h1_0"])))  # a job on connected switches is fine
    assert list(st.jobs) == ["a"]


def test_a_topology_change_records_its_event():
    f, sw, tx = setup()
    st = tx.state
    tx.apply(post(tx, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"])))
    leaf, spine = used_link(f, st.jobs["a"])
    take_down(tx, leaf, spine)
    change = decide.topology(st, SETTINGS, tx.clock(), "link down")
    outcome = tx.apply(change)
    event = st.events[-1]
    assert event["time"] == tx.clock() and event["cause"] == "link down"
    assert event["links_down"] == [f"{leaf}-{spine}"] and event["links_up"] == []
    assert event["replanned"] == ["greedy"] and event["error"] is None
    assert event["rules"] == outcome.rules and event["unroutable_flows"] == 0
    assert event["recovery_ms"] >= 0 and st.recovery_ms == [event["recovery_ms"]]
    assert st.counters["failures_handled"] == 1


def test_a_failed_topology_change_keeps_its_fabric_and_records_the_error():
    f, sw, tx = setup()
    st = tx.state
    tx.apply(post(tx, ring("a", ["h0_0", "h1_0"])))
    take_down(tx, *used_link(f, st.jobs["a"]))
    change = decide.topology(st, SETTINGS, tx.clock(), "link down")
    jobs, version = st.jobs, st.version
    tx.fail(change, InstallError("switch l1 rejected a rule"))
    assert st.fabric is not change.fabric and st.version == version  # switches unreachable
    assert st.events[-1]["error"] == "switch l1 rejected a rule"
    assert st.events[-1]["replanned"] == [] and st.events[-1]["moved_flows"] == 0
    tx.fail(change, ConflictError("no alive spine"))  # the link is down all the same
    assert st.fabric is change.fabric and st.version == version + 1 and st.jobs is jobs
    assert st.counters["failures_handled"] == 2


def test_delete_removes_the_job_rules_and_keeps_the_static_ones():
    f, sw, tx = setup()
    empty = sw.snapshot()
    tx.apply(post(tx, ring("a", ["h0_0", "h1_0", "h2_0"])))
    outcome = tx.apply(decide.delete_job(tx.state, "a"))
    assert outcome.rules["removed"] > 0 and outcome.rules["added"] == 0
    assert tx.state.jobs == {} and tx.state.next_number == 2
    assert sw.snapshot() == empty
