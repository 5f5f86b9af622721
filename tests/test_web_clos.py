"""The live web view (controller/service/web) on a three-tier Clos fabric, in a real browser
(Debian's chromium through selenium, as tests/test_web.py) against a real controller process
(ryu-manager or os-ken) with no switch: no Open vSwitch, no Mininet, no root.

A controller with no switch refuses a new job (409: it cannot install the job's rules), so the
ring job reaches it the way a restarted controller gets its jobs: from its state file
(--mlroute-state), written by the same service planning the job over REST against fake
OpenFlow tables. The page must draw the k=4 fat-tree tier by tier (cores above aggregation
switches above leaves), every directed switch link of /v1/links, a declared-down link dashed,
the job's row with its prediction and the planned links coloured apart from the others."""
import contextlib
import json
import os
import sys

import pytest

from controller.model.clos import Clos
from controller.service import api
from controller.service.route_service import RouteService
from controller.service.store import StateStore
from emulation.harness.controller_proc import ControllerProcess
from emulation.harness.fake_switch import FakeSwitches
from emulation.harness.ports import free_ports
from tests.helpers import FakeClock
from tests.test_web import _browser, _css, _wait

QUIET = ["--mlroute-sflow-port", "0"]  # no fixed UDP port either
RANKS = ["h0_0", "h2_0", "h4_0", "h6_0", "h1_1", "h3_1", "h5_1", "h7_1"]  # across the pods
RING = {"id": "r", "collective": "ring_allreduce", "ranks": RANKS, "bytes": 4e6}
DOWN = ("a0_1", "c1_0")  # declared down: drawn dashed, not in /v1/links, not planned


def _fabric_doc() -> dict:
    doc = Clos.fat_tree(4, 2, 0.02).wire().to_dict()
    doc["down"] = [list(DOWN)]
    return doc


def _state_with_job(doc: dict, path: str, job: dict = RING) -> None:
    """The controller's state file holding the job (the ring), planned and confirmed by the
    service against fake tables of every switch."""
    f = Clos.from_dict(doc)
    store = StateStore(path)
    try:
        sw = FakeSwitches(f.dpids.values(), fabric=f)
        clock = FakeClock(100.0)
        svc = RouteService(sw, f, store=store, clock=clock, sleep=clock.sleep)
        for d in f.dpids.values():
            svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
        code, answer = api.handle(svc, "POST", "/v1/jobs", json.dumps(job).encode())
        assert code == 201, answer
    finally:
        store.close()


def _browser_started():
    """tests/test_web.py's browser; a second try when chromium did not come up (it can miss
    selenium's deadline on a machine busy with an emulation)."""
    from selenium.common.exceptions import SessionNotCreatedException
    try:
        return _browser()
    except SessionNotCreatedException:
        return _browser()


@contextlib.contextmanager
def _live_page(tmp_path, doc: dict, job: dict = RING):
    """(browser, controller) on the web view of a controller with no switch whose state file
    holds ``job`` planned on fabric ``doc``; both stopped on the way out, and the controller's
    log holds no traceback."""
    fabric_path, state_path = tmp_path / "fabric.json", str(tmp_path / "state.db")
    fabric_path.write_text(json.dumps(doc))
    _state_with_job(doc, state_path, job)
    pytest.importorskip("selenium", reason="selenium (pinned in requirements.txt) is not "
                        "installed")
    driver = _browser_started()  # skips without chromium or chromedriver
    log = tmp_path / "controller.log"
    ctl = _controller(fabric_path, state_path, log)
    try:
        ctl.start()
        yield driver, ctl
    finally:
        try:
            driver.quit()
        finally:
            ctl.stop()
    text = log.read_text()
    assert "Traceback" not in text, text[-3000:]


def _y(el) -> float:
    return el.find_element("css selector", "rect").rect["y"]


def _controller(fabric_path, state_path: str, log) -> ControllerProcess:
    """A controller of the fabric with no switch, its jobs from the state file, on free ports
    (the web tests run beside each other and beside a controller on 8080/6653)."""
    rest, of = free_ports(2)  # two calls of free_port may hand out the same port
    ctl = ControllerProcess(str(fabric_path), str(log), rest_port=rest, of_port=of,
                            extra_args=["--mlroute-state", state_path, *QUIET])
    if os.path.basename(ctl.args[0]) == "ryu-manager":
        # the same entry point under the name python3: a Mininet cleanup (mn -c: killall
        # ryu-manager) run beside this test does not kill it
        ctl.args = [sys.executable, "-m", "ryu.cmd.manager", *ctl.args[1:]]
    return ctl


def _links_drawn(driver, served: set, down: set) -> dict:
    """Every line of the page by its link: one per directed switch link, those /v1/links
    lists (served) and the declared-down ones, these and only these drawn down."""
    lines = {x.get_attribute("data-link"): x for x in _css(driver, "line.link")}
    assert len(lines) == len(_css(driver, "line.link")) == len(served | down)
    assert set(lines) == served | down
    assert {n for n, x in lines.items() if x.get_attribute("data-state") == "down"} == down
    return lines


def _planned_coloured(driver, lines: dict, served: set, planned: set, down: set) -> None:
    """The planned links (at least one flow) drawn in colours apart from the idle links' one
    colour, the down links in a third."""
    _wait(driver, lambda d: all(
        (float(x.get_attribute("data-flows")) >= 1) == (n in planned)
        for n, x in lines.items()), "the planned flows on every link")
    colour = {n: x.value_of_css_property("stroke") for n, x in lines.items()}
    idle = {colour[n] for n in served - planned}
    assert len(idle) == 1 and not idle & {colour[n] for n in planned}, colour
    assert not {colour[n] for n in down} & (idle | {colour[n] for n in planned})


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_live_view_draws_a_fat_tree_its_links_and_a_ring_job(tmp_path):
    doc = _fabric_doc()
    f = Clos.from_dict(doc)
    p = f.planes[0]
    cores, aggs = [c for g in p.cores for c in g], [a for pod in p.aggs for a in pod]
    with _live_page(tmp_path, doc) as (driver, ctl):
        status, view = ctl.rest("GET", "/v1/jobs/r")
        assert status == 200 and view["predicted_allreduce_s"] > 0, view
        status, links = ctl.rest("GET", "/v1/links")
        assert status == 200
        served = {x["link"] for x in links["links"]}
        down = {f"{DOWN[0]}->{DOWN[1]}", f"{DOWN[1]}->{DOWN[0]}"}
        assert len(served) == 2 * len(f.links()) - 2 == 62 and not served & down

        driver.get(ctl.url + "/")
        # every switch, tier by tier: cores above aggregation switches above leaves
        _wait(driver, lambda d: len(_css(d, "g.switch")) == 20, "every switch")
        names = {g.get_attribute("data-name"): g for g in _css(driver, "g.switch")}
        assert set(names) == set(f.switches())
        assert {names[x].get_attribute("data-role") for x in cores} == {"core"}
        assert {names[x].get_attribute("data-role") for x in aggs} == {"agg"}
        assert {names[x].get_attribute("data-role") for x in p.leaves} == {"leaf"}
        assert max(_y(names[x]) for x in cores) < min(_y(names[x]) for x in aggs)
        assert max(_y(names[x]) for x in aggs) < min(_y(names[x]) for x in p.leaves)
        assert len(_css(driver, "g.host")) == 16 and len(_css(driver, "g.pod")) == 4
        # one line per directed switch link: those /v1/links lists and the declared-down one
        lines = _links_drawn(driver, served, down)
        assert len(lines) == 64
        summary = driver.find_element("id", "fabric-summary").text
        assert "k=4 fat-tree: 4 cores, 8 aggregation switches, 8 leaves, 16 hosts" in summary
        assert "not ready: 0/20 switches provisioned" in driver.find_element("id", "status").text

        # the job's row, with the controller's prediction; no byte counted without switches
        row = _wait(driver, lambda d: _css(d, 'tr.job[data-job="r"]'), "the job")[0]
        _wait(driver, lambda d: _css(d, 'tr.job[data-job="r"] td')[7].text != "…",
              "the job's figures")
        cells = [c.text for c in row.find_elements("tag name", "td")]
        assert cells[:4] == ["r", view["algorithm"], "flow", str(len(RANKS))], cells
        assert float(cells[4]) == pytest.approx(view["ideal_s"], rel=1e-2)
        assert float(cells[5]) == pytest.approx(view["predicted_allreduce_s"], rel=1e-2)
        assert cells[8] == f"0/{len(RANKS)}", cells
        assert driver.find_element("id", "on-plan").text == "on planned path"

        # planned links (both tiers, every hop of every route) coloured apart from the others
        planned = {x["link"] for x in links["links"] if x["flows"] > 0}
        hops = {f"{a}->{b}" for r in view["routes"] for a, b in zip(r["path"], r["path"][1:])}
        assert hops == planned and {x["tier"] for x in links["links"] if x["flows"] > 0} == \
            {"leaf", "core"}
        _planned_coloured(driver, lines, served, planned, down)

        # a job posted over REST with no switch connected: refused today (409, nothing
        # changes, no row); were it admitted with its rules pending, its row would show
        other = [f"h{h[1]}_{1 - int(h[-1])}" for h in RANKS]  # the other host of each leaf
        status, answer = ctl.rest("POST", "/v1/jobs", dict(RING, id="posted", ranks=other))
        if status == 201:
            _wait(driver, lambda d: _css(d, 'tr.job[data-job="posted"]'), "the posted job")
        else:
            assert status == 409 and "not connected" in answer["error"], (status, answer)
            polls = int(driver.find_element("tag name", "body").get_attribute("data-polls"))
            _wait(driver, lambda d: int(d.find_element("tag name", "body").get_attribute(
                "data-polls")) >= polls + 2, "two more polls")
            assert len(_css(driver, "tr.job")) == 1
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == [], errors
        assert driver.save_screenshot(str(tmp_path / "web_clos.png"))
