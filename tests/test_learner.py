"""The traffic learner: windows, the unbiased estimator over several sampling switches, matrices
of permutations, rings and multi-rings learned exactly, acknowledgements never taken for
flows, and the comparison with a declaration."""
import math
import random
import threading

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from controller.measurement.estimate import MatrixEstimate
from controller.measurement.learner import TrafficLearner, clos_samplers, compare
from controller.measurement.sflow import PacketSample

DATA, ACK = 1518, 66


def sample(src, dst, frame=DATA, rate=32):
    return PacketSample(agent="127.0.0.1", sub_agent=0, source_type=2, source_index=1000,
                        sampling_rate=rate, sample_pool=0, drops=0, input_if=1, output_if=2,
                        frame_length=frame, src=src, dst=dst, proto=6)


def hosts(n):
    return [f"10.0.{i // 200}.{i % 200 + 1}" for i in range(n)]


def feed_window(learner, flows, w, window_s=2.0, per_pair=8, acks=True):
    """Noiseless samples for one window: ``per_pair`` data samples per occurrence of a pair in
    ``flows`` (a list, so pairs of several rings add up), and acknowledgements back."""
    t = w * window_s + 0.1
    data = set(flows)
    batch = []
    for a, b in flows:
        batch += [sample(a, b)] * per_pair
        if acks and (b, a) not in data:
            batch += [sample(b, a, frame=ACK)] * math.ceil(per_pair / 2)
    learner.observe(batch, t)


def ring(order):
    return [(order[i], order[(i + 1) % len(order)]) for i in range(len(order))]


# --- windows and the estimator ------------------------------------------------------------------

def test_windows_close_at_multiples_of_the_window():
    lr = TrafficLearner(window_s=2.0)
    lr.observe([sample("10.0.0.1", "10.0.0.2")] * 3, now=10.5)
    lr.observe([sample("10.0.0.1", "10.0.0.2")], now=11.99)
    assert lr.window_pairs(now=11.0) == {}  # still open
    assert lr.window_pairs(now=12.0) == {("10.0.0.1", "10.0.0.2"): 4 * DATA * 32}
    assert lr.window_pairs(now=14.0) == {}  # the last closed window is [12, 14): empty
    assert lr.window_pairs(now=14.0, ago=2) == {("10.0.0.1", "10.0.0.2"): 4 * DATA * 32}


def test_non_ipv4_and_self_samples_are_ignored_and_old_windows_dropped():
    lr = TrafficLearner(window_s=1.0, keep_windows=3)
    lr.observe([sample(None, None), sample("10.0.0.1", "10.0.0.1")], now=0.5)
    assert lr.observed == 0 and lr.window_pairs(1.0) == {}
    for t in range(10):
        lr.observe([sample("10.0.0.1", "10.0.0.2")], now=t + 0.5)
    assert len(lr._windows) <= 3
    assert lr.window_pairs(10.0, ago=1) and not lr.window_pairs(10.0, ago=5)


def test_each_sample_divided_by_the_sampling_switches_on_its_path():
    leaf_of = {"a": "l0", "b": "l0", "c": "l1"}
    lr = TrafficLearner(window_s=1.0, samplers=clos_samplers(leaf_of))
    lr.observe([sample("a", "b"), sample("a", "c"), sample("a", "zz")], now=0.5)
    assert lr.window_pairs(1.0) == {("a", "b"): DATA * 32, ("a", "c"): DATA * 32 / 3,
                                    ("a", "zz"): DATA * 32 / 3}
    assert clos_samplers(leaf_of, "leaves")("a", "c") == 2
    assert clos_samplers(leaf_of, "edge")("a", "c") == 1
    assert clos_samplers(leaf_of, "edge")("a", "b") == clos_samplers(leaf_of)("a", "b") == 1
    with pytest.raises(ValueError, match="sampling points must be one of all, leaves, edge"):
        clos_samplers(leaf_of, "spines")


def test_new_samplers_replace_the_counts_cached_per_pair():
    """Hosts adopted after their first samples: a pair counted as crossing leaves (3 sampling
    switches) is counted once its hosts are known on one leaf."""
    lr = TrafficLearner(window_s=1.0, samplers=clos_samplers({}))
    lr.observe([sample("a", "b")], now=0.5)
    lr.set_samplers(clos_samplers({"a": "l0", "b": "l0"}))
    lr.observe([sample("a", "b")], now=1.5)
    assert lr.window_pairs(1.2) == {("a", "b"): DATA * 32 / 3}
    assert lr.window_pairs(2.2) == {("a", "b"): DATA * 32}


def test_estimate_is_unbiased_when_every_switch_on_the_path_samples():
    """Packets cross leaf, spine (one of 4, by ECMP) and leaf, each sampling 1 in 64 at
    random; the divided sum estimates the true bytes within 4 standard errors."""
    rng = random.Random(7)
    leaf_of = {"a": "l0", "b": "l1", "c": "l0"}
    lr = TrafficLearner(window_s=10.0, samplers=clos_samplers(leaf_of))
    rate, packets = 64, 200_000
    true = {("a", "b"): 0, ("a", "c"): 0}
    batch = []
    for i in range(packets):
        pair = ("a", "b") if i % 3 else ("a", "c")
        size = rng.choice((DATA, 600, 9000))
        true[pair] += size
        switches = 3 if pair == ("a", "b") else 1
        batch += [sample(*pair, frame=size, rate=rate)
                  for _ in range(switches) if rng.random() < 1 / rate]
    lr.observe(batch, now=1.0)
    est = lr.window_pairs(now=10.0)
    for pair, b in true.items():
        n_switch = 3 if pair == ("a", "b") else 1
        # variance of a Bernoulli(1/R) sample estimate: sum(size^2) * (R - 1) / k
        se = math.sqrt((rate - 1) * b * 9000 / n_switch)
        assert abs(est[pair] - b) < 4 * se, (pair, est[pair], b)


# --- matrices -----------------------------------------------------------------------------------

MATRIX = st.sampled_from(["permutation", "ring", "multi-ring"])


@st.composite
def matrices(draw):
    n = draw(st.integers(2, 24))
    members = hosts(n)
    kind = draw(MATRIX)
    if kind == "ring":
        flows = ring(draw(st.permutations(members)))
    elif kind == "multi-ring":
        flows = []
        for _ in range(draw(st.integers(2, 4))):
            flows += ring(draw(st.permutations(members)))
    else:  # a derangement: everyone sends to someone else, everyone receives once
        perm = list(draw(st.permutations(members)))
        for i in range(n):  # a fixed point swaps with its neighbour: never a new one here
            if perm[i] == members[i]:
                j = (i + 1) % n
                perm[i], perm[j] = perm[j], perm[i]
        assume(all(a != b for a, b in zip(members, perm)))
        flows = list(zip(members, perm))
    return members, flows


def fold_closed(lr, est, members, after, now):
    """Fold the learner's windows closed after index ``after`` (members' pairs only) into
    ``est``; the last index folded."""
    for w in lr.closed(after, now):
        b = {p: v for p, v in w.bytes.items() if p[0] in members and p[1] in members}
        est.fold(b, {p: w.samples[p] for p in b})
        after = w.index
    return after


@settings(max_examples=150, deadline=None)
@given(matrices(), st.integers(4, 40), st.floats(0.5, 5.0))
def test_matrix_learned_exactly_and_steady_after_two_windows(m, per_pair, window_s):
    members, flows = m
    lr = TrafficLearner(window_s=window_s)
    est = MatrixEstimate(min_samples=4)
    outsiders = hosts(40)[30:]
    for w in (10, 11, 12):
        feed_window(lr, flows, w, window_s, per_pair)
        # traffic between non-members, ten times larger, changes nothing
        lr.observe([sample(outsiders[0], outsiders[1])] * per_pair * 10, w * window_s + 0.2)
        lr.observe([sample(outsiders[2], members[0])] * per_pair * 10, w * window_s + 0.2)
    done = fold_closed(lr, est, set(members), 9, 11 * window_s + 1e-9)
    assert set(est.matrix()) == set(flows) and not est.steady  # one window only
    fold_closed(lr, est, set(members), done, 13 * window_s)
    assert est.steady and set(est.matrix()) == set(flows)
    for pair, b in est.matrix().items():
        assert b == pytest.approx(flows.count(pair) * per_pair * DATA * 32)
    assert compare(flows, est.matrix()).share == 0.0


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 400), st.floats(0.0, 1.0), st.integers(40, 199), st.integers(2, 12))
def test_acknowledgements_never_become_pairs(data_samples, acks_per_data, ack_frame, n):
    """Acknowledgements are not data frames, whatever their number: they never count."""
    members = hosts(n)
    flows = ring(members)
    lr = TrafficLearner(window_s=1.0)
    batch = []
    for a, b in flows:
        batch += [sample(a, b)] * data_samples
        if (b, a) not in flows:
            batch += [sample(b, a, frame=ack_frame)] * round(acks_per_data * data_samples)
    lr.observe(batch, now=5.5)
    assert set(lr.window_pairs(now=6.0)) == set(flows)


def test_closed_windows_come_once_each_with_empty_ones_and_at_most_those_kept():
    lr = TrafficLearner(window_s=1.0, keep_windows=4)
    lr.observe([sample("10.0.0.1", "10.0.0.2")], now=2.5)
    ws = lr.closed(after=0, now=5.0)  # 4 kept: the open window 5 and the closed 2, 3, 4
    assert [w.index for w in ws] == [2, 3, 4] and [bool(w.bytes) for w in ws] == [
        True, False, False]
    assert lr.closed(after=4, now=5.9) == []  # window 5 is still open
    assert [w.index for w in lr.closed(after=3, now=5.0)] == [4]
    assert [w.index for w in lr.closed(after=-100, now=20.0)] == [17, 18, 19]
    assert ws[0].samples == {("10.0.0.1", "10.0.0.2"): 1}


def test_invalid_settings():
    for bad in (0, -1, float("nan"), float("inf"), "2"):
        with pytest.raises(ValueError, match="learning window"):
            TrafficLearner(window_s=bad)


def test_observe_from_many_threads_loses_nothing():
    lr = TrafficLearner(window_s=100.0)
    batch = [sample("10.0.0.1", "10.0.0.2")] * 10

    def work():
        for _ in range(500):
            lr.observe(batch, now=50.0)
            lr.closed(after=0, now=150.0)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert lr.observed == 4 * 500 * 10
    assert lr.window_pairs(now=100.0) == {("10.0.0.1", "10.0.0.2"): 20_000 * DATA * 32}


# --- comparison with a declaration --------------------------------------------------------------

def test_compare_names_a_ring_declared_backwards():
    members = hosts(8)
    declared = ring(members)
    measured = {(b, a): 1e6 for a, b in declared}
    c = compare(declared, measured)
    assert c.opposite and c.share == 1.0
    assert c.description == "traffic runs opposite to the declared ring"
    assert set(c.missing) == set(declared) and set(c.undeclared) == set(measured)


def test_compare_counts_undeclared_pairs_and_their_share():
    declared = ring(hosts(4))
    measured = {p: 1e6 for p in declared[:3]}
    measured[("10.0.0.1", "10.0.0.3")] = 1e6
    c = compare(declared, measured)
    assert not c.opposite and c.share == pytest.approx(0.25)
    assert c.description == "1 of 4 measured pairs were not declared (25% of the bytes)"
    assert c.missing == [declared[3]]
    assert compare(declared, {}).description == "no traffic measured between the members"
    assert compare(declared, {p: 5.0 for p in declared}).description == \
        "all 4 measured pairs were declared"
    a, b, c3 = hosts(3)
    both = compare([(a, b), (b, a), (b, c3)], {(a, b): 1.0, (b, a): 1.0, (c3, b): 1.0})
    assert not both.opposite  # partly reversed only: named by its count
    assert both.description == "1 of 3 measured pairs were not declared (33% of the bytes)"
    two = [("10.0.0.1", "10.0.0.2"), ("10.0.0.2", "10.0.0.1")]  # a ring of two: its own reverse
    assert not compare(two, {p: 1.0 for p in two}).opposite


@settings(max_examples=200, deadline=None)
@given(matrices(), st.data())
def test_declared_traffic_never_mismatches_and_reversed_rings_always_do(m, data):
    members, flows = m
    measured = {p: data.draw(st.floats(1.0, 1e9)) for p in set(flows)}
    c = compare(flows, measured)
    assert c.share == 0.0 and c.undeclared == []
    reverse = {(b, a): v for (a, b), v in measured.items()}
    r = compare(flows, reverse)
    # rings of two, and multi-rings with a pair in both directions, are not simply reversed
    assume(set(reverse).isdisjoint(measured))
    assert r.opposite and r.share == pytest.approx(1.0)
    assert r.description.startswith("traffic runs opposite to the declared")


# --- the paper-scale benchmark's machinery, at a small scale -------------------------------------

def test_learning_benchmark_feeds_real_datagrams_and_learns_the_ring():
    from benchmarks.learning import run
    doc = run(spines=4, leaves=8, hosts_per_leaf=16, ranks=64,
              settings=[(65536, "edge"), (1 << 20, "edge")],
              learning_times=[("all-to-all", 16)])
    ok, starved = doc["sflow"]
    assert ok["flow_entries_added"] == 0 and ok["fed_datagrams"] > 0
    # Poisson draws: what was fed is the expected count within 5%
    expected = ok["samples_per_s"] * ok["traffic_s"]
    assert abs(ok["fed_samples"] - expected) < 0.05 * expected
    assert ok["learned_after_s"] == pytest.approx(2 * 2.0 - 0.7)  # two closed windows
    assert ok["windows"][-1] == {"window": 1, "found_pairs": 64, "extra_pairs": 0,
                                 "steady": True, "exact": True}  # it stops once learned
    assert ok["declared_backwards"]["says"] == "traffic runs opposite to the declared ring"
    assert 0 < ok["us_per_sample"] < 1000 and ok["cpu_per_traffic_s"] > 0
    # about 6 samples a pair a window: some pairs need a third window to gather 4 samples,
    # and they are learned as their samples accumulate (no window has to show them all)
    assert starved["samples_per_pair_per_window"] < 6
    assert starved["learned_after_s"] > ok["learned_after_s"]
    assert [w["found_pairs"] for w in starved["windows"]] == sorted(
        w["found_pairs"] for w in starved["windows"])  # pairs join as samples accumulate
    a2a = doc["learning_time"]  # one run per learning-time setting
    assert [r["pairs"] for r in a2a] == [16 * 15] * 2
    assert all(r["learned_after_s"] is not None for r in a2a)
    alt = doc["openflow_per_pair_counters"]
    assert alt["entries_per_leaf_for_this_job"] == 8 * (64 - 8)  # 8 members a leaf
    assert alt["entries_per_leaf_for_any_job"] == 16 * (128 - 16)


def test_the_freeze_benchmark_shows_the_job_frozen_before_and_counting_now():
    """Issue 74, item 6 (``benchmarks.learning.freeze``): one datagram at 1 in 2^20 and one
    report of 60 s at line rate froze a low-rate job for many windows as they were counted
    before; with what each sender usually reports, not at all."""
    from benchmarks.learning import freeze
    doc = freeze(horizon=300)
    for case in ("sflow_datagram_at_2^20", "report_of_60s_at_line_rate"):
        assert doc[case]["before"]["frozen_windows"] > 50, doc[case]
        assert doc[case]["now"]["frozen_windows"] == 0, doc[case]
    assert doc["sflow_datagram_at_2^20"]["now"]["clipped_samples"] == 1
    assert "carry" in doc["report_of_60s_at_line_rate"]["now"]["refused"]
