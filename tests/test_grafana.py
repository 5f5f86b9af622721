"""The Grafana dashboard (dashboards/grafana-mlroute.json) asks only for what the controller's
/metrics page exposes: every metric name and label its PromQL queries use appears in the
exposition of a busy service (a job, measured traffic, failed links, an unroutable leaf pair,
a miswired cable), and every metric family the controller exposes is on the dashboard."""
import json
import os
import re
from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from controller.discovery import lldp
from controller.model.fabric import Fabric
from controller.service import api
from controller.service.metrics import exposition
from controller.service.route_service import RouteService
from emulation.harness.controller_proc import REPO
from emulation.harness.fake_switch import FakeSwitches
from tests.helpers import FakeClock

DASHBOARD = os.path.join(REPO, "dashboards", "grafana-mlroute.json")
METRIC = re.compile(r"\b(mlroute_[a-z0-9_]+)\b(\{[^}]*\})?")
LABEL_MATCHER = re.compile(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)")
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created")


def _dashboard() -> dict:
    with open(DASHBOARD) as fh:
        return json.load(fh)


def _panels(panels):
    for p in panels:
        yield p
        yield from _panels(p.get("panels", []))  # rows may hold their panels


def _queries(dash) -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in _panels(dash["panels"])
            for t in p.get("targets", [])]


def _busy_service() -> RouteService:
    """A declared 2 x 4 x 2 fabric on fake switches with l2's two uplink cables swapped (a
    wiring problem discovery reports), a ring job, one second of measured traffic on every
    port, a sample between two of the job's members, then two failed links that leave l0
    and l1 without a common spine."""
    f = Fabric.generate(2, 4, 2, 0.01, wiring=True)
    clock = FakeClock()
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, f, clock=clock, sleep=clock.sleep)
    for name, dpid in f.dpids.items():
        svc.switch_connected(dpid, {p: True for p in f.ports[name].values()})
    p0, p1 = f.port("l2", "s0"), f.port("l2", "s1")
    swapped = {("l2", p0): ("s1", f.port("s1", "l2")), ("l2", p1): ("s0", f.port("s0", "l2")),
               ("s0", f.port("s0", "l2")): ("l2", p1), ("s1", f.port("s1", "l2")): ("l2", p0)}
    for _ in range(2):  # LLDP out of every port, each frame delivered where the cable goes
        svc.tick()
        for dpid, port, frame in sw.packets_out:
            name = f.switch_of_dpid[dpid]
            peer, peer_port = swapped.get((name, port), (f.peer(name, port), None))
            if peer is None or peer in f.hosts:
                continue
            svc.packet_in(f.dpids[peer], peer_port or f.port(peer, name), frame)
        sw.packets_out.clear()
    for h, leaf in f.hosts.items():
        svc.packet_in(f.dpids[leaf], f.port(leaf, h),
                      lldp.arp_request(f.host_mac[h], "10.255.0.1", sender_ip=f.host_ip[h]))
    clock.now += 3  # discovery checks the declared fabric once the topology is quiet
    svc.tick(probe=False)
    code, doc = api.handle(svc, "POST", "/v1/jobs", json.dumps({
        "id": "a", "collective": "ring_allreduce", "ranks": ["h0_0", "h1_0", "h2_0", "h3_0"],
        "bytes": 8e6}).encode())
    assert code == 201, doc
    svc.traffic_samples([SimpleNamespace(src=f.host_ip["h0_0"], dst=f.host_ip["h1_0"],
                                         frame_length=1500, sampling_rate=16)])
    clock.now += 2.5  # its window closed: samples between the job's members
    svc.tick(probe=False)
    for t, sent in ((clock.now, 0), (clock.now + 1, 125_000)):
        for name in f.spines + f.leaves:
            svc.port_stats(f.dpids[name], {p: sent for p in f.ports[name].values()}, now=t)
    svc.port_changed(f.dpids["l0"], f.port("l0", "s0"), False)
    svc.port_changed(f.dpids["l1"], f.port("l1", "s1"), False)
    return svc


def _exposed(svc) -> dict[str, set[str]]:
    """Sample name -> its label names, from the text the controller serves at /metrics."""
    body, _ = exposition(svc)
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out.setdefault(s.name, set()).update(s.labels)
    return out


def test_every_queried_metric_and_label_is_exposed():
    exposed = _exposed(_busy_service())
    queries = _queries(_dashboard())
    assert len(queries) >= 10
    for title, expr in queries:
        used = METRIC.findall(expr)
        assert used, (title, expr)  # every query reads mlroute's metrics
        labels_here = set()
        for name, matchers in used:
            assert name in exposed, f"panel {title!r}: {name} is not in /metrics ({expr})"
            labels_here |= exposed[name]
            for label in LABEL_MATCHER.findall(matchers or ""):
                assert label in exposed[name], f"panel {title!r}: {name} has no label {label}"
        for group in GROUPING.findall(expr):
            for label in filter(None, (x.strip() for x in group.split(","))):
                assert label in labels_here, f"panel {title!r}: no label {label} in {expr}"


def test_every_exposed_metric_family_is_on_the_dashboard():
    families = set()
    for name in _exposed(_busy_service()):
        for suffix in SUFFIXES:
            if name.endswith(suffix):
                name = name[:-len(suffix)]
                break
        families.add(name)
    queried = set()
    for _, expr in _queries(_dashboard()):
        for name, _ in METRIC.findall(expr):
            queried.add(next((name[:-len(s)] for s in SUFFIXES if name.endswith(s)), name))
    assert families - queried == set()


def test_dashboard_is_an_importable_grafana_document():
    dash = _dashboard()
    assert dash["uid"] == "mlroute" and dash["title"]
    assert [i["name"] for i in dash["__inputs"]] == ["DS_PROMETHEUS"]
    panels = list(_panels(dash["panels"]))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    for p in panels:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        if p["type"] == "row":
            continue
        assert p["datasource"]["uid"] == "${DS_PROMETHEUS}", p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs)), p["title"]
