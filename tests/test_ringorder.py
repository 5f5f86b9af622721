"""Ring order advice: fewer inter-leaf flows, a permutation of the same ranks, a stride when one
is enough, and the predicted saving."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.problem import Problem
from controller.planners.ringorder import (
    advise_order,
    advise_ring,
    apply_advice,
    inter_leaf_flows,
    stride_order,
)
from tests.helpers import fabric, flows_job, ring_job


def test_alternating_leaves_are_grouped():
    f = fabric(2, 2, 2)
    ranks = ["h0_0", "h1_0", "h0_1", "h1_1"]
    a = advise_ring(f, ranks)
    assert a["method"] == "leaf-grouped" and a["stride"] is None
    assert a["order"] == ["h0_0", "h0_1", "h1_0", "h1_1"]
    assert a["inter_leaf_flows"] == {"given": 4, "advised": 2}


def test_a_coprime_stride_is_preferred_when_it_is_as_good():
    f = fabric(2, 3, 3)
    # leaves A B C A B C A B: stride 3 visits A A A B B B C C, as few crossings as grouping
    ranks = ["h0_0", "h1_0", "h2_0", "h0_1", "h1_1", "h2_1", "h0_2", "h1_2"]
    a = advise_ring(f, ranks)
    assert a["method"] == "stride" and a["stride"] == 3
    assert a["order"] == stride_order(ranks, 3)
    assert a["inter_leaf_flows"] == {"given": 8, "advised": 3}


def test_given_order_kept_when_already_best():
    f = fabric(2, 2, 2)
    a = advise_ring(f, ["h0_0", "h0_1", "h1_0", "h1_1"])
    assert a["method"] == "given" and a["inter_leaf_flows"]["advised"] == 2


def test_stride_must_be_coprime():
    with pytest.raises(InputError, match="coprime"):
        stride_order(["a", "b", "c", "d"], 2)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 5), st.integers(2, 4), st.randoms(use_true_random=False), st.data())
def test_advice_is_a_permutation_reaching_one_crossing_per_leaf(leaves, hosts, rnd, data):
    f = Clos.generate(2, leaves, hosts)
    names = list(f.hosts)
    n = data.draw(st.integers(2, len(names))) if len(names) >= 2 else 2
    ranks = rnd.sample(names, n)
    a = advise_ring(f, ranks)
    assert sorted(a["order"]) == sorted(ranks)
    k = len({f.leaf_of(h) for h in ranks})
    assert a["inter_leaf_flows"]["advised"] == (k if k > 1 else 0)
    assert a["inter_leaf_flows"]["advised"] == inter_leaf_flows(f, a["order"])
    assert a["inter_leaf_flows"]["given"] == inter_leaf_flows(f, ranks)
    if a["method"] == "given":
        assert a["order"] == ranks


def test_advice_lowers_leaf_degree_and_predicted_time():
    # 8 ranks alternating over 2 leaves with 2 spines: each leaf sends 4 flows over 2 links (load
    # 2, twice the ideal); grouped, each leaf sends 1 flow
    f = fabric(2, 2, 4)
    ranks = [f"h{i % 2}_{i // 2}" for i in range(8)]
    job = ring_job(ranks, size=8e6)
    adv = advise_order(f, [job, flows_job([("h0_0", "h1_3")], jid="x")])
    assert set(adv["jobs"]) == {"r"}, "explicit-flow jobs get no advice"
    assert adv["max_leaf_degree"] == {"given": 5, "advised": 2}
    assert adv["lower_bound"] == {"given": 3, "advised": 1}
    single = advise_order(f, [job])
    ideal = job.ideal_allreduce_s(f.link_bps())
    t = single["jobs"]["r"]["predicted_allreduce_s"]
    assert t["given"] == pytest.approx(2 * ideal)
    assert t["advised"] == pytest.approx(ideal)
    assert t["saving_s"] == pytest.approx(ideal)
    assert single["inter_leaf_flows"] == {"given": 8, "advised": 2}


def test_apply_advice_keeps_the_job():
    f = fabric(2, 2, 2)
    job = ring_job(["h0_0", "h1_0", "h0_1", "h1_1"], size=4e6)
    job.compute_s = 0.5
    adv = advise_order(f, [job], predict=False)
    new = apply_advice(job, adv["jobs"]["r"])
    assert new.rings == [["h0_0", "h0_1", "h1_0", "h1_1"]]
    assert (new.id, new.ring_bytes, new.compute_s) == ("r", 4e6, 0.5)
    assert "predicted_allreduce_s" not in adv["jobs"]["r"]
    assert len(Problem.build(f, [new])) == 2


def test_docstring_examples():
    import doctest

    import controller.planners.ringorder
    result = doctest.testmod(controller.planners.ringorder)
    assert result.attempted > 0 and result.failed == 0
