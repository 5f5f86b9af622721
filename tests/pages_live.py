"""Shared by the tests that run the manual's pages as written against a live controller
(tests/test_tutorials_live.py, tests/test_howto_live.py): a page's blocks run as a reader runs
them in a terminal, in a folder of links to the checkout, with the venv active; a ``sudo`` that
begins a line is dropped when already root (CI's machines have no sudo). Every process is started in
a session of its own and stopped by its process group; every wait has a timeout."""
import json
import os
import re
import signal
import subprocess
import urllib.request

from emulation.harness import fabricnet
from tests.test_docs import REPO

VENV_BIN = os.path.join(REPO, ".venv", "bin")


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def answering(url: str) -> bool:
    """Something answers HTTP at ``url`` (an answer that is not JSON counts)."""
    try:
        get_json(url)
        return True
    except OSError:
        return False
    except ValueError:
        return True


def group_alive(proc: subprocess.Popen) -> bool:
    proc.poll()  # reap the leader, or a dead leader would count as alive
    try:
        os.killpg(proc.pid, 0)
        return True
    except ProcessLookupError:
        return False


def stop_group(proc: subprocess.Popen, first=signal.SIGINT, grace: float = 60) -> None:
    """Stop a process started in a session of its own and everything it started (make's
    recipe, the shell of a block, a runner and its cleanup): Ctrl-C as a user would press it,
    with time for the cleanup that triggers (a demo stops its controller and Mininet), then
    SIGTERM and SIGKILL. Waits until the whole process group is gone."""
    for sig, wait in ((first, grace), (signal.SIGTERM, 15), (signal.SIGKILL, 10)):
        if not group_alive(proc):
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            fabricnet.wait_until(lambda: not group_alive(proc), wait, interval=0.2,
                                 what=f"process group {proc.pid} gone")
        except TimeoutError:
            continue
    if proc.poll() is None:
        proc.wait(timeout=10)


def unsudo(cmd: str) -> str:
    """A ``sudo`` that begins a line is dropped when already root (CI's machines have no
    sudo); a block may start with a comment (``# in a second terminal``)."""
    return re.sub(r"^([ \t]*)sudo[ \t]+", r"\1", cmd.strip(), flags=re.M) \
        if os.geteuid() == 0 else cmd


def venv_env(**extra) -> dict:
    """The environment of a reader with the venv active (``source .venv/bin/activate``)."""
    return dict(os.environ, VIRTUAL_ENV=os.path.dirname(VENV_BIN),
                PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""), **extra)


def checkout(tmp_path) -> str:
    """A folder of links to the checkout, so that the files a page writes stay out of it."""
    work = tmp_path / "repo"
    work.mkdir()
    for name in (".venv", "controller", "topologies", "emulation", "examples", "Makefile",
                 "requirements.txt", "requirements-osken.txt", "setup.cfg", "setup.py"):
        os.symlink(os.path.join(REPO, name), work / name)
    return str(work)


def run_block(body: str, cwd: str, env: dict, timeout: float) -> str:
    """A block as a reader runs it in a terminal: bash, stop at the first failure."""
    p = subprocess.Popen(["bash", "-euo", "pipefail", "-c", unsudo(body)], cwd=cwd, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    finally:  # a timeout or Ctrl-C: the block's processes stop and clean up first
        if group_alive(p):
            stop_group(p)
    assert p.returncode == 0, f"{body}\n--- stdout:\n{out[-2000:]}\n--- stderr:\n{err[-3000:]}"
    return out


def log_has(path, text: str):
    return text in path.read_text() if path.exists() else False


def launcher(work: str, env: dict, logs, procs: list):
    """``start(cmd, name)``: a page's command in a session of its own, logged to
    ``logs/name.log`` and noted in ``procs`` with the signal that stops it first."""
    def start(cmd: str, name: str, first=signal.SIGINT, **kw) -> subprocess.Popen:
        out = open(logs / f"{name}.log", "w")
        p = subprocess.Popen(["bash", "-c", unsudo(cmd)], cwd=work, env=env, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True, **kw)
        procs.append((p, first))
        return p
    return start


def prepared(tmp_path, blocks) -> tuple[str, dict, object]:
    """(checkout, environment, log folder) of a page's run, its no-root blocks run first
    (they write the files the live steps read), no bridges left from an earlier run. The
    cleanup comes first: it marks this process as the harness's (``owned.claim``), so the
    page's commands, started with its environment, leave nothing unmarked."""
    fabricnet.cleanup()
    work = checkout(tmp_path)
    env = venv_env()
    logs = tmp_path / "logs"
    logs.mkdir()
    for title, body in blocks:
        if not title.startswith("Needs"):
            run_block(body, work, env, 300)
    return work, env, logs


def mininet_pingall(start, cmd: str, logs, timeout: float) -> subprocess.Popen:
    """The page's Mininet command with ``pingall`` fed to its prompt; every ping answered.
    Mininet's prompt survives Ctrl-C: SIGTERM stops it if the test ends early."""
    net = start(cmd, "mininet", first=signal.SIGTERM, stdin=subprocess.PIPE)
    net.stdin.write(b"pingall\n")
    net.stdin.flush()
    fabricnet.wait_until(lambda: log_has(logs / "mininet.log", "Results:"), timeout,
                         what="Mininet's pingall")
    assert "Results: 0% dropped" in (logs / "mininet.log").read_text()
    return net


def leave_mininet(net: subprocess.Popen) -> None:
    """``exit`` at Mininet's prompt: it stops the fabric and returns."""
    net.stdin.write(b"exit\n")
    net.stdin.close()
    net.wait(timeout=120)
