"""The redundant-controllers tutorial (docs/tutorials/redundant-controllers.md) run as written:
its command blocks, in order, against real etcd, two ryu-managers on one host and Mininet.

Two substitutions, both said here: etcd's data directory is a temporary one (the tutorial's
/var/lib/mlroute-etcd would keep a cluster across runs), and a leading ``sudo`` is dropped when
already root (CI's machines have no sudo). Mininet's command line reads the test's commands
(``pingall``, then ``exit``) from its standard input. Before the sFlow ports were separated the
second controller died at start ("sFlow collector cannot bind udp 127.0.0.1:6343").
"""
import json
import os
import re
import shlex
import subprocess
import urllib.request

import pytest

from emulation.harness import fabricnet
from tests.integration import require_root_and_ovs
from tests.test_docs import REPO, _blocks

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
PAGE = os.path.join(REPO, "docs", "tutorials", "redundant-controllers.md")


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


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
        fabricnet.wait_until(lambda: _alive("http://127.0.0.1:2379/version"), 30,
                             what="etcd answering")
        ctl = [start(c0, "c0"), start(c1, "c1")]
        for port in (8080, 8081):
            fabricnet.wait_until(lambda port=port: _alive(f"http://127.0.0.1:{port}/v1/cluster"),
                                 60, what=f"the controller on REST port {port}")
        net = start(mininet, "mininet", stdin=subprocess.PIPE)

        def connected():
            docs = [_get(f"http://127.0.0.1:{p}/v1/cluster") for p in (8080, 8081)]
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
            _stop(p)
        fabricnet.cleanup()


def _alive(url: str) -> bool:
    try:
        _get(url)
        return True
    except OSError:
        return False
    except ValueError:
        return True
