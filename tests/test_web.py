"""The live web view (controller/service/web) in a real browser against a real controller: Debian's
chromium driven by its chromium-driver through selenium (nothing downloaded). The page shows
the switches, a job appears after a POST, measured figures appear under traffic, a link shows
as down after a failure. A screenshot goes to the test's folder, and to the path in
MLROUTE_WEB_SCREENSHOT when set (docs/web.png for the manual)."""
import json
import os
import re
import shutil
import time
import urllib.error
import urllib.request

import pytest

from emulation.harness.controller_proc import REPO

WEB = os.path.join(REPO, "controller", "service", "web")
FILES = ("index.html", "app.js", "style.css")
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def test_page_uses_no_external_resource():
    """Machines may have no internet: nothing but the page's own files (the SVG namespace is
    a name, not a download)."""
    for name in FILES:
        with open(os.path.join(WEB, name)) as fh:
            text = fh.read()
        urls = set(re.findall(r"(?:https?:)?//[\w.-]+\.[a-z]{2,}[^\s\"')]*", text))
        assert urls <= {"http://www.w3.org/2000/svg"}, (name, urls)
    with open(os.path.join(WEB, "index.html")) as fh:
        html = fh.read()
    assert 'src="web/app.js"' in html and 'href="web/style.css"' in html


def test_page_reads_only_the_rest_api():
    """The page only polls (GET) and changes nothing (a token, if any, it reads with)."""
    with open(os.path.join(WEB, "app.js")) as fh:
        js = fh.read()
    assert re.findall(r'getJSON\("([^"]+)"', js) == ["v1/fabric", "v1/links", "v1/jobs",
                                                      "v1/jobs/"]
    assert "method" not in js


def _browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium (pinned in "
                                    "requirements.txt) is not installed")
    from selenium.webdriver.chrome.service import Service
    for path in (CHROMIUM, CHROMEDRIVER):
        if not shutil.which(path):
            pytest.skip(f"{path} is missing (make system installs chromium, chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1100"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def _wait(driver, predicate, what: str, timeout: float = 20):
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, timeout, poll_frequency=0.2).until(
        lambda d: predicate(d), message=f"the page did not show {what} within {timeout} s")


def _css(driver, selector):
    from selenium.webdriver.common.by import By
    return driver.find_elements(By.CSS_SELECTOR, selector)


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_served_files_and_content_types(tmp_path):
    """The real controller's web server (no switches needed: the page's files only)."""
    from controller.model.clos import Clos
    from emulation.harness.controller_proc import ControllerProcess
    fabric = tmp_path / "fabric.json"
    fabric.write_text(json.dumps(Clos.generate(2, 2, 1, 10.0, wiring=True).to_dict()))
    ctl = ControllerProcess(str(fabric), str(tmp_path / "controller.log")).start()
    try:
        for path, kind in (("/", "text/html"), ("/web/app.js", "application/javascript"),
                           ("/web/style.css", "text/css")):
            with urllib.request.urlopen(ctl.url + path, timeout=10) as resp:
                assert resp.status == 200
                assert resp.headers.get_content_type() == kind, (path, resp.headers)
                name = "index.html" if path == "/" else path.rsplit("/", 1)[1]
                with open(os.path.join(WEB, name), "rb") as fh:
                    assert resp.read() == fh.read()
        for path in ("/web/../app.py", "/web/nothing.js"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(ctl.url + path, timeout=10)
            assert e.value.code == 404, path
    finally:
        ctl.stop()


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_the_page_reads_with_the_token_of_its_fragment(tmp_path):
    """A controller with an admin token answers the page's reads only with it (issue 72): the
    page opened once as /#token=T draws the fabric, and the token leaves the address."""
    from controller.model.clos import Clos
    from emulation.harness.controller_proc import ControllerProcess
    from emulation.harness.ports import free_ports
    fabric = Clos.generate(2, 2, 1, 10.0, wiring=True)
    (tmp_path / "fabric.json").write_text(json.dumps(fabric.to_dict()))
    (tmp_path / "token").write_text("web-token-0123456789\n")
    rest, of = free_ports(2)
    ctl = ControllerProcess(str(tmp_path / "fabric.json"), str(tmp_path / "controller.log"),
                            rest_port=rest, of_port=of,
                            extra_args=["--mlroute-token-file", str(tmp_path / "token")])
    ctl.token = "web-token-0123456789"
    ctl.start()
    driver = _browser()
    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(ctl.url + "/v1/fabric", timeout=10)
        assert e.value.code == 401  # what the page gets without the token
        driver.get(ctl.url + "/#token=web-token-0123456789")
        _wait(driver, lambda d: len(_css(d, "g.switch")) == len(fabric.switches()),
              "every switch")
        assert "token" not in driver.current_url
    finally:
        driver.quit()
        ctl.stop()


def _ring_traffic(net, fabric, ranks, seconds: int) -> None:
    """Every rank sends to the next one with iperf3 (TCP), as the ring's flows do."""
    for i, h in enumerate(ranks):
        net.get(ranks[(i + 1) % len(ranks)]).cmd("iperf3 -s -1 -D")
    for i, h in enumerate(ranks):
        dst = fabric.host_ip[ranks[(i + 1) % len(ranks)]]
        net.get(h).cmd(f"timeout {seconds + 10} iperf3 -c {dst} -t {seconds} >/dev/null 2>&1 &")


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_live_view_shows_switches_jobs_measurements_and_failures(tmp_path):
    from tests.integration import default_session, require_root_and_ovs
    require_root_and_ovs()
    driver = _browser()
    try:
        with default_session(tmp_path, bw=5.0) as s:
            f = s.fabric
            spines = f.planes[0].aggs[0]  # the leaf-spine's
            driver.get(s.ctl.url + "/")
            # every switch of the fabric, spines above leaves
            _wait(driver, lambda d: len(_css(d, "g.switch")) == len(f.switches()),
                  "every switch")
            names = {g.get_attribute("data-name"): g for g in _css(driver, "g.switch")}
            assert set(names) == set(f.switches())
            assert max(names[x].rect["y"] for x in spines) < \
                min(names[x].rect["y"] for x in f.leaves)
            _wait(driver, lambda d: "ready" in d.find_element("id", "status").text, "ready")
            assert len(_css(driver, "line.link")) == 2 * len(spines) * len(f.leaves)
            assert not _css(driver, "tr.job")

            ranks = [f"h{i}_0" for i in range(len(f.leaves))]
            status, view = s.ctl.rest("POST", "/v1/jobs", {
                "id": "ring0", "collective": "ring_allreduce", "ranks": ranks, "bytes": 4e6})
            assert status == 201, view
            row = _wait(driver, lambda d: _css(d, 'tr.job[data-job="ring0"]'), "the job")[0]
            cells = [c.text for c in row.find_elements("tag name", "td")]
            assert cells[:4] == ["ring0", "greedy", "flow", str(len(ranks))], cells
            assert float(cells[5]) == pytest.approx(view["predicted_allreduce_s"], rel=1e-2)
            # planned links coloured by their flows
            planned = {f"{f.hosts[r['src']]}->{r['spine']}" for r in view["routes"]}
            _wait(driver, lambda d: all(
                float(d.find_element("css selector", f'line[data-link="{link}"]')
                      .get_attribute("data-flows")) >= 1 for link in planned), "planned links")

            # traffic: measured bytes and a measured All-Reduce time in the job's row
            _ring_traffic(s.net, f, ranks, 12)
            _wait(driver, lambda d: re.fullmatch(r"[\d.]+", _css(
                d, 'tr.job[data-job="ring0"] td')[6].text), "a measured time", timeout=30)
            cells = [c.text for c in _css(driver, 'tr.job[data-job="ring0"] td')]
            assert cells[8] == f"{len(ranks)}/{len(ranks)}", cells

            # a failure: the link is drawn down and the event listed
            leaf, spine = f.hosts[view["routes"][0]["src"]], view["routes"][0]["spine"]
            s.net.configLinkStatus(leaf, spine, "down")
            _wait(driver, lambda d: d.find_element(
                "css selector", f'line[data-link="{leaf}->{spine}"]')
                .get_attribute("data-state") == "down", "the link down")
            assert driver.find_element("css selector", f'line[data-link="{spine}->{leaf}"]') \
                .get_attribute("data-state") == "down"
            up = [x for x in _css(driver, "line.link") if x.get_attribute("data-state") == "up"]
            assert len(up) == 2 * len(spines) * len(f.leaves) - 2
            event = _wait(driver, lambda d: _css(d, "li.event.failure"), "the failure event")[0]
            assert f"{leaf}-{spine}" in event.text, event.text
            time.sleep(2)  # a few polls with the traffic on the new routes, for the picture
            shot = str(tmp_path / "web.png")
            assert driver.save_screenshot(shot)
            if os.environ.get("MLROUTE_WEB_SCREENSHOT"):
                shutil.copyfile(shot, os.environ["MLROUTE_WEB_SCREENSHOT"])
            errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
            assert errors == [], errors
    finally:
        driver.quit()
