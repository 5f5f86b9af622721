"""The tutorials run as written: their command blocks, in order, against the real controller,
Open vSwitch and Mininet, so that a broken example fails here.

* first-route.md: the no-root blocks in a folder of links to the checkout, then ``make
  controller``, ``mn --custom topologies/clos.py`` (its prompt fed ``pingall`` and, after the
  third terminal's commands, ``exit``), the CLI and curl against the controller, Ctrl-C on
  the controller, and ``make demo``.
* pytorch-job.md: the torchrun block on two Mininet hosts (``R`` and ``CTL`` set as the page
  says; ``CTL`` is 127.0.0.1, where a socat relay in each host's namespace reaches the
  controller, and ``GLOO_SOCKET_IFNAME`` the host's interface, as Mininet hosts share the
  machine's host name), the job's blocks while it runs, then ``emulation.collectives``.
* redundant-controllers.md: real etcd, two controllers (``mlroute-controller``) on one host and
  Mininet.
* three-tier.md: the controller with the wired fat-tree, ``mn --topo fattree`` (``pingall``
  fed to its prompt), the CLI and curl against the controller.

Every process is started in a session of its own and stopped by its process group in
``finally`` (also on Ctrl-C); every wait has a timeout. In redundant-controllers.md two
substitutions, both said here: etcd's data directory is a temporary one (the tutorial's
/var/lib/mlroute-etcd would keep a cluster across runs), and a leading ``sudo`` is dropped when
already root (CI's machines have no sudo). Mininet's command line reads the test's commands
(``pingall``, then ``exit``) from its standard input. Before the sFlow ports were separated the
second controller died at start ("sFlow collector cannot bind udp 127.0.0.1:6343"). The
helpers that run a page's blocks are tests/pages_live.py's, shared with the how-to pages'
tests/test_howto_live.py.
"""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess

import pytest

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
    venv_env,
)
from tests.test_docs import REPO, _blocks

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
PAGE = os.path.join(REPO, "docs", "tutorials", "redundant-controllers.md")
TUTORIALS = os.path.join(REPO, "docs", "tutorials")


def test_redundant_controllers_tutorial_runs_as_written(tmp_path):
    require_root_and_ovs()
    if not os.path.exists("/usr/bin/etcd"):
        pytest.skip("etcd is not installed (make system)")
    blocks = [body for _title, body in _blocks(PAGE)]
    fabric, etcd, c0, c1, mininet, ask = blocks[:6]
    assert "--mlroute-sflow-port 6343" in c0 and "--mlroute-sflow-port 6344" in c1
    assert "MLROUTE_SFLOW_TARGET=127.0.0.1:6343,127.0.0.1:6344" in mininet
    # the tutorial runs in the repository's folder; here a folder of links to it
    work = tmp_path / "repo"
    work.mkdir()
    for name in (".venv", "controller", "topologies"):
        os.symlink(os.path.join(REPO, name), work / name)
    logs = tmp_path / "logs"
    logs.mkdir()
    fabricnet.cleanup()
    procs = []

    def start(cmd: str, name: str, **kw) -> subprocess.Popen:
        cmd = cmd.replace("\\\n", " ")
        if os.geteuid() == 0:
            cmd = re.sub(r"^sudo\s+", "", cmd.strip())
        out = open(logs / f"{name}.log", "w")
        p = subprocess.Popen(["bash", "-c", cmd], cwd=work, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True, **kw)
        procs.append(p)
        return p

    try:
        subprocess.run(["bash", "-c", fabric.replace("python ", f"{REPO}/.venv/bin/python ")],
                       cwd=work, check=True, timeout=60, capture_output=True)
        start(etcd.replace("/var/lib/mlroute-etcd", shlex.quote(str(tmp_path / "etcd"))),
              "etcd")
        fabricnet.wait_until(lambda: answering("http://127.0.0.1:2379/version"), 30,
                             what="etcd answering")
        ctl = [start(c0, "c0"), start(c1, "c1")]
        for port in (8080, 8081):
            fabricnet.wait_until(lambda port=port: answering(f"http://127.0.0.1:{port}/v1/cluster"),
                                 60, what=f"the controller on REST port {port}")
        net = start(mininet, "mininet", stdin=subprocess.PIPE)

        def connected():
            docs = [get_json(f"http://127.0.0.1:{p}/v1/cluster") for p in (8080, 8081)]
            roles = sorted(d["self"]["role"] for d in docs)
            return roles == ["master", "standby"] and all(
                sum(d["self"].get("switches", {}).values()) == 12 for d in docs)
        fabricnet.wait_until(connected, 120, what="12 switches connected to both controllers")
        assert all(p.poll() is None for p in ctl), "a controller died"
        answer = subprocess.run(["bash", "-c", ask], capture_output=True, text=True,
                                timeout=30, check=True).stdout
        doc = json.loads(answer)
        assert doc["self"]["id"] == "c1" and doc["master"] in ("c0", "c1")
        assert {m["id"] for m in doc["members"]} == {"c0", "c1"} and doc["healthy"]
        net.stdin.write(b"pingall\nexit\n")
        net.stdin.close()
        net.wait(timeout=120)
        text = (logs / "mininet.log").read_text()
        assert "Results: 0% dropped" in text, text[-2000:]
        for name in ("c0", "c1"):
            assert "cannot bind" not in (logs / f"{name}.log").read_text()
    finally:
        for p in reversed(procs):
            stop_group(p, signal.SIGTERM)
        fabricnet.cleanup()


def test_first_route_tutorial_runs_as_written(tmp_path):
    require_root_and_ovs()
    blocks = _blocks(os.path.join(TUTORIALS, "first-route.md"))
    live = [(t, b) for t, b in blocks if t.startswith("Needs")]
    assert [b.split()[0] for _t, b in live] == ["make", "mn", "mlroute", "make"], live
    controller, mininet, third, demo = (b for _t, b in live)
    assert controller.strip() == "make controller" and demo.strip() == "make demo"
    work, env, logs = prepared(tmp_path, blocks)
    procs = []
    start = launcher(work, env, logs, procs)

    try:
        ctl = start(controller, "controller")
        fabricnet.wait_until(lambda: answering("http://127.0.0.1:8080/v1/jobs"), 120,
                             what="the controller's REST port 8080 (make controller)")
        net = mininet_pingall(start, mininet, logs, 180)
        out = run_block(third, work, env, 180)
        assert "ring0" in out and '"links"' in out, out[-2000:]  # job show, then curl
        view = get_json("http://127.0.0.1:8080/v1/jobs/ring0")
        assert len(view["routes"]) == 8 and all(r.get("spine") for r in view["routes"])
        assert get_json("http://127.0.0.1:8080/v1/links")["summary"]["max_link_load"] == 1
        # the page: stop the controller (Ctrl-C) and leave Mininet (exit) before make demo
        leave_mininet(net)
        stop_group(ctl)
        assert ctl.returncode is not None
        fabricnet.cleanup()
        out = run_block(demo, work, env, 900)
        assert "faster than ECMP" in out, out[-3000:]
        assert os.path.exists(os.path.join(work, "results", "demo", "summary.json"))
    finally:
        for p, first in reversed(procs):  # Mininet, then the controller, then the bridges
            stop_group(p, first)
        fabricnet.cleanup()


def test_three_tier_tutorial_runs_as_written(tmp_path):
    require_root_and_ovs()
    blocks = _blocks(os.path.join(TUTORIALS, "three-tier.md"))
    live = [(t, b) for t, b in blocks if t.startswith("Needs")]
    assert [b.split()[0] for _t, b in live] == [".venv/bin/mlroute-controller", "mn",
                                                "mlroute"], live
    controller, mininet, third = (b for _t, b in live)
    work, env, logs = prepared(tmp_path, blocks)
    procs = []
    start = launcher(work, env, logs, procs)

    try:
        start(controller, "controller")
        fabricnet.wait_until(lambda: answering("http://127.0.0.1:8080/v1/jobs"), 120,
                             what="the controller's REST port 8080")
        net = mininet_pingall(start, mininet, logs, 240)
        out = run_block(third, work, env, 180)
        assert "ring0" in out and '"tier": "core"' in out, out[-2000:]
        view = get_json("http://127.0.0.1:8080/v1/jobs/ring0")
        assert len(view["routes"]) == 8 and all(len(r["path"]) == 5 for r in view["routes"])
        assert get_json("http://127.0.0.1:8080/v1/links")["summary"]["max_link_load"] == 1
        leave_mininet(net)
    finally:
        for p, first in reversed(procs):  # Mininet, then the controller, then the bridges
            stop_group(p, first)
        fabricnet.cleanup()


@EXTENDED  # make test: the hook in tests/test_integrations_live.py
def test_pytorch_job_tutorial_runs_as_written(tmp_path):
    require_root_and_ovs()
    if shutil.which("socat") is None or shutil.which("torchrun") is None:
        pytest.skip("needs socat and torchrun (make system)")
    from emulation.harness.session import Session
    from tests.integration import HOSTS, LEAVES, SPINES
    blocks = _blocks(os.path.join(TUTORIALS, "pytorch-job.md"))
    live = [b for t, b in blocks if t.startswith("Needs")]
    torchrun, show, collectives = live
    assert torchrun.startswith("torchrun") and "emulation.collectives" in collectives
    for title, body in blocks:
        if not title.startswith("Needs"):
            run_block(body, str(tmp_path), venv_env(), 120)
    procs = []
    # 10 Mbit/s links: 10 All-Reduces of 4 MiB take about 35 s, time to look at the job
    with Session(SPINES, LEAVES, HOSTS, 10.0, str(tmp_path / "session")) as s:
        try:
            assert s.ctl.rest_port == 8080  # the page's port
            sock = str(tmp_path / "rest.sock")
            procs.append(subprocess.Popen(["socat", f"UNIX-LISTEN:{sock},fork,reuseaddr",
                                           "TCP:127.0.0.1:8080"], start_new_session=True))
            fabricnet.wait_until(lambda: os.path.exists(sock), 10, what="relay socket")
            hosts = [s.net.get("h0_0"), s.net.get("h1_0")]
            assert s.fabric.host_ip["h0_0"] == "10.0.0.1"  # the page's --master_addr
            ranks = []
            for r, h in enumerate(hosts):
                procs.append(h.popen(["socat", "TCP-LISTEN:8080,bind=127.0.0.1,fork,reuseaddr",
                                      f"UNIX-CONNECT:{sock}"]))
                env = dict(os.environ, R=str(r), CTL="127.0.0.1", OMP_NUM_THREADS="1",
                           GLOO_SOCKET_IFNAME=f"{h.name}-eth0")
                out = open(tmp_path / f"rank{r}.log", "w")
                ranks.append(h.popen(["bash", "-euo", "pipefail", "-c", torchrun], cwd=REPO,
                                     env=env, stdout=out, stderr=subprocess.STDOUT))
            procs += ranks
            fabricnet.wait_until(lambda: _has_job(s, "allreduce"), 180, interval=0.2,
                                 what="job allreduce declared by rank 0")
            out = run_block(show, str(tmp_path), venv_env(CTL="127.0.0.1"), 60)
            assert out.splitlines()[1].split()[0] == "allreduce", out
            view = json.loads(out[out.index("{"):])
            assert view["matrix"] == "declared" and len(view["routes"]) == 2, view
            for p in ranks:
                p.wait(timeout=300)
            text = (tmp_path / "rank0.log").read_text()
            assert all(p.returncode == 0 for p in ranks), text[-3000:]
            result = json.loads(text.split("RESULT ", 1)[1].splitlines()[0])
            assert result["declared"] is True and len(result["allreduce_s"]) == 10
            assert s.ctl.client.jobs()["jobs"] == []  # removed at destroy_process_group
        finally:
            for p in reversed(procs):
                stop_group(p, signal.SIGTERM)
    out = run_block(collectives, REPO, venv_env(), 900)
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    assert [l["scenario"] for l in lines] == ["ecmp", "correct", "rank_order"], out
    assert all(l["sums_ok"] for l in lines), out


def _has_job(s, jid) -> bool:
    return any(j.get("id") == jid for j in s.ctl.client.jobs()["jobs"])



@EXTENDED  # make test: tests/test_srv6_live.py's link-down case
def test_srv6_tutorial_runs_as_written(tmp_path):
    """srv6.md: the routers with an agent on every host, the controller with no OpenFlow on
    the management address, the ring posted: its routes, each leaf's two flows on different
    spines, and host h0_0's segment lists as the page describes them."""
    require_root_and_ovs()
    blocks = _blocks(os.path.join(TUTORIALS, "srv6.md"))
    live = [b for t, b in blocks if t.startswith("Needs")]
    routers, controller, third = live
    assert routers.startswith("python -m emulation.routers") and "--mlroute-southbound none" \
        in controller and third.startswith("curl")
    work, env, logs = prepared(tmp_path, blocks)
    procs = []
    start = launcher(work, env, logs, procs)
    try:
        start(routers, "routers")
        fabricnet.wait_until(lambda: "fabric up: 4 routers, 4 hosts, an agent on each" in
                             (logs / "routers.log").read_text(), 120, what="the routers")
        start(controller, "controller")
        url = "http://172.30.255.254:8080"
        fabricnet.wait_until(lambda: answering(url + "/v1/jobs"), 60, what="the controller")
        out = run_block(third, work, env, 60)
        decoder, docs, at = json.JSONDecoder(), [], 0
        while at < len(out.strip()):  # curl prints the two answers back to back
            doc, at = decoder.raw_decode(out.strip(), at)
            docs.append(doc)
            while at < len(out.strip()) and out.strip()[at].isspace():
                at += 1
        first, second = docs
        spines = {}
        for r in first["routes"]:
            spines.setdefault(r["path"][0], []).append(r["path"][1])
        assert all(sorted(s) == ["s0", "s1"] for s in spines.values()), first["routes"]
        flow = second["flows"][0]
        assert flow["form"] == "usid" and flow["sids"][0].startswith("fcbb:bbbb:")
        assert flow["backup"]["path"][1] != flow["path"][1] and second["probes"]
        log = (logs / "controller.log")
        fabricnet.wait_until(lambda: "no OpenFlow (hosts push SRv6 paths)" in log.read_text(),
                             10, what="the controller's log line")
    finally:
        for p, first_signal in reversed(procs):  # the controller, then the routers
            stop_group(p, first_signal)
    assert "stopped" in (logs / "routers.log").read_text()
