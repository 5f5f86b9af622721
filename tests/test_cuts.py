"""Where routing stops helping (``controller/model/cuts.py``): a job's demand across a leaf's
(a pod's) uplinks above what is alive of them is named with its demand, capacity, bound and the
placement that would help; and plan, compare, advise and the job view (REST and ``job show``)
say so."""
import http.client
import json
import threading

import pytest

from controller import cli
from controller.model import cuts
from controller.model.clos import Clos
from controller.model.jobs import Flow, Job
from controller.service import api
from controller.service.route_service import RouteService
from controller.shell.rest import RestServer
from emulation.harness.fake_switch import FakeSwitches


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


def test_whole_flows_are_bound_by_the_fullest_link():
    three = pairs(n=3)  # three flows at line rate over two uplinks
    (out, _) = cuts.findings(Clos.leaf_spine(2, 4, 4), [three])
    assert (out["bound"], out["unsplit_bound"]) == (1.5, 2.0)  # split: 1.5; whole: 2 on one
    assert "1.50x (2.00x with whole flows)" in out["message"]
    assert cuts.findings(Clos.leaf_spine(2, 4, 4), [pairs()])[0]["unsplit_bound"] == 2.0


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
    assert d["unsplit_bound"] == 2.0  # one ideal: two of the three flows share an uplink
    assert "moving a off it leaves the others within its capacity" in d["message"]
    assert cuts.findings(f, jobs[:2]) == []


def test_the_shared_bound_counts_each_jobs_ideal():
    assert cuts.shared_bound([(100, 1.0), (100, 1.0)], 200) == 1.0
    assert cuts.shared_bound([(100, 1.0), (100, 1.0), (100, 1.0)], 200) == pytest.approx(1.5)
    # a long job leaves room after the short ones: less than the rates' sum over capacity
    assert 1.0 < cuts.shared_bound([(100, 1.0), (100, 1.0), (100, 4.0)], 200) < 1.5


# ---- the command line: plan, compare, advise -------------------------------------------------
@pytest.fixture
def files(tmp_path):
    fabric = tmp_path / "fabric.json"
    fabric.write_text(json.dumps(Clos.leaf_spine(2, 4, 4).to_dict()))
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps({"jobs": [pairs().to_dict(), {
        "id": "r", "collective": "ring_allreduce", "ranks": ["h2_0", "h3_0"], "bytes": 1e6}]}))
    return str(fabric), str(jobs)


def test_plan_compare_and_advise_say_where_routing_stops_helping(files, capsys):
    fabric, jobs = files
    assert cli.main(["plan", "--fabric", fabric, "--jobs", jobs]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert [d["cut"] for d in doc["cuts"]] == ["leaf l0", "leaf l1"]
    assert doc["cuts"][0]["planned"] >= doc["cuts"][0]["bound"] == 2.0
    assert "note: job j: leaf l0:" in err
    assert cli.main(["compare", "--fabric", fabric, "--jobs", jobs,
                     "--algorithms", "ecmp,auto"]) == 0
    out = capsys.readouterr().out
    assert "\ncut bound " in out and "job j: leaf l0: its 4 hosts there send 400 Gb/s" in out
    assert cli.main(["compare", "--fabric", fabric, "--jobs", jobs, "--algorithms", "auto",
                     "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["cuts"][0]["cut"] == "leaf l0" and row["cut_bound_s"]["j"] > 0
    assert cli.main(["advise", "--fabric", fabric, "--jobs", jobs]) == 0
    out = capsys.readouterr().out
    assert "where routing stops helping, in the given order:\n  job j: leaf l0:" in out
    assert cli.main(["advise", "--fabric", fabric, "--jobs", jobs, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cuts"]["given"][0]["cut"] == "leaf l0" and doc["cuts"]["advised"]


def test_a_fabric_without_a_cut_bound_job_says_nothing_more(files, capsys, tmp_path):
    fabric = tmp_path / "wide.json"
    fabric.write_text(json.dumps(Clos.leaf_spine(4, 4, 4).to_dict()))
    assert cli.main(["plan", "--fabric", str(fabric), "--jobs", files[1]]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["cuts"] == [] and "note:" not in err
    assert cli.main(["compare", "--fabric", str(fabric), "--jobs", files[1],
                     "--algorithms", "auto"]) == 0
    assert "cut bound" not in capsys.readouterr().out


# ---- the controller: the job view over REST and job show ------------------------------------
@pytest.fixture
def rest():
    f = Clos.generate(2, 4, 4, 100.0, wiring=True)
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, f)
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    server = RestServer(svc, "127.0.0.1", 0, None)
    server.sock.settimeout(0.05)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop()
        thread.join(timeout=5)


def call(server, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def _draft4(schema):
    """OpenAPI's ``nullable`` as JSON Schema draft 4 says it (a list of types)."""
    if isinstance(schema, dict):
        out = {k: _draft4(v) for k, v in schema.items() if k != "nullable"}
        if schema.get("nullable") and "type" in schema:
            out["type"] = [schema["type"], "null"]
        return out
    return [_draft4(v) for v in schema] if isinstance(schema, list) else schema


def test_the_job_view_and_job_show_carry_the_cut(rest, capsys):
    import jsonschema_rs
    status, posted = call(rest, "POST", "/v1/jobs", pairs().to_dict())
    assert status == 201 and posted["cuts"][0]["cut"] == "leaf l0"
    status, view = call(rest, "GET", "/v1/jobs/j")
    assert status == 200
    assert [d["cut"] for d in view["cuts"]] == ["leaf l0", "leaf l1"]
    assert view["cut_bound_s"] == pytest.approx(2 * view["ideal_s"])
    assert view["predicted_allreduce_s"] >= view["cut_bound_s"] * (1 - 1e-6)
    doc = api.openapi()
    validator = jsonschema_rs.Draft4Validator(_draft4(
        {"$ref": "#/components/schemas/JobView", "components": doc["components"]}))
    errors = [e.message for e in validator.iter_errors(view)]
    assert not errors, errors
    status, advice = call(rest, "POST", "/v1/advise", {
        "id": "x", "collective": "ring_allreduce", "ranks": ["h0_0", "h1_0", "h0_1", "h1_1"],
        "bytes": 1e6})
    assert status == 200 and "cuts" in advice and set(advice["cuts"]) == {"given", "advised"}
    assert cli.main(["job", "show", "j", "--url", f"http://127.0.0.1:{rest.port}"]) == 0
    out = capsys.readouterr().out
    assert "where routing stops helping (no routing below" in out
    assert "job j: leaf l0: its 4 hosts there send 400 Gb/s to other leaves" in out


def test_a_job_that_fits_has_no_cut_and_its_ideal_as_bound(rest):
    status, view = call(rest, "POST", "/v1/jobs", pairs(n=2).to_dict())
    assert status == 201 and view["cuts"] == []
    assert view["cut_bound_s"] == pytest.approx(view["ideal_s"])
