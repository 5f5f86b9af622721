"""The how-to pages run as written: their command blocks, in order, against the real controller,
Open vSwitch and Mininet, and what each page says a block prints is what it prints (each
phrase is looked up in the page, as tests/test_docs.py's CHECKS do, so that the text and its
check change together).

* run-controller.md: ``make controller``, the ``mn`` line (its prompt fed ``pingall``, then
  ``exit``) and the ``curl`` that posts a ring by its hosts' addresses; while the controller
  runs, troubleshooting.md's ``ss`` line, which finds what holds the controller's ports.
* declare-jobs.md: its no-root block (``job.json``), the controller and Mininet as
  run-controller.md starts them (the running controller the page needs), the page's two
  blocks and troubleshooting.md's, which shows why job ``j`` is not learned; then, the jobs
  deleted, the README's block (the same commands, with this page's ``job.json``).
* emulation.md: its no-root block (``rings.json``), then ``emulation.run`` (marked extended:
  ``make test``'s ``make demo`` in tests/test_tutorials_live.py runs the same runner on the
  same fabric).

The blocks run in a folder of links to the checkout with the venv active; every process is
started in a session of its own and stopped by its process group in ``finally`` (also on
Ctrl-C); every wait has a timeout (tests/pages_live.py). Not checked here: how soon after the
start every pair answers (about 1.25 s, run-controller.md's comment: ``benchmarks.connect``
measures it, bench/connect.json).
"""
import contextlib
import json
import os
import re

import pytest

from controller.client import Client
from emulation.harness import fabricnet
from tests.integration import EXTENDED, require_root_and_ovs
from tests.pages_live import (
    answering,
    get_json,
    launcher,
    leave_mininet,
    mininet_pingall,
    prepared,
    run_block,
    stop_group,
)
from tests.test_docs import README, REPO, Run, _blocks, _prose

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
HOWTO = os.path.join(REPO, "docs", "howto")
RUN_CONTROLLER = os.path.join(HOWTO, "run-controller.md")
DECLARE_JOBS = os.path.join(HOWTO, "declare-jobs.md")
TROUBLESHOOTING = os.path.join(HOWTO, "troubleshooting.md")
EMULATION = os.path.join(HOWTO, "emulation.md")
URL = "http://127.0.0.1:8080"  # the pages' controller
RING = ["h0_0", "h1_0", "h2_0", "h3_0"]  # 10.0.0.1, 10.0.1.1, 10.0.2.1, 10.0.3.1


def _needs(path: str) -> list[str]:
    """The page's "Needs ..." blocks, in order."""
    return [body for title, body in _blocks(path) if title.startswith("Needs")]


def _page(path: str) -> Run:
    """The page's text, to check what it says (``Run.says``)."""
    return Run(None, "", "", _prose(path))


def _run_controller_blocks() -> list[str]:
    controller, mininet, post = _needs(RUN_CONTROLLER)
    assert controller.split("#")[0].strip() == "make controller", controller
    assert "mn --custom topologies/clos.py --topo clos,4,8,2" in mininet and "port=6653" in mininet
    assert post.startswith("curl -s -XPOST 127.0.0.1:8080/v1/jobs"), post
    return [controller, mininet, post]


def _troubleshooting_blocks() -> tuple[str, str]:
    """troubleshooting.md's blocks that run here: what holds the ports, why a job is not
    learned (the others are fixes: tests/test_docs.py's NOT_RUN)."""
    _ovs, _clean, ports, learning = _needs(TROUBLESHOOTING)
    assert ports.startswith("ss -ltnup") and "job show j" in learning, (ports, learning)
    return ports, learning


def _answer(out: str) -> tuple[dict, str]:
    """What ``curl -s`` printed (a JSON document and its newline) and what came next."""
    doc, end = json.JSONDecoder().raw_decode(out)
    assert out[end:end + 1] == "\n", out  # the shell's prompt starts on a line of its own
    return doc, out[end + 1:]


def _fabric() -> dict:
    return get_json(f"{URL}/v1/fabric")["declared"]


def _planned_ring(answer: dict, fabric: dict) -> None:
    """A ring of RING as planned: a route from each rank to the next, each on a spine."""
    assert answer["id"] == "r", answer
    assert [(r["src"], r["dst"]) for r in answer["routes"]] == list(zip(RING, RING[1:] + RING[:1]))
    assert all(r["spine"] in fabric["spines"] for r in answer["routes"]), answer["routes"]


@contextlib.contextmanager
def _controller_and_fabric(work: str, env: dict, logs):
    """run-controller.md's first two blocks as written: ``make controller``, then its ``mn``
    line with ``pingall`` fed to the prompt (every ping answered). Yields the controller's
    process (the leader of its process group); then ``exit`` at Mininet's prompt and, also
    when the test failed, every process stopped by its group and the bridges removed."""
    controller, mininet, _post = _run_controller_blocks()
    procs = []
    start = launcher(work, env, logs, procs)
    try:
        ctl = start(controller, "controller")
        fabricnet.wait_until(lambda: answering(f"{URL}/v1/jobs"), 120,
                             what="the controller's REST port 8080 (make controller)")
        net = mininet_pingall(start, mininet, logs, 180)
        yield ctl
        leave_mininet(net)
    finally:
        for p, first in reversed(procs):  # Mininet, then the controller, then the bridges
            stop_group(p, first)
        fabricnet.cleanup()


def test_run_controller_page_runs_as_written(tmp_path):
    require_root_and_ovs()
    post = _run_controller_blocks()[2]
    ports = _troubleshooting_blocks()[0]
    page = _page(RUN_CONTROLLER)
    work, env, logs = prepared(tmp_path, _blocks(RUN_CONTROLLER))
    with _controller_and_fabric(work, env, logs) as ctl:
        page.says("the controller finds the leaf-spine by itself")
        fabric = _fabric()
        assert (len(fabric["spines"]), len(fabric["leaves"]), len(fabric["hosts"])) == (4, 8, 16)

        out = run_block(post, work, env, 60)
        page.says("The controller answers 201 with the job as planned: one route per flow of the "
                  "ring, from each rank to the next, with the spine it takes and the hosts named "
                  "as discovery names them (`h0_0` is 10.0.0.1)")
        answer, rest = _answer(out)
        assert rest.strip() == "" and "error" not in answer, out[-2000:]
        _planned_ring(answer, fabric)
        assert [j["id"] for j in get_json(f"{URL}/v1/jobs")["jobs"]] == ["r"]

        out = run_block(ports, work, env, 30)
        _page(TROUBLESHOOTING).says("Find the process, stop it by its PID")
        held = {}  # port: process group of the process the line names
        for line in out.splitlines():
            port = line.split()[4].rsplit(":", 1)[1]
            pid = re.search(r"pid=(\d+)", line)
            assert pid, line
            held[port] = os.getpgid(int(pid[1]))
        assert {"6653", "8080", "6343"} <= set(held), out  # OpenFlow, REST, sFlow
        assert set(held.values()) == {ctl.pid}, out  # make controller's


def test_declare_jobs_page_runs_as_written(tmp_path):
    require_root_and_ovs()
    document, members = _needs(DECLARE_JOBS)
    assert document.startswith("curl") and "job add job.json" in document, document
    assert "job add --members" in members and "job show j" in members, members
    learning = _troubleshooting_blocks()[1]
    (readme,) = [b for b in _needs(README) if b.startswith("curl")]
    assert "job add job.json" in readme
    page = _page(DECLARE_JOBS)
    work, env, logs = prepared(tmp_path, _blocks(DECLARE_JOBS))  # writes job.json
    with _controller_and_fabric(work, env, logs):
        fabric = _fabric()

        # 1. a document: curl posts ring r in sr mode, job add job.json's qp, list, delete r
        out = run_block(document, work, env, 120)
        page.says("`curl` prints the controller's answer (201): the job as planned, one route per "
                  "flow with the spine it takes",
                  "`job add` prints a line per job (`job qp added: 2 flows, matrix declared`), "
                  "`job list` a row per job with its mode, flows and where its matrix comes from, "
                  "and `job delete` `job r "
                  "deleted`")
        answer, rest = _answer(out)
        _planned_ring(answer, fabric)
        assert answer["mode"] == "sr", answer
        added, head, *rows, deleted = rest.strip().splitlines()
        assert added == "job qp added: 2 flows, matrix declared", rest
        assert head.split()[:4] == ["id", "algorithm", "mode", "flows"], rest
        assert head.split()[-1] == "matrix", rest
        assert [(w[0], w[2], w[3], w[-1]) for w in map(str.split, rows)] == [
            ("r", "sr", "4", "declared"), ("qp", "flow", "2", "declared")], rest
        assert deleted == "job r deleted", rest
        page.says("so two flows between the same hosts can take different spines (`qp`'s two "
                  "queue pairs do)")
        qp = get_json(f"{URL}/v1/jobs/qp")["routes"]
        assert len(qp) == 2 and len({r["spine"] for r in qp}) == 2, qp

        # 3. members only: nothing routed, and the view says why it is not learned yet
        out = run_block(members, work, env, 60)
        page.says("`job add` says `job j added: 0 flows, matrix learning`: nothing is routed for "
                  "the job until the controller has measured its traffic",
                  'A job that stays `"learning"` says why in its view: `learning.reason` (no '
                  "samples between its members")
        added, view = out.split("\n", 1)
        assert added == "job j added: 0 flows, matrix learning", out
        lines = view.splitlines()  # job show: the job in a few lines, for people
        assert lines[0].startswith("job j: ") and lines[0].endswith(", 0 flows, matrix "
                                                                   "learning"), out
        assert "members: h0_0 h1_0 h2_0" in lines, out  # 10.0.0.1, 10.0.1.1 named
        assert any(x.startswith("learning: ") and "not acting: no samples between its members"
                   in x for x in lines), out
        assert not any(x.startswith("routes") for x in lines), out

        # troubleshooting.md, "A job is not learned": the same job's learning, and why
        out = run_block(learning, work, env, 60)
        _page(TROUBLESHOOTING).says(
            "its view says why it is not acting yet",
            "no samples between its members | whether the switches send sFlow to this controller",
            "the datagrams and samples the collector accepted in all are beside it")
        why = json.loads(out)
        assert re.fullmatch(r"no samples between its members since it was posted \(\d+ data "
                            r"samples accepted from \d+ datagrams in all\)", why["reason"]), why

        # the README's block, on a controller without this page's jobs
        client = Client(URL)
        for job in client.jobs()["jobs"]:
            client.delete_job(job["id"])
        out = run_block(readme, work, env, 60)
        _page(README).says("`curl` prints the job's routes, one per flow with the spine it takes, "
                           "and `job add` how many flows it added")
        answer, rest = _answer(out)
        _planned_ring(answer, fabric)
        assert rest.strip() == "job qp added: 2 flows, matrix declared", rest


@EXTENDED  # make test: make demo in tests/test_tutorials_live.py runs the same runner
def test_emulation_page_runs_as_written(tmp_path):
    require_root_and_ovs()
    (emulate,) = _needs(EMULATION)
    assert "-m emulation.run --jobs rings.json" in emulate and "--out emu" in emulate, emulate
    page = _page(EMULATION)
    work, env, _logs = prepared(tmp_path, _blocks(EMULATION))  # writes rings.json
    try:
        out = run_block(emulate, work, env, 600)
    finally:
        fabricnet.cleanup()
    page.says("It prints a table like `make demo`'s",
              "writes `emu/summary.json` and `emu/summary.png`",
              "ECMP's hash puts two rings' flows on one link (max load 2), so the fluid model "
              "predicts twice the ideal 5.6 s; the greedy puts one flow on every link (max load "
              "1) and predicts the ideal",
              "Each ring's measured time is within 15% of the prediction",
              "the switch counters prove every flow's path (`paths ok` 16/16)")
    with open(os.path.join(work, "emu", "summary.json")) as fh:
        summary = json.load(fh)
    assert os.path.getsize(os.path.join(work, "emu", "summary.png")) > 0
    rounds = {r["algorithm"]: r for r in summary["rounds"]}
    assert list(rounds) == ["ecmp", "greedy"] and summary["iterations"] == 1, summary
    loads = {"ecmp": 2, "greedy": 1}
    for alg, r in rounds.items():
        assert r["mode"] == "sr" and r["max_link_load"] == loads[alg], r
        assert r["paths_verified"] == r["paths_total"] == 16, r["path_checks"]
        assert sorted(r["jobs"]) == ["ring0", "ring1"], r["jobs"]
        for jid, j in r["jobs"].items():
            assert len(j["allreduce_s"]) == 1, j
            assert j["ideal_s"] == pytest.approx(5.6), j
            assert j["predicted_s"] == pytest.approx(5.6 * loads[alg]), j
            # the bound benchmarks/emulation.py holds make demo to
            assert 0.85 <= j["measured_over_predicted"] <= 1.15, (alg, jid, j)
    table = [line.split() for line in out.splitlines() if line.split()[:1] in (["ecmp"],
                                                                                ["greedy"])]
    assert [(w[0], w[1], w[-2], w[-1]) for w in table] == [
        (alg, jid, str(loads[alg]), "16/16") for alg in loads for jid in ("ring0", "ring1")], out
