"""Where routing stops helping (``controller/model/cuts.py``): a job's demand across a leaf's
(a pod's) uplinks above what is alive of them is named with its demand, capacity, bound and the
placement that would help."""
import pytest

from controller.model import cuts
from controller.model.clos import Clos
from controller.model.jobs import Flow, Job


def pairs(jid="j", src=0, dst=1, n=4, nbytes=1e6):
    """n hosts of leaf ``src`` each sending to one host of leaf ``dst``: n flows at line rate."""
    return Job(jid, explicit=[Flow(jid, f"h{src}_{i}", f"h{dst}_{i}", nbytes) for i in range(n)])


def test_four_hosts_over_two_uplinks_are_cut_bound_and_named():
    found = cuts.findings(Clos.leaf_spine(2, 4, 4), [pairs()])
    assert [(d["cut"], d["direction"]) for d in found] == [("leaf l0", "out"), ("leaf l1", "in")]
    d = found[0]
    assert (d["jobs"], d["hosts"], d["demand_gbps"], d["capacity_gbps"], d["bound"]) == (
        ["j"], 4, 400.0, 200.0, 2.0)
    assert d["placement"]["at_most"] == 2 and d["placement"]["units"] == 4
    assert "leaf l0" in d["message"] and "2.00x its ideal" in d["message"]
    ideal = pairs().ideal_allreduce_s(Clos.leaf_spine(2, 4, 4).link_bps("host"))
    assert cuts.bounds(Clos.leaf_spine(2, 4, 4), [pairs()])["j"] == pytest.approx(2 * ideal)


def test_the_same_with_four_uplinks_is_not_cut_bound():
    f = Clos.leaf_spine(4, 4, 4)
    assert cuts.findings(f, [pairs()]) == []
    j = pairs()
    assert cuts.bounds(f, [j])["j"] == pytest.approx(j.ideal_allreduce_s(f.link_bps("host")))


@pytest.mark.parametrize("fabric, down", [
    (Clos.leaf_spine(4, 4, 4), {("l0", "s0")}),  # a whole link of four
    (Clos.leaf_spine(2, 4, 4, bundle=2), {("l0", "s1", 1)})])  # one member of a bundle
def test_a_link_down_turns_a_fine_case_into_a_cut_bound_one(fabric, down):
    assert cuts.findings(fabric, [pairs()]) == []  # 400 Gb/s over 400 Gb/s of uplinks
    found = cuts.findings(fabric.with_down(down), [pairs()])
    assert [d["cut"] for d in found] == ["leaf l0"]  # l1 receives over all its links
    assert (found[0]["capacity_gbps"], found[0]["bound"]) == (300.0, pytest.approx(4 / 3, 1e-3))


def test_three_tiers_name_a_pods_cut():
    f = Clos.fat_tree(4)  # a pod: 2 leaves of 2 hosts, 4 links to the cores
    src = [h for h, leaf in f.hosts.items() if leaf in ("l0", "l1")]
    dst = [h for h, leaf in f.hosts.items() if leaf in ("l2", "l3")]
    job = Job("p", explicit=[Flow("p", a, b, 1e6) for a, b in zip(src, dst)])
    assert cuts.findings(f, [job]) == []  # 4 flows over 4 links: fine
    found = cuts.findings(f.with_down({("a0_0", "c0_0")}), [job])
    assert [d["cut"] for d in found] == ["pod pod0"]  # no leaf is cut-bound
    d = found[0]
    assert (d["kind"], d["demand_gbps"], d["capacity_gbps"]) == ("pod", 400.0, 300.0)
    assert "other pods" in d["message"] and "links to the cores" in d["message"]
    assert d["placement"]["pack"] == []  # a pod has 4 hosts: none holds the 8
    assert d["placement"]["at_most"] == 3


def test_planes_add_their_uplinks_and_name_the_leaf_of_each():
    found = cuts.findings(Clos.leaf_spine(1, 4, 4, planes=2), [pairs()])
    assert found[0]["cut"] == "leaf l0_p0 / l0_p1" and found[0]["capacity_gbps"] == 200.0
    assert cuts.findings(Clos.leaf_spine(2, 4, 4, planes=2), [pairs()]) == []


def test_a_placement_names_the_leaves_that_hold_the_job_those_holding_most_first():
    f = Clos.leaf_spine(1, 4, 4)  # one uplink: two flows out of a leaf are too many
    job = Job("j", explicit=[Flow("j", "h0_0", "h1_0", 1e6), Flow("j", "h0_1", "h1_1", 1e6)])
    d = cuts.findings(f, [job])[0]
    assert d["placement"]["pack"][:2] == ["l0", "l1"]  # hold 2 of its 4 hosts each
    other = Job("o", rings=[["h2_0", "h3_0"]], ring_bytes=1e3)  # l2 and l3 now busy
    d = cuts.findings(f, [job, other], busy={"h1_2"})[0]
    assert d["placement"]["pack"] == ["l0"] and "under one leaf (l0)" in d["message"]


def test_a_ring_that_crosses_a_leaf_twice_is_told_the_ring_order():
    ring = Job("r", rings=[["h0_0", "h1_0", "h0_1", "h1_1"]], ring_bytes=4e6)
    d = cuts.findings(Clos.leaf_spine(1, 2, 2), [ring])[0]
    assert d["bound"] == 2.0 and d["placement"]["ring_order"]
    assert "ring_order advised" in d["message"]
    grouped = Job("r", rings=[["h0_0", "h0_1", "h1_0", "h1_1"]], ring_bytes=4e6)
    assert cuts.findings(Clos.leaf_spine(1, 2, 2), [grouped]) == []


def test_jobs_that_exceed_a_cut_together_are_named_with_the_one_to_move():
    f = Clos.leaf_spine(2, 4, 4)
    jobs = [Job(j, rings=[[f"h0_{k}", f"h{k + 1}_0"]], ring_bytes=1e6)
            for k, j in enumerate("abc")]
    (d,) = cuts.findings(f, jobs)
    assert d["shared"] and d["jobs"] == ["a", "b", "c"] and d["cut"] == "leaf l0"
    assert d["bound"] == pytest.approx(1.5) and d["placement"]["move"] == ["a"]
    assert "moving a off it would" in d["message"]
    assert cuts.findings(f, jobs[:2]) == []


def test_the_shared_bound_counts_each_jobs_ideal():
    assert cuts.shared_bound([(100, 1.0), (100, 1.0)], 200) == 1.0
    assert cuts.shared_bound([(100, 1.0), (100, 1.0), (100, 1.0)], 200) == pytest.approx(1.5)
    # a long job leaves room after the short ones: less than the rates' sum over capacity
    assert 1.0 < cuts.shared_bound([(100, 1.0), (100, 1.0), (100, 4.0)], 200) < 1.5
