"""A job's matrix estimated over windows (``measurement.estimate``), on synthetic sample streams
drawn as a switch samples (Poisson counts): launches that ramp up and end, pauses, a phase
change, light pairs of an all-to-all beside a ring, sampling 1 in 65,536."""
import numpy as np
import pytest

from controller.measurement.estimate import MatrixEstimate

FRAME = 4158
LINE_PPS = 100e9 / 8 / FRAME  # packets per second of a 100 Gb/s host
WINDOW_S = 2.0


def ring(n, step=1):
    return [(f"r{i}", f"r{(i + step) % n}") for i in range(n)]


def alltoall(n):
    return [(f"r{a}", f"r{b}") for a in range(n) for b in range(n) if a != b]


def window(rng, flows, rate, duty=1.0):
    """One window of samples: ``flows`` maps a pair to its share of line rate; ``duty`` the
    part of the window the job sent (a launch that starts or ends inside it)."""
    b, n = {}, {}
    for pair, share in flows.items():
        k = int(rng.poisson(LINE_PPS * share * WINDOW_S * duty / rate))
        if k:
            b[pair], n[pair] = k * FRAME * rate, k
    return b, n


def run(est, rng, schedule, rate):
    """Fold ``schedule`` (a list of (flows, duty)) window by window; the fold results."""
    return [est.fold(*window(rng, flows, rate, duty)) for flows, duty in schedule]


def test_ramp_up_pause_and_relaunch_never_shrink_the_matrix():
    """Launches of a ring with a partial first and last window, 3 silent windows between them
    (a checkpoint), a tail where only some pairs still send: the matrix is the whole ring
    from its second window on, and stays it."""
    rng = np.random.default_rng(1)
    full = dict.fromkeys(ring(8), 1.0)
    tail = {p: 1.0 for p in ring(8)[:3]}
    launch = [(full, 0.3), (full, 1.0), (full, 1.0), (tail, 0.15)]
    est = MatrixEstimate()
    seen = []
    for _ in range(4):
        for flows, duty in launch + [({}, 1.0)] * 3:
            est.fold(*window(rng, flows, 8192, duty))
            seen.append((set(est.matrix()), est.steady))
    assert seen[1] == (set(ring(8)), True)
    assert all(m == set(ring(8)) for m, _ in seen[1:])
    assert est.quiet >= 4  # every tail counted as too quiet to teach or contradict


def test_phase_change_replaces_the_pairs_once_the_old_ones_are_surely_silent():
    rng = np.random.default_rng(2)
    est = MatrixEstimate()
    run(est, rng, [(dict.fromkeys(ring(8), 1.0), 1.0)] * 4, 8192)
    assert set(est.matrix()) == set(ring(8)) and est.steady
    states = []
    for _ in range(6):
        est.fold(*window(rng, dict.fromkeys(ring(8, step=-1), 1.0), 8192))
        states.append((set(est.matrix()), est.steady))
    # the new pairs join at once; the old are in doubt (not steady) until they are gone
    assert states[0] == (set(ring(8)) | set(ring(8, -1)), False)
    assert states[-1] == (set(ring(8, -1)), True)


def test_a_broadcast_between_launches_leaves_the_ring_in_the_matrix():
    """A DistributedDataParallel launch begins with rank 0 alone sending its model to the
    others (here 4 windows, at a third of the ring's rate: active): the ranks that wait send
    nothing, so their ring pairs are not contradicted; rank 0's own ring pair, silent while
    rank 0 sends elsewhere, may be in doubt but is not dropped within so short a phase."""
    rng = np.random.default_rng(7)
    est = MatrixEstimate()
    pairs = set(ring(4))
    broadcast = {("r0", "r1"): 4 / 3 * 0.5, ("r0", "r2"): 4 / 3 * 0.5}
    seen = []
    for _ in range(3):
        for flows in [broadcast] * 4 + [dict.fromkeys(ring(4), 1.0)] * 6 + [{}] * 3:
            est.fold(*window(rng, flows, 8192))
            seen.append(set(est.matrix()))
    assert seen[5] >= pairs and all(m >= pairs for m in seen[5:])


def test_a_rank_that_stops_for_good_leaves_after_the_idle_windows():
    rng = np.random.default_rng(8)
    est = MatrixEstimate(idle_windows=4)
    run(est, rng, [(dict.fromkeys(ring(4), 1.0), 1.0)] * 4, 8192)
    rest = {p: 1.0 for p in ring(4) if p[0] != "r3"}
    left = []
    for _ in range(12):
        assert est.fold(*window(rng, rest, 8192)) == "active"
        left.append(("r3", "r0") in est.matrix())
    assert left[:4] == [True] * 4 and not left[-1]


def test_light_alltoall_pairs_beside_a_ring_are_learned_at_1_in_65536():
    """A mixture-of-experts job of 64 ranks: a ring All-Reduce (each rank at 70% of line
    rate) and an all-to-all (30% spread over 63 peers: under 0.5% of line rate a pair,
    about 1.4% of a ring pair); every pair ends in the matrix, none else."""
    rng = np.random.default_rng(3)
    flows = {p: 0.3 / 63 for p in alltoall(64)}
    for p in ring(64):
        flows[p] += 0.7
    est = MatrixEstimate()
    first = None
    for w in range(40):
        est.fold(*window(rng, flows, 65536))
        if first is None and est.steady:
            first = w
        if set(est.matrix()) == set(flows):
            break
    assert set(est.matrix()) == set(flows) and est.steady
    assert first is not None and first <= w
    light = est.confidence(("r0", "r2"))
    heavy = est.confidence(("r0", "r1"))
    assert light["samples"] >= 4 and heavy["relative_error"] < 0.1 < light["relative_error"] < 1


def test_alternating_phases_within_windows_learn_both():
    """All-to-all and ring alternate inside every window: both sets of pairs are learned."""
    rng = np.random.default_rng(4)
    est = MatrixEstimate()
    both = {**dict.fromkeys(alltoall(4), 0.1), **dict.fromkeys(ring(4), 0.8)}
    run(est, rng, [(both, 1.0)] * 4, 8192)
    assert set(est.matrix()) == set(alltoall(4)) and est.steady


def test_quiet_phases_and_low_rates_neither_teach_nor_contradict():
    rng = np.random.default_rng(5)
    est = MatrixEstimate()
    run(est, rng, [(dict.fromkeys(ring(8), 1.0), 1.0)] * 3, 8192)
    # an evaluation phase: a few pairs at 2% of the job's rate, for 20 windows
    folds = run(est, rng, [({p: 0.02 for p in ring(8, 3)[:2]}, 1.0)] * 20, 8192)
    assert folds.count("quiet") >= 15  # the peak decays slowly: most stay too quiet
    assert set(est.matrix()) >= set(ring(8))


def test_pairs_of_alternating_phases_outlast_their_gaps_and_stay_steady():
    """A pipeline: each middle stage sends forward in one window and backward in the next,
    and each launch ends with two windows of forward only (the schedule's drain):
    every pair has come back from such gaps, so none leaves or is in doubt for them; a
    reversed chain still replaces the pairs once they are silent past their gaps."""
    rng = np.random.default_rng(9)
    fwd = {(f"r{i}", f"r{i + 1}"): 1.0 for i in range(5)}
    bwd = {(b, a): 1.0 for a, b in fwd}
    est = MatrixEstimate()
    seen = []
    for _ in range(3):
        for flows in [fwd, bwd] * 4 + [fwd] * 2 + [{}] * 4:
            est.fold(*window(rng, flows, 8192))
            seen.append((set(est.matrix()), est.steady))
    both = set(fwd) | set(bwd)
    assert all(m == both for m, _ in seen[2:]) and seen[-1][1]
    assert sum(steady for _, steady in seen[2:]) >= len(seen) // 2
    other = {(f"r{i}", f"r{i + 2}"): 1.0 for i in range(4)}  # a new pattern, sending on
    run(est, rng, [(other, 1.0)] * 12, 8192)
    assert set(est.matrix()) == set(other) and est.steady


def test_pairs_of_a_permuted_pipeline_leave_though_their_sources_send_in_turns():
    """A pipeline relaunched with its stages in another order: an old pair's source now
    sends only every other window (forward, then backward), so its silence grows slowly
    while its decaying mean shrinks; the old pairs still leave within a few alternations,
    judged on the rate they had before they fell silent."""
    rng = np.random.default_rng(11)

    def phases(order):  # a few samples a window: 1% of line rate a pair
        fwd = {(a, b): 0.01 for a, b in zip(order, order[1:])}
        return fwd, {(b, a): 0.01 for a, b in fwd}
    old, new = phases([f"r{i}" for i in range(6)]), phases(["r3", "r0", "r5", "r2", "r4", "r1"])
    est = MatrixEstimate()
    run(est, rng, [(old[0], 1.0), (old[1], 1.0)] * 6, 8192)
    assert set(est.matrix()) == set(old[0]) | set(old[1])
    run(est, rng, [(new[0], 1.0), (new[1], 1.0)] * 5, 8192)
    assert set(est.matrix()) == set(new[0]) | set(new[1]) and est.steady


def test_pairs_still_trickling_in_keep_the_matrix_unsteady():
    """At 1 in 65,536 the light pairs of an all-to-all beside a ring gather their first
    samples over many windows: while sampled pairs that have too few samples to join carry
    a real share of the bytes, the matrix is not steady, so that it is acted on once, when
    nearly all of them are in."""
    rng = np.random.default_rng(10)
    flows = {p: 0.008 for p in alltoall(8)}
    for p in ring(8):
        flows[p] += 0.1
    est = MatrixEstimate()
    for _ in range(60):
        est.fold(*window(rng, flows, 65536))
        if est.steady:
            break
    assert est.steady and len(est.matrix()) >= 0.85 * len(flows), len(est.matrix())


def test_estimate_of_a_pair_converges_on_its_mean_bytes():
    rng = np.random.default_rng(6)
    est = MatrixEstimate(half_life=50)
    run(est, rng, [({("a", "b"): 0.5}, 1.0)] * 60, 65536)
    want = LINE_PPS * 0.5 * WINDOW_S * FRAME
    assert est.matrix()[("a", "b")] == pytest.approx(want, rel=0.05)


@pytest.mark.parametrize("kw,text", [
    ({"half_life": 0}, "half-lives"), ({"active_share": 0}, "active share"),
    ({"share": 2}, "joining share"), ({"min_samples": 0}, "at least 1"),
    ({"steady_windows": 0}, "at least 1"), ({"idle_windows": 0}, "at least 1")])
def test_invalid_settings_are_refused(kw, text):
    with pytest.raises(ValueError, match=text):
        MatrixEstimate(**kw)


def test_a_launch_rendezvous_puts_nothing_in_doubt():
    """A launch's first window: every rank connects to rank 0 (a rendezvous, a few samples a
    pair, under a quarter of a ring pair's bytes) beside the ring's first bytes; then the ring
    alone. The silent rendezvous pairs are too light to be the pattern: the matrix is steady
    from the ring's second window, while a ring pair that falls silent puts it in doubt."""
    ring_pairs = ring(8)
    est = MatrixEstimate()
    first = {p: 6e6 for p in ring_pairs}
    first.update({(f"r{i}", "r0"): 5e5 for i in range(2, 8)})  # 1/12 of a ring pair each
    first[("r7", "r0")] = 6e6  # a ring pair too
    est.fold(first, {p: 40 if b >= 6e6 else 6 for p, b in first.items()})
    est.fold({p: 6e6 for p in ring_pairs}, dict.fromkeys(ring_pairs, 40))
    assert est.unsteady() is None and est.steady
    assert set(est.matrix()) == set(first)  # the light pairs stay until surely silent
    moved = {p: 6e6 for p in ring_pairs[1:]} | {("r0", "r2"): 6e6}  # r0 sends elsewhere
    est.fold(moved, dict.fromkeys(moved, 40))
    assert est.unsteady().startswith("in doubt: pair r0 -> r1 silent")


def test_a_rendezvous_star_that_outnumbers_the_ring_puts_nothing_in_doubt():
    """Issue 59, item 6: rank 0's rendezvous with every other rank, both ways (14 pairs at
    2.5% of a ring pair), beside the ring's first two windows. Its pairs set the median pair,
    but carry 4% of the bytes together: below ``pattern_floor``, their silence once the ring
    runs alone puts nothing in doubt, and an all-to-all of a fifth of the bytes stays
    above it."""
    ring_pairs = ring(8)
    star = [p for i in range(1, 8) for p in (("r0", f"r{i}"), (f"r{i}", "r0"))]
    first = {p: 6e6 for p in ring_pairs}
    for p in star:
        first[p] = first.get(p, 0.0) + 1.5e5
    est = MatrixEstimate()
    for _ in range(2):
        est.fold(first, {p: 40 if b >= 6e6 else 6 for p, b in first.items()})
    assert est.steady
    for _ in range(2):
        est.fold({p: 6e6 for p in ring_pairs}, dict.fromkeys(ring_pairs, 40))
        assert est.unsteady() is None
    from controller.measurement.estimate import pattern_floor
    assert pattern_floor(first.values()) > 1.5e5
    moe = {p: 6e6 for p in ring_pairs} | {p: 2.5e5 for p in alltoall(8) if p not in ring_pairs}
    assert pattern_floor(moe.values()) < 2.5e5
