"""End to end with real parts: ryu-manager + mlroute, Open vSwitch (userspace), Mininet, TCP."""
import json

import pytest

from emulation.harness import fabricnet, ovs
from emulation.harness.run import _run_traffic, _verify_paths, prepare_jobs
from tests.integration import default_session, require_root_and_ovs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    require_root_and_ovs()
    with default_session(tmp_path_factory.mktemp("emu")) as f:
        yield f


def tables(emu):
    return {sw: ovs.flow_table(sw) for sw in emu.fabric.switches()}


def ring_doc(jid, ranks, size=4_000_000):
    return {"id": jid, "collective": "ring_allreduce", "ranks": ranks, "bytes": size}


def test_pingall_before_any_job(emu):
    assert emu.net.pingAll(timeout=2) == 0.0
    view = emu.ctl.rest("GET", "/v1/fabric")[1]
    assert view["ready"] and not view["missing_switches"] and not view["ports_not_up"]


@pytest.mark.parametrize("mode", ["flow", "sr"])
def test_job_traffic_crosses_planned_spines(emu, mode, tmp_path):
    before = tables(emu)
    jobs = prepare_jobs({"jobs": [ring_doc("a", ["h0_0", "h1_0", "h2_0", "h3_0"]),
                                  ring_doc("b", ["h3_1", "h2_1", "h1_1", "h0_1"])]}, emu.fabric)
    try:
        for job in jobs:
            status, doc = emu.ctl.rest("POST", "/v1/jobs", {**job, "mode": mode})
            assert status == 201, doc
            assert doc["mode"] == mode and doc["rules"]["added"] >= 1
        views = {j["id"]: emu.ctl.rest("GET", f"/v1/jobs/{j['id']}")[1] for j in jobs}
        # greedy: each leaf's two outgoing flows leave on different spines
        by_leaf = {}
        for v in views.values():
            for r in v["routes"]:
                by_leaf.setdefault(emu.fabric.hosts[r["src"]], set()).add(r["spine"])
        assert all(len(s) == 2 for s in by_leaf.values())
        spine_before = {s: ovs.port_bytes(s) for s in emu.fabric.planes[0].aggs[0]}
        times = _run_traffic(emu.net, emu.fabric, jobs, views, 1, str(tmp_path), mode)
        assert set(times) == {"a", "b"} and all(t[0] > 0 for t in times.values())
        ovs.settle_counters(emu.fabric.leaves)
        verified, total, checks = _verify_paths(emu.fabric, jobs, views, 1)
        assert total == 8 and verified == total, checks
        # the spines saw it too: every planned spine forwarded the bytes of its flows
        spine_after = {s: ovs.port_bytes(s) for s in emu.fabric.planes[0].aggs[0]}
        for v in views.values():
            for r in v["routes"]:
                port = emu.fabric.port(r["spine"], emu.fabric.hosts[r["dst"]])
                sent = spine_after[r["spine"]][port]["tx"] - spine_before[r["spine"]][port]["tx"]
                assert sent >= 4_000_000 / 4 * 6, (r, sent)
        if mode == "sr":  # per-flow state only at ingress leaves, labels pushed there
            leaf = ovs.dump_flows("l0", None)
            assert any("push_mpls" in e["actions"] for e in leaf)
    finally:
        for job in jobs:
            emu.ctl.rest("DELETE", f"/v1/jobs/{job['id']}")
    assert tables(emu) == before


def test_delete_removes_exactly_that_jobs_rules(emu):
    static = tables(emu)
    a = {"id": "keep", "flows": [{"src": "h0_0", "dst": "h2_0", "bytes": 1e6, "dport": 7000}]}
    b = {"id": "drop", "flows": [{"src": "h1_0", "dst": "h3_1", "bytes": 1e6, "dport": 7001},
                                 {"src": "h0_1", "dst": "h3_0", "bytes": 1e6, "dport": 7001}]}
    assert emu.ctl.rest("POST", "/v1/jobs", a)[0] == 201
    assert emu.ctl.rest("POST", "/v1/jobs", b)[0] == 201
    number = emu.ctl.rest("GET", "/v1/jobs/drop")[1]["number"]
    from controller.enforcement.openflow import job_cookie
    assert sum(len(ovs.dump_flows(l, job_cookie(number))) for l in ("l0", "l1")) == 2
    with_both = tables(emu)
    status, doc = emu.ctl.rest("DELETE", "/v1/jobs/drop")
    assert status == 200 and doc["rules"]["removed"] == 2
    after = tables(emu)
    for sw in after:  # exactly the two rules of "drop" are gone
        gone = set(with_both[sw]) - set(after[sw])
        assert set(after[sw]) <= set(with_both[sw])
        assert all(f"cookie={job_cookie(number):#x}" in line for line in gone)
    assert sum(len(set(with_both[s]) - set(after[s])) for s in after) == 2
    assert emu.ctl.rest("DELETE", "/v1/jobs/keep")[0] == 200
    assert tables(emu) == static


@pytest.mark.parametrize("body, status", [
    (b"{not json", 400),
    (json.dumps({"id": "x", "ranks": ["h0_0", "nobody"], "bytes": 1}).encode(), 400),
    (json.dumps({"id": "x", "ranks": ["h0_0", "h1_0"], "bytes": -3}).encode(), 400),
    (json.dumps({"id": "x", "ranks": [], "bytes": 3}).encode(), 400),
    (json.dumps({"id": "x", "ranks": ["h0_0", "h1_0"], "bytes": 3, "mode": "vlan"}).encode(), 400),
    (json.dumps({"id": "base", "ranks": ["h2_0", "h3_0"], "bytes": 3}).encode(), 409),
])
def test_bad_rest_input_is_4xx_and_changes_nothing(emu, body, status):
    assert emu.ctl.rest("POST", "/v1/jobs", ring_doc("base", ["h0_1", "h1_1"]))[0] == 201
    try:
        before = tables(emu)
        code, doc = emu.ctl.rest("POST", "/v1/jobs", body)
        assert code == status and doc["error"]
        assert tables(emu) == before
        assert [j["id"] for j in emu.ctl.rest("GET", "/v1/jobs")[1]["jobs"]] == ["base"]
    finally:
        emu.ctl.rest("DELETE", "/v1/jobs/base")


def test_unknown_routes_and_methods(emu):
    assert emu.ctl.rest("GET", "/v1/jobs/none")[0] == 404
    assert emu.ctl.rest("DELETE", "/v1/jobs/none")[0] == 404
    assert emu.ctl.rest("PATCH", "/v1/jobs", b"{}")[0] == 405
    assert emu.ctl.rest("GET", "/v1/links")[0] == 200


def test_telemetry_measures_what_was_planned(emu, tmp_path):
    import time
    import urllib.request
    jobs = prepare_jobs({"jobs": [ring_doc("t", ["h0_0", "h1_0", "h2_0", "h3_0"])]}, emu.fabric)
    assert emu.ctl.rest("POST", "/v1/jobs", jobs[0])[0] == 201
    try:
        view = emu.ctl.rest("GET", "/v1/jobs/t")[1]
        time.sleep(2.5)
        before = {l["link"]: l["measured"]["bytes"] or 0
                  for l in emu.ctl.rest("GET", "/v1/links")[1]["links"]}
        _run_traffic(emu.net, emu.fabric, jobs, {"t": view}, 1, str(tmp_path), "tel")
        payload = 4_000_000 / 4 * 6

        def counted():
            v = emu.ctl.rest("GET", "/v1/jobs/t")[1]
            return v if all((m["bytes"] or 0) >= payload for r in v["routes"]
                            for m in r["measured"]) else None
        view = fabricnet.wait_until(counted, 15, what="flow counters")
        for r in view["routes"]:
            assert [m["spine"] for m in r["measured"]] == [r["spine"]]
        time.sleep(2.5)  # one more polling round of the port counters
        links = {l["link"]: l for l in emu.ctl.rest("GET", "/v1/links")[1]["links"]}
        for r in view["routes"]:
            leaf = emu.fabric.hosts[r["src"]]
            for spine in emu.fabric.planes[0].aggs[0]:
                name = f"{leaf}->{spine}"
                sent = links[name]["measured"]["bytes"] - before[name]
                if spine == r["spine"]:  # the planned uplink carried the elephant...
                    assert links[name]["flows"] == 1 and sent >= payload
                else:  # ...the other one only ACKs of the flow coming the other way
                    assert sent < 0.05 * payload
        imb = emu.ctl.rest("GET", "/v1/imbalance")[1]
        for leaf in emu.fabric.leaves:  # the endpoint reads the same port counters
            b = [links[f"{leaf}->{s}"]["measured"]["bytes"] for s in emu.fabric.planes[0].aggs[0]]
            mean = sum(b) / len(b)
            assert imb["total"]["uplinks"]["per_leaf"][leaf] == pytest.approx((max(b) - mean) / mean,
                                                                             rel=0.05)
        text = urllib.request.urlopen(emu.ctl.url + "/metrics", timeout=10).read().decode()
        assert "mlroute_rules_installed" in text and "mlroute_measured_link_bps{" in text
        assert 'mlroute_switches_connected 6.0' in text
    finally:
        emu.ctl.rest("DELETE", "/v1/jobs/t")


def test_twenty_concurrent_clients_end_consistent(emu):
    from concurrent.futures import ThreadPoolExecutor

    from controller.enforcement.openflow import COOKIE_JOB, COOKIE_OWNER_MASK
    hosts = list(emu.fabric.hosts)

    def client(k):
        src = hosts[k % len(hosts)]
        dst = next(h for h in hosts[k % 3:] + hosts if emu.fabric.hosts[h] != emu.fabric.hosts[src])
        job = {"id": f"c{k}", "flows": [{"src": src, "dst": dst, "bytes": 1e6, "proto": "udp",
                                         "dport": 20000 + k}]}
        codes = [emu.ctl.rest("POST", "/v1/jobs", job)[0]]
        if k % 2:
            codes.append(emu.ctl.rest("DELETE", f"/v1/jobs/c{k}")[0])
        return codes

    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(client, range(20)))
    try:
        assert all(codes == [201] or codes == [201, 200] for codes in results), results
        listed = {j["id"]: j for j in emu.ctl.rest("GET", "/v1/jobs")[1]["jobs"]}
        assert set(listed) == {f"c{k}" for k in range(0, 20, 2)}
        rules = [e for sw in emu.fabric.switches()
                 for e in ovs.dump_flows(sw) if e["cookie"] & COOKIE_OWNER_MASK == COOKIE_JOB]
        numbers = sorted(e["cookie"] & 0xFFFFFFFF for e in rules)
        assert numbers == sorted(j["number"] for j in listed.values())  # one rule per job
    finally:
        for k in range(0, 20, 2):
            emu.ctl.rest("DELETE", f"/v1/jobs/c{k}")


@pytest.mark.parametrize("mode", ["flow", "sr"])
def test_roce_probes_cross_the_planned_spine(emu, mode):
    from emulation.harness.trace import trace_route
    job = {"id": f"roce-{mode}", "mode": mode, "flows": [
        {"src": "h0_0", "dst": "h2_1", "bytes": 1e6, "proto": "udp", "sport": 49152 + q,
         "dport": 4791} for q in range(2)]}
    status, view = emu.ctl.rest("POST", "/v1/jobs", job)
    assert status == 201, view
    try:
        spines = [r["spine"] for r in view["routes"]]
        assert sorted(spines) == ["s0", "s1"]  # two queue pairs, same hosts, different spines
        for route in view["routes"]:
            traced = trace_route(emu.net, emu.fabric, route, count=20)
            assert traced["spine"] == route["spine"], traced
    finally:
        emu.ctl.rest("DELETE", f"/v1/jobs/roce-{mode}")


def test_large_jobs_install_while_statistics_flow(emu):
    """Statistics replies keep arriving (every 0.2 s here) while 1,000-flow jobs install: the
    event loop must stay free to deliver barrier replies."""
    from benchmarks.emulation import _flows
    for r in range(3):
        job = {"id": f"big{r}", "flows": _flows(emu.fabric, 1000, 10000)}
        status, doc = emu.ctl.rest("POST", "/v1/jobs", job)
        assert status == 201, doc
        assert doc["rules"]["added"] == 1000
        assert emu.ctl.rest("DELETE", f"/v1/jobs/big{r}")[0] == 200
