"""Host mode and the rule budget end to end: real ryu-manager with mlroute, Open vSwitch
(userspace) and Mininet, RoCE agents sending with the source ports the controller chose.

Every flow of a ring job and of an explicit UDP job is proved on its planned spine by the
spines' static entries for its destination's leaf (a spine forwards by the leaf's prefix,
``model.prefixes``: its entry for a leaf counts the bytes of exactly the flows planned through
it to that leaf, plus acknowledgements), while every switch holds only static entries. A failed link gives new
ports and the traffic follows them; a job over the rule budget gets 409 and changes nothing.

Run under ``flock /work/ovs.lock`` (one emulation at a time on a machine)."""
import ipaddress
import time
import urllib.request

import pytest

from controller.enforcement.clos_hostmode import clos_host_static_rules
from controller.enforcement.clos_rules import clos_static_rules
from controller.enforcement.openflow import COOKIE_STATIC
from controller.model.clos import as_clos
from emulation.harness import ovs
from emulation.harness.run import prepare_jobs, route_parts, route_payloads, run_traffic
from emulation.harness.session import Session
from tests.integration import require_root_and_ovs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SPINES, LEAVES, HOSTS, BW = 4, 4, 2, 10.0
EXTRA_JOB_RULES = 4  # the budget: the host-mode leaf's static entries and 4 more


def static_count(fabric, leaf="l0"):
    """The leaf's static entries with host mode's pipeline, as the controller serves the
    leaf-spine: the Clos of one plane."""
    c = as_clos(fabric)
    return (len(clos_static_rules(c, leaf, labels=False)[0]) + len(clos_host_static_rules(c, leaf))
            + 1)  # the switch's data-plane echo (enforcement/echo.py)


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    require_root_and_ovs()
    s = Session(SPINES, LEAVES, HOSTS, BW, str(tmp_path_factory.mktemp("host")), mode="host")
    s.extra_args = ["--mlroute-stats-interval", "0.5",
                    "--mlroute-max-flow-rules", str(static_count(s.fabric) + EXTRA_JOB_RULES)]
    with s:
        yield s


def tables(emu):
    return {sw: ovs.flow_table(sw) for sw in emu.fabric.switches()}


def only_static_entries(emu, down=()):
    """Every entry on every switch is static, and every switch holds exactly what the rule
    builders give for host mode (with the links ``down``): nothing grows with the flows."""
    served = as_clos(emu.fabric)  # the controller serves the leaf-spine as a Clos
    f = served.with_down(set(down)) if down else served
    for sw in f.switches():
        entries = ovs.dump_flows(sw)
        assert entries and all(e["cookie"] == COOKIE_STATIC for e in entries), sw
        # no pair of hosts matched: a source only with its port (the leaves' source check)
        assert not any("nw_src" in e["match"] and "nw_dst" in e["match"] for e in entries), sw
        assert all("in_port" in e["match"] for e in entries if "nw_src" in e["match"]), sw
        want = (len(clos_static_rules(f, sw, labels=False)[0])  # no sr job: no label entry
                + len(clos_host_static_rules(f, sw)) + 1)  # + the echo (enforcement/echo.py)
        assert len(entries) == want, (sw, len(entries), want)


def destination_bytes(emu) -> dict:
    """Bytes each spine's entries for a destination leaf forwarded: {(spine, leaf): bytes}.
    An entry's ``nw_dst`` is a leaf's prefix or one of its hosts (``model.prefixes``)."""
    f = emu.fabric
    leaf_of_ip = {ipaddress.IPv4Address(ip): f.leaf_of(h) for h, ip in f.host_ip.items()}
    out = {}
    for s in f.planes[0].aggs[0]:
        for e in ovs.dump_flows(s):
            dst = e["match"].get("nw_dst")
            if dst is None or e["match"].get("nw_dscp") or e["match"].get("ip_dscp"):
                continue
            net = ipaddress.IPv4Network(dst, strict=False)
            leaves = {leaf for ip, leaf in leaf_of_ip.items() if ip in net}
            assert len(leaves) == 1, (s, dst, leaves)  # a prefix never spans two leaves
            key = (s, leaves.pop())
            out[key] = out.get(key, 0) + e["n_bytes"]
    return out


def prove_spines(emu, jobs, views, before, after):
    """Each flow on its planned spine: a spine's entries for a destination leaf counted at
    least the payloads of the flows planned through it to that leaf, and at most 5% of the
    leaf's received payload more (acknowledgements); a flow on a wrong spine would add its
    whole payload there. Returns the number of flows proved."""
    f = emu.fabric
    planned, into = {}, {}
    for job in jobs:
        for route, payload in zip(views[job["id"]]["routes"], route_payloads(job, 1)):
            ((spine, _share, sport),) = route_parts(route)
            assert spine is not None and sport is not None
            leaf = f.leaf_of(route["dst"])
            planned[(spine, leaf)] = planned.get((spine, leaf), 0) + payload
            into[leaf] = into.get(leaf, 0) + payload
    for leaf, total in into.items():
        for s in f.planes[0].aggs[0]:
            # (a spine cut from the destination's leaf has no entry for it: nothing)
            got = after.get((s, leaf), 0) - before.get((s, leaf), 0)
            want = planned.get((s, leaf), 0)
            assert want <= got <= want + 0.05 * total, (s, leaf, got, want, total)
    return sum(len(views[job["id"]]["routes"]) for job in jobs)


def post_all(emu, jobs, mode="host"):
    for job in jobs:
        status, doc = emu.ctl.rest("POST", "/v1/jobs", {**job, "mode": mode})
        assert status == 201, doc
        assert doc["mode"] == mode
    return {j["id"]: emu.ctl.rest("GET", f"/v1/jobs/{j['id']}")[1] for j in jobs}


def delete_all(emu, jobs):
    for job in jobs:
        emu.ctl.rest("DELETE", f"/v1/jobs/{job['id']}")


def test_ring_and_udp_job_on_planned_spines_with_only_static_entries(emu, tmp_path):
    f = emu.fabric
    doc = {"jobs": [{"id": "ring", "collective": "ring_allreduce", "bytes": 400_000,
                     "ranks": ["h0_0", "h1_0", "h2_0", "h3_0"]},
                    {"id": "udp", "flows": [
                        {"src": a, "dst": b, "bytes": 150_000, "proto": "udp", "dport": 4791}
                        for a, b in (("h0_1", "h2_1"), ("h1_1", "h3_1"), ("h2_1", "h0_1"),
                                     ("h3_1", "h1_1"))]}]}
    jobs = prepare_jobs(doc, f, mode="host")
    try:
        views = post_all(emu, jobs)
        only_static_entries(emu)
        static = tables(emu)
        # the export a job launcher reads: one line per connection, the routes' ports
        with urllib.request.urlopen(f"{emu.ctl.url}/v1/jobs/udp/ports", timeout=30) as resp:
            assert resp.headers.get_content_type() == "text/plain"
            lines = resp.read().decode().splitlines()[1:]
        assert lines == [f"{f.host_ip[r['src']]} {f.host_ip[r['dst']]} udp {r['sport']} 4791"
                         for r in views["udp"]["routes"]]
        before = destination_bytes(emu)
        times, flows = run_traffic(emu.net, f, jobs, views, 1, str(tmp_path), "host")
        assert all(t[0] > 0 for t in times.values()) and len(flows) == 8
        assert {(q["src"], q["dst"], q["sport"]) for q in flows} == {
            (r["src"], r["dst"], r["sport"]) for v in views.values() for r in v["routes"]}
        ovs.settle_counters(f.planes[0].aggs[0])
        assert prove_spines(emu, jobs, views, before, destination_bytes(emu)) == 8
        assert tables(emu) == static  # traffic added no entry
    finally:
        delete_all(emu, jobs)


def wait_for(what, fn, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_link_failure_gives_new_ports_and_traffic_follows(emu, tmp_path):
    f = emu.fabric
    ranks = ["h0_0", "h1_0", "h2_0", "h3_0", "h0_1", "h1_1"]
    jobs = prepare_jobs({"jobs": [{"id": "fail", "collective": "ring_allreduce",
                                   "bytes": 600_000, "ranks": ranks}]}, f, mode="host")
    link = None
    try:
        old = post_all(emu, jobs)["fail"]["routes"]
        spine = next(r["spine"] for r in old if r["src"] == "h0_0")
        link = ("l0", spine)
        emu.net.configLinkStatus("l0", spine, "down")
        event = wait_for("the re-plan", lambda: next(
            (e for e in reversed(emu.ctl.rest("GET", "/v1/fabric")[1]["events"])
             if f"l0-{spine}" in e["links_down"]), None))
        assert event["error"] is None and "host_error" not in event, event
        view = emu.ctl.rest("GET", "/v1/jobs/fail")[1]
        new = view["routes"]
        assert not any(r["src"] in ("h0_0", "h0_1") and r["spine"] == spine for r in new)
        assert not any(r["dst"] in ("h0_0", "h0_1") and r["spine"] == spine for r in new)
        moved = {(a["src"], a["dst"]) for a, b in zip(old, new) if a["sport"] != b["sport"]}
        assert moved and moved == {(c["src"], c["dst"]) for c in event["port_changes"]}
        only_static_entries(emu, down=[link])
        before = destination_bytes(emu)
        run_traffic(emu.net, f, jobs, {"fail": view}, 1, str(tmp_path), "fail")
        ovs.settle_counters(f.planes[0].aggs[0])
        assert prove_spines(emu, jobs, {"fail": view}, before, destination_bytes(emu)) == 6
    finally:
        delete_all(emu, jobs)
        if link is not None:
            emu.net.configLinkStatus(*link, "up")
            wait_for("the link back", lambda: not emu.ctl.rest("GET", "/v1/fabric")[1][
                "links_down"])


def test_job_over_the_rule_budget_is_refused_and_changes_nothing(emu):
    f = emu.fabric
    budget = static_count(f) + EXTRA_JOB_RULES
    base = prepare_jobs({"jobs": [{"id": "base", "collective": "ring_allreduce",
                                   "bytes": 100_000, "ranks": ["h2_1", "h3_1"]}]}, f,
                        mode="host")
    big = {"id": "big", "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1e5, "proto": "udp",
                                   "dport": 4791, "sport": 50000 + k}
                                  for k in range(EXTRA_JOB_RULES + 2)]}
    try:
        post_all(emu, base)  # the host pipeline is in place: the budget counts it
        before, jobs_before = tables(emu), emu.ctl.rest("GET", "/v1/jobs")[1]
        status, doc = emu.ctl.rest("POST", "/v1/jobs", {**big, "mode": "flow"})
        assert status == 409
        assert (f"switch l0 would hold {budget + 2} flow entries ({EXTRA_JOB_RULES + 2} of "
                f"jobs, {budget - EXTRA_JOB_RULES} static), over its budget of {budget}"
                in doc["error"]), doc
        assert tables(emu) == before and emu.ctl.rest("GET", "/v1/jobs")[1] == jobs_before
        view = emu.ctl.rest("GET", "/v1/fabric")[1]
        assert view["rule_budget"]["max_flow_rules"] == budget
        assert view["seen"]["l0"]["rules"] == budget - EXTRA_JOB_RULES
        # the same job in host mode needs no entry at all
        status, doc = emu.ctl.rest("POST", "/v1/jobs", {**big, "mode": "host"})
        assert status == 201, doc
        assert tables(emu) == before
        with urllib.request.urlopen(f"{emu.ctl.url}/metrics", timeout=30) as resp:
            text = resp.read().decode()
        assert f'mlroute_switch_flow_rules{{owner="static",switch="l0"}} ' \
               f'{float(budget - EXTRA_JOB_RULES)}' in text
    finally:
        delete_all(emu, base + [big])
