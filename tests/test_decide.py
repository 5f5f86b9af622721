"""The decisions of ``controller/service/decide.py`` called directly, without a service, a lock
or a switch: each takes the state, the settings and an input and returns one ``Change`` (or
None), and never changes the state it was given. Fast tier: a 2-spine, 4-leaf fabric."""
from __future__ import annotations

import pytest

from controller.errors import ConflictError, InputError, NotFoundError
from controller.model.clos import Clos, as_clos
from controller.model.intent import UNROUTABLE, flow_key
from controller.model.jobs import parse_job
from controller.model.problem import Assignment
from controller.service import decide
from controller.service.learning import Measured
from controller.service.replanning import group_of
from controller.service.settings import Settings
from controller.service.state import ControllerState, SwitchSeen, to_doc

NOW = 1000.0
GREEDY = Settings(algorithm="greedy")
AUTO = Settings(algorithm="auto", objective="flows", hold_down=5.0)


def wired(spines=2, leaves=4, hosts=2) -> Clos:
    return Clos.generate(spines, leaves, hosts, 100.0, wiring=True)


def state_of(fabric: Clos | None = None) -> ControllerState:
    st = ControllerState()
    st.load(fabric or wired(), {}, 1)
    return st


def ring(jid, ranks, **extra) -> dict:
    return {"id": jid, "collective": "ring_allreduce", "ranks": ranks, "bytes": 8e6, **extra}


def posted(st: ControllerState, settings: Settings, doc: dict) -> ControllerState:
    """``st`` with a job committed as the transaction would (no switch involved)."""
    change = decide.post_job(st, settings, parse_job(doc, st.fabric), NOW)
    st.jobs, st.next_number, st.version = change.jobs, st.next_number + 1, st.version + 1
    return st


def frozen(st: ControllerState):
    """Everything a decision could change in place, as plain values."""
    return (to_doc(st), st.version, st.next_number, st.fabric, st.declared,
            st.fabric.down if st.fabric else None, list(st.jobs),
            {k: (id(r), dict(r.routes), r.job, r.mode, r.matrix) for k, r in st.jobs.items()},
            dict(st.counters), len(st.events),
            {d: (s.connected, dict(s.ports)) for d, s in st.switches.items()})


def spines_of(record) -> set[str]:
    """The spines a job's parts cross (a part is its path: leaf, spine, leaf)."""
    return {path[1] for _, parts in record.flows_with_parts() if parts for path, _ in parts}


# ---- jobs -----------------------------------------------------------------------------------
def test_post_job_plans_the_new_job_and_leaves_the_state_alone():
    st = state_of()
    before = frozen(st)
    job = parse_job(ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]), st.fabric)
    change = decide.post_job(st, GREEDY, job, NOW)
    assert frozen(st) == before
    assert change.new_job == "a" and list(change.jobs) == ["a"]
    r = change.jobs["a"]
    assert (r.number, r.algorithm, r.mode, r.created, r.matrix) == (1, "greedy", "flow", NOW,
                                                                   "declared")
    assert all(parts not in (None, UNROUTABLE) for _, parts in r.flows_with_parts())
    assert change.replanned.groups == [("greedy", "flows")]
    assert change.fabric is None and change.declared is None  # the fabric stays
    assert change.offline_check and not change.fabric_stands
    assert change.event is None  # a client waits for the answer: no event
    assert change.cause == "job a added"


def test_post_job_replans_only_its_own_group():
    st = posted(state_of(), GREEDY, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))
    routes_a = dict(st.jobs["a"].routes)
    before = frozen(st)
    doc = ring("b", ["h0_1", "h1_1"], algorithm="ecmp")
    change = decide.post_job(st, GREEDY, parse_job(doc, st.fabric), NOW + 1)
    assert frozen(st) == before
    assert change.replanned.groups == [("ecmp", "flows")]
    assert change.jobs["a"].routes == routes_a  # the greedy group was not re-planned
    assert change.jobs["b"].number == 2  # the next number; the state's stays until commit
    assert st.next_number == 2


def test_post_job_refuses_a_duplicate_and_a_job_over_the_rule_budget():
    st = posted(state_of(), GREEDY, ring("a", ["h0_0", "h1_0"]))
    before = frozen(st)
    with pytest.raises(ConflictError, match="exists already"):
        decide.post_job(st, GREEDY, parse_job(ring("a", ["h2_0", "h3_0"]), st.fabric), NOW)
    tight = Settings(algorithm="greedy", max_flow_rules=1)
    with pytest.raises(ConflictError):
        decide.post_job(st, tight, parse_job(ring("b", ["h2_0", "h3_0"]), st.fabric), NOW)
    assert frozen(st) == before


def test_post_job_with_advised_ring_order_answers_the_advice():
    st = state_of()
    doc = ring("a", ["h0_0", "h1_0", "h0_1", "h1_1"], ring_order="advised")
    change = decide.post_job(st, GREEDY, parse_job(doc, st.fabric), NOW)
    advice = change.answer["ring_order_advice"]
    assert len(advice["rings"]) == 1
    # the installed ring crosses leaves only twice: the hosts of a leaf are neighbours
    ranks = change.jobs["a"].job.rings[0]
    leaves = [st.fabric.hosts[h] for h in ranks]
    assert sum(a != b for a, b in zip(leaves, leaves[1:] + leaves[:1])) == 2


def test_delete_job_drops_it_from_the_intent_only():
    st = posted(state_of(), GREEDY, ring("a", ["h0_0", "h1_0"]))
    st = posted(st, GREEDY, ring("b", ["h2_0", "h3_0"]))
    before = frozen(st)
    change = decide.delete_job(st, "a")
    assert frozen(st) == before and list(st.jobs) == ["a", "b"]
    assert list(change.jobs) == ["b"] and change.jobs["b"] is st.jobs["b"]
    assert change.replanned is None and change.moved_flows == 0 and change.event is None
    with pytest.raises(NotFoundError):
        decide.delete_job(st, "nope")


def test_optimize_replans_every_group():
    st = posted(state_of(), GREEDY, ring("a", ["h0_0", "h1_0"]))
    st = posted(st, GREEDY, ring("b", ["h2_0", "h3_0"], algorithm="ecmp"))
    before = frozen(st)
    change = decide.optimize(st, GREEDY)
    assert frozen(st) == before
    assert sorted(change.replanned.groups) == [("ecmp", "flows"), ("greedy", "flows")]
    assert change.jobs is not st.jobs and change.jobs["a"] is not st.jobs["a"]


# ---- links and switches ---------------------------------------------------------------------
def link_down(st: ControllerState, leaf: str, spine: str) -> None:
    """The leaf reports its port to the spine down (as ``port_changed`` notes it)."""
    f = st.declared
    st.switches[f.dpids[leaf]] = SwitchSeen(True, {f.port(leaf, spine): False}, NOW)


def test_topology_without_a_change_decides_nothing():
    st = posted(state_of(), GREEDY, ring("a", ["h0_0", "h1_0"]))
    st.switches = {d: SwitchSeen(True, {}, NOW) for d in st.fabric.dpids.values()}
    assert decide.topology(st, GREEDY, NOW, "switch connected") is None


def test_a_link_seen_down_replans_the_jobs_crossing_it():
    st = posted(state_of(), GREEDY, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))
    st = posted(st, GREEDY, ring("b", ["h2_1", "h3_1"], algorithm="ecmp"))
    f = st.fabric
    # a link the greedy job's first flow crosses
    flow, parts = st.jobs["a"].flows_with_parts()[0]
    leaf, spine = parts[0][0][0], parts[0][0][1]
    link_down(st, leaf, spine)
    before = frozen(st)
    change = decide.topology(st, GREEDY, NOW, f"port {leaf} to {spine} down")
    assert frozen(st) == before and not st.fabric.down
    assert change.fabric.down == {(leaf, spine)}
    assert change.declared is None  # the declared fabric stays; only the effective one moves
    assert change.event == {"links_down": [f"{leaf}-{spine}"], "links_up": []}
    assert not change.offline_check and change.fabric_stands
    assert ("greedy", "flows") in change.replanned.groups
    b_crosses = decide.crosses(f, st.jobs["b"], {(leaf, spine)})
    assert (("ecmp", "flows") in change.replanned.groups) == b_crosses
    for flow, parts in change.jobs["a"].flows_with_parts():
        ends = {f.hosts[flow.src], f.hosts[flow.dst]}
        if leaf in ends and len(ends) == 2:
            assert spine not in {x[1] for x, _ in parts}, (flow, parts)


def test_a_link_back_replans_unroutable_flows_at_once():
    f = wired(spines=1, leaves=2, hosts=1)
    st = posted(state_of(f), GREEDY, {"id": "a", "flows": [{"src": "h0_0", "dst": "h1_0",
                                                             "bytes": 1e6}]})
    link_down(st, "l0", "s0")
    down = decide.topology(st, GREEDY, NOW, "port l0:1 to s0 down")
    st.fabric, st.jobs = down.fabric, down.jobs  # committed: the only spine is gone
    assert st.jobs["a"].unroutable()
    st.switches[f.dpids["l0"]].ports[f.port("l0", "s0")] = True
    before = frozen(st)
    change = decide.topology(st, GREEDY, NOW + 1, "port l0:1 to s0 up")
    assert frozen(st) == before and st.jobs["a"].unroutable()
    assert change.event == {"links_down": [], "links_up": ["l0-s0"]}
    assert change.fabric.down == set() and not change.jobs["a"].unroutable()


def test_a_disconnected_switch_counts_as_failed_only_after_dead_after():
    st = posted(state_of(), GREEDY, ring("a", ["h0_0", "h1_0"]))
    st.switches[st.fabric.dpids["s0"]] = SwitchSeen(False, {}, NOW)
    settings = Settings(algorithm="greedy", dead_after=3.0)
    assert decide.topology(st, settings, NOW + 2.9, "tick") is None
    change = decide.topology(st, settings, NOW + 3.0, "tick")
    assert change.fabric.down == {(leaf, "s0") for leaf in st.fabric.leaves}
    assert all(spines_of(r) <= {"s1"} for r in change.jobs.values())


def test_reoptimise_needs_an_auto_job_and_replans_only_auto():
    st = posted(state_of(), GREEDY, ring("a", ["h0_0", "h1_0"]))
    assert decide.reoptimise(st, AUTO) is None
    st = posted(st, AUTO, ring("b", ["h2_0", "h3_0"]))
    before = frozen(st)
    change = decide.reoptimise(st, AUTO)
    assert frozen(st) == before
    assert change.replanned.groups == [group_of(st.jobs["b"], AUTO)] == [("auto", "flows")]
    assert change.event == {} and "5 s" in change.cause
    assert change.jobs["a"].routes == st.jobs["a"].routes


# ---- fabrics --------------------------------------------------------------------------------
def test_declare_fabric_needs_wiring_and_no_running_job():
    st = ControllerState()
    f = wired()
    change = decide.declare_fabric(st, f, GREEDY, NOW)
    assert change.declared.to_dict() == as_clos(f).to_dict() and change.jobs == {}
    assert isinstance(change.declared, Clos) and change.fabric is change.declared
    assert not change.offline_check
    assert st.declared is None and st.fabric is None
    with pytest.raises(InputError, match="dpids"):
        decide.declare_fabric(st, Clos.generate(2, 4, 2), GREEDY, NOW)
    busy = posted(state_of(), GREEDY, ring("a", ["h0_0", "h1_0"]))
    with pytest.raises(ConflictError, match="delete the running jobs"):
        decide.declare_fabric(busy, f, GREEDY, NOW)


def test_adopt_takes_a_fabric_that_extends_the_one_in_use():
    st = posted(state_of(), GREEDY, ring("a", ["h0_0", "h1_0"]))
    before = frozen(st)
    bigger = wired(leaves=5)  # one more leaf: every switch, port and host kept
    change = decide.adopt(st, GREEDY, bigger, NOW, "fabric discovered")
    assert frozen(st) == before
    assert change.declared.to_dict() == as_clos(bigger).to_dict()
    assert isinstance(change.declared, Clos) and change.fabric is change.declared
    assert change.event == {"links_down": [], "links_up": []}
    with pytest.raises(ConflictError, match="discovered wiring"):
        decide.adopt(st, GREEDY, wired(spines=3), NOW, "fabric discovered")


# ---- off-path plans and learned matrices ----------------------------------------------------
def test_improved_moves_flows_only_for_a_better_plan():
    st = state_of()
    st = posted(st, AUTO, {"id": "a", "flows": [
        {"src": "h0_0", "dst": "h1_0", "bytes": 1e6}, {"src": "h0_1", "dst": "h1_1",
                                                      "bytes": 1e6}]})
    # both flows squeezed onto spine 0 (as a stale plan would be): one move halves the max
    for flow, _ in st.jobs["a"].flows_with_parts():
        st.jobs["a"].routes[flow_key(flow)] = ((("l0", "s0", "l1"), 1.0),)
    group, instance = decide.improvable_group(st, AUTO, ("auto", "flows"))
    previous = instance.previous
    assert [r.job.id for r in group] == ["a"] and previous == [((0, 1.0),)] * 2
    before = frozen(st)
    better = Assignment([((0, 1.0),), ((1, 1.0),)])
    change = decide.improved(st, group, instance, better, "flows")
    assert frozen(st) == before
    assert change.answer["moved_flows"] == 1 == change.moved_flows
    assert sorted(spines_of(change.jobs["a"])) == ["s0", "s1"]
    assert change.event == {} and change.replanned.groups == [("auto", "flows")]
    assert decide.improved(st, group, instance, Assignment(list(previous)), "flows") is None


def test_learned_replaces_the_matrix_and_leaves_host_mode():
    st = posted(state_of(), GREEDY, {"id": "a", "members": ["h0_0", "h1_0"],
                                         "mode": "host"})
    assert (st.jobs["a"].matrix, st.jobs["a"].mode) == ("learning", "host")
    before = frozen(st)
    measured = Measured({("h0_0", "h1_0"): 5e6, ("h1_0", "h0_0"): 1e6}, window_s=2.0)
    change = decide.learned(st, GREEDY, "a", measured, "job a: matrix learned", None)
    assert frozen(st) == before and st.jobs["a"].matrix == "learning"
    r = change.jobs["a"]
    assert r.matrix == "learned" and r.mode == "flow"
    assert sorted((f.src, f.dst, f.bytes) for f in r.job.flows()) == [
        ("h0_0", "h1_0", 5e6), ("h1_0", "h0_0", 1e6)]
    assert "mode_reason" in change.answer
    assert change.event["job"] == "a" and change.event["mismatch"] is None
    assert change.event["mode_reason"] == change.answer["mode_reason"]
    assert change.replanned.groups == [("greedy", "flows")]
