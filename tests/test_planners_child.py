"""The off-path planning child dies with the controller (``controller.planners.child``): a
process that plans through ``offpath._child`` is killed with SIGKILL while its child runs,
and the child is gone within seconds instead of solving on for its whole time limit."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from controller.planners.child import PARENT_GONE
from emulation.harness.fabricnet import wait_until
from tests.helpers import alive

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# a child that would run 60 s: the stand-in for an ILP within its time limit
SLOW = ["timeit", "-n", "1", "-r", "1", "import time; time.sleep(60)"]


def slow_after_the_guard(marker: str) -> list[str]:
    """``SLOW``, touching ``marker`` first: the module runs, so the guard is set."""
    return SLOW[:-1] + ["-s", f"open({marker!r}, 'w').close()", SLOW[-1]]


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (/proc)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(name))
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG: Linux")
def test_a_child_dies_when_the_controller_is_killed_while_it_plans(tmp_path):
    marker = str(tmp_path / "planning")
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        from controller.planners.offpath import _child
        _child({slow_after_the_guard(marker)!r}, {{}}, 120.0)
        """)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kids: list[int] = []
    try:
        kids = wait_until(lambda: children(parent.pid), 15, 0.05, what="the planning child")
        assert len(kids) == 1, kids
        wait_until(lambda: os.path.exists(marker), 15, 0.05, what="the child running its module")
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        wait_until(lambda: not alive(kids[0]), 5, 0.05,
                   what="the child's end with the controller (it outlived it)")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)
        for pid in kids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_child_whose_parent_is_already_gone_does_not_start():
    """The parent named is not the parent (it died before the guard was set): exit at once."""
    out = subprocess.run([sys.executable, "-m", "controller.planners.child", "0", *SLOW],
                         cwd=REPO, capture_output=True, text=True, timeout=30)
    assert out.returncode == PARENT_GONE and "the parent 0 is gone" in out.stderr, out.stderr


def test_the_module_runs_as_python_dash_m_would():
    """Arguments and exit status pass through: ``python -m json.tool`` on a file."""
    ok = subprocess.run([sys.executable, "-m", "controller.planners.child", str(os.getpid()),
                         "json.tool", "--compact", "/dev/stdin"], input='{"a": [1, 2]}',
                        cwd=REPO, capture_output=True, text=True, timeout=30)
    assert (ok.returncode, ok.stdout.strip()) == (0, '{"a":[1,2]}'), ok.stderr
    bad = subprocess.run([sys.executable, "-m", "controller.planners.child", str(os.getpid()),
                          "json.tool", "/dev/stdin"], input="{", cwd=REPO,
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "Expecting" in bad.stderr
