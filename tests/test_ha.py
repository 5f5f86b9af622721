"""Redundant controllers against real parts: a private etcd (Debian's etcd-server), two
ryu-managers with mlroute on different OpenFlow and REST ports, a Mininet 2 x 4 x 2 fabric whose
switches connect to both. Jobs posted to either controller are listed by both; the master
killed under a running ring All-Reduce is replaced within a second with no rule changed and no
byte lost; etcd lost while running refuses writes and changes nothing; a frozen master is
deposed by the generation id and steps down; etcd unreachable at start is a clear error."""
import json
import subprocess
import threading
import time

import pytest

from emulation.harness import fabricnet
from emulation.harness.controller_proc import ControllerProcess
from emulation.harness.ha import controller_roles
from emulation.harness.ovs import entry_ages as flows_with_age
from emulation.harness.ports import free_ports
from emulation.harness.run import _run_traffic, prepare_jobs
from tests.integration import EXTENDED, HOSTS, LEAVES, SPINES, ha_session, iperf_ring
from tests.integration import metric as _metric

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
DEADLINE = 15.0


@pytest.fixture(scope="module")
def ha(tmp_path_factory):
    with ha_session(tmp_path_factory, "ha", (SPINES, LEAVES, HOSTS), 5.0,
                    extra_args=["--mlroute-stats-interval", "0.5",
                                "--mlroute-dead-after", "30"]) as s:
        yield s


def rest(ctl, method, path, doc=None):
    return ctl.rest(method, path, doc, timeout=DEADLINE)


def ring(jid, ranks, size=1e6, **extra):
    return {"id": jid, "collective": "ring_allreduce", "ranks": ranks, "bytes": size, **extra}






def job_ids(ctl):
    return {j["id"] for j in rest(ctl, "GET", "/v1/jobs")[1]["jobs"]}


def metric(ctl, name):
    return _metric(ctl.url, name, DEADLINE)[0]


def all_tables(ha):
    return {sw: flows_with_age(sw) for sw in ha.fabric.switches()}


def assert_untouched(before, after, elapsed):
    for sw, entries in after.items():
        assert set(entries) == set(before[sw]), sw
        for key, (age, packets) in entries.items():
            old_age, old_packets = before[sw][key]
            assert age >= old_age + elapsed - 1.5, (sw, key)  # never re-added
            assert packets >= old_packets, (sw, key)


def ovs_masters(ha, of_port):
    """Bridges on which Open vSwitch reports the controller at ``of_port`` as master (its
    status column is refreshed every few seconds)."""
    target = f"tcp:127.0.0.1:{of_port}"
    return {sw for sw in ha.fabric.switches()
            if controller_roles(sw).get(target) == "master"}


def test_jobs_posted_to_either_controller_are_listed_by_both(ha):
    master, standby = ha.master(), ha.standby()
    cm, cs = rest(master, "GET", "/v1/cluster")[1], rest(standby, "GET", "/v1/cluster")[1]
    assert cm["self"]["role"] == "master" and cs["self"]["role"] == "standby"
    assert cm["etcd"] == cs["etcd"] == ha.etcd.url
    assert [m["id"] for m in cm["members"]] == [m["id"] for m in cs["members"]] == ha.ids
    assert cm["generation"] == cs["generation"] > 0
    assert cm["self"]["switches"]["master"] == cs["self"]["switches"]["slave"] == 6
    try:
        code, a = rest(master, "POST", "/v1/jobs", ring("on-master", ["h0_0", "h1_0", "h2_0"]))
        assert code == 201, a
        code, b = rest(standby, "POST", "/v1/jobs", ring("on-standby", ["h0_1", "h3_1"]))
        assert code == 201, b  # forwarded to the master, answered once installed
        for ctl in (master, standby):
            fabricnet.wait_until(lambda ctl=ctl: job_ids(ctl) == {"on-master", "on-standby"}, 5,
                                 what="both jobs listed")
        assert rest(master, "GET", "/v1/routes") == rest(standby, "GET", "/v1/routes")
        code, doc = rest(standby, "POST", "/v1/jobs", ring("on-master", ["h0_0", "h1_0"]))
        assert code == 409 and "exists already" in doc["error"]
        assert metric(standby, "mlroute_openflow_messages_total") == 0  # a standby sends nothing
    finally:
        for jid in ("on-master", "on-standby"):
            rest(standby, "DELETE", f"/v1/jobs/{jid}")
    fabricnet.wait_until(lambda: rest(master, "GET", "/v1/jobs")[1]["jobs"] == [], 5,
                         what="jobs deleted")


def test_killing_the_master_under_traffic_fails_over_within_a_second(ha, tmp_path):
    master_id = ha.master_id()
    master, standby = ha.ctls[master_id], ha.standby()
    standby_id = next(c for c, ctl in ha.ctls.items() if ctl is standby)
    job = prepare_jobs({"jobs": [ring("live", ["h0_0", "h1_0", "h2_0", "h3_0"], 2_000_000)]},
                       ha.fabric)[0]
    assert rest(master, "POST", "/v1/jobs", job)[0] == 201
    try:
        view = rest(master, "GET", "/v1/jobs/live")[1]
        quiet = _run_traffic(ha.net, ha.fabric, [job], {"live": view}, 1, str(tmp_path), "q")
        gen0 = rest(standby, "GET", "/v1/cluster")[1]["generation"]
        sent0 = metric(standby, "mlroute_openflow_messages_total")
        before = all_tables(ha)
        t_before = time.monotonic()
        took = {}

        def kill_and_watch():
            t_kill = ha.kill(master_id)
            while time.time() - t_kill < 10:
                c = ha.cluster(standby_id, timeout=2)
                if c["self"]["serving"] and c["self"]["switches"]["master"] == 6:
                    took["polled"] = time.time() - t_kill
                    took["doc"] = c
                    return
                time.sleep(0.005)

        timer = threading.Timer(1.5, kill_and_watch)
        timer.start()
        busy = _run_traffic(ha.net, ha.fabric, [job], {"live": view}, 1, str(tmp_path), "r")
        timer.join()
        elapsed = time.monotonic() - t_before
        after = all_tables(ha)
        assert "polled" in took, "the standby did not become master within 10 s"
        c = took["doc"]
        roles_s = c["takeover"]["roles_confirmed"] - c["takeover"]["master_lost"]
        print(f"failover: {took['polled'] * 1e3:.0f} ms until observed serving; switches "
              f"confirmed the master role {roles_s * 1e3:.0f} ms after the master was seen gone")
        assert took["polled"] < 1.0, took
        assert c["generation"] > gen0 and c["self"]["role"] == "master"
        assert c["takeover"]["switches"] == 6 and c["takeover"]["messages"] == 0
        assert_untouched(before, after, elapsed)
        assert metric(standby, "mlroute_openflow_messages_total") == sent0
        for name in tmp_path.iterdir():
            res = json.loads(name.read_text()) if name.suffix == ".json" else {}
            if "received_bytes" in res:
                assert res["received_bytes"] == res["sent_bytes"]
        print(f"All-Reduce: {busy['live'][0]:.3f} s with the failover, {quiet['live'][0]:.3f} "
              "s without")
        assert busy["live"][0] <= quiet["live"][0] * 1.10, (busy, quiet)
        assert rest(standby, "GET", "/v1/jobs/live")[0] == 200
        # the switches report it too (Open vSwitch refreshes its status every few seconds)
        fabricnet.wait_until(lambda: ovs_masters(ha, ha.of_ports[standby_id]) ==
                             set(ha.fabric.switches()), 15,
                             what="Open vSwitch listing the new master")
    finally:
        if ha.ctls[master_id] is None:
            ha.start_controller(master_id)  # back as a standby
        ha.wait_ready()
        rest(ha.master(), "DELETE", "/v1/jobs/live")
    assert ha.master_id() == standby_id


def test_etcd_lost_refuses_writes_keeps_the_tables_and_loses_nothing(ha):
    master, standby = ha.master(), ha.standby()
    master_id = ha.master_id()
    assert rest(master, "POST", "/v1/jobs", ring("kept", ["h0_0", "h2_0", "h3_1"]))[0] == 201
    try:
        before = all_tables(ha)
        t0 = time.monotonic()
        ha.etcd.stop()
        try:
            for ctl in (master, standby):
                code, doc = rest(ctl, "POST", "/v1/jobs", ring("new", ["h1_0", "h2_1"]))
                assert code == 503, doc
                assert f"etcd at {ha.etcd.url} is unreachable" in doc["error"]
                assert "writes are refused until it returns" in doc["error"]
                assert rest(ctl, "DELETE", "/v1/jobs/kept")[0] == 503
                assert [j["id"] for j in rest(ctl, "GET", "/v1/jobs")[1]["jobs"]] == ["kept"]
            time.sleep(3.0)  # longer than the lease: nobody can be elected, nothing changes
            view = rest(master, "GET", "/v1/cluster")[1]
            # its lease cannot be confirmed: it keeps the switches but claims no master role
            assert view["healthy"] is False and view["self"]["unconfirmed_master"] is True
            assert ha.master_id() is None
        finally:
            ha.etcd.start()
        fabricnet.wait_until(lambda: rest(master, "POST", "/v1/jobs",
                                          ring("new", ["h1_0", "h2_1"]))[0] == 201, 20,
                             what="writes accepted again")
        assert_untouched({sw: {k: v for k, v in t.items()} for sw, t in before.items()},
                         {sw: {k: v for k, v in t.items() if k in before[sw]}
                          for sw, t in all_tables(ha).items()}, time.monotonic() - t0)
        for ctl in (master, standby):
            fabricnet.wait_until(lambda ctl=ctl: job_ids(ctl) == {"kept", "new"}, 10,
                                 what="jobs listed")
        assert ha.master_id() == master_id
    finally:
        for jid in ("kept", "new"):
            rest(ha.master(), "DELETE", f"/v1/jobs/{jid}")


def test_a_frozen_master_is_deposed_by_the_generation_and_steps_down(ha):
    """A master that stops (SIGSTOP: its connections stay open, the probe cannot tell) loses
    its lease; the standby is elected with a higher generation and the switches demote the
    old master's connection, so when it runs again it cannot change a table; it steps down."""
    old_id = ha.master_id()
    old, new = ha.ctls[old_id], ha.standby()
    new_id = next(c for c, ctl in ha.ctls.items() if ctl is new)
    gen0 = rest(new, "GET", "/v1/cluster")[1]["generation"]
    before = all_tables(ha)
    t0 = time.monotonic()
    old.proc.send_signal(19)  # SIGSTOP
    try:
        fabricnet.wait_until(lambda: ha.cluster(new_id)["self"]["serving"], 10,
                             what="the standby elected after the lease expired")
        took = time.monotonic() - t0
        c = ha.cluster(new_id)
        assert c["generation"] > gen0 and c["self"]["switches"]["master"] == 6
        assert 1.0 < took < 5.0, took  # the lease (2 s), not the probe
    finally:
        old.proc.send_signal(18)  # SIGCONT
    # from the first answer on, the old master never says master (its generation is stale)
    views = [ha.cluster(old_id)]
    while views[-1]["generation"] != c["generation"] and time.monotonic() - t0 < 30:
        views.append(ha.cluster(old_id))
    assert all(v["self"]["role"] == "standby" for v in views), [v["self"] for v in views]
    assert views[-1]["master"] == new_id, views[-1]
    fabricnet.wait_until(lambda: ha.cluster(old_id)["self"]["switches"]["slave"] == 6, 10,
                         what="the old master's switches in the slave role")
    every = set(ha.fabric.switches())
    fabricnet.wait_until(lambda: ovs_masters(ha, ha.of_ports[new_id]) == every and
                         not ovs_masters(ha, ha.of_ports[old_id]), 15,
                         what="Open vSwitch: one master per switch, the new one")
    assert_untouched(before, all_tables(ha), time.monotonic() - t0)


def test_etcd_killed_during_a_post_gets_an_exact_answer(ha):
    """etcd SIGKILLed at growing delays into a POST: each answer is exact. 503: nothing
    happened, and nothing is installed when etcd returns; 202: the switches took the job and
    its operation is stored when etcd returns; 201: stored before etcd died. At least one
    kill lands inside the write (202)."""
    master = ha.master()
    master_id = ha.master_id()
    ranks = [f"h{leaf}_{h}" for leaf in range(LEAVES) for h in range(HOSTS)]
    seen = {}
    for i, delay in enumerate([0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 0.2] * 2):
        jid = f"k{i}"
        answer = {}

        def post(jid=jid, answer=answer):
            answer["code"], answer["doc"] = rest(master, "POST", "/v1/jobs", ring(jid, ranks))

        t = threading.Thread(target=post)
        t.start()
        time.sleep(delay)
        ha.etcd.kill()
        t.join(DEADLINE)
        try:
            listed = job_ids(master)
        finally:
            ha.etcd.start()
        code, doc = answer["code"], answer["doc"]
        seen.setdefault(code, delay)
        assert code in (201, 202, 503), (delay, code, doc)
        fabricnet.wait_until(lambda: rest(master, "GET", "/v1/cluster")[1]["healthy"], 20,
                             what="etcd answering again")
        if code == 503:
            assert jid not in listed, doc
            time.sleep(1.0)  # the keep-alive loop would store a kept change by now
        elif code == 202:
            op = doc["operation"]
            assert op["state"] == "pending" and op["see"].endswith("/v1/cluster") and jid in listed
            fabricnet.wait_until(lambda: rest(master, "GET", "/v1/cluster")[1]["operations"]
                                 [0]["state"] == "stored", 20, what="the job stored")
        want = set() if code == 503 else {jid}
        for ctl in (master, ha.standby()):
            fabricnet.wait_until(lambda ctl=ctl, want=want: job_ids(ctl) == want, 10,
                                 what=f"jobs {want} listed")
        assert ha.master_id() == master_id
        if want:
            assert rest(master, "DELETE", f"/v1/jobs/{jid}")[0] == 200
        if 202 in seen and 503 in seen:
            break
    assert 202 in seen, f"no kill landed inside a write (answers by first delay: {seen})"


def test_unreachable_etcd_at_start_is_a_clear_error(ha, tmp_path):
    etcd, rest, of = free_ports(3)  # distinct: free_port twice may give the same port
    url = f"http://127.0.0.1:{etcd}"
    ctl = ControllerProcess(ha.fabric_path, str(tmp_path / "c.log"), rest_port=rest,
                            of_port=of, extra_args=["--mlroute-etcd", url])
    proc = subprocess.run(ctl.args, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert f"etcd at {url} is unreachable" in proc.stdout + proc.stderr
    assert "--mlroute-etcd" in proc.stdout + proc.stderr


@EXTENDED  # a standby's learning; make test: failover and etcd loss
def test_a_standby_learns_from_its_own_sflow_and_a_new_master_keeps_the_matrix(ha):
    """Both controllers on one host, each with its own sFlow port, every switch sending to
    both: the standby measures the job as the master does; after the master is killed, the
    new master keeps the learned matrix and its routes (no re-learning, no re-plan)."""
    ranks = ["h0_0", "h1_0", "h2_0", "h3_0", "h0_1", "h1_1", "h2_1", "h3_1"]
    master_id = ha.master_id()
    master, standby = ha.ctls[master_id], ha.standby()
    standby_id = next(c for c, ctl in ha.ctls.items() if ctl is standby)
    assert rest(master, "POST", "/v1/jobs", {"id": "m", "members": ranks})[0] == 201
    try:
        iperf_ring(ha.net, ha.fabric, ranks, 12, port=5302)
        learned = rest(master, "GET", "/v1/jobs/m")[1]
        assert learned["matrix"] == "learned", learned
        pairs = {(m["src"], m["dst"]) for m in learned["measured_flows"]}
        assert pairs == {(h, ranks[i - 1]) for i, h in enumerate(ranks)}
        seen = rest(standby, "GET", "/v1/jobs/m")[1]  # its own estimate, from its own sFlow
        assert {(m["src"], m["dst"]) for m in seen["measured_flows"]} == pairs
        routes = {(r["src"], r["dst"], r["spine"]) for r in learned["routes"]}
        sent0 = metric(standby, "mlroute_openflow_messages_total")
        ha.kill(master_id)
        new = ha.master()
        assert new is standby
        iperf_ring(ha.net, ha.fabric, ranks, 8, port=5302)
        doc = rest(new, "GET", "/v1/jobs/m")[1]
        assert doc["matrix"] == "learned"
        assert {(r["src"], r["dst"], r["spine"]) for r in doc["routes"]} == routes
        events = rest(new, "GET", "/v1/fabric")[1]["events"]
        assert not [e for e in events if e.get("job") == "m" and "learned" not in e["cause"]]
        assert metric(new, "mlroute_openflow_messages_total") == sent0
    finally:
        if ha.ctls[master_id] is None:
            ha.start_controller(master_id)
        ha.wait_ready()
        rest(ha.master(), "DELETE", "/v1/jobs/m")
    assert ha.master_id() == standby_id
