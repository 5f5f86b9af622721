import numpy as np
import pytest

from controller.model.rates import max_min_rates


def test_single_bottleneck_shared_equally():
    # three flows on link 0 (capacity 9); flow 2 also crosses link 1 (capacity 100)
    rates = max_min_rates([[0], [0], [0, 1]], np.array([9.0, 100.0]))
    assert rates == pytest.approx([3, 3, 3])


def test_progressive_filling_two_levels():
    # Classic example: link A (cap 1) carries f0, f1; link B (cap 3) carries f1, f2, f3.
    # Level 1: A's share 0.5 < B's 1.0 -> f0, f1 = 0.5. Then B has 2.5 left for f2, f3 -> 1.25.
    rates = max_min_rates([[0], [0, 1], [1], [1]], np.array([1.0, 3.0]))
    assert rates == pytest.approx([0.5, 0.5, 1.25, 1.25])


def test_three_levels_and_unused_capacity():
    # f0 alone on link 2 but also on link 0 with f1; link 1 has f1, f2, f3 (cap 6); link 0 cap 2
    rates = max_min_rates([[0, 2], [0, 1], [1], [1]], np.array([2.0, 6.0, 10.0]))
    # link0 share 1, link1 share 2 -> f0, f1 = 1; link1 residual 5 over f2, f3 = 2.5
    assert rates == pytest.approx([1.0, 1.0, 2.5, 2.5])


def test_no_link_is_oversubscribed():
    rng = np.random.default_rng(7)
    paths = [sorted(set(rng.integers(0, 12, size=3).tolist())) for _ in range(40)]
    cap = rng.uniform(1, 10, size=12)
    rates = max_min_rates(paths, cap)
    used = np.zeros(12)
    for p, r in zip(paths, rates):
        used[p] += r
    assert np.all(used <= cap * (1 + 1e-9))
    # max-min: every flow has a saturated link on which it has the largest rate
    for p, r in zip(paths, rates):
        assert any(used[l] >= cap[l] * (1 - 1e-9) and
                   all(r >= rates[q] - 1e-9 for q, pq in enumerate(paths) if l in pq) for l in p)


def test_empty():
    assert max_min_rates([], np.array([1.0])).size == 0


def test_a_flow_on_no_link_is_an_error_not_a_loop():
    with pytest.raises(ValueError, match="flow 1 crosses no link"):
        max_min_rates([[0], []], np.array([1.0]))


@pytest.mark.timeout(10)
def test_one_level_per_flow_ends():
    # every flow alone on a link of its own capacity (plus a big shared link): n levels
    n = 200
    cap = np.concatenate([np.arange(1.0, n + 1), [1e9]])
    rates = max_min_rates([[k, n] for k in range(n)], cap)
    assert rates == pytest.approx(cap[:n])


def test_zero_capacity_link_stops_only_its_flows():
    # a zero-capacity link gives its flows rate 0 and leaves the others their share
    rates = max_min_rates([[0], [1], [1]], np.array([0.0, 4.0]))
    assert rates == pytest.approx([0.0, 2.0, 2.0])
