"""srv6 mode's pure parts: SIDs and segment lists, the switches' static configuration, the
agent's rules, the per-host document and its watch, the southbound without OpenFlow."""
from __future__ import annotations

import json
import time

import pytest

from controller.agent import steering
from controller.agent.main import Agent
from controller.agent.main import main as agent_main
from controller.cli import main as cli_main
from controller.enforcement.srv6 import SidPlan, segments
from controller.enforcement.srv6_config import configs, host_config
from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.clos_wiring import wire
from controller.service import api
from controller.service.route_service import RouteService
from controller.shell.static import StaticSwitches


def wired(c: Clos) -> Clos:
    return c.wire(wire(c))


def test_a_leaf_spine_path_is_one_container_spine_leaf_and_host():
    plan = SidPlan.of(wired(Clos.leaf_spine(2, 2, 2)))
    s = segments(plan, ["l0", "s1", "l1"], None, "h1_1")
    spine, leaf = plan.node["s1"], plan.node["l1"]
    assert s.form == "usid" and s.overhead == 40
    assert s.sids == [f"fcbb:bbbb:{spine:x}:{leaf:x}:f002::"]


def test_a_bundle_hop_takes_the_planned_members_ua():
    c = wired(Clos.from_dict({**Clos.leaf_spine(2, 2, 1).to_dict(), "bundle": {"leaf": 2}}))
    plan = SidPlan.of(c)
    s = segments(plan, ["l0", "s0", "l1"], [1, 0], "h1_0")
    ua_up, ua_down = plan.ua("l0", "s0", 1), plan.ua("s0", "l1", 0)
    assert ua_up != plan.ua("l0", "s0", 0) and ua_up >= 0xE000
    assert s.sids == [f"fcbb:bbbb:{ua_up:x}:{ua_down:x}:{plan.node['l1']:x}:f001::"]


def test_classic_form_is_an_srh_of_full_sids_ending_at_the_decapsulation():
    c = wired(Clos.fat_tree(4))
    plan = SidPlan.of(c)
    path = ["l0", "a0_0", "c0_0", "a1_0", "l2"]
    s = segments(plan, path, None, "h2_1", classic=True)
    assert s.form == "classic" and s.overhead == 40 + 8 + 16 * 4  # 3 switches, then l2:f002
    assert s.sids[-1] == f"fcbb:bbbb:{plan.node['l2']:x}:f002::"
    assert s.sids[:3] == [plan.address(plan.node[x]) for x in path[1:4]]
    assert segments(plan, path, None, "h2_1").form == "usid"  # 5 uSIDs fit in one container


def test_impossible_paths_are_refused_by_name():
    plan = SidPlan.of(wired(Clos.fat_tree(4)))
    with pytest.raises(InputError, match="h2_0 is on l2"):
        segments(plan, ["l0", "a0_0", "l1"], None, "h2_0")
    with pytest.raises(InputError, match="not a link"):
        segments(plan, ["l0", "c0_0", "l2"], None, "h2_0")


def test_every_router_gets_sids_and_ecmp_routes_and_a_down_link_leaves_them():
    c = wired(Clos.leaf_spine(2, 2, 1))
    cfg = configs(SidPlan.of(c))
    l0 = cfg["l0"].iproute2()
    assert any("action End flavors next-csid" in x for x in l0)
    assert any("End.DX4 nh4 10.0.0.1" in x for x in l0)
    to_l1 = [x for x in l0 if x.startswith(f"route replace {SidPlan.of(c).locator('l1')}")]
    assert len(to_l1) == 1 and to_l1[0].count("nexthop") == 2  # ECMP over both spines
    down = configs(SidPlan.of(c.with_down({("l0", "s1")})))["l0"].iproute2()
    to_l1 = [x for x in down if x.startswith(f"route replace {SidPlan.of(c).locator('l1')}")]
    assert to_l1 and "nexthop" not in to_l1[0] and "l0-eth1" in to_l1[0]
    sonic = cfg["l0"].sonic()
    actions = sorted({v["action"] for v in sonic["SRV6_MY_SIDS"].values()})
    assert actions == ["uA", "uDT46", "uN"] and "loc_l0" in sonic["SRV6_MY_LOCATORS"]
    assert host_config(SidPlan.of(c), "h0_0")[-1].startswith("route replace 10.0.0.0/8 via inet6")


def test_srv6_config_command_writes_both_forms(tmp_path, capsys):
    c = wired(Clos.leaf_spine(2, 2, 1))
    (tmp_path / "f.json").write_text(json.dumps(c.to_dict()))
    assert cli_main(["srv6-config", "--fabric", str(tmp_path / "f.json"),
                     "--out", str(tmp_path / "out")]) == 0
    # 4 batches, 4 tc batches, 4 JSON documents, 2 leaves' IPv6 source checks (.batch6)
    assert "wrote 14 files for 4 switches" in capsys.readouterr().out
    doc = json.loads((tmp_path / "out" / "s0.json").read_text())
    assert doc["SRV6_MY_SIDS"] and (tmp_path / "out" / "s0.batch").read_text().count("\n") > 4
    assert cli_main(["srv6-config", "--fabric", str(tmp_path / "nope.json"),
                     "--out", str(tmp_path / "o2")]) == 2


FLOW = {"dst_ip": "10.0.1.1", "proto": 6, "sport": 0, "dport": 0, "form": "usid",
        "sids": ["fcbb:bbbb:3:2:f001::"], "backup": {"form": "usid",
                                                   "sids": ["fcbb:bbbb:4:2:f001::"]}}


@pytest.mark.parametrize("bad, why", [
    ({"sids": ["not-an-address"]}, "not an IPv6 address"),
    ({"sids": ["fcbb:bbbb::1", "fcbb:bbbb::2"]}, "one container"),
    ({"sids": ["fcbb:cccc::1"]}, "outside the block fcbb:bbbb::/32"),
    ({"dst_ip": 12345}, "not an IPv4 address"),
    ({"proto": [6]}, "tcp 6 or udp 17"),
    ({"dport": True}, "dport True is not a port"),
    ({"backup": 5}, "backup must be an object"),
    ({"form": "mpls"}, "form must be"),
    ({"sport": 70000}, "not a port"),
    ({"dst_ip": "h1_0"}, "not an IPv4 address"),
])
def test_a_list_the_agent_cannot_apply_is_refused_naming_the_flow(bad, why):
    with pytest.raises(InputError, match=why):
        steering.parse({"flows": [FLOW, {**FLOW, **bad}]})


def test_changing_a_path_is_one_atomic_route_swap_and_removal_cleans_up():
    first = steering.wanted(steering.parse({"flows": [FLOW]}), {}, "eth0")
    moved = {**FLOW, "sids": ["fcbb:bbbb:4:2:f001::"]}
    second = steering.wanted(steering.parse({"flows": [moved]}), first, "eth0")
    lines = steering.batch(first, second)
    assert len(lines) == 1 and lines[0].startswith("route replace") and "table 20000" in lines[0]
    split = {**FLOW, "sport": 40001}
    third = steering.wanted(steering.parse({"flows": [moved, split]}), second, "eth0")
    new = steering.batch(second, third)
    assert new[0].startswith("route replace") and new[1].startswith("rule add pref 10001")
    gone = steering.batch(third, {})
    assert {x.split()[0] for x in gone} == {"rule", "route"} and len(gone) == 4
    steers = steering.parse({"flows": [FLOW]})
    backup = steering.wanted(steers, {}, "eth0", failed=frozenset({steers[0].sids}))
    assert "fcbb:bbbb:4:2:f001::" in next(iter(backup.values())).route


class FakeClient:
    url = "http://fake"

    def __init__(self, docs):
        self.docs, self.asked = list(docs), []

    def segments(self, host, held="", wait=0.0, timeout=None):
        self.asked.append({"If-None-Match": f'"{held}"'} if held else {})
        return self.docs.pop(0)


def test_the_agent_keeps_its_rules_when_a_document_is_refused():
    applied = []
    good = {"version": "e:1", "flows": [FLOW]}
    bad = {"version": "e:2", "flows": [{**FLOW, "sids": []}]}
    agent = Agent(FakeClient([good, good, bad]), "h0_0", "eth0", apply=applied.append,
                  read=lambda: {})
    assert agent.step() and len(applied) == 1
    assert not agent.step()  # the same version: nothing installed
    assert agent.client.asked[1]["If-None-Match"] == '"e:1"'
    kept = dict(agent.have)
    with pytest.raises(InputError):
        agent.step()
    assert agent.have == kept and len(applied) == 1


def test_the_agent_prints_its_version(capsys):
    import controller
    with pytest.raises(SystemExit) as e:
        agent_main(["--version"])  # before --url and --host, which it does not need
    assert e.value.code == 0
    assert capsys.readouterr().out == f"mlroute-agent {controller.__version__}\n"


def service_on(fabric) -> RouteService:
    switches = StaticSwitches(fabric)
    svc = RouteService(switches, fabric, mode="srv6", algorithm="greedy")
    svc.note_switches(switches.connected_now())
    svc.sync_queued()
    return svc


def test_the_hosts_document_and_its_watch():
    fabric = wired(Clos.leaf_spine(2, 2, 2))
    svc = service_on(fabric)
    assert api.handle(svc, "GET", "/v1/ready")[0] == 200  # no OpenFlow: ready at once
    status, view = api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": "p", "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1e6},
                              {"src": "h0_1", "dst": "h1_1", "bytes": 1e6}]}).encode())
    assert status == 201 and view["mode"] == "srv6"
    status, doc = api.handle(svc, "GET", "/v1/hosts/h0_0/segments")
    assert status == 200 and len(doc["flows"]) == 1
    f = doc["flows"][0]
    assert f["dst_ip"] == "10.0.1.1" and f["backup"]["path"][1] != f["path"][1]
    assert steering.parse(doc)  # what the controller serves, the agent takes
    t = time.monotonic()
    headers = {"If-None-Match": f'"{doc["version"]}"', "Prefer": "wait=0.3"}
    assert api.handle(svc, "GET", "/v1/hosts/h0_0/segments", headers=headers)[1] == doc
    assert time.monotonic() - t >= 0.25  # held while nothing changed
    api.handle(svc, "DELETE", "/v1/jobs/p")
    t = time.monotonic()
    _, after = api.handle(svc, "GET", "/v1/hosts/h0_0/segments", headers=headers)
    assert after["flows"] == [] and time.monotonic() - t < 0.2  # a change answers at once
    assert api.handle(svc, "GET", "/v1/hosts/nobody/segments")[0] == 404


def test_the_destination_steers_each_part_back_on_the_reversed_path():
    """A flow's acknowledgements follow its path reversed, with a backup: the routers'
    static ECMP would send them towards a spine that lost its link to the source's leaf."""
    fabric = wired(Clos.leaf_spine(2, 2, 2))
    svc = service_on(fabric)
    api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": "p", "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1e6, "dport": 5001},
                              {"src": "h1_0", "dst": "h0_0", "bytes": 1e6}]}).encode())
    out = api.handle(svc, "GET", "/v1/hosts/h0_0/segments")[1]["flows"]
    back = api.handle(svc, "GET", "/v1/hosts/h1_0/segments")[1]["flows"]
    there = next(f for f in out if not f.get("reverse"))
    ret = next(f for f in back if f.get("reverse") and f["dst"] == "h0_0")
    assert ret["path"] == there["path"][::-1] and ret["dst_ip"] == "10.0.0.1"
    assert (ret["sport"], ret["dport"]) == (5001, 0) and ret["backup"]["path"] != ret["path"]
    own = next(f for f in back if not f.get("reverse"))  # h1_0's own flow to h0_0 (no ports)
    steers = steering.parse({"flows": back})
    assert len(steers) == 2 and [str(x) for x in steers[0].sids] == own["sids"]
    # h0_0 gets the return of h1_0's pair flow after its own port-matched one
    assert [f.get("reverse", False) for f in out] == [False, True]


def test_no_openflow_needs_a_declared_fabric():
    with pytest.raises(InputError, match="needs a declared fabric"):
        StaticSwitches(None)


def test_probe_reports_take_a_link_down_and_bring_it_back():
    """Two hosts (the quorum) whose probes through one spine fail take its links down (both:
    nothing tells which); a probe through it that answers brings them back."""
    fabric = wired(Clos.leaf_spine(2, 2, 2))
    svc = service_on(fabric)
    api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": "p", "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1e6},
                              {"src": "h0_1", "dst": "h1_1", "bytes": 1e6}]}).encode())
    first = {r["src"]: r["path"] for r in api.handle(svc, "GET", "/v1/routes")[1]["routes"]}
    spine = first["h0_0"][1]
    other = "s1" if spine == "s0" else "s0"
    report = {"paths": [{"path": ["l0", spine, "l1"], "ok": False},
                        {"path": ["l0", other, "l1"], "ok": True}]}
    status, doc = api.handle(svc, "POST", "/v1/hosts/h0_0/probes", json.dumps(report).encode())
    assert status == 200 and doc["links_down"] == [] and not svc.state.fabric.down  # one host
    status, doc = api.handle(svc, "POST", "/v1/hosts/h0_1/probes", json.dumps(report).encode())
    assert status == 200 and doc["links_down"] == [["l0", spine], ["l1", spine]]
    routes = api.handle(svc, "GET", "/v1/routes")[1]["routes"]
    assert all(r["path"][1] == other for r in routes)  # re-planned around the failed path
    assert svc.state.fabric.down  # the controller shows the links down
    report["paths"][0]["ok"] = True
    api.handle(svc, "POST", "/v1/hosts/h0_0/probes", json.dumps(report).encode())
    assert not svc.state.fabric.down  # back up once a probe through it answers
    bad = json.dumps({"paths": [{"path": ["l0", "nowhere"], "ok": False}]}).encode()
    status, doc = api.handle(svc, "POST", "/v1/hosts/h0_0/probes", bad)
    assert status == 400 and "nowhere" in doc["error"]


def test_redundant_controllers_take_over_with_no_openflow():
    """A master's takeover asks its switches' roles; with none to ask it must not wait on a
    connection timeout the static switches do not have (it raised, and no master served)."""
    from controller.shell.roles import Roles
    roles = Roles(None, None, StaticSwitches(wired(Clos.leaf_spine(2, 2, 1))))
    roles._wait([roles.send(dp, True, 1) for dp in roles.switches.datapaths()])


def test_every_list_carries_its_way_back_and_the_agent_checks_it():
    """A probe carries its path reversed, to the prober, for the destination's agent to answer
    along (``segments.back_container``): the kernel's own answer takes the routers' ECMP,
    which a failed link beyond a router's ports black-holes."""
    from controller.agent import steering
    from controller.agent.probe import answer_of, echo
    svc = service_on(wired(Clos.leaf_spine(2, 2, 2)))
    api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": "b", "mode": "srv6", "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1e6}]}
    ).encode())
    out = api.handle(svc, "GET", "/v1/hosts/h0_0/segments")[1]
    back = api.handle(svc, "GET", "/v1/hosts/h1_0/segments")[1]
    f, r = out["flows"][0], back["flows"][0]
    assert r["reverse"] and r["path"] == f["path"][::-1]
    assert f["back"] == r["sids"][0] and r["back"] == f["sids"][0]  # each the other's list
    assert f["backup"]["back"] != f["back"]
    assert {p["back"] for p in out["probes"]} == {f["back"], f["backup"]["back"]}
    doc = steering.read(out)
    assert str(doc.steers[0].back) == f["back"] and doc.probes[0].back is not None
    request = echo("10.0.0.1", "10.0.1.1", 9, 4, f["back"])
    way, reply = answer_of(request, doc.block)
    assert str(way) == f["back"] and reply[9] == 1 and reply[20] == 0  # an echo reply
    assert reply[12:16] == request[16:20] and reply[16:20] == request[12:16]
    out["flows"][0]["back"] = "2001:db8::1"  # outside the fabric's block: refused whole
    with pytest.raises(InputError, match="back: sids: 2001:db8::1 is outside the block"):
        steering.read(out)


def test_kept_probe_entries_follow_the_fabric_a_member_down_changes_them():
    """Issue 73: a document's probe entries and each path's members are kept per fabric
    object (built once, served again); a bundle member down makes a new fabric whose
    documents take the member still up, never the kept one."""
    from controller.service.segments import _members, segments_view
    c = wired(Clos.from_dict({**Clos.leaf_spine(2, 2, 1).to_dict(), "bundle": {"leaf": 2}}))
    svc = service_on(c)
    status, view = api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": "p", "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1e6}]}).encode())
    assert status == 201
    first = segments_view(svc.state, "h0_0")
    assert segments_view(svc.state, "h0_0")["probes"] == first["probes"]  # served again
    probe = next(p for p in first["probes"] if p["path"][1] == "s0")
    assert _members(c, probe["path"]) == (0, 0)
    down = c.with_down({("l0", "s0", 0)})
    assert _members(down, probe["path"]) == (1, 0) and _members(c, probe["path"]) == (0, 0)
    plan = SidPlan.of(down)
    assert segments(plan, probe["path"], [1, 0], "h1_0").sids != \
        segments(plan, probe["path"], [0, 0], "h1_0").sids
    svc.state.fabric = down  # as a failure makes it (a new fabric object)
    again = next(p for p in segments_view(svc.state, "h0_0")["probes"]
                 if p["path"] == probe["path"])
    assert again["sids"] == segments(plan, probe["path"], [1, 0], "h1_0").sids
    assert again["sids"] != probe["sids"]


def test_without_bundles_a_parts_list_and_its_probes_are_one_kept_entry():
    """Issue 73: on a fabric with no bundle a list does not depend on members, so a part's
    own list (members None) and its probe's are built once, not once each."""
    from controller.service.segments import segments_view
    c = wired(Clos.fat_tree(4))
    svc = service_on(c)
    status, _ = api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": "p", "flows": [{"src": "h0_0", "dst": "h2_0", "bytes": 1e6}]}).encode())
    assert status == 201
    doc = segments_view(svc.state, "h0_0")
    part = doc["flows"][0]
    probe = next(p for p in doc["probes"] if p["path"] == part["path"])
    assert probe["sids"] == part["sids"]
    kept = c.derived("srv6_sid_plan", SidPlan.of).__dict__["_segment_docs"]
    assert [k[1] for k in kept if k[0] == tuple(part["path"]) and k[2] == "h2_0"] == [None]
