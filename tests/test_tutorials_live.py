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
second controller died at start ("sFlow collector cannot bind udp 127.0.0.1:6343").
"""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import urllib.request

import pytest

from emulation.harness import fabricnet
from tests.integration import EXTENDED, require_root_and_ovs
from tests.test_docs import REPO, _blocks

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
PAGE = os.path.join(REPO, "docs", "tutorials", "redundant-controllers.md")
TUTORIALS = os.path.join(REPO, "docs", "tutorials")
VENV_BIN = os.path.join(REPO, ".venv", "bin")


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


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
            _stop_group(p, signal.SIGTERM)
        fabricnet.cleanup()


def _alive(url: str) -> bool:
    try:
        _get(url)
        return True
    except OSError:
        return False
    except ValueError:
        return True


def _group_alive(proc: subprocess.Popen) -> bool:
    proc.poll()  # reap the leader, or a dead leader would count as alive
    try:
        os.killpg(proc.pid, 0)
        return True
    except ProcessLookupError:
        return False


def _stop_group(proc: subprocess.Popen, first=signal.SIGINT, grace: float = 60) -> None:
    """Stop a process started in a session of its own and everything it started (make's
    recipe, the shell of a block, a runner and its cleanup): Ctrl-C as a user would press it,
    with time for the cleanup that triggers (a demo stops its controller and Mininet), then
    SIGTERM and SIGKILL. Waits until the whole process group is gone."""
    for sig, wait in ((first, grace), (signal.SIGTERM, 15), (signal.SIGKILL, 10)):
        if not _group_alive(proc):
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            fabricnet.wait_until(lambda: not _group_alive(proc), wait, interval=0.2,
                                 what=f"process group {proc.pid} gone")
        except TimeoutError:
            continue
    if proc.poll() is None:
        proc.wait(timeout=10)


def _unsudo(cmd: str) -> str:
    """A leading ``sudo`` is dropped when already root (CI's machines have no sudo)."""
    return re.sub(r"^sudo\s+", "", cmd.strip()) if os.geteuid() == 0 else cmd


def _venv_env(**extra) -> dict:
    """The environment of a reader with the venv active (``source .venv/bin/activate``)."""
    return dict(os.environ, VIRTUAL_ENV=os.path.dirname(VENV_BIN),
                PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""), **extra)


def _checkout(tmp_path) -> str:
    """A folder of links to the checkout, so that the files a tutorial writes stay out of it."""
    work = tmp_path / "repo"
    work.mkdir()
    for name in (".venv", "controller", "topologies", "emulation", "examples", "Makefile",
                 "requirements.txt", "requirements-osken.txt", "setup.cfg", "setup.py"):
        os.symlink(os.path.join(REPO, name), work / name)
    return str(work)


def _run(body: str, cwd: str, env: dict, timeout: float) -> str:
    """A block as a reader runs it in a terminal: bash, stop at the first failure."""
    p = subprocess.Popen(["bash", "-euo", "pipefail", "-c", _unsudo(body)], cwd=cwd, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    finally:  # a timeout or Ctrl-C: the block's processes stop and clean up first
        if _group_alive(p):
            _stop_group(p)
    assert p.returncode == 0, f"{body}\n--- stdout:\n{out[-2000:]}\n--- stderr:\n{err[-3000:]}"
    return out


def _log_has(path, text: str):
    return text in path.read_text() if path.exists() else False


def _launcher(work: str, env: dict, logs, procs: list):
    """``start(cmd, name)``: a tutorial's command in a session of its own, logged to
    ``logs/name.log`` and noted in ``procs`` with the signal that stops it first."""
    def start(cmd: str, name: str, first=signal.SIGINT, **kw) -> subprocess.Popen:
        out = open(logs / f"{name}.log", "w")
        p = subprocess.Popen(["bash", "-c", _unsudo(cmd)], cwd=work, env=env, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True, **kw)
        procs.append((p, first))
        return p
    return start


def _prepared(tmp_path, blocks) -> tuple[str, dict, object]:
    """(checkout, environment, log folder) of a tutorial run, its no-root blocks run first
    (they write the files the live steps read), no bridges left from an earlier run."""
    work = _checkout(tmp_path)
    env = _venv_env()
    logs = tmp_path / "logs"
    logs.mkdir()
    for title, body in blocks:
        if not title.startswith("Needs"):
            _run(body, work, env, 300)
    fabricnet.cleanup()
    return work, env, logs


def _mininet_pingall(start, cmd: str, logs, timeout: float) -> subprocess.Popen:
    """The page's Mininet command with ``pingall`` fed to its prompt; every ping answered.
    Mininet's prompt survives Ctrl-C: SIGTERM stops it if the test ends early."""
    net = start(cmd, "mininet", first=signal.SIGTERM, stdin=subprocess.PIPE)
    net.stdin.write(b"pingall\n")
    net.stdin.flush()
    fabricnet.wait_until(lambda: _log_has(logs / "mininet.log", "Results:"), timeout,
                         what="Mininet's pingall")
    assert "Results: 0% dropped" in (logs / "mininet.log").read_text()
    return net


def test_first_route_tutorial_runs_as_written(tmp_path):
    require_root_and_ovs()
    blocks = _blocks(os.path.join(TUTORIALS, "first-route.md"))
    live = [(t, b) for t, b in blocks if t.startswith("Needs")]
    assert [b.split()[0] for _t, b in live] == ["make", "sudo", "python", "make"], live
    controller, mininet, third, demo = (b for _t, b in live)
    assert controller.strip() == "make controller" and demo.strip() == "make demo"
    work, env, logs = _prepared(tmp_path, blocks)
    procs = []
    start = _launcher(work, env, logs, procs)

    try:
        ctl = start(controller, "controller")
        fabricnet.wait_until(lambda: _alive("http://127.0.0.1:8080/v1/jobs"), 120,
                             what="the controller's REST port 8080 (make controller)")
        net = _mininet_pingall(start, mininet, logs, 180)
        out = _run(third, work, env, 180)
        assert "ring0" in out and '"links"' in out, out[-2000:]  # job show, then curl
        view = _get("http://127.0.0.1:8080/v1/jobs/ring0")
        assert len(view["routes"]) == 8 and all(r.get("spine") for r in view["routes"])
        assert _get("http://127.0.0.1:8080/v1/links")["summary"]["max_link_load"] == 1
        # the page: stop the controller (Ctrl-C) and leave Mininet (exit) before make demo
        net.stdin.write(b"exit\n")
        net.stdin.close()
        net.wait(timeout=120)
        _stop_group(ctl)
        assert ctl.returncode is not None
        fabricnet.cleanup()
        out = _run(demo, work, env, 900)
        assert "faster than ECMP" in out, out[-3000:]
        assert os.path.exists(os.path.join(work, "results", "demo", "summary.json"))
    finally:
        for p, first in reversed(procs):  # Mininet, then the controller, then the bridges
            _stop_group(p, first)
        fabricnet.cleanup()


def test_three_tier_tutorial_runs_as_written(tmp_path):
    require_root_and_ovs()
    blocks = _blocks(os.path.join(TUTORIALS, "three-tier.md"))
    live = [(t, b) for t, b in blocks if t.startswith("Needs")]
    assert [b.split()[0] for _t, b in live] == [".venv/bin/mlroute-controller", "sudo",
                                                "python"], live
    controller, mininet, third = (b for _t, b in live)
    work, env, logs = _prepared(tmp_path, blocks)
    procs = []
    start = _launcher(work, env, logs, procs)

    try:
        start(controller, "controller")
        fabricnet.wait_until(lambda: _alive("http://127.0.0.1:8080/v1/jobs"), 120,
                             what="the controller's REST port 8080")
        net = _mininet_pingall(start, mininet, logs, 240)
        out = _run(third, work, env, 180)
        assert "ring0" in out and '"tier": "core"' in out, out[-2000:]
        view = _get("http://127.0.0.1:8080/v1/jobs/ring0")
        assert len(view["routes"]) == 8 and all(len(r["path"]) == 5 for r in view["routes"])
        assert _get("http://127.0.0.1:8080/v1/links")["summary"]["max_link_load"] == 1
        net.stdin.write(b"exit\n")
        net.stdin.close()
        net.wait(timeout=120)
    finally:
        for p, first in reversed(procs):  # Mininet, then the controller, then the bridges
            _stop_group(p, first)
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
            _run(body, str(tmp_path), _venv_env(), 120)
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
            out = _run(show, str(tmp_path), _venv_env(CTL="127.0.0.1"), 60)
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
                _stop_group(p, signal.SIGTERM)
    out = _run(collectives, REPO, _venv_env(), 900)
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    assert [l["scenario"] for l in lines] == ["ecmp", "correct", "rank_order"], out
    assert all(l["sums_ok"] for l in lines), out


def _has_job(s, jid) -> bool:
    return any(j.get("id") == jid for j in s.ctl.client.jobs()["jobs"])

