"""Learned matrices in the service (fake switches, packet samples built by hand): jobs declared
by members learn their flows from steady traffic, declarations that the traffic contradicts are
re-planned make before break, and bad input or awkward traffic changes nothing else."""
import json
import re
from types import SimpleNamespace

import pytest

from controller.enforcement.desired import installed_plan
from controller.enforcement.openflow import job_cookie
from controller.model.clos import Clos
from controller.model.fluid import predict_allreduce
from controller.model.iteration import TOLERANCE
from controller.service import api, decide, learning
from controller.service.route_service import RouteService
from emulation.harness.fake_switch import FakeSwitches, trace
from tests.helpers import FakeClock


def start(spines=2, leaves=4, hosts=2, **kw):
    f = Clos.generate(spines, leaves, hosts, 0.02, wiring=True)
    sw = FakeSwitches(f.dpids.values(), fabric=f)
    clock = FakeClock(100.0)
    svc = RouteService(sw, f, clock=clock, sleep=clock.sleep, learn_window=1.0, **kw)
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    return f, sw, svc, clock


def post(svc, doc):
    return api.handle(svc, "POST", "/v1/jobs", json.dumps(doc).encode())


def get(svc, jid):
    return api.handle(svc, "GET", f"/v1/jobs/{jid}")


def ring_samples(f, ring, step=-1, data=20, acks=3, rate=16, plane=0):
    """Samples of a ring whose data goes from each rank to rank + step, with acknowledgement
    samples (small frames) the other way, as one sFlow collector would see them; the hosts'
    addresses on ``plane`` (a fabric of several planes)."""
    out = []
    for i, h in enumerate(ring):
        peer = ring[(i + step) % len(ring)]
        a, b = f.ip_of(h, plane), f.ip_of(peer, plane)
        out += [SimpleNamespace(src=a, dst=b, frame_length=9000, sampling_rate=rate)] * data
        out += [SimpleNamespace(src=b, dst=a, frame_length=66, sampling_rate=rate)] * acks
    return out


def interleaved(f):
    """A ring through the leaves in turn: two of its flows leave every leaf (2 x 4 x 2), so
    hashed default paths can collide and a plan has something to gain."""
    return sorted(f.hosts, key=lambda h: (h.split("_")[1], h))


def run_traffic(svc, clock, samples, seconds=4):
    for _ in range(seconds * 2):
        svc.traffic_samples(samples)
        clock.sleep(0.5)
        svc.tick(probe=False)


def planned_pairs(svc, jid):
    """The job's planned pairs across leaves (pairs within a leaf never reach a spine)."""
    f = svc.fabric
    return {(r["src"], r["dst"]) for r in get(svc, jid)[1]["routes"]
            if f.hosts[r["src"]] != f.hosts[r["dst"]]}


def job_rules(sw, f, number):
    return {(f.switch_of_dpid[d], k) for d, t in sw.rules.items() for k, r in t.items()
            if r.cookie == job_cookie(number)}


def test_members_only_learns_the_ring_direction_from_traffic():
    f, sw, svc, clock = start()
    ring = sorted(f.hosts)
    code, doc = post(svc, {"id": "j", "members": [f.host_ip[h] for h in ring]})
    assert code == 201 and doc["matrix"] == "learning" and doc["flows"] == 0
    assert get(svc, "j")[1]["predicted_allreduce_s"] is None  # nothing planned yet
    listed = lambda: [(j["id"], j["matrix"]) for j in api.handle(svc, "GET", "/v1/jobs")[1]["jobs"]]
    assert listed() == [("j", "learning")]  # the job list says it too (`job list`)
    run_traffic(svc, clock, ring_samples(f, ring, step=-1))
    code, doc = get(svc, "j")
    assert doc["matrix"] == "learned" and listed() == [("j", "learned")]
    want = {(h, ring[i - 1]) for i, h in enumerate(ring)
            if f.hosts[h] != f.hosts[ring[i - 1]]}
    assert planned_pairs(svc, "j") == want  # data direction, never the acknowledgements
    assert {(m["src"], m["dst"]) for m in doc["measured_flows"]} == want
    assert all(m["declared"] for m in doc["measured_flows"])
    assert doc["predicted_allreduce_s"] is not None
    assert any("matrix learned" in e["cause"] for e in svc.state.events)


def test_wrong_direction_is_replanned_with_an_event_and_learn_false_keeps_it():
    f, sw, svc, clock = start()
    ring = interleaved(f)
    assert post(svc, {"id": "wrong", "collective": "ring_allreduce", "ranks": ring,
                      "bytes": 1e6})[0] == 201
    declared = planned_pairs(svc, "wrong")
    run_traffic(svc, clock, ring_samples(f, ring, step=-1))
    doc = get(svc, "wrong")[1]
    assert doc["matrix"] == "learned"
    assert planned_pairs(svc, "wrong") == {(b, a) for a, b in declared}
    event = [e for e in svc.state.events if e.get("job") == "wrong"][-1]
    assert "opposite to the declared ring" in event["cause"] and event["error"] is None
    assert "re-planned on the measured matrix, predicted iteration" in event["cause"]
    assert doc["mismatch"]["share"] == 1.0
    # the same declaration with learning off keeps its matrix whatever runs
    assert api.handle(svc, "DELETE", "/v1/jobs/wrong")[0] == 200
    assert post(svc, {"id": "kept", "ranks": ring, "bytes": 1e6, "learn": False})[0] == 201
    run_traffic(svc, clock, ring_samples(f, ring, step=-1))
    doc = get(svc, "kept")[1]
    assert doc["matrix"] == "declared" and planned_pairs(svc, "kept") == declared


def test_correct_declaration_is_left_alone_and_other_jobs_keep_their_rules():
    f, sw, svc, clock = start(leaves=4, hosts=4)
    ring = [h for h in sorted(f.hosts) if h.endswith(("_0", "_1"))]
    other = [h for h in sorted(f.hosts) if h.endswith(("_2", "_3"))]
    right = [ring[0]] + ring[1:][::-1]  # data goes to rank - 1: declare the reversed ring
    assert post(svc, {"id": "ok", "ranks": right, "bytes": 1e6})[0] == 201
    assert post(svc, {"id": "wrong", "ranks": other, "bytes": 1e6})[0] == 201
    ok_rules = job_rules(sw, f, 1)
    sent = len(sw.sent)
    run_traffic(svc, clock, ring_samples(f, ring, step=-1) + ring_samples(f, other, step=-1))
    assert get(svc, "ok")[1]["matrix"] == "declared"
    assert get(svc, "wrong")[1]["matrix"] == "learned"
    assert job_rules(sw, f, 1) == ok_rules  # untouched
    msgs = sw.sent[sent:]
    kinds = [m.kind for m in msgs]
    # make before break: every addition of the re-plan before its first deletion
    assert "flow_delete" in kinds and kinds.index("flow_delete") > max(
        i for i, k in enumerate(kinds) if k == "flow_add")


def test_wrong_direction_with_nothing_to_gain_is_kept_with_an_event_saying_why():
    """A ring through each leaf once: one flow leaves each leaf, no default path can collide,
    so re-planning would only churn."""
    f, sw, svc, clock = start()
    ring = sorted(f.hosts)
    assert post(svc, {"id": "w", "ranks": ring, "bytes": 1e6})[0] == 201
    declared, rules = planned_pairs(svc, "w"), job_rules(sw, f, 1)
    run_traffic(svc, clock, ring_samples(f, ring, step=-1), seconds=8)
    assert get(svc, "w")[1]["matrix"] == "declared" and job_rules(sw, f, 1) == rules
    assert planned_pairs(svc, "w") == declared
    kept = [e for e in svc.state.events if e.get("job") == "w"]
    assert len(kept) == 1 and "plan kept, predicted iteration" in kept[0]["cause"]
    assert "a re-plan needs 5%" in kept[0]["cause"]


def test_replan_event_states_the_prediction_the_job_view_shows():
    """One prediction everywhere: the re-plan's "after" figure is the job view's."""
    f, sw, svc, clock = start()
    ring = interleaved(f)
    assert post(svc, {"id": "w", "ranks": ring, "bytes": 1e6})[0] == 201
    run_traffic(svc, clock, ring_samples(f, ring, step=-1))
    event = [e for e in svc.state.events if e.get("job") == "w"][-1]
    before, after = re.search(r"predicted iteration (\S+) s -> (\S+) s \((-\d+)%\)",
                              event["cause"]).group(1, 2)
    assert float(after) < (1 - svc.settings.learn_min_gain) * float(before)
    assert after == f"{get(svc, 'w')[1]['predicted_allreduce_s']:.3g}"


def test_predicted_gain_is_the_shared_prediction_within_tolerance_of_the_fluid_model():
    """Now (a mean over the hashed default paths) and re-planned, by ``model.iteration``,
    within its tested tolerance of the fluid model, the reference, on the same routes."""
    f, sw, svc, clock = start(leaves=4, hosts=4)
    ring = interleaved(f)[:8]
    assert post(svc, {"id": "w", "ranks": ring, "bytes": 1e6})[0] == 201
    assert post(svc, {"id": "o", "ranks": interleaved(f)[8:], "bytes": 3e6})[0] == 201
    m = learning.Measured({(a, b): 2e6 for i, a in enumerate(ring)
                           if f.hosts[a] != f.hosts[b := ring[i - 1]]}, 1.0)
    served = svc.state.fabric  # the Clos of one plane: routes are paths
    cause, mismatch = learning.verdict(served, svc.state.jobs["w"], m)
    change = decide.learned(svc.state, svc.settings, "w", m, cause, mismatch)
    now, new = learning.predicted_gain(served, svc.state.jobs, "w", m, change.jobs)

    def fluid(recs):
        return predict_allreduce(installed_plan(served, recs.values()))["w"]
    ref_new = fluid(change.jobs)
    ref_now = sum(fluid({**svc.state.jobs, "w": learning._as_planned_now(
        served, svc.state.jobs["w"], m, salt)}) for salt in range(learning.HASH_SALTS)) / learning.HASH_SALTS
    assert new == pytest.approx(ref_new, rel=TOLERANCE)
    assert now == pytest.approx(ref_now, rel=TOLERANCE) and new < now
    # a re-plan in which the job has no routes: no figure, no exception
    assert learning.predicted_gain(served, svc.state.jobs, "w", m, {}) is None


def test_pattern_change_replans_again():
    f, sw, svc, clock = start()
    ring = interleaved(f)
    assert post(svc, {"id": "j", "members": ring})[0] == 201
    run_traffic(svc, clock, ring_samples(f, ring, step=-1))
    first = planned_pairs(svc, "j")
    run_traffic(svc, clock, ring_samples(f, ring, step=+1), seconds=8)
    assert planned_pairs(svc, "j") == {(b, a) for a, b in first}
    assert sum("re-planned on the measured matrix" in e["cause"] for e in svc.state.events) == 1


@pytest.mark.parametrize("doc,text", [
    ({"id": "x", "members": ["h0_0", "nobody"]}, "unknown host 'nobody'"),
    ({"id": "x", "members": ["h0_0"]}, "at least 2 hosts"),
    ({"id": "x", "members": ["h0_0", "h0_1"]}, "every member is on leaf l0"),
    ({"id": "x", "members": ["h0_0", "h0_0"]}, "a member appears twice"),
    ({"id": "x", "members": ["h0_0", "h1_0"], "bytes": -1}, "bytes must be positive"),
    ({"id": "x", "members": ["h0_0", "h1_0"], "learn": "yes"}, "'learn' must be true or false"),
    ({"id": "x", "members": ["h0_0", "h1_0"], "ranks": ["h0_0", "h1_0"]}, "exactly one of"),
])
def test_bad_member_declarations_are_400_and_change_nothing(doc, text):
    f, sw, svc, clock = start()
    before = {d: dict(t) for d, t in sw.rules.items()}
    code, answer = post(svc, doc)
    assert code == 400 and text in answer["error"]
    assert sw.rules == before and not svc.jobs


def test_silent_members_stay_learning_and_delete_while_learning_leaves_nothing():
    f, sw, svc, clock = start()
    before = {d: dict(t) for d, t in sw.rules.items()}
    assert post(svc, {"id": "quiet", "members": ["h0_0", "h1_0", "h2_0"]})[0] == 201
    run_traffic(svc, clock, [])
    doc = get(svc, "quiet")[1]
    assert doc["matrix"] == "learning" and doc["measured_flows"] == []
    assert api.handle(svc, "DELETE", "/v1/jobs/quiet")[0] == 200
    run_traffic(svc, clock, ring_samples(f, ["h0_0", "h1_0", "h2_0"]))
    assert sw.rules == before and not svc.jobs and not svc.state.measured


def test_a_job_posted_again_under_its_id_shows_none_of_the_old_records_measurements():
    """Issue 59, item 9: deleted and posted again (at the same instant: no tick between), the
    new record shows no measured flow and is not steady; the old record's went with it."""
    f, sw, svc, clock = start()
    ring = sorted(f.hosts)
    assert post(svc, {"id": "j", "members": ring})[0] == 201
    run_traffic(svc, clock, ring_samples(f, ring, step=-1))
    old = get(svc, "j")[1]
    assert old["matrix"] == "learned" and old["measured_flows"] and old["learning"]["steady"]
    assert api.handle(svc, "DELETE", "/v1/jobs/j")[0] == 200
    assert "j" not in svc.state.measured
    assert post(svc, {"id": "j", "members": ring})[0] == 201
    doc = get(svc, "j")[1]
    assert doc["matrix"] == "learning" and doc["measured_flows"] == []
    assert doc["learning"]["steady"] is False and doc["learning"]["samples"] == 0
    svc.tick(probe=False)  # the old record's estimate does not come back at the next tick
    assert get(svc, "j")[1]["measured_flows"] == []


def test_a_sample_with_an_absurd_sampling_rate_is_ignored():
    """Issue 59, item 7: one sample a datagram at a sampling rate of 2^32 - 1 (an allowed
    agent address) made its pair the whole matrix; it is ignored and counted, and the ring
    is learned as it runs."""
    f, sw, svc, clock = start()
    ring = sorted(f.hosts)
    assert post(svc, {"id": "j", "members": ring})[0] == 201
    forged = SimpleNamespace(src=f.host_ip["h0_0"], dst=f.host_ip["h2_1"], frame_length=1500,
                             sampling_rate=2 ** 32 - 1)
    run_traffic(svc, clock, ring_samples(f, ring, step=-1) + [forged])
    doc = get(svc, "j")[1]
    want = {(h, ring[i - 1]) for i, h in enumerate(ring) if f.hosts[h] != f.hosts[ring[i - 1]]}
    assert doc["matrix"] == "learned" and planned_pairs(svc, "j") == want
    assert {(m["src"], m["dst"]) for m in doc["measured_flows"]} == want
    assert svc.learning.learner.ignored == 8  # one per datagram


class SteppedClocks:
    """The wall clock and the monotonic one move together, but the wall clock may be stepped
    (NTP correcting it): ``sleep`` advances both."""

    def __init__(self):
        self.wall, self.mono = FakeClock(100.0), FakeClock(5000.0)

    def sleep(self, s):
        self.wall.sleep(s)
        self.mono.sleep(s)


def stepped_service(**kw):
    f = Clos.generate(2, 4, 2, 0.02, wiring=True)
    sw = FakeSwitches(f.dpids.values(), fabric=f)
    clocks = SteppedClocks()
    svc = RouteService(sw, f, clock=clocks.wall, sleep=clocks.sleep, learn_window=1.0, **kw)
    svc.monotonic = clocks.mono  # what the service measures windows and bounds with
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    return f, svc, clocks


def test_a_wall_clock_step_back_neither_stalls_learning_nor_misleads():
    """Issue 59, item 5: the wall clock stepped back 60 s just after a job by members was
    posted; its ring is learned as without the step (windows on the monotonic clock), and
    the events still carry wall-clock times."""
    f, svc, clocks = stepped_service()
    ring = sorted(f.hosts)
    assert post(svc, {"id": "j", "members": ring})[0] == 201
    clocks.wall.now -= 60.0
    run_traffic(svc, clocks, ring_samples(f, ring, step=-1))
    doc = get(svc, "j")[1]
    assert doc["matrix"] == "learned", doc["learning"]["reason"]
    assert doc["learning"]["samples"] > 0 and doc["learning"]["reason"] is None
    learned = [e for e in svc.state.events if "matrix learned" in e.get("cause", "")]
    assert learned and all(40.0 <= e["time"] < 50.0 for e in learned)


def test_a_wall_clock_step_forward_does_not_lift_the_replan_bound():
    """Issue 59, item 5: with one re-plan a minute, a wall clock stepped 60 s forward after a
    re-plan lets no second one through before a minute has passed."""
    f, svc, clocks = stepped_service(learn_replans_per_minute=1)
    ring = interleaved(f)
    assert post(svc, {"id": "j", "members": ring})[0] == 201
    run_traffic(svc, clocks, ring_samples(f, ring, step=-1), seconds=5)
    assert len(replans(svc, "j")) == 1
    clocks.wall.now += 60.0
    run_traffic(svc, clocks, ring_samples(f, ring, step=+1), seconds=10)
    assert len(replans(svc, "j")) == 1
    assert get(svc, "j")[1]["learning"]["reason"].startswith("re-plans bound")


def test_learned_matrix_over_the_rule_budget_is_an_event_and_changes_nothing():
    f, sw, svc, clock = start(max_flow_rules=1)
    ring = sorted(f.hosts)
    assert post(svc, {"id": "big", "members": ring})[0] == 201
    before = {d: dict(t) for d, t in sw.rules.items()}
    run_traffic(svc, clock, ring_samples(f, ring))
    doc = get(svc, "big")[1]
    assert doc["matrix"] == "learning" and sw.rules == before
    errors = [e for e in svc.state.events if e.get("job") == "big" and e["error"]]
    assert len(errors) == 1 and "budget" in errors[0]["error"]  # not retried every tick


def test_learned_job_in_host_mode_is_matched_per_pair():
    f, sw, svc, clock = start(mode="host")
    ring = sorted(f.hosts)
    assert post(svc, {"id": "h", "members": ring})[0] == 201
    run_traffic(svc, clock, ring_samples(f, ring))
    doc = get(svc, "h")[1]
    assert doc["matrix"] == "learned" and doc["mode"] == "flow"
    event = [e for e in svc.state.events if e.get("job") == "h"][-1]
    assert "framework chooses its own source ports" in event["mode_reason"]
    assert job_rules(sw, f, doc["number"])  # per-pair entries at the ingress leaves


def test_learned_job_in_sr_mode_pushes_labels_and_reaches_its_planned_spine():
    """Segment routing: a learned flow's ingress entry pushes the labels of its planned spine
    and destination leaf, whatever ports the framework opened (both buckets of the default
    group), and the labels are gone when it reaches the host."""
    f, sw, svc, clock = start(mode="sr")
    ring = sorted(f.hosts)
    assert post(svc, {"id": "s", "members": ring})[0] == 201
    run_traffic(svc, clock, ring_samples(f, ring))
    doc = get(svc, "s")[1]
    assert doc["matrix"] == "learned" and doc["mode"] == "sr"
    routes = [r for r in doc["routes"] if f.hosts[r["src"]] != f.hosts[r["dst"]]]
    assert {(r["src"], r["dst"]) for r in routes} == planned_pairs(svc, "s") != set()
    for r in routes:
        for sport, bucket in ((40001, 0), (51234, 1)):
            path, reached, labels = trace(f, sw, r["src"], r["dst"], sport=sport, dport=29500,
                                          bucket=bucket)
            assert reached == r["dst"] and labels == []
            assert path == [f.hosts[r["src"]], r["spine"], f.hosts[r["dst"]]]


def test_pings_between_members_never_replan_a_declaration():
    """All-pairs traffic far below a link's rate (pings, daemons) is not a training pattern."""
    f, sw, svc, clock = start()
    ring = sorted(f.hosts)
    assert post(svc, {"id": "p", "ranks": ring, "bytes": 1e6})[0] == 201
    declared = planned_pairs(svc, "p")
    pings = [SimpleNamespace(src=f.host_ip[a], dst=f.host_ip[b], frame_length=98,
                             sampling_rate=1) for a in ring for b in ring if a != b] * 4
    run_traffic(svc, clock, pings)
    doc = get(svc, "p")[1]
    assert doc["matrix"] == "declared" and planned_pairs(svc, "p") == declared
    assert not [e for e in svc.state.events if e.get("job") == "p"]


def test_traffic_from_before_a_job_was_posted_never_replans_it():
    """Another program on the same hosts (an earlier job, a ring in the other direction) ran
    until just before the job was posted: its windows must not re-plan the new declaration,
    and the new job's own traffic, once steady, confirms it."""
    f, sw, svc, clock = start()
    ring = sorted(f.hosts)
    run_traffic(svc, clock, ring_samples(f, ring, step=+1))  # steady, rank + 1
    right = [ring[0]] + ring[1:][::-1]  # this job's data goes to rank - 1: declared so
    assert post(svc, {"id": "next", "ranks": right, "bytes": 1e6})[0] == 201
    declared = planned_pairs(svc, "next")
    svc.tick(probe=False)  # the old windows are still the last closed ones
    run_traffic(svc, clock, ring_samples(f, ring, step=-1))
    doc = get(svc, "next")[1]
    assert doc["matrix"] == "declared" and planned_pairs(svc, "next") == declared
    assert not [e for e in svc.state.events if e.get("job") == "next"]
    assert {(m["src"], m["dst"]) for m in doc["measured_flows"]} == declared


def test_sampling_points_follow_the_fabric_in_use():
    """A pair within one leaf is sampled once, a pair across leaves three times (every switch
    samples): the service counts them on the fabric it routes, and again when that changes."""
    f, sw, svc, clock = start()
    a, b = sorted(h for h in f.hosts if f.hosts[h] == "l0")[:2]
    c = next(h for h in f.hosts if f.hosts[h] != "l0")
    ip = f.host_ip
    frame = [SimpleNamespace(src=ip[a], dst=ip[b], frame_length=900, sampling_rate=10),
             SimpleNamespace(src=ip[a], dst=ip[c], frame_length=900, sampling_rate=10)]
    svc.traffic_samples(frame)
    clock.sleep(1.0)
    assert svc.learning.learner.window_pairs(clock()) == {(ip[a], ip[b]): 9000,
                                                          (ip[a], ip[c]): 3000}
    svc.learning.follow(None)  # no fabric: every pair counts as crossing leaves
    svc.traffic_samples(frame)
    clock.sleep(1.0)
    assert svc.learning.learner.window_pairs(clock()) == {(ip[a], ip[b]): 3000,
                                                          (ip[a], ip[c]): 3000}


# --- learned matrices that hold (launches, pauses, phases, light pairs, failover) -------------

def launches(svc, clock, samples, n=4, run_s=3, pause_s=6):
    """``n`` launches of a job: ``run_s`` seconds of traffic, the first and last half second
    at a third of the rate (ramp-up and tail), then ``pause_s`` silent seconds."""
    for _ in range(n):
        svc.traffic_samples(samples[:len(samples) // 3])
        clock.sleep(0.5)
        svc.tick(probe=False)
        run_traffic(svc, clock, samples, seconds=run_s)
        svc.traffic_samples(samples[:len(samples) // 3])
        clock.sleep(0.5)
        svc.tick(probe=False)
        run_traffic(svc, clock, [], seconds=pause_s)


def replans(svc, jid):
    return [e for e in svc.state.events if e.get("job") == jid and "cause" in e and
            ("re-planned" in e["cause"] or "learned" in e["cause"])]


def test_two_jobs_learned_in_the_same_window_are_both_planned():
    """Two jobs declared by members whose rings become steady together (two data-parallel
    jobs launched at once): each decision is made on the state the previous one left, so
    the second never undoes the first."""
    f, sw, svc, clock = start()
    jobs = {"a": [h for h in sorted(f.hosts) if h.endswith("_0")],
            "b": [h for h in sorted(f.hosts) if h.endswith("_1")]}
    for jid, ring in jobs.items():
        assert post(svc, {"id": jid, "members": [f.host_ip[h] for h in ring]})[0] == 201
    run_traffic(svc, clock, ring_samples(f, jobs["a"]) + ring_samples(f, jobs["b"]))
    for jid, ring in jobs.items():
        doc = get(svc, jid)[1]
        assert doc["matrix"] == "learned", doc
        assert planned_pairs(svc, jid) == {(h, ring[i - 1]) for i, h in enumerate(ring)}
        assert doc["learning"]["replans"] == 1
    learned = [e for e in svc.state.events if "matrix learned" in e["cause"]]
    assert sorted(e["job"] for e in learned) == ["a", "b"]
    assert len({e["time"] for e in learned}) == 1  # decided in the same tick
    uplinks = [(f.hosts[r["src"]], r["spine"]) for jid in jobs
               for r in get(svc, jid)[1]["routes"]]
    assert len(set(uplinks)) == len(uplinks) == 8  # planned together: no shared uplink


@pytest.mark.parametrize("declare", ["members", "rank order"])
def test_launches_with_pauses_are_learned_once_and_never_shrink(declare):
    """The issue's scenario: launches of a ring, 6 s pauses between them. The learned job is
    (re-)planned once, on its whole ring, and keeps it through every pause and ramp."""
    f, sw, svc, clock = start()
    ring = interleaved(f)
    doc = {"id": "j", "members": ring} if declare == "members" else \
        {"id": "j", "ranks": ring, "bytes": 1e6}  # data runs rank -> rank - 1: opposite
    assert post(svc, doc)[0] == 201
    want = {(h, ring[i - 1]) for i, h in enumerate(ring)}
    planned = []
    for _ in range(4):
        launches(svc, clock, ring_samples(f, ring, step=-1), n=1)
        planned.append(planned_pairs(svc, "j"))
    assert all(p == want for p in planned)
    assert len(replans(svc, "j")) == 1
    assert get(svc, "j")[1]["matrix"] == "learned"


def test_members_only_alltoall_and_ring_job_learns_every_pair():
    """A mixture-of-experts-like job on 4 leaves: an all-to-all (12 pairs, a fifth of the
    bytes) and a ring All-Reduce (4 of those pairs, the rest) in every window: all 12 pairs
    are planned, though each all-to-all pair carries under 10% of a ring pair."""
    f, sw, svc, clock = start()
    ranks = [h for h in interleaved(f)][:4]
    ip = f.host_ip
    a2a = [SimpleNamespace(src=ip[a], dst=ip[b], frame_length=1500, sampling_rate=16)
           for a in ranks for b in ranks if a != b] * 10
    assert post(svc, {"id": "moe", "members": ranks})[0] == 201
    run_traffic(svc, clock, ring_samples(f, ranks, step=-1) + a2a, seconds=6)
    doc = get(svc, "moe")[1]
    assert doc["matrix"] == "learned"
    assert planned_pairs(svc, "moe") == {(a, b) for a in ranks for b in ranks if a != b}
    flows = doc["measured_flows"]
    assert len(flows) == 12 and all(m["samples"] >= 4 and m["relative_error"] for m in flows)
    assert len(replans(svc, "moe")) == 1


def test_the_job_view_shows_the_estimate_between_phases_and_nothing_is_decided_on_it():
    """A launch's tail (only the ring's pairs, the all-to-all's gone quiet) puts the estimate
    in doubt: the view still shows every learned pair, says it is not steady, and the plan
    stays as it is."""
    f, sw, svc, clock = start()
    ranks = interleaved(f)[:4]
    ip = f.host_ip
    a2a = [SimpleNamespace(src=ip[a], dst=ip[b], frame_length=1500, sampling_rate=16)
           for a in ranks for b in ranks if a != b] * 10
    assert post(svc, {"id": "moe", "members": ranks})[0] == 201
    run_traffic(svc, clock, ring_samples(f, ranks, step=-1) + a2a, seconds=6)
    every = {(a, b) for a in ranks for b in ranks if a != b}
    assert get(svc, "moe")[1]["learning"]["steady"] is True
    rules = {d: dict(t) for d, t in sw.rules.items()}
    run_traffic(svc, clock, ring_samples(f, ranks, step=-1, acks=0), seconds=2)
    doc = get(svc, "moe")[1]
    assert doc["learning"]["steady"] is False, doc["learning"]
    assert {(m["src"], m["dst"]) for m in doc["measured_flows"]} == every
    assert planned_pairs(svc, "moe") == every and len(replans(svc, "moe")) == 1
    assert {d: dict(t) for d, t in sw.rules.items()} == rules


def test_a_launch_rendezvous_learned_first_never_costs_the_ring_a_link():
    """A launch starts with its rendezvous (rank 0's store answering the others: small, but
    alone at first, so it is learned); once the ring runs, the rendezvous pairs are a tiny
    share of the job's pairs: the ring is planned, alone, with no two data flows of a leaf on
    one uplink."""
    f, sw, svc, clock = start()
    ring = interleaved(f)
    ip = f.host_ip
    store = [SimpleNamespace(src=ip[ring[0]], dst=ip[h], frame_length=1500, sampling_rate=16)
             for h in ring[1:] if f.hosts[h] != f.hosts[ring[0]]] * 2
    assert post(svc, {"id": "j", "members": ring})[0] == 201
    run_traffic(svc, clock, store, seconds=3)
    run_traffic(svc, clock, ring_samples(f, ring, step=-1) + store, seconds=70)
    data = {(a, ring[(i - 1) % len(ring)]) for i, a in enumerate(ring)}
    routes = [r for r in get(svc, "j")[1]["routes"] if (r["src"], r["dst"]) in data]
    assert len(routes) == len(data)
    uplinks = [(f.hosts[r["src"]], r["spine"]) for r in routes]
    assert len(set(uplinks)) == len(uplinks), uplinks
    doc = get(svc, "j")[1]
    assert {(m["src"], m["dst"]) for m in doc["measured_flows"]} == data
    assert planned_pairs(svc, "j") == {p for p in data if f.hosts[p[0]] != f.hosts[p[1]]}


def test_a_learned_pair_gone_quiet_is_judged_by_the_gain():
    """A learned plan holds a pair that stops (an evaluation between two members, as large
    as a ring pair): the steady matrix no longer has it, the plan is a candidate, and since
    dropping it gains nothing (the ring is balanced as it is) an event says so and the
    plan stays."""
    f, sw, svc, clock = start()
    ring = interleaved(f)
    ip = f.host_ip
    extra = (ring[0], ring[3])
    assert f.hosts[extra[0]] != f.hosts[extra[1]]
    big = [SimpleNamespace(src=ip[extra[0]], dst=ip[extra[1]], frame_length=9000,
                           sampling_rate=16)] * 20
    assert post(svc, {"id": "j", "members": ring})[0] == 201
    run_traffic(svc, clock, ring_samples(f, ring, step=-1) + big, seconds=6)
    assert extra in planned_pairs(svc, "j")
    run_traffic(svc, clock, ring_samples(f, ring, step=-1), seconds=30)
    assert any("quiet or negligible" in e.get("cause", "") for e in svc.state.events)


def test_a_rendezvous_learned_with_the_ring_is_not_planned():
    """The rendezvous runs beside the ring's first iteration and is learned with it, each of
    its pairs a tenth of a ring pair (above the estimate's joining share of the mean pair):
    only the ring is planned, no two of a leaf's data flows on one uplink."""
    f, sw, svc, clock = start()
    ring = interleaved(f)
    ip = f.host_ip
    store = [SimpleNamespace(src=ip[ring[0]], dst=ip[h], frame_length=1500, sampling_rate=16)
             for h in ring[1:4] if f.hosts[h] != f.hosts[ring[0]]] * 12
    assert post(svc, {"id": "j", "members": ring})[0] == 201
    run_traffic(svc, clock, ring_samples(f, ring, step=-1) + store, seconds=6)
    data = {(a, ring[(i - 1) % len(ring)]) for i, a in enumerate(ring)}
    doc = get(svc, "j")[1]
    assert doc["matrix"] == "learned" and doc["learning"]["steady"] is True, doc["learning"]
    assert planned_pairs(svc, "j") == {p for p in data if f.hosts[p[0]] != f.hosts[p[1]]}
    uplinks = [(f.hosts[r["src"]], r["spine"]) for r in doc["routes"]]
    assert len(set(uplinks)) == len(uplinks), uplinks


def _ring_beside_a_star(frame_length: int, per_pair: int) -> None:
    """Rank 0's rendezvous with every other rank, both ways (``per_pair`` samples of
    ``frame_length`` bytes a pair), beside a members-only ring's first windows: the job is
    learned in its first launch as the ring alone (its cross-leaf pairs), no two data flows of
    a leaf on one uplink, and never re-planned."""
    f, sw, svc, clock = start()
    ring = interleaved(f)
    ip = f.host_ip
    star = [SimpleNamespace(src=ip[a], dst=ip[b], frame_length=frame_length, sampling_rate=16)
            for h in ring[1:] for a, b in ((ring[0], h), (h, ring[0]))] * per_pair
    assert post(svc, {"id": "j", "members": ring})[0] == 201
    run_traffic(svc, clock, ring_samples(f, ring, step=-1) + star, seconds=2)
    data = {(a, ring[(i - 1) % len(ring)]) for i, a in enumerate(ring)}
    cross = {p for p in data if f.hosts[p[0]] != f.hosts[p[1]]}
    doc = get(svc, "j")[1]
    assert doc["matrix"] == "learned", doc["learning"]
    assert planned_pairs(svc, "j") == cross
    uplinks = [(f.hosts[r["src"]], r["spine"]) for r in doc["routes"]]
    assert len(set(uplinks)) == len(uplinks), uplinks
    run_traffic(svc, clock, ring_samples(f, ring, step=-1), seconds=30)
    assert planned_pairs(svc, "j") == cross and len(replans(svc, "j")) == 1, \
        [e["cause"] for e in svc.state.events if e.get("job") == "j"]


def test_a_rendezvous_star_that_outnumbers_the_ring_is_not_planned():
    """Issue 59, item 6: the launch's first windows carry rank 0's rendezvous with every
    other rank, both ways (14 pairs, each 2.5% of a ring pair, 4% of the job's
    bytes in all) beside the ring's 8 pairs. The star's pairs are most of the job's pairs, so
    the median pair is one of them; still, the job is learned in its first launch as the ring
    alone, no two data flows of a leaf on one uplink, and never re-planned."""
    _ring_beside_a_star(1500, 3)


def test_a_plan_is_never_replaced_by_a_subset_of_itself():
    """Only some of a learned ring's pairs send for a long while (an evaluation between two
    members): the planned ring stays whole."""
    f, sw, svc, clock = start()
    ring = interleaved(f)
    assert post(svc, {"id": "j", "members": ring})[0] == 201
    run_traffic(svc, clock, ring_samples(f, ring, step=-1))
    whole = planned_pairs(svc, "j")
    some = [s for s in ring_samples(f, ring, step=-1, acks=0)
            if (s.src, s.dst) in {(f.host_ip[a], f.host_ip[b]) for a, b in list(whole)[:2]}]
    run_traffic(svc, clock, some, seconds=30)
    assert planned_pairs(svc, "j") == whole and len(replans(svc, "j")) == 1


def test_replans_per_job_are_bounded_per_minute():
    f, sw, svc, clock = start(learn_replans_per_minute=1)
    ring = interleaved(f)
    assert post(svc, {"id": "j", "members": ring})[0] == 201
    said = set()
    for step in (-1, +1) * 6:  # the direction flips every 10 s
        run_traffic(svc, clock, ring_samples(f, ring, step=step), seconds=10)
        said.add((get(svc, "j")[1]["learning"]["reason"] or "").split(":")[0])
    assert "re-plans bound" in said  # the view says why a flip was not followed at once
    times = [e["time"] for e in replans(svc, "j")]
    assert len(times) >= 2 and all(b - a >= 60 for a, b in zip(times, times[1:]))
    assert svc.learning.deferred > 0


def test_a_standby_learns_and_a_new_master_keeps_the_learned_matrix(tmp_path):
    """Master and standby receive the same samples (Open vSwitch sends sFlow to both); the
    master learns the job and stores it; the standby, master after a failover, has the same
    estimate and re-plans nothing."""
    from controller.service.store import StateStore
    f = Clos.generate(2, 4, 2, 0.02, wiring=True)
    clock = FakeClock(100.0)
    path = str(tmp_path / "state.db")
    services = []
    for _ in range(2):
        sw = FakeSwitches(f.dpids.values(), fabric=f)
        svc = RouteService(sw, f, store=StateStore(path), clock=clock, sleep=clock.sleep,
                           learn_window=1.0)
        for d in f.dpids.values():
            svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
        services.append((svc, sw))
    (master, _), (standby, sw2) = services
    standby.passive = True
    ring = interleaved(f)
    assert post(master, {"id": "j", "members": ring})[0] == 201
    standby.state.load(*__import__("controller.service.state", fromlist=["from_doc"]).from_doc(
        StateStore(path).load(), f))
    samples = ring_samples(f, ring, step=-1)
    for _ in range(8):
        for svc, _sw in services:
            svc.traffic_samples(samples)
        clock.sleep(0.5)
        for svc, _sw in services:
            svc.tick(probe=False)
    assert get(master, "j")[1]["matrix"] == "learned"
    assert standby.state.measured["j"].pairs.keys() == master.state.measured["j"].pairs.keys()
    assert not replans(standby, "j")  # a standby measures, never decides
    # failover: the standby takes the stored intent and becomes master
    standby.state.load(*__import__("controller.service.state", fromlist=["from_doc"]).from_doc(
        StateStore(path).load(), f))
    standby.passive = False
    events = len(standby.state.events)
    run_traffic(standby, clock, samples, seconds=6)
    assert get(standby, "j")[1]["matrix"] == "learned"
    assert standby.state.events[events:] == [] and not replans(standby, "j")


def test_datagrams_from_unknown_senders_are_an_event_and_a_metric():
    from controller.service.metrics import exposition
    f, sw, svc, clock = start()
    svc.traffic_rejected("192.0.2.66")
    svc.traffic_rejected("192.0.2.66")
    svc.tick(probe=False)
    events = [e for e in svc.state.events if "192.0.2.66" in e.get("cause", "")]
    assert len(events) == 1 and "not a known agent" in events[0]["cause"]
    assert b"mlroute_sflow_rejected_datagrams_total 2.0" in exposition(svc)[0]


def two_ring_jobs(f, svc):
    """Jobs a and b, one rank per leaf each, posted by their members: (ranks of each, ring
    pairs of each, data going to rank - 1)."""
    jobs = {"a": [h for h in sorted(f.hosts) if h.endswith("_0")],
            "b": [h for h in sorted(f.hosts) if h.endswith("_1")]}
    for jid, ring in jobs.items():
        assert post(svc, {"id": jid, "members": [f.host_ip[h] for h in ring]})[0] == 201
    return jobs, {jid: {(h, r[i - 1]) for i, h in enumerate(r)} for jid, r in jobs.items()}


def on_disjoint_rings(svc, rings, why):
    """Each job is planned on its ring, and no two flows share a leaf's uplink."""
    f = svc.fabric
    for jid in rings:
        assert planned_pairs(svc, jid) == rings[jid], why
    uplinks = [(f.hosts[r["src"]], r["spine"]) for jid in rings
               for r in get(svc, jid)[1]["routes"]]
    assert len(set(uplinks)) == len(uplinks) == 8


def broadcast_samples(f, ranks, peers=2, data=10):
    """Rank 0 sending its model to ``peers`` other ranks at once (a DistributedDataParallel
    launch's broadcast), the link shared between them."""
    root = f.host_ip[ranks[0]]
    return [SimpleNamespace(src=root, dst=f.host_ip[h], frame_length=9000, sampling_rate=16)
            for h in ranks[1:1 + peers] for _ in range(data)]


@pytest.mark.parametrize("declare", ["members", "ring"])
def test_two_ddp_jobs_whose_launch_starts_with_a_broadcast_end_on_their_rings(declare):
    """Two DistributedDataParallel jobs launched together: each launch begins with a few
    seconds of rank 0's broadcast alone (a steady matrix of two pairs), then the gradient
    rings. Whatever the broadcast taught, each job ends planned on its whole ring, the two
    rings on disjoint uplinks: a job kept on its plan is judged again once another job's
    plan changed, and the prediction counts what the other jobs send, not what they were
    declared or learned with. A correct declaration is never replaced by the broadcast."""
    f, sw, svc, clock = start()
    jobs = {"a": [h for h in sorted(f.hosts) if h.endswith("_0")],
            "b": [h for h in sorted(f.hosts) if h.endswith("_1")]}
    rings = {jid: {(h, r[i - 1]) for i, h in enumerate(r)} for jid, r in jobs.items()}
    for jid, ring in jobs.items():
        doc = ({"id": jid, "members": [f.host_ip[h] for h in ring]} if declare == "members"
               else {"id": jid, "ranks": ring[::-1], "bytes": 1e6})  # data to rank - 1
        assert post(svc, doc)[0] == 201
    bcast = broadcast_samples(f, jobs["a"]) + broadcast_samples(f, jobs["b"])
    ring = ring_samples(f, jobs["a"]) + ring_samples(f, jobs["b"])
    first = None
    for launch in range(4):  # the broadcast, the rings, a pause
        run_traffic(svc, clock, bcast, seconds=3)
        run_traffic(svc, clock, ring, seconds=12)
        events = [e["cause"] for e in svc.state.events if e.get("job")]
        for jid in jobs:
            assert planned_pairs(svc, jid) == rings[jid], (launch, jid, events)
        uplinks = [(f.hosts[r["src"]], r["spine"]) for jid in jobs
                   for r in get(svc, jid)[1]["routes"]]
        assert len(set(uplinks)) == len(uplinks) == 8
        run_traffic(svc, clock, [], seconds=6)
        if first is None:
            first = {jid: len(replans(svc, jid)) for jid in jobs}
    for jid in jobs:  # the target: at most one re-plan per job after the first launch
        assert len(replans(svc, jid)) - first[jid] <= 1, events
        if declare == "ring":  # a broadcast, one sender of four, never contradicts it
            assert not replans(svc, jid) and get(svc, jid)[1]["matrix"] == "declared", events


def test_a_job_kept_on_its_plan_is_judged_again_when_another_job_is_replanned():
    """Two DDP jobs, the second launched 3 s later: the first one's ring is judged while the
    second still broadcasts, and kept (the broadcast's two flows leave room); once the
    second is planned on its ring, the first is judged again on the state that changed, and
    within the same launch both run on their rings on disjoint uplinks."""
    f, sw, svc, clock = start()
    jobs, rings = two_ring_jobs(f, svc)
    run_traffic(svc, clock, broadcast_samples(f, jobs["a"]), seconds=3)
    run_traffic(svc, clock, ring_samples(f, jobs["a"]) + broadcast_samples(f, jobs["b"]),
                seconds=4)
    run_traffic(svc, clock, ring_samples(f, jobs["a"]) + ring_samples(f, jobs["b"]),
                seconds=12)
    events = [e["cause"] for e in svc.state.events if e.get("job")]
    assert any(c.startswith("job a") and "plan kept" in c for c in events), events
    on_disjoint_rings(svc, rings, events)


def test_two_jobs_colliding_on_hashed_paths_are_both_planned():
    """Both jobs learn their broadcasts; the second's ring is judged first while the first
    still broadcasts, and kept (little to gain beside a broadcast); then the first's ring is
    judged while the second's runs on hashed paths. Planned alone, it would still meet the
    second's hashed flows (no predicted gain: both kept, colliding for good); the decision
    predicts the two re-planned together, as each is judged in turn, and both end on
    disjoint uplinks within the launch."""
    f, sw, svc, clock = start()
    jobs, rings = two_ring_jobs(f, svc)
    run_traffic(svc, clock, broadcast_samples(f, jobs["a"]) + broadcast_samples(f, jobs["b"]),
                seconds=3)
    run_traffic(svc, clock, broadcast_samples(f, jobs["a"]) + ring_samples(f, jobs["b"]),
                seconds=4)
    run_traffic(svc, clock, ring_samples(f, jobs["a"]) + ring_samples(f, jobs["b"]),
                seconds=12)
    events = [e["cause"] for e in svc.state.events if e.get("job")]
    on_disjoint_rings(svc, rings, events)


def windows_counted(svc, jid):
    """How the job's last windows counted (``active``, ``quiet``, ``empty``), oldest first."""
    return [w["counted"] for w in get(svc, jid)[1]["learning"]["recent"]]


def test_one_datagram_at_the_highest_rate_does_not_freeze_a_low_rate_job():
    """Issue 74, item 6: one datagram of one 9,000-byte sample at 1 in 2^20 (accepted: the
    highest rate allowed) between two members of a job sampled at 1 in 16. It stood for
    200 windows of the job's bytes, set the job's peak, and every window after it was
    "quiet" for minutes; counted at its source's usual rate, it is one sample among the
    job's, and the job's windows keep counting."""
    f, sw, svc, clock = start()
    ring = sorted(f.hosts)
    assert post(svc, {"id": "j", "members": ring})[0] == 201
    samples = ring_samples(f, ring, step=-1)
    run_traffic(svc, clock, samples, seconds=2)
    ip = f.host_ip
    svc.traffic_samples([SimpleNamespace(src=ip[ring[1]], dst=ip[ring[0]], frame_length=9000,
                                         sampling_rate=1 << 20)])
    run_traffic(svc, clock, samples, seconds=3)
    assert windows_counted(svc, "j") == ["active"] * 4, get(svc, "j")[1]["learning"]
    assert svc.learning.learner.clipped == 1


def test_a_new_sender_is_held_to_the_others_usual_rate():
    """A forged datagram from an agent address never heard before gains nothing: its rate
    is held to the median of the other senders' usual rates."""
    f, sw, svc, clock = start()
    ring = sorted(f.hosts)
    assert post(svc, {"id": "j", "members": ring})[0] == 201
    samples = ring_samples(f, ring, step=-1)
    run_traffic(svc, clock, samples, seconds=2)
    ip = f.host_ip
    svc.traffic_samples([SimpleNamespace(src=ip[ring[1]], dst=ip[ring[0]], frame_length=9000,
                                         sampling_rate=1 << 20, agent="192.0.2.9",
                                         sub_agent=3, source_type=0, source_index=77)])
    run_traffic(svc, clock, samples, seconds=3)
    assert windows_counted(svc, "j") == ["active"] * 4


@pytest.mark.parametrize("per_pair", [2, 3])  # the star: 15% and 21% of the job's bytes
def test_a_rendezvous_star_of_a_fifth_of_the_bytes_is_not_planned(per_pair):
    """Issue 74, item 6: rank 0's rendezvous with every other rank, both ways, beside the
    ring's first windows, each star pair a few 9,000-byte samples (15% and 21% of the job's
    bytes: above the 5% under which ``pattern_floor`` leaves light pairs out). It was planned
    with the ring (10 rendezvous flows, two ring flows of a leaf on one uplink); a star, all
    its light pairs around one host, is no pattern: only the ring is planned, once."""
    _ring_beside_a_star(9000, per_pair)
