"""Shared switch mastership's pure parts (``controller/service/ownership.py``): the shares are
even and stable, the same in every process, and the planner's wait ends when every owner
acknowledged, when an owner leaves, or at its timeout with the members that did not."""
import subprocess
import sys
import threading
import time

from controller.service.ownership import Shares, owner_of, weight

DPIDS = range(1, 321)  # a k = 16 fat-tree's 320 switches


def test_three_members_share_320_switches_about_evenly():
    s = Shares("c0")
    s.set_members({"c0", "c1", "c2"}, 5)
    counts = s.count(DPIDS)
    assert sum(counts.values()) == 320
    assert all(80 <= n <= 134 for n in counts.values()), counts  # 107 each in expectation


def test_a_member_leaving_moves_only_its_switches_and_one_joining_takes_from_every_other():
    before = {d: owner_of(d, ["a", "b", "c"]) for d in DPIDS}
    after = {d: owner_of(d, ["a", "c"]) for d in DPIDS}
    assert {d for d in DPIDS if before[d] != after[d]} == {d for d in DPIDS if before[d] == "b"}
    joined = {d: owner_of(d, ["a", "b", "c", "d"]) for d in DPIDS}
    moved = {d for d in DPIDS if joined[d] != before[d]}
    assert moved == {d for d in DPIDS if joined[d] == "d"}
    assert {before[d] for d in moved} == {"a", "b", "c"}


def test_weights_are_the_same_in_another_process():
    code = ("from controller.service.ownership import weight;"
            "print(weight('c1', 7), weight('node-2:8080', 2**48 + 3))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    assert [int(x) for x in out] == [weight("c1", 7), weight("node-2:8080", 2**48 + 3)]


def test_no_members_means_this_controller_writes_every_switch():
    owns, revision = Shares("c0").snapshot()
    assert owns(1) and owns(99) and revision == 0
    assert owner_of(1, []) is None


def test_a_new_member_set_is_noted_once_with_its_revision():
    s = Shares("c0")
    assert s.set_members(["c0", "c1"], 10)
    assert not s.set_members(["c1", "c0"], 10)  # the same set seen again
    assert s.revision == 10
    assert s.set_members(["c1", "c0"], 12) and s.revision == 12  # written again later
    assert s.set_members(["c0"], 15) and s.revision == 15
    owns, revision = s.snapshot()
    assert revision == 15 and all(owns(d) for d in DPIDS)


def test_wait_returns_when_every_owner_acknowledged():
    s = Shares("c0")
    s.set_members({"c0", "c1", "c2"}, 3)
    others = sorted(set(s.count(DPIDS)) - {"c0"})
    assert s.pending(40, DPIDS) == others
    s.acknowledged("c1", 40, 3)
    t = threading.Timer(0.2, s.acknowledged, ("c2", 41, 3))
    t.start()
    try:
        assert s.wait(40, DPIDS, timeout=10) == []
    finally:
        t.cancel()
    assert s.pending(42, DPIDS) == ["c1", "c2"]  # an older acknowledgement is not enough
    s.set_members({"c0", "c1", "c2", "c3"}, 9)
    s.acknowledged("c1", 50, 3)  # enforced on its share of the member set before: not enough
    assert "c1" in s.pending(50, DPIDS)
    s.acknowledged("c1", 50, 9)
    assert "c1" not in s.pending(50, DPIDS)


def test_wait_ends_when_an_owner_leaves_and_names_the_silent_at_its_timeout():
    s = Shares("c0")
    s.set_members({"c0", "c1", "c2"}, 3)
    s.acknowledged("c2", 50, 60)
    t = threading.Timer(0.2, s.set_members, ({"c0", "c2"}, 60))
    t.start()
    try:
        assert s.wait(50, DPIDS, timeout=10) == []  # c1 left: its switches are others' now
    finally:
        t.cancel()
    assert s.wait(51, DPIDS, timeout=0.2) == ["c2"]
    # only owners of the switches asked about are waited for
    mine = [d for d in DPIDS if s.owner(d) == "c0"]
    assert s.wait(51, mine, timeout=0.2) == []
    # a planner that steps down stops waiting (``until``), woken by its role change
    planner = [True]
    t = threading.Timer(0.2, lambda: (planner.clear(), s.wake()))
    t.start()
    try:
        t0 = time.monotonic()
        assert s.wait(51, DPIDS, timeout=10, until=lambda: bool(planner)) == ["c2"]
        assert time.monotonic() - t0 < 5  # not the timeout
    finally:
        t.cancel()


def test_the_reconciler_writes_only_its_share_and_drops_reads_of_switches_it_gave_away():
    from controller.enforcement.reconcile import Reconciler
    rec = Reconciler(installer=None, counters={})
    rec.connected(1)
    rec.connected(2)
    assert rec.claim() == [1] and rec.syncing == {1}  # switch 1 is being read
    rec.forget(lambda d: d != 1)  # then given to another member
    assert rec.syncing == set() and rec.pending == {2}  # its read is dropped when it ends
    rec.manages = lambda d: d % 2 == 0
    rec.connected(3)
    rec.requeue({5}, connected=lambda d: True)
    assert rec.pending == {2}  # 3 and 5 are another's: never queued


def test_shared_mastership_refuses_what_it_cannot_serve_with_a_clear_error():
    from types import SimpleNamespace

    import pytest

    from controller.errors import InputError
    from controller.shell.core import _cluster
    conf = SimpleNamespace(mlroute_share_switches=True, mlroute_etcd=None, mlroute_state=None,
                           mlroute_fabric="fabric.json", mlroute_mode="flow",
                           wsapi_host="127.0.0.1", wsapi_port=8080, mlroute_id="c0",
                           mlroute_etcd_prefix="/mlroute/", mlroute_lease_ttl=2,
                           mlroute_failover_probe=True)
    with pytest.raises(InputError, match="--mlroute-etcd"):
        _cluster(conf)
    conf.mlroute_etcd = "http://127.0.0.1:9"  # nothing is asked of it before these checks
    with pytest.raises(InputError, match="declared fabric"):
        _cluster(SimpleNamespace(**{**vars(conf), "mlroute_fabric": None}))
    with pytest.raises(InputError, match="host"):
        _cluster(SimpleNamespace(**{**vars(conf), "mlroute_mode": "host"}))
