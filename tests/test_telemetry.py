"""Telemetry and metrics from statistics samples (no switch): rates, imbalance, per-flow bytes."""
import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.model.clos import Clos
from controller.service import api
from controller.service.metrics import exposition
from controller.service.route_service import RouteService
from emulation.harness.fake_switch import FakeSwitches


@pytest.fixture
def env():
    f = Clos.generate(2, 2, 2, 0.01, wiring=True)
    sw = FakeSwitches(f.dpids.values())
    svc = RouteService(sw, f, dead_after=0.0)  # a lost switch is dead at once
    for d in f.dpids.values():
        svc.switch_connected(d, {})
    return f, sw, svc


def uplinks(f, leaf, s0, s1):
    return {f.port(leaf, "s0"): s0, f.port(leaf, "s1"): s1}


def test_link_rates_and_imbalance(env):
    f, _, svc = env
    svc.port_stats(f.dpids["l0"], uplinks(f, "l0", 1000, 1000), now=10.0)
    svc.port_stats(f.dpids["l1"], uplinks(f, "l1", 0, 0), now=10.0)
    # next window: l0 sends 3 MB on s0 and 1 MB on s1; l1 evenly 2 MB + 2 MB
    svc.port_stats(f.dpids["l0"], uplinks(f, "l0", 3_001_000, 1_001_000), now=12.0)
    svc.port_stats(f.dpids["l1"], uplinks(f, "l1", 2_000_000, 2_000_000), now=12.0)
    links = {l["link"]: l["measured"] for l in api.handle(svc, "GET", "/v1/links")[1]["links"]}
    assert links["l0->s0"]["bps"] == pytest.approx(3e6 * 8 / 2)
    assert links["l0->s1"]["window_bytes"] == 1_000_000
    imb = api.handle(svc, "GET", "/v1/imbalance")[1]
    up = imb["window"]["uplinks"]
    # l0: max 3, mean 2 -> 0.5; l1: 0; byte-weighted mean over 4 MB and 4 MB -> 0.25
    assert up["per_leaf"] == {"l0": pytest.approx(0.5), "l1": 0.0}
    assert up["max"] == pytest.approx(0.5) and up["mean"] == pytest.approx(0.25)
    # a counter that went backwards (switch reset) starts a new baseline, no negative rate
    svc.port_stats(f.dpids["l0"], uplinks(f, "l0", 5, 5), now=14.0)
    assert api.handle(svc, "GET", "/v1/links")[1]["links"][0]["measured"]["bps"] is None


def test_flow_counters_show_the_spine_crossed(env):
    f, sw, svc = env
    code, doc = api.handle(svc, "POST", "/v1/jobs", json.dumps(
        {"id": "a", "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 100, "proto": "udp",
                               "sport": 49152, "dport": 4791}]}).encode())
    assert code == 201
    rule = next(r for r in sw.rules[f.dpids["l0"]].values() if r.cookie >> 56 == 2)
    svc.flow_stats(f.dpids["l0"], [(rule.table, rule.priority, dict(rule.match), 12345, 10)])
    route = api.handle(svc, "GET", "/v1/jobs/a")[1]["routes"][0]
    assert route["path"] == ["l0", route["spine"], "l1"]
    assert route["measured"] == [{"switch": "l0", "next": route["spine"], "spine": route["spine"],
                                  "bytes": 12345}]


def test_metrics_page(env):
    f, _, svc = env
    api.handle(svc, "POST", "/v1/jobs", b'{"id": "a", "ranks": ["h0_0", "h1_0"], "bytes": 10}')
    svc.port_stats(f.dpids["l0"], uplinks(f, "l0", 0, 0), now=1.0)
    svc.port_stats(f.dpids["l0"], uplinks(f, "l0", 1000, 0), now=2.0)
    svc.switch_disconnected(f.dpids["s1"])
    body, ctype = exposition(svc)
    assert ctype.startswith("text/plain")
    fams = {m.name: m for m in text_string_to_metric_families(body.decode())}
    value = {m: fams[m].samples[0].value for m in ("mlroute_jobs", "mlroute_switches_connected",
                                                    "mlroute_rules_installed")}
    assert value["mlroute_jobs"] == 1 and value["mlroute_switches_connected"] == 3
    assert value["mlroute_rules_installed"] == sum(len(s.rules) for s in svc.installed.values())
    assert fams["mlroute_failures_handled"].samples[0].value == 1
    planned = {s.labels["link"]: s.value for s in fams["mlroute_planned_link_flows"].samples}
    assert sum(v for k, v in planned.items() if k.startswith("l")) == 2  # the ring's two flows
    measured = {s.labels["link"]: s.value for s in fams["mlroute_measured_link_bps"].samples}
    assert measured["l0->s0"] == pytest.approx(8000)
    count = [s for s in fams["mlroute_planner_seconds"].samples if s.name.endswith("_count")]
    assert count[0].value >= 1
