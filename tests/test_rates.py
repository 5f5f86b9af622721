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


def _random_filling(seed: int):
    """Weights (integers every third seed: many ties), some links of no capacity, some
    entities not running."""
    from scipy.sparse import csr_matrix
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(1, 80)), int(rng.integers(1, 40))
    dense = rng.random((n, m)) * (rng.random((n, m)) < 0.3)
    dense[np.arange(n), rng.integers(0, m, n)] += rng.random(n) + 0.1  # every row on a link
    if seed % 3 == 0:
        dense = np.ceil(dense)
    cap = rng.random(m) * 10 + 0.5
    if seed % 5 == 0:
        cap[: m // 2] = 0.0
    a = csr_matrix(dense)
    return a, a.T.tocsr(), cap, rng.random(n) < 0.8


@pytest.mark.parametrize("seed", range(60))
def test_the_compiled_filling_is_the_interpreted_one_to_the_last_bit(seed):
    """``rates_kernel.fill`` sums what the products sum, in their order: equal arrays."""
    from controller.model.rates import interpreted_max_min
    from controller.model.rates_kernel import fill
    a, at, cap, alive = _random_filling(seed)
    got = fill(at.indptr, at.indices, at.data, a.indptr, a.indices, cap, alive)
    assert np.array_equal(got, interpreted_max_min(a, at, cap, alive))


def test_a_process_loads_the_compiled_filling_once_the_interpreted_one_cost_as_much(
        monkeypatch):
    """Below ``COMPILE_AFTER_S`` of interpreted filling nothing is loaded; past it the kernel
    runs (the interpreted function is not called again), with the same rates."""
    from controller.model import rates
    monkeypatch.setattr(rates._Filling, "spent", 0.0)
    monkeypatch.setattr(rates._Filling, "kernel", None)
    a, at, cap, alive = _random_filling(4)
    first = rates.weighted_max_min(a, at, cap, alive)
    assert rates._Filling.kernel is None and rates._Filling.spent > 0
    monkeypatch.setattr(rates._Filling, "spent", rates.COMPILE_AFTER_S)
    calls = []
    monkeypatch.setattr(rates, "interpreted_max_min", lambda *x: calls.append(x))
    assert np.array_equal(rates.weighted_max_min(a, at, cap, alive), first)
    assert rates._Filling.kernel and not calls


def test_without_numba_the_interpreted_filling_stays(monkeypatch):
    """A platform where numba does not import: the same rates, nothing loaded again."""
    import builtins

    from controller.model import rates
    real = builtins.__import__

    def no_numba(name, *args, **kw):
        if name == "controller.model.rates_kernel":
            raise ImportError("No module named 'numba'")
        return real(name, *args, **kw)
    monkeypatch.setattr(builtins, "__import__", no_numba)
    monkeypatch.setattr(rates._Filling, "spent", rates.COMPILE_AFTER_S)
    monkeypatch.setattr(rates._Filling, "kernel", None)
    a, at, cap, alive = _random_filling(7)
    got = rates.weighted_max_min(a, at, cap, alive)
    assert rates._Filling.kernel is False
    assert np.array_equal(got, rates.interpreted_max_min(a, at, cap, alive))


def test_the_kernel_s_tolerance_is_the_interpreted_one_s():
    """``rates_kernel`` holds its own copy (importing ``rates`` from it would make an import
    cycle: ``rates`` loads the kernel); the two must stay one value for equal rates."""
    from controller.model import rates, rates_kernel
    assert rates_kernel.REL_TOL == rates.REL_TOL
