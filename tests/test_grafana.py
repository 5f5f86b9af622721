"""The Grafana dashboard (dashboards/grafana-mlroute.json) asks only for what the controller's
/metrics page exposes: every metric name and label its PromQL queries use appears in the
exposition of a busy service (a job, measured traffic, failed links, an unroutable leaf pair,
a miswired cable: ``emulation/harness/busy_service.py``), and every metric family the
controller exposes is on the dashboard."""
import json
import os
import re

from prometheus_client.parser import text_string_to_metric_families

from controller.service.metrics import exposition
from emulation.harness.busy_service import busy_service
from emulation.harness.controller_proc import REPO

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


def _exposed(svc) -> dict[str, set[str]]:
    """Sample name -> its label names, from the text the controller serves at /metrics."""
    body, _ = exposition(svc)
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out.setdefault(s.name, set()).update(s.labels)
    return out


def test_every_queried_metric_and_label_is_exposed():
    exposed = _exposed(busy_service())
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
    for name in _exposed(busy_service()):
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
