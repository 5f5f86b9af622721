"""The manual (docs/, built by `make docs`): the generated reference lists everything the code
has (every controller option, every REST route, every metric family), and every command block
a reader is told runs without root runs as written and exits 0.

Convention for command blocks in the hand-written pages: a ```bash block has a title, either
``title="Runs without root"`` (run here, page by page, in one temporary directory per page,
in the order they appear) or a title starting with ``Needs`` (root, Open vSwitch and Mininet,
etcd, or a running controller: listed by ``live_blocks()`` for a live test)."""
import glob
import importlib.util
import os
import re
import subprocess
import sys

import pytest

from controller.service import api
from controller.shell.flags import OPTS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(REPO, "docs")
RUNS = "Runs without root"
BLOCK = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>\w*)(?P<attrs>[^\n]*)\n(?P<body>.*?)^(?P=indent)```",
                   re.S | re.M)
TITLE = re.compile(r'title="([^"]*)"')


def _gen():
    spec = importlib.util.spec_from_file_location("gen_reference",
                                                  os.path.join(DOCS, "gen_reference.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _gen()


def _pages() -> list[str]:
    """The hand-written pages (the generated ones are not tracked)."""
    generated = {os.path.join(DOCS, p) for p in GEN.GENERATED}
    return sorted(p for p in glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True)
                  if p not in generated)


def _blocks(path: str) -> list[tuple[str, str]]:
    """(title, body) of every ```bash block of a page, in order."""
    with open(path) as fh:
        text = fh.read()
    out = []
    for m in BLOCK.finditer(text):
        if m["lang"] != "bash":
            continue
        title = TITLE.search(m["attrs"])
        body = "\n".join(line[len(m["indent"]):] for line in m["body"].splitlines())
        out.append((title[1] if title else "", body))
    return out


def live_blocks() -> list[tuple[str, str, str]]:
    """(page, title, commands) of every block that needs a live fabric or controller."""
    return [(os.path.relpath(p, REPO), t, b) for p in _pages() for t, b in _blocks(p)
            if t.startswith("Needs")]


def test_every_controller_option_is_in_the_reference():
    page = GEN.options_page()
    missing = [o.name for o in OPTS if f"`--{o.name}`" not in page]
    assert missing == []
    assert "`--nomlroute-failover-probe`" in page  # a boolean's negative form is shown too


def test_every_rest_route_is_in_the_reference():
    page = GEN.rest_page()
    routes = api.routes()
    assert len(routes) >= 10
    missing = [f"{m} {p}" for m, p in routes if f"`{m} {p}`" not in page]
    assert missing == []
    assert "`GET /metrics`" in page


def test_every_metric_family_is_in_the_reference():
    from emulation.harness.busy_service import busy_service
    from tests.test_grafana import SUFFIXES, _exposed
    page = GEN.metrics_page()
    families = set()
    for name in _exposed(busy_service()):
        families.add(next((name[:-len(s)] for s in SUFFIXES if name.endswith(s)), name))
    assert len(families) >= 20
    missing = sorted(f for f in families if f"`{f}`" not in page and f"`{f}_total`" not in page)
    assert missing == []


def test_every_command_block_is_marked():
    unmarked = [(os.path.relpath(p, REPO), b.splitlines()[0]) for p in _pages()
                for t, b in _blocks(p) if t != RUNS and not t.startswith("Needs")]
    assert unmarked == []
    runnable = [p for p in _pages() if any(t == RUNS for t, _ in _blocks(p))]
    assert any("tutorials" in p for p in runnable)


def _runnable_pages():
    return [os.path.relpath(p, DOCS) for p in _pages() if any(t == RUNS for t, _ in _blocks(p))]


@pytest.mark.slow
@pytest.mark.parametrize("page", _runnable_pages())
def test_the_commands_that_need_no_root_run(page, tmp_path):
    env = dict(os.environ, PYTHONPATH=REPO,
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    for title, body in _blocks(os.path.join(DOCS, page)):
        if title != RUNS:
            continue
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{page}:\n{body}\n--- stderr:\n{r.stderr[-3000:]}"


def test_the_manual_cites_nothing_outside_the_repository():
    for path in _pages() + [os.path.join(REPO, "README.md"), os.path.join(REPO, "mkdocs.yml")]:
        with open(path) as fh:
            assert "../shared" not in fh.read(), path
