"""The chaos suite's judgement (``benchmarks/chaos.py``), without switches: what counts as
something lost. The suite itself on real parts: test_chaos_live.py."""
from benchmarks import chaos
from topologies.clos import clos_fabric, fattree_fabric


def test_the_large_post_has_1920_flows_on_the_fat_tree():
    assert len(chaos.large_job(fattree_fabric(4, 2, 50.0))["flows"]) == 1920
    assert len(chaos.large_job(clos_fabric(2, 4, 2, 50.0))["flows"]) == 448


def test_a_route_is_its_path_or_its_parts_paths():
    assert chaos._where({"path": ["l0", "s1", "l2"]}) == ("l0", "s1", "l2")
    assert chaos._where({"spine": None}) == ()
    split = {"split": [{"path": ["l0", "s0", "l1"], "share": .5},
                       {"path": ["l0", "s1", "l1"], "share": .5}]}
    assert chaos._where(split) == (("l0", "s0", "l1"), ("l0", "s1", "l1"))


def test_moved_counts_the_flows_on_another_path_only():
    before = {("a", "h0", "h1", 1, 2): ("l0", "s0", "l1"), ("a", "h1", "h0", 1, 2): ("l1", "s0", "l0")}
    after = {("a", "h0", "h1", 1, 2): ("l0", "s1", "l1"), ("a", "h1", "h0", 1, 2): ("l1", "s0", "l0")}
    assert chaos.moved(before, after) == 1
    assert chaos.moved(before, {}) == 0  # a deleted job moved nothing


def test_nothing_lost_is_every_condition_at_once():
    good = {"case": "flap", "tables": {"mismatched": 0}, "rest": {"5xx": 0},
            "ring": {"sums_ok": True}, "job": "present-complete"}
    assert chaos.judge(good)["ok"]
    assert chaos.judge({**good, "job": "absent"})["ok"]  # a POST cut by a crash: clean
    for bad, says in (({"tables": {"mismatched": 2}}, "tables differ"),
                      ({"rest": {"5xx": 1}}, "5xx"),
                      ({"ring": {"sums_ok": False}}, "sums"),
                      ({"job": "present-5-of-9"}, "present-5-of-9")):
        got = chaos.judge({**good, **bad})
        assert not got["ok"] and any(says in p for p in got["problems"]), got


def test_a_cases_own_findings_fail_it():
    good = {"case": "ovs-restart", "tables": {"mismatched": 0}, "rest": {"5xx": 0},
            "routes_moved": 0, "same_tables_s": 2.1}
    assert chaos.judge(good)["ok"]
    for bad, says in (({"routes_moved": 3}, "3 routes moved"),
                      ({"same_tables_s": None}, "never came back"),
                      ({"table_full_total": 0.0}, "no table-full"),
                      ({"forged_received": 7}, "7 forged datagrams"),
                      ({"links_changed": True}, "forged LLDP")):
        got = chaos.judge({**good, **bad})
        assert not got["ok"] and any(says in p for p in got["problems"]), got
