"""Switch mastership shared out among three controllers (``--mlroute-share-switches``) against
real parts: a private etcd, three ryu-managers and a Mininet k = 4 fat-tree (20 switches, one
host per leaf, 20 Mbit/s) whose switches connect to all three. Open vSwitch reports exactly one
master per switch and every controller masters some; a job posted to a controller that does
not plan is answered 201 once every share confirmed, and its bytes cross the links its routes
name; a member killed, or the planner, hands its switches to the others without changing an
entry, and the next job is installed on them; the controller back takes its share again, and
finds every entry as the others left it."""
import time

import pytest

from emulation.harness.fabricnet import wait_until
from emulation.harness.ha import controller_roles
from emulation.harness.ovs import entry_ages
from tests.integration import EXTENDED, carried_as_planned, ext, ha_session
from topologies.clos import fattree_fabric

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
BW = 20  # Mbit/s
PAYLOAD = 1_000_000  # bytes per flow
DEADLINE = 15.0


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with ha_session(tmp_path_factory, "shared", (0, 0, 0), BW, n=3, shared=True,
                    clos=fattree_fabric(4, 1, BW),
                    extra_args=["--mlroute-mode", "flow", "--mlroute-dead-after", "30"]) as s:
        yield s


def masters(s) -> dict[str, str]:
    """bridge -> the controller Open vSwitch reports as its master (None: none or several)."""
    port_of = {f"tcp:127.0.0.1:{p}": cid for cid, p in s.of_ports.items()}
    out = {}
    for sw in s.fabric.switches():
        roles = controller_roles(sw)
        m = [port_of[t] for t, r in roles.items() if r == "master"]
        out[sw] = m[0] if len(m) == 1 else None
    return out


def settled(s, without=None) -> dict | None:
    """``masters`` once every switch has one (none of them ``without``), else None."""
    m = masters(s)
    return m if None not in m.values() and without not in m.values() else None


def tables(s) -> dict:
    return {sw: entry_ages(sw) for sw in s.fabric.switches()}


def across_pods(s, jid, offsets=(2, 4)):
    """Every host sends to the hosts ``offsets`` leaves on: another pod (two leaves a pod)."""
    hosts = sorted(s.fabric.host_leaves)
    n = len(hosts)
    return {"id": jid, "flows": [{"src": h, "dst": hosts[(i + d) % n], "bytes": 4e6}
                                 for i, h in enumerate(hosts) for d in offsets]}


def post_to_a_member(s, jid):
    m = s.master_id()
    member = next(cid for cid, c in s.ctls.items() if c is not None and cid != m)
    code, doc = s.ctls[member].rest("POST", "/v1/jobs", across_pods(s, jid), timeout=DEADLINE)
    assert code == 201, doc
    assert not doc.get("members_pending"), doc
    routes = s.master().rest("GET", f"/v1/jobs/{jid}", timeout=DEADLINE)[1]["routes"]
    return routes


@EXTENDED  # make test-live (Open vSwitch refreshes its status every few seconds)
def test_every_switch_has_one_master_and_every_controller_a_share(shared):
    got = wait_until(lambda: settled(shared), 15, 0.5,
                     "one master per switch in Open vSwitch's status")
    counts = {cid: list(got.values()).count(cid) for cid in shared.ids}
    assert all(n >= 1 for n in counts.values()), counts
    views = {cid: shared.cluster(cid) for cid in shared.ids}
    for cid, v in views.items():
        assert v["self"]["switches"]["master"] == counts[cid], (cid, v["self"], counts)
        assert {m["id"]: m["switches"] for m in v["members"]} == counts, v["members"]


def test_a_job_posted_to_a_member_is_installed_on_every_share(shared):
    routes = post_to_a_member(shared, "a2a")
    try:
        carried_as_planned(shared.net, shared.fabric, routes, PAYLOAD)
    finally:
        shared.master().rest("DELETE", "/v1/jobs/a2a", timeout=DEADLINE)


def unchanged(before: dict, after: dict, elapsed: float) -> None:
    """Every entry is still there and kept ageing: none was re-added."""
    for sw, entries in after.items():
        assert set(entries) == set(before[sw]), sw
        for key, (age, _packets) in entries.items():
            assert age >= before[sw][key][0] + elapsed - 1.5, (sw, key)


@pytest.mark.parametrize("who", [ext("member"), ext("planner")])  # make test-live
def test_a_controller_killed_hands_its_switches_over_and_back_unchanged(shared, who):
    routes = post_to_a_member(shared, f"kept-{who}")
    planner = shared.master_id()
    victim = planner if who == "planner" else next(c for c in shared.ids if c != planner)
    before_masters = masters(shared)
    before = tables(shared)
    t0 = time.monotonic()
    shared.kill(victim)
    moved = wait_until(lambda: settled(shared, without=victim), 20, 0.5,
                       f"the switches of {victim} mastered by the others")
    # only the victim's switches moved (rendezvous hashing)
    assert all(moved[sw] == c for sw, c in before_masters.items() if c != victim)
    shared.master()  # a planner (a new one when the planner was killed)
    unchanged(before, tables(shared), time.monotonic() - t0)
    carried_as_planned(shared.net, shared.fabric, routes, PAYLOAD)
    # a job posted while two controllers share every switch
    code, doc = shared.master().rest("POST", "/v1/jobs", across_pods(shared, "two", (6,)),
                                     timeout=DEADLINE)
    assert code == 201 and not doc.get("members_pending"), doc
    two = shared.master().rest("GET", "/v1/jobs/two", timeout=DEADLINE)[1]["routes"]
    carried_as_planned(shared.net, shared.fabric, two, PAYLOAD)
    assert shared.master().rest("DELETE", "/v1/jobs/two", timeout=DEADLINE)[0] == 200
    # the controller back: its share again, read and found as the others left it
    before = tables(shared)
    t0 = time.monotonic()
    shared.start_controller(victim)
    wait_until(lambda: masters(shared) == before_masters, 30, 0.5,
               f"{victim} master of its share again")
    shared.wait_ready()
    unchanged(before, tables(shared), time.monotonic() - t0)
    carried_as_planned(shared.net, shared.fabric, routes, PAYLOAD)
    assert shared.master().rest("DELETE", f"/v1/jobs/kept-{who}", timeout=DEADLINE)[0] == 200
