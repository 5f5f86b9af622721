"""The live web view (controller/service/web) on Clos fabrics of two planes, in a real browser
against a real controller process with no switch, its job from a state file: as
tests/test_web_clos.py, whose helpers it uses. The page must draw every switch of every plane
tier by tier (the planes side by side, each in a band labelled with its name, their leaves on
one row), every host once and linked to its leaf in each plane, every directed switch link of
/v1/links of both planes, a link declared down in plane 1 dashed, and the planned links of an
all-to-all whose routes use both planes coloured apart from the others."""
import itertools

import pytest

from controller.model.clos import Clos
from tests.test_web import _css, _wait
from tests.test_web_clos import (
    _links_drawn,
    _live_page,
    _planned_coloured,
    _y,
)

FABRICS = {  # two planes of each shape; 4 hosts of the all-to-all, across the pods
    "leaf-spine": (lambda: Clos.leaf_spine(2, 4, 1, 0.02, planes=2).wire(),
                   ["h0_0", "h1_0", "h2_0", "h3_0"], "2 planes, each 2 spines × 4 leaves; "
                   "4 hosts on every plane"),
    "fat-tree": (lambda: Clos.fat_tree(4, 1, 0.02, planes=2).wire(),
                 ["h0_0", "h2_0", "h4_0", "h6_0"], "2 planes, each k=4 fat-tree: 4 cores, "
                 "8 aggregation switches, 8 leaves; 8 hosts on every plane"),
}


def _fabric_doc(shape: str) -> tuple[dict, tuple[str, str]]:
    """The fabric's document with plane 1's last link (its top tier) declared down."""
    f = FABRICS[shape][0]()
    down = [x for x in f.links() if f.plane_of[x[0]] == 1][-1]
    doc = f.to_dict()
    doc["down"] = [list(down)]
    return doc, down


def _all_to_all(hosts: list[str]) -> dict:
    return {"id": "a2a", "flows": [{"src": a, "dst": b, "bytes": 1e6}
                                   for a, b in itertools.permutations(hosts, 2)]}


def _tiers(plane) -> list[tuple[str, list[str]]]:
    """A plane's tiers top to bottom, with the role the page gives their switches."""
    if not plane.cores:
        return [("spine", plane.aggs[0]), ("leaf", plane.leaves)]
    return [("core", [c for g in plane.cores for c in g]),
            ("agg", [a for pod in plane.aggs for a in pod]), ("leaf", plane.leaves)]


def _check_switches(driver, f: Clos) -> None:
    """Every switch of every plane, each plane tier by tier inside its labelled band, the
    planes side by side in their order, every leaf on one row."""
    _wait(driver, lambda d: len(_css(d, "g.switch")) == len(f.switches()), "every switch")
    names = {g.get_attribute("data-name"): g for g in _css(driver, "g.switch")}
    assert set(names) == set(f.switches())
    bands = {g.get_attribute("data-name"): g for g in _css(driver, "g.plane")}
    assert list(bands) == [p.name for p in f.planes]
    assert [g.text for g in bands.values()] == [p.name for p in f.planes]
    right = None
    for p in f.planes:
        tiers = _tiers(p)
        for role, tier in tiers:
            assert {names[x].get_attribute("data-role") for x in tier} == {role}, (p.name, role)
        for (_, upper), (_, lower) in zip(tiers, tiers[1:]):
            assert max(_y(names[x]) for x in upper) < min(_y(names[x]) for x in lower)
        band = bands[p.name].find_element("css selector", "rect").rect
        for x in p.switches():
            r = names[x].find_element("css selector", "rect").rect
            assert band["x"] <= r["x"] and r["x"] + r["width"] <= band["x"] + band["width"], x
            assert band["y"] <= r["y"] and r["y"] + r["height"] <= band["y"] + band["height"], x
        assert right is None or right <= band["x"], "the planes overlap"
        right = band["x"] + band["width"]
    assert len({_y(names[x]) for x in f.leaves}) == 1
    pods = [(g.get_attribute("data-plane"), g.get_attribute("data-name"))
            for g in _css(driver, "g.pod")]
    assert pods == [(p.name, pod) for p in f.planes if p.cores for pod in p.pods]


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("shape", list(FABRICS))
def test_live_view_draws_every_plane_its_links_and_an_all_to_all(tmp_path, shape):
    doc, (lower, upper) = _fabric_doc(shape)
    hosts, caption = FABRICS[shape][1:]
    f = Clos.from_dict(doc)
    assert len(f.planes) == 2 and f.plane_of[lower] == 1

    def plane_of(link: str) -> int:
        return f.plane_of[link.split("->")[0]]

    with _live_page(tmp_path, doc, _all_to_all(hosts)) as (driver, ctl):
        status, view = ctl.rest("GET", "/v1/jobs/a2a")
        assert status == 200 and len(view["routes"]) == 12, view
        assert {r["plane"] for r in view["routes"]} == {"plane0", "plane1"}  # both planes
        status, links = ctl.rest("GET", "/v1/links")
        assert status == 200
        served = {x["link"] for x in links["links"]}
        down = {f"{lower}->{upper}", f"{upper}->{lower}"}
        assert len(served) == 2 * len(f.links()) - 2 and not served & down
        assert {plane_of(n) for n in served} == {0, 1}

        driver.get(ctl.url + "/")
        _check_switches(driver, f)
        # every host once, linked to its leaf in each plane
        assert sorted(g.get_attribute("data-name") for g in _css(driver, "g.host")) == \
            sorted(f.hosts)
        wires = [(x.get_attribute("data-host"), x.get_attribute("data-leaf"))
                 for x in _css(driver, "line.host-link")]
        assert sorted(wires) == sorted((h, leaf) for h, ls in f.host_leaves.items()
                                       for leaf in ls)
        # every directed switch link of both planes; the one declared down in plane 1 dashed
        lines = _links_drawn(driver, served, down)
        for n, x in lines.items():
            dashed = x.value_of_css_property("stroke-dasharray") not in ("none", "")
            assert dashed == (n in down), (n, x.value_of_css_property("stroke-dasharray"))
        summary = driver.find_element("id", "fabric-summary").text
        assert caption in summary and "first of" not in summary, summary
        assert f"not ready: 0/{len(f.switches())} switches provisioned" in \
            driver.find_element("id", "status").text
        assert driver.find_element("id", "on-plan").text == "on planned path"

        # the planned links of both planes coloured apart from the others
        planned = {x["link"] for x in links["links"] if x["flows"] > 0}
        hops = {f"{a}->{b}" for r in view["routes"] for a, b in zip(r["path"], r["path"][1:])}
        assert hops == planned and {plane_of(n) for n in planned} == {0, 1}
        _planned_coloured(driver, lines, served, planned, down)
        _wait(driver, lambda d: _css(d, 'tr.job[data-job="a2a"]'), "the job")
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == [], errors
        assert driver.save_screenshot(str(tmp_path / f"web_planes_{shape}.png"))
